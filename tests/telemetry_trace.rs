//! One task's trace end to end, from the real `agent-mcp serve` binary to a real OTLP/HTTP
//! receiver on loopback (protobuf decoded with the official definitions): the caller's
//! `traceparent` in `params._meta` parents the MCP server span of `agent_run`; the task,
//! continued from the trace context stored with it, runs as an `invoke_agent` span below it,
//! with one `chat` span per model call carrying the fake Ollama's token counts and one
//! `execute_tool` span per tool call; no request text or tool output is in any attribute. An
//! HTTP `traceparent` header parents a request whose `_meta` has none. With SQLite the
//! context survives the store (a task queued before a restart continues its trace after it).

mod support;

use std::time::Duration;

use agent_mcp::config::Config;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use serde_json::{Value, json};
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{
    HttpClient, MODERN, ServeProcess, field, modern_meta, test_config, tool_text, wait_terminal,
};
use support::otlp_receiver::{Attr, OtlpReceiver, ReceivedSpan};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const HEADER_TRACE: &str = "11111111111111111111111111111111";
const HEADER_SPAN: &str = "2222222222222222";
const REQUEST_TEXT: &str = "List the folder and tell me about zebra-request-marker";
const FILE_NAME: &str = "tool-output-marker.txt";

/// A modern `tools/call` with `extra_meta` merged into `_meta` and `headers` added.
async fn call(
    client: &HttpClient,
    id: i64,
    tool: &str,
    arguments: Value,
    extra_meta: Value,
    headers: &[(&str, &str)],
) -> Value {
    let mut meta = modern_meta(json!({}));
    if let (Some(meta), Some(extra)) = (meta.as_object_mut(), extra_meta.as_object()) {
        meta.extend(extra.clone());
    }
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    });
    let mut all = vec![
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
        ("accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    let reply = client.post_raw(&all, body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["result"].clone()
}

fn caller_traceparent() -> String {
    format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")
}

/// A server exporting to `receiver`, on a workspace holding `FILE_NAME`, whose model first lists
/// the folder (31 in, 7 out) and then answers (43 in, 11 out); `tweak` adjusts the config.
async fn serve_list_dir(
    receiver: &OtlpReceiver,
    fake: &FakeOllama,
    ws: &tempfile::TempDir,
    tweak: impl FnOnce(&mut Config),
) -> ServeProcess {
    fake.push_reply(Reply::tool_call("list_dir", json!({}), 31, 7));
    fake.push_reply(Reply::text("The folder holds one file.", 43, 11));
    std::fs::write(ws.path().join(FILE_NAME), "contents\n").unwrap();
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.planning = false;
    tweak(&mut config);
    let endpoint = receiver.endpoint();
    ServeProcess::spawn_with_env(&config, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]).await
}

/// Polls `agent_status` until the task ends, and asserts it completed.
async fn wait_completed(client: &HttpClient, task_id: &str) {
    let done = wait_terminal(|| {
        let (client, task_id) = (client.clone(), task_id.to_owned());
        async move { client.agent_status(&task_id).await }
    })
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
}

/// Starts a task the fake never answers (it holds the one active slot) and waits until it runs.
async fn hold_the_queue(client: &HttpClient, fake: &FakeOllama) {
    fake.push_reply(Reply::delayed(
        Duration::from_secs(60),
        Reply::text("never", 1, 1),
    ));
    call(
        client,
        1,
        "agent_run",
        json!({"request": "hold the queue"}),
        json!({}),
        &[],
    )
    .await;
    fake.until_chat_started(Duration::from_secs(20), "the first task never ran")
        .await;
}

/// Queues `REQUEST_TEXT` with the caller's trace context; returns its task id.
async fn queue_caller_task(client: &HttpClient) -> String {
    let accepted = call(
        client,
        2,
        "agent_run",
        json!({"request": REQUEST_TEXT}),
        json!({"traceparent": caller_traceparent()}),
        &[],
    )
    .await;
    field(&tool_text(&accepted), "task_id")
}

/// The first span named `name`, or a panic naming `what`.
fn span_named<'s>(spans: &'s [ReceivedSpan], name: &str, what: &str) -> &'s ReceivedSpan {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {what} span"))
}

