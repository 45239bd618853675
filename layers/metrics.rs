//! Request metrics: counts every MCP request by method and outcome, and times it.
//!
//! Outermost in the stack, so it sees every refusal the inner layers make (unauthorized, rate
//! limited, invalid arguments) as the [`Outcome`] the audit log also names (`ok`, `tool_error`, `protocol_error`,
//! `unauthorized`, `rate_limited`). It records through the `metrics` facade: without an
//! installed recorder it costs next to nothing.
//!
//! ```
//! use std::convert::Infallible;
//! use agent_mcp_layers::metrics::MetricsLayer;
//! use agent_mcp_layers::plugin::{McpRequest, McpResponse, McpResult, ProtocolVersion, RequestContext, RequestId, Transport};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let svc = ServiceBuilder::new()
//!     .layer(MetricsLayer::default())
//!     .service_fn(|req: McpRequest| async move {
//!         Ok::<_, Infallible>(req.result(McpResult::empty()))
//!     });
//! let req = McpRequest::new(
//!     Some(RequestId::Number(1)),
//!     "tools/list",
//!     Default::default(),
//!     RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
//! );
//! let resp: McpResponse = svc.oneshot(req).await.unwrap();
//! assert!(resp.error_code().is_none());
//! # }
//! ```

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use metrics::{Counter, Histogram};

use crate::plugin::{Around, Finish, McpRequest, McpResponse, Method, Outcome, Wrap, WrapLayer};

/// MCP requests by `method` and `outcome` (ok, tool_error, protocol_error, unauthorized,
/// rate_limited). Rate-limit refusals are the `outcome="rate_limited"` series.
pub const MCP_REQUESTS: &str = "agent_mcp_requests_total";
/// Seconds spent answering MCP requests, by `method`.
pub const MCP_REQUEST_SECONDS: &str = "agent_mcp_request_duration_seconds";

const METHOD_LABELS: [&str; 14] = Method::LABELS;

/// Handles of every series this layer records, each registered with the installed recorder
/// on first use. Recording through a handle is an atomic add; the `counter!`/`histogram!`
/// macros would build and look up a labelled key on every request. Series never used are
/// never registered, so `/metrics` lists only what happened.
struct Series {
    requests: [[OnceLock<Counter>; Outcome::COUNT]; METHOD_LABELS.len()],
    durations: [OnceLock<Histogram>; METHOD_LABELS.len()],
}

impl Series {
    fn new() -> Self {
        Self {
            requests: [const { [const { OnceLock::new() }; Outcome::COUNT] }; METHOD_LABELS.len()],
            durations: [const { OnceLock::new() }; METHOD_LABELS.len()],
        }
    }

    fn record(&self, method: usize, outcome: Outcome, started: Instant) {
        let method = method.min(METHOD_LABELS.len() - 1);
        let label = METHOD_LABELS[method];
        self.requests[method][outcome.index()]
            .get_or_init(|| {
                metrics::counter!(MCP_REQUESTS, "method" => label, "outcome" => outcome.as_str())
            })
            .increment(1);
        self.durations[method]
            .get_or_init(|| metrics::histogram!(MCP_REQUEST_SECONDS, "method" => label))
            .record(started.elapsed().as_secs_f64());
    }
}

/// The metrics layer's [`Around`]: the handles of its series, shared by every clone.
#[derive(Clone)]
pub struct Recorder {
    series: Arc<Series>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            series: Arc::new(Series::new()),
        }
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

/// Wraps a service with [`Metrics`]. Build it after installing the metrics recorder (as
/// `agent-mcp serve` does): its series bind to the recorder installed when each is first used.
pub type MetricsLayer = WrapLayer<Recorder>;

/// Records `agent_mcp_requests_total{method, outcome}` and
/// `agent_mcp_request_duration_seconds{method}` for every request.
pub type Metrics<S> = Wrap<S, Recorder>;

/// One request being timed.
pub struct Timing {
    series: Arc<Series>,
    method: usize,
    started: Instant,
}

impl Around for Recorder {
    type Pending = Timing;

    fn before(&self, req: &mut McpRequest) -> Result<Timing, McpResponse> {
        Ok(Timing {
            series: self.series.clone(),
            method: req.method.label_index(),
            started: Instant::now(),
        })
    }
}

impl Finish for Timing {
    fn finish(self, response: &mut McpResponse) {
        self.series
            .record(self.method, response.outcome(), self.started);
    }
}
