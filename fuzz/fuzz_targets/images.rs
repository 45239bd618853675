//! `agent_run` images through the images layer: MIME allow-list, base64, sizes, magic bytes.
//!
//! Input: byte 0 picks the mode. Mode 0: the rest is the raw `images` JSON. Otherwise the rest
//! is cut at 0xFF bytes into up to five images; each image's first byte picks its MIME type
//! and whether its base64 is damaged, and the remaining bytes are the decoded image.

#![no_main]

mod common;

use std::convert::Infallible;

use agent_mcp::layers::images::ImageLimits;
use agent_mcp::layers::images::{ImageRules, ImagesLayer};
use agent_mcp::protocol::{McpRequest, McpResult, Payload};
use base64::Engine;
use bytesize::ByteSize;
use common::runtime;
use common::surfaces::{images_reached, tool_call};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};

const MIMES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/gif",
    "text/plain",
];

fn limits() -> ImageLimits {
    ImageLimits {
        max_count: 3,
        max_bytes: ByteSize::b(2048),
        max_total_bytes: ByteSize::b(4096),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let images = if mode == 0 {
        match serde_json::from_slice::<Value>(rest) {
            Ok(v) => v,
            Err(_) => return,
        }
    } else {
        let items: Vec<Value> = rest
            .split(|&b| b == 0xFF)
            .take(5)
            .map(|part| {
                let (sel, bytes) = part.split_first().unwrap_or((&0, &[]));
                let mut data = base64::engine::general_purpose::STANDARD.encode(bytes);
                if sel & 0x80 != 0 && !data.is_empty() {
                    let at = usize::from(sel & 0x0F) % data.len();
                    data.replace_range(at..=at, "*");
                }
                json!({"mime_type": MIMES[(usize::from(sel & 0x70) >> 4) % MIMES.len()], "data_base64": data})
            })
            .collect();
        Value::Array(items)
    };
    let mut args = Map::new();
    args.insert("request".into(), "look".into());
    args.insert("images".into(), images);
    let req = tool_call("agent_run", Value::Object(args));
    let mut svc = ServiceBuilder::new()
        .layer(ImagesLayer::new(ImageRules(limits())))
        .service_fn(|req: McpRequest| async move {
            let text = images_reached(&req).unwrap_or_else(|| "none".to_owned());
            Ok::<_, Infallible>(req.result(McpResult::tool_text(text, false)))
        });
    let Ok(resp) = runtime().block_on(async { svc.ready().await?.call(req).await });
    let Payload::Result(result) = &resp.payload else {
        panic!("images answer with a tool result: {:?}", resp.payload);
    };
    let text = result.first_text().unwrap_or_default();
    if result.is_tool_error() {
        assert!(
            text.starts_with("Invalid arguments for tool \"agent_run\":\n"),
            "{text}"
        );
        return;
    }
    if text == "none" {
        return;
    }
    let passed: Vec<(String, usize)> = serde_json::from_str(text).expect("inner's own JSON");
    let l = limits();
    assert!(passed.len() <= l.max_count, "{passed:?}");
    assert!(
        passed
            .iter()
            .all(|(_, n)| *n as u64 <= l.max_bytes.as_u64())
    );
    assert!(passed.iter().map(|(_, n)| *n as u64).sum::<u64>() <= l.max_total_bytes.as_u64());
    assert!(
        passed
            .iter()
            .all(|(m, _)| ["image/png", "image/jpeg", "image/webp"].contains(&m.as_str())),
        "{passed:?}"
    );
});
