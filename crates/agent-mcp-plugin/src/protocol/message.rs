//! The request and response types that flow through the tower stack.
//!
//! Transports build an [`McpRequest`] (one JSON-RPC request or notification, already classified
//! into its era) and turn the [`McpResponse`] back into bytes. Era differences in result shape
//! (`resultType`, `serverInfo` `_meta`, `ttlMs`/`cacheScope`) are rendered in exactly one place,
//! [`McpResponse::to_json`], so no layer or handler has to remember them.

use std::net::SocketAddr;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::credential::Credential;
use super::era::{Era, META_SERVER_INFO, ProtocolVersion};
use super::json_out;
use super::jsonrpc::{ErrorObject, RequestId, response_json};
use super::method::Method;
use super::outcome::Outcome;
use super::params::Params;
use super::refusal::Refusal;
use crate::tools::ToolCall;

/// The identity of every stdio caller: the local user who started the process.
pub const STDIO_IDENTITY: &str = "stdio";

/// How the request reached us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http {
        peer: Option<SocketAddr>,
    },
    /// Called in-process (tests, embedding without a transport).
    InProcess,
}

impl Transport {
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http { .. } => "http",
            Transport::InProcess => "in-process",
        }
    }
}

/// Everything about a request that is not its method and params.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub version: ProtocolVersion,
    /// The client capabilities declared on this very request (modern era), or `{}`.
    pub client_capabilities: Value,
    pub client_info: Option<Value>,
    /// Who is calling, once an auth layer has said so. Tasks and sessions belong to it.
    pub identity: Option<String>,
    /// What the caller presented to prove who it is (the HTTP edge reads the `Authorization`
    /// header into it); `None` when nothing was presented. Raw headers never travel down the
    /// stack: an auth layer checks this.
    pub credential: Option<Credential>,
    pub transport: Transport,
    /// Fired when the client cancels this request (stdio `notifications/cancelled`, or an HTTP
    /// disconnect in the modern era).
    pub cancel: CancellationToken,
    /// Whatever a host application or an outer layer wants to pass down.
    pub extensions: http::Extensions,
}

impl RequestContext {
    pub fn new(version: ProtocolVersion, transport: Transport) -> Self {
        Self {
            version,
            client_capabilities: Value::Object(Map::new()),
            client_info: None,
            identity: None,
            credential: None,
            transport,
            cancel: CancellationToken::new(),
            extensions: http::Extensions::new(),
        }
    }

    pub fn era(&self) -> Era {
        self.version.era()
    }

    /// Does this request declare the given extension in its client capabilities?
    pub fn declares_extension(&self, id: &str) -> bool {
        self.client_capabilities
            .get("extensions")
            .and_then(|e| e.get(id))
            .is_some()
    }

    /// Does this request declare form elicitation in its client capabilities
    /// (`elicitation: {}` means form, 2026-07-28 `ClientCapabilities`)? A server sends it
    /// an `elicitation/create` of form mode only then (MRTR: never an input request of a kind
    /// the request did not declare).
    pub fn declares_form_elicitation(&self) -> bool {
        self.client_capabilities
            .get("elicitation")
            .and_then(serde_json::Value::as_object)
            .is_some_and(|e| e.is_empty() || e.contains_key("form"))
    }
}

/// One JSON-RPC request (with an id) or notification (without): its [`RequestParts`] behind
/// one allocation, read and written through `Deref` (`req.ctx`, `req.params`, …).
///
/// Boxed because every layer moves the request into its own future and on into the next: a
/// pointer is copied at each step, not the ~470 bytes of the parts (about 2,000 of the
/// instructions an `agent_status` took through the default stack went to those copies).
#[derive(Clone, Debug)]
pub struct McpRequest(Box<RequestParts>);

impl std::ops::Deref for McpRequest {
    type Target = RequestParts;

    fn deref(&self) -> &RequestParts {
        &self.0
    }
}

impl std::ops::DerefMut for McpRequest {
    fn deref_mut(&mut self) -> &mut RequestParts {
        &mut self.0
    }
}

impl From<RequestParts> for McpRequest {
    fn from(parts: RequestParts) -> Self {
        McpRequest(Box::new(parts))
    }
}

