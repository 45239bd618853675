//! The agent: the queue and the worker that runs one task at a time. The task model it works on
//! is [`crate::task`], shared with the store.
//!
//! [`Agent::start`] spawns the single worker. Tasks flow `queued → running → completed | failed |
//! cancelled`; the worker takes them FIFO, so at most one task in the whole process talks to the
//! model at a time.

//! The rooms:
//!
//! | room | what it holds |
//! |---|---|
//! | [`worker`] | the queue ([`queue`]), claiming a task, the local worker loop and the shared store's ([`AgentCore`], which they share, is here) |
//! | `engine` | running one task: [`runner`], its steps (`step`, `step_schedule`, `step_progress`), [`plan`], the context window, the model's profile, the model's reading of the request (`reading`), the `files` policy (`direct`), approvals, the result's summary, the trace |
//! | `judge` | whether the work is done: the project's checks (`checks`, `project_checks`); what a request asks for is the model's reading of it (`engine`'s `reading` and `direct`), read in any language, never a word list |
//! | [`steering`] | what the tool loop does for a small model |
//! | [`tools`] | the workspace's tools, their sandbox and the change ledger |

mod engine;
pub mod journal;
mod judge;
pub mod status;
pub mod steering;
pub mod tools;
pub mod worker;

pub use engine::model::{ModelProfile, probe as probe_model};
pub use engine::{plan, runner};
pub use judge::checks::{CheckEnd, CheckReport, CheckResult, CheckRun, NoChecks};
pub use worker::queue;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::{AgentConfig, Config, OllamaConfig};
use crate::ollama::{OllamaClient, OllamaError};
use crate::store::{StoreError, TaskStore};
use crate::task::input::DecisionLog;
use crate::task::{Task, TaskState};
use queue::TaskQueue;

/// What the runner needs to know from the configuration: the `ollama` and `agent` sections as
/// they are, and the tools' settings derived from them.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// `ollama`: the model and how each chat asks it (`num_ctx` is the most sent; the model's
    /// own context length when smaller).
    pub ollama: OllamaConfig,
    /// `agent`: planning, steps, steering, checks.
    pub agent: AgentConfig,
    /// The workspace and what its tools may do, with the server's own files protected.
    pub tools: tools::ToolSettings,
}

impl AgentSettings {
    pub fn from_config(config: &Config) -> Self {
        let mut tools = tools::ToolSettings::from_config(&config.agent);
        tools.protect(server_files(config));
        Self {
            ollama: config.ollama.clone(),
            agent: config.agent.clone(),
            tools,
        }
    }
}

/// The files the server itself writes, which the agent's tools must not touch: the SQLite
/// database where it is (configured, or at its default location) with its `-wal`, `-shm`,
/// `-journal` and `.lock` companions, and the audit log ([`Config::own_files`]). The
/// configuration file is not known here; its loader adds it with
/// [`tools::ToolSettings::protect`], or through [`crate::AgentMcp::start_protecting`].
pub fn server_files(config: &Config) -> Vec<std::path::PathBuf> {
    config.own_files(None)
}

/// State shared by the service and the worker.
#[derive(Debug)]
pub struct AgentCore {
    pub store: Arc<dyn TaskStore>,
    pub queue: TaskQueue,
    pub ollama: OllamaClient,
    pub settings: AgentSettings,
    /// The task now planning/running and its cancellation token.
    running: Mutex<Option<(Uuid, CancellationToken)>>,
    /// Tasks cancelled after the worker took them off the queue but before they reached
    /// `running`; the worker fires their token as they arrive.
    cancel_on_arrival: Mutex<HashSet<Uuid>>,
    /// Bumped by [`AgentCore::notify_task_changed`]; waiters re-read the store on each bump.
    changes: watch::Sender<u64>,
    /// The task-change broadcast: every saved change of a task is published here, for the
    /// clients that follow tasks by push (`subscriptions/listen`).
    pub events: Arc<crate::task::events::TaskEvents>,
    /// Set when the process shuts down: a task stopped by it ends `failed` as interrupted
    /// (as after a crash), not `cancelled` (which only a client asks for).
    shutting_down: std::sync::atomic::AtomicBool,
    /// Wakes the worker of a shared store: a task was queued (here or elsewhere)...
    wake_queued: tokio::sync::Notify,
    /// ...or the active task ended somewhere.
    wake_freed: tokio::sync::Notify,
    /// Where approval decisions are recorded besides the task (the audit log), if anywhere.
    pub(crate) decisions: Option<Arc<dyn DecisionLog>>,
    /// What the tasks this process ran last did, step by step (the oversight page's).
    pub journal: journal::TaskJournal,
}

