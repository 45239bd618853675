//! `POST /mcp`: stateless Streamable HTTP as a `tower::Service<http::Request<B>>`.
//!
//! The edge enforces the transport rules of `protocol/mcp-2026-07-28.md` §2 and holds no
//! business logic: it checks method, Host/Origin, content type and body size, parses one
//! JSON-RPC message, classifies its era, checks the modern routing headers, hands an
//! [`McpRequest`] to the inner stack and turns the [`McpResponse`] into a JSON response with the
//! status the era asks for. It never mints an `Mcp-Session-Id`.
//!
//! ```no_run
//! # async fn run(stack: agent_mcp::Stack) {
//! use agent_mcp::transport::http::{HttpRules, McpHttpService};
//! let svc = McpHttpService::new(stack, HttpRules::default());
//! let app: axum::Router = axum::Router::new().route_service("/mcp", svc);
//! # let _ = app;
//! # }
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use serde_json::Value;
use tower::ServiceExt;
use tower_service::Service;

use crate::protocol::era::Era;
use crate::protocol::jsonrpc::{EnvelopeError, response_json};
use crate::protocol::{
    ErrorObject, Incoming, McpRequest, McpResponse, Payload, RequestContext, Transport,
    VersionHints, classify, code,
};

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
}

impl Default for HttpRules {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: crate::config::ImageLimits::default().max_request_body(),
            body_timeout: crate::config::HttpConfig::default().body_timeout,
        }
    }
}

impl HttpRules {
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self {
            allowed_hosts: config.http.allowed_hosts.clone(),
            allowed_origins: config.http.allowed_origins.clone(),
            max_body_bytes: config.http.body_limit(&config.mcp.images),
            body_timeout: config.http.body_timeout,
        }
    }

    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = strip_port(host);
        is_loopback_name(name)
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if self
            .allowed_origins
            .iter()
            .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
        {
            return true;
        }
        match origin.split_once("://") {
            Some((scheme, authority)) if scheme == "http" || scheme == "https" => {
                !authority.contains('/') && is_loopback_name(strip_port(authority))
            }
            _ => false,
        }
    }
}

fn strip_port(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        // [::1]:8080 → [::1]
        return match rest.find(']') {
            Some(i) => &authority[..i + 2],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    }
}

fn is_loopback_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "[::1]"
}

/// The HTTP edge around an MCP stack `S`.
#[derive(Clone, Debug)]
pub struct McpHttpService<S> {
    inner: S,
    rules: Arc<HttpRules>,
}

impl<S> McpHttpService<S> {
    pub fn new(inner: S, rules: HttpRules) -> Self {
        Self {
            inner,
            rules: Arc::new(rules),
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

type HttpResponse = Response<Full<Bytes>>;

impl<S, B> Service<Request<B>> for McpHttpService<S>
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
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
        let inner = self.inner.clone();
        let rules = self.rules.clone();
        Box::pin(async move { Ok(handle(inner, &rules, req).await) })
    }
}

async fn handle<S, B>(inner: S, rules: &HttpRules, req: Request<B>) -> HttpResponse
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible> + Send + 'static,
    S::Future: Send,
    B: Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    if parts.method != Method::POST {
        let mut resp = transport_error(
            StatusCode::METHOD_NOT_ALLOWED,
            code::TRANSPORT,
            format!(
                "Method Not Allowed: {} is not served here; send each JSON-RPC message as a POST",
                parts.method
            ),
        );
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return resp;
    }
    let host = parts
        .headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| parts.uri.authority().map(|a| a.as_str().to_owned()));
    if let Some(host) = host.as_deref()
        && !rules.host_allowed(host)
    {
        return transport_error(
            StatusCode::FORBIDDEN,
            code::TRANSPORT,
            format!(
                "Forbidden: Host \"{host}\" is not allowed; add it to http.allowed_hosts to serve it"
            ),
        );
    }
    if let Some(origin) = parts.headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("<non-ASCII>");
        if !rules.origin_allowed(origin) {
            return transport_error(
                StatusCode::FORBIDDEN,
                code::TRANSPORT,
                format!(
                    "Forbidden: Origin \"{origin}\" is not allowed; add it to http.allowed_origins to serve it"
                ),
            );
        }
    }
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime != "application/json" {
        return transport_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::TRANSPORT,
            format!(
                "Unsupported Media Type: Content-Type is \"{content_type}\"; send Content-Type: application/json"
            ),
        );
    }
    let too_large = || {
        transport_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            code::TRANSPORT,
            format!(
                "Payload Too Large: the body exceeds {} bytes; send fewer or smaller images, or raise http.max_body_bytes",
                rules.max_body_bytes
            ),
        )
    };
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > rules.max_body_bytes as u64) {
        return too_large();
    }
    // A client trickling its body must not hold a connection (and its buffer) forever.
    let collected = tokio::time::timeout(
        rules.body_timeout,
        Limited::new(body, rules.max_body_bytes).collect(),
    )
    .await;
    let Ok(collected) = collected else {
        return transport_error(
            StatusCode::REQUEST_TIMEOUT,
            code::TRANSPORT,
            format!(
                "Request Timeout: the body did not arrive within {}; send it at once, or raise http.body_timeout",
                humantime::format_duration(rules.body_timeout)
            ),
        );
    };
    let bytes = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Err(e) => {
            return transport_error(
                StatusCode::BAD_REQUEST,
                code::TRANSPORT,
                format!("Bad Request: the body could not be read ({e})"),
            );
        }
    };
    let message = match Incoming::from_slice(&bytes) {
        Ok(m) => m,
        Err(EnvelopeError { id, error }) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &response_json(id.as_ref(), Err(&error)),
            );
        }
    };
    let (id, method, params) = match message {
        Incoming::Request { id, method, params } => (Some(id), method, params),
        Incoming::Notification { method, params } => (None, method, params),
        Incoming::Response { .. } => return accepted(),
    };
    let header_version = header_str(&parts.headers, HEADER_PROTOCOL_VERSION);
    let hints = VersionHints {
        header: header_version,
        negotiated: None,
        default_legacy: true,
    };
    let classified = match classify(&method, &params, hints) {
        Ok(c) => c,
        Err(error) => {
            if id.is_none() {
                // A notification we cannot classify: refuse without a body to answer.
                return empty(StatusCode::BAD_REQUEST);
            }
            return json_response(
                StatusCode::BAD_REQUEST,
                &response_json(id.as_ref(), Err(&error)),
            );
        }
    };
    let modern = classified.version.era() == Era::Modern;
    if modern && header_version.is_none() {
        let error = ErrorObject::new(
            code::HEADER_MISMATCH,
            format!(
                "Header mismatch: the MCP-Protocol-Version header is required; send MCP-Protocol-Version: {}",
                classified.version
            ),
        );
        if id.is_none() {
            return empty(StatusCode::BAD_REQUEST);
        }
        return json_response(
            StatusCode::BAD_REQUEST,
            &response_json(id.as_ref(), Err(&error)),
        );
    }
    if modern
        && id.is_some()
        && let Err(error) = check_routing_headers(&parts.headers, &method, &params)
    {
        return json_response(
            StatusCode::BAD_REQUEST,
            &response_json(id.as_ref(), Err(&error)),
        );
    }
    let peer = parts.extensions.get::<SocketAddr>().copied();
    let mut ctx = RequestContext::new(classified.version, Transport::Http { peer });
    ctx.client_capabilities = classified.client_capabilities;
    ctx.client_info = classified.client_info;
    ctx.extensions = parts.extensions;
    ctx.extensions.insert(parts.headers);
    // In the modern era a client that goes away has cancelled its request (the future is
    // dropped with the connection); a legacy disconnect is not a cancel.
    let guard = modern.then(|| ctx.cancel.clone().drop_guard());
    let request = McpRequest {
        id,
        method,
        params,
        ctx,
    };
    let Ok(response) = inner.oneshot(request).await;
    if let Some(guard) = guard {
        guard.disarm();
    }
    into_http(response)
}