/// What an [`McpRequest`] holds.
#[derive(Clone, Debug)]
pub struct RequestParts {
    pub id: Option<RequestId>,
    pub method: Method,
    /// The params, typed for the methods this server serves.
    pub params: Params,
    pub ctx: RequestContext,
    /// The typed arguments of a `tools/call` of `agent_run` or `agent_status`, once someone
    /// parsed them ([`McpRequest::parse_tool_call`]); `params.arguments` is moved out then.
    pub call: Option<ToolCall>,
}

/// What [`McpRequest::parse_tool_call`] found.
#[derive(Debug)]
pub enum ParsedCall<'a> {
    /// Not a `tools/call` of one of our tools with an object (or absent) `arguments`: left
    /// untouched, for the service to answer.
    NotOurs,
    /// The typed arguments, parsed now or earlier.
    Parsed(&'a mut ToolCall),
    /// The arguments break the tool's rules: the `Invalid arguments for tool` answer.
    Invalid(McpResult),
}

impl McpRequest {
    /// Turns this request away: the response a layer returns instead of calling its inner
    /// service.
    pub fn refuse(&self, refusal: Refusal) -> McpResponse {
        self.respond(Payload::Refused(refusal))
    }

    /// A request (`id` set) or notification (`id: None`) with its arguments not yet parsed.
    pub fn new(
        id: Option<RequestId>,
        method: impl Into<Method>,
        params: Map<String, Value>,
        ctx: RequestContext,
    ) -> Self {
        let method = method.into();
        RequestParts {
            id,
            params: Params::parse(&method, params),
            method,
            ctx,
            call: None,
        }
        .into()
    }

    /// The parts, moved out of their box.
    pub fn into_parts(self) -> RequestParts {
        *self.0
    }

    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }

    /// `params.name` of a `tools/call`.
    pub fn tool_name(&self) -> Option<&str> {
        self.params.tools_call()?.name.as_deref()
    }

    /// Parses `params.arguments` of a `tools/call` of `agent_run` or `agent_status` into
    /// [`ToolCall`], the first time anyone asks: the arguments are moved out of `params` (not
    /// copied: they may carry 20 MiB of images) and the typed values kept in
    /// [`RequestParts::call`] for every later layer and the service.
    pub fn parse_tool_call(&mut self) -> ParsedCall<'_> {
        if self.call.is_none() {
            if self.is_notification() {
                return ParsedCall::NotOurs;
            }
            let Some(tool) = self.tool_name() else {
                return ParsedCall::NotOurs;
            };
            let tool = tool.to_owned();
            let Some(params) = self.params.tools_call_mut() else {
                return ParsedCall::NotOurs;
            };
            let arguments = match &params.arguments {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(_)) => match params.arguments.take() {
                    Some(Value::Object(arguments)) => arguments,
                    _ => Map::new(),
                },
                Some(_) => return ParsedCall::NotOurs,
            };
            match ToolCall::parse(&tool, arguments) {
                None => return ParsedCall::NotOurs,
                Some(Ok(call)) => self.call = Some(call),
                Some(Err(problems)) => {
                    let tool = if tool == crate::tools::AGENT_RUN {
                        crate::tools::AGENT_RUN
                    } else {
                        crate::tools::AGENT_STATUS
                    };
                    return ParsedCall::Invalid(invalid_args(tool, &problems));
                }
            }
        }
        match self.call.as_mut() {
            Some(call) => ParsedCall::Parsed(call),
            None => ParsedCall::NotOurs,
        }
    }

    /// Builds a response to this request.
    pub fn respond(&self, payload: Payload) -> McpResponse {
        McpResponse {
            id: self.id.clone(),
            version: self.ctx.version,
            payload,
            ids: ResponseIds::default(),
            identity: None,
        }
    }

    pub fn error(&self, error: ErrorObject) -> McpResponse {
        self.respond(Payload::Error(error))
    }

    /// A [`Payload::ToolCallError`]: `error` is about the tool this `tools/call` names.
    pub fn tool_call_error(&self, error: ErrorObject) -> McpResponse {
        self.respond(Payload::ToolCallError(error))
    }

    pub fn result(&self, result: McpResult) -> McpResponse {
        self.respond(Payload::Result(result))
    }
}

