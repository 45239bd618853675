//! The spans this server exports, built as `tracing` spans that the OpenTelemetry layer turns
//! into OTel spans — all but the per-request MCP server span, which is built with the
//! OpenTelemetry API on the same layer's tracer ([`ServerSpan`], for its cost) —: a builder per
//! kind of span, and helpers that record what is learnt later (token usage, errors, opt-in
//! content).
//!
//! | builder | OTel name | kind |
//! |---|---|---|
//! | [`McpServerSpan`] | `{mcp.method.name} {gen_ai.tool.name}` (`tools/call agent_run`) | SERVER |
//! | [`InvokeAgentSpan`] | `invoke_agent agent-mcp` | INTERNAL |
//! | [`ChatSpan`] | `chat {gen_ai.request.model}` | CLIENT |
//! | [`ExecuteToolSpan`] | `execute_tool {gen_ai.tool.name}` | INTERNAL |
//! | [`startup_span`] | `startup` | INTERNAL |
//!
//! How `tracing-opentelemetry` reads them: a span's OTel name is its `otel.name` field, its kind
//! `otel.kind` (`server`, `client`, `internal`), its status `otel.status_code` (`ok`, `error`)
//! or `otel.status_description` (which also means `error`); every other field becomes an
//! attribute, so each builder declares all its fields up front (a field not declared at
//! creation cannot be recorded later). Every span has the target [`TARGET`]: the export layer
//! passes only that target, and the log output drops it, so when export is off the spans are
//! disabled at their call site and each builder costs one relaxed atomic load. The server
//! span is enabled by the same call-site check ([`export_enabled`]).
//!
//! What becomes an attribute is chosen, not copied: method, tool and model names are `'static`
//! names of ours (an unknown one is [`value::OTHER`]), ids are cut to [`MAX_ID_LEN`], error
//! types to a short token. No request text, image or tool output is recorded unless content
//! capture is on ([`record_content`]).
//!
//! ```
//! use agent_mcp::telemetry::spans::{ChatSpan, McpServerSpan, Network, record_error, record_usage};
//!
//! // The edge builds the server span once the message is parsed…
//! let server = McpServerSpan::new("tools/call")
//!     .with_tool("agent_run")
//!     .with_request_id("7")
//!     .with_protocol_version("2026-07-28")
//!     .with_network(Network::Http { peer: None })
//!     .start();
//!
//! // …and the agent one span per model call, with its token usage.
//! let chat = ChatSpan::new("qwen3:8b").with_server("127.0.0.1", 11434).start();
//! record_usage(&chat, 120, 48);
//! record_error(&chat, "timeout", None);
//! // No OpenTelemetry layer is installed here, so both are disabled and cost nothing.
//! assert!(server.is_disabled() && chat.is_disabled());
//! ```

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, Status, TraceContextExt, TraceFlags, TraceState};
use serde_json::Map;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::context::{Caller, RemoteParent};
use super::semconv::{TARGET, attr, value};

/// The longest id (JSON-RPC request id, task, session or tool call id) recorded; a longer one
/// is cut. Ids come from clients and models, so their length is theirs to choose.
pub const MAX_ID_LEN: usize = 128;

/// The longest opt-in content value recorded ([`record_content`]); a longer one is cut.
pub const MAX_CONTENT_BYTES: usize = 16 * 1024;

/// Set once export starts with `capture_content` on; read by [`record_content`].
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether opt-in content (prompts, tool arguments and results) is recorded on spans: only
/// when export runs with `telemetry.capture_content: true`.
pub fn content_capture_enabled() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

pub(super) fn set_content_capture(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether the export spans are enabled here (an export layer is installed): one relaxed
/// atomic load once the call site's interest is cached. Callers check it before preparing
/// what a span needs (an id as text, a parsed context).
pub fn export_enabled() -> bool {
    tracing::span_enabled!(target: TARGET, tracing::Level::INFO)
}

/// How a request reached the server, for `network.*` and `client.*` attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    Http {
        peer: Option<SocketAddr>,
    },
    Stdio,
    /// Called in-process: no network attributes.
    InProcess,
}

impl Network {
    fn transport(self) -> Option<&'static str> {
        match self {
            Network::Http { .. } => Some(value::TRANSPORT_TCP),
            Network::Stdio => Some(value::TRANSPORT_PIPE),
            Network::InProcess => None,
        }
    }
}

/// The OTel name, formatted only if the span is enabled.
struct Name<'a>(&'static str, Option<&'a str>);

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(target) => write!(f, "{} {target}", self.0),
            None => f.write_str(self.0),
        }
    }
}

/// At most [`MAX_ID_LEN`] characters of an id.
fn bounded(id: &str) -> &str {
    match id.char_indices().nth(MAX_ID_LEN) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}

/// What the server span and the duration measurement of one request both say of it (see
/// [`OperationAttributes`](super::duration::OperationAttributes)).
#[derive(Clone, Copy, Debug)]
pub(super) struct Operation {
    pub(super) method: &'static str,
    pub(super) tool: Option<&'static str>,
    pub(super) protocol_version: Option<&'static str>,
    pub(super) network: Network,
}

impl Operation {
    pub(super) fn new(method: &'static str) -> Self {
        Self {
            method,
            tool: None,
            protocol_version: None,
            network: Network::InProcess,
        }
    }

