//! [`AuditLayer`], the [`Audit`] service and what it records of each request.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value};

use std::borrow::Cow;

use uuid::Uuid;

use super::record::{
    ArgsSummary, AuditRecord, ClientSummary, MAX_NAME_BYTES, answers_field, capped, client_field,
    id_field, name_field, scrub_message, uuid_field,
};
use super::sink::{AuditSink, Rotation};
use super::throttle::{RefusalThrottle, Verdict};
use crate::plugin::Era;
use crate::plugin::{
    AGENT_STATUS, Around, Finish, McpRequest, McpResponse, Method, Outcome, Params, Payload,
    ProtocolVersion, Refusal, RequestId, STDIO_IDENTITY, Transport, Wrap, WrapLayer,
};

/// The audit layer's configuration (`audit` in `agent.yaml`, converted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// Append to this file (created 0600, parent directories too); `None`: stderr.
    pub file: Option<PathBuf>,
    /// Also record the full `request` text of `agent_run` (off: its length and SHA-256).
    pub include_request: bool,
    /// Rotate `file` by size.
    pub rotation: Option<Rotation>,
}

/// The audit layer's [`Around`]: where lines go, how much of a request they hold, and the
/// per-peer budget of refusal lines (shared by every clone).
#[derive(Clone, Debug)]
pub struct Auditor {
    sink: AuditSink,
    include_request: bool,
    throttle: std::sync::Arc<RefusalThrottle>,
}

impl From<AuditSink> for Auditor {
    fn from(sink: AuditSink) -> Self {
        Self {
            sink,
            include_request: false,
            throttle: std::sync::Arc::default(),
        }
    }
}

impl Auditor {
    /// Records a request refused before it reached the stack (the HTTP edge refuses a missing
    /// or wrong bearer token before reading the body, so nothing of the body is known): one
    /// line like any refusal's, with `method` `(body not read)`, under the same per-peer
    /// budget.
    /// `version`: what the request's `MCP-Protocol-Version` header named, if anything.
    pub fn record_refusal(
        &self,
        peer: Option<SocketAddr>,
        version: Option<ProtocolVersion>,
        refusal: &Refusal,
    ) {
        let suppressed = match self.throttle.refusal(peer) {
            Verdict::Suppress => return,
            Verdict::Write { suppressed } => (suppressed > 0).then_some(suppressed),
        };
        self.sink.send(AuditRecord {
            time: SystemTime::now(),
            id: None,
            era: match version.map(|v| v.era()) {
                Some(Era::Modern) => "modern",
                Some(Era::Legacy) => "legacy",
                None => "unknown",
            },
            version: version.map_or("unknown", |v| v.as_str()),
            transport: "http",
            peer,
            identity: None,
            client: None,
            method: Cow::Borrowed(BODY_NOT_READ),
            tool: None,
            task_id: None,
            session_id: None,
            outcome: refusal.outcome(),
            error_code: Some(refusal.code()),
            error_message: Some(scrub_message(refusal.message())),
            duration_us: 0,
            args: None,
            suppressed,
            answers: None,
        });
        self.write_open_counts(false);
    }

    /// Writes the refusals counted but not written, per peer, when a minute has passed since
    /// the last time (or now, with `force`: at shutdown, before the sink is flushed).
    pub fn write_open_counts(&self, force: bool) {
        for (peer, count) in self.throttle.sweep(force) {
            self.sink.send_suppressed(&peer.shown(), count);
        }
    }
}

/// The `method` of a line for a request refused before its body was read.
pub const BODY_NOT_READ: &str = "(body not read)";

/// Applies [`Audit`]: one JSON line per `tools/call`, per `tasks/*` request and per refused or
/// failed request.
pub type AuditLayer = WrapLayer<Auditor>;

/// Records requests and their outcomes (see the module docs); never changes a response.
pub type Audit<S> = Wrap<S, Auditor>;

impl Auditor {
    /// Opens the sink `options` name (`AuditLayer::new(Auditor::open(&options)?)`); an error
    /// when its file cannot be opened.
    pub fn open(options: &AuditOptions) -> std::io::Result<Self> {
        let sink = AuditSink::open(options.file.as_deref(), options.rotation)?;
        Ok(Self::from(sink).with_include_request(options.include_request))
    }

    /// Where this auditor's lines go (to [`AuditSink::flush`] them at shutdown); a layer's
    /// auditor is its [`around_ref`](crate::plugin::WrapLayer::around_ref).
    pub fn sink(&self) -> &AuditSink {
        &self.sink
    }

    /// Also record the full `request` text of `agent_run` (off: its length and SHA-256).
    pub fn with_include_request(self, include: bool) -> Self {
        Auditor {
            include_request: include,
            ..self
        }
    }
}

