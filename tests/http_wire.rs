//! One test per HTTP wire rule (protocol/mcp-2026-07-28.md §1–§2): status code and JSON-RPC
//! code are both asserted.

mod support;

use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{HttpServer, MODERN, field, modern_meta, test_config, tool_text};

async fn server() -> (FakeOllama, HttpServer) {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(test_config(&fake.url())).await;
    (fake, server)
}

fn modern_body(id: i64, method: &str, mut params: Value) -> String {
    params["_meta"] = modern_meta(json!({}));
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

const MODERN_HEADERS: [(&str, &str); 2] = [
    ("mcp-protocol-version", MODERN),
    ("accept", "application/json, text/event-stream"),
];

fn with_method(method: &str) -> Vec<(&str, &str)> {
    let mut h = MODERN_HEADERS.to_vec();
    h.push(("mcp-method", method));
    h
}

#[tokio::test]
async fn get_and_delete_are_405_with_allow_post() {
    let (_f, s) = server().await;
    let http = reqwest::Client::new();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = http.request(method.clone(), &s.url).send().await.unwrap();
        assert_eq!(r.status(), 405, "{method}");
        assert_eq!(r.headers()["allow"], "POST");
    }
}

#[tokio::test]
async fn responses_are_json_and_never_carry_a_session_id() {
    let (_f, s) = server().await;
    let mut headers = with_method("tools/list");
    headers.push(("mcp-session-id", "abc"));
    let r = s
        .client()
        .post_raw(&headers, modern_body(1, "tools/list", json!({})))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    assert!(r.headers.get("mcp-session-id").is_none());
    let init = s
        .client()
        .legacy("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}), None)
        .await;
    assert_eq!(init.status, 200);
    assert!(init.headers.get("mcp-session-id").is_none());
}

#[tokio::test]
async fn notifications_are_202_in_both_eras() {
    let (_f, s) = server().await;
    let c = s.client();
    let legacy = c
        .post_raw(
            &[],
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await;
    assert_eq!(legacy.status, 202);
    assert!(legacy.text.is_empty());
    let mut params = json!({"requestId": 1});
    params["_meta"] = modern_meta(json!({}));
    let body =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":params}).to_string();
    let modern = c.post_raw(&MODERN_HEADERS, body).await;
    assert_eq!(modern.status, 202);
    // A response object POSTed by a legacy client is accepted too.
    let resp = c
        .post_raw(&[], r#"{"jsonrpc":"2.0","id":5,"result":{}}"#)
        .await;
    assert_eq!(resp.status, 202);
}

#[tokio::test]
async fn protocol_version_header_must_match_meta() {
    let (_f, s) = server().await;
    let c = s.client();
    let r = c
        .post_raw(
            &[
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/list"),
            ],
            modern_body(3, "tools/list", json!({})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], -32020);
    assert_eq!(r.body["id"], 3);
    let r = c
        .post_raw(
            &[("mcp-method", "tools/list")],
            modern_body(4, "tools/list", json!({})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], -32020);
    assert_eq!(r.body["id"], 4);
}

#[tokio::test]
async fn mcp_method_header_is_required_and_must_match() {
    let (_f, s) = server().await;
    let c = s.client();
    let r = c
        .post_raw(&MODERN_HEADERS, modern_body(1, "tools/list", json!({})))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    let r = c
        .post_raw(
            &with_method("TOOLS/LIST"),
            modern_body(2, "tools/list", json!({})),
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    // Values are trimmed.
    let r = c
        .post_raw(
            &with_method("  tools/list  "),
            modern_body(3, "tools/list", json!({})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn mcp_name_header_is_required_for_tools_call_and_must_match() {
    let (_f, s) = server().await;
    let c = s.client();
    let params = json!({"name": "agent_status", "arguments": {"task_id": "00000000-0000-0000-0000-000000000000"}});
    let r = c
        .post_raw(
            &with_method("tools/call"),
            modern_body(1, "tools/call", params.clone()),
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    let mut h = with_method("tools/call");
    h.push(("mcp-name", "agent_run"));
    let r = c
        .post_raw(&h, modern_body(2, "tools/call", params.clone()))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    let mut h = with_method("tools/call");
    h.push(("mcp-name", "  agent_status "));
    let r = c
        .post_raw(&h, modern_body(3, "tools/call", params.clone()))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mut h = with_method("tools/call");
    h.push(("mcp-name", "=?base64?YWdlbnRfc3RhdHVz?="));
    let r = c.post_raw(&h, modern_body(4, "tools/call", params)).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn foreign_host_or_origin_is_403() {
    let (_f, s) = server().await;
    let c = s.client();
    let mut h = with_method("tools/list");
    h.push(("host", "evil.example"));
    let r = c
        .post_raw(&h, modern_body(1, "tools/list", json!({})))
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["error"]["code"], -32000);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("evil.example")
    );
    let mut h = with_method("tools/list");
    h.push(("origin", "http://evil.example"));
    let r = c
        .post_raw(&h, modern_body(2, "tools/list", json!({})))
        .await;
    assert_eq!(r.status, 403);
    let mut h = with_method("tools/list");
    h.push(("origin", "http://localhost:5173"));
    h.push(("host", "localhost:1234"));
    let r = c
        .post_raw(&h, modern_body(3, "tools/list", json!({})))
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn configured_origin_is_accepted() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.http.allowed_origins = vec!["https://ide.example".into()];
    let s = HttpServer::start(config).await;
    let mut h = with_method("tools/list");
    h.push(("origin", "https://ide.example"));
    let r = s
        .client()
        .post_raw(&h, modern_body(1, "tools/list", json!({})))
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn non_json_content_type_is_415() {
    let (_f, s) = server().await;
    let mut h = with_method("tools/list");
    h.push(("content-type", "text/plain"));
    let r = s
        .client()
        .post_raw(&h, modern_body(1, "tools/list", json!({})))
        .await;
    assert_eq!(r.status, 415);
    assert_eq!(r.body["error"]["code"], -32000);
}

#[tokio::test]
async fn oversized_body_is_413() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.http.max_body_bytes = Some(bytesize::ByteSize::kib(4));
    let s = HttpServer::start(config).await;
    let big = "x".repeat(8 * 1024);
    let body = modern_body(
        1,
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": big}}),
    );
    let mut h = with_method("tools/call");
    h.push(("mcp-name", "agent_run"));
    let r = s.client().post_raw(&h, body.clone()).await;
    assert_eq!(r.status, 413);
    assert_eq!(r.body["error"]["code"], -32000);
    // Without Content-Length (a streamed body) the cap holds too.
    let stream = futures_stream(body.into_bytes());
    let r = s
        .client()
        .post_raw(&h, reqwest::Body::wrap_stream(stream))
        .await;
    assert_eq!(r.status, 413);
}

fn futures_stream(
    bytes: Vec<u8>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(1024).map(|c| Ok(c.to_vec())).collect();
    futures_util::stream::iter(chunks)
}

#[tokio::test]
async fn parse_errors_and_batches_are_400() {
    let (_f, s) = server().await;
    let r = s.client().post_raw(&[], "{not json").await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32700))
    );
    let r = s
        .client()
        .post_raw(&[], r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32600))
    );
}

#[tokio::test]
async fn discover_advertises_versions_server_info_and_cache() {
    let (_f, s) = server().await;
    let r = s.client().modern("server/discover", json!({})).await;
    assert_eq!(r.status, 200);
    let result = &r.body["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    assert_eq!(result["capabilities"]["tools"], json!({}));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "agent-mcp"
    );
    assert!(result["ttlMs"].as_u64().is_some());
    assert_eq!(result["cacheScope"], "public");
}

#[tokio::test]
async fn discover_without_meta_is_400_invalid_params() {
    let (_f, s) = server().await;
    let body = json!({"jsonrpc":"2.0","id":9,"method":"server/discover","params":{}}).to_string();
    let r = s
        .client()
        .post_raw(&with_method("server/discover"), body)
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32602))
    );
    assert_eq!(r.body["id"], 9);
    // Missing clientCapabilities alone is also -32602.
    let body = json!({"jsonrpc":"2.0","id":10,"method":"tools/list",
        "params":{"_meta":{"io.modelcontextprotocol/protocolVersion": MODERN}}})
    .to_string();
    let r = s.client().post_raw(&with_method("tools/list"), body).await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32602))
    );
}

