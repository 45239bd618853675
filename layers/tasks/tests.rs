//! Unit tests of the Tasks layer around a tiny in-memory [`TaskBackend`] and tiny inner
//! services; no agent core, no store.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tower::{Layer, Service, ServiceExt, service_fn};
use uuid::Uuid;

use super::service::Route;
use super::test_fields::CREATED_TASK_FIELDS;
use super::*;
use crate::plugin::{
    McpRequest, McpResponse, McpResult, ProtocolVersion, RequestContext, RequestId, Transport,
};
use crate::plugin::{Task, TaskState};

const TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Tasks in a map, a FIFO queue of ids, and the change signal. A running task asked to cancel
/// is only marked; the test plays its runner ([`MemoryTasks::stop_requested`]).
pub(super) struct MemoryTasks {
    tasks: Mutex<HashMap<Uuid, Task>>,
    queue: Mutex<Vec<Uuid>>,
    stop_requested: Mutex<HashSet<Uuid>>,
    changes: watch::Sender<u64>,
    events: Arc<crate::plugin::TaskEvents>,
}

impl Default for MemoryTasks {
    fn default() -> Self {
        Self {
            tasks: Mutex::default(),
            queue: Mutex::default(),
            stop_requested: Mutex::default(),
            changes: watch::Sender::new(0),
            events: crate::plugin::TaskEvents::new(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemoryTasks {
    /// Stores a task in `state` for `owner`; a queued one joins the back of the queue.
    fn add(&self, owner: Option<&str>, state: TaskState) -> Task {
        let mut task = Task::new(Uuid::new_v4(), owner.map(str::to_owned), "x".into(), None);
        task.state = state;
        if state == TaskState::Queued {
            lock(&self.queue).push(task.id);
        }
        lock(&self.tasks).insert(task.id, task.clone());
        task
    }

    /// Saves a change and signals it, as a runner does.
    fn save(&self, task: &Task) {
        lock(&self.tasks).insert(task.id, task.clone());
        self.events.publish(task);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn get(&self, id: Uuid) -> Task {
        lock(&self.tasks)[&id].clone()
    }

    fn stop_requested(&self, id: Uuid) -> bool {
        lock(&self.stop_requested).contains(&id)
    }
}

impl TaskBackend for MemoryTasks {
    type Error = String;

    async fn lookup(&self, id: Uuid) -> Result<Option<Tracked>, String> {
        let task = lock(&self.tasks).get(&id).cloned();
        let queue_position = lock(&self.queue)
            .iter()
            .position(|q| *q == id)
            .map(|p| p + 1);
        Ok(task.map(|task| Tracked {
            task,
            queue_position,
        }))
    }

    async fn cancel(&self, id: Uuid) -> Result<Option<Task>, String> {
        let Some(mut task) = lock(&self.tasks).get(&id).cloned() else {
            return Ok(None);
        };
        let was_queued = {
            let mut queue = lock(&self.queue);
            let before = queue.len();
            queue.retain(|q| *q != id);
            queue.len() != before
        };
        if was_queued {
            task.transition(TaskState::Cancelled);
            task.result = "cancelled before start".into();
            self.save(&task);
        } else if !task.state.is_terminal() {
            lock(&self.stop_requested).insert(id);
        }
        Ok(Some(task))
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn follow(&self, ids: &[Uuid]) -> crate::plugin::Follower {
        self.events.follow(ids)
    }

    fn result_text(&self, task: &Task) -> String {
        format!("task {} is {}: {}", task.id, task.state, task.result)
    }

    fn state_message(&self, state: TaskState, queue_position: Option<usize>) -> String {
        match queue_position {
            Some(p) => format!("{state} #{p}."),
            None => format!("{state}."),
        }
    }
}

fn request(version: ProtocolVersion, method: &str, params: Value) -> McpRequest {
    let Value::Object(params) = params else {
        panic!("params must be an object");
    };
    McpRequest::new(
        Some(RequestId::Number(7)),
        method,
        params,
        RequestContext::new(version, Transport::InProcess),
    )
}

fn legacy(method: &str, params: Value) -> McpRequest {
    request(ProtocolVersion::V2025_11_25, method, params)
}

fn modern(method: &str, params: Value, declared: bool) -> McpRequest {
    let mut req = request(ProtocolVersion::V2026_07_28, method, params);
    if declared {
        req.ctx.client_capabilities = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    }
    req
}

/// The reply text of the inner `agent_run`: no `task_id:` line, so a layer that read the id
/// from the text would find none.
const ACCEPTED: &str = "accepted";

/// An inner service that stores a queued task for `agent_run` and names it in
/// [`McpResponse::ids`] (not in its text), answers `agent_run` with `{"bad": true}` with a tool
/// error, `agent_run` with `{"unnamed": true}` with a success that names no task, and anything
/// else with `body`.
fn inner(
    backend: Arc<MemoryTasks>,
    body: Value,
) -> impl Service<
    McpRequest,
    Response = McpResponse,
    Error = Infallible,
    Future = impl Future<Output = Result<McpResponse, Infallible>> + Send,
> + Clone
+ Send
+ 'static {
    service_fn(move |req: McpRequest| {
        let backend = backend.clone();
        let body = body.clone();
        async move {
            if req.tool_name() == Some("agent_run") {
                let args = req
                    .params
                    .tools_call()
                    .and_then(|c| c.arguments.clone())
                    .unwrap_or_default();
                if args["bad"] == json!(true) {
                    return Ok(req.result(McpResult::tool_text("Invalid arguments", true)));
                }
                let task = backend.add(req.ctx.identity.as_deref(), TaskState::Queued);
                let mut response = req.result(McpResult::tool_text(ACCEPTED, false));
                if args["unnamed"] != json!(true) {
                    response.ids.task_id = Some(task.id);
                    response.ids.session_id = Some(task.session_id);
                }
                return Ok(response);
            }
            let Value::Object(body) = body else {
                unreachable!("test bodies are objects");
            };
            // As the service does, an `initialize` is answered in the version it negotiated.
            let negotiated = body
                .get("protocolVersion")
                .and_then(Value::as_str)
                .and_then(ProtocolVersion::parse);
            let mut response = req.result(McpResult::complete(body));
            if let Some(version) = negotiated {
                response.version = version;
            }
            Ok(response)
        }
    })
}

type Svc = Tasks<tower::util::BoxCloneService<McpRequest, McpResponse, Infallible>, MemoryTasks>;

/// The layer over [`inner`] answering `body`, with its backend.
fn stack_with(configure: impl FnOnce(&mut TasksConfig), body: Value) -> (Svc, Arc<MemoryTasks>) {
    let backend = Arc::new(MemoryTasks::default());
    let svc = tower::util::BoxCloneService::new(inner(backend.clone(), body));
    let mut config = TasksConfig {
        ttl: TTL,
        ..TasksConfig::default()
    };
    configure(&mut config);
    (TasksLayer::new(backend.clone(), config).layer(svc), backend)
}

fn stack() -> (Svc, Arc<MemoryTasks>) {
    stack_with(|_| {}, json!({}))
}

/// A stack whose legacy `tasks/cancel` waits up to `wait` for the runner to stop the task.
fn stack_cancel_waiting(wait: Duration) -> (Svc, Arc<MemoryTasks>) {
    stack_with(|c| c.cancel_wait = wait, json!({}))
}

async fn call<S>(svc: &mut S, req: McpRequest) -> Value
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    let Ok(ready) = svc.ready().await;
    let Ok(response) = ready.call(req).await;
    response.to_json().expect("a response")
}

fn id_of(task: &Task) -> Value {
    json!({"taskId": task.id.to_string()})
}

/// A 2025-11-25 `tasks/cancel` of `task`.
async fn legacy_cancel(svc: &mut Svc, task: &Task) -> Value {
    call(svc, legacy("tasks/cancel", id_of(task))).await
}

/// A new task in `state`, and the answer to cancelling it the legacy way.
async fn legacy_cancel_new(
    svc: &mut Svc,
    backend: &MemoryTasks,
    state: TaskState,
) -> (Task, Value) {
    let task = backend.add(None, state);
    let v = legacy_cancel(svc, &task).await;
    (task, v)
}

#[tokio::test]
async fn discover_gains_the_extension_and_keeps_the_rest() {
    let (mut svc, _) = stack_with(
        |_| {},
        json!({"capabilities": {"tools": {}}, "supportedVersions": ["2026-07-28"]}),
    );
    let v = call(&mut svc, modern("server/discover", json!({}), false)).await;
    assert_eq!(
        v["result"]["capabilities"],
        json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    assert_eq!(v["result"]["supportedVersions"], json!(["2026-07-28"]));
}

#[tokio::test]
async fn declared_agent_run_becomes_the_task_the_response_names() {
    let (mut svc, backend) =
        stack_with(|c| c.poll_interval = Duration::from_millis(250), json!({}));
    backend.add(None, TaskState::Queued);
    let req = modern(
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "x"}}),
        true,
    );
    let v = call(&mut svc, req).await;
    let result = &v["result"];
    assert_eq!(result["resultType"], "task");
    assert_eq!(result["status"], "working");
    assert_eq!(result["statusMessage"], "queued #2.");
    assert_eq!(result["ttlMs"], json!(604_800_000u64));
    // Second in line: twice the base interval.
    assert_eq!(result["pollIntervalMs"], json!(500));
    let keys: Vec<&str> = result
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, CREATED_TASK_FIELDS);
    let id = Uuid::parse_str(result["taskId"].as_str().expect("taskId")).expect("uuid");
    assert_eq!(backend.get(id).state, TaskState::Queued);
}

#[tokio::test]
async fn a_success_that_names_no_task_is_passed_back_unchanged() {
    let (mut svc, _) = stack();
    let args = json!({"request": "x", "unnamed": true});
    let modern_req = modern(
        "tools/call",
        json!({"name": "agent_run", "arguments": args}),
        true,
    );
    let v = call(&mut svc, modern_req).await;
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["content"][0]["text"], ACCEPTED);
    let legacy_req = legacy(
        "tools/call",
        json!({"name": "agent_run", "arguments": args, "task": {}}),
    );
    let v = call(&mut svc, legacy_req).await;
    assert_eq!(v["result"]["content"][0]["text"], ACCEPTED);
    assert!(v["result"].get("task").is_none(), "{v}");
}

