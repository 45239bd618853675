//! Request metrics: counts every MCP request by method and outcome, and times it.
//!
//! Outermost in the stack, so it sees every refusal the inner layers make (401, 429, invalid
//! arguments) as the outcome the audit log names (`ok`, `tool_error`, `protocol_error`,
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
//! };
//! let resp: McpResponse = svc.oneshot(req).await.unwrap();
//! assert!(resp.error_code().is_none());
//! # }
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::layers::audit::Outcome;
use crate::protocol::{McpRequest, McpResponse};

/// Wraps a service with [`Metrics`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MetricsLayer;

impl MetricsLayer {
    pub const fn new() -> Self {
        MetricsLayer
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Metrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Metrics { inner }
    }
}

/// Records `agent_mcp_requests_total{method, outcome}` and
/// `agent_mcp_request_duration_seconds{method}` for every request.
#[derive(Clone, Debug)]
pub struct Metrics<S> {
    inner: S,
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
        let method = crate::metrics::method_label(&req.method);
        let started = Instant::now();
        ResponseFuture {
            future: self.inner.call(req),
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
        method: &'static str,
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
        let outcome = Outcome::of(&response).as_str();
        crate::metrics::record_request_labelled(this.method, outcome, this.started.elapsed());
        Poll::Ready(Ok(response))
    }
}