/// `resultType` of a modern result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultKind {
    Complete,
    Task,
    /// 2026-07-28 `InputRequiredResult` (multi-round-trip requests): modern era only.
    InputRequired,
}

impl ResultKind {
    /// The `resultType` value.
    pub fn name(self) -> &'static str {
        match self {
            ResultKind::Complete => "complete",
            ResultKind::Task => "task",
            ResultKind::InputRequired => "input_required",
        }
    }
}

/// Cache hints of modern list/discover results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheHint {
    pub ttl_ms: u64,
    pub public: bool,
}

impl CacheHint {
    /// The `cacheScope` value.
    pub fn scope(self) -> &'static str {
        if self.public { "public" } else { "private" }
    }
}

/// An invalid-arguments tool error (`docs/contract.md` §6.2): a header line, then one line per
/// problem ([`ToolCall::parse`] and the gate layers give the lines).
pub fn invalid_args(tool: &str, problems: &[String]) -> McpResult {
    let mut text = format!("Invalid arguments for tool \"{tool}\":");
    for p in problems {
        text.push('\n');
        text.push_str(p);
    }
    McpResult::tool_text(text, true)
}

/// A result before era rendering.
#[derive(Clone, Debug, PartialEq)]
pub struct McpResult {
    pub kind: ResultKind,
    pub body: ResultBody,
    pub cache: Option<CacheHint>,
}

/// The body of a result: typed where it has one shape (a tool's one text block), a JSON object
/// otherwise.
#[derive(Clone, Debug, PartialEq)]
pub enum ResultBody {
    /// A `CallToolResult` with one text block, `{"content":[{"type":"text","text":…}],
    /// "isError":…}`: what both tools answer. Written straight from the text, with no
    /// `Value` tree built and dropped per answer.
    ToolText { text: String, is_error: bool },
    /// Any other result object.
    Object(Map<String, Value>),
}

impl ResultBody {
    /// The body as a JSON object (a copy of a tool text's text).
    pub fn to_object(&self) -> Map<String, Value> {
        match self {
            ResultBody::Object(map) => map.clone(),
            ResultBody::ToolText { text, is_error } => {
                let mut body = Map::with_capacity(2);
                body.insert("content".into(), json!([{ "type": "text", "text": text }]));
                body.insert("isError".into(), Value::Bool(*is_error));
                body
            }
        }
    }

    /// The body as a JSON object, mutable (a tool text becomes one first).
    pub fn object_mut(&mut self) -> &mut Map<String, Value> {
        if let ResultBody::ToolText { .. } = self {
            *self = ResultBody::Object(self.to_object());
        }
        match self {
            ResultBody::Object(map) => map,
            ResultBody::ToolText { .. } => unreachable!("made an object just above"),
        }
    }

    /// The object of an [`ResultBody::Object`] body (`None` for a tool text: read it with
    /// [`McpResult::first_text`] and [`McpResult::is_tool_error`]).
    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        match self {
            ResultBody::Object(map) => Some(map),
            ResultBody::ToolText { .. } => None,
        }
    }
}

impl From<Map<String, Value>> for ResultBody {
    fn from(map: Map<String, Value>) -> Self {
        ResultBody::Object(map)
    }
}

impl McpResult {
    pub fn complete(body: Map<String, Value>) -> Self {
        Self {
            kind: ResultKind::Complete,
            body: ResultBody::Object(body),
            cache: None,
        }
    }

    pub fn empty() -> Self {
        Self::complete(Map::new())
    }

    /// A `CallToolResult` with one text block.
    pub fn tool_text(text: impl Into<String>, is_error: bool) -> Self {
        Self {
            kind: ResultKind::Complete,
            body: ResultBody::ToolText {
                text: text.into(),
                is_error,
            },
            cache: None,
        }
    }

    pub fn with_cache(mut self, hint: CacheHint) -> Self {
        self.cache = Some(hint);
        self
    }

    /// For a `CallToolResult`: is it a tool error?
    pub fn is_tool_error(&self) -> bool {
        match &self.body {
            ResultBody::ToolText { is_error, .. } => *is_error,
            ResultBody::Object(map) => map.get("isError").and_then(Value::as_bool) == Some(true),
        }
    }

