//! `tools/call` arguments through the validate layer (schema + contract rules).
//!
//! Input: byte 0 picks the tool; the rest is the `arguments` JSON (or, when it is not JSON, the
//! text of an `agent_run` request).

#![no_main]

mod common;

use std::convert::Infallible;

use agent_mcp::layers::validate::ValidateLayer;
use agent_mcp::protocol::{McpRequest, McpResult, Payload};
use common::runtime;
use common::surfaces::tool_call;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let tool = match which % 3 {
        0 => "agent_run",
        1 => "agent_status",
        _ => "agent_other",
    };
    let arguments = match serde_json::from_slice::<Value>(rest) {
        Ok(v) => v,
        Err(_) => json!({"request": String::from_utf8_lossy(rest)}),
    };
    let req = tool_call(tool, arguments.clone());
    let mut svc = ServiceBuilder::new()
        .layer(ValidateLayer::default())
        .service_fn(|req: McpRequest| async move {
            Ok::<_, Infallible>(req.result(McpResult::tool_text("passed", false)))
        });
    let resp = runtime().block_on(async { svc.ready().await?.call(req).await });
    let Ok(resp) = resp;
    let Payload::Result(result) = &resp.payload else {
        panic!("validation answers with a tool result: {:?}", resp.payload);
    };
    let text = result.first_text().unwrap_or_default();
    if !result.is_tool_error() {
        assert_eq!(text, "passed");
        if tool == "agent_run"
            && let Some(args) = arguments.as_object()
        {
            let request = args.get("request").and_then(Value::as_str);
            assert!(
                request.is_some_and(|r| !r.trim().is_empty()),
                "blank request passed: {arguments}"
            );
            if let Some(t) = args.get("temperature").and_then(Value::as_f64) {
                assert!((0.0..=2.0).contains(&t), "temperature {t} passed");
            }
        }
        return;
    }
    let header = format!("Invalid arguments for tool \"{tool}\":\n");
    assert!(text.starts_with(&header), "{text}");
    let lines: Vec<&str> = text[header.len()..].lines().collect();
    assert!(
        !lines.is_empty() && lines.len() <= 21,
        "{} lines",
        lines.len()
    );
    for line in lines {
        assert!(
            line.contains(": "),
            "a line without `path: problem`: {line:?}"
        );
    }
});
