//! `AgentService`: the core `tower::Service<McpRequest>` every layer wraps.
//!
//! It answers `server/discover` (2026-07-28), `initialize`/`ping` (2025 era), `tools/list` and
//! `tools/call` for the two tools. Errors are responses (`Error = Infallible`): protocol faults
//! as JSON-RPC errors, tool failures as `CallToolResult { isError: true }`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tower_service::Service;

use crate::agent::AgentCore;
use crate::agent::status::{parse_uuid, render_accepted, render_not_found, render_status};
use crate::protocol::era::Era;
use crate::protocol::{
    CacheHint, ErrorObject, McpRequest, McpResponse, McpResult, Payload, ProtocolVersion,
    ResponseIds, server_info,
};
use crate::task::{Session, Task, TaskImage};
use crate::tools::{AGENT_RUN, AGENT_STATUS, tool_definitions};

/// How long clients may cache `server/discover` and `tools/list` (the tool set never changes
/// while the process runs).
const LIST_TTL_MS: u64 = 3_600_000;

const INSTRUCTIONS: &str = "Use agent_run to hand a natural-language work request to the local \
agent; it answers at once with a task_id. Poll agent_status with that task_id until status is \
completed, failed or cancelled; the result line holds the answer. Pass the returned session_id \
to agent_run to continue the same conversation.";

/// The core service. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AgentService {
    core: Arc<AgentCore>,
}

impl AgentService {
    pub fn new(core: Arc<AgentCore>) -> Self {
        Self { core }
    }

    pub fn core(&self) -> &Arc<AgentCore> {
        &self.core
    }

    /// Handles one request. Public so embedders can call it without the tower machinery.
    pub async fn handle(&self, req: McpRequest) -> McpResponse {
        if req.is_notification() {
            // notifications/initialized, notifications/cancelled (handled by the transport),
            // and anything else: accepted, nothing to answer.
            return req.respond(Payload::Accepted);
        }
        let era = req.ctx.era();
        match (era, req.method.as_str()) {
            (Era::Modern, "server/discover") => req.result(discover()),
            (Era::Legacy, "initialize") => req.result(initialize(&req)),
            (Era::Legacy, "ping") => req.result(McpResult::empty()),
            (Era::Legacy, "logging/setLevel") => set_log_level(&req),
            (_, "tools/list") => req.result(tools_list()),
            (_, "tools/call") => self.tools_call(req).await,
            (_, method) => req.error(ErrorObject::method_not_found(method)),
        }
    }

