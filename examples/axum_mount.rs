//! An existing axum app mounts agent-mcp next to its own routes.
//!
//! ```sh
//! cargo run --example axum_mount
//! curl -s localhost:3000/health
//! ```

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use axum::Router;
use axum::routing::get;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load(None)?;
    let agent = AgentMcp::start(&config).await?;
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route_service("/mcp", agent.http_service());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    eprintln!("MCP at http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