#[tokio::test]
async fn tool_errors_and_undeclared_calls_pass_through() {
    let (mut svc, _) = stack();
    let bad = modern(
        "tools/call",
        json!({"name": "agent_run", "arguments": {"bad": true}}),
        true,
    );
    let v = call(&mut svc, bad).await;
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["isError"], json!(true));
    assert_eq!(v["result"]["content"][0]["text"], "Invalid arguments");

    let plain = modern(
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "x"}}),
        false,
    );
    let v = call(&mut svc, plain).await;
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["content"][0]["text"], ACCEPTED);
}

#[tokio::test]
async fn capability_is_checked_before_the_task_id() {
    let (mut svc, _) = stack();
    let unknown = json!({"taskId": Uuid::new_v4().to_string()});
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let v = call(&mut svc, modern(method, unknown.clone(), false)).await;
        assert_eq!(v["error"]["code"], -32021, "{method}: {v}");
        assert_eq!(
            v["error"]["data"],
            json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
        );
        let v = call(&mut svc, modern(method, unknown.clone(), true)).await;
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
        let v = call(&mut svc, modern(method, json!({}), true)).await;
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
        let braced = json!({"taskId": format!("{{{}}}", Uuid::new_v4())});
        let v = call(&mut svc, modern(method, braced, true)).await;
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
    }
    for method in ["tasks/result", "tasks/list"] {
        let v = call(&mut svc, modern(method, unknown.clone(), true)).await;
        assert_eq!(v["error"]["code"], -32601, "{method}: {v}");
    }
    let v = call(&mut svc, legacy("tasks/list", json!({}))).await;
    assert_eq!(v["error"]["code"], -32601, "{v}");
}