    /// Whether the two have the same [shared attributes](Self::for_each_shared_attribute):
    /// everything but the peer.
    pub(super) fn same_attributes(&self, other: &Operation) -> bool {
        let network = |n: Network| match n {
            Network::Http { .. } => 0u8,
            Network::Stdio => 1,
            Network::InProcess => 2,
        };
        // Names of ours are the same `'static` text, so most compare by address alone.
        fn same(a: &'static str, b: &'static str) -> bool {
            std::ptr::eq(a, b) || a == b
        }
        same(self.method, other.method)
            && match (self.tool, other.tool) {
                (Some(a), Some(b)) => same(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
            && match (self.protocol_version, other.protocol_version) {
                (Some(a), Some(b)) => same(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
            && network(self.network) == network(other.network)
    }

    /// Calls `f` with each attribute that every span of this operation has alike (all of them
    /// names of ours, `'static`): the method, the tool, the protocol version and the transport.
    /// The export thread encodes them once per operation, not once per span.
    pub(super) fn for_each_shared_attribute(&self, mut f: impl FnMut(&'static str, &'static str)) {
        f(attr::MCP_METHOD_NAME, self.method);
        if let Some(tool) = self.tool {
            f(attr::GEN_AI_TOOL_NAME, tool);
            f(attr::GEN_AI_OPERATION_NAME, value::EXECUTE_TOOL);
        }
        if let Some(version) = self.protocol_version {
            f(attr::MCP_PROTOCOL_VERSION, version);
        }
        if let Some(transport) = self.network.transport() {
            f(attr::NETWORK_TRANSPORT, transport);
        }
        if let Network::Http { .. } = self.network {
            f(attr::NETWORK_PROTOCOL_NAME, value::PROTOCOL_HTTP);
        }
    }
}

/// The builder methods of an [`Operation`]'s members, for a type that keeps one as
/// `operation`.
macro_rules! operation_builders {
    () => {
        /// The tool of a `tools/call` (one of ours, or [`value::OTHER`]): the span's target,
        /// and `gen_ai.operation.name = execute_tool`.
        pub fn with_tool(mut self, tool: &'static str) -> Self {
            self.operation.tool = Some(tool);
            self
        }

        pub fn with_protocol_version(mut self, version: &'static str) -> Self {
            self.operation.protocol_version = Some(version);
            self
        }

        pub fn with_network(mut self, network: $crate::telemetry::spans::Network) -> Self {
            self.operation.network = network;
            self
        }
    };
}
pub(super) use operation_builders;

/// The MCP server span of one request or notification (mcp.md "Server"). `mcp.session.id` is
/// never set: this server is stateless and mints no session.
#[derive(Clone, Debug)]
pub struct McpServerSpan<'a> {
    operation: Operation,
    request_id: Option<RequestIdRef<'a>>,
}

/// A JSON-RPC id as the builder takes it: text is copied (cut) when the span starts, a number
/// only written out as text when the span is encoded, on the export thread.
#[derive(Clone, Copy, Debug)]
enum RequestIdRef<'a> {
    Text(&'a str),
    Number(i64),
}

impl<'a> McpServerSpan<'a> {
    /// `method` is one of ours (`tools/call`, `tasks/get`, …); pass [`value::OTHER`] for a
    /// method the server does not know, whose name is the client's text.
    pub fn new(method: &'static str) -> Self {
        Self {
            operation: Operation::new(method),
            request_id: None,
        }
    }

    operation_builders!();

    /// The JSON-RPC `id` as a string (not set for a notification, nor for `id: null`).
    pub fn with_request_id(mut self, id: &'a str) -> Self {
        self.request_id = Some(RequestIdRef::Text(bounded(id)));
        self
    }

    /// A numeric JSON-RPC `id`: recorded as its decimal text, as [`Self::with_request_id`]
    /// would, but formatted only when the span is encoded.
    pub fn with_request_number(mut self, id: i64) -> Self {
        self.request_id = Some(RequestIdRef::Number(id));
        self
    }

    /// The span, a root of its own trace (see [`Self::start_in`]).
    pub fn start(self) -> ServerSpan {
        self.start_in(RemoteParent::default())
    }

    /// The span, a child of the caller's context ([`RemoteParent::of_request`]; read it only
    /// when [`export_enabled`]), the transport's context linked when it differs.
    pub fn start_in(self, parent: RemoteParent) -> ServerSpan {
        let Some(sink) = export_enabled().then(export_sink).flatten() else {
            return ServerSpan { inner: None };
        };
        let caller = parent
            .parent
            .as_ref()
            .map(|cx| cx.span().span_context().clone())
            .filter(SpanContext::is_valid);
        self.start_with(sink, caller, parent.parent, parent.link)
    }

    /// [`Self::start_in`] on the export layer `export` (found by the caller, once a request:
    /// [`SpanExport::current`]), with the caller's context read from `params._meta` and the
    /// HTTP headers as [`RemoteParent::of_request`] reads it, without building an
    /// OpenTelemetry `Context` unless the caller sent baggage (see [`Caller`]).
    pub fn start_for_request(
        self,
        export: SpanExport,
        meta: Option<&Map<String, serde_json::Value>>,
        headers: Option<&http::HeaderMap>,
    ) -> ServerSpan {
        let Caller {
            parent,
            baggage,
            link,
        } = Caller::of_request(meta, headers);
        self.start_with(export.0, parent, baggage, link)
    }

    /// Not built with the SDK's tracer, nor as a `tracing` span through the bridge: this span
    /// is made once per request, and both ways cost a request more than the rest of the
    /// export together (issue 32, measured with callgrind: the bridge ~13 000 instructions;
    /// the SDK's span — sampler, id generator, `Context`, the attribute `Vec`, `SpanData` into
    /// its batch channel, dropped on its thread — ~5 000 more than this). It is a plain
    /// [`ServerSpanData`] with `'static` names, sampled here as the SDK's sampler would
    /// ([`TraceSampler::samples`](super::TraceSampler)), pushed when dropped onto the export
    /// layer's own bounded queue ([`ServerSink`]) and encoded straight to protobuf on the
    /// export thread. Its context is a span context like any other, so `tracing` spans (the
    /// task's) parent on it as before.
    fn start_with(
        self,
        sink: Arc<ServerSink>,
        parent: Option<SpanContext>,
        parent_cx: Option<Context>,
        link: Option<SpanContext>,
    ) -> ServerSpan {
        let span_id = ids::span_id();
        let (trace_id, flags, state, parent_span_id, parent_is_remote) = match &parent {
            Some(p) => (
                p.trace_id(),
                p.trace_flags(),
                p.trace_state().clone(),
                p.span_id(),
                p.is_remote(),
            ),
            None => (
                ids::trace_id(),
                TraceFlags::default(),
                TraceState::default(),
                SpanId::INVALID,
                false,
            ),
        };
        let sampled = sink.sampler.samples(parent.as_ref(), trace_id);
        let context =
            SpanContext::new(trace_id, span_id, flags.with_sampled(sampled), false, state);
        let request_id = match self.request_id {
            None => RequestIdAttr::None,
            Some(RequestIdRef::Text(text)) => RequestIdAttr::Text(text.to_owned()),
            Some(RequestIdRef::Number(n)) => RequestIdAttr::Number(n),
        };
        let now = opentelemetry::time::now();
        ServerSpan {
            inner: Some(Recording {
                data: ServerSpanData {
                    context,
                    parent_span_id,
                    parent_is_remote,
                    start: now,
                    end: now,
                    operation: self.operation,
                    request_id,
                    error: None,
                    link: link.map(Box::new),
                },
                sink: sampled.then_some(sink),
                parent: parent_cx,
            }),
        }
    }
}

/// The server spans' sink of the export layer in force; `None` without one.
fn export_sink() -> Option<Arc<ServerSink>> {
    if !SINK_MADE.load(Ordering::Relaxed) {
        return None;
    }
    tracing::dispatcher::get_default(|dispatch| {
        dispatch
            .downcast_ref::<ExportFilter>()
            .map(|filter| filter.server.clone())
    })
}

/// Set once an export layer (and so a [`ServerSink`]) has been made in this process: until
/// then no dispatcher can hold one, and [`SpanExport::current`] is one atomic load.
static SINK_MADE: AtomicBool = AtomicBool::new(false);

impl ServerSink {
    pub(super) fn new(sampler: super::TraceSampler, target: SinkTarget) -> Arc<Self> {
        SINK_MADE.store(true, Ordering::Relaxed);
        Arc::new(Self { sampler, target })
    }
}

/// The export layer of the subscriber in force, for the server span of one request: the edge
/// looks it up once and, when there is one, hands it to
/// [`McpServerSpan::start_for_request`]. This lookup is also the edge's "is export on": it
/// costs about half of [`export_enabled`] with export on (whose check runs every filter of the
/// subscriber, the log filter included, on every call), and one atomic load in a process that
/// never started export.
#[derive(Debug)]
pub struct SpanExport(Arc<ServerSink>);

impl SpanExport {
    /// `None` when no export layer is installed in the current dispatcher.
    pub fn current() -> Option<Self> {
        export_sink().map(SpanExport)
    }
}

/// Random span and trace ids from a per-thread SplitMix64 (seeded from the standard library's
/// per-process random keys, the thread and the clock): the SDK's generator draws from a
/// ChaCha RNG behind a thread-local for each id. Never zero (an invalid id).
mod ids {
    use std::cell::Cell;
    use std::hash::BuildHasher;

    use opentelemetry::trace::{SpanId, TraceId};

    thread_local! {
        static STATE: Cell<u64> = Cell::new(seed());
    }

    fn seed() -> u64 {
        std::collections::hash_map::RandomState::new()
            .hash_one((std::thread::current().id(), std::time::SystemTime::now()))
    }

    fn next() -> u64 {
        STATE.with(|state| {
            let x = state.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
            state.set(x);
            let z = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
    }

    pub(super) fn span_id() -> SpanId {
        loop {
            let n = next();
            if n != 0 {
                return SpanId::from(n);
            }
        }
    }

    pub(super) fn trace_id() -> TraceId {
        loop {
            let n = u128::from(next()) << 64 | u128::from(next());
            if n != 0 {
                return TraceId::from(n);
            }
        }
    }
}

/// An address as text, on the stack (no allocation a span). IPv4 by hand: `Display` for
/// `IpAddr` took 1 500 instructions, a third of the server span's own cost.
struct IpText {
    /// The longest IPv6 text (`ffff:ffff:…:255.255.255.255`) is 45 bytes.
    buf: [u8; 46],
    len: usize,
}

impl IpText {
    fn new(ip: IpAddr) -> Self {
        let mut text = IpText {
            buf: [0; 46],
            len: 0,
        };
        match ip {
            IpAddr::V4(v4) => {
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        text.push(b'.');
                    }
                    if octet >= 100 {
                        text.push(b'0' + octet / 100);
                    }
                    if octet >= 10 {
                        text.push(b'0' + octet / 10 % 10);
                    }
                    text.push(b'0' + octet % 10);
                }
            }
            IpAddr::V6(v6) => {
                use std::fmt::Write as _;
                // Fits: `write_str` refuses (and `Display` stops) rather than overflow.
                let _ = write!(text, "{v6}");
            }
        }
        text
    }

    fn push(&mut self, byte: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = byte;
            self.len += 1;
        }
    }

    /// Only ASCII digits, dots, colons and hex letters are ever written.
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl fmt::Write for IpText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let slot = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `{mcp.method.name} {target}`: borrowed for `tools/call` of our tools (the requests that
/// matter for cost), formatted otherwise.
fn server_span_name(method: &'static str, tool: Option<&'static str>) -> Cow<'static, str> {
    const TOOLS_CALL: &str = "tools/call";
    match (method, tool) {
        (_, None) => Cow::Borrowed(method),
        (TOOLS_CALL, Some("agent_run")) => Cow::Borrowed("tools/call agent_run"),
        (TOOLS_CALL, Some("agent_status")) => Cow::Borrowed("tools/call agent_status"),
        (TOOLS_CALL, Some(value::OTHER)) => Cow::Borrowed("tools/call _OTHER"),
        (method, Some(tool)) => Cow::Owned(format!("{method} {tool}")),
    }
}

/// The JSON-RPC id of a finished server span.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum RequestIdAttr {
    None,
    Text(String),
    Number(i64),
}

/// How a server span's request failed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum ServerError {
    /// A JSON-RPC error answer with this code, and the status description (a fixed text of
    /// ours, perhaps empty).
    Rpc(i64, &'static str),
    /// A `CallToolResult` with `isError: true`.
    Tool,
}

/// An attribute value of a server span, borrowed for the encoder. A text is its UTF-8 bytes:
/// a `str`'s, or ASCII written on the stack (digits, an address), which the encoder copies as
/// they are without checking them again.
#[derive(Clone, Copy, Debug)]
pub(super) enum AttrValue<'a> {
    Str(&'a [u8]),
    Int(i64),
}

/// A server span as the export queue holds it: ids, times, the [`Operation`] (all `'static`
/// names), the request id and the outcome. Its attributes are those the conventions give
/// ([`Self::for_each_attribute`]). Its name and status follow from the operation and the
/// outcome, so they are not kept: a request moves this record a few times on its way to the
/// queue, and each byte less is a byte less copied (issue 32).
#[derive(Clone, Debug)]
pub(super) struct ServerSpanData {
    pub(super) context: SpanContext,
    pub(super) parent_span_id: SpanId,
    pub(super) parent_is_remote: bool,
    pub(super) start: SystemTime,
    pub(super) end: SystemTime,
    pub(super) operation: Operation,
    pub(super) request_id: RequestIdAttr,
    pub(super) error: Option<ServerError>,
    /// The transport's context, when it differs from the parent (seldom: boxed).
    pub(super) link: Option<Box<SpanContext>>,
}

impl ServerSpanData {
    /// `{mcp.method.name} {target}`.
    pub(super) fn name(&self) -> Cow<'static, str> {
        server_span_name(self.operation.method, self.operation.tool)
    }

    /// ERROR with the outcome's description when the request failed, else UNSET.
    pub(super) fn status(&self) -> Status {
        match self.error {
            None => Status::Unset,
            Some(ServerError::Rpc(_, description)) => Status::error(description),
            Some(ServerError::Tool) => Status::error(""),
        }
    }

    /// Calls `f` with each attribute, keys `'static`: the operation's
    /// [shared ones](Operation::for_each_shared_attribute), then [its own](Self::for_each_own_attribute)
    /// (the encoder writes the two parts itself: the shared ones once per operation).
    #[cfg(test)]
    pub(super) fn for_each_attribute(&self, mut f: impl FnMut(&'static str, AttrValue<'_>)) {
        self.operation
            .for_each_shared_attribute(|key, value| f(key, AttrValue::Str(value.as_bytes())));
        self.for_each_own_attribute(f);
    }

    /// Calls `f` with the attributes of this span alone (the request id, the peer, the
    /// error); the ones only known as numbers or addresses are written out as text here, on
    /// the export thread, on the stack.
    pub(super) fn for_each_own_attribute(&self, mut f: impl FnMut(&'static str, AttrValue<'_>)) {
        match &self.request_id {
            RequestIdAttr::None => {}
            RequestIdAttr::Text(text) => {
                f(attr::JSONRPC_REQUEST_ID, AttrValue::Str(text.as_bytes()))
            }
            RequestIdAttr::Number(n) => {
                let mut digits = [0u8; 20];
                f(
                    attr::JSONRPC_REQUEST_ID,
                    AttrValue::Str(decimal(*n, &mut digits)),
                );
            }
        }
        if let Network::Http { peer: Some(peer) } = self.operation.network {
            f(
                attr::CLIENT_ADDRESS,
                AttrValue::Str(IpText::new(peer.ip()).as_bytes()),
            );
            f(attr::CLIENT_PORT, AttrValue::Int(i64::from(peer.port())));
        }
        match self.error {
            None => {}
            Some(ServerError::Rpc(code, _)) => {
                // A code's decimal text is already an `error.type` token.
                let mut digits = [0u8; 20];
                let code = decimal(code, &mut digits);
                f(attr::RPC_RESPONSE_STATUS_CODE, AttrValue::Str(code));
                f(attr::ERROR_TYPE, AttrValue::Str(code));
            }
            Some(ServerError::Tool) => f(
                attr::ERROR_TYPE,
                AttrValue::Str(value::TOOL_ERROR.as_bytes()),
            ),
        }
    }

    /// The same span as the SDK's `SpanData` (what the unit tests read back).
    #[cfg(test)]
    pub(super) fn to_span_data(&self) -> opentelemetry_sdk::trace::SpanData {
        use opentelemetry::trace::{Link, SpanKind};
        use opentelemetry::{Key, KeyValue, Value};
        let mut attributes = Vec::new();
        self.for_each_attribute(|key, value| {
            let value = match value {
                AttrValue::Str(s) => Value::from(String::from_utf8_lossy(s).into_owned()),
                AttrValue::Int(i) => Value::I64(i),
            };
            attributes.push(KeyValue::new(Key::from_static_str(key), value));
        });
        let mut links = opentelemetry_sdk::trace::SpanLinks::default();
        if let Some(link) = &self.link {
            links
                .links
                .push(Link::with_context(SpanContext::clone(link)));
        }
        opentelemetry_sdk::trace::SpanData {
            span_context: self.context.clone(),
            parent_span_id: self.parent_span_id,
            parent_span_is_remote: self.parent_is_remote,
            span_kind: SpanKind::Server,
            name: self.name(),
            start_time: self.start,
            end_time: self.end,
            attributes,
            dropped_attributes_count: 0,
            events: opentelemetry_sdk::trace::SpanEvents::default(),
            links,
            status: self.status(),
            instrumentation_scope: opentelemetry::InstrumentationScope::builder(
                super::semconv::SCOPE,
            )
            .build(),
        }
    }
}

/// `n` in decimal, written into `buf` (an `i64` needs at most 20 bytes).
fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// The export layer's filter ([`TARGET`] spans only), which also holds where the per-request
/// server spans go ([`ServerSpan`], not built by the SDK): it is found
/// through the current dispatcher (`Dispatch::downcast_ref`), so it follows the subscriber that
/// is in force, as the `tracing` spans do.
#[derive(Debug, Clone)]
pub struct ExportFilter {
    /// Where the server spans go, and their sampler.
    pub(super) server: Arc<ServerSink>,
}

impl<S> tracing_subscriber::layer::Filter<S> for ExportFilter {
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        is_exported(meta)
    }

