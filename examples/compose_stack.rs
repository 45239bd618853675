//! Compose your own stack from the parts, in both directions, served over HTTP by axum:
//!
//! - `/tools/mcp`: **your** tower service (a `service_fn` with one tool of its own, `add`)
//!   behind **our** layers: audit → auth → rate_limit → your service.
//! - `/agent/mcp`: **our** full stack with **your** layer inserted before the service
//!   ([`CallLogLayer`], a [`Check`] that records every call it passes on), by the stack's
//!   builder (`AgentMcp::stack_builder`), which also has places before and after auth.
//!
//! ```sh
//! cargo run --example compose_stack
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use agent_mcp::layers::audit::{AuditLayer, AuditSink};
use agent_mcp::layers::auth::{AuthLayer, Tokens};
use agent_mcp::layers::rate_limit::{RateLimitLayer, RateLimits};
use agent_mcp::plugin::{Check, GateLayer};
use agent_mcp::protocol::{ErrorObject, McpRequest, McpResponse, McpResult};
use agent_mcp::transport::http::{HttpRules, McpHttpService};
use axum::Router;
use serde_json::{Value, json};
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

/// An MCP service of your own: one tool, `add`, that sums two numbers.
pub async fn my_tools(req: McpRequest) -> Result<McpResponse, Infallible> {
    let response = match req.method.as_str() {
        "server/discover" | "initialize" | "ping" => req.result(McpResult::empty()),
        "tools/list" => {
            let tool = json!({
                "name": "add",
                "description": "Adds two numbers.",
                "inputSchema": {"type": "object", "required": ["a", "b"],
                                "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
            });
            let mut body = serde_json::Map::new();
            body.insert("tools".into(), json!([tool]));
            req.result(McpResult::complete(body))
        }
        "tools/call" if req.tool_name() == Some("add") => {
            let arg = |key: &str| {
                req.params
                    .tools_call()
                    .and_then(|call| call.arguments.as_ref())
                    .and_then(|args| args.get(key))
                    .and_then(Value::as_f64)
            };
            match (arg("a"), arg("b")) {
                (Some(a), Some(b)) => req.result(McpResult::tool_text(format!("{}", a + b), false)),
                _ => req.result(McpResult::tool_text("add needs numbers a and b", true)),
            }
        }
        "tools/call" => req.error(ErrorObject::invalid_params("unknown tool")),
        other => req.error(ErrorObject::method_not_found(other)),
    };
    Ok(response)
}

/// Your tools behind our layers, outermost first: audit (one line per request, refusals
/// included) → auth (bearer token `token`, caller named `caller`) → rate_limit (`burst` calls at
/// once per caller, then `per_minute`).
pub fn guarded_tools(
    caller: &str,
    token: &str,
    per_minute: NonZeroU32,
    burst: NonZeroU32,
    audit: AuditSink,
) -> BoxCloneSyncService<McpRequest, McpResponse, Infallible> {
    BoxCloneSyncService::new(
        ServiceBuilder::new()
            .layer(AuditLayer::new(audit))
            .layer(AuthLayer::new(Tokens::default().with_token(caller, token)))
            .layer(RateLimitLayer::new(RateLimits::one_budget(
                per_minute, burst,
            )))
            .service_fn(my_tools),
    )
}

/// What [`CallLog`] saw: the method, and the tool name of a `tools/call`.
pub type CallLog = Arc<Mutex<Vec<String>>>;

/// What your layer checks: records each request's method (and tool), then passes it on. A
/// [`Check`] is the whole layer; the plugin's `Gate` is its `Service`.
#[derive(Clone, Debug, Default)]
pub struct CallLogger {
    pub log: CallLog,
}

impl Check for CallLogger {
    fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
        let entry = match req.tool_name() {
            Some(tool) => format!("{} {tool}", req.method),
            None => req.method.to_string(),
        };
        self.log.lock().unwrap().push(entry);
        Ok(())
    }
}

/// A layer of your own: `CallLogLayer::new(CallLogger { log })`.
pub type CallLogLayer = GateLayer<CallLogger>;

/// Both stacks on one axum router, each behind our HTTP edge (`McpHttpService`).
pub fn app(
    tools: BoxCloneSyncService<McpRequest, McpResponse, Infallible>,
    agent: &AgentMcp,
    log: CallLog,
) -> Router {
    // The full stack, your layer innermost: it sees what every built-in layer passed.
    let agent_svc = agent
        .stack_builder()
        .before_service(CallLogLayer::new(CallLogger { log }))
        .build();
    Router::new()
        .route_service(
            "/tools/mcp",
            McpHttpService::new(tools, HttpRules::default()),
        )
        .route_service(
            "/agent/mcp",
            McpHttpService::new(agent_svc, HttpRules::default()),
        )
}

/// Serves `app` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load(None)?;
    let agent = AgentMcp::start(&config).await?;
    let token = std::env::var("MY_TOOLS_TOKEN").unwrap_or_else(|_| "change-me".into());
    let per_minute = NonZeroU32::new(60).expect("nonzero");
    let tools = guarded_tools("me", &token, per_minute, per_minute, AuditSink::stderr());
    let log = CallLog::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3002").await?;
    let addr = listener.local_addr()?;
    eprintln!("your tools at http://{addr}/tools/mcp, the agent at http://{addr}/agent/mcp");
    serve(listener, app(tools, &agent, log), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    agent.shutdown().await;
    Ok(())
}
