//! Closure and async forms of [`Check`] and [`Around`], in the style of tower-http's
//! `on_request`: a layer that only needs a few lines is a closure, and a layer that does I/O
//! (reads a file, asks another service) is an `async` block, with no `Service` of its own to
//! write.
//!
//! - [`check_fn`]: a synchronous [`Check`] from `Fn(&mut McpRequest) -> Result<(), McpResponse>`.
//! - [`around_fn`] and [`finish_fn`]: an [`Around`] from a closure returning what runs once the
//!   response is there.
//! - [`AsyncCheck`] (and [`async_check_fn`]): a check that awaits; it takes the request by
//!   value and hands it back (or an answer instead), so its future owns what it holds across an
//!   `.await`. [`AsyncGateLayer`] runs it.
//! - [`AsyncAround`]: the same with a [`Finish`]; [`AsyncWrapLayer`] runs it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use agent_mcp_plugin::{
//!     AsyncGateLayer, McpRequest, McpResponse, McpResult, Method, async_check_fn,
//! };
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! // Refuses `tools/list` unless a (slow, remote) switch says yes: an async check.
//! let gate = AsyncGateLayer::new(async_check_fn(|req: McpRequest| async move {
//!     let open = tokio::task::yield_now().await == (); // stands for a lookup
//!     match req.method {
//!         Method::ToolsList if !open => Err(req.result(McpResult::tool_text("closed", true))),
//!         _ => Ok(req),
//!     }
//! }));
//! let svc = ServiceBuilder::new()
//!     .layer(gate)
//!     .service_fn(|req: McpRequest| async move {
//!         Ok::<_, std::convert::Infallible>(req.result(McpResult::empty()))
//!     });
//! # let _ = svc;
//! # }
//! ```

use crate::McpService;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::{Around, Check, Finish, McpRequest, McpResponse};

/// A [`Check`] made of a closure ([`check_fn`]).
#[derive(Clone, Copy, Debug)]
pub struct CheckFn<F>(F);

/// A [`Check`] from a closure: `Ok(())` passes the request on (changed or not), `Err` answers
/// it. `GateLayer::new(check_fn(|req| …))` is the layer.
pub fn check_fn<F>(f: F) -> CheckFn<F>
where
    F: Fn(&mut McpRequest) -> Result<(), McpResponse>,
{
    CheckFn(f)
}

impl<F> Check for CheckFn<F>
where
    F: Fn(&mut McpRequest) -> Result<(), McpResponse>,
{
    fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
        (self.0)(req)
    }
}

/// An [`Around`] made of a closure ([`around_fn`]).
#[derive(Clone, Copy, Debug)]
pub struct AroundFn<F>(F);

/// An [`Around`] from a closure that looks at the request and returns its [`Finish`] (often a
/// [`finish_fn`]); `WrapLayer::new(around_fn(|req| …))` is the layer.
pub fn around_fn<F, P>(f: F) -> AroundFn<F>
where
    F: Fn(&mut McpRequest) -> Result<P, McpResponse>,
    P: Finish,
{
    AroundFn(f)
}

impl<F, P> Around for AroundFn<F>
where
    F: Fn(&mut McpRequest) -> Result<P, McpResponse>,
    P: Finish,
{
    type Pending = P;

    fn before(&self, req: &mut McpRequest) -> Result<P, McpResponse> {
        (self.0)(req)
    }
}

/// A [`Finish`] made of a closure ([`finish_fn`]).
#[derive(Clone, Copy, Debug)]
pub struct FinishFn<F>(F);

/// A [`Finish`] from a closure run once on the response.
pub fn finish_fn<F: FnOnce(&mut McpResponse)>(f: F) -> FinishFn<F> {
    FinishFn(f)
}

impl<F: FnOnce(&mut McpResponse)> Finish for FinishFn<F> {
    fn finish(self, response: &mut McpResponse) {
        (self.0)(response)
    }
}

/// A check that awaits (reads a file, asks another service) before the request goes on.
///
/// It takes the request by value and returns it (changed or not), or the answer that replaces
/// the inner service's, so nothing is borrowed across an `.await`. `async fn check` in an impl
/// is the usual way to write one.
pub trait AsyncCheck: Send + Sync + 'static {
    fn check(
        &self,
        req: McpRequest,
    ) -> impl Future<Output = Result<McpRequest, McpResponse>> + Send;
}