impl Around for Auditor {
    type Pending = Pending;

    fn before(&self, req: &mut McpRequest) -> Result<Pending, McpResponse> {
        Ok(Pending::capture(req, self))
    }
}

/// What is known about a request before it is handed on. Cheap to make: no clock read
/// besides the arrival instant, no copy of a known name, no allocation for an in-process or
/// anonymous caller; the writer thread does the formatting.
#[derive(Debug)]
pub struct Pending {
    arrived: Instant,
    id: Option<RequestId>,
    version: ProtocolVersion,
    transport: &'static str,
    peer: Option<SocketAddr>,
    identity: Option<String>,
    client: Option<ClientSummary>,
    method: Cow<'static, str>,
    tool: Option<Cow<'static, str>>,
    task_id: RawId,
    session_id: RawId,
    args: Option<Box<ArgsSummary>>,
    answers: Option<Box<Map<String, Value>>>,
    /// `tools/call` and `tasks/*` are recorded whatever their outcome.
    always: bool,
    auditor: Auditor,
}

impl Pending {
    fn capture(req: &McpRequest, auditor: &Auditor) -> Pending {
        let include_request = auditor.include_request;
        let arrived = Instant::now();
        let method = req.method.static_name().map_or_else(
            || Cow::Owned(scrub_message(&capped(req.method.as_str(), MAX_NAME_BYTES))),
            Cow::Borrowed,
        );
        let is_tool_call = req.method == Method::ToolsCall;
        let is_tasks = req.method.is_tasks();
        let (mut tool, mut task_id, mut session_id, mut args, mut answers) =
            (None, RawId::NONE, RawId::NONE, None, None);
        if is_tool_call {
            tool = req.tool_name().map(name_field);
            // A multi-round-trip retry carries the answers (an approval on agent_status).
            answers = answers_field(
                req.params
                    .tools_call()
                    .and_then(|c| c.input_responses.as_ref()),
            );
            let arguments = req.params.tools_call().and_then(|c| c.arguments.as_ref());
            if let Some(Value::Object(arguments)) = arguments {
                task_id = RawId::of(arguments.get("task_id").and_then(Value::as_str));
                session_id = RawId::of(arguments.get("session_id").and_then(Value::as_str));
                // `agent_status` arguments hold nothing but ids.
                if tool.as_deref() != Some(AGENT_STATUS) {
                    args = ArgsSummary::of(arguments, include_request).map(Box::new);
                }
            }
        } else if is_tasks {
            task_id = RawId::of(req.params.task_id());
            if let Params::TaskUpdate(update) = &req.params {
                answers = answers_field(update.input_responses.as_ref());
            }
        }
        let (peer, identity) = match req.ctx.transport {
            Transport::Http { peer } => (peer, req.ctx.identity.clone()),
            // stdio callers are always the local identity (the auth layer says the same).
            Transport::Stdio => (None, Some(STDIO_IDENTITY.to_owned())),
            Transport::InProcess => (None, req.ctx.identity.clone()),
        };
        Pending {
            arrived,
            id: req.id.as_ref().map(id_field),
            version: req.ctx.version,
            transport: req.ctx.transport.name(),
            peer,
            identity,
            client: client_field(req.ctx.client_info.as_ref()),
            method,
            always: is_tool_call || is_tasks,
            tool,
            task_id,
            session_id,
            args,
            answers,
            auditor: auditor.clone(),
        }
    }
}