    // The decision reads the metadata alone, so each call site is asked once.
    fn callsite_enabled(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if is_exported(meta) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
}

fn is_exported(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && meta.target() == TARGET
}

/// Where finished server spans are queued for export (the export's bounded queue).
pub(super) trait SpanQueue: Send + Sync + std::fmt::Debug {
    /// Queues a finished span, or drops and counts it when there is no room.
    fn push(&self, span: ServerSpanData);
}

/// Where the export layer's server spans go, with the sampler that decides which do.
#[derive(Debug)]
pub(super) struct ServerSink {
    sampler: super::TraceSampler,
    target: SinkTarget,
}

#[derive(Debug)]
pub(super) enum SinkTarget {
    /// The export's bounded queue.
    Queue(Arc<dyn SpanQueue>),
    /// Unit tests: read back as `SpanData`, in the order spans end.
    #[cfg(test)]
    Collect(Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>),
}

impl ServerSink {
    fn push(&self, span: ServerSpanData) {
        match &self.target {
            SinkTarget::Queue(queue) => queue.push(span),
            #[cfg(test)]
            SinkTarget::Collect(spans) => spans
                .lock()
                .expect("not poisoned")
                .push(span.to_span_data()),
        }
    }
}

/// A started MCP server span ([`McpServerSpan`]), ended and handed to the export queue when
/// dropped. Disabled (every method a no-op) when no export layer is installed. A span the
/// sampler turns down is kept, non-recording, so that its context still carries the caller's
/// trace and the decision on to a task.
#[derive(Debug)]
pub struct ServerSpan {
    inner: Option<Recording>,
}

#[derive(Debug)]
struct Recording {
    data: ServerSpanData,
    /// Where it goes when it ends; `None` when the sampler turned it down.
    sink: Option<Arc<ServerSink>>,
    /// The context it was started in, when that holds more than the parent's span context
    /// (the caller's baggage), to pass on with [`ServerSpan::context`].
    parent: Option<Context>,
}

impl ServerSpan {
    /// A span that records nothing (export is off).
    pub fn disabled() -> Self {
        ServerSpan { inner: None }
    }

