//! The local worker loop: one task at a time, FIFO from this process's queue (the shared
//! store's loop, which claims tasks from the database, is [`super::shared_loop`]).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::{AgentCore, after_task, lock, runner};

/// Takes queued tasks one at a time until `shutdown`, running each to its end.
pub(crate) async fn worker_loop(core: Arc<AgentCore>, shutdown: CancellationToken) {
    loop {
        // Shutdown first: once it is asked for, queued tasks stay queued in the store for the
        // next start instead of being taken and stopped at once.
        let next = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            next = core.queue.next() => next,
        };
        let id = next.id;
        let token = shutdown.child_token();
        {
            let mut slot = core.running_slot();
            *slot = Some((id, token.clone()));
            if lock(&core.cancel_on_arrival).remove(&id) {
                token.cancel();
            }
        }
        runner::run_task(&core, id, next.task, token).await;
        after_task(&core, id).await;
    }
}