    /// For a `CallToolResult`: the text of its first text block.
    pub fn first_text(&self) -> Option<&str> {
        match &self.body {
            ResultBody::ToolText { text, .. } => Some(text),
            ResultBody::Object(map) => map
                .get("content")?
                .as_array()?
                .iter()
                .find_map(|b| b.get("text").and_then(Value::as_str)),
        }
    }
}

/// What a request produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    Result(McpResult),
    Error(ErrorObject),
    /// The JSON-RPC error of a `tools/call` the request's framing was fine for but whose tool
    /// is unknown or whose arguments are no object: the same message on the wire as
    /// [`Payload::Error`], but about the call's content, so HTTP answers it 200 in every era.
    /// On 2026-07-28 a 400 with a code other than -32020/-32021/-32022 reads to a dual-era
    /// client as "not modern, fall back to `initialize`", which a misspelt tool name is not.
    ToolCallError(ErrorObject),
    /// A notification was accepted; nothing is sent back (HTTP 202).
    Accepted,
    /// A layer turned the request away; each transport maps the [`Refusal`] (HTTP to a status
    /// and headers, stdio to the JSON-RPC error alone).
    Refused(Refusal),
    /// Messages sent over time instead of one answer ([`MessageStream`](super::MessageStream)):
    /// a `subscriptions/listen` stream (HTTP: an SSE response; stdio: lines), or on stdio a
    /// 2025-11-25 `CreateTaskResult` followed by `notifications/tasks/status`.
    Stream(super::StreamSlot),
}

/// The task and session a response is about, when its handler knows them. Layers read them
/// here (the audit log records them) instead of parsing the result text. Never sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseIds {
    pub task_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
}

/// The answer to one [`McpRequest`].
#[derive(Clone, Debug)]
pub struct McpResponse {
    pub id: Option<RequestId>,
    pub version: ProtocolVersion,
    pub payload: Payload,
    pub ids: ResponseIds,
    /// Who the caller turned out to be: the auth layer sets it to the
    /// [`RequestContext::identity`] the request carried past it, so outer layers (the audit
    /// log) learn it from the response. `None` for a refused or anonymous caller, or when no
    /// auth layer is in the stack. Never sent.
    pub identity: Option<String>,
}

/// The `Implementation` object naming this server.
pub fn server_info() -> Value {
    json!({ "name": "agent-mcp", "version": env!("CARGO_PKG_VERSION") })
}

impl McpResponse {
    /// How this response ends its request. A refusal is classified by its type
    /// ([`Refusal::outcome`]), the same on every transport, not by error codes other layers
    /// may share.
    pub fn outcome(&self) -> Outcome {
        match &self.payload {
            Payload::Refused(refusal) => refusal.outcome(),
            Payload::Error(_) | Payload::ToolCallError(_) => Outcome::ProtocolError,
            Payload::Result(r) if r.is_tool_error() => Outcome::ToolError,
            Payload::Result(_) | Payload::Accepted | Payload::Stream(_) => Outcome::Ok,
        }
    }

