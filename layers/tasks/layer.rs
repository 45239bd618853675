//! [`TasksLayer`]: the configuration of the Tasks layer.

use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::backend::TaskBackend;
use super::service::Tasks;
use super::wire::TaskTiming;

/// The poll interval suggested to clients. A local model takes seconds to minutes per task, so
/// polling faster than once a second only adds load.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long a 2025-11-25 `tasks/cancel` waits for a running task to reach `cancelled` before
/// answering with the task as it then is.
pub const DEFAULT_CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Serves tasks through the MCP Tasks extension (2026-07-28) and the experimental 2025-11-25
/// tasks, both from one [`TaskBackend`] (the agent core in the server). See the
/// [module docs](super).
#[derive(Debug)]
pub struct TasksLayer<B> {
    pub(super) backend: Arc<B>,
    pub(super) ttl: Duration,
    pub(super) poll_interval: Duration,
    pub(super) cancel_wait: Duration,
}

// Not derived: that would ask for `B: Clone`, and only the `Arc` is cloned.
impl<B> Clone for TasksLayer<B> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            ttl: self.ttl,
            poll_interval: self.poll_interval,
            cancel_wait: self.cancel_wait,
        }
    }
}

impl<B: TaskBackend> TasksLayer<B> {
    /// `ttl` is how long tasks are kept after creation (the advertised `ttlMs` / `ttl`).
    pub fn new(backend: Arc<B>, ttl: Duration) -> Self {
        Self {
            backend,
            ttl,
            poll_interval: DEFAULT_POLL_INTERVAL,
            cancel_wait: DEFAULT_CANCEL_WAIT,
        }
    }

    /// The `pollIntervalMs` / `pollInterval` suggested to clients.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// How long a 2025-11-25 `tasks/cancel` waits for a running task to stop.
    pub fn with_cancel_wait(mut self, wait: Duration) -> Self {
        self.cancel_wait = wait;
        self
    }

    pub(super) fn timing(&self) -> TaskTiming {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        TaskTiming {
            ttl_ms: ms(self.ttl),
            poll_interval_ms: ms(self.poll_interval),
        }
    }
}

impl<S, B: TaskBackend> Layer<S> for TasksLayer<B> {
    type Service = Tasks<S, B>;

    fn layer(&self, inner: S) -> Tasks<S, B> {
        Tasks::from_layer(inner, self.clone())
    }
}
