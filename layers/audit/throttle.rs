//! [`RefusalThrottle`]: refusals stay in the audit log, but one peer cannot fill it with them.
//!
//! A refused request (no valid token, over a rate limit) is worth a line: it is how an
//! operator sees someone knocking. Yet a peer can send thousands a second, each costing the
//! server nothing but the line. So each peer (its IP address; an IPv6 peer by its /64, which
//! one host usually holds whole) may have [`BURST`] refusal lines at once and [`PER_MINUTE`]
//! more a minute; past that its refusals are counted instead. The next line written for that
//! peer carries `"suppressed": n`, the refusals left out since its previous line, and counts
//! still open after a minute (or at shutdown) are written as one
//! `{"event": "refusals_suppressed", "peer": …, "count": n}` line per peer. Nothing is lost
//! from the record but the repetition; `agent_mcp_audit_refusals_suppressed_total` counts it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use governor::{Quota, RateLimiter};

/// Refusal lines one peer may have written at once.
pub const BURST: u32 = 20;
/// Refusal lines one peer may have written per minute after the burst.
pub const PER_MINUTE: u32 = 10;
/// How often open counts are written out (and the per-peer state pruned).
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The `agent_mcp_audit_refusals_suppressed_total` counter.
pub const REFUSALS_SUPPRESSED: &str = "agent_mcp_audit_refusals_suppressed_total";

/// Who a refusal is counted against: an IPv4 address, an IPv6 /64, or the local caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerKey {
    V4(std::net::Ipv4Addr),
    /// The first 64 bits of the address.
    V6Prefix(u64),
    Local,
}

impl PeerKey {
    pub fn of(peer: Option<SocketAddr>) -> PeerKey {
        match peer.map(|p| p.ip()) {
            None => PeerKey::Local,
            Some(IpAddr::V4(v4)) => PeerKey::V4(v4),
            Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey::V4(v4),
                None => PeerKey::V6Prefix((v6.to_bits() >> 64) as u64),
            },
        }
    }

    /// How the key is written in a summary line: the address, or the /64.
    pub fn shown(&self) -> String {
        match self {
            PeerKey::V4(v4) => v4.to_string(),
            PeerKey::V6Prefix(prefix) => {
                format!("{}/64", Ipv6Addr::from_bits(u128::from(*prefix) << 64))
            }
            PeerKey::Local => "local".to_owned(),
        }
    }
}

type Limiter = RateLimiter<
    PeerKey,
    governor::state::keyed::DefaultKeyedStateStore<PeerKey>,
    governor::clock::DefaultClock,
>;

/// The per-peer budget of refusal lines (see the module docs), shared by every clone of the
/// audit layer.
#[derive(Debug)]
pub struct RefusalThrottle {
    limiter: Limiter,
    suppressed: Mutex<HashMap<PeerKey, u64>>,
    started: Instant,
    /// Milliseconds after `started` of the last sweep.
    swept_ms: AtomicU64,
}

/// What to do with one refusal line.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write it; `suppressed` refusals of this peer were left out since its last line.
    Write { suppressed: u64 },
    /// Count it, do not write it.
    Suppress,
}

impl Default for RefusalThrottle {
    fn default() -> Self {
        let nz = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(nz(PER_MINUTE)).allow_burst(nz(BURST))),
            suppressed: Mutex::default(),
            started: Instant::now(),
            swept_ms: AtomicU64::new(0),
        }
    }
}

impl RefusalThrottle {
    fn counts(&self) -> MutexGuard<'_, HashMap<PeerKey, u64>> {
        self.suppressed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a refusal from `peer` is written.
    pub fn refusal(&self, peer: Option<SocketAddr>) -> Verdict {
        let key = PeerKey::of(peer);
        if self.limiter.check_key(&key).is_ok() {
            let suppressed = self.counts().remove(&key).unwrap_or(0);
            return Verdict::Write { suppressed };
        }
        *self.counts().entry(key).or_insert(0) += 1;
        metrics::counter!(REFUSALS_SUPPRESSED).increment(1);
        Verdict::Suppress
    }

    /// The counts still open, when a sweep is due (once per [`SWEEP_EVERY`], for one caller);
    /// `force` takes them now (shutdown).
    pub fn sweep(&self, force: bool) -> Vec<(PeerKey, u64)> {
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.swept_ms.load(Ordering::Relaxed);
        let due = now_ms.saturating_sub(last) >= SWEEP_EVERY.as_millis() as u64;
        let take = force
            || (due
                && self
                    .swept_ms
                    .compare_exchange(last, now_ms, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok());
        if !take {
            return Vec::new();
        }
        self.limiter.retain_recent();
        let mut open: Vec<(PeerKey, u64)> = self.counts().drain().collect();
        open.sort_by_key(|(key, _)| key.shown());
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flooding_peer_gets_its_burst_then_counts_and_others_are_untouched() {
        let throttle = RefusalThrottle::default();
        let flooder: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let written = (0..5000)
            .filter(|_| matches!(throttle.refusal(Some(flooder)), Verdict::Write { .. }))
            .count();
        // The burst, and maybe one more cell that came back while the loop ran.
        assert!(
            (BURST as usize..=BURST as usize + 1).contains(&written),
            "{written}"
        );
        let other: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        assert_eq!(
            throttle.refusal(Some(other)),
            Verdict::Write { suppressed: 0 }
        );
        let open = throttle.sweep(true);
        assert_eq!(
            open,
            vec![(PeerKey::of(Some(flooder)), 5000 - written as u64)]
        );
        assert!(throttle.sweep(true).is_empty(), "a sweep takes the counts");
    }

    #[test]
    fn ipv6_peers_are_counted_by_their_64_and_mapped_v4_as_v4() {
        let a: SocketAddr = "[2001:db8:1:2::1]:1".parse().unwrap();
        let b: SocketAddr = "[2001:db8:1:2:ffff::9]:2".parse().unwrap();
        let c: SocketAddr = "[2001:db8:1:3::1]:1".parse().unwrap();
        assert_eq!(PeerKey::of(Some(a)), PeerKey::of(Some(b)));
        assert_ne!(PeerKey::of(Some(a)), PeerKey::of(Some(c)));
        assert_eq!(PeerKey::of(Some(a)).shown(), "2001:db8:1:2::/64");
        let mapped: SocketAddr = "[::ffff:10.1.2.3]:1".parse().unwrap();
        assert_eq!(PeerKey::of(Some(mapped)).shown(), "10.1.2.3");
        assert_eq!(PeerKey::of(None), PeerKey::Local);
    }
}