#[tokio::test]
async fn another_identity_sees_no_task() {
    let (mut svc, backend) = stack();
    let task = backend.add(Some("alice"), TaskState::Queued);
    for method in ["tasks/get", "tasks/cancel"] {
        let mut req = modern(method, id_of(&task), true);
        req.ctx.identity = Some("bob".into());
        let v = call(&mut svc, req).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let mut req = legacy(method, id_of(&task));
        req.ctx.identity = Some("bob".into());
        let v = call(&mut svc, req).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
    }
    let mut req = modern("tasks/get", id_of(&task), true);
    req.ctx.identity = Some("alice".into());
    let v = call(&mut svc, req).await;
    assert_eq!(v["result"]["status"], "working");
    assert_eq!(backend.get(task.id).state, TaskState::Queued);
}

#[tokio::test]
async fn modern_get_shows_the_queue_and_inlines_the_final_result() {
    let (mut svc, backend) = stack();
    backend.add(None, TaskState::Queued);
    let queued = backend.add(None, TaskState::Queued);
    let v = call(&mut svc, modern("tasks/get", id_of(&queued), true)).await;
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["status"], "working");
    assert_eq!(v["result"]["statusMessage"], "queued #2.");
    assert_eq!(v["result"]["pollIntervalMs"], json!(2000));
    assert!(v["result"].get("result").is_none());

    for (state, is_error) in [(TaskState::Completed, false), (TaskState::Failed, true)] {
        let mut done = backend.add(None, state);
        done.result = "the answer".into();
        backend.save(&done);
        let v = call(&mut svc, modern("tasks/get", id_of(&done), true)).await;
        assert_eq!(v["result"]["status"], "completed");
        assert_eq!(v["result"]["pollIntervalMs"], json!(1000));
        assert_eq!(
            v["result"]["result"],
            json!({
                "content": [{"type": "text", "text": backend.result_text(&done)}],
                "isError": is_error,
                "resultType": "complete"
            })
        );
    }
}

