//! The HTTP wire rules of MCP 2026-07-28's Streamable HTTP transport: status code and JSON-RPC
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
async fn tool_level_outcomes() {
    let (_f, s) = server().await;
    let c = s.client();
    let call = |name: &str, args: Value| {
        let c = c.clone();
        let name = name.to_owned();
        async move {
            let r = c.tool_call(&name, args).await;
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

const PV: (&str, &str) = ("mcp-protocol-version", MODERN);
const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");
const PV_2025: (&str, &str) = ("mcp-protocol-version", "2025-11-25");
const SUPPORTED: [&str; 4] = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];

/// One POST to the default server and the answer each wire rule requires of it.
struct WireCase {
    name: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: fn() -> String,
    status: u16,
    /// `error.code`, when the answer must be a JSON-RPC error.
    code: Option<i64>,
    /// The response `id`, when the case checks it is echoed.
    id: Option<i64>,
    /// A text `error.message` must contain.
    message_has: Option<&'static str>,
    /// Any further check of the body.
    check: Option<fn(&Value)>,
}

const WIRE: WireCase = WireCase {
    name: "",
    headers: &[],
    body: String::new,
    status: 200,
    code: None,
    id: None,
    message_has: None,
    check: None,
};

fn legacy_body(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

const STATUS_PARAMS: fn() -> Value = || json!({"name": "agent_status", "arguments": {"task_id": "00000000-0000-0000-0000-000000000000"}});

/// The transport rules, one request each: status code and JSON-RPC code both.
const WIRE_CASES: &[WireCase] = &[
    // MCP-Protocol-Version must match _meta.
    WireCase {
        name: "protocol version header differs from _meta",
        headers: &[PV_2025, ("mcp-method", "tools/list")],
        body: || modern_body(3, "tools/list", json!({})),
        status: 400,
        code: Some(-32020),
        id: Some(3),
        ..WIRE
    },
    WireCase {
        name: "protocol version header missing",
        headers: &[("mcp-method", "tools/list")],
        body: || modern_body(4, "tools/list", json!({})),
        status: 400,
        code: Some(-32020),
        id: Some(4),
        ..WIRE
    },
    // Mcp-Method is required and must match.
    WireCase {
        name: "Mcp-Method missing",
        headers: &[PV, ACCEPT],
        body: || modern_body(1, "tools/list", json!({})),
        status: 400,
        code: Some(-32020),
        ..WIRE
    },
    WireCase {
        name: "Mcp-Method differs in case",
        headers: &[PV, ACCEPT, ("mcp-method", "TOOLS/LIST")],
        body: || modern_body(2, "tools/list", json!({})),
        status: 400,
        code: Some(-32020),
        ..WIRE
    },
    WireCase {
        name: "Mcp-Method is trimmed",
        headers: &[PV, ACCEPT, ("mcp-method", "  tools/list  ")],
        body: || modern_body(3, "tools/list", json!({})),
        ..WIRE
    },
    // Mcp-Name is required for tools/call and must match.
    WireCase {
        name: "Mcp-Name missing on tools/call",
        headers: &[PV, ACCEPT, ("mcp-method", "tools/call")],
        body: || modern_body(1, "tools/call", STATUS_PARAMS()),
        status: 400,
        code: Some(-32020),
        ..WIRE
    },
    WireCase {
        name: "Mcp-Name names another tool",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/call"),
            ("mcp-name", "agent_run"),
        ],
        body: || modern_body(2, "tools/call", STATUS_PARAMS()),
        status: 400,
        code: Some(-32020),
        ..WIRE
    },
    WireCase {
        name: "Mcp-Name is trimmed",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/call"),
            ("mcp-name", "  agent_status "),
        ],
        body: || modern_body(3, "tools/call", STATUS_PARAMS()),
        ..WIRE
    },
    WireCase {
        name: "Mcp-Name may be base64-encoded",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?YWdlbnRfc3RhdHVz?="),
        ],
        body: || modern_body(4, "tools/call", STATUS_PARAMS()),
        ..WIRE
    },
    // A foreign Host or Origin is 403; loopback ones are accepted.
    WireCase {
        name: "foreign Host",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/list"),
            ("host", "evil.example"),
        ],
        body: || modern_body(1, "tools/list", json!({})),
        status: 403,
        code: Some(-32000),
        message_has: Some("evil.example"),
        ..WIRE
    },
    WireCase {
        name: "foreign Origin",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/list"),
            ("origin", "http://evil.example"),
        ],
        body: || modern_body(2, "tools/list", json!({})),
        status: 403,
        ..WIRE
    },
    WireCase {
        name: "loopback Origin and Host",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/list"),
            ("origin", "http://localhost:5173"),
            ("host", "localhost:1234"),
        ],
        body: || modern_body(3, "tools/list", json!({})),
        ..WIRE
    },
    WireCase {
        name: "non-JSON content type is 415",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/list"),
            ("content-type", "text/plain"),
        ],
        body: || modern_body(1, "tools/list", json!({})),
        status: 415,
        code: Some(-32000),
        ..WIRE
    },
    // Parse errors and batches are 400.
    WireCase {
        name: "body is not JSON",
        body: || "{not json".into(),
        status: 400,
        code: Some(-32700),
        ..WIRE
    },
    WireCase {
        name: "a batch",
        body: || r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.into(),
        status: 400,
        code: Some(-32600),
        ..WIRE
    },
    // A modern request without its _meta is -32602.
    WireCase {
        name: "server/discover without _meta",
        headers: &[PV, ACCEPT, ("mcp-method", "server/discover")],
        body: || json!({"jsonrpc":"2.0","id":9,"method":"server/discover","params":{}}).to_string(),
        status: 400,
        code: Some(-32602),
        id: Some(9),
        ..WIRE
    },
    WireCase {
        name: "_meta without clientCapabilities",
        headers: &[PV, ACCEPT, ("mcp-method", "tools/list")],
        body: || {
            json!({"jsonrpc":"2.0","id":10,"method":"tools/list",
                "params":{"_meta":{"io.modelcontextprotocol/protocolVersion": MODERN}}})
            .to_string()
        },
        status: 400,
        code: Some(-32602),
        ..WIRE
    },
    // An unsupported version is 400 -32022 with what was asked and what is supported.
    WireCase {
        name: "unsupported modern version",
        headers: &[
            ("mcp-protocol-version", "1900-01-01"),
            ("mcp-method", "tools/list"),
        ],
        body: || {
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
                "io.modelcontextprotocol/protocolVersion":"1900-01-01",
                "io.modelcontextprotocol/clientCapabilities":{}}}})
            .to_string()
        },
        status: 400,
        code: Some(-32022),
        check: Some(|body| {
            assert_eq!(body["error"]["data"]["requested"], "1900-01-01");
            assert_eq!(body["error"]["data"]["supported"], json!(SUPPORTED));
        }),
        ..WIRE
    },
    WireCase {
        name: "legacy request with an unknown version header",
        headers: &[ACCEPT, ("mcp-protocol-version", "2024-01-01")],
        body: || legacy_body("tools/list", json!({})),
        status: 400,
        code: Some(-32022),
        ..WIRE
    },
    // Tool-level errors are -32602 in a 200: on a 400 a dual-era client reads any code but
    // -32020/-32021/-32022 as "not modern" and falls back to `initialize`.
    WireCase {
        name: "modern unknown tool is invalid params in a 200",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/call"),
            ("mcp-name", "rm_rf"),
        ],
        body: || modern_body(1, "tools/call", json!({"name": "rm_rf", "arguments": {}})),
        code: Some(-32602),
        message_has: Some("rm_rf"),
        ..WIRE
    },
    WireCase {
        name: "modern tool arguments that are no object are invalid params in a 200",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/call"),
            ("mcp-name", "agent_status"),
        ],
        body: || {
            modern_body(
                1,
                "tools/call",
                json!({"name": "agent_status", "arguments": [1]}),
            )
        },
        code: Some(-32602),
        message_has: Some("must be an object"),
        ..WIRE
    },
    // Missing _meta on a tools/call is the request's framing: still 400.
    WireCase {
        name: "modern tools/call without _meta",
        headers: &[
            PV,
            ACCEPT,
            ("mcp-method", "tools/call"),
            ("mcp-name", "rm_rf"),
        ],
        body: || legacy_body("tools/call", json!({"name": "rm_rf", "arguments": {}})),
        status: 400,
        code: Some(-32602),
        ..WIRE
    },
    // Legacy errors are 200 with the JSON-RPC error.
    WireCase {
        name: "legacy unknown method",
        headers: &[ACCEPT, PV_2025],
        body: || legacy_body("unknown/method", json!({})),
        code: Some(-32601),
        ..WIRE
    },
    WireCase {
        name: "legacy unknown tool",
        headers: &[ACCEPT, PV_2025],
        body: || legacy_body("tools/call", json!({"name": "nope", "arguments": {}})),
        code: Some(-32602),
        ..WIRE
    },
    // Legacy logging/setLevel is advertised, acknowledged and validated.
    WireCase {
        name: "legacy initialize advertises logging",
        headers: &[ACCEPT],
        body: || {
            legacy_body(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "x", "version": "1"}}),
            )
        },
        check: Some(|body| assert_eq!(body["result"]["capabilities"]["logging"], json!({}))),
        ..WIRE
    },
    WireCase {
        name: "legacy logging/setLevel warning",
        headers: &[ACCEPT, PV_2025],
        body: || legacy_body("logging/setLevel", json!({"level": "warning"})),
        check: Some(|body| assert_eq!(body["result"], json!({}))),
        ..WIRE
    },
    WireCase {
        name: "legacy logging/setLevel with an unknown level",
        headers: &[ACCEPT, PV_2025],
        body: || legacy_body("logging/setLevel", json!({"level": "loud"})),
        code: Some(-32602),
        ..WIRE
    },
];