    /// The refusal this response carries, if a layer turned the request away.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.payload {
            Payload::Refused(r) => Some(r),
            _ => None,
        }
    }

    pub fn error_code(&self) -> Option<i64> {
        match &self.payload {
            Payload::Error(e) | Payload::ToolCallError(e) => Some(e.code),
            Payload::Refused(r) => Some(r.code()),
            _ => None,
        }
    }

    /// The JSON-RPC message to send, read back from [`Self::to_bytes`] as a `Value` (for a
    /// layer that inspects an answer, and for tests); `None` for an accepted notification and
    /// for a [`Payload::Stream`] (its messages come from the stream).
    pub fn to_json(&self) -> Option<Value> {
        self.to_bytes()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
    }

    /// The one encoder of an answer, shared by every transport: the JSON-RPC message, shaped
    /// for this response's era, as one line of bytes (JSON escapes every newline inside it);
    /// `None` when nothing is sent (an accepted notification, a [`Payload::Stream`]).
    ///
    /// A result is written straight from its body, not first rebuilt as a `Value` tree (the
    /// envelope, the era's keys, the server info): keys in the order a `serde_json::Map`
    /// keeps them (sorted), strings escaped eight bytes at a time, the very bytes serde_json
    /// would write for the same message. Errors are small and written by serde_json.
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        let error = match &self.payload {
            Payload::Accepted | Payload::Stream(_) => return None,
            Payload::Result(result) => return Some(self.result_bytes(result)),
            Payload::Error(e) | Payload::ToolCallError(e) => {
                response_json(self.id.as_ref(), Err(e))
            }
            Payload::Refused(r) => response_json(self.id.as_ref(), Err(&r.error_object())),
        };
        Some(serde_json::to_vec(&error).unwrap_or_else(|_| b"{}".to_vec()))
    }

    fn result_bytes(&self, result: &McpResult) -> Vec<u8> {
        // A status answer is a few hundred bytes: one allocation in the common case.
        let mut out = Vec::with_capacity(512);
        // `response_json`'s keys, in the order a `serde_json::Map` keeps them (sorted).
        out.extend_from_slice(b"{\"id\":");
        match &self.id {
            None => out.extend_from_slice(b"null"),
            Some(RequestId::Number(n)) => json_out::write_value(&mut out, &Value::from(*n)),
            Some(RequestId::String(s)) => json_out::write_str(&mut out, s),
        }
        out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"result\":");
        write_rendered(&mut out, self.version, result);
        out.push(b'}');
        out
    }
}