    /// No span: export is off.
    pub fn is_disabled(&self) -> bool {
        self.inner.is_none()
    }

    /// The span's own context; `None` when disabled.
    pub fn span_context(&self) -> Option<&SpanContext> {
        self.inner.as_ref().map(|r| &r.data.context)
    }

    /// The span as a context to continue its trace from (its parent's baggage included);
    /// `None` when disabled.
    pub fn context(&self) -> Option<Context> {
        self.inner.as_ref().map(|r| match &r.parent {
            Some(parent) => parent.with_remote_span_context(r.data.context.clone()),
            None => Context::new().with_remote_span_context(r.data.context.clone()),
        })
    }

    /// A JSON-RPC error answer: `error.type` and `rpc.response.status_code` are the code
    /// (`-32602`), the status ERROR with `description` (a fixed text of ours).
    pub fn record_rpc_error(&mut self, code: i64, description: Option<&'static str>) {
        if let Some(r) = self.inner.as_mut() {
            r.data.error = Some(ServerError::Rpc(code, description.unwrap_or("")));
        }
    }

    /// A `CallToolResult` with `isError: true`: `error.type = tool_error`, status ERROR.
    pub fn record_tool_error(&mut self) {
        if let Some(r) = self.inner.as_mut() {
            r.data.error = Some(ServerError::Tool);
        }
    }
}

impl Drop for ServerSpan {
    fn drop(&mut self) {
        if let Some(Recording {
            mut data,
            sink: Some(sink),
            ..
        }) = self.inner.take()
        {
            data.end = opentelemetry::time::now();
            sink.push(data);
        }
    }
}

/// The agent's run of one task (gen-ai-agent-spans.md "Invoke agent internal span").
#[derive(Clone, Debug)]
pub struct InvokeAgentSpan<'a> {
    model: &'a str,
    task_id: Option<&'a str>,
    session_id: Option<&'a str>,
}

