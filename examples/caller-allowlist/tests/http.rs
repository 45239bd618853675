//! The allowlist layer after auth in the server's own stack, through the real HTTP edge on
//! 127.0.0.1: it sees each caller's identity, refuses the unlisted, and passes the listed on to
//! the agent.

use agent_mcp::AgentMcp;
use agent_mcp::config::{Config, StoreBackend, TokenConfig};
use agent_mcp::layers::auth::sha256_hex;
use caller_allowlist::{Allowlist, AllowlistLayer};
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";

async fn call(url: &str, token: Option<&str>, tool: &str, arguments: Value) -> (u16, Value) {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "allowlist-test", "version": "1"}
            }
        }
    });
    let mut req = reqwest::Client::new()
        .post(url)
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.expect("the server answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn text_of(body: &Value) -> String {
    body["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_layer_of_its_own_crate_after_auth_sees_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("allowed.txt");
    std::fs::write(&list, "alice\n").unwrap();

    let mut config = Config::default();
    config.store.backend = StoreBackend::Memory;
    config.audit.enabled = false;
    // No Ollama is needed: an accepted task is only queued before the answer.
    config.ollama.url = "http://127.0.0.1:9".into();
    config.ollama.model = "test-model".into();
    config.agent.workspace = Some(dir.path().to_path_buf());
    config.auth.tokens = ["alice", "bob"]
        .map(|name| TokenConfig {
            name: name.into(),
            sha256: sha256_hex(&format!("{name}-token")),
        })
        .to_vec();
    let server = AgentMcp::start(&config).await.unwrap();
    let stack = server
        .stack_builder()
        .after_auth(AllowlistLayer::new(Allowlist::at(&list)))
        .build();
    let app = axum::Router::new().route_service("/mcp", server.http_service_for(stack));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });

    let run = json!({"request": "say hello"});
    // Unlisted: refused by the layer, which names the caller auth resolved.
    let (status, bob) = call(&url, Some("bob-token"), "agent_run", run.clone()).await;
    assert_eq!(status, 200, "{bob}");
    assert_eq!(bob["result"]["isError"], true, "{bob}");
    assert!(
        text_of(&bob).contains("caller 'bob' may not start tasks"),
        "{bob}"
    );
    assert!(text_of(&bob).contains("allowed.txt"), "{bob}");

    // Listed: passed on to the agent, which accepts the task.
    let (status, alice) = call(&url, Some("alice-token"), "agent_run", run.clone()).await;
    assert_eq!(status, 200, "{alice}");
    assert_eq!(alice["result"]["isError"], false, "{alice}");
    assert!(text_of(&alice).contains("task_id"), "{alice}");

    // Other tools pass whoever asks.
    let status_args = json!({"task_id": "00000000-0000-4000-8000-000000000000"});
    let (status, other) = call(&url, Some("bob-token"), "agent_status", status_args).await;
    assert_eq!(status, 200, "{other}");
    assert!(!text_of(&other).contains("may not start tasks"), "{other}");

    // Without a token auth refuses before the layer is reached.
    let (status, anonymous) = call(&url, None, "agent_run", run.clone()).await;
    assert_eq!(status, 401, "{anonymous}");

    // The list is read on each call: listing bob lets him in at once.
    std::fs::write(&list, "alice\nbob\n").unwrap();
    let (status, bob) = call(&url, Some("bob-token"), "agent_run", run).await;
    assert_eq!(status, 200, "{bob}");
    assert_eq!(bob["result"]["isError"], false, "{bob}");

    serving.abort();
    server.shutdown().await;
}
