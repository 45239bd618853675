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
    fake.push_reply(Reply::tool_call("list_dir", json!({}), 31, 7));
    fake.push_reply(Reply::text("The folder holds one file.", 43, 11));
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(FILE_NAME), "contents\n").unwrap();
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.planning = false;
    config.rate_limit.enabled = false;
    let endpoint = receiver.endpoint();
    let server =
        ServeProcess::spawn_with_env(&config, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]).await;
    let client = server.client();

    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
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
    let server_span = spans
        .iter()
        .find(|s| s.name == "tools/call agent_run")
        .unwrap_or_else(|| panic!("no server span of agent_run in {names:?}"));
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

    let agent = spans
        .iter()
        .find(|s| s.name == "invoke_agent agent-mcp")
        .expect("invoke_agent");
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
    let status = spans
        .iter()
        .find(|s| s.name == "tools/call agent_status")
        .expect("agent_status span");
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
    fake.push_reply(Reply::delayed(
        Duration::from_secs(60),
        Reply::text("never", 1, 1),
    ));
    let first = ServeProcess::spawn_with_env(&config, &env).await;
    let client = first.client();
    call(
        &client,
        1,
        "agent_run",
        json!({"request": "hold the queue"}),
        json!({}),
        &[],
    )
    .await;
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let accepted = call(
        &client,
        2,
        "agent_run",
        json!({"request": REQUEST_TEXT}),
        json!({"traceparent": traceparent}),
        &[],
    )
    .await;
    let task_id = field(&tool_text(&accepted), "task_id");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while fake.in_flight_chats() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first task never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(first.terminate().await.success());
    let server_span = receiver
        .spans()
        .into_iter()
        .find(|s| s.name == "tools/call agent_run" && s.trace_id == CALLER_TRACE)
        .expect("the second agent_run's server span was flushed at exit");
    assert!(
        !receiver
            .spans()
            .iter()
            .any(|s| s.name == "invoke_agent agent-mcp"
                && s.str_attr("gen_ai.agent.id") == Some(task_id.as_str())),
        "the second task did not run on the first instance"
    );

    // A new process reads the task, and its trace context, from the file.
    fake.clear_replies();
    fake.push_reply(Reply::text("done", 5, 3));
    let second = ServeProcess::spawn_with_env(&config, &env).await;
    let client = second.client();
    let done = wait_terminal(|| {
        let (client, task_id) = (client.clone(), task_id.clone());
        async move { client.agent_status(&task_id).await }
    })
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert!(second.terminate().await.success());
    let run = receiver
        .spans()
        .into_iter()
        .find(|s| {
            s.name == "invoke_agent agent-mcp"
                && s.str_attr("gen_ai.agent.id") == Some(task_id.as_str())
        })
        .expect("the task's invoke_agent span");
    assert_eq!(run.trace_id, CALLER_TRACE, "{run:?}");
    assert_eq!(
        run.parent_span_id.as_deref(),
        Some(server_span.span_id.as_str())
    );
    let chat = receiver
        .spans()
        .into_iter()
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
    params["_meta"]["traceparent"] = json!(format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"));
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
    let list = spans
        .iter()
        .find(|s| s.name == "tools/list")
        .expect("tools/list span");
    assert_eq!(list.kind, SpanKind::Server);
    assert_eq!(list.trace_id, CALLER_TRACE);
    assert_eq!(list.parent_span_id.as_deref(), Some(CALLER_SPAN));
    assert_eq!(list.str_attr("network.transport"), Some("pipe"));
    assert_eq!(list.str_attr("mcp.method.name"), Some("tools/list"));
    assert!(list.attr("gen_ai.tool.name").is_none());
    let failed = spans
        .iter()
        .find(|s| s.name == "tools/call _OTHER")
        .expect("the unknown tool's span, named without the client's text");
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

    // Instance a runs a task that never gets an answer (the one active task of the whole
    // application), and queues the caller's task behind it.
    fake.push_reply(Reply::delayed(
        Duration::from_secs(60),
        Reply::text("never", 1, 1),
    ));
    let a = ServeProcess::spawn_with_env(
        &config,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_RESOURCE_ATTRIBUTES", "instance=a"),
        ],
    )
    .await;
    let client = a.client();
    call(
        &client,
        1,
        "agent_run",
        json!({"request": "hold the queue"}),
        json!({}),
        &[],
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while fake.in_flight_chats() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first task never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let accepted = call(
        &client,
        2,
        "agent_run",
        json!({"request": REQUEST_TEXT}),
        json!({"traceparent": traceparent}),
        &[],
    )
    .await;
    let task_id = field(&tool_text(&accepted), "task_id");

    // Instance b starts, and a stops: b takes the queued task from the database.
    let b = ServeProcess::spawn_with_env(
        &config,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_RESOURCE_ATTRIBUTES", "instance=b"),
        ],
    )
    .await;
    assert!(a.terminate().await.success());
    let client = b.client();
    let done = wait_terminal(|| {
        let (client, task_id) = (client.clone(), task_id.clone());
        async move { client.agent_status(&task_id).await }
    })
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
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
    let run = spans
        .iter()
        .find(|s| {
            s.name == "invoke_agent agent-mcp"
                && s.str_attr("gen_ai.agent.id") == Some(task_id.as_str())
        })
        .expect("the task's invoke_agent span");
    assert_eq!(
        instance(run).as_deref(),
        Some("b"),
        "run by the other instance"
    );
    assert_eq!(run.trace_id, CALLER_TRACE);
    assert_eq!(
        run.parent_span_id.as_deref(),
        Some(server_span.span_id.as_str())
    );
}

#[tokio::test]
async fn content_is_on_the_spans_only_when_capture_is_asked_for() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::tool_call("list_dir", json!({}), 31, 7));
    fake.push_reply(Reply::text("The folder holds one file.", 43, 11));
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(FILE_NAME), "contents\n").unwrap();
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.planning = false;
    config.telemetry.capture_content = true;
    let endpoint = receiver.endpoint();
    let server =
        ServeProcess::spawn_with_env(&config, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]).await;
    let client = server.client();
    let task_id = client.agent_run(REQUEST_TEXT).await;
    let done = wait_terminal(|| {
        let (client, task_id) = (client.clone(), task_id.clone());
        async move { client.agent_status(&task_id).await }
    })
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
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
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool list_dir")
        .expect("the tool span");
    assert!(
        tool.str_attr("gen_ai.tool.call.result")
            .is_some_and(|r| r.contains(FILE_NAME)),
        "{tool:?}"
    );
    // The server span still holds none of it: content is the agent's spans' opt-in only.
    let server_span = spans
        .iter()
        .find(|s| s.name == "tools/call agent_run")
        .expect("server span");
    assert!(!all_text(server_span).contains("zebra-request-marker"));
}
