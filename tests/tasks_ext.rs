//! The Tasks layer on the wire (issue 4): the 2026-07-28 `io.modelcontextprotocol/tasks`
//! extension, 2025-11-25 experimental tasks from the same store, and real cancellation of
//! queued and running tasks. Every test asserts the HTTP status and the body, is bounded in
//! time, and runs against a fake Ollama over real HTTP.

mod support;

use std::future::Future;
use std::time::Duration;

use agent_mcp::AgentMcp;
use agent_mcp::protocol::{
    McpRequest, McpResponse, ProtocolVersion, RequestContext, RequestId, Transport,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, GetTaskResult, ProtocolVersion as RmcpVersion, TaskPayload, TaskStatus,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{
    HttpClient, HttpServer, MODERN, StdioServer, eventually, field, initialize_params, modern_meta,
    test_config, tool_text,
};
use support::task_fields::CREATED_TASK_FIELDS;
use tower::ServiceExt;
use uuid::Uuid;

const EXT: &str = "io.modelcontextprotocol/tasks";
const LEGACY: Option<&str> = Some("2025-11-25");
/// Bound for one whole test.
const TEST_BUDGET: Duration = Duration::from_secs(60);
/// Bound for waiting on one task state.
const STATE_BUDGET: Duration = Duration::from_secs(20);

fn declared() -> Value {
    json!({"extensions": {EXT: {}}})
}

async fn within<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(TEST_BUDGET, fut)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {TEST_BUDGET:?}"))
}

async fn start(cfg: FakeConfig) -> (FakeOllama, HttpServer, HttpClient) {
    let fake = FakeOllama::start_with(cfg).await;
    let server = HttpServer::start(test_config(&fake.url())).await;
    let client = server.client();
    (fake, server, client)
}

/// A fake whose every chat answers `text` (with these token counts) after 300 ms.
fn answering_after_300ms(text: &str, prompt: u64, eval: u64) -> FakeConfig {
    FakeConfig::default().with_default_reply(Reply::delayed(
        Duration::from_millis(300),
        Reply::text(text, prompt, eval),
    ))
}

/// A task just created: exactly `fields`, `working`, the default TTL (field `ttl`) and poll
/// interval (field `poll`), and a v4 id: that id.
fn assert_fresh_task(task: &Value, fields: &[&str], ttl: &str, poll: &str) -> String {
    assert_eq!(keys(task), fields, "{task}");
    assert_eq!(task["status"], "working", "{task}");
    assert_eq!(task[ttl], json!(604_800_000u64), "{task}");
    assert_eq!(task[poll], json!(1000), "{task}");
    let id = id_of(task);
    assert_v4(&id);
    id
}

/// A fake whose chats never finish until the client hangs up.
fn hanging() -> FakeConfig {
    FakeConfig::default().with_default_reply(Reply::Hang)
}

/// `agent_run` from a request declaring the extension; returns the CreateTaskResult.
async fn create_modern(c: &HttpClient, request: &str) -> Value {
    let r = c
        .modern_with_caps(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": request}}),
            declared(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["result"]["resultType"], "task", "{}", r.text);
    r.body["result"].clone()
}

/// `tools/call agent_run` with `params.task` in the 2025-11-25 era; returns the `task`.
async fn create_legacy(c: &HttpClient, request: &str) -> Value {
    let r = c
        .legacy(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": request}, "task": {"ttl": 60000}}),
            LEGACY,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["result"]["task"].is_object(), "{}", r.text);
    r.body["result"]["task"].clone()
}

async fn get_modern(c: &HttpClient, id: &str) -> Value {
    let r = c
        .modern_with_caps("tasks/get", json!({"taskId": id}), declared())
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["result"]["resultType"], "complete", "{}", r.text);
    r.body["result"].clone()
}

async fn get_legacy(c: &HttpClient, id: &str) -> Value {
    let r = on_legacy(c, "tasks/get", id).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["result"].clone()
}