/// The result text of a task cancelled while it waited in the queue.
pub const CANCELLED_BEFORE_START: &str = "実行開始前に取り消されました。";

impl AgentCore {
    /// Is the process shutting down?
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Queues a stored task. With a shared store the database holds the queue: the worker
    /// only wakes to claim.
    pub fn enqueue(&self, id: Uuid) {
        self.enqueue_owned(id, None);
    }

    /// [`AgentCore::enqueue`] of a task of `owner`, counted against that owner's share of the
    /// queue (`mcp.max_queued_per_caller`).
    pub fn enqueue_owned(&self, id: Uuid, owner: Option<&str>) {
        if self.store.shared().is_some() {
            self.wake_queued.notify_one();
        } else {
            self.queue.push_owned(id, owner);
        }
    }

    /// Tasks waiting in the queue, and of those the ones of `owner` (the whole
    /// application's, for a shared store).
    pub async fn queue_lens(&self, owner: Option<&str>) -> Result<(usize, usize), StoreError> {
        match self.store.shared() {
            Some(shared) => shared.queued_counts(owner).await,
            None => Ok((self.queue.len(), self.queue.len_of(owner))),
        }
    }

    /// Position of a queued task, 1-based (in the whole application for a shared store;
    /// `None` if the database cannot say now).
    pub async fn queue_position(&self, id: Uuid) -> Option<usize> {
        match self.store.shared() {
            Some(shared) => shared.queue_position(id).await.unwrap_or_else(|e| {
                tracing::warn!(task_id = %id, error = %e, "cannot read the queue position");
                None
            }),
            None => self.queue.position(id),
        }
    }

    /// How many tasks wait: in this process's queue, or with a shared store in the whole
    /// application (0 if the database cannot say now).
    pub async fn queue_len(&self) -> usize {
        match self.store.shared() {
            Some(shared) => shared.queued_count().await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot count the queued tasks");
                0
            }),
            None => self.queue.len(),
        }
    }

    /// Cancels a task: a queued one leaves the queue and ends `cancelled` at once; a running
    /// one has its token fired and ends `cancelled` when the runner stops. Returns the task as
    /// it is after the request, or `None` if unknown.
    pub async fn cancel(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        let Some(mut task) = self.store.task(id).await? else {
            return Ok(None);
        };
        if task.state.is_terminal() {
            return Ok(Some(task));
        }
        if let Some(shared) = self.store.shared() {
            // The database decides: a queued task ends at once, a claimed or running one is
            // marked and its instance told (this one, or another).
            let task = shared.request_cancel(id, CANCELLED_BEFORE_START).await?;
            if let Some((running, token)) = self.running_slot().as_ref()
                && *running == id
            {
                token.cancel();
            }
            if task.as_ref().is_some_and(|t| t.state.is_terminal()) {
                self.notify_task_changed(id);
            }
            return Ok(task);
        }
        // Decided under the slot lock, so a task the worker has just taken off the queue is
        // either in the slot already or will find its mark when it gets there.
        let removed = {
            let slot = self.running_slot();
            let removed = self.queue.remove(id);
            if !removed {
                match slot.as_ref() {
                    Some((running, token)) if *running == id => token.cancel(),
                    _ if task.state == TaskState::Queued => {
                        lock(&self.cancel_on_arrival).insert(id);
                    }
                    _ => {}
                }
            }
            removed
        };
        if removed {
            task.transition(TaskState::Cancelled);
            task.result = CANCELLED_BEFORE_START.to_owned();
            self.store.update_task(&task).await?;
            self.publish_task(&task);
        }
        Ok(Some(task))
    }

    /// Wakes everyone waiting on [`AgentCore::subscribe_task_changes`]. Call it after every
    /// saved change of a task (state, progress, result).
    /// This publishes the change by id only: followers read the task from the store. Prefer
    /// [`AgentCore::publish_task`] where the saved task is at hand.
    pub fn notify_task_changed(&self, id: Uuid) {
        tracing::trace!(task_id = %id, "task changed");
        self.events.touched(id);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// [`AgentCore::notify_task_changed`] with the task as just saved, which followers read
    /// instead of the store.
    pub fn publish_task(&self, task: &Task) {
        tracing::trace!(task_id = %task.id, "task changed");
        self.events.publish(task);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that wakes on every later [`AgentCore::notify_task_changed`]. Subscribe
    /// before reading the store, then re-read it after each wake-up; no change is missed.
    pub fn subscribe_task_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The task now planning or running, if any.
    pub fn running_task(&self) -> Option<Uuid> {
        self.running_slot().as_ref().map(|(id, _)| *id)
    }

    fn running_slot(&self) -> std::sync::MutexGuard<'_, Option<(Uuid, CancellationToken)>> {
        lock(&self.running)
    }
}

