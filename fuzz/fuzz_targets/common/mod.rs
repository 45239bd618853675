//! What the layer targets share: one runtime for the whole run, and a `tools/call` request as
//! the 2026-07-28 edge hands it to the layers.

use std::sync::OnceLock;

use agent_mcp::protocol::{McpRequest, ProtocolVersion, RequestContext, RequestId, Transport};
use serde_json::{Map, Value};

/// A current-thread runtime, built once (the layers need no I/O driver).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
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
