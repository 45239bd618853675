//! `POST /mcp`: stateless Streamable HTTP as a `tower::Service<http::Request<B>>`.
//!
//! The edge enforces the Streamable HTTP transport rules of MCP 2026-07-28 and holds no
//! business logic. It is a short tower stack, outermost first:
//!
//! | layer | refuses with |
//! |---|---|
//! | `PostOnly` in tower-http's `ValidateRequestHeader` | 405, `Allow: POST` |
//! | `LoopbackOnly` in `ValidateRequestHeader` (Host, Origin) | 403 |
//! | `JsonContentType` in `ValidateRequestHeader` | 415 |
//! | `JsonPayloadTooLarge` over tower-http's `RequestBodyLimit` | 413 |
//! | `McpEndpoint`: [`Admission`] from the headers, body budget and deadline, parse, era, routing headers | 401, 503, 408, 413, 400 |
//!
//! The endpoint reads the `Authorization` header into the request's typed
//! [`Credential`](crate::protocol::Credential) (no header travels further), asks the
//! [`Admission`] check with it before reading any of the body (a request without a valid
//! bearer token costs only its headers), reads the body within its deadline and the server's
//! shared [`BodyBudget`], hands an [`McpRequest`](crate::plugin::McpRequest) to the inner
//! stack and turns the [`McpResponse`] into a JSON response with the status the era asks for.
//! A [`Refusal`] from a layer inside is mapped here, and only here:
//!
//! | refusal | status and headers |
//! |---|---|
//! | [`Refusal::Unauthorized`] | 401, `WWW-Authenticate: Bearer` (an OAuth resource server's challenge when OAuth is on) |
//! | [`Refusal::InsufficientScope`] | 403, `WWW-Authenticate: Bearer error="insufficient_scope", …`, in both eras |
//! | [`Refusal::RateLimited`] | 429, `Retry-After: n` |
//! | [`Refusal::Unavailable`] | 503, `Retry-After: n` (the authorization server's keys are out of reach) |
//! | [`Refusal::PayloadTooLarge`] | 413 (also the edge's own for an oversized body) |
//!
//! Every refusal carries the same JSON-RPC error body, whichever layer gives it. The edge never
//! mints an `Mcp-Session-Id`.
//!
//! ```no_run
//! # async fn run(stack: agent_mcp::Stack) {
//! use agent_mcp::transport::http::{HttpRules, McpHttpService};
//! let svc = McpHttpService::new(stack, HttpRules::default());
//! let app: axum::Router = axum::Router::new().route_service("/mcp", svc);
//! # let _ = app;
//! # }
//! ```

use crate::plugin::McpService;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::Full;
use pin_project_lite::pin_project;
use serde_json::Value;
use tower::ServiceBuilder;
use tower_http::limit::{RequestBodyLimit, RequestBodyLimitLayer, ResponseBody as LimitBody};
use tower_http::validate_request::{ValidateRequestHeader, ValidateRequestHeaderLayer};
use tower_service::Service;

use crate::protocol::era::Era;
use crate::protocol::jsonrpc::response_json;
use crate::protocol::{
    ErrorObject, McpResponse, MessageStream, Payload, Refusal, StreamSlot, code,
};

mod admission;
mod budget;
pub(crate) mod endpoint;
pub(crate) mod guard;

pub use admission::{Admission, Admit, AdmitFuture, Arrival};
pub use budget::BodyBudget;

use endpoint::McpEndpoint;
use guard::{JsonContentType, LoopbackOnly, PostOnly};

