//! Oversight: what a task did, and taking it back. For the caller who owns a task: its
//! unified diff ([`Oversight::diff`]), undo of its changes ([`Oversight::undo`]), cancel and
//! approval answers; and the page `agent-mcp serve` shows at `/` ([`http`]).
//!
//! None of it is an MCP tool: the MCP surface stays `agent_run` and `agent_status`. Over HTTP
//! these are the server's own routes, behind the same Host/Origin guard and bearer tokens or
//! OAuth as `/mcp`; over stdio the terminal client opens the configured store itself (as the
//! `stdio` caller).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = agent_mcp::AgentMcp::start(&agent_mcp::config::Config::default()).await?;
//! let oversight = server.oversight();
//! let id = uuid::Uuid::new_v4();
//! match oversight.diff(id, None).await {
//!     Ok(diff) => print!("{}", diff.text),
//!     Err(e) => eprintln!("{e}"),
//! }
//! # Ok(()) }
//! ```

pub mod diff;
pub mod http;
pub mod page;
pub mod undo;

use std::sync::Arc;

use uuid::Uuid;

use crate::agent::AgentCore;
use crate::agent::tools::{ToolSettings, Toolbox};
use crate::store::{StoreError, TaskChanges, TaskStore};
use crate::task::Task;
use crate::task::input::{Action, Answer};

pub use undo::{UndoRefusal, Undone};

/// Why an oversight request did nothing.
#[derive(Debug, thiserror::Error)]
pub enum OversightError {
    /// Unknown, or not the caller's: the same answer, so nobody learns of others' tasks.
    #[error("no task {0} of yours: check the task_id that agent_run returned")]
    NotFound(Uuid),
    /// Undo refused, saying why (files changed since, kept by hash only, the task running).
    #[error(transparent)]
    Undo(#[from] UndoRefusal),
    /// The workspace cannot be opened.
    #[error("{0}")]
    Workspace(String),
    /// No such approval waits on the task.
    #[error("no approval {key} waits on task {id}; it was answered already or never asked")]
    NoSuchQuestion {
        /// The task.
        id: Uuid,
        /// The approval's key.
        key: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A task's diff.
#[derive(Clone, Debug)]
pub struct TaskDiff {
    /// The task as stored.
    pub task: Task,
    /// `None`: the task changed no file (or changed nothing yet).
    pub changes: Option<TaskChanges>,
    /// The unified diff (empty when nothing changed).
    pub text: String,
}

/// The oversight operations on one server's tasks. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Oversight {
    store: Arc<dyn TaskStore>,
    tools: Arc<ToolSettings>,
    /// The running agent, to cancel its tasks and wake whoever follows them; `None` for a
    /// store opened without one (the terminal client over `--stdio`).
    core: Option<Arc<AgentCore>>,
    /// One undo at a time in this process: two undos of one task cannot both write.
    undoing: Arc<tokio::sync::Mutex<()>>,
}

impl Oversight {
    /// The operations on the tasks of a running agent.
    pub(crate) fn new(core: Arc<AgentCore>) -> Self {
        Self {
            store: core.store.clone(),
            tools: Arc::new(core.settings.tools.clone()),
            core: Some(core),
            undoing: Arc::default(),
        }
    }

    /// The operations on a store no agent runs (diff and undo; a cancel needs the agent).
    pub(crate) fn offline(store: Arc<dyn TaskStore>, tools: ToolSettings) -> Self {
        Self {
            store,
            tools: Arc::new(tools),
            core: None,
            undoing: Arc::default(),
        }
    }

    pub(crate) fn core(&self) -> Option<&Arc<AgentCore>> {
        self.core.as_ref()
    }

    fn notify(&self, id: Uuid) {
        if let Some(core) = &self.core {
            core.notify_task_changed(id);
        }
    }

    /// Task `id` if `identity` owns it.
    pub async fn task(&self, id: Uuid, identity: Option<&str>) -> Result<Task, OversightError> {
        match self.store.task(id).await? {
            Some(task) if task.visible_to(identity) => Ok(task),
            _ => Err(OversightError::NotFound(id)),
        }
    }

    /// The unified diff of what task `id` changed.
    pub async fn diff(&self, id: Uuid, identity: Option<&str>) -> Result<TaskDiff, OversightError> {
        let task = self.task(id, identity).await?;
        let changes = self.store.task_changes(id).await?;
        let text = changes.as_ref().map(diff::unified).unwrap_or_default();
        Ok(TaskDiff {
            task,
            changes,
            text,
        })
    }

    /// Puts every file task `id` changed back as it was before it ([`undo`]).
    pub async fn undo(&self, id: Uuid, identity: Option<&str>) -> Result<Undone, OversightError> {
        let task = self.task(id, identity).await?;
        if !task.state.is_terminal() {
            return Err(UndoRefusal::Unfinished(task.state.to_string()).into());
        }
        let _one = self.undoing.lock().await;
        let Some(changes) = self.store.task_changes(id).await? else {
            return Ok(Undone::Nothing);
        };
        if changes.undone {
            return Ok(Undone::Already);
        }
        let ws = Toolbox::open(&self.tools)
            .map_err(|e| OversightError::Workspace(e.to_string()))?
            .workspace()
            .clone();
        let restored = tokio::task::spawn_blocking(move || undo::restore(&ws, &changes))
            .await
            .map_err(|e| OversightError::Workspace(e.to_string()))??;
        if !self.store.mark_undone(id).await? {
            return Ok(Undone::Already);
        }
        tracing::info!(task_id = %id, files = restored.len(), "task undone");
        self.notify(id);
        Ok(Undone::Restored(restored))
    }

    /// Cancels task `id`: a queued one leaves the queue and ends `cancelled` at once; a running
    /// one is asked to stop and ends `cancelled` when it does (as `tasks/cancel`).
    pub async fn cancel(&self, id: Uuid, identity: Option<&str>) -> Result<Task, OversightError> {
        self.task(id, identity).await?;
        let Some(core) = &self.core else {
            return Err(OversightError::Workspace(
                "no agent runs here to cancel the task; cancel it where it runs".into(),
            ));
        };
        core.cancel(id).await?.ok_or(OversightError::NotFound(id))
    }

    /// Answers the approval `key` that task `id` waits for, as `identity`.
    pub async fn answer(
        &self,
        id: Uuid,
        key: &str,
        action: Action,
        identity: Option<&str>,
    ) -> Result<(), OversightError> {
        let task = self.task(id, identity).await?;
        if task.input.pending(key).is_none() {
            return Err(OversightError::NoSuchQuestion {
                id,
                key: key.to_owned(),
            });
        }
        let answer = Answer {
            action,
            by: identity.map(str::to_owned),
            at: std::time::SystemTime::now(),
        };
        let recorded = self.store.answer_input(id, key, &answer).await?;
        tracing::info!(
            target: "agent_mcp::approvals",
            task_id = %id,
            %key,
            action = action.as_str(),
            by = identity.unwrap_or(""),
            recorded,
            "approval answered from the oversight page"
        );
        if !recorded {
            return Err(OversightError::NoSuchQuestion {
                id,
                key: key.to_owned(),
            });
        }
        self.notify(id);
        Ok(())
    }

    /// The caller's newest `limit` tasks, newest first.
    pub async fn recent(
        &self,
        identity: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Task>, OversightError> {
        Ok(self.store.recent_tasks(identity, limit).await?)
    }
}
