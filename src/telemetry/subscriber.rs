//! The process's `tracing` subscriber: log lines (text or JSON, filtered by `RUST_LOG`) to a
//! writer of the caller's, and the export layer when [`Telemetry`] runs.
//!
//! The two outputs are filtered apart. The log filter always turns the export spans' target
//! ([`super::semconv::TARGET`]) off, so `RUST_LOG=debug` never prints span fields as log
//! context and, with export off, no layer is interested in those spans: they are disabled at
//! their call site. The export layer takes those spans only, whatever `RUST_LOG` says, and no
//! log event.
//!
//! ```
//! use agent_mcp::telemetry::spans::McpServerSpan;
//! use agent_mcp::telemetry::subscriber::{LogFormat, dispatch};
//! use tracing_subscriber::fmt::writer::BoxMakeWriter;
//!
//! let logs = dispatch(
//!     LogFormat::Text,
//!     false,
//!     tracing_subscriber::EnvFilter::new("debug"),
//!     None,
//!     BoxMakeWriter::new(std::io::sink),
//! );
//! tracing::dispatcher::with_default(&logs, || {
//!     // Export is off: the span is disabled where it is built, whatever RUST_LOG says.
//!     assert!(McpServerSpan::new("tools/list").start().is_disabled());
//! });
//! ```

use tracing::Dispatch;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;

use super::Telemetry;
use super::semconv::TARGET;

/// How log lines look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// For people.
    Text,
    /// One JSON object per line, for machines.
    Json,
}

/// `filter` with the export spans' target turned off (see the module docs).
pub fn log_filter(filter: EnvFilter) -> EnvFilter {
    // `TARGET=off` always parses (a unit test holds it to that).
    match format!("{TARGET}=off").parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// The subscriber: log lines to `writer` (colours when `ansi`), export when `telemetry` is
/// given.
pub fn dispatch(
    format: LogFormat,
    ansi: bool,
    filter: EnvFilter,
    telemetry: Option<&Telemetry>,
    writer: BoxMakeWriter,
) -> Dispatch {
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        // Its own reports of a failed write would go to stderr with `eprintln!`, which panics
        // when stderr is closed; the server's writer never fails a write anyway.
        .log_internal_errors(false);
    let logs = match format {
        LogFormat::Text => fmt.with_ansi(ansi).boxed(),
        LogFormat::Json => fmt.json().with_ansi(false).boxed(),
    }
    .with_filter(log_filter(filter));
    let registry = Registry::default().with(logs);
    // Two arms, not an `Option` layer: an absent `Option` layer still declares interest in
    // every call site, which would make the export spans cost something when export is off.
    match telemetry {
        Some(telemetry) => Dispatch::new(registry.with(telemetry.layer())),
        None => Dispatch::new(registry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_export_target_is_off_in_the_log_filter() {
        let filter = log_filter(EnvFilter::new("trace"));
        assert!(
            filter.to_string().contains("agent_mcp::otel=off"),
            "{filter}"
        );
    }
}
