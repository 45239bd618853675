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

use serde_json::{Map, Value, json};
use tower_service::Service;

use crate::agent::AgentCore;
use crate::agent::status::{render_accepted, render_not_found, render_status};
use crate::mcp_tools::{RunArgs, StatusArgs, ToolCall, tool_definitions};
use crate::protocol::era::Era;
use crate::protocol::{
    CacheHint, ErrorObject, McpRequest, McpResponse, McpResult, Method, Params, ParsedCall,
    Payload, ProtocolVersion, ResponseIds, server_info,
};
use crate::task::input::AnswerPath;
use crate::task::{Task, TaskImage};
use crate::telemetry::context::TraceCarrier;

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
    queue: QueueLimits,
}

/// How many tasks may wait in the queue (`mcp.max_queued_tasks`, `mcp.max_queued_per_caller`):
/// past either, `agent_run` queues nothing and answers a tool error saying so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Most tasks waiting, all callers together.
    pub total: usize,
    /// Most tasks waiting from one caller.
    pub per_caller: usize,
}

impl Default for QueueLimits {
    fn default() -> Self {
        Self::from_config(&crate::config::McpConfig::default())
    }
}

impl QueueLimits {
    /// The limits `mcp` sets.
    pub fn from_config(mcp: &crate::config::McpConfig) -> Self {
        Self {
            total: mcp.max_queued_tasks,
            per_caller: mcp.max_queued_per_caller,
        }
    }
}

impl AgentService {
    /// The service with the default [`QueueLimits`] around the agent core (the agent is the
    /// crate's own; [`AgentMcp::service`](crate::AgentMcp::service) is the public way).
    pub(crate) fn new(core: Arc<AgentCore>) -> Self {
        Self {
            core,
            queue: QueueLimits::default(),
        }
    }

    /// The same service, with `limits` on what may wait in the queue.
    pub fn with_queue_limits(mut self, limits: QueueLimits) -> Self {
        self.queue = limits;
        self
    }

    /// The agent core this service hands calls to.
    pub(crate) fn core(&self) -> &Arc<AgentCore> {
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
        match (era, &req.method) {
            (Era::Modern, Method::ServerDiscover) => req.result(discover()),
            (Era::Legacy, Method::Initialize) => initialize(&req),
            (Era::Legacy, Method::Ping) => req.result(McpResult::empty()),
            (Era::Legacy, Method::LoggingSetLevel) => set_log_level(&req),
            (_, Method::ToolsList) => req.result(tools_list()),
            (_, Method::ToolsCall) => self.tools_call(req).await,
            (_, method) => req.error(ErrorObject::method_not_found(method.as_str())),
        }
    }

    async fn tools_call(&self, mut req: McpRequest) -> McpResponse {
        let call = match req.parse_tool_call() {
            ParsedCall::Parsed(_) => req.call.take(),
            ParsedCall::Invalid(answer) => return req.result(answer),
            ParsedCall::NotOurs => None,
        };
        let Some(call) = call else {
            return req.tool_call_error(not_a_call_of_ours(&req));
        };
        let mut ids = ResponseIds::default();
        let result = match call {
            ToolCall::Run(args) => self.agent_run(&req, args, &mut ids).await,
            ToolCall::Status(args) => self.agent_status(&req, args, &mut ids).await,
        };
        let mut response = req.result(result);
        response.ids = ids;
        response
    }

    /// Queues a task; on success `ids` names it and its session.
    async fn agent_run(&self, req: &McpRequest, args: RunArgs, ids: &mut ResponseIds) -> McpResult {
        let identity = req.ctx.identity.clone();
        // A place in the queue is held before anything is stored, and given back if nothing is.
        let place = match self.queue_place(identity.as_deref()).await {
            Ok(place) => place,
            Err(full) => return full,
        };
        let store = &self.core.store;
        let session_id = match args.session_id {
            Some(id) => {
                let known = match store.session(id).await {
                    Ok(found) => found.filter(|s| s.owner == identity),
                    Err(e) => return store_failure(&e),
                };
                match known {
                    Some(session) => session.id,
                    None => {
                        return McpResult::tool_text(
                            format!(
                                "Unknown session_id {id}: no such session. Omit session_id to \
                                 start a new session, or pass a session_id returned by agent_run."
                            ),
                            true,
                        );
                    }
                }
            }
            // A new session is stored with its first task, in the same commit
            // (`TaskStore::insert_task` stores the session a task names when it is missing):
            // one durable write per accept, not two.
            None => uuid::Uuid::new_v4(),
        };
        let mut task = Task::new(session_id, identity, args.request, args.temperature);
        task.input.answer_path = answer_path(&req.ctx);
        // The request's server span (set by the edge when export runs): the runner continues
        // its trace, here or on another instance.
        task.trace = req.ctx.extensions.get::<TraceCarrier>().cloned();
        // The images' text moves from the request into one shared buffer each: the store's
        // insert and the runner hold the same bytes (no copy of up to 20 MiB).
        task.images = args
            .images
            .into_iter()
            .map(|image| {
                let mut stored =
                    TaskImage::new(image.mime_type.mime().to_owned(), image.data_base64);
                // The images layer decoded and hashed each image once; the store keys images
                // by that hash instead of decoding them again.
                stored.sha256 = image.checked.map(|c| c.sha256);
                stored
            })
            .collect();
        if let Err(e) = store.insert_task_owned(task.clone()).await {
            return store_failure(&e);
        }
        crate::metrics::record_task_created();
        ids.task_id = Some(task.id);
        ids.session_id = Some(task.session_id);
        let answer = McpResult::tool_text(render_accepted(&task), false);
        match place {
            // This process runs it: the task goes to the runner as accepted, in memory.
            Place::Local(ticket) => self.core.queue.push_ticket(ticket, task.id, Some(task)),
            Place::Shared => self.core.enqueue_owned(task.id, task.owner.as_deref()),
        }
        answer
    }