/// The `invoke_agent` span of task `task_id`.
fn run_of<'s>(spans: &'s [ReceivedSpan], task_id: &str) -> Option<&'s ReceivedSpan> {
    spans.iter().find(|s| {
        s.name == "invoke_agent agent-mcp" && s.str_attr("gen_ai.agent.id") == Some(task_id)
    })
}

/// `run` is in the caller's trace, a child of `server_span`.
fn assert_continues(run: &ReceivedSpan, server_span: &ReceivedSpan) {
    assert_eq!(run.trace_id, CALLER_TRACE, "{run:?}");
    assert_eq!(
        run.parent_span_id.as_deref(),
        Some(server_span.span_id.as_str())
    );
}

fn all_text(span: &ReceivedSpan) -> String {
    span.attributes
        .values()
        .filter_map(Attr::str)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn one_agent_run_is_one_trace_from_the_caller_to_every_model_and_tool_call() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    let ws = tempfile::tempdir().unwrap();
    let server = serve_list_dir(&receiver, &fake, &ws, |c| c.rate_limit.enabled = false).await;
    let client = server.client();

    let traceparent = caller_traceparent();
    let accepted = call(
        &client,
        1,
        "agent_run",
        json!({"request": REQUEST_TEXT}),
        json!({"traceparent": traceparent, "tracestate": "rojo=00f067aa0ba902b7"}),
        &[],
    )
    .await;
    let task_id = field(&tool_text(&accepted), "task_id");
    // agent_status parented by the HTTP header alone (its `_meta` has no traceparent).
    let header = format!("00-{HEADER_TRACE}-{HEADER_SPAN}-01");
    let done = wait_terminal(|| {
        let (client, task_id, header) = (client.clone(), task_id.clone(), header.clone());
        async move {
            let result = call(
                &client,
                2,
                "agent_status",
                json!({"task_id": task_id}),
                json!({}),
                &[("traceparent", &header)],
            )
            .await;
            tool_text(&result)
        }
    })
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    let model_calls = fake.chat_count();
    assert!(model_calls >= 2, "{model_calls}");
    // SIGTERM flushes the span queue (and the metrics) before the exit.
    assert!(server.terminate().await.success());

    receiver
        .wait_until(Duration::from_secs(10), |r| {
            r.spans().iter().any(|s| s.name == "invoke_agent agent-mcp")
        })
        .await;
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let server_span = span_named(&spans, "tools/call agent_run", "agent_run server");
    assert_eq!(server_span.kind, SpanKind::Server);
    assert_eq!(server_span.trace_id, CALLER_TRACE, "the caller's trace");
    assert_eq!(server_span.parent_span_id.as_deref(), Some(CALLER_SPAN));
    assert_eq!(server_span.str_attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(server_span.str_attr("gen_ai.tool.name"), Some("agent_run"));
    assert_eq!(
        server_span.str_attr("gen_ai.operation.name"),
        Some("execute_tool")
    );
    assert_eq!(server_span.str_attr("jsonrpc.request.id"), Some("1"));
    assert_eq!(server_span.str_attr("mcp.protocol.version"), Some(MODERN));
    assert_eq!(server_span.str_attr("network.transport"), Some("tcp"));
    assert!(server_span.attr("mcp.session.id").is_none());
    assert!(server_span.attr("error.type").is_none(), "{server_span:?}");

    let agent = span_named(&spans, "invoke_agent agent-mcp", "invoke_agent");
    assert_eq!(agent.kind, SpanKind::Internal);
    assert_eq!(agent.trace_id, CALLER_TRACE, "the trace crosses the queue");
    assert_eq!(
        agent.parent_span_id.as_deref(),
        Some(server_span.span_id.as_str())
    );
    assert_eq!(agent.str_attr("gen_ai.agent.id"), Some(task_id.as_str()));
    assert_eq!(agent.str_attr("gen_ai.request.model"), Some("test-model"));

    let chats: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name == "chat test-model")
        .collect();
    assert_eq!(chats.len(), model_calls, "one chat span per model call");
    let mut usage = Vec::new();
    for chat in &chats {
        assert_eq!(chat.kind, SpanKind::Client);
        assert_eq!(chat.trace_id, CALLER_TRACE);
        assert_eq!(chat.parent_span_id.as_deref(), Some(agent.span_id.as_str()));
        assert_eq!(chat.str_attr("gen_ai.provider.name"), Some("ollama"));
        assert_eq!(chat.str_attr("gen_ai.request.model"), Some("test-model"));
        assert_eq!(chat.str_attr("server.address"), Some("127.0.0.1"));
        match (
            chat.attr("gen_ai.usage.input_tokens"),
            chat.attr("gen_ai.usage.output_tokens"),
        ) {
            (Some(Attr::Int(i)), Some(Attr::Int(o))) => usage.push((*i, *o)),
            other => panic!("no usage on {chat:?}: {other:?}"),
        }
    }
    for pushed in [(31, 7), (43, 11)] {
        assert!(usage.contains(&pushed), "{pushed:?} in {usage:?}");
    }
    let total_in: i64 = usage.iter().map(|u| u.0).sum();
    assert_eq!(
        agent.attr("gen_ai.usage.input_tokens"),
        Some(&Attr::Int(total_in))
    );

    let tools: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .collect();
    assert_eq!(tools.len(), 1, "one span per tool call: {names:?}");
    let tool = tools[0];
    assert_eq!(tool.name, "execute_tool list_dir");
    assert_eq!(tool.kind, SpanKind::Internal);
    assert_eq!(tool.trace_id, CALLER_TRACE);
    assert_eq!(tool.parent_span_id.as_deref(), Some(agent.span_id.as_str()));
    assert_eq!(tool.str_attr("gen_ai.tool.name"), Some("list_dir"));
    assert_eq!(tool.status, StatusCode::Unset);

    // agent_status: the header's context is the parent when `_meta` has none.
    let status = span_named(&spans, "tools/call agent_status", "agent_status");
    assert_eq!(status.trace_id, HEADER_TRACE);
    assert_eq!(status.parent_span_id.as_deref(), Some(HEADER_SPAN));

    // No request text, no tool output, in any attribute of any span.
    for span in &spans {
        let text = all_text(span);
        assert!(!text.contains("zebra-request-marker"), "{span:?}");
        assert!(!text.contains(FILE_NAME), "{span:?}");
        assert!(!text.contains("The folder holds"), "{span:?}");
    }

    // The MCP duration metric, flushed at exit.
    let points = receiver.histogram_points("mcp.server.operation.duration");
    assert!(
        points.iter().any(|p| p.unit == "s"
            && p.attributes.get("gen_ai.tool.name") == Some(&Attr::Str("agent_run".into()))
            && p.count >= 1),
        "{points:#?}"
    );
}