    async fn tools_call(&self, mut req: McpRequest) -> McpResponse {
        let Some(name) = req.params.get("name").and_then(Value::as_str) else {
            return req.error(ErrorObject::invalid_params(
                "tools/call needs params.name, the tool to call (agent_run or agent_status)",
            ));
        };
        let tool = match name {
            AGENT_RUN => Ok(AGENT_RUN),
            AGENT_STATUS => Ok(AGENT_STATUS),
            other => Err(other.to_owned()),
        };
        // Moved out, not cloned: the request is ours, and `agent_run` arguments may carry
        // 20 MiB of images.
        let args = match req.params.remove("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => {
                return req.error(ErrorObject::invalid_params(
                    "tools/call params.arguments must be an object",
                ));
            }
        };
        let mut ids = ResponseIds::default();
        let result = match tool {
            Ok(AGENT_RUN) => self.agent_run(&req, args, &mut ids).await,
            Ok(_) => self.agent_status(&req, args, &mut ids).await,
            Err(other) => {
                return req.error(ErrorObject::invalid_params(format!(
                    "Unknown tool: {other}. This server has agent_run and agent_status."
                )));
            }
        };
        let mut response = req.result(result);
        response.ids = ids;
        response
    }

    /// Queues a task; on success `ids` names it and its session.
    async fn agent_run(&self, req: &McpRequest, args: Value, ids: &mut ResponseIds) -> McpResult {
        let args: RunArgs = match serde_json::from_value(args) {
            Ok(a) => a,
            Err(e) => return invalid_args(AGENT_RUN, &[format!("arguments: {e}")]),
        };
        let mut problems = Vec::new();
        if args.request.trim().is_empty() {
            problems.push("request: must not be empty or whitespace-only".to_owned());
        }
        if let Some(t) = args.temperature
            && !(0.0..=2.0).contains(&t)
        {
            problems.push(format!(
                "temperature: must be from 0.0 through 2.0, got {t}"
            ));
        }
        let images = match images_of(args.images, &mut problems) {
            Some(images) if problems.is_empty() => images,
            _ => return invalid_args(AGENT_RUN, &problems),
        };
        let identity = req.ctx.identity.clone();
        let store = &self.core.store;
        let session_id = match args.session_id.as_deref() {
            Some(text) => {
                let known = match parse_uuid(text) {
                    Some(id) => match store.session(id).await {
                        Ok(found) => found.filter(|s| s.owner == identity),
                        Err(e) => return store_failure(&e),
                    },
                    None => {
                        return invalid_args(
                            AGENT_RUN,
                            &[format!("session_id: \"{text}\" is not a UUID")],
                        );
                    }
                };
                match known {
                    Some(session) => session.id,
                    None => {
                        return McpResult::tool_text(
                            format!(
                                "Unknown session_id {text}: no such session. Omit session_id to \
                                 start a new session, or pass a session_id returned by agent_run."
                            ),
                            true,
                        );
                    }
                }
            }
            None => {
                let session = Session::new(identity.clone());
                if let Err(e) = store.create_session(&session).await {
                    return store_failure(&e);
                }
                session.id
            }
        };
        let mut task = Task::new(session_id, identity, args.request, args.temperature);
        task.images = images;
        // The image layer decoded and hashed each image once; the store keys images by that
        // hash instead of decoding them again.
        if let Some(validated) = req
            .ctx
            .extensions
            .get::<crate::layers::images::ValidatedImages>()
            && validated.0.len() == task.images.len()
        {
            for (image, checked) in task.images.iter_mut().zip(&validated.0) {
                image.sha256 = Some(checked.sha256);
            }
        }
        if let Err(e) = store.insert_task(&task).await {
            return store_failure(&e);
        }
        self.core.enqueue(task.id);
        crate::metrics::record_task_created();
        ids.task_id = Some(task.id);
        ids.session_id = Some(task.session_id);
        McpResult::tool_text(render_accepted(&task), false)
    }

    /// Reports a task; when it is found `ids` names it and its session.
    async fn agent_status(
        &self,
        req: &McpRequest,
        args: Value,
        ids: &mut ResponseIds,
    ) -> McpResult {
        let args: StatusArgs = match serde_json::from_value(args) {
            Ok(a) => a,
            Err(e) => return invalid_args(AGENT_STATUS, &[format!("arguments: {e}")]),
        };
        let not_found = || McpResult::tool_text(render_not_found(&args.task_id), false);
        let Some(task_id) = parse_uuid(&args.task_id) else {
            return invalid_args(
                AGENT_STATUS,
                &[format!("task_id: \"{}\" is not a UUID", args.task_id)],
            );
        };
        let session_filter = match args.session_id.as_deref() {
            Some(text) => match parse_uuid(text) {
                Some(id) => Some(id),
                None => {
                    return invalid_args(
                        AGENT_STATUS,
                        &[format!("session_id: \"{text}\" is not a UUID")],
                    );
                }
            },
            None => None,
        };
        let task = match self.core.store.task(task_id).await {
            Ok(Some(task)) => task,
            Ok(None) => return not_found(),
            Err(e) => return store_failure(&e),
        };
        if !task.visible_to(req.ctx.identity.as_deref())
            || session_filter.is_some_and(|s| s != task.session_id)
        {
            return not_found();
        }
        let position = if task.state == crate::task::TaskState::Queued {
            self.core.queue_position(task.id).await
        } else {
            None
        };
        ids.task_id = Some(task.id);
        ids.session_id = Some(task.session_id);
        McpResult::tool_text(render_status(&task, position), false)
    }
}

impl Service<McpRequest> for AgentService {
    type Response = McpResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<McpResponse, Infallible>> + Send>>;

    #[inline]
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.handle(req).await) })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    request: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    images: Option<Vec<Option<ImageArg>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageArg {
    mime_type: Option<String>,
    data_base64: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    task_id: String,
    #[serde(default)]
    session_id: Option<String>,
}

