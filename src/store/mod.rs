//! Where tasks and sessions live.
//!
//! [`TaskStore`] is the boundary; [`MemoryStore`] keeps everything in process (tests,
//! embedding). A durable SQLite implementation sits behind the same trait.

mod memory;

use async_trait::async_trait;
use uuid::Uuid;

pub use memory::MemoryStore;

use crate::agent::task::{Session, Task, TaskState, Turn};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no session {0}")]
    UnknownSession(Uuid),
    #[error("no task {0}")]
    UnknownTask(Uuid),
    #[error("task store unavailable: {0}")]
    Unavailable(String),
}

/// Persistence of tasks, sessions and session history.
#[async_trait]
pub trait TaskStore: Send + Sync + std::fmt::Debug + 'static {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError>;
    async fn session(&self, id: Uuid) -> Result<Option<Session>, StoreError>;
    /// The session's turns, oldest first.
    async fn session_turns(&self, id: Uuid) -> Result<Vec<Turn>, StoreError>;
    async fn append_turns(&self, id: Uuid, turns: &[Turn]) -> Result<(), StoreError>;
    /// Stores a new task; it is durable (for durable stores) when this returns.
    async fn insert_task(&self, task: &Task) -> Result<(), StoreError>;
    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError>;
    /// Replaces a stored task with `task`.
    async fn update_task(&self, task: &Task) -> Result<(), StoreError>;
    /// Tasks in `state`, in creation order.
    async fn tasks_in_state(&self, state: TaskState) -> Result<Vec<Task>, StoreError>;
}
