//! The agent core as the [`TaskBackend`] of the Tasks layer.
//!
//! It lives here, in the composition root, because it is the one place that knows both sides:
//! the core (`agent`, `store`) imports no layer, and the layer imports nothing of the core.

use std::sync::Arc;

use uuid::Uuid;

use crate::agent::AgentCore;
use crate::agent::status::{render_status, state_message};
use crate::layers::tasks::{TaskBackend, Tracked};
use crate::store::StoreError;
use crate::task::input::{Action, Answer};
use crate::task::{Task, TaskState};

/// The agent as the tasks layer's backend ([`TaskBackend`]): what
/// [`StackBuilder::tasks`](super::StackBuilder::tasks) puts under the tasks layer. Opaque: it
/// is reached through the layer, not called.
#[derive(Clone, Debug)]
pub struct AgentTasks(pub(crate) Arc<AgentCore>);

impl TaskBackend for AgentTasks {
    type Error = StoreError;

    async fn lookup(&self, id: Uuid) -> Result<Option<Tracked>, StoreError> {
        let Some(task) = self.0.store.task(id).await? else {
            return Ok(None);
        };
        let queue_position = if task.state == TaskState::Queued {
            self.0.queue_position(id).await
        } else {
            None
        };
        Ok(Some(Tracked {
            queue_position,
            task,
        }))
    }

    async fn cancel(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        self.0.cancel(id).await
    }

    async fn answer(
        &self,
        id: Uuid,
        key: String,
        action: Action,
        by: Option<String>,
    ) -> Result<bool, StoreError> {
        let answer = Answer {
            action,
            by: by.clone(),
            at: std::time::SystemTime::now(),
        };
        let recorded = self.0.store.answer_input(id, &key, &answer).await?;
        tracing::info!(
            target: "agent_mcp::approvals",
            task_id = %id,
            %key,
            action = action.as_str(),
            by = by.as_deref().unwrap_or(""),
            recorded,
            "approval answered"
        );
        if recorded {
            // The runner here wakes at once; another instance's hears the store's announcement.
            self.0.notify_task_changed(id);
        }
        Ok(recorded)
    }

    fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe_task_changes()
    }

    fn follow(&self, ids: &[Uuid]) -> crate::task::events::Follower {
        self.0.events.follow(ids)
    }

    fn result_text(&self, task: &Task) -> String {
        render_status(task, None)
    }

    fn status_text(&self, task: &Task, queue_position: Option<usize>) -> String {
        render_status(task, queue_position)
    }

    fn state_message(&self, state: TaskState, queue_position: Option<usize>) -> String {
        state_message(state, queue_position)
    }
}
