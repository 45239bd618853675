//! What this process last saw of its task store: answering, or failing and why.
//!
//! Readiness (`/readyz`) and the `agent_mcp_store_up` gauge read it instead of asking the
//! database on every hit, so a probe flood costs nothing and an outage shows the moment
//! anything saw it. A shared store feeds it from everything that talks to the database: the
//! request path (every store call), the lease heartbeat, the LISTEN connection, and a probe of
//! its own every [`PROBE_EVERY`], so an outage shows within that long even when nobody calls.
//!
//! Evidence is ordered so that a failure is not hidden by an answer that was already on its
//! way: a failure counts from when it was seen, an answer from when its question was sent. An
//! answer clears a failure only if it was sent after the failure was seen.
//!
//! ```
//! use std::time::Instant;
//! use agent_mcp::store::StoreHealth;
//!
//! let health = StoreHealth::default();
//! assert_eq!(health.status(), Ok(()));
//! let sent = Instant::now();
//! health.failed("PostgreSQL at db:5432: connection refused".into());
//! health.answered(sent); // sent before the failure was seen: it proves nothing newer
//! assert!(health.status().is_err());
//! health.answered(Instant::now());
//! assert_eq!(health.status(), Ok(()));
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a shared store asks its database whether it answers, whether or not anything
/// else does: the longest an outage goes unseen while nobody calls.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);

/// The last word on the store's health, shared by everything that talks to it; cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct StoreHealth(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    seen: Mutex<Seen>,
    /// Woken at every failure, for [`StoreHealth::next_failure`].
    failures: tokio::sync::Notify,
}

#[derive(Debug)]
struct Seen {
    /// When the question of the newest answer was sent.
    answered: Instant,
    /// The failure seen after that, with when it was seen.
    failure: Option<(Instant, String)>,
}

impl Default for StoreHealth {
    /// Answering as of now (a store is opened by talking to it).
    fn default() -> Self {
        Self(Arc::new(Shared {
            seen: Mutex::new(Seen {
                answered: Instant::now(),
                failure: None,
            }),
            failures: tokio::sync::Notify::new(),
        }))
    }
}

impl StoreHealth {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        // Every critical section leaves the state whole, so a poisoned lock holds a good one.
        self.0.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The store answered a question sent at `sent`.
    pub fn answered(&self, sent: Instant) {
        let back = {
            let mut seen = self.seen();
            seen.answered = seen.answered.max(sent);
            match &seen.failure {
                Some((at, _)) if *at < sent => seen.failure.take().is_some(),
                _ => false,
            }
        };
        if back {
            tracing::info!("the task store answers again");
        }
    }

    /// The store failed now: it could not be reached, did not answer in time, or cannot take
    /// writes. `why` is what `/readyz` shows.
    pub fn failed(&self, why: String) {
        let now = Instant::now();
        {
            let mut seen = self.seen();
            // Logged once per outage, not at every failing call.
            if seen.failure.is_none() {
                tracing::warn!(error = %why, "the task store is failing; /readyz answers 503");
            }
            seen.failure = Some((now, why));
        }
        self.0.failures.notify_waiters();
    }

    /// The failure's text once a failure is seen (at once if one is): what a check of the
    /// store may stop waiting for, since something else found out first.
    pub async fn next_failure(&self) -> String {
        loop {
            let woken = self.0.failures.notified();
            tokio::pin!(woken);
            // Registered before the status is read, so a failure in between is not missed.
            woken.as_mut().enable();
            if let Err(why) = self.status() {
                return why;
            }
            woken.await;
        }
    }

    /// `Ok` while the store answers; the newest failure's text while it does not.
    pub fn status(&self) -> Result<(), String> {
        match &self.seen().failure {
            Some((_, why)) => Err(why.clone()),
            None => Ok(()),
        }
    }

    /// Whether a question sent within `age` of now was answered (and nothing failed since).
    pub fn confirmed_within(&self, age: Duration) -> bool {
        let seen = self.seen();
        seen.failure.is_none() && seen.answered.elapsed() <= age
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_sent_after_the_failure_clears_it_and_an_older_one_does_not() {
        let health = StoreHealth::default();
        let before = Instant::now();
        health.failed("down".into());
        let after = Instant::now();
        // (answer sent at, status after it)
        for (step, (sent, want)) in [
            (before, Err("down".to_owned())),
            (after, Ok(())),
            (before, Ok(())),
        ]
        .into_iter()
        .enumerate()
        {
            health.answered(sent);
            assert_eq!(health.status(), want, "step {step}");
        }
    }

    #[tokio::test]
    async fn a_wait_for_the_next_failure_ends_when_one_is_seen_elsewhere() {
        let health = StoreHealth::default();
        let waiting = tokio::spawn({
            let health = health.clone();
            async move { health.next_failure().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        // From another thread, as the heartbeat's.
        let elsewhere = health.clone();
        std::thread::spawn(move || elsewhere.failed("refused".into()))
            .join()
            .expect("the failing thread");
        let why = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .expect("the waiter");
        assert_eq!(why, "refused");
        // Already failing: at once.
        assert_eq!(health.next_failure().await, "refused");
    }

    #[test]
    fn the_newest_failure_is_the_one_shown_and_confirmation_ages() {
        let health = StoreHealth::default();
        assert!(health.confirmed_within(Duration::from_secs(60)));
        health.failed("refused".into());
        health.failed("timed out".into());
        assert_eq!(health.status(), Err("timed out".to_owned()));
        assert!(!health.confirmed_within(Duration::from_secs(60)));
        health.answered(Instant::now());
        assert!(health.confirmed_within(Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(5));
        assert!(!health.confirmed_within(Duration::from_millis(1)));
    }
}
