//! The innermost service of the edge: asks the [`Admission`](super::Admission) check from the
//! headers, reads the body within its deadline and the shared body budget, parses one
//! JSON-RPC message, classifies its era, checks the 2026-07-28 routing headers and hands an
//! [`McpRequest`] to the MCP stack.

use crate::plugin::McpService;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use base64::Engine;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{AUTHORIZATION, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError};
use tower::ServiceExt;
use tower_service::Service;

use super::IncomingBody;
use super::budget::{FREE_BYTES, Reservation};
use super::{
    HEADER_METHOD, HEADER_NAME, HEADER_PROTOCOL_VERSION, HttpResponse, HttpRules, empty, into_http,
    json_response, payload_too_large, refusal_response, transport_error,
};
use crate::protocol::era::Era;
use crate::protocol::jsonrpc::{EnvelopeError, response_json};
use crate::protocol::{
    Classified, Credential, ErrorObject, Incoming, McpRequest, McpResponse, Method, ReadParams,
    RequestContext, RequestId, Transport, VersionHints, classify_meta, code,
};
use crate::transport::telemetry::ServerOperation;

/// Body to [`McpRequest`], and the stack's [`McpResponse`] back to HTTP.
#[derive(Clone, Debug)]
pub struct McpEndpoint<S> {
    inner: S,
    rules: Arc<HttpRules>,
    /// Clones of `inner` back from answering a request, shared by the clones of this endpoint
    /// (a host clones it per connection or per request).
    spares: Spares<S>,
}

/// A few clones of the stack, each back from answering a request, so that a request takes
/// one instead of cloning the stack: a clone is an allocation and a reference count per
/// layer, and as many again to drop it (about 1,000 instructions of an `agent_status`). A
/// service is meant to be called again; only one whose call finished comes back here, and one
/// whose future was dropped (a client gone) is dropped with it.
struct Spares<S>(Arc<std::sync::Mutex<Vec<S>>>);

/// Most clones kept: the requests one process has in the stack at once, past which a request
/// clones its own as before (and drops it after).
const MAX_SPARES: usize = 64;

impl<S> Clone for Spares<S> {
    fn clone(&self) -> Self {
        Spares(self.0.clone())
    }
}

impl<S> std::fmt::Debug for Spares<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spares")
    }
}

impl<S: Clone> Spares<S> {
    /// A spare clone of `stack`, or a new one.
    fn take(&self, stack: &S) -> S {
        let spare = match self.0.lock() {
            Ok(mut spares) => spares.pop(),
            Err(_) => None,
        };
        spare.unwrap_or_else(|| stack.clone())
    }

    /// Keeps `stack`, back from its call, for a later request (dropped if enough are kept).
    fn give_back(&self, stack: S) {
        if let Ok(mut spares) = self.0.lock()
            && spares.len() < MAX_SPARES
        {
            spares.push(stack);
        }
    }
}

