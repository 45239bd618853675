//! The plugin surface of agent-mcp: everything a tower layer around the agent needs, in one
//! crate of its own.
//!
//! A layer of the stack is a `tower::Layer` over
//! `Service<McpRequest, Response = McpResponse, Error = Infallible>`. Writing one needs only
//! this crate (the server re-exports it as `agent_mcp::plugin`). The built-in layers
//! (the `agent-mcp-layers` crate) depend on this crate and on nothing else of agent-mcp, so the
//! compiler holds them to the surface a layer of your own has:
//!
//! - the protocol types: [`McpRequest`] (with its [`Method`], already parsed, and its
//!   [`RequestContext`]: version, client capabilities, identity, transport, cancel token),
//!   [`McpResponse`], [`McpResult`], [`Payload`], [`ErrorObject`], how a request ended
//!   ([`Outcome`]), a typed [`Refusal`] that each transport maps (HTTP to a status and headers,
//!   stdio to a JSON-RPC error), and the caller's [`Credential`], read once at the edge (no
//!   layer sees raw headers);
//! - the tool argument types: [`ToolCall`] and its [`RunArgs`], [`StatusArgs`], [`ImageArg`],
//!   parsed once ([`McpRequest::parse_tool_call`]) and carried on the request, and
//!   [`invalid_args`] for the contract's `Invalid arguments for tool` answer;
//! - the task model ([`Task`], [`TaskState`]) for layers that serve tasks;
//! - [`Wrap`]: the `Service`, `Layer`, accessors and response future of a layer, written
//!   once. The layer itself is an [`Around`]: its `before` looks at the request (or answers
//!   it instead) and returns what its [`Finish`] needs once the inner service has answered
//!   (metrics, audit, auth). A layer that only looks at requests is a [`Check`], run by a
//!   [`Gate`] (validate, images, rate_limit).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use agent_mcp_plugin::{Check, GateLayer, Gated, McpRequest, McpResponse, McpResult, Method};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! /// Refuses `tools/list` (a plugin of your own, in your own crate).
//! #[derive(Clone)]
//! struct NoListing;
//!
//! impl Check for NoListing {
//!     fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
//!         match req.method {
//!             Method::ToolsList => Err(req.result(McpResult::tool_text("not here", true))),
//!             _ => Ok(()),
//!         }
//!     }
//! }
//!
//! let svc = ServiceBuilder::new()
//!     .layer(GateLayer::with(Gated(NoListing)))
//!     .service_fn(|req: McpRequest| async move {
//!         Ok::<_, std::convert::Infallible>(req.result(McpResult::empty()))
//!     });
//! # let _ = svc;
//! # }
//! ```

pub mod closures;
pub mod protocol;
pub mod redact;
#[doc(hidden)]
pub mod serde_with;
pub mod task;
pub mod tools;

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

pub use crate::closures::{
    AroundFn, AsyncAround, AsyncCheck, AsyncCheckFn, AsyncGate, AsyncGateLayer, AsyncGated,
    AsyncWrap, AsyncWrapLayer, BoxResponseFuture, CheckFn, FinishFn, around_fn, async_check_fn,
    check_fn, finish_fn,
};
pub use crate::protocol::{
    BearerToken, Credential, Era, ErrorObject, Grants, InitializeParams, ListenParams, McpRequest,
    McpResponse, McpResult, MessageStream, Method, Outcome, Params, ParsedCall, Payload,
    ProtocolVersion, Refusal, RequestContext, RequestId, RequestParts, ResponseIds, ResultBody,
    ResultKind, STDIO_IDENTITY, SetLevelParams, StreamSlot, TaskParams, TaskUpdateParams,
    ToolsCallParams, Transport, VerifiedBearer, code, invalid_args,
};
pub use crate::redact::redact_urls_in;
pub use crate::task::events::{Follower, TaskEvents};
pub use crate::task::{Task, TaskState, TraceCarrier};
pub use crate::tools::args::{MAX_ELEMENT_LINES, parse_uuid, quote, type_of};
pub use crate::tools::{
    AGENT_RUN, AGENT_STATUS, CheckedImage, ImageArg, ImageLimits, ImageType, RunArgs, StatusArgs,
    ToolCall, agent_run_schema, agent_status_schema, input_schema,
};

/// What a gate layer decides about one request, before the inner service sees it: the
/// simplest [`Around`], with nothing to do once the response is there.
pub trait Check {
    /// Pass the request on (changed or not), or answer it: the answer is a finished response
    /// (a refusal, a tool error), never a `Service::Error`.
    #[allow(clippy::result_large_err)]
    fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse>;
}

/// A [`Check`] as an [`Around`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Gated<C>(pub C);

impl<C: Check> Around for Gated<C> {
    type Pending = ();

    fn before(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
        self.0.check(req)
    }
}

impl<C> From<C> for Gated<C> {
    fn from(check: C) -> Self {
        Gated(check)
    }
}

/// A layer that runs a [`Check`] on each request (validate, images and rate_limit are
/// `Gate`s).
pub type Gate<S, C> = Wrap<S, Gated<C>>;