#[tokio::test]
async fn a_queued_task_continues_its_trace_from_the_sqlite_store_after_a_restart() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::harness::test_config_sqlite(&fake.url(), &dir.path().join("t.db"));
    config.agent.workspace = Some(dir.path().to_path_buf());
    config.agent.planning = false;
    config.rate_limit.enabled = false;
    let endpoint = receiver.endpoint();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];

    // The first instance runs a task that never gets an answer, queues a second one behind it
    // with the caller's context, and stops: the second stays queued in the file.
    let first = ServeProcess::spawn_with_env(&config, &env).await;
    let client = first.client();
    hold_the_queue(&client, &fake).await;
    let task_id = queue_caller_task(&client).await;
    assert!(first.terminate().await.success());
    let flushed = receiver.spans();
    let server_span = flushed
        .iter()
        .find(|s| s.name == "tools/call agent_run" && s.trace_id == CALLER_TRACE)
        .expect("the second agent_run's server span was flushed at exit")
        .clone();
    assert!(
        run_of(&flushed, &task_id).is_none(),
        "the second task did not run on the first instance"
    );

    // A new process reads the task, and its trace context, from the file.
    fake.clear_replies();
    fake.push_reply(Reply::text("done", 5, 3));
    let second = ServeProcess::spawn_with_env(&config, &env).await;
    wait_completed(&second.client(), &task_id).await;
    assert!(second.terminate().await.success());
    let spans = receiver.spans();
    let run = run_of(&spans, &task_id).expect("the task's invoke_agent span");
    assert_continues(run, &server_span);
    let chat = spans
        .iter()
        .find(|s| s.name == "chat test-model" && s.parent_span_id.as_deref() == Some(&run.span_id))
        .expect("its chat span");
    assert_eq!(chat.attr("gen_ai.usage.output_tokens"), Some(&Attr::Int(3)));
}