impl Finish for Pending {
    fn finish(self, response: &mut McpResponse) {
        let outcome = response.outcome();
        if !self.always && outcome == Outcome::Ok {
            return;
        }
        // Refusals are recorded within a per-peer budget; the rest are counted.
        let suppressed = match outcome {
            Outcome::Unauthorized | Outcome::RateLimited => {
                match self.auditor.throttle.refusal(self.peer) {
                    Verdict::Suppress => return,
                    Verdict::Write { suppressed } => (suppressed > 0).then_some(suppressed),
                }
            }
            _ => None,
        };
        let duration_us = u64::try_from(self.arrived.elapsed().as_micros()).unwrap_or(u64::MAX);
        // What the service reports is parsed already; the argument's text only when it is not.
        let mut task_id = response.ids.task_id.or_else(|| self.task_id.parse());
        let session_id = response.ids.session_id.or_else(|| self.session_id.parse());
        let (error_code, error_message) = match &response.payload {
            Payload::Error(e) | Payload::ToolCallError(e) => {
                (Some(e.code), Some(scrub_message(&e.message)))
            }
            Payload::Refused(r) => (Some(r.code()), Some(scrub_message(r.message()))),
            Payload::Result(r) if outcome == Outcome::ToolError => {
                (None, r.first_text().map(scrub_message))
            }
            Payload::Result(r) => {
                // A task-augmented call answers with the task it created.
                if task_id.is_none()
                    && let Some(Value::Object(task)) =
                        r.body.as_object().and_then(|b| b.get("task"))
                {
                    task_id = uuid_field(task.get("taskId").and_then(Value::as_str));
                }
                (None, None)
            }
            Payload::Accepted | Payload::Stream(_) => (None, None),
        };
        // An auth layer inside says who the caller turned out to be (HTTP callers learn it
        // from their token there); otherwise what was known on arrival stands.
        let identity = response
            .identity
            .clone()
            .or(self.identity)
            .map(|name| capped(&name, MAX_NAME_BYTES).into_owned());
        tracing::debug!(
            target: "mcp::audit",
            method = &*self.method,
            tool = self.tool.as_deref(),
            identity = identity.as_deref(),
            outcome = outcome.as_str(),
            error_code,
            duration_us,
            "request audited"
        );
        let auditor = self.auditor;
        auditor.sink.send_arrived(
            self.arrived,
            AuditRecord {
                // Set by the writer from `arrived`.
                time: SystemTime::UNIX_EPOCH,
                id: self.id,
                era: match self.version.era() {
                    Era::Modern => "modern",
                    Era::Legacy => "legacy",
                },
                version: self.version.as_str(),
                transport: self.transport,
                peer: self.peer,
                identity,
                client: self.client,
                method: self.method,
                tool: self.tool,
                task_id,
                session_id,
                outcome,
                error_code,
                error_message,
                duration_us,
                args: self.args,
                suppressed,
                answers: self.answers,
            },
        );
        auditor.write_open_counts(false);
    }
}

/// The text of a UUID argument, kept as it came (36 bytes, no allocation) and parsed only if
/// the line needs it: usually the service reports the parsed id on the response.
#[derive(Clone, Copy, Debug)]
struct RawId(Option<[u8; 36]>);

impl RawId {
    const NONE: RawId = RawId(None);

    fn of(value: Option<&str>) -> RawId {
        RawId(value.and_then(|s| <[u8; 36]>::try_from(s.as_bytes()).ok()))
    }

