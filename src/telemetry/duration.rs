//! The MCP metric `mcp.server.operation.duration`: seconds from a request's arrival to its
//! answer, a histogram with the buckets mcp.md asks for, exported over OTLP with the spans.
//!
//! The instrument exists only once export has started with metrics on (the first
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

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};

use super::semconv::{attr, metric, value};
use super::spans::{Network, Operation, operation_builders};

static SERVER_DURATION: OnceLock<Histogram<f64>> = OnceLock::new();

/// Creates the instrument on `meter` (once per process; later calls keep the first).
pub(super) fn install(meter: &Meter) {
    SERVER_DURATION.get_or_init(|| {
        meter
            .f64_histogram(metric::MCP_SERVER_OPERATION_DURATION)
            .with_unit(metric::UNIT_SECONDS)
            .with_description(
                "Duration of the MCP request or notification as observed on the server, from \
                 its arrival to its answer",
            )
            .with_boundaries(metric::DURATION_BUCKETS.to_vec())
            .build()
    });
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

    fn key_values(&self) -> Vec<KeyValue> {
        // Keys and values are `'static` (no copy) but for an error's token.
        let mut kv = Vec::with_capacity(6);
        kv.push(KeyValue::new(attr::MCP_METHOD_NAME, self.operation.method));
        if let Some(tool) = self.operation.tool {
            kv.push(KeyValue::new(attr::GEN_AI_TOOL_NAME, tool));
            kv.push(KeyValue::new(
                attr::GEN_AI_OPERATION_NAME,
                value::EXECUTE_TOOL,
            ));
        }
        if let Some(error) = self.error_type {
            kv.push(KeyValue::new(
                attr::ERROR_TYPE,
                super::spans::error_token(error),
            ));
        }
        if let Some(version) = self.operation.protocol_version {
            kv.push(KeyValue::new(attr::MCP_PROTOCOL_VERSION, version));
        }
        match self.operation.network {
            Network::Http { .. } => {
                kv.push(KeyValue::new(attr::NETWORK_TRANSPORT, value::TRANSPORT_TCP));
                kv.push(KeyValue::new(
                    attr::NETWORK_PROTOCOL_NAME,
                    value::PROTOCOL_HTTP,
                ));
            }
            Network::Stdio => kv.push(KeyValue::new(
                attr::NETWORK_TRANSPORT,
                value::TRANSPORT_PIPE,
            )),
            Network::InProcess => {}
        }
        kv
    }
}

/// Records one request's duration, when export runs with metrics on.
pub fn record_server_operation(elapsed: Duration, attributes: &OperationAttributes<'_>) {
    if let Some(histogram) = SERVER_DURATION.get() {
        histogram.record(elapsed.as_secs_f64(), &attributes.key_values());
    }
}

/// Whether the instrument exists (export started with metrics on).
pub fn is_recording() -> bool {
    SERVER_DURATION.get().is_some()
}