/// `MCP-Protocol-Version`.
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method` (2026-07-28).
pub const HEADER_METHOD: &str = "mcp-method";
/// `Mcp-Name` (2026-07-28).
pub const HEADER_NAME: &str = "mcp-name";

/// The transport's own rules: who may call, and how big a body may be.
#[derive(Clone, Debug)]
pub struct HttpRules {
    /// Host names accepted besides loopback ones (`localhost`, `127.0.0.1`, `[::1]`, any port).
    pub allowed_hosts: Vec<String>,
    /// Origins accepted besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// How long the whole body may take to arrive; a slower client gets 408.
    pub body_timeout: Duration,
    /// Asked from the headers before any of the body is read (bearer tokens); `None`: every
    /// request's body is read.
    pub admission: Option<Arc<dyn Admission>>,
    /// The bytes of request bodies all connections may hold at once
    /// (`http.max_buffered_bytes`); clones of these rules share it.
    pub body_budget: BodyBudget,
}

impl Default for HttpRules {
    fn default() -> Self {
        let http = crate::config::HttpConfig::default();
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: crate::config::ImageLimits::default().max_request_body(),
            body_timeout: http.body_timeout,
            admission: None,
            body_budget: BodyBudget::new(http.buffered_limit()),
        }
    }
}

impl HttpRules {
    /// The rules `config` asks for, with a body budget of their own (share one between the
    /// edges of one server with [`HttpRules::with_body_budget`]) and no admission check.
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self {
            allowed_hosts: config.http.allowed_hosts.clone(),
            allowed_origins: config.http.allowed_origins.clone(),
            max_body_bytes: config.http.body_limit(&config.mcp.images),
            body_timeout: config.http.body_timeout,
            admission: None,
            body_budget: BodyBudget::new(config.http.buffered_limit()),
        }
    }

    /// Refuses requests `admission` turns away before their bodies are read.
    pub fn with_admission(mut self, admission: Arc<dyn Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Shares `budget` (e.g. one per server, for all its edges).
    pub fn with_body_budget(mut self, budget: BodyBudget) -> Self {
        self.body_budget = budget;
        self
    }

    /// How long a client may take to send its body once the headers are in.
    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// The largest request body accepted (413 past it).
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }
}

/// The body of every response the edge's layers give (one JSON message, or empty).
pub type HttpBody = Full<Bytes>;
type HttpResponse = Response<HttpBody>;

/// The body [`McpHttpService`] answers with: one JSON message (or nothing), or for a stream
/// ([`Payload::Stream`], e.g. `subscriptions/listen`) the SSE events it sends over time.
pub type McpBody = http_body_util::Either<Full<Bytes>, SseBody>;

/// A [`MessageStream`] as an SSE body: one `event: message` per JSON-RPC message, sent as the
/// stream produces it, and a `: keep-alive` comment after [`SSE_KEEP_ALIVE`] of silence. The next message is only asked for when hyper wants more body, so a
/// client that stops reading stops the stream where it is (nothing piles up here). Dropped
/// when the client closes the response, which cancels the stream.
pub struct SseBody {
    stream: MessageStream,
    /// A `: keep-alive` comment goes out when nothing else has for this long, so proxies and
    /// clients with idle timeouts keep a stream open through a long model call.
    keep_alive: tokio::time::Interval,
}

/// How long an SSE stream may stay silent before a keep-alive comment is sent.
pub const SSE_KEEP_ALIVE: Duration = Duration::from_secs(30);

impl SseBody {
    /// The body streaming `stream`'s messages, with keep-alive comments between them.
    pub fn new(stream: MessageStream) -> Self {
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + SSE_KEEP_ALIVE, SSE_KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { stream, keep_alive }
    }
}

impl std::fmt::Debug for SseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseBody").finish_non_exhaustive()
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.stream.poll_next(cx) {
            Poll::Pending => match this.keep_alive.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Ok(http_body::Frame::data(
                    Bytes::from_static(b": keep-alive\n\n"),
                )))),
                Poll::Pending => Poll::Pending,
            },
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(message)) => {
                this.keep_alive.reset();
                let mut event = b"event: message\ndata: ".to_vec();
                // A JSON text has no raw newline, so it is one `data:` line.
                if serde_json::to_writer(&mut event, &message).is_err() {
                    event.clear();
                }
                event.extend_from_slice(b"\n\n");
                Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(event)))))
            }
        }
    }
}

/// The stream of a [`Payload::Stream`] answer, parked in the response's extensions by the
/// endpoint: the edge's layers carry a single-frame body, so [`McpHttpService`] mounts the
/// stream as the body on the way out.
#[derive(Clone, Debug)]
struct PendingStream(StreamSlot);

/// The stack inside [`McpHttpService`], outermost first (see the module docs).
type Edge<S> = ValidateRequestHeader<
    ValidateRequestHeader<
        ValidateRequestHeader<
            JsonPayloadTooLarge<RequestBodyLimit<McpEndpoint<S>>>,
            JsonContentType,
        >,
        LoopbackOnly,
    >,
    PostOnly,
>;

/// The HTTP edge around an MCP stack `S`.
#[derive(Clone, Debug)]
pub struct McpHttpService<S> {
    edge: Edge<S>,
}

impl<S> McpHttpService<S> {
    /// The edge around `inner` (the MCP stack), applying `rules`.
    pub fn new(inner: S, rules: HttpRules) -> Self {
        let rules = Arc::new(rules);
        let max_body_bytes = rules.max_body_bytes;
        let edge = ServiceBuilder::new()
            .layer(ValidateRequestHeaderLayer::custom(PostOnly))
            .layer(ValidateRequestHeaderLayer::custom(LoopbackOnly::new(
                rules.clone(),
            )))
            .layer(ValidateRequestHeaderLayer::custom(JsonContentType))
            .layer_fn(|inner| JsonPayloadTooLarge::new(inner, max_body_bytes))
            .layer(RequestBodyLimitLayer::new(max_body_bytes))
            .service(McpEndpoint::new(inner, rules));
        Self { edge }
    }

    /// The MCP stack inside the edge.
    pub fn get_ref(&self) -> &S {
        self.edge
            .get_ref()
            .get_ref()
            .get_ref()
            .inner
            .get_ref()
            .get_ref()
    }
}

/// A request body the endpoint can read from a spawned task: `Send` and `'static`, with `Send`
/// chunks and an error that boxes. Every such body is one; the trait only names the bound.
pub trait IncomingBody:
    Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<B> IncomingBody for B where
    B: Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<S: McpService, B: IncomingBody> Service<Request<B>> for McpHttpService<S> {
    type Response = Response<McpBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<McpBody>, Infallible>> + Send>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Always ready: the endpoint awaits the inner stack per request (`oneshot`), as axum
        // expects of a mounted service.
        Service::<Request<B>>::poll_ready(&mut self.edge, cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let answer = self.edge.call(req);
        Box::pin(async move {
            let Ok(mut resp) = answer.await;
            let stream = resp
                .extensions_mut()
                .remove::<PendingStream>()
                .and_then(|pending| pending.0.take());
            Ok(match stream {
                Some(stream) => resp.map(|_| http_body_util::Either::Right(SseBody::new(stream))),
                None => resp.map(http_body_util::Either::Left),
            })
        })
    }
}

