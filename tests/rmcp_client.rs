//! The rmcp crate's client drives our server as an independent peer: the 2026-07-28 discover
//! lifecycle and the 2025-11-25 initialize lifecycle, over Streamable HTTP and over stdio (the
//! real binary spawned through rmcp's child-process transport).

mod support;

use std::future::Future;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProtocolVersion, ResultType,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::json;
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{HttpServer, field, is_terminal, result_of, test_config, write_config};

/// Bound for a whole test.
const TEST_BUDGET: Duration = Duration::from_secs(60);
/// Bound for one rmcp call.
const CALL_BUDGET: Duration = Duration::from_secs(20);
/// Bound for polling `agent_status` until the task is terminal.
const TASK_BUDGET: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lifecycle {
    /// 2026-07-28: `server/discover`, then per-request `_meta`.
    Discover,
    /// 2025-11-25: `initialize` / `notifications/initialized`.
    Initialize,
}

impl Lifecycle {
    fn version(self) -> ProtocolVersion {
        match self {
            Lifecycle::Discover => ProtocolVersion::V_2026_07_28,
            Lifecycle::Initialize => ProtocolVersion::V_2025_11_25,
        }
    }

    fn mode(self) -> ClientLifecycleMode {
        match self {
            Lifecycle::Discover => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            Lifecycle::Initialize => ClientLifecycleMode::Initialize,
        }
    }

    /// What `resultType` rmcp sees on our results: modern results carry it, legacy ones must not.
    fn result_type(self) -> Option<ResultType> {
        match self {
            Lifecycle::Discover => Some(ResultType::COMPLETE),
            Lifecycle::Initialize => None,
        }
    }
}

/// Awaits `fut`, failing the test if it takes longer than `budget`.
async fn bounded<F: Future>(budget: Duration, what: &str, fut: F) -> F::Output {
    tokio::time::timeout(budget, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {budget:?}"))
}

/// Starts an rmcp client over `transport` with the given lifecycle.
async fn connect<T, E, A>(
    transport: T,
    lifecycle: Lifecycle,
) -> RunningService<RoleClient, ClientConfig>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let config = ClientConfig::default().with_protocol_version(lifecycle.version());
    let client = bounded(
        CALL_BUDGET,
        "rmcp client startup",
        config.serve_with_lifecycle(transport, lifecycle.mode()),
    )
    .await
    .unwrap_or_else(|e| panic!("rmcp {lifecycle:?} startup failed: {e:?}"));

    let info = client.peer_info().expect("rmcp recorded the server's info");
    assert_eq!(info.protocol_version, lifecycle.version());
    let server = info.server_info.as_ref().expect("serverInfo");
    assert_eq!(server.name, "agent-mcp");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    assert!(
        info.capabilities.tools.is_some(),
        "tools capability: {info:?}"
    );
    client
}

/// The text of the single text block of a successful tool result.
fn only_text(result: &CallToolResult, lifecycle: Lifecycle) -> String {
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(result.result_type, lifecycle.result_type(), "{result:?}");
    assert_eq!(result.content.len(), 1, "{result:?}");
    result.content[0]
        .as_text()
        .unwrap_or_else(|| panic!("not a text block: {result:?}"))
        .text
        .clone()
}

async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    lifecycle: Lifecycle,
    name: &'static str,
    arguments: serde_json::Value,
) -> String {
    let serde_json::Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    let result = bounded(
        CALL_BUDGET,
        name,
        client.call_tool(CallToolRequestParams::new(name).with_arguments(arguments)),
    )
    .await
    .unwrap_or_else(|e| panic!("rmcp tools/call {name} failed: {e:?}"));
    only_text(&result, lifecycle)
}