#[tokio::test]
async fn each_wire_rule_answers_its_status_and_code() {
    let (_f, s) = server().await;
    let c = s.client();
    for case in WIRE_CASES {
        let name = case.name;
        let r = c.post_raw(case.headers, (case.body)()).await;
        assert_eq!(r.status, case.status, "{name}: {}", r.text);
        if let Some(code) = case.code {
            assert_eq!(r.body["error"]["code"], code, "{name}: {}", r.text);
        }
        if let Some(id) = case.id {
            assert_eq!(r.body["id"], id, "{name}: {}", r.text);
        }
        if let Some(text) = case.message_has {
            let message = r.body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(text), "{name}: {}", r.text);
        }
        if let Some(check) = case.check {
            let body = r.body.clone();
            let checked = std::panic::catch_unwind(move || check(&body));
            assert!(
                checked.is_ok(),
                "{name}: the check above failed: {}",
                r.text
            );
        }
    }
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404_in_the_modern_era() {
    let (_f, s) = server().await;
    for (method, params) in [
        ("initialize", json!({})),
        ("ping", json!({})),
        ("logging/setLevel", json!({})),
        // Removed in 2026-07-28, even with a valid level.
        ("logging/setLevel", json!({"level": "info"})),
        ("resources/subscribe", json!({})),
        ("unknown/method", json!({})),
    ] {
        let r = s.client().modern(method, params.clone()).await;
        assert_eq!(r.status, 404, "{method} {params}: {}", r.text);
        assert_eq!(r.body["error"]["code"], -32601, "{method} {params}");
    }
}
