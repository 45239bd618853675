//! The rmcp peer for `scripts/bench.sh`: an MCP server built on the rmcp crate (stateless
//! Streamable HTTP, JSON responses, served by hyper HTTP/1.1 like `agent-mcp serve`) with the
//! same two tools. `agent_status` does the work ours does on that path: parse the arguments,
//! look the task up in a map, render the same status text (with agent-mcp's renderer, so the
//! answers match byte for byte in their content).
//!
//! ```text
//! cargo bench --bench rmcp_peer -- <task-uuid>   # prints http://127.0.0.1:PORT/mcp
//! ```

#[path = "../support/listen.rs"]
mod listen;
#[path = "../support/peer_task.rs"]
mod peer_task;
#[path = "../support/runtime.rs"]
mod runtime;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use agent_mcp::agent::status::{parse_uuid, render_not_found, render_status};
use agent_mcp::mcp_tools::tool_definitions;
use agent_mcp::task::Task;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use uuid::Uuid;

/// The tasks, as a store would hold them.
type Tasks = Arc<RwLock<HashMap<Uuid, Task>>>;

#[derive(Clone)]
struct Peer {
    tasks: Tasks,
    tools: Arc<Vec<Tool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    task_id: String,
    #[serde(default)]
    session_id: Option<String>,
}

fn text_result(text: String, is_error: bool) -> CallToolResponse {
    let content = vec![ContentBlock::text(text)];
    let result = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.into()
}

impl ServerHandler for Peer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "agent_status" {
            return Err(ErrorData::invalid_params("unknown tool", None));
        }
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let args: StatusArgs = match serde_json::from_value(args) {
            Ok(a) => a,
            Err(e) => return Ok(text_result(format!("arguments: {e}"), true)),
        };
        let Some(id) = parse_uuid(&args.task_id) else {
            return Ok(text_result(
                format!("task_id: \"{}\" is not a UUID", args.task_id),
                true,
            ));
        };
        let session = args.session_id.as_deref().and_then(parse_uuid);
        let text = {
            let tasks = self.tasks.read().unwrap_or_else(|e| e.into_inner());
            match tasks.get(&id) {
                Some(task) if session.is_none_or(|s| s == task.session_id) => {
                    render_status(task, None)
                }
                _ => render_not_found(&args.task_id),
            }
        };
        Ok(text_result(text, false))
    }
}

fn main() {
    let task = peer_task::from_args("rmcp_peer");
    let tasks: Tasks = Arc::new(RwLock::new(HashMap::from([(task.id, task)])));
    let tools: Vec<Tool> = match tool_definitions()
        .iter()
        .map(|t| serde_json::from_value(t.clone()))
        .collect()
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rmcp cannot read our tool definitions: {e}");
            std::process::exit(1);
        }
    };
    let peer = Peer {
        tasks,
        tools: Arc::new(tools),
    };
    let runtime = runtime::start(&mut tokio::runtime::Builder::new_multi_thread());
    runtime.block_on(serve(peer));
}

async fn serve(peer: Peer) {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None);
    let service = StreamableHttpService::new(
        move || Ok(peer.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    listen::serve_http1(TowerToHyperService::new(service)).await;
}