/// The `agent_status` text of a task (a plain, undeclared modern call).
async fn status_text(c: &HttpClient, id: &str) -> String {
    let r = c.tool_call("agent_status", json!({"task_id": id})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    tool_text(&r.body["result"])
}

async fn wait_agent_state(c: &HttpClient, id: &str, state: &str) -> String {
    eventually(STATE_BUDGET, &format!("task {id} {state}"), || async {
        let text = status_text(c, id).await;
        (field(&text, "status") == state).then_some(text)
    })
    .await
}

/// Waits until the fake has `n` chats open.
async fn wait_chats_open(fake: &FakeOllama, n: usize) {
    until_open_chats(fake, n, STATE_BUDGET).await;
}

async fn wait_modern_terminal(c: &HttpClient, id: &str) -> Value {
    eventually(STATE_BUDGET, &format!("task {id} terminal"), || async {
        let task = get_modern(c, id).await;
        (task["status"] != "working").then_some(task)
    })
    .await
}

/// The era a task is created in.
#[derive(Clone, Copy)]
enum Era {
    Modern,
    Legacy,
}

/// A hanging fake, and a task `First.` running (its chat open) with `Second.` queued behind
/// it, both created in `era`: the running task's id and the queued task.
async fn running_and_queued(era: Era) -> (FakeOllama, HttpServer, HttpClient, String, Value) {
    let (fake, server, c) = start(hanging()).await;
    let create = |request: &'static str| {
        let c = c.clone();
        async move {
            match era {
                Era::Modern => create_modern(&c, request).await,
                Era::Legacy => create_legacy(&c, request).await,
            }
        }
    };
    let running = id_of(&create("First.").await);
    wait_agent_state(&c, &running, "running").await;
    wait_chats_open(&fake, 1).await;
    let queued = create("Second.").await;
    assert_queued_at(&queued, 1);
    (fake, server, c, running, queued)
}

/// The task says it waits at position `n` of the queue.
fn assert_queued_at(task: &Value, n: usize) {
    assert_eq!(
        task["statusMessage"],
        format!("タスクは実行待ちです（待ち順: {n}）。"),
        "{task}"
    );
}

/// The `taskId` of a task.
fn id_of(task: &Value) -> String {
    task["taskId"].as_str().expect("taskId").to_owned()
}

/// `tasks/cancel` of task `id`, declaring the extension.
async fn cancel_modern(c: &HttpClient, id: &str) -> support::harness::Reply {
    c.modern_with_caps("tasks/cancel", json!({"taskId": id}), declared())
        .await
}

/// A 2025-11-25 `method` on task `id`.
async fn on_legacy(c: &HttpClient, method: &str, id: &str) -> support::harness::Reply {
    c.legacy(method, json!({"taskId": id}), LEGACY).await
}

/// Waits up to `budget` until the fake has `n` chats open.
async fn until_open_chats(fake: &FakeOllama, n: usize, budget: Duration) {
    eventually(budget, &format!("{n} open chats"), || async {
        (fake.in_flight_chats() == n).then_some(())
    })
    .await;
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

fn text_of(result: &Value) -> String {
    tool_text(result)
}

fn assert_v4(id: &str) {
    let uuid = Uuid::parse_str(id).unwrap_or_else(|e| panic!("{id} is not a UUID: {e}"));
    assert_eq!(uuid.get_version_num(), 4, "{id}");
    assert_eq!(uuid.hyphenated().to_string(), id);
}

// ---------------------------------------------------------------------------------------------
// 2026-07-28

#[tokio::test]
async fn discover_advertises_the_extension() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let r = c.modern("server/discover", json!({})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["resultType"], "complete");
        assert_eq!(
            r.body["result"]["capabilities"]["extensions"],
            json!({EXT: {}})
        );
        assert_eq!(r.body["result"]["capabilities"]["tools"], json!({}));
        assert!(r.body["result"]["capabilities"].get("tasks").is_none());
    })
    .await;
}

#[tokio::test]
async fn declared_agent_run_is_a_task_that_get_resolves_at_once_and_completes() {
    within(async {
        let (fake, _s, c) = start(answering_after_300ms("All tests pass.", 40, 8)).await;
        let created = create_modern(&c, "Run the tests.").await;
        let id = assert_fresh_task(&created, &CREATED_TASK_FIELDS, "ttlMs", "pollIntervalMs");
        assert!(created["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
        for ts in ["createdAt", "lastUpdatedAt"] {
            let text = created[ts].as_str().expect("timestamp");
            assert!(humantime::parse_rfc3339(text).is_ok(), "{ts}: {text}");
        }

        // Strongly consistent: tasks/get resolves right away.
        let now = get_modern(&c, &id).await;
        assert_eq!(now["taskId"], id);
        assert!(
            now.get("result").is_none() || now["status"] == "completed",
            "{now}"
        );

        let done = wait_modern_terminal(&c, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["statusMessage"], "タスクが完了しました。");
        assert_eq!(done["result"]["isError"], json!(false));
        assert!(done["result"].get("_meta").is_none(), "{done}");
        // The inlined result is a 2026-07-28 CallToolResult, which the official Tasks client
        // validates as one: resultType is required there.
        assert_eq!(done["result"]["resultType"], "complete", "{done}");
        // The final text is exactly the agent_status text.
        let status = status_text(&c, &id).await;
        assert_eq!(text_of(&done["result"]), status);
        assert_eq!(field(&status, "status"), "completed");
        assert_eq!(field(&status, "result"), "All tests pass.");
        assert_eq!(fake.chat_count(), 1);
    })
    .await;
}

#[tokio::test]
async fn undeclared_agent_run_answers_with_the_seed_text() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let r = c
            .modern(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "Hi"}, "task": {"ttl": 1000}}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["resultType"], "complete");
        assert_eq!(r.body["result"]["isError"], json!(false));
        let text = tool_text(&r.body["result"]);
        let id = field(&text, "task_id");
        assert_eq!(field(&text, "status"), "queued");
        assert_eq!(
            field(&text, "message"),
            format!(
                "タスク {id} をセッション {} に登録しました。",
                field(&text, "session_id")
            )
        );
        // Declared on a later request, the same task is readable through tasks/get.
        let task = get_modern(&c, &id).await;
        assert_eq!(task["taskId"], id);
    })
    .await;
}

