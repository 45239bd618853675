//! The agent: task model, queue and the worker that runs one task at a time.
//!
//! [`Agent::start`] spawns the single worker. Tasks flow `queued → running → completed | failed |
//! cancelled`; the worker takes them FIFO, so at most one task in the whole process talks to the
//! model at a time.

pub mod queue;
pub mod runner;
pub mod status;
pub mod task;

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::Config;
use crate::ollama::{OllamaClient, OllamaError};
use crate::store::{StoreError, TaskStore};
use queue::TaskQueue;
use task::{Task, TaskState};

/// What the runner needs to know from the configuration.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    pub model: String,
    pub temperature: Option<f64>,
    pub num_ctx: u32,
    pub keep_alive: Option<String>,
    pub system_prompt: String,
}

impl AgentSettings {
    pub fn from_config(config: &Config) -> Self {
        Self {
            model: config.ollama.model.clone(),
            temperature: config.ollama.temperature,
            num_ctx: config.ollama.num_ctx,
            keep_alive: config.ollama.keep_alive.clone(),
            system_prompt: config.agent.system_prompt.clone(),
        }
    }
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
}

impl AgentCore {
    /// Queues a stored task.
    pub fn enqueue(&self, id: Uuid) {
        self.queue.push(id);
    }

    /// Position of a queued task, 1-based.
    pub fn queue_position(&self, id: Uuid) -> Option<usize> {
        self.queue.position(id)
    }

    /// Cancels a task: a queued one leaves the queue and ends `cancelled` at once; a running
    /// one has its token fired and ends `cancelled` when the runner stops. Returns the task as
    /// it is after the request, or `None` if unknown.
    pub async fn cancel(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        let Some(mut task) = self.store.task(id).await? else {
            return Ok(None);
        };
        if task.state == TaskState::Queued && self.queue.remove(id) {
            task.transition(TaskState::Cancelled);
            self.store.update_task(&task).await?;
            return Ok(Some(task));
        }
        if let Some((running, token)) = self.running_slot().as_ref()
            && *running == id
        {
            token.cancel();
        }
        Ok(Some(task))
    }

    fn running_slot(&self) -> std::sync::MutexGuard<'_, Option<(Uuid, CancellationToken)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running agent: the shared core and its worker.
#[derive(Debug)]
pub struct Agent {
    core: Arc<AgentCore>,
    worker: JoinHandle<()>,
    shutdown: CancellationToken,
}

impl Agent {
    /// Builds the Ollama client, re-queues tasks the store has queued, and starts the worker.
    /// Needs a Tokio runtime.
    pub async fn start(config: &Config, store: Arc<dyn TaskStore>) -> Result<Agent, AgentError> {
        let ollama = OllamaClient::new(
            &config.ollama.url,
            config.ollama.request_timeout,
            config.ollama.connect_timeout,
        )?
        .with_max_reply_bytes(
            usize::try_from(config.ollama.max_reply_bytes.as_u64()).unwrap_or(usize::MAX),
        );
        let core = Arc::new(AgentCore {
            store,
            queue: TaskQueue::new(),
            ollama,
            settings: AgentSettings::from_config(config),
            running: Mutex::new(None),
        });
        for task in core.store.tasks_in_state(TaskState::Queued).await? {
            core.queue.push(task.id);
        }
        let shutdown = CancellationToken::new();
        let worker = tokio::spawn(worker_loop(core.clone(), shutdown.clone()));
        Ok(Agent {
            core,
            worker,
            shutdown,
        })
    }

    pub fn core(&self) -> &Arc<AgentCore> {
        &self.core
    }

    /// Stops taking new tasks; a running task is cancelled.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        let _ = (&mut self.worker).await;
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

async fn worker_loop(core: Arc<AgentCore>, shutdown: CancellationToken) {
    loop {
        let id = tokio::select! {
            id = core.queue.next() => id,
            () = shutdown.cancelled() => return,
        };
        let token = shutdown.child_token();
        *core.running_slot() = Some((id, token.clone()));
        runner::run_task(&core, id, token).await;
        *core.running_slot() = None;
    }
}