    /// Reports a task; when it is found `ids` names it and its session.
    async fn agent_status(
        &self,
        req: &McpRequest,
        args: StatusArgs,
        ids: &mut ResponseIds,
    ) -> McpResult {
        let not_found = || McpResult::tool_text(render_not_found(&args.task_id.to_string()), false);
        let task = match self.core.store.task(args.task_id).await {
            Ok(Some(task)) => task,
            Ok(None) => return not_found(),
            Err(e) => return store_failure(&e),
        };
        if !task.visible_to(req.ctx.identity.as_deref())
            || args.session_id.is_some_and(|s| s != task.session_id)
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
        if task.input.answer_path == Some(AnswerPath::Mrtr) {
            match self.approval_round(req, &task).await {
                Ok(Some(input_required)) => return input_required,
                Ok(None) => {}
                Err(e) => return store_failure(&e),
            }
        }
        McpResult::tool_text(render_status(&task, position), false)
    }

    /// MRTR on `agent_status` (2026-07-28 multi-round-trip requests, `InputRequiredResult`):
    /// a retry's `inputResponses` to the task's outstanding keys are recorded by the caller's
    /// identity (the task's owner: the caller already sees it) and the status follows; a
    /// plain call on a task that waits for approval, from a request declaring form
    /// elicitation, gets the unanswered requests as an `InputRequiredResult` instead.
    async fn approval_round(
        &self,
        req: &McpRequest,
        task: &Task,
    ) -> Result<Option<McpResult>, crate::store::StoreError> {
        use crate::task::input::{Action, Answer};
        let call = req.params.tools_call();
        if let Some(Value::Object(responses)) = call.and_then(|c| c.input_responses.as_ref()) {
            for (key, response) in responses {
                let action = response
                    .get("action")
                    .and_then(Value::as_str)
                    .and_then(Action::from_wire);
                let (Some(action), Some(_)) = (action, task.input.pending(key)) else {
                    continue;
                };
                let answer = Answer {
                    action,
                    by: req.ctx.identity.clone(),
                    at: std::time::SystemTime::now(),
                };
                let recorded = self.core.store.answer_input(task.id, key, &answer).await?;
                tracing::info!(
                    target: "agent_mcp::approvals",
                    task_id = %task.id,
                    %key,
                    action = action.as_str(),
                    by = req.ctx.identity.as_deref().unwrap_or(""),
                    recorded,
                    "approval answered"
                );
                if recorded {
                    self.core.notify_task_changed(task.id);
                }
            }
            return Ok(None);
        }
        if task.state.is_terminal()
            || !task.input.is_waiting()
            || req.ctx.era() != Era::Modern
            || !req.ctx.declares_form_elicitation()
        {
            return Ok(None);
        }
        let mut requests = Map::new();
        for request in &task.input.pending {
            // Answered, and the task not yet on: not asked again.
            if self
                .core
                .store
                .input_answer(task.id, &request.key)
                .await?
                .is_none()
            {
                requests.insert(request.key.clone(), request.elicitation());
            }
        }
        if requests.is_empty() {
            return Ok(None);
        }
        let mut body = Map::new();
        body.insert("inputRequests".into(), Value::Object(requests));
        body.insert("requestState".into(), Value::from(approval_state(task)));
        Ok(Some(McpResult {
            kind: crate::protocol::ResultKind::InputRequired,
            body: body.into(),
            cache: None,
        }))
    }
}

/// Where an accepted task will wait: a place held in this process's queue, or the shared
/// store's queue (whose counts are the database's).
enum Place<'a> {
    Local(crate::agent::worker::queue::Ticket<'a>),
    Shared,
}