/// An [`AsyncAround`] running an [`AsyncCheck`], with nothing to do on the response.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncGated<C>(pub C);

impl<C> From<C> for AsyncGated<C> {
    fn from(check: C) -> Self {
        AsyncGated(check)
    }
}

impl<C: AsyncCheck> AsyncAround for AsyncGated<C> {
    type Pending = ();

    async fn before(&self, req: McpRequest) -> Result<(McpRequest, ()), McpResponse> {
        self.0.check(req).await.map(|req| (req, ()))
    }
}

/// An [`AsyncCheck`] made of a closure returning a future ([`async_check_fn`]).
#[derive(Clone, Copy, Debug)]
pub struct AsyncCheckFn<F>(F);

/// An [`AsyncCheck`] from `|req| async move { … Ok(req) }`; `AsyncGateLayer::new(…)` is the
/// layer.
pub fn async_check_fn<F, Fut>(f: F) -> AsyncCheckFn<F>
where
    F: Fn(McpRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<McpRequest, McpResponse>> + Send,
{
    AsyncCheckFn(f)
}

impl<F, Fut> AsyncCheck for AsyncCheckFn<F>
where
    F: Fn(McpRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<McpRequest, McpResponse>> + Send,
{
    fn check(
        &self,
        req: McpRequest,
    ) -> impl Future<Output = Result<McpRequest, McpResponse>> + Send {
        (self.0)(req)
    }
}

/// An [`Around`] whose first half awaits: it takes the request by value and returns it with
/// what its [`Finish`] needs, or the answer that replaces the inner service's.
pub trait AsyncAround: Send + Sync + 'static {
    /// What `before` learnt that `finish` needs.
    type Pending: Finish + Send;

    #[allow(clippy::type_complexity)]
    fn before(
        &self,
        req: McpRequest,
    ) -> impl Future<Output = Result<(McpRequest, Self::Pending), McpResponse>> + Send;
}

/// The response future of an [`AsyncWrap`]: boxed, since the check's future is the caller's.
pub type BoxResponseFuture =
    Pin<Box<dyn Future<Output = Result<McpResponse, Infallible>> + Send + 'static>>;

/// A layer that runs an [`AsyncAround`] on each request and its response (an
/// [`AsyncGate`] runs an [`AsyncCheck`]). The inner service is cloned per call, as tower's
/// own async middleware does, so the one made ready is the one called.
#[derive(Debug)]
pub struct AsyncWrap<S, A> {
    inner: S,
    around: Arc<A>,
}

impl<S: Clone, A> Clone for AsyncWrap<S, A> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            around: self.around.clone(),
        }
    }
}