    /// The id, if the text is a UUID (anything else is client text and not recorded).
    fn parse(&self) -> Option<Uuid> {
        uuid_field(self.0.as_ref().and_then(|b| std::str::from_utf8(b).ok()))
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use crate::plugin::{ErrorObject, McpResult, Refusal, RequestContext};
    use serde_json::json;
    use std::io::{self, Write};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    /// A `Write` into shared memory, or one that always fails.
    #[derive(Clone, Default)]
    struct Memory {
        bytes: Arc<Mutex<Vec<u8>>>,
        fail: bool,
    }

    impl Write for Memory {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.fail {
                return Err(io::Error::other("disk full"));
            }
            self.bytes
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Memory {
        async fn lines(&self, n: usize) -> Vec<Value> {
            for _ in 0..500 {
                let text = String::from_utf8(self.bytes.lock().unwrap().clone()).unwrap();
                if text.lines().count() >= n {
                    return text
                        .lines()
                        .map(|l| serde_json::from_str(l).unwrap())
                        .collect();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("fewer than {n} audit lines");
        }
    }

    const TASK: &str = "3f2504e0-4f89-11d3-9a0c-0305e82c3301";
    const SESSION: &str = "9a0c0305-e82c-4301-8f25-04e04f8911d3";

    /// Answers like the real stack would, by method.
    async fn handler(req: McpRequest) -> Result<McpResponse, Infallible> {
        let mut response = match (req.method.as_str(), req.tool_name()) {
            ("tools/call", Some("agent_run")) => {
                let mut r = req.result(McpResult::tool_text(
                    format!("task_id: {TASK}\nsession_id: {SESSION}\nstatus: queued"),
                    false,
                ));
                // The real service names the task it queued on the response.
                r.ids.task_id = TASK.parse().ok();
                r.ids.session_id = SESSION.parse().ok();
                r
            }
            ("tools/call", _) => req.result(McpResult::tool_text(
                "Invalid arguments for tool \"x\":",
                true,
            )),
            ("secret", _) => req.refuse(Refusal::unauthorized("Unauthorized: no")),
            ("tools/list", _) => req.result(McpResult::empty()),
            (m, _) => req.error(ErrorObject::method_not_found(m)),
        };
        // As an auth layer inside would say who an HTTP caller is.
        if matches!(req.ctx.transport, Transport::Http { .. }) {
            response.identity = Some("alice".into());
        }
        Ok(response)
    }

    fn request(id: i64, method: &str, params: Value) -> McpRequest {
        McpRequest::new(
            Some(RequestId::Number(id)),
            method,
            params.as_object().cloned().unwrap_or_default(),
            RequestContext::new(
                ProtocolVersion::V2025_11_25,
                Transport::Http {
                    peer: Some(([127, 0, 0, 1], 4000).into()),
                },
            ),
        )
    }

    #[tokio::test]
    async fn one_line_per_tool_call_and_per_failure_but_not_per_plain_success() {
        let memory = Memory::default();
        let sink = AuditSink::to_writer(memory.clone(), "memory".into());
        let svc = ServiceBuilder::new()
            .layer(AuditLayer::new(
                Auditor::from(sink).with_include_request(true),
            ))
            .service(service_fn(handler));
        let calls = [
            request(1, "tools/list", json!({})),
            request(
                2,
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "hi"}}),
            ),
            request(3, "tools/call", json!({"name": "x", "arguments": {}})),
            request(4, "secret", json!({})),
            request(5, "nope", json!({})),
            request(6, "tasks/get", json!({"taskId": TASK})),
        ];
        for req in calls {
            let expected_id = req.id.clone();
            let Ok(r) = svc.clone().oneshot(req).await;
            assert_eq!(r.id, expected_id);
        }
        let lines = memory.lines(5).await;
        let ids: Vec<_> = lines.iter().map(|l| l["id"].clone()).collect();
        assert_eq!(ids, vec![json!(2), json!(3), json!(4), json!(5), json!(6)]);
        let outcomes: Vec<_> = lines.iter().map(|l| l["outcome"].clone()).collect();
        assert_eq!(
            outcomes,
            vec![
                json!("ok"),
                json!("tool_error"),
                json!("unauthorized"),
                json!("protocol_error"),
                json!("protocol_error")
            ]
        );
        let run = &lines[0];
        assert_eq!(run["identity"], "alice");
        assert_eq!(run["transport"], "http");
        assert_eq!(run["era"], "legacy");
        assert_eq!(run["version"], "2025-11-25");
        assert_eq!(run["peer"], "127.0.0.1:4000");
        assert_eq!(run["task_id"], TASK);
        assert_eq!(run["session_id"], SESSION);
        assert_eq!(run["args"]["request"], "hi");
        assert_eq!(
            lines[1]["error_message"],
            "Invalid arguments for tool \"x\":"
        );
        assert_eq!(lines[2]["error_code"], -32001);
        assert_eq!(lines[3]["error_code"], -32601);
        assert_eq!(lines[4]["task_id"], TASK);
    }

    #[tokio::test]
    async fn a_failing_sink_never_touches_the_response() {
        let sink = AuditSink::to_writer(
            Memory {
                fail: true,
                ..Memory::default()
            },
            "broken".into(),
        );
        let svc = ServiceBuilder::new()
            .layer(AuditLayer::new(sink))
            .service(service_fn(handler));
        for id in 0..3 {
            let req = request(
                id,
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "hi"}}),
            );
            let Ok(r) = svc.clone().oneshot(req).await;
            let Payload::Result(result) = &r.payload else {
                panic!("expected a result");
            };
            assert_eq!(
                result.first_text(),
                Some(format!("task_id: {TASK}\nsession_id: {SESSION}\nstatus: queued").as_str())
            );
        }
    }

    #[tokio::test]
    async fn the_identity_known_before_the_layer_is_kept() {
        let memory = Memory::default();
        let svc = ServiceBuilder::new()
            .layer(AuditLayer::new(AuditSink::to_writer(
                memory.clone(),
                "m".into(),
            )))
            .service(service_fn(|req: McpRequest| async move {
                Ok::<_, Infallible>(req.result(McpResult::tool_text("done", false)))
            }));
        let mut req = request(1, "tools/call", json!({"name": "agent_status"}));
        req.ctx.identity = Some("embedder".into());
        req.ctx.transport = Transport::InProcess;
        let _ = svc.clone().oneshot(req).await;
        let mut stdio = request(2, "tools/call", json!({"name": "agent_status"}));
        stdio.ctx.transport = Transport::Stdio;
        let _ = svc.oneshot(stdio).await;
        let lines = memory.lines(2).await;
        assert_eq!(lines[0]["identity"], "embedder");
        assert_eq!(lines[0]["transport"], "in-process");
        assert_eq!(lines[0]["args"], Value::Null);
        assert_eq!(lines[1]["identity"], "stdio");
        assert_eq!(lines[1]["peer"], Value::Null);
    }
}