/// Modern routing headers: `Mcp-Method` always, `Mcp-Name` for the methods that name a target.
fn check_routing_headers(
    headers: &HeaderMap,
    method: &str,
    params: &serde_json::Map<String, Value>,
) -> Result<(), ErrorObject> {
    let mismatch = |msg: String| ErrorObject::new(code::HEADER_MISMATCH, msg);
    match header_str(headers, HEADER_METHOD) {
        None => {
            return Err(mismatch(format!(
                "Header mismatch: the Mcp-Method header is required; send Mcp-Method: {method}"
            )));
        }
        Some(h) if h != method => {
            return Err(mismatch(format!(
                "Header mismatch: Mcp-Method is \"{h}\" but the body's method is \"{method}\""
            )));
        }
        Some(_) => {}
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(key) = name_key {
        let expected = params.get(key).and_then(Value::as_str).unwrap_or("");
        match header_str(headers, HEADER_NAME).map(decode_header_value) {
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

/// A header's value with optional whitespace trimmed; `None` if absent or not visible ASCII.
fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
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

/// The HTTP status for an MCP response.
pub fn status_for(response: &McpResponse) -> StatusCode {
    if let Some(status) = response.http.status {
        return status;
    }
    match (&response.payload, response.version.era()) {
        (Payload::Accepted, _) => StatusCode::ACCEPTED,
        (Payload::Result(_), _) => StatusCode::OK,
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

fn into_http(mut response: McpResponse) -> HttpResponse {
    let status = status_for(&response);
    let headers = std::mem::take(&mut response.http.headers);
    let mut resp = match response.into_json() {
        None => empty(status),
        Some(json) => json_response(status, &json),
    };
    for (name, value) in &headers {
        resp.headers_mut().insert(name.clone(), value.clone());
    }
    resp
}

fn json_response(status: StatusCode, json: &Value) -> HttpResponse {
    let body = serde_json::to_vec(json).unwrap_or_default();
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

fn accepted() -> HttpResponse {
    empty(StatusCode::ACCEPTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_and_origins() {
        let rules = HttpRules::default();
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:3000",
            "[::1]",
        ] {
            assert!(rules.host_allowed(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:80",
            "127.0.0.2",
            "localhost.evil",
        ] {
            assert!(!rules.host_allowed(host), "{host}");
        }
        assert!(rules.origin_allowed("http://localhost:5173"));
        assert!(rules.origin_allowed("https://127.0.0.1"));
        assert!(!rules.origin_allowed("http://evil.example"));
        assert!(!rules.origin_allowed("null"));
        assert!(!rules.origin_allowed("http://localhost/x"));
        let rules = HttpRules {
            allowed_hosts: vec!["mcp.internal".into()],
            allowed_origins: vec!["https://ide.example".into()],
            ..HttpRules::default()
        };
        assert!(rules.host_allowed("mcp.internal:9000"));
        assert!(rules.origin_allowed("https://ide.example"));
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
