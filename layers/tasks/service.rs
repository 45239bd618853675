//! [`Tasks`]: the service that routes task-related requests and passes the rest inward.

use crate::plugin::McpService;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::backend::TaskBackend;
use super::future::{ResponseFuture, Routed};
use super::inner::{Inner, Stack};
use super::layer::{TasksConfig, TasksLayer};
use super::{legacy, listen, modern};
use crate::plugin::Era;
use crate::plugin::{ErrorObject, McpRequest, McpResponse, Method};

/// Wraps an MCP service with task support. Built by [`TasksLayer`].
#[derive(Debug)]
pub struct Tasks<S, B> {
    inner: S,
    config: TasksLayer<B>,
}

// Not derived: that would ask for `B: Clone`.
impl<S: Clone, B> Clone for Tasks<S, B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S, B: TaskBackend> Tasks<S, B> {
    pub fn new(inner: S, backend: Arc<B>, config: TasksConfig) -> Self {
        Self::from_layer(inner, TasksLayer::new(backend, config))
    }

    pub(super) fn from_layer(inner: S, config: TasksLayer<B>) -> Self {
        Self { inner, config }
    }

    crate::plugin::inner_accessors!(S);
}

impl<S: McpService, B: TaskBackend> Service<McpRequest> for Tasks<S, B> {
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
        let route = Route::of(&req);
        if route == Route::PassThrough {
            return ResponseFuture::Inner {
                future: self.inner.call(req),
            };
        }
        // The clone may not be ready; the one `poll_ready` prepared goes into the future.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        let future: Routed =
            Box::pin(async move { Ok(serve(route, &config, Inner(inner), req).await) });
        ResponseFuture::Routed { future }
    }
}

/// What the layer does with a request. [`Route::of`] is the one routing table: the service
/// dispatches on it, and a request routed [`Route::PassThrough`] reaches the inner service
/// unchanged, its response unchanged too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// Not the layer's: the inner service answers alone.
    PassThrough,
    /// 2026-07-28 `server/discover`: the inner answer gains the extension.
    Discover,
    /// 2026-07-28 `tools/call` of `agent_run` from a request that declared the extension.
    ModernCreate,
    /// 2026-07-28 `tasks/get`, `tasks/update`, `tasks/cancel`.
    ModernTask,
    /// 2026-07-28 `subscriptions/listen`.
    Listen,
    /// 2025 `initialize`: the inner answer gains `capabilities.tasks` (2025-11-25 only).
    Initialize,
    /// 2025 `tools/list`: the inner answer marks `agent_run` (2025-11-25 only).
    ListTools,
    /// 2025 `tools/call` with `params.task`.
    LegacyCreate,
    /// 2025 `tasks/get`, `tasks/result`, `tasks/cancel`.
    LegacyTask,
    /// `tasks/*` methods the era does not offer (the extension removed `tasks/result` and
    /// `tasks/list`; a stateless server cannot scope a 2025 `tasks/list` to one client): -32601,
    /// not ours to pass on either.
    NotOffered,
}

impl Route {
    pub(super) fn of(req: &McpRequest) -> Route {
        if req.is_notification() {
            return Route::PassThrough;
        }
        match req.ctx.era() {
            Era::Modern => match req.method {
                Method::ServerDiscover => Route::Discover,
                Method::ToolsCall if !modern::creates_task(req) => Route::PassThrough,
                Method::ToolsCall => Route::ModernCreate,
                Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Route::ModernTask,
                Method::SubscriptionsListen => Route::Listen,
                Method::TasksResult | Method::TasksList => Route::NotOffered,
                _ => Route::PassThrough,
            },
            Era::Legacy => match req.method {
                Method::Initialize => Route::Initialize,
                Method::ToolsList => Route::ListTools,
                Method::ToolsCall if !legacy::asks_for_task(req) => Route::PassThrough,
                Method::ToolsCall => Route::LegacyCreate,
                Method::TasksGet | Method::TasksResult | Method::TasksCancel => Route::LegacyTask,
                Method::TasksList => Route::NotOffered,
                _ => Route::PassThrough,
            },
        }
    }
}

async fn serve<S: Stack, B: TaskBackend>(
    route: Route,
    config: &TasksLayer<B>,
    inner: Inner<S>,
    req: McpRequest,
) -> McpResponse {
    match route {
        Route::PassThrough => inner.call(req).await,
        Route::Discover => modern::advertise(inner.call(req).await),
        Route::ModernCreate => modern::tools_call(config, inner, req).await,
        Route::ModernTask => modern::task_method(config, req).await,
        Route::Listen => listen::listen(config, req).await,
        Route::Initialize => legacy::advertise(inner.call(req).await),
        Route::ListTools => {
            let version = req.ctx.version;
            legacy::mark_task_support(version, inner.call(req).await)
        }
        Route::LegacyCreate => legacy::tools_call(config, inner, req).await,
        Route::LegacyTask => legacy::task_method(config, req).await,
        Route::NotOffered => req.error(ErrorObject::method_not_found(req.method.as_str())),
    }
}

impl<S, B: TaskBackend> Layer<S> for TasksLayer<B> {
    type Service = Tasks<S, B>;

    fn layer(&self, inner: S) -> Tasks<S, B> {
        Tasks::from_layer(inner, self.clone())
    }
}
