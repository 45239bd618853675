//! Prometheus metrics: names, recording helpers and the process-wide recorder.
//!
//! Recording goes through the `metrics` facade, so a library user may install any recorder
//! (or none: then recording costs nothing). `agent-mcp serve` installs the Prometheus recorder
//! with [`install`] and serves [`MetricsHandle::render`] at `GET /metrics`; `agent-mcp stdio`
//! installs none, so it pays nothing for metrics.
//!
//! The Prometheus recorder keeps every histogram sample until it is folded into the buckets,
//! which happens on a render or an upkeep pass. [`install`] starts a thread that runs the
//! upkeep every [`UPKEEP_INTERVAL`], so memory stays flat whether or not anything scrapes
//! `/metrics` (at most one interval of samples is held).

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The request series, recorded by the metrics layer (which owns their names).
pub use crate::layers::metrics::{MCP_REQUEST_SECONDS, MCP_REQUESTS};
/// OpenTelemetry export: spans dropped because the queue was full, and failed export requests
/// by `signal` (recorded by the export, which owns their names).
pub use crate::telemetry::{
    EXPORT_FAILURES as OTEL_EXPORT_FAILURES, SPANS_DROPPED as OTEL_SPANS_DROPPED,
};
/// Tasks waiting in the queue.
pub const QUEUE_DEPTH: &str = "agent_mcp_queue_depth";
/// Tasks now in a non-terminal `state` (queued, planning, running).
pub const TASKS: &str = "agent_mcp_tasks";
/// Tasks accepted by `agent_run`.
pub const TASKS_CREATED: &str = "agent_mcp_tasks_created_total";
/// Tasks that reached a terminal state, by `outcome` (completed, failed, cancelled).
pub const TASKS_FINISHED: &str = "agent_mcp_tasks_finished_total";
/// Seconds per Ollama request, by `endpoint` and `outcome` (ok, error, cancelled).
pub const OLLAMA_REQUEST_SECONDS: &str = "agent_mcp_ollama_request_duration_seconds";
/// Tokens Ollama reported, by `direction` (input = prompt_eval_count, output = eval_count).
pub const TOKENS: &str = "agent_mcp_tokens_total";
/// 1 while the task store answers, 0 from the moment a call, the lease heartbeat or the
/// store's probe saw it fail until it answers again: the store's part of `/readyz`, read at
/// scrape time. Always 1 for a store without an outage of its own (SQLite, memory).
pub const STORE_UP: &str = "agent_mcp_store_up";

/// Requests the HTTP edge turned away before the MCP stack saw them, by `reason`
/// (`unauthorized`: no valid token, before the body was read; `body_budget`: no room in
/// `http.max_buffered_bytes` in time; `connections`: at `http.max_connections` with none idle).
pub const HTTP_REFUSALS: &str = "agent_mcp_http_refusals_total";
/// Connections closed to make room for a new one at `http.max_connections` (the one idle
/// longest goes).
pub const HTTP_CONNECTIONS_SHED: &str = "agent_mcp_http_connections_shed_total";
/// HTTP connections now open.
pub const HTTP_CONNECTIONS: &str = "agent_mcp_http_connections";
/// Log lines dropped because their writer was behind (stderr not read, a slow disk), by `log`
/// (`application`: the server's log writer; `audit`: the audit writer). Refusals counted but not
/// written to the audit log, because one peer sent more than it records per minute.
pub use crate::layers::audit::{
    LINES_DROPPED as LOG_LINES_DROPPED, REFUSALS_SUPPRESSED as AUDIT_REFUSALS_SUPPRESSED,
};

/// How often the recorder folds histogram samples into their buckets (see the module docs).
pub const UPKEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Histogram buckets in seconds: MCP answers take micro- to milliseconds, model calls seconds
/// to minutes.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0,
];

pub(crate) fn record_ollama_call(endpoint: &'static str, outcome: &'static str, elapsed: Duration) {
    metrics::histogram!(OLLAMA_REQUEST_SECONDS, "endpoint" => endpoint, "outcome" => outcome)
        .record(elapsed.as_secs_f64());
}

pub(crate) fn record_tokens(input: u64, output: u64) {
    metrics::counter!(TOKENS, "direction" => "input").increment(input);
    metrics::counter!(TOKENS, "direction" => "output").increment(output);
}

pub(crate) fn record_task_created() {
    metrics::counter!(TASKS_CREATED).increment(1);
}

pub(crate) fn record_task_finished(outcome: &'static str) {
    metrics::counter!(TASKS_FINISHED, "outcome" => outcome).increment(1);
}

pub(crate) fn record_http_refusal(reason: &'static str) {
    metrics::counter!(HTTP_REFUSALS, "reason" => reason).increment(1);
}

pub(crate) fn set_http_connections(open: usize) {
    metrics::gauge!(HTTP_CONNECTIONS).set(open as f64);
}

pub(crate) fn record_connection_shed() {
    metrics::counter!(HTTP_CONNECTIONS_SHED).increment(1);
}

pub(crate) fn set_queue_depth(depth: usize) {
    metrics::gauge!(QUEUE_DEPTH).set(depth as f64);
}

pub(crate) fn set_store_up(up: bool) {
    metrics::gauge!(STORE_UP).set(if up { 1.0 } else { 0.0 });
}

/// Renders the Prometheus text exposition of everything recorded so far.
#[derive(Clone, Debug)]
pub struct MetricsHandle(PrometheusHandle);

impl MetricsHandle {
    /// The Prometheus text of everything recorded so far (what `GET /metrics` answers).
    pub fn render(&self) -> String {
        self.0.render()
    }
}

/// Installs the Prometheus recorder for this process (once; later calls return the same
/// handle) and starts its upkeep thread, which folds histogram samples every
/// [`UPKEEP_INTERVAL`] so they never pile up between scrapes. Fails if another recorder was
/// installed first, or if the upkeep thread cannot start (then no recorder is installed and
/// recording stays free).
pub fn install() -> Result<MetricsHandle, String> {
    static HANDLE: OnceLock<Result<MetricsHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
                .map_err(|e| e.to_string())?
                .build_recorder();
            let handle = recorder.handle();
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("agent-mcp-metrics".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(UPKEEP_INTERVAL);
                        upkeep.run_upkeep();
                    }
                })
                .map_err(|e| {
                    format!("cannot start the metrics upkeep thread ({e}); /metrics is unavailable")
                })?;
            metrics::set_global_recorder(recorder).map_err(|e| {
                format!("another metrics recorder is installed ({e}); /metrics is unavailable")
            })?;
            Ok(MetricsHandle(handle))
        })
        .clone()
}
