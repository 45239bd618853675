//! [`TelemetryError`]: why OpenTelemetry export could not start, or did not stop in time.
//!
//! No message holds an exporter header (they carry collectors' API keys) or a span's content.
//!
//! ```
//! use agent_mcp::telemetry::TelemetryError;
//!
//! let e = TelemetryError::Endpoint {
//!     key: "telemetry.endpoint",
//!     message: "\"ftp://collector\" is not an http:// or https:// URL".into(),
//! };
//! assert_eq!(
//!     e.to_string(),
//!     "telemetry.endpoint: \"ftp://collector\" is not an http:// or https:// URL"
//! );
//! ```

use std::time::Duration;

/// Why export could not start, or did not stop within its bound.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// An endpoint that cannot be exported to.
    #[error("{key}: {message}")]
    Endpoint { key: &'static str, message: String },
    /// The OTLP exporter refused its configuration (the exporter's own words).
    #[error("cannot build the OTLP {signal} exporter: {message}")]
    Exporter {
        signal: &'static str,
        message: String,
    },
    /// The HTTP client for the exporter could not be built.
    #[error("cannot build the HTTP client for OTLP export: {0}")]
    HttpClient(String),
    /// A thread export needs could not be started.
    #[error("cannot start the telemetry {what} thread: {source}")]
    Thread {
        what: &'static str,
        source: std::io::Error,
    },
    /// Shutting down did not finish in time; what was not yet sent is lost.
    #[error(
        "OpenTelemetry export did not finish within {0:?} of shutdown; spans and metrics not yet \
         sent are lost (is the collector reachable?)"
    )]
    ShutdownTimeout(Duration),
    /// Shutting down finished, but the final export failed.
    #[error("the final OpenTelemetry export failed: {0}")]
    Shutdown(String),
}