#[tokio::test]
async fn invalid_arguments_stay_tool_errors_never_tasks() {
    within(async {
        let (fake, _s, c) = start(FakeConfig::default()).await;
        for arguments in [
            json!({"request": "   "}),
            json!({"request": "x", "temperature": 9}),
            json!({"request": "x", "extra": 1}),
            json!({}),
        ] {
            let r = c
                .modern_with_caps(
                    "tools/call",
                    json!({"name": "agent_run", "arguments": arguments}),
                    declared(),
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert_eq!(r.body["result"]["resultType"], "complete", "{}", r.text);
            assert_eq!(r.body["result"]["isError"], json!(true), "{}", r.text);
            assert!(r.body["result"].get("taskId").is_none(), "{}", r.text);
        }
        assert_eq!(fake.chat_count(), 0);
    })
    .await;
}

#[tokio::test]
async fn a_failed_agent_task_is_a_completed_tool_error() {
    within(async {
        let (_f, _s, c) = start(
            FakeConfig::default().with_default_reply(Reply::http_error(500, "model exploded")),
        )
        .await;
        let id = id_of(&create_modern(&c, "Break.").await);
        let done = wait_modern_terminal(&c, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["result"]["isError"], json!(true), "{done}");
        let status = status_text(&c, &id).await;
        assert_eq!(field(&status, "status"), "failed");
        assert_eq!(text_of(&done["result"]), status);
        assert!(
            done["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("タスクが失敗しました。")),
            "{done}"
        );
        // The 2025-11-25 view of the same task says failed.
        let legacy = get_legacy(&c, &id).await;
        assert_eq!(legacy["status"], "failed");
    })
    .await;
}

#[tokio::test]
async fn tasks_methods_need_the_declaration_first() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let unknown = json!({"taskId": Uuid::new_v4().to_string()});
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let r = c.modern(method, unknown.clone()).await;
            assert_eq!(r.status, 400, "{method}: {}", r.text);
            assert_eq!(r.body["error"]["code"], -32021, "{method}");
            assert_eq!(
                r.body["error"]["data"],
                json!({"requiredCapabilities": {"extensions": {EXT: {}}}})
            );
            // Declared: an unknown or malformed id is invalid params.
            let r = c
                .modern_with_caps(method, unknown.clone(), declared())
                .await;
            assert_eq!(r.status, 400, "{method}: {}", r.text);
            assert_eq!(r.body["error"]["code"], -32602, "{method}");
            let r = c
                .modern_with_caps(method, json!({"taskId": "not-a-task"}), declared())
                .await;
            assert_eq!(
                (r.status.as_u16(), r.body["error"]["code"].clone()),
                (400, json!(-32602)),
                "{method}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn tasks_result_and_list_are_gone_in_2026() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let id = create_modern(&c, "x").await["taskId"].clone();
        for method in ["tasks/result", "tasks/list"] {
            let r = c
                .modern_with_caps(method, json!({"taskId": id}), declared())
                .await;
            assert_eq!(r.status, 404, "{method}: {}", r.text);
            assert_eq!(r.body["error"]["code"], -32601, "{method}");
        }
    })
    .await;
}