/// The empty 2026-07-28 result: nothing but `resultType` (and the server's `_meta`).
fn assert_empty_ack(v: &Value) {
    let mut result = v["result"].clone();
    if let Some(result) = result.as_object_mut() {
        result.remove("_meta");
    }
    assert_eq!(result, json!({"resultType": "complete"}), "{v}");
}

#[tokio::test]
async fn modern_cancel_and_update_answer_with_the_empty_ack() {
    let (mut svc, backend) = stack();
    let queued = backend.add(None, TaskState::Queued);
    let v = call(&mut svc, modern("tasks/cancel", id_of(&queued), true)).await;
    assert_empty_ack(&v);
    assert_eq!(backend.get(queued.id).state, TaskState::Cancelled);

    // A running task is asked to stop; the 2026 cancel does not wait.
    let running = backend.add(None, TaskState::Running);
    let v = call(&mut svc, modern("tasks/cancel", id_of(&running), true)).await;
    assert_empty_ack(&v);
    assert!(backend.stop_requested(running.id));

    // Terminal tasks are acknowledged the same way and left alone.
    let done = backend.add(None, TaskState::Completed);
    for method in ["tasks/cancel", "tasks/update"] {
        let v = call(&mut svc, modern(method, id_of(&done), true)).await;
        assert_empty_ack(&v);
    }
    assert_eq!(backend.get(done.id).state, TaskState::Completed);
    assert!(!backend.stop_requested(done.id));
}

