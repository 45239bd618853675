//! [`BodyBudget`]: one budget of buffered request-body bytes shared by every connection, so
//! what the server holds in memory for bodies it is reading is bounded whatever the peers do.
//!
//! Every body is read whole before it is parsed (a JSON-RPC message is one value), so a
//! peer that sends a body just short of `http.max_body_bytes` and waits holds that much
//! memory for `http.body_timeout`. The cap per body bounds one peer; this bounds them all:
//! before the edge reads more of a body than its first [`FREE_BYTES`], it takes that many
//! bytes from the budget (the whole `Content-Length` at once when one is declared, else frame
//! by frame), and gives them back when the request has been answered. A body that cannot get
//! its bytes before its deadline is answered 503 with `Retry-After`, and the bytes it did not
//! get were never read off the socket (they wait in the kernel's buffers, not in ours).
//!
//! The first [`FREE_BYTES`] of every body are not counted, so small requests (status polls,
//! listings: nearly all traffic) never wait behind large uploads; the connection cap bounds
//! what that allowance can add up to.
//!
//! The test `a_reservation_is_given_back_when_dropped` below shows a budget in use.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The bytes of every body that are not counted against the budget.
pub const FREE_BYTES: usize = 64 * 1024;

/// The budget counts in units of this many bytes (a semaphore's permits are a `u32` per
/// acquire, so bytes would cap one body at 4 GiB).
const UNIT: usize = 1024;

/// Bytes of request bodies being read or handled, across all connections. Cheap to clone;
/// clones share the budget.
#[derive(Clone, Debug)]
pub struct BodyBudget {
    units: Arc<Semaphore>,
    total: usize,
}

/// Bytes taken from a [`BodyBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
    /// Bytes this reservation covers, [`FREE_BYTES`] included.
    covers: usize,
}

impl BodyBudget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: usize) -> Self {
        let units = bytes.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            units: Arc::new(Semaphore::new(units)),
            total: units * UNIT,
        }
    }

    /// The budget in bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes now taken by bodies being read or handled.
    pub fn in_use(&self) -> usize {
        (self.total / UNIT).saturating_sub(self.units.available_permits()) * UNIT
    }

    /// Takes what a body of `bytes` needs beyond `FREE_BYTES`, waiting for it until
    /// `deadline`; `None` if it did not come in time (or can never fit the budget).
    pub(crate) async fn reserve(&self, bytes: usize, deadline: Instant) -> Option<Reservation> {
        let mut reservation = Reservation {
            permit: None,
            covers: FREE_BYTES,
        };
        self.grow(&mut reservation, bytes, deadline).await?;
        Some(reservation)
    }

    /// Makes `reservation` cover `bytes` (it may already), waiting until `deadline`.
    pub(crate) async fn grow(
        &self,
        reservation: &mut Reservation,
        bytes: usize,
        deadline: Instant,
    ) -> Option<()> {
        if bytes <= reservation.covers {
            return Some(());
        }
        let more = (bytes - reservation.covers).div_ceil(UNIT);
        let units = u32::try_from(more).ok()?;
        if more > self.total / UNIT {
            return None;
        }
        let permit =
            tokio::time::timeout_at(deadline, self.units.clone().acquire_many_owned(units))
                .await
                .ok()?
                .ok()?;
        reservation.covers += more * UNIT;
        match &mut reservation.permit {
            Some(held) => held.merge(permit),
            None => reservation.permit = Some(permit),
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_reservation_is_given_back_when_dropped() {
        let budget = BodyBudget::new(10 << 20);
        let deadline = Instant::now() + Duration::from_millis(50);
        let held = budget.reserve(8 << 20, deadline).await.expect("fits");
        assert!(
            budget.reserve(8 << 20, deadline).await.is_none(),
            "over the budget: waits, then gives up"
        );
        drop(held);
        assert!(budget.reserve(8 << 20, deadline).await.is_some());
    }

    #[tokio::test]
    async fn small_bodies_are_free_and_large_ones_share_the_budget() {
        let budget = BodyBudget::new(1 << 20);
        let soon = || Instant::now() + Duration::from_millis(30);
        // Free: any number of small bodies at once.
        let small: Vec<_> =
            futures_util::future::join_all((0..100).map(|_| budget.reserve(FREE_BYTES, soon())))
                .await;
        assert!(small.iter().all(Option::is_some));
        assert_eq!(budget.in_use(), 0);
        // A body larger than the whole budget never fits.
        assert!(
            budget
                .reserve(FREE_BYTES + (2 << 20), soon())
                .await
                .is_none()
        );
        // Grown frame by frame, up to the budget, then it waits and gives up.
        let mut held = budget.reserve(0, soon()).await.unwrap();
        for n in 1..=16 {
            let want = FREE_BYTES + n * 64 * 1024;
            assert!(budget.grow(&mut held, want, soon()).await.is_some(), "{n}");
        }
        assert_eq!(budget.in_use(), 1 << 20);
        assert!(
            budget
                .grow(&mut held, FREE_BYTES + (1 << 20) + 1, soon())
                .await
                .is_none()
        );
        // A waiter gets the bytes once they are given back.
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move {
                budget
                    .reserve(FREE_BYTES + 4096, Instant::now() + Duration::from_secs(10))
                    .await
                    .is_some()
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert!(waiter.await.unwrap());
        assert_eq!(budget.in_use(), 0);
    }
}
