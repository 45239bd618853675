//! Each example's own code, exercised: the axum mount, the bare-hyper server, the stdio
//! adapter and the composed stacks all serve a real MCP exchange.

mod support;

#[allow(dead_code)]
#[path = "../examples/axum_mount.rs"]
mod axum_mount;
#[allow(dead_code)]
#[path = "../examples/compose_stack.rs"]
mod compose_stack;
#[allow(dead_code)]
#[path = "../examples/hyper_server.rs"]
mod hyper_server;
#[allow(dead_code)]
#[path = "../examples/stdio_adapter.rs"]
mod stdio_adapter;

use std::sync::Arc;

use agent_mcp::AgentMcp;
use serde_json::json;
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{HttpClient, field, modern_meta, test_config, tool_text};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test]
async fn axum_app_keeps_its_routes_and_serves_mcp_under_a_prefix() {
    let fake = FakeOllama::start().await;
    let agent = AgentMcp::start(&test_config(&fake.url())).await.unwrap();
    let state = axum_mount::AppState {
        greeting: Arc::from("hi there"),
    };
    let app = axum_mount::app(&agent, state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let hello = reqwest::get(format!("http://{addr}/hello")).await.unwrap();
    assert_eq!(hello.text().await.unwrap(), "hi there");
    let client = HttpClient::new(&format!("http://{addr}/agents/mcp"));
    let list = client.modern("tools/list", json!({})).await;
    assert_eq!(list.status, 200, "{}", list.text);
    assert_eq!(list.body["result"]["tools"].as_array().unwrap().len(), 2);
    let run = client
        .tool_call("agent_run", json!({"request": "hi"}))
        .await;
    assert_eq!(field(&tool_text(&run.body["result"]), "status"), "queued");
}

#[tokio::test]
async fn bare_hyper_server_serves_mcp() {
    let fake = FakeOllama::start().await;
    let agent = AgentMcp::start(&test_config(&fake.url())).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        hyper_server::serve(listener, &agent, async {
            let _ = stopped.await;
        })
        .await
    });
    let client = HttpClient::new(&format!("http://{addr}/mcp"));
    let discover = client.modern("server/discover", json!({})).await;
    assert_eq!(discover.status, 200, "{}", discover.text);
    assert_eq!(discover.body["result"]["resultType"], "complete");
    let legacy = client.legacy("ping", json!({}), Some("2025-11-25")).await;
    assert_eq!(legacy.body["result"], json!({}));
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn stdio_adapter_answers_over_a_pipe_and_returns_on_eof() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text("piped", 1, 1));
    let agent = AgentMcp::start(&test_config(&fake.url())).await.unwrap();
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_end);
    let adapter = tokio::spawn(stdio_adapter::run(agent, server_read, server_write));

    let (client_read, mut client_write) = tokio::io::split(client_end);
    let mut lines = BufReader::new(client_read).lines();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                         "params": {"_meta": modern_meta(json!({}))}});
    client_write
        .write_all(format!("{request}\n").as_bytes())
        .await
        .unwrap();
    let line = lines.next_line().await.unwrap().unwrap();
    let response: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(response["id"], 1);
    assert_eq!(response["result"]["tools"][0]["name"], "agent_run");
    client_write.shutdown().await.unwrap();
    drop(client_write);
    tokio::time::timeout(std::time::Duration::from_secs(10), adapter)
        .await
        .expect("the adapter returns on EOF")
        .unwrap()
        .unwrap();
}

/// A `Write` the test can read back (the audit sink's destination).
#[derive(Clone, Default)]
struct SharedBuf(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A modern `tools/call` of `tool` with the correct MCP headers, plus `authorization` if given.
async fn call_with_token(
    client: &HttpClient,
    tool: &str,
    arguments: serde_json::Value,
    authorization: Option<&str>,
) -> support::harness::Reply {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments,
                                 "_meta": modern_meta(json!({}))}});
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
        ("accept", "application/json, text/event-stream"),
    ];
    if let Some(value) = authorization {
        headers.push(("authorization", value));
    }
    client.post_raw(&headers, body.to_string()).await
}