#[tokio::test]
async fn update_and_cancel_are_empty_acks_even_when_terminal() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let id = id_of(&create_modern(&c, "Quick.").await);
        let update = c
            .modern_with_caps(
                "tasks/update",
                json!({"taskId": id, "inputResponses": {"nope": {"action": "accept"}}}),
                declared(),
            )
            .await;
        assert_eq!(update.status, 200, "{}", update.text);
        assert_eq!(keys(&update.body["result"]), ["_meta", "resultType"]);
        assert_eq!(update.body["result"]["resultType"], "complete");

        let done = wait_modern_terminal(&c, &id).await;
        assert_eq!(done["status"], "completed");
        let cancel = cancel_modern(&c, &id).await;
        assert_eq!(cancel.status, 200, "{}", cancel.text);
        assert_eq!(keys(&cancel.body["result"]), ["_meta", "resultType"]);
        assert_eq!(cancel.body["result"]["resultType"], "complete");
        // Still completed: a terminal state never changes.
        assert_eq!(get_modern(&c, &id).await["status"], "completed");
    })
    .await;
}

#[tokio::test]
async fn mcp_name_must_equal_the_task_id() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let id = id_of(&create_modern(&c, "x").await);
        let mut params = json!({"taskId": id});
        params["_meta"] = modern_meta(declared());
        let body =
            json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": params}).to_string();
        let base = [
            ("mcp-protocol-version", MODERN),
            ("accept", "application/json, text/event-stream"),
            ("mcp-method", "tasks/get"),
        ];
        let r = c.post_raw(&base, body.clone()).await;
        assert_eq!(
            (r.status.as_u16(), r.body["error"]["code"].clone()),
            (400, json!(-32020))
        );
        let other = Uuid::new_v4().to_string();
        let mut wrong = base.to_vec();
        wrong.push(("mcp-name", &other));
        let r = c.post_raw(&wrong, body.clone()).await;
        assert_eq!(
            (r.status.as_u16(), r.body["error"]["code"].clone()),
            (400, json!(-32020))
        );
        let mut right = base.to_vec();
        right.push(("mcp-name", &id));
        let r = c.post_raw(&right, body).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["taskId"], id);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Cancellation

#[tokio::test]
async fn cancelling_a_queued_task_removes_it_at_once() {
    within(async {
        let (fake, _s, c, running, queued) = running_and_queued(Era::Modern).await;
        assert_eq!(queued["status"], "working");
        let queued = id_of(&queued);
        let third = create_modern(&c, "Third.").await;
        assert_queued_at(&third, 2);
        let third = id_of(&third);

        let r = cancel_modern(&c, &queued).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["resultType"], "complete");
        // At once: the very next read says cancelled, before it ever started.
        let task = get_modern(&c, &queued).await;
        assert_eq!(task["status"], "cancelled", "{task}");
        assert!(task.get("result").is_none(), "{task}");
        assert_eq!(
            task["statusMessage"],
            "タスクは取り消されました。 実行開始前に取り消されました。"
        );
        let status = status_text(&c, &queued).await;
        assert_eq!(field(&status, "status"), "cancelled");
        assert_eq!(field(&status, "result"), "実行開始前に取り消されました。");
        // The task behind it moved up; the running one is untouched.
        assert_queued_at(&get_modern(&c, &third).await, 1);
        assert_eq!(fake.chat_count(), 1);
        assert_eq!(field(&status_text(&c, &running).await, "status"), "running");

        // Clean up: cancel the running one; the next queued task starts.
        cancel_modern(&c, &running).await;
        wait_agent_state(&c, &running, "cancelled").await;
        wait_agent_state(&c, &third, "running").await;
        eventually(STATE_BUDGET, "the third task's chat", || async {
            (fake.in_flight_chats() == 1 && fake.chat_count() == 2).then_some(())
        })
        .await;
        cancel_modern(&c, &third).await;
        wait_agent_state(&c, &third, "cancelled").await;
        assert_eq!(fake.chat_count(), 2, "the cancelled queued task never ran");
    })
    .await;
}

/// A slow stream: a long reply, one chunk every 200 ms.
fn slow_stream() -> FakeConfig {
    let words = vec!["word "; 200].concat();
    FakeConfig::default()
        .with_chunk_delay(Duration::from_millis(200))
        .with_default_reply(Reply::text(&words, 10, 200))
}