#[tokio::test]
async fn unsupported_version_is_400_32022_with_data() {
    let (_f, s) = server().await;
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":"1900-01-01",
        "io.modelcontextprotocol/clientCapabilities":{}}}})
    .to_string();
    let r = s
        .client()
        .post_raw(
            &[
                ("mcp-protocol-version", "1900-01-01"),
                ("mcp-method", "tools/list"),
            ],
            body,
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32022))
    );
    assert_eq!(r.body["error"]["data"]["requested"], "1900-01-01");
    assert_eq!(
        r.body["error"]["data"]["supported"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    // A legacy request with an unknown version header is refused too.
    let r = s
        .client()
        .legacy("tools/list", json!({}), Some("2024-01-01"))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32022))
    );
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404_in_the_modern_era() {
    let (_f, s) = server().await;
    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "unknown/method",
    ] {
        let r = s.client().modern(method, json!({})).await;
        assert_eq!(r.status, 404, "{method}: {}", r.text);
        assert_eq!(r.body["error"]["code"], -32601, "{method}");
    }
}

#[tokio::test]
async fn legacy_errors_are_200_with_the_jsonrpc_error() {
    let (_f, s) = server().await;
    let r = s
        .client()
        .legacy("unknown/method", json!({}), Some("2025-11-25"))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (200, json!(-32601))
    );
    let r = s
        .client()
        .legacy(
            "tools/call",
            json!({"name": "nope", "arguments": {}}),
            Some("2025-11-25"),
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (200, json!(-32602))
    );
}