/// Lists the tools, runs one task and polls it to completion, all through rmcp.
async fn run_flow(
    client: &RunningService<RoleClient, ClientConfig>,
    lifecycle: Lifecycle,
    fake: &FakeOllama,
    request: &str,
    reply: &str,
    (input, output): (u64, u64),
) {
    // tools/list: exactly our two tools, in order; modern results carry the cache hints.
    let list = bounded(CALL_BUDGET, "tools/list", client.list_tools(None))
        .await
        .unwrap_or_else(|e| panic!("rmcp tools/list failed: {e:?}"));
    let names: Vec<&str> = list.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["agent_run", "agent_status"]);
    assert_eq!(list.next_cursor, None);
    assert_eq!(list.result_type, lifecycle.result_type());
    match lifecycle {
        Lifecycle::Discover => {
            assert!(
                list.ttl_ms.is_some(),
                "modern tools/list lacks ttlMs: {list:?}"
            );
            assert!(
                list.cache_scope.is_some(),
                "modern tools/list lacks cacheScope: {list:?}"
            );
        }
        Lifecycle::Initialize => {
            assert_eq!(
                list.ttl_ms, None,
                "legacy tools/list carries ttlMs: {list:?}"
            );
            assert_eq!(
                list.cache_scope, None,
                "legacy tools/list carries cacheScope: {list:?}"
            );
        }
    }
    for tool in &list.tools {
        assert_eq!(
            tool.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            tool.name
        );
    }

    // agent_run queues the task.
    let run = call(client, lifecycle, "agent_run", json!({"request": request})).await;
    let task_id = field(&run, "task_id");
    let session_id = field(&run, "session_id");
    assert_eq!(field(&run, "status"), "queued", "{run}");
    assert_eq!(
        field(&run, "message"),
        format!("タスク {task_id} をセッション {session_id} に登録しました。")
    );

    // agent_status until terminal.
    let done = bounded(TASK_BUDGET, "task completion", async {
        loop {
            let text = call(
                client,
                lifecycle,
                "agent_status",
                json!({"task_id": task_id}),
            )
            .await;
            assert_eq!(field(&text, "task_id"), task_id, "{text}");
            if is_terminal(&field(&text, "status")) {
                break text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(result_of(&done), reply, "{done}");
    assert_eq!(
        field(&done, "token_usage"),
        format!("input={input} output={output} total={}", input + output),
        "{done}"
    );
    assert_eq!(
        done,
        format!(
            "task_id: {task_id}\nsession_id: {session_id}\nstatus: completed\ncompleted_tasks: 1/1\n\
             current_task:\ntoken_usage: input={input} output={output} total={}\n\
             critical_path_tokens: 0\nmessage: タスクが完了しました。\nresult: {reply}",
            input + output
        )
    );

    // Exactly one chat reached the model, carrying the request.
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["model"], "test-model");
    let last = sent[0]["messages"]
        .as_array()
        .expect("messages")
        .last()
        .expect("a message")
        .clone();
    assert_eq!(last, json!({"role": "user", "content": request}));
}

async fn http_flow(lifecycle: Lifecycle, request: &str, reply: &str, tokens: (u64, u64)) {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text(reply, tokens.0, tokens.1));
    let server = HttpServer::start(test_config(&fake.url())).await;

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.url.clone()),
    );
    let client = connect(transport, lifecycle).await;
    run_flow(&client, lifecycle, &fake, request, reply, tokens).await;
    bounded(CALL_BUDGET, "rmcp client shutdown", client.cancel())
        .await
        .expect("rmcp client task");
}

async fn stdio_flow(lifecycle: Lifecycle, request: &str, reply: &str, tokens: (u64, u64)) {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text(reply, tokens.0, tokens.1));
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(&dir, &test_config(&fake.url()));

    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-mcp"));
    command
        .arg("stdio")
        .arg("--config")
        .arg(&config)
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    let transport = TokioChildProcess::new(command).expect("spawn agent-mcp stdio");

    let client = connect(transport, lifecycle).await;
    run_flow(&client, lifecycle, &fake, request, reply, tokens).await;
    // Closes stdin and waits for the child (rmcp escalates to SIGTERM/SIGKILL after 3 s each).
    bounded(CALL_BUDGET, "rmcp client shutdown", client.cancel())
        .await
        .expect("rmcp client task");
}

#[tokio::test]
async fn rmcp_discover_over_http() {
    bounded(
        TEST_BUDGET,
        "test",
        http_flow(
            Lifecycle::Discover,
            "Summarise the release notes.",
            "Three fixes and one feature.",
            (1536, 284),
        ),
    )
    .await;
}

#[tokio::test]
async fn rmcp_initialize_over_http() {
    bounded(
        TEST_BUDGET,
        "test",
        http_flow(
            Lifecycle::Initialize,
            "Which module holds the configuration?",
            "The config module.",
            (321, 45),
        ),
    )
    .await;
}

#[tokio::test]
async fn rmcp_discover_over_stdio() {
    bounded(
        TEST_BUDGET,
        "test",
        stdio_flow(
            Lifecycle::Discover,
            "List the open issues.",
            "There are no open issues.",
            (7, 5),
        ),
    )
    .await;
}

#[tokio::test]
async fn rmcp_initialize_over_stdio() {
    bounded(
        TEST_BUDGET,
        "test",
        stdio_flow(
            Lifecycle::Initialize,
            "Count the lines in main.rs.",
            "main.rs has 154 lines.",
            (900, 11),
        ),
    )
    .await;
}