impl<S> McpEndpoint<S> {
    pub fn new(inner: S, rules: Arc<HttpRules>) -> Self {
        Self {
            inner,
            rules,
            spares: Spares(Arc::default()),
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: McpService, B: IncomingBody> Service<Request<B>> for McpEndpoint<S> {
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, Infallible>> + Send>>;

    #[inline]
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Readiness of the inner stack is awaited per request (`oneshot`), so this edge is
        // always ready, as axum expects.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let spares = self.spares.clone();
        let inner = spares.take(&self.inner);
        let rules = self.rules.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            // Read once here; checked before the body (admission) and again by the auth layer.
            let mut credential = parts
                .headers
                .get(AUTHORIZATION)
                .and_then(Credential::from_authorization);
            if let Some(admission) = &rules.admission {
                let arrival = super::Arrival {
                    credential: credential.as_ref(),
                    peer: parts.extensions.get::<SocketAddr>().copied(),
                    version: header_str(&parts.headers, &PROTOCOL_VERSION_HEADER)
                        .and_then(crate::protocol::ProtocolVersion::parse),
                };
                // A check that needs I/O (an OAuth token's keys) is awaited here, still
                // before the body; what it verified replaces what was presented.
                match admission.admit(&arrival).decide().await {
                    Ok(None) => {}
                    Ok(Some(verified)) => credential = Some(verified),
                    Err(refusal) => {
                        crate::metrics::record_http_refusal(refusal.label());
                        return Ok(refusal_response(&refusal));
                    }
                }
            }
            // The reservation holds the body's bytes in the budget until the answer is made.
            let (bytes, _reservation) = match read_body(body, &rules).await {
                Ok(read) => read,
                Err(refusal) => return Ok(refusal),
            };
            Ok(match route(&parts.headers, &bytes) {
                Route::Reply(resp) => {
                    spares.give_back(inner);
                    resp
                }
                Route::Call(call) => {
                    let (resp, inner) = dispatch(inner, parts, credential, call).await;
                    spares.give_back(inner);
                    resp
                }
            })
        })
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The whole body within `rules.body_timeout` (a deadline, not an idle timeout: a client
/// trickling its body must not hold a connection and its buffer forever), its bytes taken
/// from the shared [`BodyBudget`](super::BodyBudget) before they are read: 408 if late, 413
/// past the cap tower-http's `Limited` enforces, 503 if the budget had no room for it in
/// time, 400 if the body cannot be read.
async fn read_body<B>(body: B, rules: &HttpRules) -> Result<(Bytes, Reservation), HttpResponse>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let deadline = tokio::time::Instant::now() + rules.body_timeout;
    let declared = body
        .size_hint()
        .exact()
        .and_then(|n| usize::try_from(n).ok());
    let budget = &rules.body_budget;
    let busy = || busy_response(budget.total());
    let mut reservation = budget
        .reserve(declared.unwrap_or(0), deadline)
        .await
        .ok_or_else(busy)?;
    let mut body = std::pin::pin!(body);
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0).min(FREE_BYTES));
    loop {
        // A frame that is there already (a small body comes with its headers) is taken
        // without arming the deadline's timer; one that is not is waited for within it.
        let ready = std::future::poll_fn(|cx| {
            Poll::Ready(match body.as_mut().poll_frame(cx) {
                Poll::Ready(frame) => Some(frame.map(|f| f.map_err(Into::<BoxError>::into))),
                Poll::Pending => None,
            })
        })
        .await;
        let frame = match ready {
            Some(frame) => Ok(frame),
            None => tokio::time::timeout_at(deadline, body.frame())
                .await
                .map(|frame| frame.map(|f| f.map_err(Into::<BoxError>::into))),
        };
        let frame = match frame {
            Err(_) => return Err(request_timeout(rules)),
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                if e.downcast_ref::<LengthLimitError>().is_some() {
                    return Err(payload_too_large(rules.max_body_bytes));
                }
                return Err(transport_error(
                    StatusCode::BAD_REQUEST,
                    code::TRANSPORT,
                    format!("Bad Request: the body could not be read ({e})"),
                ));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        let wanted = buf.len() + data.remaining();
        budget
            .grow(&mut reservation, wanted, deadline)
            .await
            .ok_or_else(busy)?;
        while data.has_remaining() {
            let chunk = data.chunk();
            let n = chunk.len();
            buf.extend_from_slice(chunk);
            data.advance(n);
        }
    }
    Ok((buf.freeze(), reservation))
}

fn request_timeout(rules: &HttpRules) -> HttpResponse {
    transport_error(
        StatusCode::REQUEST_TIMEOUT,
        code::TRANSPORT,
        format!(
            "Request Timeout: the body did not arrive within {}; send it at once, or raise http.body_timeout",
            humantime::format_duration(rules.body_timeout)
        ),
    )
}

/// 503 for a body the shared budget could not take in time: others are being read.
fn busy_response(total: usize) -> HttpResponse {
    crate::metrics::record_http_refusal("body_budget");
    let mut resp = transport_error(
        StatusCode::SERVICE_UNAVAILABLE,
        code::TRANSPORT,
        format!(
            "Service Unavailable: the server is reading other large request bodies (together at \
             most {total} bytes, http.max_buffered_bytes); retry in a moment, or send a smaller \
             body"
        ),
    );
    resp.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// A message that passed the edge, ready for the MCP stack.
struct Call {
    id: Option<RequestId>,
    method: Method,
    params: ReadParams,
    classified: Classified,
}

enum Route {
    /// Answered at the edge: a parse or header refusal, or 202 for a client's response.
    Reply(HttpResponse),
    Call(Call),
}

/// Parse one JSON-RPC message, classify its era and check the headers that era requires.
fn route(headers: &HeaderMap, bytes: &[u8]) -> Route {
    let message = match Incoming::read(bytes) {
        Ok(m) => m,
        Err(EnvelopeError { id, error }) => return Route::Reply(refuse(id.as_ref(), &error)),
    };
    let (id, method, params) = match message {
        Incoming::Request { id, method, params } => (Some(id), method, params),
        Incoming::Notification { method, params } => (None, method, params),
        Incoming::Response { .. } => return Route::Reply(empty(StatusCode::ACCEPTED)),
    };
    let header_version = header_str(headers, &PROTOCOL_VERSION_HEADER);
    let hints = VersionHints {
        header: header_version,
        negotiated: None,
        default_legacy: true,
    };
    // A notification we cannot classify or whose headers are wrong is refused without a body.
    let refuse_message = |error: &ErrorObject| match &id {
        None => empty(StatusCode::BAD_REQUEST),
        Some(id) => refuse(Some(id), error),
    };
    let classified = match classify_meta(&method, params.meta_fields(), hints) {
        Ok(c) => c,
        Err(error) => return Route::Reply(refuse_message(&error)),
    };
    if classified.version.era() == Era::Modern {
        if header_version.is_none() {
            let error = ErrorObject::new(
                code::HEADER_MISMATCH,
                format!(
                    "Header mismatch: the MCP-Protocol-Version header is required; send MCP-Protocol-Version: {}",
                    classified.version
                ),
            );
            return Route::Reply(refuse_message(&error));
        }
        if id.is_some()
            && let Err(error) = check_routing_headers(headers, &method, &params)
        {
            return Route::Reply(refuse_message(&error));
        }
    }
    Route::Call(Call {
        id,
        method,
        params,
        classified,
    })
}

fn refuse(id: Option<&RequestId>, error: &ErrorObject) -> HttpResponse {
    json_response(StatusCode::BAD_REQUEST, &response_json(id, Err(error)))
}

/// Hands the request to the MCP stack and its response back as HTTP, with the stack.
async fn dispatch<S>(
    mut inner: S,
    parts: Parts,
    credential: Option<Credential>,
    call: Call,
) -> (HttpResponse, S)
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    let Call {
        id,
        method,
        params,
        classified,
    } = call;
    let modern = classified.version.era() == Era::Modern;
    let peer = parts.extensions.get::<SocketAddr>().copied();
    let mut ctx = RequestContext::new(classified.version, Transport::Http { peer });
    ctx.client_capabilities = classified.client_capabilities;
    ctx.client_info = classified.client_info;
    // Identity is resolved from a typed credential, read at the edge once; the headers stay
    // at the edge.
    ctx.credential = credential;
    ctx.extensions = parts.extensions;
    let operation = ServerOperation::start(
        &method,
        id.as_ref(),
        params.str("name"),
        params.meta_others(),
        Some(&parts.headers),
        &mut ctx,
    );
    // In the modern era a client that goes away has cancelled its request (the future is
    // dropped with the connection); a legacy disconnect is not a cancel.
    let guard = modern.then(|| ctx.cancel.clone().drop_guard());
    let request = McpRequest::from(crate::protocol::RequestParts {
        id,
        params: params.into_params(&method),
        method,
        ctx,
        call: None,
    });
    let Ok(response) = async {
        inner.ready().await?;
        inner.call(request).await
    }
    .await;
    if let Some(guard) = guard {
        guard.disarm();
    }
    if let Some(operation) = operation {
        operation.finish(&response);
    }
    (into_http(response), inner)
}

/// Modern routing headers: `Mcp-Method` always, `Mcp-Name` for the methods that name a target.
fn check_routing_headers(
    headers: &HeaderMap,
    method: &Method,
    params: &ReadParams,
) -> Result<(), ErrorObject> {
    let mismatch = |msg: String| ErrorObject::new(code::HEADER_MISMATCH, msg);
    match header_str(headers, &METHOD_HEADER) {
        None => {
            return Err(mismatch(format!(
                "Header mismatch: the Mcp-Method header is required; send Mcp-Method: {method}"
            )));
        }
        Some(h) if h != method.as_str() => {
            return Err(mismatch(format!(
                "Header mismatch: Mcp-Method is \"{h}\" but the body's method is \"{method}\""
            )));
        }
        Some(_) => {}
    }
    let name_key = match method {
        Method::ToolsCall => Some("name"),
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Some("taskId"),
        Method::Other(name) => match &**name {
            "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            _ => None,
        },
        _ => None,
    };
    if let Some(key) = name_key {
        let expected = params.str(key).unwrap_or("");
        match header_str(headers, &NAME_HEADER).map(decode_header_value) {
            None => {
                return Err(mismatch(format!(
                    "Header mismatch: the Mcp-Name header is required for {method}; send Mcp-Name: {expected}"
                )));
            }
            Some(Err(())) => {
                return Err(mismatch(
                    "Header mismatch: Mcp-Name has an invalid =?base64?…?= value".to_owned(),
                ));
            }
            Some(Ok(name)) if name != expected => {
                return Err(mismatch(format!(
                    "Header mismatch: Mcp-Name is \"{name}\" but params.{key} is \"{expected}\""
                )));
            }
            Some(Ok(_)) => {}
        }
    }
    Ok(())
}

// The routing headers as ready names: a lookup by `&str` parses the name on every request.
static PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static(HEADER_PROTOCOL_VERSION);
static METHOD_HEADER: HeaderName = HeaderName::from_static(HEADER_METHOD);
static NAME_HEADER: HeaderName = HeaderName::from_static(HEADER_NAME);

/// A header's value with optional whitespace trimmed; `None` if absent or not visible ASCII.
fn header_str<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Decodes `=?base64?…?=` header values (used for names that are not plain ASCII).
fn decode_header_value(value: &str) -> Result<String, ()> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| ())
            .and_then(|b| String::from_utf8(b).map_err(|_| ())),
        None => Ok(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::Full;

    use crate::protocol::McpResult;
    use crate::transport::http::McpHttpService;

    /// A stack that counts its clones and answers `tools/list` at once and `ping` never.
    struct Counted(Arc<AtomicUsize>);

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.0.fetch_add(1, Ordering::SeqCst);
            Counted(self.0.clone())
        }
    }

    impl Service<McpRequest> for Counted {
        type Response = McpResponse;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<McpResponse, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: McpRequest) -> Self::Future {
            Box::pin(async move {
                if req.method.as_str() == "ping" {
                    std::future::pending::<()>().await;
                }
                Ok(req.result(McpResult::empty()))
            })
        }
    }

    fn post(method: &str) -> Request<Full<Bytes>> {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}"}}"#);
        Request::post("/mcp")
            .header("host", "127.0.0.1:8080")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    }

    /// A request takes a stack an earlier one gave back instead of cloning the stack; a stack
    /// whose future was dropped (the client went away) is not given back.
    #[tokio::test]
    async fn requests_reuse_the_stack_an_earlier_request_gave_back() {
        let clones = Arc::new(AtomicUsize::new(0));
        let mut edge = McpHttpService::new(Counted(clones.clone()), HttpRules::default());
        let mut call = |method: &str| {
            // The edge is always ready (it awaits the stack per request).
            Service::<Request<Full<Bytes>>>::call(&mut edge, post(method))
        };
        for _ in 0..5 {
            let Ok(resp) = call("tools/list").await;
            assert_eq!(resp.status(), StatusCode::OK);
        }
        assert_eq!(
            clones.load(Ordering::SeqCst),
            1,
            "one clone for five requests in a row"
        );

        // A request that never ends, dropped: its stack goes with it, so the next request
        // clones one again.
        let never = call("ping");
        let timed_out = tokio::time::timeout(std::time::Duration::from_millis(50), never).await;
        assert!(timed_out.is_err(), "ping never answers");
        assert_eq!(
            clones.load(Ordering::SeqCst),
            1,
            "the spare went to the ping"
        );
        let Ok(resp) = call("tools/list").await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(clones.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn base64_header_values() {
        assert_eq!(decode_header_value("agent_run"), Ok("agent_run".into()));
        assert_eq!(
            decode_header_value("=?base64?YWdlbnRfcnVu?="),
            Ok("agent_run".into())
        );
        assert!(decode_header_value("=?base64?***?=").is_err());
    }
}
