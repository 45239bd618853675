//! OpenTelemetry: traces (and the MCP duration metric) exported over OTLP/HTTP with protobuf
//! bodies to any collector (the OpenTelemetry Collector, Jaeger, Tempo, Honeycomb, …), bridged
//! from `tracing` by `tracing-opentelemetry` — except the per-request MCP server span, a plain
//! record on the export's own bounded queue ([`spans::ServerSpan`]), sampled by the same rules
//! and parenting the task's spans as an SDK span would. The protobuf of both kinds of span and
//! of the `mcp.server.operation.duration` histogram (aggregated here, not by the SDK's
//! instrument, which hashed its attributes on every call) is written by this module's
//! exporter; the SDK and its instruments cost several µs a request, most of export's cost.
//!
//! - [`Telemetry`] is the running export: started from [`TelemetrySettings`] (which the
//!   configuration resolves from `agent.yaml`'s `telemetry` section and the standard `OTEL_*`
//!   variables), it yields the `tracing` layer to install ([`subscriber::dispatch`] builds the
//!   process's subscriber) and is shut down with a bound. **Off, with no cost, when no endpoint
//!   is set**: nothing is built or started, and the spans below are disabled at their call
//!   sites.
//! - Export never holds a request: finished spans (sampled as `OTEL_TRACES_SAMPLER` says,
//!   [`TraceSampler`]) go to a bounded queue drained by the SDK's own thread; when it is full a
//!   span is dropped and counted ([`SPANS_DROPPED`] in `/metrics`, [`QueueStats`]); a
//!   collector that does not answer costs the export thread at most the export timeout per
//!   batch, and shutdown at most its bound.
//! - [`semconv`] names what is emitted (the MCP and GenAI semantic conventions), [`spans`]
//!   builds the spans and records usage, errors and (opt-in only) content, [`context`] reads the
//!   caller's W3C trace context from `params._meta` or HTTP headers and carries a span's
//!   context with a task ([`TraceCarrier`](context::TraceCarrier)), [`duration`] records
//!   `mcp.server.operation.duration`.
//!
//! The module stands alone: it uses its crates and its own settings, nothing else of this
//! crate, so the edge, the layers and the agent can all use it. No exporter header (a
//! collector's API key) is logged or printed.
//!
//! ```
//! use agent_mcp::telemetry::{Telemetry, TelemetrySettings};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // No endpoint: export is off and nothing is started.
//! let off = Telemetry::start(&TelemetrySettings::new("agent-mcp"), tokio::runtime::Handle::current());
//! assert!(off.unwrap().is_none());
//!
//! // With one, spans are batched and posted to http://127.0.0.1:4318/v1/traces.
//! let settings = TelemetrySettings::new("agent-mcp")
//!     .with_traces_endpoint("http://127.0.0.1:4318/v1/traces");
//! let telemetry = Telemetry::start(&settings, tokio::runtime::Handle::current())
//!     .unwrap()
//!     .expect("an endpoint is set");
//! assert_eq!(telemetry.traces_endpoint(), "http://127.0.0.1:4318/v1/traces");
//! assert_eq!(telemetry.stats().dropped(), 0);
//! # // Nothing listens there; shutdown gives up after its bound.
//! # let _ = tokio::task::spawn_blocking(move || telemetry.shutdown(std::time::Duration::from_millis(50))).await;
//! # }
//! ```

pub mod context;
pub mod duration;
mod error;
mod export;
mod health;
mod http_client;
mod otlp;
mod queue;
pub mod semconv;
mod settings;
pub mod spans;
pub mod subscriber;
#[cfg(test)]
mod testing;

pub use error::TelemetryError;
pub use export::{ExportLayer, Telemetry};
pub use queue::QueueStats;
pub use settings::{
    ResourceAttributesError, RootSampler, TelemetrySettings, TraceSampler,
    parse_resource_attributes,
};
pub use spans::ExportFilter;

/// Spans dropped because the export queue was full (Prometheus, `/metrics`).
pub const SPANS_DROPPED: &str = "agent_mcp_otel_spans_dropped_total";
/// OTLP export requests that failed, by `signal` (Prometheus, `/metrics`).
pub const EXPORT_FAILURES: &str = "agent_mcp_otel_export_failures_total";
