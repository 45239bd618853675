//! An existing axum app — its own routes and state — mounts the full agent-mcp stack under
//! `/agents/mcp`.
//!
//! ```sh
//! cargo run --example axum_mount
//! curl -s localhost:3000/hello
//! ```

use std::sync::Arc;

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use axum::Router;
use axum::extract::State;
use axum::routing::get;

/// The host application's own state.
#[derive(Clone)]
pub struct AppState {
    pub greeting: Arc<str>,
}

/// The host app: its routes, plus MCP at `/agents/mcp` (auth, rate limits and audit included —
/// it is the same stack `agent-mcp serve` runs).
pub fn app(agent: &AgentMcp, state: AppState) -> Router {
    Router::new()
        .route(
            "/hello",
            get(|State(s): State<AppState>| async move { s.greeting.to_string() }),
        )
        .nest_service("/agents/mcp", agent.http_service())
        .with_state(state)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load(None)?;
    let agent = AgentMcp::start(&config).await?;
    let state = AppState {
        greeting: Arc::from("hello from the host app"),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    eprintln!("MCP at http://{}/agents/mcp", listener.local_addr()?);
    axum::serve(listener, app(&agent, state)).await?;
    Ok(())
}
