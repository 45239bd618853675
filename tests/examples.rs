//! Each example's own code, exercised: the axum mount, the bare-hyper server and the stdio
//! adapter all serve a real MCP exchange.

mod support;

#[allow(dead_code)]
#[path = "../examples/axum_mount.rs"]
mod axum_mount;
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
        .modern(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "hi"}}),
        )
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