#[tokio::test]
async fn cancelling_a_running_task_closes_the_ollama_connection_within_a_second() {
    within(async {
        let (fake, _s, c) = start(slow_stream()).await;
        let id = id_of(&create_modern(&c, "Write a long essay.").await);
        wait_agent_state(&c, &id, "running").await;
        // The chat is streaming.
        wait_chats_open(&fake, 1).await;
        let r = cancel_modern(&c, &id).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["resultType"], "complete");
        // The fake sees the disconnect.
        until_open_chats(&fake, 0, Duration::from_secs(1)).await;
        let task = eventually(Duration::from_secs(1), "cancelled", || async {
            let task = get_modern(&c, &id).await;
            (task["status"] == "cancelled").then_some(task)
        })
        .await;
        assert!(task.get("result").is_none(), "{task}");
        assert_eq!(field(&status_text(&c, &id).await, "status"), "cancelled");
    })
    .await;
}

#[tokio::test]
async fn after_a_running_task_is_cancelled_the_next_queued_task_starts() {
    within(async {
        let (fake, _s, c) = start(slow_stream()).await;
        let first = id_of(&create_modern(&c, "One.").await);
        wait_agent_state(&c, &first, "running").await;
        let second = id_of(&create_modern(&c, "Two.").await);
        // The first chat is streaming.
        wait_chats_open(&fake, 1).await;
        assert_eq!(field(&status_text(&c, &second).await, "status"), "queued");

        cancel_modern(&c, &first).await;
        // The first chat is gone within a second even though the second may have started:
        // every chat still open belongs to a task after the first.
        eventually(
            Duration::from_secs(1),
            "the first chat to be disconnected",
            || async { (fake.in_flight_chats() + 1 == fake.chat_count()).then_some(()) },
        )
        .await;
        wait_agent_state(&c, &first, "cancelled").await;
        wait_agent_state(&c, &second, "running").await;
        eventually(STATE_BUDGET, "the second chat", || async {
            (fake.chat_count() == 2 && fake.in_flight_chats() == 1).then_some(())
        })
        .await;
        cancel_modern(&c, &second).await;
        wait_agent_state(&c, &second, "cancelled").await;
        // All chats closed.
        until_open_chats(&fake, 0, Duration::from_secs(1)).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 2025-11-25

#[tokio::test]
async fn legacy_initialize_advertises_tasks_without_list() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let r = c.initialize("2025-11-25").await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["protocolVersion"], "2025-11-25");
        let capabilities = &r.body["result"]["capabilities"];
        assert_eq!(
            capabilities["tasks"],
            json!({"cancel": {}, "requests": {"tools": {"call": {}}}})
        );
        assert_eq!(capabilities["tools"], json!({}));
        assert!(capabilities.get("extensions").is_none(), "{capabilities}");
        assert!(r.body["result"].get("resultType").is_none());
        // An older revision never heard of tasks.
        let r = c.initialize("2025-06-18").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["result"]["protocolVersion"], "2025-06-18");
        assert!(
            r.body["result"]["capabilities"].get("tasks").is_none(),
            "{}",
            r.text
        );
    })
    .await;
}

#[tokio::test]
async fn only_the_legacy_tools_list_carries_task_support() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let r = c.legacy("tools/list", json!({}), LEGACY).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let tools = r.body["result"]["tools"].as_array().expect("tools");
        assert_eq!(tools[0]["name"], "agent_run");
        assert_eq!(tools[0]["execution"], json!({"taskSupport": "optional"}));
        assert_eq!(tools[1]["name"], "agent_status");
        assert!(tools[1].get("execution").is_none());

        let r = c
            .modern_with_caps("tools/list", json!({}), declared())
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        for tool in r.body["result"]["tools"].as_array().expect("tools") {
            assert!(tool.get("execution").is_none(), "{tool}");
        }
    })
    .await;
}

#[tokio::test]
async fn legacy_task_flow_get_then_blocking_result() {
    within(async {
        let (_f, _s, c) = start(answering_after_300ms("Renamed.", 12, 3)).await;
        let r = c
            .legacy(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "Rename it."}, "task": {"ttl": 60000}}),
                LEGACY,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(keys(&r.body["result"]), ["task"]);
        let fields = [
            "createdAt",
            "lastUpdatedAt",
            "pollInterval",
            "status",
            "statusMessage",
            "taskId",
            "ttl",
        ];
        let id = assert_fresh_task(&r.body["result"]["task"], &fields, "ttl", "pollInterval");

        let got = get_legacy(&c, &id).await;
        assert_eq!(got["taskId"], id);
        assert!(got.get("resultType").is_none() && got.get("result").is_none(), "{got}");

        // tasks/result blocks until the task is done.
        let r = on_legacy(&c, "tasks/result", &id).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let result = &r.body["result"];
        assert_eq!(keys(result), ["_meta", "content", "isError"]);
        assert_eq!(result["isError"], json!(false));
        assert_eq!(
            result["_meta"],
            json!({"io.modelcontextprotocol/related-task": {"taskId": id}})
        );
        let status = status_text(&c, &id).await;
        assert_eq!(text_of(result), status);
        assert_eq!(field(&status, "result"), "Renamed.");
        assert_eq!(get_legacy(&c, &id).await["status"], "completed");
    })
    .await;
}