/// Every critical section is a single insert/remove/replace, so a poisoned lock holds
/// consistent data.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running agent: the shared core and its worker.
#[derive(Debug)]
pub struct Agent {
    core: Arc<AgentCore>,
    worker: JoinHandle<()>,
    /// The tasks beside the worker that hold the core or the store (the model's description,
    /// the purge of old tasks, the shared queue's events): ended and awaited at shutdown, so
    /// that a stopped agent has let go of the store (an in-process restart on the same SQLite
    /// file found it still locked by a purge task not yet dropped).
    background: Vec<JoinHandle<()>>,
    shutdown: CancellationToken,
}

impl Agent {
    /// Builds the Ollama client, re-queues tasks the store has queued, and starts the worker.
    /// Needs a Tokio runtime.
    pub async fn start(config: &Config, store: Arc<dyn TaskStore>) -> Result<Agent, AgentError> {
        Self::start_protecting(config, store, Vec::new()).await
    }

    /// [`Agent::start`], with more of the server's own files (e.g. its configuration file) out
    /// of the tools' reach, besides the store and audit files of `config`.
    pub async fn start_protecting(
        config: &Config,
        store: Arc<dyn TaskStore>,
        protect: Vec<std::path::PathBuf>,
    ) -> Result<Agent, AgentError> {
        Self::start_logging(config, store, protect, None).await
    }