#[tokio::test]
async fn legacy_capabilities_only_for_2025_11_25() {
    for (version, advertised) in [("2025-11-25", true), ("2025-06-18", false)] {
        let (mut svc, _) = stack_with(
            |_| {},
            json!({"protocolVersion": version, "capabilities": {"tools": {}}}),
        );
        let v = call(&mut svc, legacy("initialize", json!({}))).await;
        let expected = if advertised {
            json!({"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}})
        } else {
            json!({"tools": {}})
        };
        assert_eq!(v["result"]["capabilities"], expected, "{version}");
    }
}

#[tokio::test]
async fn legacy_tools_list_marks_agent_run_only() {
    let tools = json!({"tools": [{"name": "agent_run"}, {"name": "agent_status"}]});
    let (mut svc, _) = stack_with(|_| {}, tools);
    let v = call(&mut svc, legacy("tools/list", json!({}))).await;
    assert_eq!(
        v["result"]["tools"],
        json!([{"name": "agent_run", "execution": {"taskSupport": "optional"}},
               {"name": "agent_status"}])
    );
    let v = call(&mut svc, modern("tools/list", json!({}), true)).await;
    assert_eq!(
        v["result"]["tools"],
        json!([{"name": "agent_run"}, {"name": "agent_status"}])
    );
}

#[tokio::test]
async fn legacy_get_keeps_failed_and_the_legacy_field_names() {
    let (mut svc, backend) = stack();
    let queued = backend.add(None, TaskState::Queued);
    let v = call(&mut svc, legacy("tasks/get", id_of(&queued))).await;
    assert_eq!(v["result"]["status"], "working");
    assert_eq!(v["result"]["statusMessage"], "queued #1.");
    assert_eq!(v["result"]["ttl"], json!(604_800_000u64));
    assert_eq!(v["result"]["pollInterval"], json!(1000));
    assert!(v["result"].get("ttlMs").is_none());
    let failed = backend.add(None, TaskState::Failed);
    let v = call(&mut svc, legacy("tasks/get", id_of(&failed))).await;
    assert_eq!(v["result"]["status"], "failed");
}

#[tokio::test]
async fn legacy_result_wakes_on_a_change_and_stops_on_cancel() {
    let (svc, backend) = stack();
    let task = backend.add(None, TaskState::Running);

    // Cancelling the waiting request ends it promptly.
    let req = legacy("tasks/result", id_of(&task));
    let stop = req.ctx.cancel.clone();
    let waiting = tokio::spawn({
        let mut svc = svc.clone();
        async move { call(&mut svc, req).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    stop.cancel();
    let v = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("returns promptly")
        .expect("joins");
    assert_eq!(v["error"]["code"], -32603, "{v}");

    // A signalled change is seen well before the one-second safety net.
    let req = legacy("tasks/result", id_of(&task));
    let waiting = tokio::spawn({
        let mut svc = svc.clone();
        async move { call(&mut svc, req).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut done = task.clone();
    done.result = "ok".into();
    done.transition(TaskState::Completed);
    backend.save(&done);
    let v = tokio::time::timeout(Duration::from_millis(500), waiting)
        .await
        .expect("wakes on the notification")
        .expect("joins");
    assert_eq!(
        v["result"],
        json!({
            "content": [{"type": "text", "text": backend.result_text(&done)}],
            "isError": false,
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task.id.to_string()}}
        })
    );
}

#[tokio::test]
async fn legacy_cancel_queued_at_once_running_cooperatively_terminal_refused() {
    let (mut svc, backend) = stack_cancel_waiting(Duration::from_secs(2));

    let (_, v) = legacy_cancel_new(&mut svc, &backend, TaskState::Queued).await;
    assert_eq!(v["result"]["status"], "cancelled", "{v}");
    assert_eq!(
        v["result"]["statusMessage"],
        "cancelled. cancelled before start"
    );

    // The runner notices the request and stops; the answer already says `cancelled`.
    let running = backend.add(None, TaskState::Running);
    let runner = tokio::spawn({
        let backend = backend.clone();
        let id = running.id;
        async move {
            while !backend.stop_requested(id) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let mut task = backend.get(id);
            task.transition(TaskState::Cancelled);
            backend.save(&task);
        }
    });
    let v = tokio::time::timeout(Duration::from_secs(1), legacy_cancel(&mut svc, &running))
        .await
        .expect("wakes when the runner stops");
    assert_eq!(v["result"]["status"], "cancelled", "{v}");
    runner.await.expect("runner");

    let v = legacy_cancel(&mut svc, &running).await;
    assert_eq!(v["error"]["code"], -32602);
    assert_eq!(
        v["error"]["message"],
        format!(
            "Cannot cancel task {}: it is already cancelled. Read it with tasks/get or \
             tasks/result.",
            running.id
        )
    );
}

#[tokio::test]
async fn legacy_cancel_of_a_task_that_does_not_stop_answers_after_the_wait() {
    let (mut svc, backend) = stack_cancel_waiting(Duration::from_millis(50));
    let (stuck, v) = legacy_cancel_new(&mut svc, &backend, TaskState::Running).await;
    assert_eq!(v["result"]["status"], "working", "{v}");
    assert!(backend.stop_requested(stuck.id));
}

#[tokio::test]
async fn legacy_task_param_must_be_an_object_and_agent_status_is_not_a_task() {
    let (mut svc, backend) = stack();
    // A task param that is no object; agent_status, which is not a task.
    let refused = [
        (
            json!({"name": "agent_run", "arguments": {"request": "x"}, "task": 5}),
            -32602,
        ),
        (
            json!({"name": "agent_status", "arguments": {"task_id": "x"}, "task": {}}),
            -32601,
        ),
    ];
    for (params, code) in refused {
        let v = call(&mut svc, legacy("tools/call", params.clone())).await;
        assert_eq!(v["error"]["code"], code, "{params}");
    }
    let v = call(
        &mut svc,
        legacy(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "x"}, "task": {"ttl": 1000}}),
        ),
    )
    .await;
    assert_eq!(v["result"]["task"]["status"], "working");
    assert_eq!(v["result"]["task"]["ttl"], json!(604_800_000u64));
    let task: Map<String, Value> =
        serde_json::from_value(v["result"]["task"].clone()).expect("object");
    let id = Uuid::parse_str(task["taskId"].as_str().expect("taskId")).expect("uuid");
    assert_eq!(backend.get(id).state, TaskState::Queued);
}

/// Whatever [`Route::of`] passes through reaches the inner service unchanged and comes back
/// unchanged; everything it routes is answered differently from the bare inner service.
#[tokio::test]
async fn the_routing_function_decides_what_passes_through() {
    let body = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                      "tools": [{"name": "agent_run"}]});
    let (mut svc, backend) = stack_with(|_| {}, body.clone());
    let task = backend.add(None, TaskState::Completed);
    let mut notification = modern("tasks/get", id_of(&task), true);
    notification.id = None;
    let run = json!({"name": "agent_run", "arguments": {"request": "x"}});
    let status = json!({"name": "agent_status", "arguments": {}});
    let cases = [
        (modern("tools/list", json!({}), true), Route::PassThrough),
        (
            modern("tools/call", status.clone(), true),
            Route::PassThrough,
        ),
        (modern("tools/call", run.clone(), false), Route::PassThrough),
        (modern("tools/call", run.clone(), true), Route::ModernCreate),
        (modern("server/discover", json!({}), false), Route::Discover),
        (modern("tasks/get", id_of(&task), true), Route::ModernTask),
        (modern("tasks/list", json!({}), true), Route::NotOffered),
        (notification, Route::PassThrough),
        (legacy("ping", json!({})), Route::PassThrough),
        (legacy("tools/call", run.clone()), Route::PassThrough),
        (legacy("initialize", json!({})), Route::Initialize),
        (legacy("tools/list", json!({})), Route::ListTools),
        (
            legacy(
                "tools/call",
                json!({"name": "agent_run", "arguments": {}, "task": {}}),
            ),
            Route::LegacyCreate,
        ),
        (legacy("tasks/result", id_of(&task)), Route::LegacyTask),
        (legacy("tasks/list", json!({})), Route::NotOffered),
    ];
    for (req, route) in cases {
        assert_eq!(
            Route::of(&req),
            route,
            "{} {:?}",
            req.method,
            req.ctx.version
        );
        let mut bare = inner(backend.clone(), body.clone());
        let alone = call(&mut bare, req.clone()).await;
        let layered = call(&mut svc, req.clone()).await;
        assert_eq!(
            alone == layered,
            route == Route::PassThrough,
            "{} {route:?}: {alone} vs {layered}",
            req.method
        );
    }
}
