//! Unit tests of the Tasks layer around tiny inner services.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tower::{Layer, Service, ServiceExt, service_fn};
use uuid::Uuid;

use super::*;
use crate::agent::status::render_accepted;
use crate::agent::{Agent, AgentCore};
use crate::config::Config;
use crate::protocol::{
    McpRequest, McpResponse, McpResult, ProtocolVersion, RequestContext, RequestId, Transport,
};
use crate::store::MemoryStore;
use crate::task::{Session, Task, TaskState};

const TTL: Duration = Duration::from_secs(7 * 24 * 3600);

async fn agent() -> Agent {
    Agent::start(&Config::default(), Arc::new(MemoryStore::new()))
        .await
        .expect("agent starts without contacting Ollama")
}

fn request(version: ProtocolVersion, method: &str, params: Value) -> McpRequest {
    let Value::Object(params) = params else {
        panic!("params must be an object");
    };
    McpRequest {
        id: Some(RequestId::Number(7)),
        method: method.to_owned(),
        params,
        ctx: RequestContext::new(version, Transport::InProcess),
    }
}

fn modern(method: &str, params: Value, declared: bool) -> McpRequest {
    let mut req = request(ProtocolVersion::V2026_07_28, method, params);
    if declared {
        req.ctx.client_capabilities = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    }
    req
}

/// An inner service that stores a queued task (never started) for `agent_run`, echoes a tool
/// error for `agent_run` with `{"bad": true}`, and answers anything else with `body`.
fn inner(
    core: Arc<AgentCore>,
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
        let core = core.clone();
        let body = body.clone();
        async move {
            if req.tool_name() == Some("agent_run") {
                if req.params["arguments"]["bad"] == json!(true) {
                    return Ok(req.result(McpResult::tool_text("Invalid arguments", true)));
                }
                let session = Session::new(req.ctx.identity.clone());
                let task = Task::new(session.id, req.ctx.identity.clone(), "x".into(), None);
                core.store.insert_task(&task).await.expect("memory store");
                return Ok(req.result(McpResult::tool_text(render_accepted(&task), false)));
            }
            let Value::Object(body) = body else {
                unreachable!("test bodies are objects");
            };
            Ok(req.result(McpResult::complete(body)))
        }
    })
}

async fn call<S>(svc: &mut S, req: McpRequest) -> Value
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    let Ok(ready) = svc.ready().await;
    let Ok(response) = ready.call(req).await;
    response.to_json().expect("a response")
}

async fn stored(core: &AgentCore, owner: Option<&str>, state: TaskState) -> Task {
    let mut task = Task::new(Uuid::new_v4(), owner.map(str::to_owned), "x".into(), None);
    task.state = state;
    core.store.insert_task(&task).await.expect("memory store");
    task
}

#[tokio::test]
async fn discover_gains_the_extension_and_keeps_the_rest() {
    let agent = agent().await;
    let core = agent.core().clone();
    let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(
        core,
        json!({"capabilities": {"tools": {}}, "supportedVersions": ["2026-07-28"]}),
    ));
    let v = call(&mut svc, modern("server/discover", json!({}), false)).await;
    assert_eq!(
        v["result"]["capabilities"],
        json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    assert_eq!(v["result"]["supportedVersions"], json!(["2026-07-28"]));
}

#[tokio::test]
async fn declared_agent_run_becomes_a_stored_task() {
    let agent = agent().await;
    let core = agent.core().clone();
    let mut svc = TasksLayer::new(core.clone(), TTL)
        .with_poll_interval(Duration::from_millis(250))
        .layer(inner(core.clone(), json!({})));
    let req = modern(
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "x"}}),
        true,
    );
    let v = call(&mut svc, req).await;
    let result = &v["result"];
    assert_eq!(result["resultType"], "task");
    assert_eq!(result["status"], "working");
    assert_eq!(result["ttlMs"], json!(604_800_000u64));
    assert_eq!(result["pollIntervalMs"], json!(250));
    let keys: Vec<&str> = result
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "_meta",
            "createdAt",
            "lastUpdatedAt",
            "pollIntervalMs",
            "resultType",
            "status",
            "statusMessage",
            "taskId",
            "ttlMs"
        ]
    );
    let id = result["taskId"].as_str().expect("taskId");
    let id = Uuid::parse_str(id).expect("uuid");
    assert_eq!(id.get_version_num(), 4);
    assert!(core.store.task(id).await.expect("store").is_some());
}

#[tokio::test]
async fn tool_errors_and_undeclared_calls_pass_through() {
    let agent = agent().await;
    let core = agent.core().clone();
    let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(core, json!({})));
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
    let text = v["result"]["content"][0]["text"].as_str().expect("text");
    assert!(text.starts_with("task_id: "), "{text}");
}

