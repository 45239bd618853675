//! Memory of the per-caller rate limiter over 100 000 distinct callers: RSS before, after the
//! keys arrive, after pruning, and over ten more waves of 100 000 new callers with a prune
//! between waves (the figure must stay flat).
//!
//! ```text
//! cargo bench --bench limiter_memory
//! ```
//!
//! RSS comes from `/proc/self/statm` (Linux; 4 KiB pages). Time is moved by hand with
//! governor's `FakeRelativeClock`, so the run takes no real minute.

use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::time::Duration;

use agent_mcp::layers::rate_limit::{CallerKey, CallerLimiter};
use governor::clock::FakeRelativeClock;

const KEYS: u32 = 100_000;
const PAGE_KIB: u64 = 4;

fn rss_kib() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * PAGE_KIB)
}

fn show(label: &str, limiter: &CallerLimiter<FakeRelativeClock>) {
    let rss = rss_kib().map_or_else(|| "n/a".to_owned(), |k| format!("{k} KiB"));
    println!("{label:<44} keys {:>7}   RSS {rss:>12}", limiter.len());
}

fn wave(limiter: &CallerLimiter<FakeRelativeClock>, first: u32) {
    for i in first..first + KEYS {
        let key = CallerKey::Peer(IpAddr::V4(Ipv4Addr::from(i)));
        if limiter.check(&key).is_err() {
            println!("unexpected refusal for a new key");
        }
    }
}

fn main() {
    let clock = FakeRelativeClock::default();
    let sixty = NonZeroU32::new(60).unwrap_or(NonZeroU32::MIN);
    let limiter = CallerLimiter::with_clock(sixty, sixty, clock.clone());
    show("start", &limiter);
    wave(&limiter, 0);
    show("after 100 000 distinct callers", &limiter);
    let before_prune = rss_kib();
    // One minute (plus governor's one-interval margin) later every bucket is full again.
    clock.advance(Duration::from_secs(62));
    limiter.prune();
    show("after a minute and a prune", &limiter);
    for round in 1..=10u32 {
        wave(&limiter, round * KEYS);
        clock.advance(Duration::from_secs(62));
        limiter.prune();
        show(
            &format!("wave {round}: +100 000 new callers, pruned"),
            &limiter,
        );
    }
    if let (Some(before), Some(end)) = (before_prune, rss_kib()) {
        println!(
            "RSS after 11 pruned waves vs with 100 000 live keys: {:+} KiB (1.1 M distinct callers seen)",
            end as i64 - before as i64
        );
    }
    // Callers named by identity (token names) cost a little more per key.
    for i in 0..KEYS {
        let _ = limiter.check(&CallerKey::Identity(format!("user-{i:06}").into()));
    }
    show("100 000 named callers", &limiter);
    clock.advance(Duration::from_secs(62));
    limiter.prune();
    show("named callers pruned", &limiter);
}