#[tokio::test]
async fn legacy_failed_task_is_failed_and_its_result_is_an_error() {
    within(async {
        let (_f, _s, c) =
            start(FakeConfig::default().with_default_reply(Reply::http_error(500, "boom"))).await;
        let id = id_of(&create_legacy(&c, "Break.").await);
        let r = on_legacy(&c, "tasks/result", &id).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["isError"], json!(true));
        assert_eq!(field(&text_of(&r.body["result"]), "status"), "failed");
        let task = get_legacy(&c, &id).await;
        assert_eq!(task["status"], "failed");
    })
    .await;
}

#[tokio::test]
async fn legacy_cancel_returns_the_cancelled_task_and_refuses_a_terminal_one() {
    within(async {
        let (fake, _s, c, running, queued) = running_and_queued(Era::Legacy).await;
        let queued = id_of(&queued);

        let r = on_legacy(&c, "tasks/cancel", &queued).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["taskId"], queued);
        assert_eq!(r.body["result"]["status"], "cancelled");
        assert!(r.body["result"].get("resultType").is_none());

        // A running task: the answer already says cancelled, and the chat is gone.
        let r = on_legacy(&c, "tasks/cancel", &running).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["result"]["status"], "cancelled", "{}", r.text);
        // Disconnected.
        until_open_chats(&fake, 0, Duration::from_secs(1)).await;

        // Terminal: -32602 (a legacy error rides on HTTP 200).
        let r = on_legacy(&c, "tasks/cancel", &queued).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["error"]["code"], -32602);
        // tasks/result of a cancelled task answers at once, as a tool error.
        let r = on_legacy(&c, "tasks/result", &running).await;
        assert_eq!(r.body["result"]["isError"], json!(true), "{}", r.text);
        assert_eq!(field(&text_of(&r.body["result"]), "status"), "cancelled");
    })
    .await;
}

#[tokio::test]
async fn legacy_errors_unknown_ids_list_and_forbidden_tools() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let unknown = json!({"taskId": Uuid::new_v4().to_string()});
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let r = c.legacy(method, unknown.clone(), LEGACY).await;
            assert_eq!(r.status, 200, "{method}: {}", r.text);
            assert_eq!(r.body["error"]["code"], -32602, "{method}");
        }
        let r = c.legacy("tasks/list", json!({}), LEGACY).await;
        assert_eq!((r.status.as_u16(), r.body["error"]["code"].clone()), (200, json!(-32601)));
        let r = c
            .legacy(
                "tools/call",
                json!({"name": "agent_status", "arguments": {"task_id": Uuid::new_v4().to_string()}, "task": {}}),
                LEGACY,
            )
            .await;
        assert_eq!(r.body["error"]["code"], -32601, "{}", r.text);
        // Without params.task agent_run answers with its text, as before.
        let r = c
            .legacy(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "x"}}),
                LEGACY,
            )
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(field(&tool_text(&r.body["result"]), "status"), "queued");
        // Invalid arguments with params.task stay tool errors.
        let r = c
            .legacy(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": ""}, "task": {}}),
                LEGACY,
            )
            .await;
        assert_eq!(r.body["result"]["isError"], json!(true), "{}", r.text);
        assert!(r.body["result"].get("task").is_none());
    })
    .await;
}

