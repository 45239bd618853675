//! [`TaskBackend`]: what the Tasks layer needs from whoever keeps the tasks.
//!
//! The layer creates tasks by passing `agent_run` to the inner service (so validation runs as
//! for any other call) and learns the new task's id from
//! [`McpResponse::ids`](crate::plugin::McpResponse::ids); everything else it asks of the
//! backend: read a task with its queue position, cancel one, wake when a task changes, and the
//! texts a task is shown with.

use std::fmt::Display;
use std::future::Future;

use tokio::sync::watch;
use uuid::Uuid;

use crate::plugin::Follower;
use crate::plugin::task::input::Action;
use crate::plugin::{Task, TaskState};

/// A task as the backend holds it now, with its place in the queue.
#[derive(Clone, Debug)]
pub struct Tracked {
    pub task: Task,
    /// 1-based position while queued; `None` once the task has left the queue.
    pub queue_position: Option<usize>,
}

/// The task store and queue behind [`TasksLayer`](super::TasksLayer), implemented by the agent
/// core (and, in the layer's unit tests, by a small in-memory map).
///
/// Whether a caller may see a task is the layer's rule ([`Task::visible_to`]); the backend
/// answers for any id.
pub trait TaskBackend: Send + Sync + 'static {
    /// A failure of the underlying store; shown to the client in a -32603 message.
    type Error: Display + Send;

    /// The task with this id and its queue position, or `None` if there is no such task.
    fn lookup(&self, id: Uuid)
    -> impl Future<Output = Result<Option<Tracked>, Self::Error>> + Send;

    /// Cancels a task: a queued one leaves the queue and ends `cancelled` at once; a running one
    /// is asked to stop and ends `cancelled` when it does (the backend then signals a change,
    /// see [`subscribe`](Self::subscribe)). A terminal task is left alone. Returns the task as
    /// it is after the request, or `None` if there is no such task.
    fn cancel(&self, id: Uuid) -> impl Future<Output = Result<Option<Task>, Self::Error>> + Send;

    /// Records `by`'s answer to the outstanding input request `key` of task `id` (from
    /// `tasks/update`); the task's runner reads it and goes on. Returns whether it was
    /// recorded: a key answered before keeps its first answer. The layer has checked that
    /// the caller may see the task and that the key is outstanding. By default nothing asks
    /// for input, so nothing is recorded.
    fn answer(
        &self,
        id: Uuid,
        key: String,
        action: Action,
        by: Option<String>,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send {
        let _ = (id, key, action, by);
        async { Ok(false) }
    }

    /// A receiver that wakes after every later change of any task. The layer subscribes before
    /// reading, then re-reads after each wake-up, so no change is missed.
    fn subscribe(&self) -> watch::Receiver<u64>;

    /// Follows these tasks' changes one by one, with their latest snapshots (the push streams
    /// use it; see [`Follower`]).
    fn follow(&self, ids: &[Uuid]) -> Follower;

    /// The text a task's final `CallToolResult` carries (for the agent: the `agent_status` text).
    fn result_text(&self, task: &Task) -> String;

    /// The task described as its own tool would (the `agent_status` text, with the queue
    /// position while queued); push notifications carry it in `_meta`
    /// ([`STATUS_META`](super::STATUS_META)). By default the [`result_text`](Self::result_text).
    fn status_text(&self, task: &Task, queue_position: Option<usize>) -> String {
        let _ = queue_position;
        self.result_text(task)
    }

    /// The human message for a state; `queue_position` is shown while queued.
    fn state_message(&self, state: TaskState, queue_position: Option<usize>) -> String;
}