/// Applies a [`Gate`] with the given [`Check`] to a service.
pub type GateLayer<C> = WrapLayer<Gated<C>>;

/// What a wrapping layer does around the inner service: look at the request (or answer it
/// instead), then see the response.
pub trait Around {
    /// What `before` learnt that `finish` needs.
    type Pending: Finish;

    /// Runs before the inner service; an `Err` answers the request without calling it.
    #[allow(clippy::result_large_err)]
    fn before(&self, req: &mut McpRequest) -> Result<Self::Pending, McpResponse>;
}

/// The second half of an [`Around`]: runs once the inner service has answered.
pub trait Finish {
    fn finish(self, response: &mut McpResponse);
}

impl Finish for () {
    fn finish(self, _response: &mut McpResponse) {}
}

/// A service of MCP requests that a transport or a layer can clone into spawned tasks:
/// infallible, `Clone`, `Send` with its future, and `'static`. Every such service is one; the
/// trait only names the bound.
pub trait McpService:
    Service<McpRequest, Response = McpResponse, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<S> McpService for S where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static
{
}

/// The accessors of a service that wraps another in its `inner` field, as tower's own
/// middleware has them: `get_ref`, `get_mut` and `into_inner`. Written in the wrapper's
/// `impl` block, with the inner service's type:
///
/// ```
/// use agent_mcp_plugin::inner_accessors;
///
/// struct Logged<S> {
///     inner: S,
/// }
///
/// impl<S> Logged<S> {
///     inner_accessors!(S);
/// }
///
/// assert_eq!(Logged { inner: 7 }.into_inner(), 7);
/// ```
#[macro_export]
macro_rules! inner_accessors {
    ($inner:ty) => {
        /// The wrapped service.
        pub fn get_ref(&self) -> &$inner {
            &self.inner
        }

        /// The wrapped service, to change.
        pub fn get_mut(&mut self) -> &mut $inner {
            &mut self.inner
        }

        /// The wrapped service, this one taken apart.
        pub fn into_inner(self) -> $inner {
            self.inner
        }
    };
}

/// A layer that runs an [`Around`] on each request and its response: the `Service` of every
/// such layer, written once (metrics, audit and auth are `Wrap`s).
#[derive(Clone, Debug)]
pub struct Wrap<S, A> {
    inner: S,
    around: A,
}

impl<S, A> Wrap<S, A> {
    /// `config` is the [`Around`] itself, or what it is built from.
    pub fn new(inner: S, config: impl Into<A>) -> Self {
        Self {
            inner,
            around: config.into(),
        }
    }

    /// The [`Around`] (the layer's configuration).
    pub fn around_ref(&self) -> &A {
        &self.around
    }

    inner_accessors!(S);
}

impl<S, A> Service<McpRequest> for Wrap<S, A>
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
    A: Around,
{
    type Response = McpResponse;
    type Error = Infallible;
    type Future = WrapFuture<S::Future, A::Pending>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: McpRequest) -> Self::Future {
        match self.around.before(&mut req) {
            Ok(pending) => WrapFuture::Inner {
                future: self.inner.call(req),
                pending: Some(pending),
            },
            Err(answer) => WrapFuture::Answered {
                response: std::future::ready(Ok(answer)),
            },
        }
    }
}

/// Applies a [`Wrap`] with the given [`Around`] to a service.
#[derive(Clone, Copy, Debug, Default)]
pub struct WrapLayer<A> {
    around: A,
}

impl<A> WrapLayer<A> {
    /// A wrapping layer running `around`.
    pub const fn with(around: A) -> Self {
        Self { around }
    }

    /// A wrapping layer running the [`Around`] `config` converts into: how a layer of its own
    /// is built (`AuthLayer::new(tokens)`, `ImagesLayer::new(ImageRules(limits))` with
    /// `type ImagesLayer = GateLayer<ImageRules>`), with no constructor of its own to write.
    pub fn new(config: impl Into<A>) -> Self {
        Self {
            around: config.into(),
        }
    }

    /// The [`Around`] (the layer's configuration).
    pub fn around_ref(&self) -> &A {
        &self.around
    }
}

impl<S, A: Clone> Layer<S> for WrapLayer<A> {
    type Service = Wrap<S, A>;

    fn layer(&self, inner: S) -> Self::Service {
        Wrap::new(inner, self.around.clone())
    }
}

pin_project! {
    /// Response future of a [`Wrap`]: its answer, or the inner future and then [`Finish`].
    #[project = WrapFutureProj]
    pub enum WrapFuture<F, P> {
        Answered { #[pin] response: Ready<Result<McpResponse, Infallible>> },
        Inner { #[pin] future: F, pending: Option<P> },
    }
}

impl<F, P> Future for WrapFuture<F, P>
where
    F: Future<Output = Result<McpResponse, Infallible>>,
    P: Finish,
{
    type Output = Result<McpResponse, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            WrapFutureProj::Answered { response } => response.poll(cx),
            WrapFutureProj::Inner { future, pending } => {
                let Ok(mut response) = std::task::ready!(future.poll(cx));
                if let Some(pending) = pending.take() {
                    pending.finish(&mut response);
                }
                Poll::Ready(Ok(response))
            }
        }
    }
}
