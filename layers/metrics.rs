//! Request metrics: counts every MCP request by method and outcome, and times it.
//!
//! Outermost in the stack, so it sees every refusal the inner layers make (unauthorized, rate
//! limited, invalid arguments) as the [`Outcome`] the audit log also names (`ok`, `tool_error`, `protocol_error`,
//! `unauthorized`, `rate_limited`). It records through the `metrics` facade: without an
//! installed recorder it costs next to nothing.
//!
//! ```
//! use std::convert::Infallible;
//! use agent_mcp::layers::metrics::MetricsLayer;
//! use agent_mcp::protocol::{McpRequest, McpResponse, McpResult, ProtocolVersion, RequestContext, RequestId, Transport};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let svc = ServiceBuilder::new()
//!     .layer(MetricsLayer::new())
//!     .service_fn(|req: McpRequest| async move {
//!         Ok::<_, Infallible>(req.result(McpResult::empty()))
//!     });
//! let req = McpRequest {
//!     id: Some(RequestId::Number(1)),
//!     method: "tools/list".into(),
//!     params: Default::default(),
//!     ctx: RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
//!     call: None,
//! };
//! let resp: McpResponse = svc.oneshot(req).await.unwrap();
//! assert!(resp.error_code().is_none());
//! # }
//! ```

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use metrics::{Counter, Histogram};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::plugin::{McpRequest, McpResponse, Method, Outcome};

/// MCP requests by `method` and `outcome` (ok, tool_error, protocol_error, unauthorized,
/// rate_limited). Rate-limit refusals are the `outcome="rate_limited"` series.
pub const MCP_REQUESTS: &str = "agent_mcp_requests_total";
/// Seconds spent answering MCP requests, by `method`.
pub const MCP_REQUEST_SECONDS: &str = "agent_mcp_request_duration_seconds";

const METHOD_LABELS: [&str; 13] = Method::LABELS;

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

/// Wraps a service with [`Metrics`]. Build it after installing the metrics recorder (as
/// `agent-mcp serve` does): its series bind to the recorder installed when each is first used.
#[derive(Clone)]
pub struct MetricsLayer {
    series: Arc<Series>,
}

impl MetricsLayer {
    pub fn new() -> Self {
        Self {
            series: Arc::new(Series::new()),
        }
    }
}

impl Default for MetricsLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MetricsLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Metrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Metrics {
            inner,
            series: self.series.clone(),
        }
    }
}

/// Records `agent_mcp_requests_total{method, outcome}` and
/// `agent_mcp_request_duration_seconds{method}` for every request.
#[derive(Clone)]
pub struct Metrics<S> {
    inner: S,
    series: Arc<Series>,
}

impl<S: fmt::Debug> fmt::Debug for Metrics<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> Metrics<S> {
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> Service<McpRequest> for Metrics<S>
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    type Response = McpResponse;
    type Error = Infallible;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        let method = req.method.label_index();
        let started = Instant::now();
        ResponseFuture {
            future: self.inner.call(req),
            series: self.series.clone(),
            method,
            started,
        }
    }
}

pin_project! {
    /// The response future of [`Metrics`]: the inner future, then one record.
    pub struct ResponseFuture<F> {
        #[pin]
        future: F,
        series: Arc<Series>,
        method: usize,
        started: Instant,
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<McpResponse, Infallible>>,
{
    type Output = Result<McpResponse, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = std::task::ready!(this.future.poll(cx));
        this.series
            .record(*this.method, response.outcome(), *this.started);
        Poll::Ready(Ok(response))
    }
}