/// A value the modern era adds to a result.
enum Added<'a> {
    Str(&'static str),
    U64(u64),
    /// `_meta`: the body's own `_meta` object (if any) with the server info added.
    Meta(Option<&'a Map<String, Value>>),
    ServerInfo,
}

/// A string of ours that needs no escape (an added key, `complete`, `private`), quoted.
fn write_plain(out: &mut Vec<u8>, s: &str) {
    debug_assert!(!s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\'));
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

fn write_added(out: &mut Vec<u8>, added: &Added<'_>) {
    match added {
        Added::Str(s) => write_plain(out, s),
        Added::U64(n) => json_out::write_value(out, &Value::from(*n)),
        Added::Meta(meta) => {
            write_merged(out, *meta, &[Some((META_SERVER_INFO, Added::ServerInfo))])
        }
        Added::ServerInfo => {
            out.extend_from_slice(b"{\"name\":\"agent-mcp\",\"version\":");
            write_plain(out, env!("CARGO_PKG_VERSION"));
            out.push(b'}');
        }
    }
}

/// A map's entries merged with `added` (sorted by key, as a `serde_json::Map` iterates; `None`
/// entries are skipped); an added key replaces a body key of the same name, as `insert` does.
fn write_merged(
    out: &mut Vec<u8>,
    body: Option<&Map<String, Value>>,
    added: &[Option<(&'static str, Added<'_>)>],
) {
    let mut first = true;
    // `ours`: an added key, which needs no escape.
    let mut entry = |out: &mut Vec<u8>, key: &str, ours: bool| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        if ours {
            write_plain(out, key);
        } else {
            json_out::write_str(out, key);
        }
        out.push(b':');
    };
    out.push(b'{');
    let mut added = added.iter().flatten().peekable();
    for (key, value) in body.into_iter().flatten() {
        while let Some((k, v)) = added.next_if(|(k, _)| *k < key.as_str()) {
            entry(out, k, true);
            write_added(out, v);
        }
        match added.next_if(|(k, _)| *k == key.as_str()) {
            Some((k, v)) => {
                entry(out, k, true);
                write_added(out, v);
            }
            None => {
                entry(out, key, false);
                json_out::write_value(out, value);
            }
        }
    }
    for (k, v) in added {
        entry(out, k, true);
        write_added(out, v);
    }
    out.push(b'}');
}

/// A result's body shaped for `version`'s era (the one place era differences are written):
/// the body as it is (legacy), or merged with the keys the modern era adds (`resultType`, the
/// cache hint, the server info in `_meta`).
fn write_rendered(out: &mut Vec<u8>, version: ProtocolVersion, result: &McpResult) {
    let body = match &result.body {
        ResultBody::ToolText { text, is_error } => {
            return write_tool_text(out, version, result, text, *is_error);
        }
        ResultBody::Object(body) => body,
    };
    if version.era() != Era::Modern {
        json_out::write_map(out, body);
        return;
    }
    // Sorted by key: `_` sorts before the lowercase letters.
    let mut added: [Option<(&'static str, Added<'_>)>; 4] = [None, None, None, None];
    match body.get("_meta") {
        // A `_meta` that is not an object is left as it is.
        Some(Value::Object(meta)) => added[0] = Some(("_meta", Added::Meta(Some(meta)))),
        Some(_) => {}
        None => added[0] = Some(("_meta", Added::Meta(None))),
    }
    if let Some(cache) = result.cache {
        added[1] = Some(("cacheScope", Added::Str(cache.scope())));
        added[3] = Some(("ttlMs", Added::U64(cache.ttl_ms)));
    }
    added[2] = Some(("resultType", Added::Str(result.kind.name())));
    write_merged(out, Some(body), &added);
}

/// [`ResultBody::ToolText`] shaped for `version`'s era, its keys in the order
/// [`write_merged`] gives an object of them (`_meta` < `cacheScope` < `content` < `isError` <
/// `resultType` < `ttlMs`).
fn write_tool_text(
    out: &mut Vec<u8>,
    version: ProtocolVersion,
    result: &McpResult,
    text: &str,
    is_error: bool,
) {
    let modern = version.era() == Era::Modern;
    out.push(b'{');
    if modern {
        out.extend_from_slice(b"\"_meta\":");
        write_added(out, &Added::Meta(None));
        out.push(b',');
        if let Some(cache) = result.cache {
            out.extend_from_slice(b"\"cacheScope\":");
            write_plain(out, cache.scope());
            out.push(b',');
        }
    }
    out.extend_from_slice(b"\"content\":[{\"text\":");
    json_out::write_str(out, text);
    out.extend_from_slice(b",\"type\":\"text\"}],\"isError\":");
    out.extend_from_slice(if is_error { b"true" } else { b"false" });
    if modern {
        out.extend_from_slice(b",\"resultType\":");
        write_plain(out, result.kind.name());
        if let Some(cache) = result.cache {
            out.extend_from_slice(b",\"ttlMs\":");
            json_out::write_value(out, &Value::from(cache.ttl_ms));
        }
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(version: ProtocolVersion, result: McpResult) -> McpResponse {
        McpResponse {
            id: Some(RequestId::Number(1)),
            version,
            payload: Payload::Result(result),
            ids: ResponseIds::default(),
            identity: None,
        }
    }

    #[test]
    fn modern_results_gain_result_type_server_info_and_cache() {
        let r = McpResult::empty().with_cache(CacheHint {
            ttl_ms: 5,
            public: true,
        });
        let v = response(ProtocolVersion::V2026_07_28, r).to_json().unwrap();
        assert_eq!(
            v["result"],
            json!({"resultType":"complete","ttlMs":5,"cacheScope":"public",
                   "_meta":{META_SERVER_INFO: server_info()}})
        );
    }

    /// The era rendering as a `Value` tree, the plain way: the oracle the encoder is held to.
    fn reference_render(version: ProtocolVersion, result: &McpResult) -> Value {
        let mut body = result.body.to_object();
        if version.era() == Era::Modern {
            body.insert("resultType".into(), Value::from(result.kind.name()));
            if let Some(cache) = result.cache {
                body.insert("ttlMs".into(), Value::from(cache.ttl_ms));
                let scope = if cache.public { "public" } else { "private" };
                body.insert("cacheScope".into(), Value::from(scope));
            }
            let meta = body
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(META_SERVER_INFO.into(), server_info());
            }
        }
        Value::Object(body)
    }

    /// `to_bytes` writes the result without a `Value` tree; it must give the very bytes
    /// serde_json gives for the plainly built message, for every shape of body the era
    /// rendering touches.
    #[test]
    fn to_bytes_is_byte_for_byte_serde_json_of_the_reference() {
        let bodies = [
            json!({}),
            json!({"content": [{"type": "text", "text": "task_id: x\nstatus: \"done\" ü"}], "isError": false}),
            // Keys sorting before and after each added key, and ones the era replaces.
            json!({"A": 1, "Z": [], "a": null, "cacheScope": "mine", "resultType": "x",
                   "s": {"b": 1, "a": 2}, "ttlMs": "no", "zz": true, "\u{1}\t": 0}),
            // A `_meta` object of the body keeps its keys and gains the server info.
            json!({"_meta": {"a": 1, "zzz": {"k": "v"}, META_SERVER_INFO: "theirs"}, "x": 1}),
            json!({"_meta": {}}),
            // A `_meta` that is not an object is left as it is.
            json!({"_meta": "text", "x": 1}),
            json!({"_meta": null}),
            json!({"_": 1, "_a": 2, "_meta0": 3, "^": 4}),
        ]
        .map(|body| match body {
            Value::Object(map) => ResultBody::Object(map),
            _ => unreachable!("every body above is an object"),
        });
        // Tool texts, written without a `Value` tree: the same bytes as their object.
        let texts = [
            "",
            "task_id: x\nstatus: \"done\" ü",
            "\u{1}\u{7f}\\ \u{2028} 日本語",
        ];
        let bodies: Vec<ResultBody> = bodies
            .into_iter()
            .chain(texts.iter().flat_map(|text| {
                [false, true].map(|is_error| ResultBody::ToolText {
                    text: (*text).into(),
                    is_error,
                })
            }))
            .collect();
        let ids = [
            None,
            Some(RequestId::Number(-7)),
            Some(RequestId::String("a\"b".into())),
        ];
        let caches = [
            None,
            Some(CacheHint {
                ttl_ms: 0,
                public: false,
            }),
            Some(CacheHint {
                ttl_ms: u64::MAX,
                public: true,
            }),
        ];
        let mut checked = 0;
        for body in &bodies {
            for id in &ids {
                for cache in caches {
                    for kind in [ResultKind::Complete, ResultKind::Task] {
                        for version in ProtocolVersion::SUPPORTED {
                            let result = McpResult {
                                kind,
                                body: body.clone(),
                                cache,
                            };
                            let expected = serde_json::to_vec(&response_json(
                                id.as_ref(),
                                Ok(reference_render(version, &result)),
                            ))
                            .unwrap();
                            let response = McpResponse {
                                id: id.clone(),
                                version,
                                payload: Payload::Result(result),
                                ids: ResponseIds::default(),
                                identity: None,
                            };
                            let got = response.to_bytes().unwrap();
                            assert_eq!(
                                String::from_utf8(got).unwrap(),
                                String::from_utf8(expected).unwrap(),
                                "{body:?} {id:?} {cache:?} {kind:?} {version}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, (8 + 6) * 3 * 3 * 2 * 4);
    }

    #[test]
    fn to_bytes_of_errors_refusals_and_nothing() {
        let base = McpResponse {
            id: Some(RequestId::Number(1)),
            version: ProtocolVersion::V2026_07_28,
            payload: Payload::Accepted,
            ids: ResponseIds::default(),
            identity: None,
        };
        assert_eq!(base.to_bytes(), None);
        let text = |payload| {
            let response = McpResponse {
                payload,
                ..base.clone()
            };
            String::from_utf8(response.to_bytes().expect("a message")).unwrap()
        };
        let error = ErrorObject::invalid_params("bad").with_data(json!({"z": 1, "a": 2}));
        let expected = r#"{"error":{"code":-32602,"data":{"a":2,"z":1},"message":"bad"},"id":1,"jsonrpc":"2.0"}"#;
        // A tool-level error is the same message; only HTTP's status differs.
        assert_eq!(text(Payload::Error(error.clone())), expected);
        assert_eq!(text(Payload::ToolCallError(error)), expected);
        assert_eq!(
            text(Payload::Refused(Refusal::rate_limited(3, "later"))),
            r#"{"error":{"code":-32000,"data":{"retryAfterSeconds":3},"message":"later"},"id":1,"jsonrpc":"2.0"}"#
        );
    }

    #[test]
    fn legacy_results_stay_legacy_shaped() {
        let r = McpResult::empty().with_cache(CacheHint {
            ttl_ms: 5,
            public: true,
        });
        let v = response(ProtocolVersion::V2025_11_25, r).to_json().unwrap();
        assert_eq!(v["result"], json!({}));
    }
}