    /// [`Agent::start_protecting`], sending every approval decision to `decisions` (the
    /// server gives its audit writer, when `audit.enabled`).
    pub async fn start_logging(
        config: &Config,
        store: Arc<dyn TaskStore>,
        protect: Vec<std::path::PathBuf>,
        decisions: Option<Arc<dyn DecisionLog>>,
    ) -> Result<Agent, AgentError> {
        let ollama = OllamaClient::new(
            &config.ollama.url,
            config.ollama.request_timeout,
            config.ollama.connect_timeout,
        )?
        .with_max_reply_bytes(
            usize::try_from(config.ollama.max_reply_bytes.as_u64()).unwrap_or(usize::MAX),
        )
        .with_retry(crate::ollama::RetryPolicy {
            retries: config.ollama.retries,
            backoff: config.ollama.retry_backoff,
        })
        .with_api_key(config.ollama.api_key.clone());
        let core = Arc::new(AgentCore {
            store,
            queue: TaskQueue::new(),
            ollama,
            settings: {
                let mut settings = AgentSettings::from_config(config);
                settings.tools.protect(protect);
                settings
            },
            running: Mutex::new(None),
            cancel_on_arrival: Mutex::new(HashSet::new()),
            changes: watch::Sender::new(0),
            events: crate::task::events::TaskEvents::new(),
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            wake_queued: tokio::sync::Notify::new(),
            wake_freed: tokio::sync::Notify::new(),
            decisions,
            journal: journal::TaskJournal::default(),
        });
        // The start-up line says how tasks will talk to the model; Ollama may not be up yet,
        // so it is asked beside the start, not before it.
        let mut background = vec![tokio::spawn(describe_model(core.clone()))];
        match tools::sandbox::describe(config.agent.commands.enabled) {
            Ok(how) => tracing::info!("run_command: {how}"),
            Err(why) => tracing::warn!("run_command: {why}"),
        }
        if core.settings.tools.commands.enabled {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            if let Err(e) = tools::sandbox::guard_this_process() {
                tracing::warn!(
                    "run_command: cannot make this process undumpable ({e}); its commands may \
                     be able to read its memory and environment through /proc"
                );
            }
            match tools::describe_command_isolation() {
                Ok(how) => tracing::info!("run_command: {how}"),
                Err(why) => tracing::warn!("run_command: {why}"),
            }
            match tools::describe_network_isolation(core.settings.tools.commands.network) {
                Ok(how) => tracing::info!("run_command: {how}"),
                Err(why) => tracing::warn!("run_command: {why}"),
            }
        }
        let shutdown = CancellationToken::new();
        let shared = core.store.shared().is_some();
        if shared {
            // Other instances may be running tasks: a task is ended by its lapsed lease (in
            // claim_next), never by a start.
            background.push(tokio::spawn(worker::shared_loop::dispatch_events(
                core.clone(),
                shutdown.clone(),
            )));
        } else {
            // A task a crash left planning/running cannot resume: it ends failed, with a reason.
            crate::store::fail_interrupted(core.store.as_ref()).await?;
            for task in core.store.tasks_in_state(TaskState::Queued).await? {
                core.queue.push_owned(task.id, task.owner.as_deref());
            }
        }
        background.push(tokio::spawn(crate::store::purge_expired_periodically(
            core.store.clone(),
            config.store.retention,
            shutdown.clone(),
        )));
        let worker = if shared {
            tokio::spawn(worker::shared_loop::worker_loop(
                core.clone(),
                shutdown.clone(),
            ))
        } else {
            tokio::spawn(worker::local_loop::worker_loop(
                core.clone(),
                shutdown.clone(),
            ))
        };
        Ok(Agent {
            core,
            worker,
            background,
            shutdown,
        })
    }

    pub fn core(&self) -> &Arc<AgentCore> {
        &self.core
    }

    /// Stops taking new tasks. Queued tasks stay in the store for the next start; a running
    /// task is stopped and ends `failed` as interrupted, as it would after a crash.
    pub async fn shutdown(mut self) {
        self.core
            .shutting_down
            .store(true, std::sync::atomic::Ordering::Release);
        self.shutdown.cancel();
        let _ = (&mut self.worker).await;
        for task in std::mem::take(&mut self.background) {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Ollama(#[from] OllamaError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Logs what the configured model's `/api/show` means for the tasks: steering, `num_ctx`,
/// `think`.
async fn describe_model(core: Arc<AgentCore>) {
    let model = &core.settings.ollama.model;
    match core.ollama.show(model).await {
        Ok(show) => tracing::info!(
            "{}",
            ModelProfile::from_show(&core.settings, &show).describe(model)
        ),
        Err(e) => tracing::warn!(
            "cannot ask Ollama about model {model} now ({e}); steering, num_ctx and think are \
             decided from /api/show when a task starts"
        ),
    }
}

/// Marks the finished task in the metrics, empties the slot and wakes waiters.
async fn after_task(core: &AgentCore, id: Uuid) {
    if let Ok(Some(task)) = core.store.task(id).await
        && task.state.is_terminal()
    {
        crate::metrics::record_task_finished(task.state.as_str());
    }
    *core.running_slot() = None;
    // The runner has saved a terminal state (or skipped a task that was not queued).
    core.notify_task_changed(id);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tools refuse the database where the server keeps it, the default location (outside
    /// the workspace unless the state directory is inside it) included, with its companions.
    #[test]
    fn the_tools_protect_the_database_where_it_is_and_the_audit_file() {
        let mut config = Config::default();
        config.audit.enabled = true;
        config.audit.file = Some("audit/agent-mcp.log".into());
        let db = config
            .store_path()
            .expect("a default store path (HOME or XDG_STATE_HOME is set)");
        let protected = server_files(&config);
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        for wanted in [db.clone(), wal.into(), "audit/agent-mcp.log".into()] {
            assert!(protected.contains(&wanted), "{wanted:?} in {protected:?}");
        }
        config.store.backend = crate::config::StoreBackend::Memory;
        assert!(!server_files(&config).contains(&db));
    }
}