impl<'a> InvokeAgentSpan<'a> {
    /// `model` is the configured model the task runs with.
    pub fn new(model: &'a str) -> Self {
        Self {
            model,
            task_id: None,
            session_id: None,
        }
    }

    /// The task: `gen_ai.agent.id`.
    pub fn with_task_id(mut self, id: &'a str) -> Self {
        self.task_id = Some(bounded(id));
        self
    }

    /// The session the task belongs to: `gen_ai.conversation.id`.
    pub fn with_session_id(mut self, id: &'a str) -> Self {
        self.session_id = Some(bounded(id));
        self
    }

    /// The span, not yet entered: continue the task's trace on it first
    /// ([`continue_trace`](super::context::continue_trace)).
    pub fn start(self) -> Span {
        tracing::info_span!(
            target: TARGET,
            "gen_ai.invoke_agent",
            otel.name = %Name(value::INVOKE_AGENT, Some(value::AGENT_NAME)),
            otel.kind = "internal",
            otel.status_code = Empty,
            otel.status_description = Empty,
            gen_ai.operation.name = value::INVOKE_AGENT,
            gen_ai.provider.name = value::PROVIDER_OLLAMA,
            gen_ai.agent.name = value::AGENT_NAME,
            gen_ai.agent.id = self.task_id,
            gen_ai.conversation.id = self.session_id,
            gen_ai.request.model = self.model,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
        )
    }
}

