//! A claim's lease as the process holding it sees it, and when that process must stop.
//!
//! A shared store ([`super::SharedQueue`]) hands a task to one process with a lease that ends
//! `store.lease` after its last renewal, on the database clock: once it has lapsed, any other
//! instance may end the task and start the next one. The database fences the writes of a
//! process whose lease lapsed, but only the process itself can stop its *work* (the model
//! stream, tool calls, commands). So it must stop before the lease can lapse, judging only by
//! what it knows: when it sent the last renewal the database confirmed. That renewal set the
//! lease to end `store.lease` after the database ran it, which is after it was sent; so the
//! lease ends no sooner than `store.lease` after that send, whatever the offset between this
//! machine's clock and the database's (only their rates matter, and those agree).
//!
//! From the last confirmed renewal, with `L = store.lease` ([`LeaseTiming`]):
//!
//! ```text
//! 0          L/6 (≤ 1 s)      L/2                 5L/6                  L
//! |-- renew --|-- renew --|-- renew ... ---|-- renew ... --|- - - - - - - - -|
//!                          new model/tool    the work is      the lease may
//!                          calls wait for    stopped (token   lapse: another
//!                          a fresh renewal   fired)           instance may act
//! ```
//!
//! The heartbeat renews every `L/6` on a thread of its own, so a busy runtime cannot starve
//! it. A call that starts without a renewal confirmed in the last `L/2` first asks for one and
//! waits for it ([`Lease::confirm`]); that is how an instance resumed after a freeze longer
//! than its lease finds out before it calls anything. At `5L/6` without a confirmed renewal,
//! the lease is given up ([`LeaseLoss::Unconfirmed`]): the tokens registered with
//! [`Lease::stop_on_loss`] fire, and the store refuses every further write of the task. The
//! last sixth of the lease is the margin for the work to wind down and for the database clock
//! to be stepped forward (it must not be stepped by more).
//!
//! ```
//! use std::time::Duration;
//! use agent_mcp::store::LeaseTiming;
//!
//! let timing = LeaseTiming::of(Duration::from_secs(3));
//! assert_eq!(timing.renew_every, Duration::from_millis(500));
//! assert_eq!(timing.fresh_for, Duration::from_millis(1500));
//! assert_eq!(timing.stop_after, Duration::from_millis(2500));
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// When a lease is renewed, and when its holder pauses and stops, from `store.lease`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// `store.lease`: how long after a renewal the database lets the lease run.
    pub lease: Duration,
    /// How often the heartbeat renews the lease (a sixth of it, at most 1 s).
    pub renew_every: Duration,
    /// A new model or tool call starts at once only within this long of the last confirmed
    /// renewal (half the lease); later it waits for a fresh renewal. Also how long one
    /// renewal may take (connecting included): a slow renewal still counts from when it was
    /// sent.
    pub fresh_for: Duration,
    /// Without a confirmed renewal for this long (five sixths of the lease) the holder gives
    /// the lease up and stops the task's work.
    pub stop_after: Duration,
}

impl LeaseTiming {
    /// The timing for a lease of `lease`: heartbeats and checks at fractions of it.
    pub fn of(lease: Duration) -> Self {
        let sixth = lease / 6;
        Self {
            lease,
            renew_every: sixth.min(Duration::from_secs(1)),
            fresh_for: lease / 2,
            stop_after: lease.saturating_sub(sixth),
        }
    }
}

/// Why this process no longer holds a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseLoss {
    /// The database refused a renewal: the lease had lapsed, or another instance ended the
    /// task meanwhile.
    #[error(
        "the database refused to renew the lease: it had lapsed, or another instance ended the task"
    )]
    TakenOver,
    /// No renewal was confirmed for this long: the database is unreachable, or this process
    /// was stalled (frozen, starved of CPU).
    #[error(
        "no renewal of the lease was confirmed for {:.1} s (the database is unreachable, or \
         this process was stalled), so the task was stopped before the lease could lapse",
        .0.as_secs_f64()
    )]
    Unconfirmed(Duration),
}

/// One claim's lease: shared by the store's heartbeat, which renews it, and the runner, which
/// asks it before each call and stops when it is lost. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Lease(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    task: Uuid,
    attempt: i32,
    timing: LeaseTiming,
    state: watch::Sender<State>,
    /// Wakes the heartbeat for a renewal now.
    renew_now: Arc<Notify>,
    /// Fired when the lease is lost.
    on_loss: Mutex<Vec<CancellationToken>>,
    /// A cancel request the heartbeat read was announced already.
    cancel_announced: AtomicBool,
    /// The loss was logged already.
    loss_reported: AtomicBool,
}

