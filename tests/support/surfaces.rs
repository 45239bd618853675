//! What the property tests (`tests/properties.rs`) and the fuzz targets (`fuzz/`) share, so
//! that both drive the same server and read the same answers: the offline configuration, a
//! `tools/call` as the 2026-07-28 edge hands it to the layers, what an inner service saw of
//! the images layer's work, and one request through the HTTP edge. Included by `#[path]`;
//! each includer uses a part.
#![allow(dead_code)]

use agent_mcp::Stack;
use agent_mcp::config::{Config, StoreBackend};
use agent_mcp::mcp_tools::ToolCall;
use agent_mcp::protocol::{McpRequest, ProtocolVersion, RequestContext, RequestId, Transport};
use agent_mcp::transport::http::McpHttpService;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Map, Value};
use tower::ServiceExt;

/// The whole server with a memory store, no audit log, no rate limit (otherwise every input
/// after the 60th would be a 429) and an Ollama nobody listens on: port 9 (discard) on
/// loopback is refused at once, so nothing leaves the machine.
pub fn offline_config() -> Config {
    let mut config = Config::default();
    config.ollama.url = "http://127.0.0.1:9".into();
    config.ollama.retries = 0;
    config.store.backend = StoreBackend::Memory;
    config.audit.enabled = false;
    config.rate_limit.enabled = false;
    config
}

/// `tools/call` of `tool` with `arguments`, id 1, on 2026-07-28 in process.
pub fn tool_call(tool: &str, arguments: Value) -> McpRequest {
    let mut params = Map::new();
    params.insert("name".into(), tool.into());
    params.insert("arguments".into(), arguments);
    McpRequest::new(
        Some(RequestId::Number(1)),
        "tools/call",
        params,
        RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
    )
}

/// The images of a typed `agent_run` that reached the inner service (those the images layer
/// checked) as JSON `[[mime, decoded_len], …]`; `None` for any other request.
pub fn images_reached(req: &McpRequest) -> Option<String> {
    let Some(ToolCall::Run(args)) = &req.call else {
        return None;
    };
    let images: Vec<_> = args
        .images
        .iter()
        .filter_map(|i| Some((i.mime_type.mime(), i.checked?.decoded_len)))
        .collect();
    Some(serde_json::to_string(&images).unwrap_or_default())
}

/// `req` through the whole HTTP edge: the status and the body (empty where it breaks off).
pub async fn through_edge(
    edge: McpHttpService<Stack>,
    req: http::Request<Full<Bytes>>,
) -> (http::StatusCode, Bytes) {
    let Ok(resp) = edge.oneshot(req).await;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    (status, bytes)
}