#[tokio::test]
async fn stdio_requests_get_server_spans_too() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    // The file's key, not the variable: the same switch.
    config.telemetry.endpoint = Some(receiver.endpoint());
    let mut server = support::harness::StdioServer::spawn(&config).await;
    let mut params = json!({});
    params["_meta"] = modern_meta(json!({}));
    params["_meta"]["traceparent"] = json!(caller_traceparent());
    let listed = server.request("tools/list", params).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let unknown = server
        .modern(
            "tools/call",
            json!({"name": "no_such_tool", "arguments": {}}),
        )
        .await;
    let code = unknown["error"]["code"].as_i64().expect("a JSON-RPC error");
    assert!(server.close().await.success());

    receiver
        .wait_until(Duration::from_secs(10), |r| r.spans().len() >= 3)
        .await;
    let spans = receiver.spans();
    let list = span_named(&spans, "tools/list", "tools/list");
    assert_eq!(list.kind, SpanKind::Server);
    assert_eq!(list.trace_id, CALLER_TRACE);
    assert_eq!(list.parent_span_id.as_deref(), Some(CALLER_SPAN));
    assert_eq!(list.str_attr("network.transport"), Some("pipe"));
    assert_eq!(list.str_attr("mcp.method.name"), Some("tools/list"));
    assert!(list.attr("gen_ai.tool.name").is_none());
    // The unknown tool's span is named without the client's text.
    let failed = span_named(&spans, "tools/call _OTHER", "unknown tool's");
    assert_eq!(
        failed.str_attr("error.type"),
        Some(code.to_string().as_str())
    );
    assert_eq!(failed.status, StatusCode::Error);
    assert!(failed.parent_span_id.is_none(), "no caller context: a root");
    for span in &spans {
        assert!(!all_text(span).contains("no_such_tool"), "{span:?}");
    }
}

/// Needs `AGENT_MCP_TEST_PG_URL` (`bash scripts/postgres.sh cargo test --locked`); skipped
/// without it.
#[tokio::test]
async fn another_instance_on_postgres_continues_the_trace_of_a_task_queued_elsewhere() {
    let Some(url) = support::pg::fresh_database().await else {
        return;
    };
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start_with(
        support::fake_ollama::FakeConfig::default().with_default_reply(Reply::text("done", 5, 3)),
    )
    .await;
    let mut config = support::instances::shared_config(&fake.url(), &url);
    config.agent.planning = false;
    let endpoint = receiver.endpoint();
    let spawn = |instance: &'static str| {
        let (config, endpoint) = (config.clone(), endpoint.clone());
        async move {
            let resource = format!("instance={instance}");
            ServeProcess::spawn_with_env(
                &config,
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
                    ("OTEL_RESOURCE_ATTRIBUTES", &resource),
                ],
            )
            .await
        }
    };

    // Instance a runs a task that never gets an answer (the one active task of the whole
    // application), and queues the caller's task behind it.
    let a = spawn("a").await;
    let client = a.client();
    hold_the_queue(&client, &fake).await;
    let task_id = queue_caller_task(&client).await;

    // Instance b starts, and a stops: b takes the queued task from the database.
    let b = spawn("b").await;
    assert!(a.terminate().await.success());
    wait_completed(&b.client(), &task_id).await;
    assert!(b.terminate().await.success());

    let spans = receiver.spans();
    let instance = |s: &ReceivedSpan| {
        s.resource
            .get("instance")
            .and_then(Attr::str)
            .map(str::to_owned)
    };
    let server_span = spans
        .iter()
        .find(|s| s.name == "tools/call agent_run" && s.trace_id == CALLER_TRACE)
        .expect("the caller's agent_run span");
    assert_eq!(instance(server_span).as_deref(), Some("a"));
    let run = run_of(&spans, &task_id).expect("the task's invoke_agent span");
    assert_eq!(
        instance(run).as_deref(),
        Some("b"),
        "run by the other instance"
    );
    assert_continues(run, server_span);
}