#[derive(Clone, Copy, Debug)]
struct State {
    /// When the last renewal the database confirmed was sent (the claim's, at first).
    confirmed: Instant,
    loss: Option<LeaseLoss>,
}

impl Lease {
    /// The lease of claim `attempt` on `task`, taken by a statement sent at `claimed`; a
    /// [`Lease::confirm`] that finds it stale wakes `renew_now` (the store's heartbeat).
    pub fn new(
        task: Uuid,
        attempt: i32,
        timing: LeaseTiming,
        claimed: Instant,
        renew_now: Arc<Notify>,
    ) -> Lease {
        Lease(Arc::new(Shared {
            task,
            attempt,
            timing,
            state: watch::Sender::new(State {
                confirmed: claimed,
                loss: None,
            }),
            renew_now,
            on_loss: Mutex::new(Vec::new()),
            cancel_announced: AtomicBool::new(false),
            loss_reported: AtomicBool::new(false),
        }))
    }

    /// The task claimed.
    pub fn task(&self) -> Uuid {
        self.0.task
    }

    /// The claim's attempt number, which fences its writes.
    pub fn attempt(&self) -> i32 {
        self.0.attempt
    }

    /// The lease's timing.
    pub fn timing(&self) -> LeaseTiming {
        self.0.timing
    }

    /// Why the lease is lost, if it is.
    pub fn loss(&self) -> Option<LeaseLoss> {
        self.0.state.borrow().loss
    }

    /// Fires `token` when the lease is lost (at once if it is already).
    pub fn stop_on_loss(&self, token: CancellationToken) {
        lock(&self.0.on_loss).push(token.clone());
        if self.loss().is_some() {
            token.cancel();
        }
    }

    /// Before a model or tool call: `Ok` while the lease is surely this process's. Without a
    /// renewal confirmed in the last [`LeaseTiming::fresh_for`], asks the heartbeat for one and
    /// waits for it (or for the loss).
    pub async fn confirm(&self) -> Result<(), LeaseLoss> {
        let asked = Instant::now();
        let confirmed = match self.check(asked) {
            Some(loss) => return Err(loss),
            None => self.0.state.borrow().confirmed,
        };
        if asked.saturating_duration_since(confirmed) < self.0.timing.fresh_for {
            return Ok(());
        }
        self.0.renew_now.notify_one();
        let give_up = (confirmed + self.0.timing.stop_after).saturating_duration_since(asked);
        let mut state = self.0.state.subscribe();
        let fresh = state.wait_for(|s| s.loss.is_some() || s.confirmed >= asked);
        match tokio::time::timeout(give_up, fresh).await {
            Ok(Ok(s)) => s.loss.map_or(Ok(()), Err),
            // The heartbeat gives the lease up by then; this is for a heartbeat that is gone.
            _ => Err(self
                .check(Instant::now())
                .unwrap_or(LeaseLoss::Unconfirmed(asked.elapsed()))),
        }
    }

    /// For the store's heartbeat: the database confirmed a renewal sent at `sent`.
    pub fn renewed(&self, sent: Instant) {
        self.0.state.send_if_modified(|s| {
            let newer = s.loss.is_none() && sent > s.confirmed;
            if newer {
                s.confirmed = sent;
            }
            newer
        });
    }

    /// For the store's heartbeat: gives the lease up (the first loss is the one kept) and
    /// fires the registered tokens. Returns whether this call lost it.
    pub fn lose(&self, loss: LeaseLoss) -> bool {
        let first = self.0.state.send_if_modified(|s| {
            let first = s.loss.is_none();
            if first {
                s.loss = Some(loss);
            }
            first
        });
        if first {
            for token in lock(&self.0.on_loss).iter() {
                token.cancel();
            }
        }
        first
    }

    /// Gives the lease up if no renewal was confirmed for [`LeaseTiming::stop_after`] by
    /// `now`; the loss, if it is lost.
    pub fn check(&self, now: Instant) -> Option<LeaseLoss> {
        let state = *self.0.state.borrow();
        if state.loss.is_some() {
            return state.loss;
        }
        let silent = now.saturating_duration_since(state.confirmed);
        if silent >= self.0.timing.stop_after {
            self.lose(LeaseLoss::Unconfirmed(silent));
            return self.loss();
        }
        None
    }

    /// When the lease is given up unless a renewal is confirmed first.
    pub fn stop_at(&self) -> Instant {
        self.0.state.borrow().confirmed + self.0.timing.stop_after
    }