#[tokio::test]
async fn capability_is_checked_before_the_task_id() {
    let agent = agent().await;
    let core = agent.core().clone();
    let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(core, json!({})));
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
    }
    for method in ["tasks/result", "tasks/list"] {
        let v = call(&mut svc, modern(method, unknown.clone(), true)).await;
        assert_eq!(v["error"]["code"], -32601, "{method}: {v}");
    }
}

#[tokio::test]
async fn another_identity_sees_no_task() {
    let agent = agent().await;
    let core = agent.core().clone();
    let task = stored(&core, Some("alice"), TaskState::Queued).await;
    let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(core.clone(), json!({})));
    let params = json!({"taskId": task.id.to_string()});
    for method in ["tasks/get", "tasks/cancel"] {
        let mut req = modern(method, params.clone(), true);
        req.ctx.identity = Some("bob".into());
        let v = call(&mut svc, req).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
    }
    let mut req = modern("tasks/get", params, true);
    req.ctx.identity = Some("alice".into());
    let v = call(&mut svc, req).await;
    assert_eq!(v["result"]["status"], "working");
    let unchanged = core
        .store
        .task(task.id)
        .await
        .expect("store")
        .expect("task");
    assert_eq!(unchanged.state, TaskState::Queued);
}

#[tokio::test]
async fn legacy_capabilities_only_for_2025_11_25() {
    let agent = agent().await;
    let core = agent.core().clone();
    for (version, advertised) in [("2025-11-25", true), ("2025-06-18", false)] {
        let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(
            core.clone(),
            json!({"protocolVersion": version, "capabilities": {"tools": {}}}),
        ));
        let req = request(ProtocolVersion::V2025_11_25, "initialize", json!({}));
        let v = call(&mut svc, req).await;
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
    let agent = agent().await;
    let core = agent.core().clone();
    let tools = json!({"tools": [{"name": "agent_run"}, {"name": "agent_status"}]});
    let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(core, tools));
    let v = call(
        &mut svc,
        request(ProtocolVersion::V2025_11_25, "tools/list", json!({})),
    )
    .await;
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
async fn legacy_result_wakes_on_a_change_and_stops_on_cancel() {
    let agent = agent().await;
    let core = agent.core().clone();
    let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(core.clone(), json!({})));
    let task = stored(&core, None, TaskState::Running).await;
    let params = json!({"taskId": task.id.to_string()});

    // Cancelling the waiting request ends it promptly.
    let req = request(ProtocolVersion::V2025_11_25, "tasks/result", params.clone());
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
    assert!(v["error"].is_object(), "{v}");

    // A notified change is seen well before the one-second safety net.
    let req = request(ProtocolVersion::V2025_11_25, "tasks/result", params);
    let waiting = tokio::spawn(async move { call(&mut svc, req).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut done = task.clone();
    done.result = "ok".into();
    done.transition(TaskState::Completed);
    core.store.update_task(&done).await.expect("store");
    core.notify_task_changed(done.id);
    let v = tokio::time::timeout(Duration::from_millis(500), waiting)
        .await
        .expect("wakes on the notification")
        .expect("joins");
    assert_eq!(v["result"]["isError"], json!(false));
    assert_eq!(
        v["result"]["_meta"],
        json!({"io.modelcontextprotocol/related-task": {"taskId": task.id.to_string()}})
    );
    assert!(v["result"].get("resultType").is_none());
}

#[tokio::test]
async fn legacy_task_param_must_be_an_object_and_agent_status_is_not_a_task() {
    let agent = agent().await;
    let core = agent.core().clone();
    let mut svc = TasksLayer::new(core.clone(), TTL).layer(inner(core, json!({})));
    let v = call(
        &mut svc,
        request(
            ProtocolVersion::V2025_11_25,
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "x"}, "task": 5}),
        ),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602);
    let v = call(
        &mut svc,
        request(
            ProtocolVersion::V2025_11_25,
            "tools/call",
            json!({"name": "agent_status", "arguments": {"task_id": "x"}, "task": {}}),
        ),
    )
    .await;
    assert_eq!(v["error"]["code"], -32601);
    let v = call(
        &mut svc,
        request(
            ProtocolVersion::V2025_11_25,
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "x"}, "task": {"ttl": 1000}}),
        ),
    )
    .await;
    assert_eq!(v["result"]["task"]["status"], "working");
    assert_eq!(v["result"]["task"]["ttl"], json!(604_800_000u64));
    let _: Map<String, Value> =
        serde_json::from_value(v["result"]["task"].clone()).expect("object");
}