/// tower-http's `RequestBodyLimit` answers a declared `Content-Length` over the cap with its own
/// plain-text 413; this gives clients the edge's JSON-RPC 413 instead (the same one the endpoint
/// gives for a body that outgrows the cap while streaming), and unwraps every other response to
/// the edge's body type.
#[derive(Clone, Debug)]
pub(crate) struct JsonPayloadTooLarge<S> {
    inner: S,
    max_body_bytes: usize,
}

impl<S> JsonPayloadTooLarge<S> {
    /// `inner`, answering a JSON-RPC 413 for a body over `max_body_bytes`.
    pub fn new(inner: S, max_body_bytes: usize) -> Self {
        Self {
            inner,
            max_body_bytes,
        }
    }
}

impl<S, R> Service<R> for JsonPayloadTooLarge<S>
where
    S: Service<R, Response = Response<LimitBody<HttpBody>>>,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = JsonPayloadTooLargeFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        JsonPayloadTooLargeFuture {
            inner: self.inner.call(req),
            max_body_bytes: self.max_body_bytes,
        }
    }
}

pin_project! {
    /// The future of [`JsonPayloadTooLarge`].
    pub(crate) struct JsonPayloadTooLargeFuture<F> {
        #[pin]
        inner: F,
        max_body_bytes: usize,
    }
}

