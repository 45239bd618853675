//! The worker when the store is shared by several instances ([`crate::store::SharedQueue`]):
//! the database hands out the next task, this process holds it by a lease the store renews
//! (and stops the task when it cannot: [`crate::store::Lease`]), and announcements from other
//! instances (new work, cancel requests, changed tasks) reach the worker and the waiters here.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use uuid::Uuid;

use crate::agent::{AgentCore, after_task, runner};
use crate::store::{Claim, SharedEvent};

/// The slow poll of an idle worker, the backstop of a missed wake-up notification.
const IDLE_POLL: Duration = Duration::from_secs(5);
/// Wait after a failed claim (the database is unreachable).
const RETRY: Duration = Duration::from_secs(1);

/// Claims and runs tasks until `shutdown`.
pub(crate) async fn worker_loop(core: Arc<AgentCore>, shutdown: CancellationToken) {
    let Some(shared) = core.store.shared() else {
        return;
    };
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        // While another task holds the slot, new tasks change nothing: only its end (or its
        // lease lapsing) does. So a busy worker does not wake for every task accepted.
        let (wait, on_queued) = match shared.claim_next().await {
            Ok(Claim::Claimed(id)) => {
                run_claimed(&core, id, &shutdown).await;
                continue;
            }
            Ok(Claim::Busy(left)) => ((left + Duration::from_millis(100)).min(IDLE_POLL), false),
            Ok(Claim::Empty) => (IDLE_POLL, true),
            Err(e) => {
                warn!(error = %e, "cannot claim a task; will retry");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(RETRY) => {}
                }
                continue;
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = core.wake_queued.notified(), if on_queued => {}
            () = core.wake_freed.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

async fn run_claimed(core: &Arc<AgentCore>, id: Uuid, shutdown: &CancellationToken) {
    let Some(shared) = core.store.shared() else {
        return;
    };
    info!(task_id = %id, "task claimed");
    let token = shutdown.child_token();
    // The store's heartbeat renews the lease from now on. When it cannot (or the database
    // says the task is gone), it fires this token from its own thread: the model stream, tool
    // calls and commands stop, and the runner, finding the claim lost, writes nothing.
    match shared.lease(id) {
        Some(lease) => lease.stop_on_loss(token.clone()),
        None => warn!(task_id = %id, "claimed, but the store holds no lease for it"),
    }
    *core.running_slot() = Some((id, token.clone()));
    // Claimed from the database: accepted here or by another instance, read from the store.
    runner::run_task(core, id, None, token).await;
    shared.release(id);
    after_task(core, id).await;
}

/// Turns announcements from other instances into local wake-ups, cancellations and change
/// notices, until `shutdown`.
pub(crate) async fn dispatch_events(core: Arc<AgentCore>, shutdown: CancellationToken) {
    let Some(shared) = core.store.shared() else {
        return;
    };
    let mut events = shared.events();
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.recv() => event,
        };
        match event {
            Ok(SharedEvent::Queued) => core.wake_queued.notify_one(),
            Ok(SharedEvent::Freed) => core.wake_freed.notify_one(),
            Ok(SharedEvent::Cancel(id)) => {
                if let Some((running, token)) = core.running_slot().as_ref()
                    && *running == id
                {
                    token.cancel();
                }
            }
            Ok(SharedEvent::Changed(id)) => core.notify_task_changed(id),
            Ok(SharedEvent::Resync) | Err(RecvError::Lagged(_)) => {
                core.changes.send_modify(|n| *n = n.wrapping_add(1));
                core.wake_queued.notify_one();
                core.wake_freed.notify_one();
            }
            Err(RecvError::Closed) => return,
        }
    }
}