#[tokio::test]
async fn a_task_created_in_one_era_is_read_in_the_other() {
    within(async {
        let (_f, _s, c) = start(FakeConfig::default()).await;
        let modern = id_of(&create_modern(&c, "Modern.").await);
        let legacy = id_of(&create_legacy(&c, "Legacy.").await);
        let r = on_legacy(&c, "tasks/result", &modern).await;
        assert_eq!(r.body["result"]["isError"], json!(false), "{}", r.text);
        assert_eq!(text_of(&r.body["result"]), status_text(&c, &modern).await);
        let done = wait_modern_terminal(&c, &legacy).await;
        assert_eq!(done["status"], "completed");
        assert_eq!(text_of(&done["result"]), status_text(&c, &legacy).await);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// stdio

#[tokio::test]
async fn stdio_cancelled_tasks_result_gets_no_response() {
    within(async {
        let fake = FakeOllama::start_with(hanging()).await;
        let mut server = StdioServer::spawn(&test_config(&fake.url())).await;
        let init = server
            .initialize_2025(initialize_params("2025-11-25"))
            .await;
        assert_eq!(
            init["result"]["capabilities"]["tasks"],
            json!({"cancel": {}, "requests": {"tools": {"call": {}}}})
        );
        let created = server
            .request(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "Hang."}, "task": {}}),
            )
            .await;
        let id = created["result"]["task"]["taskId"]
            .as_str()
            .expect("taskId")
            .to_owned();

        // A waiting tasks/result, then its cancellation: nothing is ever sent for it.
        let waiting = json!({"jsonrpc": "2.0", "id": "wait-1", "method": "tasks/result", "params": {"taskId": id}});
        server.send_line(&waiting.to_string()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        server
            .send_line(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "wait-1"}})
                    .to_string(),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The next message on stdout answers the next request (request() checks the id).
        let ping = server.request("ping", json!({})).await;
        assert_eq!(ping["result"], json!({}));

        // The task itself was not cancelled by that; tasks/cancel does it.
        let got = server.request("tasks/get", json!({"taskId": id})).await;
        assert_eq!(got["result"]["status"], "working");
        let cancelled = server.request("tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
        let ping = server.request("ping", json!({})).await;
        assert_eq!(ping["result"], json!({}));
        let status = server.close().await;
        assert!(status.success(), "exit status {status}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Identity (set in-process: the auth layer that sets it is not in this stack yet)

fn in_process(identity: &str, version: ProtocolVersion, method: &str, params: Value) -> McpRequest {
    let Value::Object(mut params) = params else {
        panic!("params must be an object");
    };
    let mut ctx = RequestContext::new(version, Transport::InProcess);
    ctx.identity = Some(identity.to_owned());
    if version == ProtocolVersion::V2026_07_28 {
        ctx.client_capabilities = declared();
        params.insert("_meta".into(), modern_meta(declared()));
    }
    McpRequest::new(Some(RequestId::Number(1)), method, params, ctx)
}

async fn oneshot(server: &AgentMcp, req: McpRequest) -> Value {
    let Ok(response): Result<McpResponse, _> = server.stack().oneshot(req).await;
    response.to_json().expect("a response")
}

#[tokio::test]
async fn another_identity_can_neither_read_nor_cancel() {
    within(async {
        let fake = FakeOllama::start_with(hanging()).await;
        let server = AgentMcp::start(&test_config(&fake.url()))
            .await
            .expect("start");
        let modern = ProtocolVersion::V2026_07_28;
        let legacy = ProtocolVersion::V2025_11_25;
        let created = oneshot(
            &server,
            in_process(
                "alice",
                modern,
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "Mine."}}),
            ),
        )
        .await;
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        let id = created["result"]["taskId"]
            .as_str()
            .expect("taskId")
            .to_owned();
        let task = json!({"taskId": id});

        for (version, method) in [
            (modern, "tasks/get"),
            (modern, "tasks/cancel"),
            (modern, "tasks/update"),
            (legacy, "tasks/get"),
            (legacy, "tasks/cancel"),
            (legacy, "tasks/result"),
        ] {
            let v = oneshot(&server, in_process("bob", version, method, task.clone())).await;
            assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Task not found")),
                "{v}"
            );
        }
        let status = oneshot(
            &server,
            in_process(
                "bob",
                modern,
                "tools/call",
                json!({"name": "agent_status", "arguments": {"task_id": id}}),
            ),
        )
        .await;
        assert_eq!(
            field(&tool_text(&status["result"]), "message"),
            format!("タスク {id} が見つかりません。")
        );
        // Alice still sees it working: Bob's cancel did nothing.
        let own = oneshot(
            &server,
            in_process("alice", modern, "tasks/get", task.clone()),
        )
        .await;
        assert_eq!(own["result"]["status"], "working", "{own}");
        let own = oneshot(
            &server,
            in_process("alice", modern, "tasks/cancel", task.clone()),
        )
        .await;
        assert_eq!(
            own["result"],
            json!({"resultType": "complete", "_meta": own["result"]["_meta"]})
        );
        let own = eventually(STATE_BUDGET, "alice's cancel", || async {
            let v = oneshot(
                &server,
                in_process("alice", modern, "tasks/get", task.clone()),
            )
            .await;
            (v["result"]["status"] == "cancelled").then_some(v)
        })
        .await;
        assert_eq!(own["result"]["taskId"], id);
        server.shutdown().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// rmcp as an independent client (2026-07-28 with the tasks extension declared)

async fn rmcp_client(url: &str) -> RunningService<RoleClient, ClientConfig> {
    let mut config = ClientConfig::default().with_protocol_version(RmcpVersion::V_2026_07_28);
    config.capabilities =
        serde_json::from_value::<ClientCapabilities>(declared()).expect("capabilities");
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    let client = config
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![RmcpVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap_or_else(|e| panic!("rmcp discover failed: {e:?}"));
    let info = client.peer_info().expect("peer info");
    assert!(info.capabilities.supports_tasks(), "{info:?}");
    client
}

async fn rmcp_run(client: &RunningService<RoleClient, ClientConfig>, request: &str) -> String {
    let Value::Object(arguments) = json!({"request": request}) else {
        unreachable!("an object literal");
    };
    let response = client
        .call_tool_once(CallToolRequestParams::new("agent_run").with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("rmcp tools/call failed: {e:?}"));
    let CallToolResponse::Task(created) = response else {
        panic!("expected a task, got {response:?}");
    };
    assert_eq!(created.task.status, TaskStatus::Working);
    assert_eq!(created.task.ttl_ms, Some(604_800_000));
    created.task.task_id
}

async fn rmcp_get(client: &RunningService<RoleClient, ClientConfig>, id: &str) -> GetTaskResult {
    client
        .get_task(GetTaskParams::new(id))
        .await
        .unwrap_or_else(|e| panic!("rmcp tasks/get failed: {e:?}"))
}

async fn rmcp_wait(
    client: &RunningService<RoleClient, ClientConfig>,
    id: &str,
    status: TaskStatus,
) -> GetTaskResult {
    eventually(STATE_BUDGET, &format!("{id} {status:?}"), || async {
        let got = rmcp_get(client, id).await;
        (got.task.status() == status).then_some(got)
    })
    .await
}

#[tokio::test]
async fn rmcp_agent_run_task_get_to_completed() {
    within(async {
        let fake = FakeOllama::start().await;
        fake.push_reply(Reply::text("Three fixes and one feature.", 1536, 284));
        let server = HttpServer::start(test_config(&fake.url())).await;
        let client = rmcp_client(&server.url).await;
        let id = rmcp_run(&client, "Summarise the release notes.").await;
        assert_v4(&id);
        let done = rmcp_wait(&client, &id, TaskStatus::Completed).await;
        let TaskPayload::Completed { result } = &done.task.payload else {
            panic!("no result: {done:?}");
        };
        let result = Value::Object(result.clone());
        assert_eq!(result["isError"], json!(false));
        let text = tool_text(&result);
        assert_eq!(text, status_text(&server.client(), &id).await);
        assert_eq!(field(&text, "result"), "Three fixes and one feature.");
        assert_eq!(
            field(&text, "token_usage"),
            "input=1536 output=284 total=1820"
        );
        client.cancel().await.expect("rmcp shutdown");
    })
    .await;
}

#[tokio::test]
async fn rmcp_cancels_a_queued_and_a_running_task() {
    within(async {
        let fake = FakeOllama::start_with(hanging()).await;
        let server = HttpServer::start(test_config(&fake.url())).await;
        let client = rmcp_client(&server.url).await;
        let running = rmcp_run(&client, "First.").await;
        wait_agent_state(&server.client(), &running, "running").await;
        wait_chats_open(&fake, 1).await;
        let queued = rmcp_run(&client, "Second.").await;

        client
            .cancel_task(CancelTaskParams::new(queued.clone()))
            .await
            .unwrap_or_else(|e| panic!("rmcp tasks/cancel failed: {e:?}"));
        let got = rmcp_get(&client, &queued).await;
        assert_eq!(got.task.status(), TaskStatus::Cancelled, "{got:?}");

        client
            .cancel_task(CancelTaskParams::new(running.clone()))
            .await
            .unwrap_or_else(|e| panic!("rmcp tasks/cancel failed: {e:?}"));
        rmcp_wait(&client, &running, TaskStatus::Cancelled).await;
        // Disconnected.
        until_open_chats(&fake, 0, Duration::from_secs(1)).await;
        // Idempotent on a terminal task.
        client
            .cancel_task(CancelTaskParams::new(running.clone()))
            .await
            .unwrap_or_else(|e| panic!("rmcp tasks/cancel (terminal) failed: {e:?}"));
        assert_eq!(fake.chat_count(), 1, "the queued task never ran");
        client.cancel().await.expect("rmcp shutdown");
    })
    .await;
}
