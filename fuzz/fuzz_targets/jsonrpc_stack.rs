//! One HTTP request through the whole MCP edge and stack: JSON-RPC parsing, era
//! classification, routing headers, every layer and the service. Memory store; Ollama is an
//! unreachable loopback port, so no network leaves the machine.
//!
//! Input: byte 0 picks headers (version, routing headers copied from the body, a foreign
//! Origin, the content type); the rest is the body.

#![no_main]

mod common;

use std::sync::OnceLock;

use agent_mcp::transport::http::McpHttpService;
use agent_mcp::{AgentMcp, Stack};
use bytes::Bytes;
use common::surfaces::{offline_config, through_edge};
use http_body_util::Full;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

struct World {
    runtime: tokio::runtime::Runtime,
    http: McpHttpService<Stack>,
    _server: AgentMcp,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let server = runtime
            .block_on(AgentMcp::start(&offline_config()))
            .expect("server starts");
        let http = server.http_service();
        World {
            runtime,
            http,
            _server: server,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let method = parsed
        .as_ref()
        .and_then(|v| v.get("method"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let name = parsed
        .as_ref()
        .and_then(|v| v.get("params"))
        .and_then(|p| p.get("name").or_else(|| p.get("taskId")))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let id = parsed.as_ref().and_then(|v| v.get("id")).cloned();

    let mut req = http::Request::post("/mcp").header("host", "localhost:8080");
    req = match flags & 3 {
        1 => req.header("mcp-protocol-version", "2026-07-28"),
        2 => req.header("mcp-protocol-version", "2025-06-18"),
        3 => req.header("mcp-protocol-version", "1999-01-01"),
        _ => req,
    };
    if flags & 4 != 0
        && let Some(m) = method
            .as_deref()
            .filter(|m| http::HeaderValue::from_str(m).is_ok())
    {
        req = req.header("mcp-method", m);
    }
    if flags & 8 != 0
        && let Some(n) = name
            .as_deref()
            .filter(|n| http::HeaderValue::from_str(n).is_ok())
    {
        req = req.header("mcp-name", n);
    }
    if flags & 16 != 0 {
        req = req.header("origin", "http://evil.example");
    }
    req = req.header(
        "content-type",
        if flags & 32 != 0 {
            "text/plain"
        } else {
            "application/json"
        },
    );
    let Ok(req) = req.body(Full::new(Bytes::copy_from_slice(body))) else {
        return;
    };
    let w = world();
    let (status, bytes) = w.runtime.block_on(through_edge(w.http.clone(), req));
    assert!(
        matches!(
            status.as_u16(),
            200 | 202 | 400 | 401 | 403 | 404 | 405 | 408 | 413 | 415 | 429
        ),
        "unexpected status {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    if bytes.is_empty() {
        return;
    }
    let answer: Value = serde_json::from_slice(&bytes).expect("a JSON body");
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert!(
        answer.get("result").is_some() != answer.get("error").is_some(),
        "exactly one of result/error: {answer}"
    );
    // The id is echoed when it was readable, else null; never someone else's.
    let echoed = &answer["id"];
    if !echoed.is_null() {
        assert_eq!(Some(echoed), id.as_ref(), "{answer}");
    }
    if answer.get("result").is_some() {
        assert!(id.is_some(), "a result needs a request id: {answer}");
    }
});
