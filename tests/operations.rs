//! Operations of the standalone server: health, readiness, metrics and graceful shutdown, on
//! the real binary.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{ServeProcess, field, test_config};

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.expect("GET");
    (r.status().as_u16(), r.text().await.expect("body"))
}

/// The value of a Prometheus series line, e.g. `name{label="x"} 3`.
fn series(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix) && l[prefix.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn health_and_readiness() {
    let fake = FakeOllama::start().await;
    let server = ServeProcess::spawn(&test_config(&fake.url())).await;
    let (status, body) = get(&format!("{}/healthz", server.base)).await;
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
    let (status, body) = get(&format!("{}/readyz", server.base)).await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({"ready": true, "store": {"ok": true}, "ollama": {"ok": true}})
    );
    assert!(server.terminate().await.success());
}

#[tokio::test]
async fn not_ready_when_ollama_is_unreachable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let server = ServeProcess::spawn(&test_config(&url)).await;
    let (status, body) = get(&format!("{}/readyz", server.base)).await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], false);
    assert_eq!(body["store"], json!({"ok": true}));
    assert_eq!(body["ollama"]["ok"], false);
    assert!(
        body["ollama"]["error"].as_str().unwrap().contains(&url),
        "{body}"
    );
    // Health is about the process, not its dependencies.
    assert_eq!(get(&format!("{}/healthz", server.base)).await.0, 200);
}

#[tokio::test]
async fn metrics_after_a_task() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text("counted", 11, 4));
    let config = test_config(&fake.url());
    let server = ServeProcess::spawn(&config).await;
    let client = server.client();
    let done = client.run_to_end("count me").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    // An invalid call, to see a tool_error.
    client.tool_call("agent_run", json!({"request": " "})).await;
    let (status, text) = get(&format!("{}/metrics", server.base)).await;
    assert_eq!(status, 200);
    for (name, value) in [
        (
            r#"agent_mcp_tasks_finished_total{outcome="completed"}"#,
            1.0,
        ),
        ("agent_mcp_tasks_created_total", 1.0),
        (r#"agent_mcp_tokens_total{direction="input"}"#, 11.0),
        (r#"agent_mcp_tokens_total{direction="output"}"#, 4.0),
        (
            r#"agent_mcp_ollama_request_duration_seconds_count{endpoint="chat",outcome="ok"}"#,
            1.0,
        ),
        (r#"agent_mcp_tasks{state="queued"}"#, 0.0),
        ("agent_mcp_queue_depth", 0.0),
        (
            r#"agent_mcp_requests_total{method="tools/call",outcome="tool_error"}"#,
            1.0,
        ),
    ] {
        assert_eq!(series(&text, name), Some(value), "{name}: {text}");
    }
    let ok_calls = series(
        &text,
        r#"agent_mcp_requests_total{method="tools/call",outcome="ok"}"#,
    )
    .expect("ok tools/call series");
    assert!(ok_calls >= 2.0, "{text}");
    // Every counted tools/call was also timed.
    assert_eq!(
        series(
            &text,
            r#"agent_mcp_request_duration_seconds_count{method="tools/call"}"#
        ),
        Some(ok_calls + 1.0),
        "{text}"
    );
}

#[tokio::test]
async fn rate_limit_refusals_are_counted() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    // A read budget small enough to meet with three calls (tools/list spends reads).
    config.rate_limit.reads.per_minute = 1;
    config.rate_limit.reads.burst = 2;
    let server = ServeProcess::spawn(&config).await;
    let client = server.client();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(client.modern("tools/list", json!({})).await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
    let (_, text) = get(&format!("{}/metrics", server.base)).await;
    assert_eq!(
        series(
            &text,
            r#"agent_mcp_requests_total{method="tools/list",outcome="rate_limited"}"#
        ),
        Some(1.0),
        "{text}"
    );
}

#[tokio::test]
async fn sigterm_lets_a_request_in_flight_finish() {
    let fake = FakeOllama::start().await;
    let server = ServeProcess::spawn(&test_config(&fake.url())).await;
    let url = format!("{}/mcp", server.base);
    // A request whose body arrives in two parts, with SIGTERM in between.
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta":
        support::harness::modern_meta(json!({}))}})
    .to_string();
    let (first, second) = body.split_at(body.len() / 2);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    tx.send(Ok(first.as_bytes().to_vec())).await.unwrap();
    // Told when the client takes the first part to send: the connection is open by then.
    let (sending, sent) = tokio::sync::oneshot::channel::<()>();
    let stream =
        futures_util::stream::unfold((rx, Some(sending)), |(mut rx, mut sending)| async move {
            let item = rx.recv().await?;
            if let Some(sending) = sending.take() {
                let _ = sending.send(());
            }
            Some((item, (rx, sending)))
        });
    let request = tokio::spawn(
        reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("content-length", body.len().to_string())
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .body(reqwest::Body::wrap_stream(stream))
            .send(),
    );
    // SIGTERM only once the request is on its way, and a moment later for the server to take
    // the connection (a fixed sleep alone lost the race on a loaded machine).
    tokio::time::timeout(Duration::from_secs(20), sent)
        .await
        .expect("the client started sending")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = server.child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.send(Ok(second.as_bytes().to_vec())).await.unwrap();
    drop(tx);
    let response = tokio::time::timeout(Duration::from_secs(20), request)
        .await
        .expect("answered")
        .unwrap()
        .expect("not cut off");
    assert_eq!(response.status(), 200);
    let v: Value = response.json().await.unwrap();
    assert_eq!(v["id"], 7);
    assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 2);
    let mut server = server;
    let status = tokio::time::timeout(Duration::from_secs(40), server.child.wait())
        .await
        .expect("exits after draining")
        .unwrap();
    assert!(status.success(), "{status}");
    // New connections are refused once shutdown began.
    assert!(
        reqwest::get(format!("{}/healthz", server.base))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn shutdown_ends_the_running_task_as_interrupted_and_keeps_the_queue() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::Hang);
    fake.push_reply(Reply::text("after restart", 2, 2));
    let dir = tempfile::tempdir().unwrap();
    let config = support::harness::test_config_sqlite(&fake.url(), &dir.path().join("t.db"));
    let server = ServeProcess::spawn(&config).await;
    let client = server.client();
    let running = client.agent_run("hangs").await;
    let queued = client.agent_run("waits").await;
    fake.until_chat_started(
        Duration::from_secs(20),
        "the first task never reached the model",
    )
    .await;
    let started = std::time::Instant::now();
    assert!(server.terminate().await.success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        started.elapsed()
    );

    // The next start finds the running task failed as interrupted, and runs the queued one.
    let server = ServeProcess::spawn(&config).await;
    let client = server.client();
    let text = client.agent_status(&running).await;
    assert_eq!(field(&text, "status"), "failed", "{text}");
    assert!(text.contains("Interrupted by a restart"), "{text}");
    let done = support::harness::wait_terminal(|| client.agent_status(&queued)).await;
    assert_eq!(
        support::harness::result_of(&done),
        "after restart",
        "{done}"
    );
}