/// One model call (gen-ai-spans.md "Inference"), a CLIENT span.
#[derive(Clone, Debug)]
pub struct ChatSpan<'a> {
    model: &'a str,
    server: Option<(&'a str, u16)>,
}

impl<'a> ChatSpan<'a> {
    pub fn new(model: &'a str) -> Self {
        Self {
            model,
            server: None,
        }
    }

    /// Ollama's host and port: `server.address`, `server.port`.
    pub fn with_server(mut self, host: &'a str, port: u16) -> Self {
        self.server = Some((host, port));
        self
    }

    pub fn start(self) -> Span {
        tracing::info_span!(
            target: TARGET,
            "gen_ai.chat",
            otel.name = %Name(value::CHAT, Some(self.model)),
            otel.kind = "client",
            otel.status_code = Empty,
            otel.status_description = Empty,
            gen_ai.operation.name = value::CHAT,
            gen_ai.provider.name = value::PROVIDER_OLLAMA,
            gen_ai.request.model = self.model,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            server.address = self.server.map(|s| s.0),
            server.port = self.server.map(|s| i64::from(s.1)),
            error.type = Empty,
        )
    }
}

/// One tool call of the agent's (gen-ai-spans.md "Execute tool span").
#[derive(Clone, Debug)]
pub struct ExecuteToolSpan<'a> {
    tool: &'static str,
    call_id: Option<&'a str>,
}

impl<'a> ExecuteToolSpan<'a> {
    /// `tool` is a registered tool's name; [`value::OTHER`] for a name the model made up.
    pub fn new(tool: &'static str) -> Self {
        Self {
            tool,
            call_id: None,
        }
    }

    /// The model's id for the call, when it gives one.
    pub fn with_call_id(mut self, id: &'a str) -> Self {
        self.call_id = Some(bounded(id));
        self
    }

    pub fn start(self) -> Span {
        tracing::info_span!(
            target: TARGET,
            "gen_ai.execute_tool",
            otel.name = %Name(value::EXECUTE_TOOL, Some(self.tool)),
            otel.kind = "internal",
            otel.status_code = Empty,
            otel.status_description = Empty,
            gen_ai.operation.name = value::EXECUTE_TOOL,
            gen_ai.tool.name = self.tool,
            gen_ai.tool.type = value::TOOL_TYPE_FUNCTION,
            gen_ai.tool.call.id = self.call_id,
            error.type = Empty,
        )
    }
}

/// The server's start: opening the store and starting the worker, until it serves.
pub fn startup_span(network: Network) -> Span {
    tracing::info_span!(
        target: TARGET,
        "startup",
        otel.name = "startup",
        otel.kind = "internal",
        network.transport = network.transport(),
    )
}

/// Token usage of a `chat` span (one call), or an `invoke_agent` span (the task's totals).
pub fn record_usage(span: &Span, input_tokens: u64, output_tokens: u64) {
    span.record(attr::GEN_AI_USAGE_INPUT_TOKENS, int(input_tokens));
    span.record(attr::GEN_AI_USAGE_OUTPUT_TOKENS, int(output_tokens));
}

/// OTLP integers are signed, and the layer records only `i64` as one (a `u64` would arrive as
/// text).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The model that answered a `chat` span's call, when the reply names it.
pub fn record_response_model(span: &Span, model: &str) {
    span.record(attr::GEN_AI_RESPONSE_MODEL, bounded(model));
}

/// Marks `span` failed: `error.type` (a low-cardinality class: `timeout`, `http_503`,
/// `cancelled`, a JSON-RPC code, …; anything but ASCII letters, digits and `._-:/` becomes `_`,
/// cut to 64) and status ERROR, with `description` as its message. The description is a fixed
/// text of ours: an error's own message may quote what the caller sent.
pub fn record_error(span: &Span, error_type: &str, description: Option<&'static str>) {
    if span.is_disabled() {
        return;
    }
    span.record(attr::ERROR_TYPE, error_token(error_type).as_str());
    match description {
        Some(text) => span.record("otel.status_description", text),
        None => span.record("otel.status_code", "error"),
    };
}

/// `error_type` as an `error.type` value: ASCII letters, digits and `._-:/` kept, anything
/// else `_`, at most 64 characters; [`value::OTHER`] when nothing is left.
pub(super) fn error_token(error_type: &str) -> String {
    let token: String = error_type
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-:/".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if token.is_empty() {
        value::OTHER.to_owned()
    } else {
        token
    }
}