impl<F, E> Future for JsonPayloadTooLargeFuture<F>
where
    F: Future<Output = Result<Response<LimitBody<HttpBody>>, E>>,
{
    type Output = Result<HttpResponse, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let resp = std::task::ready!(this.inner.poll(cx))?;
        Poll::Ready(Ok(unwrap_limit_body(resp, *this.max_body_bytes)))
    }
}

fn unwrap_limit_body(resp: Response<LimitBody<HttpBody>>, max_body_bytes: usize) -> HttpResponse {
    // The edge's own responses are JSON or empty; tower-http's refusal is the only plain-text one.
    let from_limit = resp.status() == StatusCode::PAYLOAD_TOO_LARGE
        && resp
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    if from_limit {
        return payload_too_large(max_body_bytes);
    }
    let (parts, mut body) = resp.into_parts();
    // Both variants of tower-http's body wrap a `Full`, whose one frame is ready at once: take it
    // without an executor.
    let frame = Pin::new(&mut body).poll_frame(&mut Context::from_waker(Waker::noop()));
    let data = match frame {
        Poll::Ready(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
        Poll::Ready(Some(Err(never))) => match never {},
        Poll::Ready(None) | Poll::Pending => Bytes::new(),
    };
    Response::from_parts(parts, Full::new(data))
}

/// The edge's 413, from whichever layer finds the body too large.
fn payload_too_large(max_body_bytes: usize) -> HttpResponse {
    refusal_response(&Refusal::payload_too_large(format!(
        "Payload Too Large: the body exceeds {max_body_bytes} bytes; send fewer or smaller images, or raise http.max_body_bytes"
    )))
}

/// A refusal the edge gives itself, before there is a request to answer (no id).
fn refusal_response(refusal: &Refusal) -> HttpResponse {
    let mut resp = json_response(
        refusal.http_status(),
        &response_json(None, Err(&refusal.error_object())),
    );
    refusal_headers(refusal, resp.headers_mut());
    resp
}

/// The headers that tell an HTTP client what to do about a [`Refusal`].
fn refusal_headers(refusal: &Refusal, headers: &mut HeaderMap) {
    if let Some(challenge) = refusal.challenge() {
        // Built from quoted-string-safe parts (src/oauth/challenge.rs); a value that still
        // is not a header value falls back to the bare scheme rather than to no challenge.
        let value =
            HeaderValue::from_str(challenge).unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
        headers.insert(WWW_AUTHENTICATE, value);
    }
    if let Some(seconds) = refusal.retry_after_seconds() {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
}

/// The HTTP status for an MCP response.
pub(crate) fn status_for(response: &McpResponse) -> StatusCode {
    match (&response.payload, response.version.era()) {
        (Payload::Refused(refusal), _) => refusal.http_status(),
        (Payload::Accepted, _) => StatusCode::ACCEPTED,
        (Payload::Result(_) | Payload::Stream(_) | Payload::ToolCallError(_), _) => StatusCode::OK,
        (Payload::Error(_), Era::Legacy) => StatusCode::OK,
        (Payload::Error(e), Era::Modern) => match e.code {
            code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            code::INVALID_PARAMS
            | code::HEADER_MISMATCH
            | code::MISSING_REQUIRED_CLIENT_CAPABILITY
            | code::UNSUPPORTED_PROTOCOL_VERSION
            | code::INVALID_REQUEST
            | code::PARSE_ERROR => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        },
    }
}

/// The stack's answer as HTTP: the status its payload calls for, the JSON-RPC message as the
/// body, and for a refusal the headers that go with it.
fn into_http(response: McpResponse) -> HttpResponse {
    let status = status_for(&response);
    if let Payload::Stream(slot) = response.payload {
        let mut resp = empty(status);
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        // Proxies that buffer (nginx) would hold the events back.
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        resp.extensions_mut().insert(PendingStream(slot));
        return resp;
    }
    // Empty unless refused: `HeaderMap::new` allocates nothing.
    let mut refusal_hdrs = HeaderMap::new();
    if let Payload::Refused(refusal) = &response.payload {
        refusal_headers(refusal, &mut refusal_hdrs);
    }
    let mut resp = match response.to_bytes() {
        None => empty(status),
        Some(body) => json_bytes_response(status, body),
    };
    resp.headers_mut().extend(refusal_hdrs);
    resp
}

fn json_response(status: StatusCode, json: &Value) -> HttpResponse {
    json_bytes_response(status, serde_json::to_vec(json).unwrap_or_default())
}

fn json_bytes_response(status: StatusCode, body: Vec<u8>) -> HttpResponse {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn transport_error(status: StatusCode, code: i64, message: String) -> HttpResponse {
    json_response(
        status,
        &response_json(None, Err(&ErrorObject::new(code, message))),
    )
}

fn empty(status: StatusCode) -> HttpResponse {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{McpRequest, ProtocolVersion, RequestContext, RequestId, Transport};
    use serde_json::json;

    fn refused(version: ProtocolVersion, refusal: Refusal) -> HttpResponse {
        let req = McpRequest::from(crate::protocol::RequestParts {
            id: Some(RequestId::Number(3)),
            method: "tools/list".into(),
            params: Default::default(),
            ctx: RequestContext::new(version, Transport::Http { peer: None }),
            call: None,
        });
        into_http(req.refuse(refusal))
    }

    fn body_of(resp: &HttpResponse) -> Value {
        let mut body = resp.body().clone();
        let frame = Pin::new(&mut body).poll_frame(&mut Context::from_waker(Waker::noop()));
        let Poll::Ready(Some(Ok(frame))) = frame else {
            panic!("a full body is ready at once");
        };
        serde_json::from_slice(&frame.into_data().unwrap_or_default()).unwrap()
    }

    #[test]
    fn each_refusal_has_its_status_headers_and_json_rpc_body_in_both_eras() {
        let cases = [
            (
                Refusal::unauthorized("Unauthorized: no token."),
                StatusCode::UNAUTHORIZED,
                vec![("www-authenticate", "Bearer")],
            ),
            (
                Refusal::rate_limited(9, "Retry after 9 s."),
                StatusCode::TOO_MANY_REQUESTS,
                vec![("retry-after", "9")],
            ),
            (
                Refusal::payload_too_large("Payload Too Large: 1 byte at most."),
                StatusCode::PAYLOAD_TOO_LARGE,
                vec![],
            ),
        ];
        for version in [ProtocolVersion::V2026_07_28, ProtocolVersion::V2025_11_25] {
            for (refusal, status, headers) in &cases {
                let resp = refused(version, refusal.clone());
                assert_eq!(resp.status(), *status, "{refusal:?} {version}");
                let mut expected: Vec<(&str, &str)> = headers.clone();
                expected.push(("content-type", "application/json"));
                expected.sort_unstable();
                let mut got: Vec<(&str, &str)> = resp
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.to_str().unwrap()))
                    .collect();
                got.sort_unstable();
                assert_eq!(got, expected, "{refusal:?} {version}");
                assert_eq!(
                    body_of(&resp),
                    json!({"jsonrpc": "2.0", "id": 3, "error": refusal.error_object()})
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_sse_stream_sends_keep_alive_comments_then_its_messages() {
        use http_body_util::BodyExt;
        // Silent for 45 s, then one message, then the end.
        let stream = MessageStream::unfold(0u8, |n| async move {
            match n {
                0 => {
                    tokio::time::sleep(Duration::from_secs(45)).await;
                    Some((
                        json!({"jsonrpc": "2.0", "method": "notifications/tasks"}),
                        1,
                    ))
                }
                _ => None,
            }
        });
        let mut body = SseBody::new(stream);
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame;
            frames.push(String::from_utf8(frame.into_data().unwrap_or_default().to_vec()).unwrap());
        }
        assert_eq!(
            frames,
            [
                ": keep-alive\n\n".to_owned(),
                "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\"}\n\n"
                    .to_owned(),
            ]
        );
    }

    #[test]
    fn the_edges_own_413_is_the_payload_too_large_refusal() {
        let resp = payload_too_large(10);
        assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            body_of(&resp),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message":
                "Payload Too Large: the body exceeds 10 bytes; send fewer or smaller images, or raise http.max_body_bytes"}})
        );
    }
}
