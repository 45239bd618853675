//! Whether export works: failed export requests counted per signal in
//! [`EXPORT_FAILURES`](super::EXPORT_FAILURES) (`/metrics`), and logged once when an outage
//! begins and once when it ends, not once per batch (a collector down for an hour would
//! otherwise write a line every few seconds).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use opentelemetry_sdk::error::OTelSdkResult;

/// The export health of one signal (`traces`, `metrics`).
#[derive(Debug)]
pub(super) struct ExportHealth {
    signal: &'static str,
    failed: AtomicU64,
    /// Whether the last export failed.
    failing: AtomicBool,
}

impl ExportHealth {
    pub(super) const fn new(signal: &'static str) -> Self {
        Self {
            signal,
            failed: AtomicU64::new(0),
            failing: AtomicBool::new(false),
        }
    }

    /// Export requests that failed so far.
    pub(super) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Counts and reports one export's result.
    pub(super) fn finished(&self, result: &OTelSdkResult) {
        match result {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(signal = self.signal, "OpenTelemetry export works again");
                }
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(super::EXPORT_FAILURES, "signal" => self.signal).increment(1);
                if !self.failing.swap(true, Ordering::Relaxed) {
                    // The exporter's message names an HTTP status or "network error", never a
                    // header or what was exported.
                    tracing::warn!(
                        signal = self.signal,
                        "OpenTelemetry export failed ({e}); what is not sent is lost until the \
                         collector answers (agent_mcp_otel_export_failures_total counts them)"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_sdk::error::OTelSdkError;

    use super::*;

    #[test]
    fn failures_are_counted_each_time_and_the_outage_tracked() {
        let health = ExportHealth::new("traces");
        let failed: OTelSdkResult = Err(OTelSdkError::InternalFailure(
            "HTTP export failed: network error".into(),
        ));
        health.finished(&failed);
        health.finished(&failed);
        assert_eq!(health.failed(), 2);
        assert!(health.failing.load(Ordering::Relaxed));
        health.finished(&Ok(()));
        assert!(!health.failing.load(Ordering::Relaxed));
        assert_eq!(health.failed(), 2);
    }
}