/// Marks `span` succeeded (status OK), for spans whose success is worth saying.
pub fn record_ok(span: &Span) {
    span.record("otel.status_code", "ok");
}

/// Opt-in content on `span` under `key` (one of the content attributes in
/// [`attr`]: tool call arguments and results, input and output messages), cut to
/// [`MAX_CONTENT_BYTES`]. Does nothing, and costs one load, unless content capture is on:
/// prompts and tool output may hold secrets and personal data, and a collector keeps them.
pub fn record_content(span: &Span, key: &'static str, text: &str) {
    if !content_capture_enabled() || span.is_disabled() {
        return;
    }
    let end = (0..=MAX_CONTENT_BYTES.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    span.set_attribute(key, text[..end].to_owned());
}

#[cfg(test)]
mod tests {
    use opentelemetry::Value;
    use opentelemetry::trace::{SpanKind, Status};
    use serde_json::json;

    use super::super::context::{TraceCarrier, TraceCarrierExt, continue_trace};
    use super::super::testing::{attr, capture, named, names};
    use super::*;

    fn s(text: &str) -> Option<Value> {
        Some(Value::from(text.to_owned()))
    }

    fn i(n: i64) -> Option<Value> {
        Some(Value::I64(n))
    }

    #[test]
    fn the_server_span_of_a_tool_call_follows_the_mcp_conventions() {
        let spans = capture(|| {
            let span = McpServerSpan::new("tools/call")
                .with_tool("agent_run")
                .with_request_id("42")
                .with_protocol_version("2026-07-28")
                .with_network(Network::Http {
                    peer: Some("127.0.0.1:50123".parse().unwrap()),
                })
                .start();
            assert!(!span.is_disabled());
        });
        let span = named(&spans, "tools/call agent_run");
        assert_eq!(span.span_kind, SpanKind::Server);
        assert_eq!(span.status, Status::Unset);
        assert_eq!(attr(span, attr::MCP_METHOD_NAME), s("tools/call"));
        assert_eq!(attr(span, attr::GEN_AI_TOOL_NAME), s("agent_run"));
        assert_eq!(attr(span, attr::GEN_AI_OPERATION_NAME), s("execute_tool"));
        assert_eq!(attr(span, attr::JSONRPC_REQUEST_ID), s("42"));
        assert_eq!(attr(span, attr::MCP_PROTOCOL_VERSION), s("2026-07-28"));
        assert_eq!(attr(span, attr::NETWORK_TRANSPORT), s("tcp"));
        assert_eq!(attr(span, attr::NETWORK_PROTOCOL_NAME), s("http"));
        assert_eq!(attr(span, attr::CLIENT_ADDRESS), s("127.0.0.1"));
        assert_eq!(attr(span, attr::CLIENT_PORT), i(50123));
        let keys: Vec<&str> = span.attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert!(!keys.contains(&"mcp.session.id"), "{keys:?}");
        assert!(
            !keys.contains(&attr::ERROR_TYPE),
            "no error recorded: {keys:?}"
        );
        assert!(
            !keys.iter().any(|k| k.starts_with("otel.")),
            "the otel.* fields steer the span, they are not attributes: {keys:?}"
        );
    }

    #[test]
    fn addresses_read_as_display_writes_them() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.100.255",
            "192.168.9.99",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "::ffff:192.168.100.255",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(IpText::new(ip).as_bytes(), ip.to_string().as_bytes());
        }
    }

    #[test]
    fn other_requests_are_named_by_their_method_alone() {
        let long_id = "7".repeat(1000);
        let spans = capture(|| {
            McpServerSpan::new("tools/list")
                .with_request_id(&long_id)
                .with_network(Network::Stdio)
                .start();
        });
        let span = named(&spans, "tools/list");
        assert_eq!(attr(span, attr::GEN_AI_TOOL_NAME), None);
        assert_eq!(attr(span, attr::GEN_AI_OPERATION_NAME), None);
        assert_eq!(attr(span, attr::NETWORK_TRANSPORT), s("pipe"));
        assert_eq!(attr(span, attr::NETWORK_PROTOCOL_NAME), None);
        assert_eq!(attr(span, attr::CLIENT_ADDRESS), None);
        assert_eq!(
            attr(span, attr::JSONRPC_REQUEST_ID),
            s(&"7".repeat(MAX_ID_LEN)),
            "a client's id is cut"
        );
    }

    #[test]
    fn errors_are_recorded_with_their_kind() {
        let spans = capture(|| {
            let mut server = McpServerSpan::new("tools/call")
                .with_tool("agent_status")
                .start();
            server.record_rpc_error(-32602, Some("invalid params"));
            drop(server);
            let mut tool = McpServerSpan::new("tools/call")
                .with_tool(value::OTHER)
                .start();
            tool.record_tool_error();
            drop(tool);
            let chat = ChatSpan::new("m").start();
            record_error(&chat, "weird type!\n", None);
        });
        let rpc = named(&spans, "tools/call agent_status");
        assert_eq!(attr(rpc, attr::ERROR_TYPE), s("-32602"));
        assert_eq!(attr(rpc, attr::RPC_RESPONSE_STATUS_CODE), s("-32602"));
        assert_eq!(rpc.status, Status::error("invalid params"));
        let tool = named(&spans, "tools/call _OTHER");
        assert_eq!(attr(tool, attr::ERROR_TYPE), s("tool_error"));
        assert!(matches!(tool.status, Status::Error { .. }));
        let chat = named(&spans, "chat m");
        assert_eq!(attr(chat, attr::ERROR_TYPE), s("weird_type__"));
        assert!(matches!(chat.status, Status::Error { .. }));
    }

    #[test]
    fn a_task_tree_with_usage_and_a_stored_parent() {
        let meta =
            json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"});
        let mut carrier = None;
        let spans = capture(|| {
            // The request: a server span parented on the caller's context.
            let server = McpServerSpan::new("tools/call")
                .with_tool("agent_run")
                .start_in(RemoteParent::of_request(meta.as_object(), None));
            carrier = server
                .context()
                .as_ref()
                .and_then(TraceCarrier::from_context);
            drop(server);
            // Later, perhaps elsewhere: the task continues that trace.
            let agent = InvokeAgentSpan::new("qwen3:8b")
                .with_task_id("task-1")
                .with_session_id("session-1")
                .start();
            assert!(continue_trace(&agent, carrier.as_ref().expect("stored")));
            agent.in_scope(|| {
                let chat = ChatSpan::new("qwen3:8b")
                    .with_server("127.0.0.1", 11434)
                    .start();
                record_usage(&chat, 120, 48);
                record_response_model(&chat, "qwen3:8b");
                chat.in_scope(|| {
                    ExecuteToolSpan::new("read_file")
                        .with_call_id("call_1")
                        .start()
                        .in_scope(|| {});
                });
            });
            record_usage(&agent, 120, 48);
        });
        assert_eq!(
            names(&spans),
            [
                "tools/call agent_run",
                "execute_tool read_file",
                "chat qwen3:8b",
                "invoke_agent agent-mcp"
            ]
        );
        let server = named(&spans, "tools/call agent_run");
        let agent = named(&spans, "invoke_agent agent-mcp");
        let chat = named(&spans, "chat qwen3:8b");
        let tool = named(&spans, "execute_tool read_file");
        let trace = server.span_context.trace_id();
        assert_eq!(trace.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(server.parent_span_id.to_string(), "00f067aa0ba902b7");
        for span in [agent, chat, tool] {
            assert_eq!(span.span_context.trace_id(), trace, "{}", span.name);
        }
        assert_eq!(agent.parent_span_id, server.span_context.span_id());
        assert_eq!(chat.parent_span_id, agent.span_context.span_id());
        assert_eq!(tool.parent_span_id, chat.span_context.span_id());

        assert_eq!(agent.span_kind, SpanKind::Internal);
        assert_eq!(attr(agent, attr::GEN_AI_OPERATION_NAME), s("invoke_agent"));
        assert_eq!(attr(agent, attr::GEN_AI_AGENT_ID), s("task-1"));
        assert_eq!(attr(agent, attr::GEN_AI_CONVERSATION_ID), s("session-1"));
        assert_eq!(attr(agent, attr::GEN_AI_USAGE_INPUT_TOKENS), i(120));

        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(attr(chat, attr::GEN_AI_PROVIDER_NAME), s("ollama"));
        assert_eq!(attr(chat, attr::GEN_AI_REQUEST_MODEL), s("qwen3:8b"));
        assert_eq!(attr(chat, attr::GEN_AI_RESPONSE_MODEL), s("qwen3:8b"));
        assert_eq!(attr(chat, attr::GEN_AI_USAGE_INPUT_TOKENS), i(120));
        assert_eq!(attr(chat, attr::GEN_AI_USAGE_OUTPUT_TOKENS), i(48));
        assert_eq!(attr(chat, attr::SERVER_ADDRESS), s("127.0.0.1"));
        assert_eq!(attr(chat, attr::SERVER_PORT), i(11434));

        assert_eq!(tool.span_kind, SpanKind::Internal);
        assert_eq!(attr(tool, attr::GEN_AI_TOOL_NAME), s("read_file"));
        assert_eq!(attr(tool, attr::GEN_AI_TOOL_CALL_ID), s("call_1"));
        assert_eq!(attr(tool, attr::GEN_AI_TOOL_TYPE), s("function"));
    }

    #[test]
    fn only_export_spans_are_exported_and_never_log_events() {
        let spans = capture(|| {
            let plain = tracing::info_span!("a plain span", secret = "request text");
            plain.in_scope(|| {
                let tool = ExecuteToolSpan::new("run_command").start();
                tool.in_scope(|| tracing::info!(output = "tool output", "ran"));
            });
        });
        assert_eq!(names(&spans), ["execute_tool run_command"]);
        let tool = &spans[0];
        assert!(tool.events.is_empty(), "{:?}", tool.events);
        // Its non-exported ancestor is skipped: the span is a root.
        assert_eq!(tool.parent_span_id, opentelemetry::trace::SpanId::INVALID);
    }

    #[test]
    fn content_is_recorded_only_when_capture_is_on() {
        // The one test that turns the process-wide switch on; it turns it off again.
        let long = "é".repeat(MAX_CONTENT_BYTES);
        let spans = capture(|| {
            let off = ExecuteToolSpan::new("read_file").start();
            record_content(&off, attr::GEN_AI_TOOL_CALL_RESULT, "secret file contents");
            drop(off);
            set_content_capture(true);
            let on = ExecuteToolSpan::new("write_file").start();
            record_content(&on, attr::GEN_AI_TOOL_CALL_ARGUMENTS, &long);
            set_content_capture(false);
        });
        let off = named(&spans, "execute_tool read_file");
        assert_eq!(attr(off, attr::GEN_AI_TOOL_CALL_RESULT), None);
        let on = named(&spans, "execute_tool write_file");
        let Some(Value::String(text)) = attr(on, attr::GEN_AI_TOOL_CALL_ARGUMENTS) else {
            panic!("content recorded: {on:?}");
        };
        assert_eq!(
            text.as_str().len(),
            MAX_CONTENT_BYTES,
            "cut on a char boundary"
        );
        assert!(!content_capture_enabled());
    }
}
