//! The claim a task runs under, as the runner sees it: asked before every model and tool call,
//! so an instance that may have lost its task (a freeze, a partition) finds out before it
//! calls anything, and read when the task stops, to tell a lost claim from a cancellation.
//!
//! With a store that one process owns there is no claim: every call may go ahead. With a
//! shared store it is the task's [`Lease`]; when the lease is lost the store's heartbeat also
//! fires the task's cancellation token (see [`crate::agent::worker::shared_loop`]), which stops the model stream,
//! tool calls and commands already running.

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::AgentCore;
use crate::store::{Lease, LeaseLoss};

#[derive(Clone, Debug, Default)]
pub(crate) struct TaskClaim(Option<Lease>);

impl TaskClaim {
    /// The claim on task `id` this process holds, if its store has claims.
    pub fn of(core: &AgentCore, id: Uuid) -> Self {
        Self(core.store.shared().and_then(|s| s.lease(id)))
    }

    /// Whether the next call may start: no claim to lose, or a lease surely still this
    /// process's (this may wait for a renewal; see [`Lease::confirm`]). `false` also when
    /// `cancel` fires meanwhile.
    pub async fn may_call(&self, cancel: &CancellationToken) -> bool {
        let Some(lease) = &self.0 else {
            return !cancel.is_cancelled();
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => false,
            confirmed = lease.confirm() => confirmed.is_ok(),
        }
    }

    /// Why the claim is lost, if it is.
    pub fn loss(&self) -> Option<LeaseLoss> {
        self.0.as_ref().and_then(Lease::loss)
    }
}
