//! [`Tasks`]: the service that routes task-related requests and passes the rest inward.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::ServiceExt;
use tower_service::Service;

use super::future::{ResponseFuture, Routed};
use super::layer::TasksLayer;
use super::{legacy, modern};
use crate::agent::AgentCore;
use crate::protocol::era::Era;
use crate::protocol::{ErrorObject, McpRequest, McpResponse};

/// Wraps an MCP service with task support. Built by [`TasksLayer`].
#[derive(Clone, Debug)]
pub struct Tasks<S> {
    inner: S,
    config: TasksLayer,
}

impl<S> Tasks<S> {
    pub fn new(inner: S, core: Arc<AgentCore>, ttl: Duration) -> Self {
        Self::from_layer(inner, TasksLayer::new(core, ttl))
    }

    pub(super) fn from_layer(inner: S, config: TasksLayer) -> Self {
        Self { inner, config }
    }

    /// A [`TasksLayer`] with these settings.
    pub fn layer(core: Arc<AgentCore>, ttl: Duration) -> TasksLayer {
        TasksLayer::new(core, ttl)
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> Service<McpRequest> for Tasks<S>
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = McpResponse;
    type Error = Infallible;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        // Most traffic (`agent_status`, `tools/list`) is not ours: hand it on as is, with no
        // clone and no boxed future.
        if passes_through(&req) {
            return ResponseFuture::Inner {
                future: self.inner.call(req),
            };
        }
        // The clone may not be ready; the one `poll_ready` prepared goes into the future.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        let future: Routed = Box::pin(async move { Ok(route(&config, Inner(inner), req).await) });
        ResponseFuture::Routed { future }
    }
}

/// True when [`route`] would only call the inner service with the request and return its
/// response unchanged.
fn passes_through(req: &McpRequest) -> bool {
    if req.is_notification() {
        return true;
    }
    match req.ctx.era() {
        Era::Modern => match req.method.as_str() {
            "server/discover" | "tasks/get" | "tasks/update" | "tasks/cancel" | "tasks/result"
            | "tasks/list" => false,
            "tools/call" => modern::passes_through(req),
            _ => true,
        },
        Era::Legacy => match req.method.as_str() {
            "initialize" | "tools/list" | "tasks/get" | "tasks/result" | "tasks/cancel"
            | "tasks/list" => false,
            "tools/call" => legacy::passes_through(req),
            _ => true,
        },
    }
}

/// The wrapped service, already polled ready, used at most once.
pub(super) struct Inner<S>(S);

impl<S> Inner<S>
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible> + Send,
    S::Future: Send,
{
    pub(super) async fn call(mut self, req: McpRequest) -> McpResponse {
        // `Tasks::poll_ready` readied this service; `ready` returns at once then.
        let Ok(svc) = self.0.ready().await;
        let Ok(response) = svc.call(req).await;
        response
    }
}

async fn route<S>(config: &TasksLayer, inner: Inner<S>, req: McpRequest) -> McpResponse
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible> + Send,
    S::Future: Send,
{
    if req.is_notification() {
        return inner.call(req).await;
    }
    match req.ctx.era() {
        Era::Modern => match req.method.as_str() {
            "server/discover" => modern::advertise(inner.call(req).await),
            "tools/call" => modern::tools_call(config, inner, req).await,
            "tasks/get" | "tasks/update" | "tasks/cancel" => modern::task_method(config, req).await,
            // The extension removed them; they are not ours to pass on either.
            "tasks/result" | "tasks/list" => {
                let method = req.method.clone();
                req.error(ErrorObject::method_not_found(&method))
            }
            _ => inner.call(req).await,
        },
        Era::Legacy => match req.method.as_str() {
            "initialize" => legacy::advertise(inner.call(req).await),
            "tools/list" => {
                let version = req.ctx.version;
                legacy::mark_task_support(version, inner.call(req).await)
            }
            "tools/call" => legacy::tools_call(config, inner, req).await,
            "tasks/get" | "tasks/result" | "tasks/cancel" => legacy::task_method(config, req).await,
            // Not advertised: a stateless server cannot scope a list to one client.
            "tasks/list" => {
                let method = req.method.clone();
                req.error(ErrorObject::method_not_found(&method))
            }
            _ => inner.call(req).await,
        },
    }
}