#[tokio::test]
async fn composed_stacks_put_our_layers_around_your_service_and_yours_around_ours() {
    let fake = FakeOllama::start().await;
    let agent = AgentMcp::start(&test_config(&fake.url())).await.unwrap();
    let audit_out = SharedBuf::default();
    let sink = agent_mcp::layers::audit::AuditSink::to_writer(audit_out.clone(), "test".into());
    let burst = std::num::NonZeroU32::new(2).unwrap();
    let tools = compose_stack::guarded_tools("alice", "s3cret", burst, burst, sink.clone());
    let log = compose_stack::CallLog::default();
    let app = compose_stack::app(tools, &agent, log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(compose_stack::serve(listener, app, async {
        let _ = stopped.await;
    }));

    // (a) Your tool behind our auth: refused without a token or with a wrong one, never
    // reaching your service; answered with the right one.
    let tools = HttpClient::new(&format!("http://{addr}/tools/mcp"));
    let args = json!({"a": 2, "b": 3});
    let anonymous = call_with_token(&tools, "add", args.clone(), None).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    assert_eq!(anonymous.headers["www-authenticate"], "Bearer");
    assert_eq!(anonymous.body["error"]["code"], -32001);
    let wrong = call_with_token(&tools, "add", args.clone(), Some("Bearer nope")).await;
    assert_eq!(wrong.status, 401, "{}", wrong.text);
    let sum = call_with_token(&tools, "add", args.clone(), Some("Bearer s3cret")).await;
    assert_eq!(sum.status, 200, "{}", sum.text);
    assert_eq!(tool_text(&sum.body["result"]), "5");
    assert_eq!(sum.body["result"]["isError"], false);

    // Our rate limit: a burst of two per caller; the refusals above spent none of it (auth
    // stands outside the limit), so the second authorised call passes and the third is 429.
    let second = call_with_token(
        &tools,
        "add",
        json!({"a": 1, "b": 1}),
        Some("Bearer s3cret"),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.text);
    assert_eq!(tool_text(&second.body["result"]), "2");
    let third = call_with_token(&tools, "add", args.clone(), Some("Bearer s3cret")).await;
    assert_eq!(third.status, 429, "{}", third.text);
    assert!(
        third.headers.contains_key("retry-after"),
        "{:?}",
        third.headers
    );
    assert_eq!(third.body["error"]["code"], -32000);

    // Our audit: one line per request, outermost, so it records the refusals too, with the
    // caller identity auth resolved for the accepted ones.
    assert!(
        sink.flush(std::time::Duration::from_secs(5)),
        "audit flushed"
    );
    let audit_text = String::from_utf8(audit_out.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<serde_json::Value> = audit_text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outcomes: Vec<&str> = lines
        .iter()
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["unauthorized", "unauthorized", "ok", "ok", "rate_limited"],
        "{audit_text}"
    );
    assert_eq!(lines[2]["identity"], "alice", "{audit_text}");
    assert_eq!(lines[2]["tool"], "add", "{audit_text}");
    assert_eq!(
        lines[0]["identity"],
        serde_json::Value::Null,
        "{audit_text}"
    );

    // (b) Our AgentService behind your layer: it answers, and your layer saw each call.
    let agent_client = HttpClient::new(&format!("http://{addr}/agent/mcp"));
    let list = agent_client.modern("tools/list", json!({})).await;
    assert_eq!(list.status, 200, "{}", list.text);
    assert_eq!(list.body["result"]["tools"][0]["name"], "agent_run");
    let run = agent_client
        .tool_call("agent_run", json!({"request": "hi"}))
        .await;
    assert_eq!(run.status, 200, "{}", run.text);
    assert!(!field(&tool_text(&run.body["result"]), "task_id").is_empty());
    assert_eq!(
        *log.lock().unwrap(),
        ["tools/list", "tools/call agent_run"],
        "the user's layer saw every call to AgentService, and only those"
    );

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