#[tokio::test]
async fn content_is_on_the_spans_only_when_capture_is_asked_for() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    let ws = tempfile::tempdir().unwrap();
    let server = serve_list_dir(&receiver, &fake, &ws, |c| {
        c.telemetry.capture_content = true
    })
    .await;
    let client = server.client();
    let task_id = client.agent_run(REQUEST_TEXT).await;
    wait_completed(&client, &task_id).await;
    assert!(server.terminate().await.success());
    let spans = receiver.spans();
    let chats: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name == "chat test-model")
        .collect();
    assert!(
        chats.iter().any(|c| c
            .str_attr("gen_ai.input.messages")
            .is_some_and(|m| m.contains("zebra-request-marker"))),
        "{chats:#?}"
    );
    assert!(
        chats
            .iter()
            .any(|c| c.str_attr("gen_ai.output.messages") == Some("The folder holds one file.")),
        "{chats:#?}"
    );
    let tool = span_named(&spans, "execute_tool list_dir", "list_dir tool");
    assert!(
        tool.str_attr("gen_ai.tool.call.result")
            .is_some_and(|r| r.contains(FILE_NAME)),
        "{tool:?}"
    );
    // The server span still holds none of it: content is the agent's spans' opt-in only.
    let server_span = span_named(&spans, "tools/call agent_run", "agent_run server");
    assert!(!all_text(server_span).contains("zebra-request-marker"));
}

/// The engine's own tool runs are tool runs in the trace too: the read the `small` policy makes
/// on the model's behalf before its first call, and every run of the checks (before the first
/// change, after the last), each an `execute_tool` span beneath the task's.
#[tokio::test]
async fn the_engines_own_reads_and_check_runs_have_tool_spans() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("NOTE.txt"), "The secret word is: marigold\n").unwrap();
    // The `small` policy's reading of the request (a model call, not a tool run).
    fake.push_reply(Reply::text(
        r#"{"goal": "copy the word", "wants": "file changes", "tests": false, "fix_failing": true}"#,
        10,
        2,
    ));
    fake.push_reply(Reply::tool_call(
        "write_file",
        json!({"path": "word.txt", "content": "marigold\n"}),
        10,
        2,
    ));
    fake.push_reply(Reply::text("word.txt holds marigold.", 10, 4));
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.planning = false;
    config.agent.steering = agent_mcp::config::SteeringMode::Small;
    config.agent.checks = vec![
        ["grep", "-q", "marigold", "word.txt"]
            .map(String::from)
            .to_vec(),
    ];
    let endpoint = receiver.endpoint();
    let server =
        ServeProcess::spawn_with_env(&config, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]).await;
    let client = server.client();
    let accepted = call(
        &client,
        1,
        "agent_run",
        json!({"request": "Copy the secret word of `NOTE.txt` into a new file word.txt."}),
        json!({}),
        &[],
    )
    .await;
    let task_id = field(&tool_text(&accepted), "task_id");
    wait_completed(&client, &task_id).await;
    assert!(server.terminate().await.success());
    receiver
        .wait_until(Duration::from_secs(10), |r| {
            r.spans().iter().any(|s| s.name == "invoke_agent agent-mcp")
        })
        .await;
    let spans = receiver.spans();
    let agent = span_named(&spans, "invoke_agent agent-mcp", "invoke_agent");
    let tools: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .inspect(|s| {
            assert_eq!(
                s.parent_span_id.as_deref(),
                Some(agent.span_id.as_str()),
                "{s:?}"
            );
        })
        .map(|s| s.name.as_str())
        .collect();
    let count = |name: &str| tools.iter().filter(|t| **t == name).count();
    // NOTE.txt, read before the model's first call (and what else the policy reads for it).
    assert!(count("execute_tool read_file") >= 1, "{tools:?}");
    assert_eq!(count("execute_tool write_file"), 1, "{tools:?}");
    // The baseline before the write, and the run after it.
    assert_eq!(count("execute_tool run_command"), 2, "{tools:?}");
}
