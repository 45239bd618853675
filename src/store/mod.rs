//! Where tasks and sessions live.
//!
//! [`TaskStore`] is the boundary. [`SqliteStore`] is the default: one SQLite file in WAL mode,
//! so a restart loses nothing that was accepted. [`MemoryStore`] keeps everything in process
//! (tests, embedding).
//!
//! Image bytes are not part of the hot path: [`TaskStore::task`] may leave `Task::images` empty
//! (the SQLite store always does), and the runner asks [`TaskStore::task_images`] when it starts
//! a task.
//!
//! ```
//! # async fn run() -> Result<(), agent_mcp::store::StoreError> {
//! use agent_mcp::task::{Session, Task, TaskState};
//! use agent_mcp::config::StoreConfig;
//! use agent_mcp::store::{SqliteStore, TaskStore};
//!
//! let dir = std::env::temp_dir().join(format!("agent-mcp-doc-{}", std::process::id()));
//! let store = SqliteStore::open(&StoreConfig::sqlite_at(dir.join("tasks.db"))).await?;
//! let session = Session::new(None);
//! store.create_session(&session).await?;
//! let task = Task::new(session.id, None, "Fix the build".into(), None);
//! store.insert_task(&task).await?;
//! assert_eq!(store.tasks_in_state(TaskState::Queued).await?.len(), 1);
//! # let _ = std::fs::remove_dir_all(dir);
//! # Ok(()) }
//! ```

mod memory;
mod recovery;
mod sqlite;

use std::time::SystemTime;

use async_trait::async_trait;
use uuid::Uuid;

pub use memory::MemoryStore;
pub use recovery::{INTERRUPTED_BY_RESTART, fail_interrupted, purge_expired_periodically};
pub use sqlite::SqliteStore;

use crate::task::{Session, Task, TaskImage, TaskState, Turn};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no session {0}")]
    UnknownSession(Uuid),
    #[error("no task {0}")]
    UnknownTask(Uuid),
    #[error("task store unavailable: {0}")]
    Unavailable(String),
    /// An image that is not valid standard base64 (the image layer normally rejects it first).
    #[error("images[{index}]: data_base64 is not valid standard base64 ({reason})")]
    InvalidImage { index: usize, reason: String },
}

/// Persistence of tasks, sessions and session history.
#[async_trait]
pub trait TaskStore: Send + Sync + std::fmt::Debug + 'static {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError>;
    async fn session(&self, id: Uuid) -> Result<Option<Session>, StoreError>;
    /// The session's turns, oldest first.
    async fn session_turns(&self, id: Uuid) -> Result<Vec<Turn>, StoreError>;
    async fn append_turns(&self, id: Uuid, turns: &[Turn]) -> Result<(), StoreError>;
    /// Stores a new task with its images; it is durable (for durable stores) when this
    /// returns. On error nothing of the task is stored. A session the task names that is not
    /// stored (a purge removed it after it was looked up) is stored anew, empty.
    async fn insert_task(&self, task: &Task) -> Result<(), StoreError>;
    /// The task without the cost of its images: `images` may be empty even when the task has
    /// some (the SQLite store never loads them here). Use [`TaskStore::task_images`].
    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError>;
    /// The images of an unfinished task, in the order they were sent. Empty once the task is
    /// terminal (its images are released then).
    async fn task_images(&self, id: Uuid) -> Result<Vec<TaskImage>, StoreError>;
    /// Fails if the store cannot take writes now (read-only file, full disk, lost connection).
    /// For readiness probes; cheap.
    async fn check_writable(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Replaces a stored task with `task` (its `images` are ignored). A terminal state releases
    /// the task's images.
    async fn update_task(&self, task: &Task) -> Result<(), StoreError>;
    /// Tasks in `state`, in creation order, without their images.
    async fn tasks_in_state(&self, state: TaskState) -> Result<Vec<Task>, StoreError>;
    /// Deletes terminal tasks that finished before `finished_before`, and the sessions (with
    /// their turns) that have no task left then. Returns how many tasks.
    async fn purge_finished(&self, finished_before: SystemTime) -> Result<u64, StoreError>;
}

/// Checks every store must pass, run by each store's tests.
#[cfg(test)]
pub(crate) mod conformance {
    use std::time::{Duration, SystemTime};

    use super::TaskStore;
    use crate::task::{Session, Task, TaskState, Turn, TurnRole};

    /// A session goes (with its turns) once its last task is purged, not before; a task
    /// accepted for a session purged meanwhile brings the session back, empty.
    pub(crate) async fn sessions_go_with_their_last_task(store: &dyn TaskStore) {
        let hour = Duration::from_secs(3600);
        let now = SystemTime::now();
        let turn = Turn {
            role: TurnRole::User,
            content: "hello".into(),
        };
        let (lone, shared, fresh) = (Session::new(None), Session::new(None), Session::new(None));
        for s in [&lone, &shared, &fresh] {
            store.create_session(s).await.unwrap();
            store
                .append_turns(s.id, std::slice::from_ref(&turn))
                .await
                .unwrap();
        }
        let finished = |session: &Session, at: SystemTime| {
            let mut t = Task::new(session.id, None, "x".into(), None);
            t.state = TaskState::Completed;
            t.updated_at = at;
            t
        };
        let old_lone = finished(&lone, now - 2 * hour);
        let old_shared = finished(&shared, now - 2 * hour);
        let recent_shared = finished(&shared, now);
        let recent_fresh = finished(&fresh, now);
        for t in [&old_lone, &old_shared, &recent_shared, &recent_fresh] {
            store.insert_task(t).await.unwrap();
            store.update_task(t).await.unwrap();
        }
        assert_eq!(store.purge_finished(now - hour).await.unwrap(), 2);
        assert!(store.session(lone.id).await.unwrap().is_none());
        assert!(store.session_turns(lone.id).await.is_err());
        assert_eq!(store.session_turns(shared.id).await.unwrap().len(), 1);
        assert_eq!(store.session_turns(fresh.id).await.unwrap().len(), 1);

        // agent_run found `lone` before the purge, and stores its task after it.
        let late = Task::new(lone.id, Some("alice".into()), "late".into(), None);
        store.insert_task(&late).await.unwrap();
        let back = store.session(lone.id).await.unwrap().expect("session back");
        assert_eq!(back.owner.as_deref(), Some("alice"));
        assert!(store.session_turns(lone.id).await.unwrap().is_empty());
        assert!(store.task(late.id).await.unwrap().is_some());
    }
}
