//! The MCP metric `mcp.server.operation.duration`: seconds from a request's arrival to its
//! answer, a histogram with the buckets mcp.md asks for, exported over OTLP with the spans.
//!
//! It is aggregated only once export has started with metrics on (the first
//! [`Telemetry`](super::Telemetry) of the process); until then [`record_server_operation`]
//! returns after one atomic load and builds nothing.
//!
//! ```
//! use std::time::Duration;
//! use agent_mcp::telemetry::duration::{OperationAttributes, record_server_operation};
//!
//! // Export is not running in this example, so this records nothing.
//! record_server_operation(
//!     Duration::from_millis(3),
//!     &OperationAttributes::new("tools/call").with_tool("agent_status").with_error_type(None),
//! );
//! ```

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use super::semconv::{attr, metric, value};
use super::spans::{Network, Operation, operation_builders};

/// The histogram's series, once export has started with metrics on.
static SERVER_DURATION: OnceLock<Durations> = OnceLock::new();

/// At most this many series (attribute sets); a measurement of a further one is not recorded
/// (the SDK's default cardinality limit).
const MAX_SERIES: usize = 2000;

/// Number of buckets: one per bound and one above the last.
const BUCKETS: usize = metric::DURATION_BUCKETS.len() + 1;

/// The cumulative histogram `mcp.server.operation.duration`, aggregated here rather than by
/// the SDK's instrument: the SDK hashes the measurement's attribute `KeyValue`s with SipHash
/// on every call (~3 500 instructions a request, issue 32), where a series here is found by
/// comparing a few `'static` names. Exported by [`Telemetry`](super::Telemetry)'s metrics
/// thread as OTLP protobuf ([`encode_metrics_request`](super::otlp::encode_metrics_request)).
#[derive(Debug)]
pub(super) struct Durations {
    pub(super) start: SystemTime,
    series: Mutex<Vec<Series>>,
}

/// One attribute set's aggregate.
#[derive(Clone, Debug)]
pub(super) struct Series {
    pub(super) operation: Operation,
    /// The `error.type` token, when the requests failed.
    pub(super) error_type: Option<String>,
    pub(super) count: u64,
    pub(super) sum: f64,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) buckets: [u64; BUCKETS],
}

impl Series {
    /// Calls `f` with each attribute, in the order the SDK instrument was given them.
    pub(super) fn for_each_attribute(&self, mut f: impl FnMut(&'static str, &str)) {
        let op = &self.operation;
        f(attr::MCP_METHOD_NAME, op.method);
        if let Some(tool) = op.tool {
            f(attr::GEN_AI_TOOL_NAME, tool);
            f(attr::GEN_AI_OPERATION_NAME, value::EXECUTE_TOOL);
        }
        if let Some(error) = &self.error_type {
            f(attr::ERROR_TYPE, error);
        }
        if let Some(version) = op.protocol_version {
            f(attr::MCP_PROTOCOL_VERSION, version);
        }
        match op.network {
            Network::Http { .. } => {
                f(attr::NETWORK_TRANSPORT, value::TRANSPORT_TCP);
                f(attr::NETWORK_PROTOCOL_NAME, value::PROTOCOL_HTTP);
            }
            Network::Stdio => f(attr::NETWORK_TRANSPORT, value::TRANSPORT_PIPE),
            Network::InProcess => {}
        }
    }
}

impl Durations {
    fn new() -> Self {
        Self {
            start: SystemTime::now(),
            series: Mutex::new(Vec::new()),
        }
    }

    fn record(&self, seconds: f64, attributes: &OperationAttributes<'_>) {
        // An error's token only when there is one (a request that failed).
        let error = attributes.error_type.map(super::spans::error_token);
        // The SDK's buckets: a value on a bound counts in the bucket the bound ends.
        let bucket = metric::DURATION_BUCKETS.partition_point(|&bound| bound < seconds);
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let found = series.iter().position(|s| {
            s.operation.same_attributes(&attributes.operation) && s.error_type == error
        });
        let index = match found {
            Some(index) => index,
            None if series.len() < MAX_SERIES => {
                series.push(Series {
                    operation: attributes.operation,
                    error_type: error,
                    count: 0,
                    sum: 0.0,
                    min: f64::INFINITY,
                    max: f64::NEG_INFINITY,
                    buckets: [0; BUCKETS],
                });
                series.len() - 1
            }
            None => return,
        };
        let entry = &mut series[index];
        entry.count += 1;
        entry.sum += seconds;
        entry.min = entry.min.min(seconds);
        entry.max = entry.max.max(seconds);
        entry.buckets[bucket] += 1;
    }

    /// A copy of every series so far (cumulative).
    pub(super) fn snapshot(&self) -> Vec<Series> {
        self.series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Starts the aggregation (once per process; later calls keep the first) and returns it.
pub(super) fn install() -> &'static Durations {
    SERVER_DURATION.get_or_init(Durations::new)
}

/// The attributes of one measurement: mcp.md's, with names of ours only (see
/// [`McpServerSpan`](super::spans::McpServerSpan)).
#[derive(Clone, Debug)]
pub struct OperationAttributes<'a> {
    operation: Operation,
    error_type: Option<&'a str>,
}

impl<'a> OperationAttributes<'a> {
    pub fn new(method: &'static str) -> Self {
        Self {
            operation: Operation::new(method),
            error_type: None,
        }
    }

    operation_builders!();

    /// The error class the request ended with (a JSON-RPC code, `tool_error`); `None` when it
    /// succeeded.
    pub fn with_error_type(mut self, error_type: Option<&'a str>) -> Self {
        self.error_type = error_type;
        self
    }
}

/// Records one request's duration, when export runs with metrics on.
pub fn record_server_operation(elapsed: Duration, attributes: &OperationAttributes<'_>) {
    if let Some(durations) = SERVER_DURATION.get() {
        durations.record(elapsed.as_secs_f64(), attributes);
    }
}

/// Whether the histogram is recorded (export started with metrics on).
pub fn is_recording() -> bool {
    SERVER_DURATION.get().is_some()
}