impl AgentService {
    /// A place in the queue for one more task of `owner`, or the tool error saying the queue
    /// is full. In this process the place is held at once, so calls that arrive together
    /// cannot all take the last one; with a shared store the database's counts are read, and
    /// calls in flight on several instances at once may each take the last place.
    async fn queue_place(&self, owner: Option<&str>) -> Result<Place<'_>, McpResult> {
        use crate::agent::worker::queue::QueueFull;
        let limits = self.queue;
        let verdict = match self.core.store.shared() {
            None => match self
                .core
                .queue
                .reserve(owner, limits.total, limits.per_caller)
            {
                Ok(ticket) => return Ok(Place::Local(ticket)),
                Err(full) => full,
            },
            Some(_) => {
                let (total, mine) = self
                    .core
                    .queue_lens(owner)
                    .await
                    .map_err(|e| store_failure(&e))?;
                if total >= limits.total {
                    QueueFull::Total(total)
                } else if mine >= limits.per_caller {
                    QueueFull::Owner(mine)
                } else {
                    return Ok(Place::Shared);
                }
            }
        };
        Err(match verdict {
            QueueFull::Total(n) => McpResult::tool_text(
                format!(
                    "The task queue is full: {n} tasks are waiting, the most this server queues \
                     (mcp.max_queued_tasks = {}); nothing was queued. Wait for some to finish \
                     (follow them with agent_status) and call agent_run again, or ask the \
                     server's operator to raise mcp.max_queued_tasks.",
                    limits.total
                ),
                true,
            ),
            QueueFull::Owner(n) => McpResult::tool_text(
                format!(
                    "Your share of the task queue is full: {n} of your tasks are waiting, the \
                     most one caller may queue (mcp.max_queued_per_caller = {}); nothing was \
                     queued. Wait for some of them to finish (follow them with agent_status), \
                     cancel ones you no longer need, then call agent_run again.",
                    limits.per_caller
                ),
                true,
            ),
        })
    }
}

/// The JSON-RPC error for a `tools/call` that names no tool of ours or has no argument object.
fn not_a_call_of_ours(req: &McpRequest) -> ErrorObject {
    let Some(name) = req.tool_name() else {
        return ErrorObject::invalid_params(
            "tools/call needs params.name, the tool to call (agent_run or agent_status)",
        );
    };
    let arguments = req
        .params
        .tools_call()
        .and_then(|call| call.arguments.as_ref());
    if !matches!(arguments, None | Some(Value::Null | Value::Object(_))) {
        return ErrorObject::invalid_params("tools/call params.arguments must be an object");
    }
    ErrorObject::invalid_params(format!(
        "Unknown tool: {name}. This server has agent_run and agent_status."
    ))
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

/// The failure of a store call as a tool error: nothing was done.
fn store_failure(e: &crate::store::StoreError) -> McpResult {
    tracing::error!(error = %e, "task store failure");
    McpResult::tool_text(
        format!(
            "The task store failed ({e}); nothing was queued. Try again; if it persists, \
             check the server log, and the store's disk or database server."
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

/// The answer to a legacy `initialize`, spoken in the version it negotiates: a transport that
/// remembers the process's version (stdio) reads it from the response's `version`.
fn initialize(req: &McpRequest) -> McpResponse {
    let requested = match &req.params {
        Params::Initialize(init) => init.protocol_version.as_deref(),
        _ => None,
    };
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
    let mut response = req.result(McpResult::complete(body));
    response.version = version;
    response
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
    let level = match &req.params {
        Params::SetLevel(set) => set.level.as_deref(),
        _ => None,
    };
    match level {
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

/// The Tasks extension's id (the layer that serves it is not the core's to import).
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// How the client that sends `agent_run` can answer an approval, from what this request
/// declares: the Tasks extension (its `inputRequests` and `tasks/update`) together with form
/// elicitation (`elicitation: {}` means form, 2026-07-28 `ClientCapabilities`). Never an input
/// request of a kind the request did not declare.
///
/// Without the extension, a 2026-07-28 request with form elicitation is asked through
/// `agent_status` (an `InputRequiredResult`, MRTR).
///
/// A 2025 session over stdio whose `initialize` declared `elicitation` is asked by the stdio
/// transport itself (a server→client `elicitation/create`, see
/// [`crate::transport::stdio::SessionElicits`]).
fn answer_path(ctx: &crate::protocol::RequestContext) -> Option<AnswerPath> {
    if ctx.era() == Era::Legacy
        && ctx
            .extensions
            .get::<crate::transport::stdio::SessionElicits>()
            .is_some()
    {
        return Some(AnswerPath::StdioElicitation);
    }
    if !ctx.declares_form_elicitation() || ctx.era() != Era::Modern {
        return None;
    }
    Some(if ctx.declares_extension(TASKS_EXTENSION) {
        AnswerPath::TasksElicitation
    } else {
        AnswerPath::Mrtr
    })
}

/// The `requestState` of an approval's `InputRequiredResult`: it names the task and carries
/// nothing the server trusts (the retry's answers are checked against the task itself).
fn approval_state(task: &Task) -> String {
    format!("agent-mcp-approval:{}", task.id)
}
