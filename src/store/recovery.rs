//! What happens to stored tasks when the process starts and while it runs: tasks a crash
//! interrupted end `failed`, and terminal tasks older than `store.retention` are purged.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{StoreError, TaskStore};
use crate::task::{Task, TaskState};

/// The result of a task that was planning or running when the process stopped.
pub const INTERRUPTED_BY_RESTART: &str = "Interrupted by a restart: agent-mcp stopped while this \
task was running, so it did not finish. Send the request again with agent_run (pass the same \
session_id to keep the conversation).";

/// The result of a task whose instance stopped renewing its lease (it died, or lost the
/// database) while the task was planning or running; another instance ended it.
pub const INTERRUPTED_INSTANCE_LOST: &str = "Interrupted: the agent-mcp instance running this \
task stopped answering (its lease lapsed), so it did not finish. Send the request again with \
agent_run (pass the same session_id to keep the conversation).";

/// [`INTERRUPTED_BY_RESTART`], saying what a task that waited for approval asked: the action
/// was not run, and is not asked again.
pub fn interrupted_result(task: &Task) -> String {
    let mut text = INTERRUPTED_BY_RESTART.to_owned();
    for request in &task.input.pending {
        text.push_str(&format!(
            " It was waiting for approval of {} ({}), which was not run.",
            request.tool, request.summary
        ));
    }
    text
}

/// Ends every task left `planning` or `running` as `failed` with [`INTERRUPTED_BY_RESTART`]
/// (and what it waited for approval of, if it did: see [`interrupted_result`]).
/// Call it once at start, before the worker takes tasks. Returns how many it ended.
pub async fn fail_interrupted(store: &dyn TaskStore) -> Result<usize, StoreError> {
    let mut ended = 0;
    for state in [TaskState::Planning, TaskState::Running] {
        for mut task in store.tasks_in_state(state).await? {
            let result = interrupted_result(&task);
            if task.fail(result) {
                store.update_task(&task).await?;
                warn!(task_id = %task.id, was = %state, "task interrupted by a restart ends failed");
                ended += 1;
            }
        }
    }
    Ok(ended)
}

/// How often the purge runs: often enough that a task outlives its retention by at most a
/// small fraction of it, at most hourly, and never in a busy loop.
fn purge_interval(retention: Duration) -> Duration {
    (retention / 24).clamp(Duration::from_secs(1), Duration::from_secs(3600))
}

/// Purges terminal tasks older than `retention` now and then periodically, until `shutdown`.
/// A failed purge is logged and retried at the next tick; it never stops the loop.
pub async fn purge_expired_periodically(
    store: Arc<dyn TaskStore>,
    retention: Duration,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval(purge_interval(retention));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shutdown.cancelled() => return,
        }
        // A clock before the epoch + retention has nothing old enough to purge.
        let Some(cutoff) = SystemTime::now().checked_sub(retention) else {
            continue;
        };
        match store.purge_finished(cutoff).await {
            Ok(0) => {}
            Ok(n) => info!(purged = n, "purged tasks past store.retention"),
            Err(e) => warn!(error = %e, "cannot purge old tasks; will retry"),
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::store::MemoryStore;
    use crate::task::Task;

    #[tokio::test]
    async fn running_and_planning_tasks_fail_queued_ones_stay() {
        let store = MemoryStore::new();
        let mut ids = Vec::new();
        for state in [TaskState::Queued, TaskState::Planning, TaskState::Running] {
            let mut t = Task::new(Uuid::new_v4(), None, "r".into(), None);
            t.transition(state);
            store.insert_task(&t).await.unwrap();
            ids.push(t.id);
        }
        assert_eq!(fail_interrupted(&store).await.unwrap(), 2);
        let queued = store.task(ids[0]).await.unwrap().unwrap();
        assert_eq!(queued.state, TaskState::Queued);
        for id in &ids[1..] {
            let t = store.task(*id).await.unwrap().unwrap();
            assert_eq!(t.state, TaskState::Failed);
            assert_eq!(t.result, INTERRUPTED_BY_RESTART);
        }
    }

    #[test]
    fn purge_interval_is_bounded() {
        assert_eq!(
            purge_interval(Duration::from_secs(7 * 86400)),
            Duration::from_secs(3600)
        );
        assert_eq!(purge_interval(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            purge_interval(Duration::from_secs(240)),
            Duration::from_secs(10)
        );
    }
}
