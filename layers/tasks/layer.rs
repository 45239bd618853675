//! [`TasksLayer`]: the configuration of the Tasks layer.

use std::sync::Arc;
use std::time::Duration;

use super::backend::TaskBackend;
use super::streams::OpenStreams;
use super::wire::TaskTiming;

/// The poll interval suggested to clients. A local model takes seconds to minutes per task, so
/// polling faster than once a second only adds load.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long a 2025-11-25 `tasks/cancel` waits for a running task to reach `cancelled` before
/// answering with the task as it then is.
pub const DEFAULT_CANCEL_WAIT: Duration = Duration::from_secs(5);

/// How many push streams (`subscriptions/listen`, 2025 stdio task notifications) one caller may
/// have open at once.
pub const DEFAULT_MAX_STREAMS_PER_CALLER: usize = 16;

/// The Tasks layer's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TasksConfig {
    /// How long tasks are kept after creation (the advertised `ttlMs` / `ttl`); the server
    /// uses `store.retention`.
    pub ttl: Duration,
    /// The `pollIntervalMs` / `pollInterval` suggested to clients for a running task (a queued
    /// one is told its place in line times this).
    pub poll_interval: Duration,
    /// How long a 2025-11-25 `tasks/cancel` waits for a running task to stop.
    pub cancel_wait: Duration,
    /// Push streams one caller may have open at once; past it a `subscriptions/listen` is
    /// refused (-32600) and a 2025 task on stdio is created without its notifications.
    pub max_streams_per_caller: usize,
}

impl Default for TasksConfig {
    /// A week's `ttl`, [`DEFAULT_POLL_INTERVAL`], [`DEFAULT_CANCEL_WAIT`],
    /// [`DEFAULT_MAX_STREAMS_PER_CALLER`].
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(7 * 24 * 3600),
            poll_interval: DEFAULT_POLL_INTERVAL,
            cancel_wait: DEFAULT_CANCEL_WAIT,
            max_streams_per_caller: DEFAULT_MAX_STREAMS_PER_CALLER,
        }
    }
}

/// Serves tasks through the MCP Tasks extension (2026-07-28) and the experimental 2025-11-25
/// tasks, both from one [`TaskBackend`] (the agent core in the server). See the
/// [module docs](super).
#[derive(Debug)]
pub struct TasksLayer<B> {
    pub(super) backend: Arc<B>,
    pub(super) config: TasksConfig,
    /// Push streams open now, per caller.
    pub(super) streams: Arc<OpenStreams>,
}

// Not derived: that would ask for `B: Clone`, and only the `Arc` is cloned.
impl<B> Clone for TasksLayer<B> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            config: self.config,
            streams: self.streams.clone(),
        }
    }
}

impl<B: TaskBackend> TasksLayer<B> {
    pub fn new(backend: Arc<B>, config: TasksConfig) -> Self {
        Self {
            backend,
            config,
            streams: Arc::default(),
        }
    }

    /// The push streams open now, per caller.
    pub fn open_streams(&self) -> &OpenStreams {
        &self.streams
    }

    pub fn config(&self) -> &TasksConfig {
        &self.config
    }

    pub(super) fn timing(&self) -> TaskTiming {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        TaskTiming {
            ttl_ms: ms(self.config.ttl),
            poll_interval_ms: ms(self.config.poll_interval),
        }
    }
}