impl<S, A> AsyncWrap<S, A> {
    /// `config` is the [`AsyncAround`] itself, or what it is built from.
    pub fn new(inner: S, config: impl Into<A>) -> Self {
        Self {
            inner,
            around: Arc::new(config.into()),
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: McpService, A: AsyncAround> Service<McpRequest> for AsyncWrap<S, A> {
    type Response = McpResponse;
    type Error = Infallible;
    type Future = BoxResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        let fresh = self.inner.clone();
        let mut ready = std::mem::replace(&mut self.inner, fresh);
        let around = self.around.clone();
        Box::pin(async move {
            match around.before(req).await {
                Err(answer) => Ok(answer),
                Ok((req, pending)) => {
                    let Ok(mut response) = ready.call(req).await;
                    pending.finish(&mut response);
                    Ok(response)
                }
            }
        })
    }
}

/// Applies an [`AsyncWrap`] with the given [`AsyncAround`] to a service.
#[derive(Debug)]
pub struct AsyncWrapLayer<A> {
    around: Arc<A>,
}

impl<A> Clone for AsyncWrapLayer<A> {
    fn clone(&self) -> Self {
        Self {
            around: self.around.clone(),
        }
    }
}

impl<A> AsyncWrapLayer<A> {
    /// A layer running `around`.
    pub fn with(around: A) -> Self {
        Self {
            around: Arc::new(around),
        }
    }

    /// A layer running the [`AsyncAround`] `config` converts into (an [`AsyncCheck`] converts
    /// into [`AsyncGated`]).
    pub fn new(config: impl Into<A>) -> Self {
        Self {
            around: Arc::new(config.into()),
        }
    }

    /// The [`AsyncAround`] (the layer's configuration).
    pub fn around_ref(&self) -> &A {
        &self.around
    }
}

impl<S, A> Layer<S> for AsyncWrapLayer<A> {
    type Service = AsyncWrap<S, A>;

    fn layer(&self, inner: S) -> Self::Service {
        AsyncWrap {
            inner,
            around: self.around.clone(),
        }
    }
}

/// A layer that runs an [`AsyncCheck`] on each request.
pub type AsyncGate<S, C> = AsyncWrap<S, AsyncGated<C>>;

/// Applies an [`AsyncGate`] with the given [`AsyncCheck`] to a service.
pub type AsyncGateLayer<C> = AsyncWrapLayer<AsyncGated<C>>;

#[cfg(test)]
// A closure answering with an `McpResponse` is a large `Err`, as every check's is.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;
    use crate::{
        GateLayer, McpResult, Method, Payload, ProtocolVersion, RequestContext, RequestId,
        Transport, WrapLayer,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::{ServiceBuilder, ServiceExt};

    fn request(method: &str) -> McpRequest {
        McpRequest::new(
            Some(RequestId::Number(1)),
            method,
            serde_json::Map::new(),
            RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
        )
    }

    async fn answer(req: McpRequest) -> Result<McpResponse, Infallible> {
        Ok(req.result(McpResult::tool_text("inner", false)))
    }

    fn text_of(response: &McpResponse) -> String {
        match &response.payload {
            Payload::Result(result) => format!("{result:?}"),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_closure_check_answers_or_passes() {
        let svc = ServiceBuilder::new()
            .layer(GateLayer::new(check_fn(|req: &mut McpRequest| {
                match req.method {
                    Method::ToolsList => Err(req.result(McpResult::tool_text("refused", true))),
                    _ => Ok(()),
                }
            })))
            .service_fn(answer);
        let refused = svc.clone().oneshot(request("tools/list")).await.unwrap();
        assert!(
            text_of(&refused).contains("refused"),
            "{}",
            text_of(&refused)
        );
        let passed = svc.oneshot(request("ping")).await.unwrap();
        assert!(text_of(&passed).contains("inner"), "{}", text_of(&passed));
    }

    #[tokio::test]
    async fn a_closure_around_sees_the_response() {
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let svc = ServiceBuilder::new()
            .layer(WrapLayer::with(around_fn(move |_req: &mut McpRequest| {
                let counter = counter.clone();
                Ok(finish_fn(move |response: &mut McpResponse| {
                    if text_of(response).contains("inner") {
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                }))
            })))
            .service_fn(answer);
        svc.oneshot(request("ping")).await.unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_async_check_awaits_then_answers_or_passes() {
        let svc = ServiceBuilder::new()
            .layer(AsyncGateLayer::new(async_check_fn(
                |req: McpRequest| async move {
                    tokio::task::yield_now().await;
                    match req.method {
                        Method::ToolsList => {
                            Err(req.result(McpResult::tool_text("refused later", true)))
                        }
                        _ => Ok(req),
                    }
                },
            )))
            .service_fn(answer);
        let refused = svc.clone().oneshot(request("tools/list")).await.unwrap();
        assert!(text_of(&refused).contains("refused later"));
        let passed = svc.oneshot(request("ping")).await.unwrap();
        assert!(text_of(&passed).contains("inner"));
    }

    /// An `AsyncAround` written with `async fn`, its finish seeing the inner answer.
    struct Stamp;

    impl AsyncAround for Stamp {
        type Pending = FinishFn<fn(&mut McpResponse)>;

        async fn before(
            &self,
            req: McpRequest,
        ) -> Result<(McpRequest, Self::Pending), McpResponse> {
            tokio::task::yield_now().await;
            let stamp: fn(&mut McpResponse) = |response| response.identity = Some("stamped".into());
            Ok((req, finish_fn(stamp)))
        }
    }

    #[tokio::test]
    async fn an_async_around_finishes_on_the_inner_answer() {
        let svc = ServiceBuilder::new()
            .layer(AsyncWrapLayer::with(Stamp))
            .service_fn(answer);
        let response = svc.oneshot(request("ping")).await.unwrap();
        assert_eq!(response.identity.as_deref(), Some("stamped"));
        assert!(text_of(&response).contains("inner"));
    }
}