/// Every answered request's audit line is in the file once `shutdown` returns, even when
/// the writer was mid-batch (it naps between batches while lines keep coming).
#[tokio::test]
async fn shutdown_writes_out_every_audit_line() {
    use agent_mcp::protocol::{McpRequest, ProtocolVersion, RequestContext, RequestId, Transport};
    use tower::ServiceExt;

    let dir = tempfile::tempdir().unwrap();
    let audit_file = dir.path().join("audit.jsonl");
    let mut config = test_config("http://127.0.0.1:9");
    config.audit.enabled = true;
    config.audit.file = Some(audit_file.clone());
    // 3000 calls in one go, in-process: both budgets out of the way (this tests the audit).
    config.rate_limit.per_minute = 1_000_000;
    config.rate_limit.burst = 1_000_000;
    config.rate_limit.reads.per_minute = 1_000_000;
    config.rate_limit.reads.burst = 1_000_000;
    let server = agent_mcp::AgentMcp::start(&config).await.expect("start");
    let stack = server.stack();
    const CALLS: i64 = 3_000;
    for id in 0..CALLS {
        let mut params = serde_json::Map::new();
        params.insert("name".into(), json!("agent_status"));
        params.insert(
            "arguments".into(),
            json!({"task_id": "3f2504e0-4f89-41d3-9a0c-0305e82c3301"}),
        );
        let req = McpRequest::new(
            Some(RequestId::Number(id)),
            "tools/call",
            params,
            RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
        );
        let Ok(response) = stack.clone().oneshot(req).await;
        assert!(response.error_code().is_none());
    }
    // The stack stays alive (an embedder may still hold it): the writer is not ended by its
    // channel closing, only the flush in `shutdown` makes it write its batch now.
    server.shutdown().await;
    let text = std::fs::read_to_string(&audit_file).expect("audit file");
    drop(stack);
    let ids: Vec<i64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("JSON line")["id"]
                .as_i64()
                .expect("id")
        })
        .collect();
    assert_eq!(
        ids.len() as i64,
        CALLS,
        "audit lines missing after shutdown"
    );
    assert_eq!(ids, (0..CALLS).collect::<Vec<_>>());
}