    /// `true` the first time the loss is to be logged.
    pub(crate) fn first_loss_report(&self) -> bool {
        !self.0.loss_reported.swap(true, Ordering::AcqRel)
    }

    /// `true` the first time a cancel request for the task is seen.
    pub(crate) fn first_cancel_request(&self) -> bool {
        !self.0.cancel_announced.swap(true, Ordering::AcqRel)
    }
}

/// Every critical section is one push or one read of the list.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `l.confirm()` on a task of its own, to see whether and how it ends.
    fn confirm_in_background(l: &Lease) -> tokio::task::JoinHandle<Result<(), LeaseLoss>> {
        let l = l.clone();
        tokio::spawn(async move { l.confirm().await })
    }

    fn lease(lease: Duration, claimed: Instant) -> (Lease, Arc<Notify>) {
        let wake = Arc::new(Notify::new());
        let l = Lease::new(
            Uuid::new_v4(),
            1,
            LeaseTiming::of(lease),
            claimed,
            wake.clone(),
        );
        (l, wake)
    }

    #[test]
    fn timing_keeps_the_stop_a_sixth_of_a_lease_before_it_can_lapse() {
        let t = LeaseTiming::of(Duration::from_secs(10));
        assert_eq!(t.renew_every, Duration::from_secs(1));
        assert_eq!(t.fresh_for, Duration::from_secs(5));
        assert_eq!(
            t.stop_after,
            Duration::from_secs(10) - Duration::from_secs(10) / 6
        );
        let t = LeaseTiming::of(Duration::from_secs(3));
        assert_eq!(t.renew_every, Duration::from_millis(500));
        assert!(t.renew_every < t.fresh_for && t.fresh_for < t.stop_after);
        assert!(t.stop_after < t.lease);
    }

    #[tokio::test]
    async fn a_fresh_lease_confirms_at_once_and_a_silent_one_is_lost_at_five_sixths() {
        let now = Instant::now();
        let (l, _) = lease(Duration::from_secs(3), now);
        assert_eq!(l.confirm().await, Ok(()));
        assert_eq!(l.check(now + Duration::from_millis(2400)), None);
        let token = CancellationToken::new();
        l.stop_on_loss(token.clone());
        assert!(matches!(
            l.check(now + Duration::from_millis(2500)),
            Some(LeaseLoss::Unconfirmed(_))
        ));
        assert!(token.is_cancelled());
        // Lost for good: a late renewal does not bring it back, nor change the reason.
        l.renewed(now + Duration::from_secs(3));
        assert!(l.confirm().await.is_err());
        assert!(!l.lose(LeaseLoss::TakenOver));
        assert!(matches!(l.loss(), Some(LeaseLoss::Unconfirmed(_))));
        // A token registered after the loss fires at once.
        let late = CancellationToken::new();
        l.stop_on_loss(late.clone());
        assert!(late.is_cancelled());
    }

    /// Past half the lease a call waits for a renewal sent after it asked; an older one does
    /// not do.
    #[tokio::test]
    async fn a_stale_lease_waits_for_a_fresh_renewal() {
        let claimed = Instant::now() - Duration::from_millis(1600);
        let (l, wake) = lease(Duration::from_secs(3), claimed);
        let waiting = confirm_in_background(&l);
        // The heartbeat is asked; a renewal sent before the ask does not count.
        tokio::time::timeout(Duration::from_secs(1), wake.notified())
            .await
            .expect("the heartbeat was asked for a renewal");
        l.renewed(claimed + Duration::from_millis(100));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        l.renewed(Instant::now());
        assert_eq!(waiting.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn a_call_waiting_for_a_renewal_learns_of_the_loss() {
        let claimed = Instant::now() - Duration::from_millis(1600);
        let (l, _) = lease(Duration::from_secs(3), claimed);
        let waiting = confirm_in_background(&l);
        tokio::task::yield_now().await;
        l.lose(LeaseLoss::TakenOver);
        assert_eq!(waiting.await.unwrap(), Err(LeaseLoss::TakenOver));
    }

    /// Nobody renews (a heartbeat that is gone): the wait ends at the stop deadline, lost.
    #[tokio::test]
    async fn without_a_heartbeat_the_wait_ends_lost_at_the_stop_deadline() {
        let claimed = Instant::now() - Duration::from_millis(2300);
        let (l, _) = lease(Duration::from_secs(3), claimed);
        let started = Instant::now();
        assert!(matches!(l.confirm().await, Err(LeaseLoss::Unconfirmed(_))));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