#[tokio::test]
async fn legacy_ping_is_an_empty_result_and_initialize_negotiates() {
    let (_f, s) = server().await;
    let c = s.client();
    let r = c.legacy("ping", json!({}), Some("2025-11-25")).await;
    assert_eq!(r.body["result"], json!({}));
    let init = |v: &str| {
        let c = c.clone();
        let v = v.to_owned();
        async move {
            c.legacy("initialize", json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}), None)
                .await
        }
    };
    let r = init("2025-06-18").await;
    assert_eq!(r.body["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(r.body["result"]["serverInfo"]["name"], "agent-mcp");
    assert!(r.body["result"].get("_meta").is_none());
    let r = init("2024-11-05").await;
    assert_eq!(r.body["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn tools_list_is_shaped_per_era() {
    let (_f, s) = server().await;
    let modern = s.client().modern("tools/list", json!({})).await;
    let result = &modern.body["result"];
    assert_eq!(result["resultType"], "complete");
    assert!(result["ttlMs"].is_u64());
    assert_eq!(result["cacheScope"], "public");
    let legacy = s
        .client()
        .legacy("tools/list", json!({}), Some("2025-06-18"))
        .await;
    let keys: Vec<&String> = legacy.body["result"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tools"]);
    assert_eq!(
        legacy.body["result"]["tools"],
        modern.body["result"]["tools"]
    );
}

#[tokio::test]
async fn unknown_tool_is_invalid_params() {
    let (_f, s) = server().await;
    let r = s
        .client()
        .modern("tools/call", json!({"name": "rm_rf", "arguments": {}}))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (400, json!(-32602))
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rm_rf")
    );
}

#[tokio::test]
async fn tool_level_outcomes() {
    let (_f, s) = server().await;
    let c = s.client();
    let call = |name: &str, args: Value| {
        let c = c.clone();
        let name = name.to_owned();
        async move {
            let r = c
                .modern("tools/call", json!({"name": name, "arguments": args}))
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.body["result"].clone()
        }
    };
    // Unknown task: the not-found text (docs/contract.md §3.5), as a normal result.
    let unknown = "00000000-0000-0000-0000-000000000000";
    let r = call("agent_status", json!({"task_id": unknown})).await;
    assert_eq!(r["isError"], false);
    assert_eq!(
        tool_text(&r),
        format!("task_id: {unknown}\nstatus: failed\nmessage: タスク {unknown} が見つかりません。")
    );
    // A session that does not own the task: not found as well.
    let run = call("agent_run", json!({"request": "x"})).await;
    let task_id = field(&tool_text(&run), "task_id");
    let other = "11111111-1111-4111-8111-111111111111";
    let r = call(
        "agent_status",
        json!({"task_id": task_id, "session_id": other}),
    )
    .await;
    assert_eq!(r["isError"], false);
    assert_eq!(
        field(&tool_text(&r), "message"),
        format!("タスク {task_id} が見つかりません。")
    );
    // Unknown session on agent_run: a tool error that says what to do.
    let r = call("agent_run", json!({"request": "x", "session_id": other})).await;
    assert_eq!(r["isError"], true);
    assert!(tool_text(&r).contains("Omit session_id"));
    // Blank request: a tool error.
    let r = call("agent_run", json!({"request": "  \n\t"})).await;
    assert_eq!(r["isError"], true);
    assert_eq!(
        tool_text(&r),
        "Invalid arguments for tool \"agent_run\":\nrequest: must not be empty or whitespace-only"
    );
}

#[tokio::test]
async fn legacy_logging_set_level_is_acknowledged_and_validated() {
    let (_f, s) = server().await;
    let c = s.client();
    let init = c
        .legacy("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}), None)
        .await;
    assert_eq!(init.body["result"]["capabilities"]["logging"], json!({}));
    let r = c
        .legacy(
            "logging/setLevel",
            json!({"level": "warning"}),
            Some("2025-11-25"),
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["result"].clone()),
        (200, json!({}))
    );
    let r = c
        .legacy(
            "logging/setLevel",
            json!({"level": "loud"}),
            Some("2025-11-25"),
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (200, json!(-32602))
    );
    // Removed in 2026-07-28.
    let r = c.modern("logging/setLevel", json!({"level": "info"})).await;
    assert_eq!(
        (r.status.as_u16(), r.body["error"]["code"].clone()),
        (404, json!(-32601))
    );
}