const IMAGE_MIME_TYPES: [&str; 3] = ["image/png", "image/jpeg", "image/webp"];

/// The minimal image rules the service itself enforces (non-null, known MIME type); the image
/// layer checks encodings and sizes before a request gets here.
fn images_of(
    images: Option<Vec<Option<ImageArg>>>,
    problems: &mut Vec<String>,
) -> Option<Vec<TaskImage>> {
    let mut out = Vec::new();
    for (i, image) in images.unwrap_or_default().into_iter().enumerate() {
        let Some(image) = image else {
            problems.push(format!("images[{i}]: must be an object, not null"));
            continue;
        };
        let (Some(mime_type), Some(data_base64)) = (image.mime_type, image.data_base64) else {
            problems.push(format!(
                "images[{i}]: mime_type and data_base64 must both be strings, not null"
            ));
            continue;
        };
        if !IMAGE_MIME_TYPES.contains(&mime_type.as_str()) {
            problems.push(format!(
                "images[{i}].mime_type: \"{mime_type}\" is not allowed; use image/png, image/jpeg or image/webp"
            ));
            continue;
        }
        out.push(TaskImage::new(mime_type, data_base64));
    }
    Some(out)
}

/// An invalid-arguments tool error (`docs/contract.md` §6.2): a header line, then one line per
/// problem.
pub fn invalid_args(tool: &str, problems: &[String]) -> McpResult {
    let mut text = format!("Invalid arguments for tool \"{tool}\":");
    for p in problems {
        text.push('\n');
        text.push_str(p);
    }
    McpResult::tool_text(text, true)
}

fn store_failure(e: &crate::store::StoreError) -> McpResult {
    tracing::error!(error = %e, "task store failure");
    McpResult::tool_text(
        format!(
            "The task store failed ({e}); nothing was queued. Try again; if it persists, \
             check the server log and the store's disk."
        ),
        true,
    )
}

fn discover() -> McpResult {
    let mut body = Map::new();
    body.insert(
        "supportedVersions".into(),
        json!(ProtocolVersion::supported_strings()),
    );
    body.insert("capabilities".into(), json!({ "tools": {} }));
    body.insert("instructions".into(), Value::from(INSTRUCTIONS));
    McpResult::complete(body).with_cache(CacheHint {
        ttl_ms: LIST_TTL_MS,
        public: true,
    })
}

fn initialize(req: &McpRequest) -> McpResult {
    let requested = req.params.get("protocolVersion").and_then(Value::as_str);
    let version = requested
        .and_then(ProtocolVersion::parse)
        .filter(|v| v.era() == Era::Legacy)
        .unwrap_or(ProtocolVersion::LATEST_LEGACY);
    let mut body = Map::new();
    body.insert("protocolVersion".into(), Value::from(version.as_str()));
    // `logging` is offered so 2025-era clients may set a level; this server sends no
    // `notifications/message` (logs go to stderr), which every level permits.
    body.insert("capabilities".into(), json!({ "tools": {}, "logging": {} }));
    body.insert("serverInfo".into(), server_info());
    body.insert("instructions".into(), Value::from(INSTRUCTIONS));
    McpResult::complete(body)
}

/// The syslog levels of `LoggingLevel`.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// 2025-era `logging/setLevel`: validated and acknowledged.
fn set_log_level(req: &McpRequest) -> McpResponse {
    match req.params.get("level").and_then(Value::as_str) {
        Some(level) if LOG_LEVELS.contains(&level) => req.result(McpResult::empty()),
        _ => req.error(ErrorObject::invalid_params(format!(
            "logging/setLevel needs params.level, one of: {}",
            LOG_LEVELS.join(", ")
        ))),
    }
}

fn tools_list() -> McpResult {
    let mut body = Map::new();
    body.insert("tools".into(), Value::Array(tool_definitions().to_vec()));
    McpResult::complete(body).with_cache(CacheHint {
        ttl_ms: LIST_TTL_MS,
        public: true,
    })
}

/// The version an `initialize` negotiates, for transports that remember it (stdio).
pub fn negotiated_version(result: &McpResponse) -> Option<ProtocolVersion> {
    match &result.payload {
        Payload::Result(r) => r
            .body
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(ProtocolVersion::parse),
        _ => None,
    }
}
