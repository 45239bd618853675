//! The per-caller GCRA limiter behind [`RateLimit`](super::RateLimit): a `governor` keyed
//! limiter on a `DashMap`, with periodic pruning so the key map stays bounded.

use std::borrow::Cow;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::InMemoryState;
use governor::{Quota, RateLimiter};

use crate::plugin::{RequestContext, Transport};

/// Who a request is counted against: the caller's identity (a token name, or `stdio`), else
/// the peer address of an anonymous HTTP caller (an IPv4 address; for IPv6 its /64, since one
/// host is usually given a whole /64 and could otherwise take a fresh budget per address),
/// else the local caller `stdio`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CallerKey {
    Identity(Cow<'static, str>),
    Peer(IpAddr),
}

/// The address an anonymous caller is counted by: IPv4 (also when mapped into IPv6) as it is,
/// IPv6 with all but its first 64 bits cleared.
pub fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from_bits(
                v6.to_bits() & !((1u128 << 64) - 1),
            )),
        },
    }
}

impl CallerKey {
    /// The local caller (stdio, in-process, or HTTP without a known peer).
    pub const LOCAL: CallerKey = CallerKey::Identity(Cow::Borrowed("stdio"));

    pub fn of(ctx: &RequestContext) -> CallerKey {
        if let Some(identity) = &ctx.identity {
            return CallerKey::Identity(Cow::Owned(identity.clone()));
        }
        match ctx.transport {
            Transport::Http { peer: Some(peer) } => CallerKey::Peer(peer_key(peer.ip())),
            _ => CallerKey::LOCAL,
        }
    }
}

/// governor's DashMap key store with a fast seeded hash (keys are token names and peer IPs).
type KeyStore = DashMap<CallerKey, InMemoryState, foldhash::fast::RandomState>;

/// How many calls pass between two prunes of the key map.
const DEFAULT_PRUNE_EVERY: u64 = 4096;

/// A keyed limiter: `per_minute` sustained, `burst` at once, per [`CallerKey`].
///
/// Generic over the clock so tests and benchmarks can move time by hand
/// (`governor::clock::FakeRelativeClock`).
#[derive(Debug)]
pub struct CallerLimiter<C: Clock = DefaultClock> {
    limiter: RateLimiter<CallerKey, KeyStore, C, NoOpMiddleware<C::Instant>>,
    clock: C,
    per_minute: NonZeroU32,
    calls: AtomicU64,
    prune_every: u64,
    pruning: AtomicBool,
}

impl CallerLimiter<DefaultClock> {
    pub fn new(per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        Self::with_clock(per_minute, burst, DefaultClock::default())
    }
}

impl<C: Clock + Clone> CallerLimiter<C> {
    pub fn with_clock(per_minute: NonZeroU32, burst: NonZeroU32, clock: C) -> Self {
        let quota = Quota::per_minute(per_minute).allow_burst(burst);
        Self {
            limiter: RateLimiter::new(
                quota,
                KeyStore::with_hasher(foldhash::fast::RandomState::default()),
                clock.clone(),
            ),
            clock,
            per_minute,
            calls: AtomicU64::new(0),
            prune_every: DEFAULT_PRUNE_EVERY,
            pruning: AtomicBool::new(false),
        }
    }

    /// Prune after every `calls` checks (at least 1).
    pub fn with_prune_every(mut self, calls: u64) -> Self {
        self.prune_every = calls.max(1);
        self
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute.get()
    }

    /// Takes one cell for `key`; on refusal, how long until the next one is available.
    pub fn check(&self, key: &CallerKey) -> Result<(), Duration> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// True once every `prune_every` calls, for exactly one caller (who then calls
    /// [`Self::prune`] and [`Self::prune_done`]).
    pub fn prune_due(&self) -> bool {
        self.calls.load(Ordering::Relaxed) >= self.prune_every
            && self
                .pruning
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Forgets keys whose bucket is full again (indistinguishable from a new caller) and
    /// gives the freed capacity back.
    pub fn prune(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }

    /// Ends a prune started by [`Self::prune_due`].
    pub fn prune_done(&self) {
        self.calls.store(0, Ordering::Relaxed);
        self.pruning.store(false, Ordering::Release);
    }

    /// Keys currently tracked.
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    pub fn is_empty(&self) -> bool {
        self.limiter.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
    }

    #[test]
    fn burst_then_one_per_interval_per_key() {
        let clock = FakeRelativeClock::default();
        let limiter = CallerLimiter::with_clock(nz(60), nz(3), clock.clone());
        let a = CallerKey::Identity("a".into());
        let b = CallerKey::Peer([127, 0, 0, 2].into());
        for _ in 0..3 {
            assert_eq!(limiter.check(&a), Ok(()));
        }
        assert_eq!(limiter.check(&a), Err(Duration::from_secs(1)));
        assert_eq!(limiter.check(&b), Ok(()));
        clock.advance(Duration::from_millis(400));
        assert_eq!(limiter.check(&a), Err(Duration::from_millis(600)));
        clock.advance(Duration::from_millis(600));
        assert_eq!(limiter.check(&a), Ok(()));
    }

    #[test]
    fn ipv6_callers_share_a_budget_per_64() {
        let key = |peer: &str| {
            let ctx = RequestContext::new(
                crate::plugin::ProtocolVersion::V2026_07_28,
                Transport::Http {
                    peer: Some(peer.parse().unwrap()),
                },
            );
            CallerKey::of(&ctx)
        };
        assert_eq!(key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:2:abcd::7]:9"));
        assert_ne!(key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:3::1]:1"));
        assert_eq!(key("[::ffff:10.0.0.1]:1"), key("10.0.0.1:2"));
        assert_ne!(key("10.0.0.1:1"), key("10.0.0.2:1"));
        // 250 addresses of one /64: one budget.
        let limiter = CallerLimiter::new(nz(60), nz(60));
        let refused = (0..250u32)
            .filter(|n| {
                limiter
                    .check(&key(&format!("[2001:db8::{n:x}]:1")))
                    .is_err()
            })
            .count();
        assert_eq!(refused, 250 - 60);
    }

    #[test]
    fn local_callers_share_the_stdio_key() {
        let owned = CallerKey::Identity(Cow::Owned("stdio".to_owned()));
        assert_eq!(owned, CallerKey::LOCAL);
    }

    #[test]
    fn pruning_forgets_replenished_keys() {
        let clock = FakeRelativeClock::default();
        let limiter = CallerLimiter::with_clock(nz(60), nz(60), clock.clone()).with_prune_every(10);
        for i in 0..10u32 {
            let ip = std::net::Ipv4Addr::from(i);
            assert_eq!(limiter.check(&CallerKey::Peer(ip.into())), Ok(()));
        }
        assert_eq!(limiter.len(), 10);
        assert!(limiter.prune_due());
        assert!(!limiter.prune_due(), "only one caller prunes");
        limiter.prune();
        limiter.prune_done();
        assert_eq!(limiter.len(), 10, "buckets not yet full are kept");
        // governor keeps a key one replenish interval past the moment its bucket is full.
        clock.advance(Duration::from_secs(2));
        limiter.prune();
        assert_eq!(limiter.len(), 0);
        assert!(!limiter.prune_due());
    }
}
