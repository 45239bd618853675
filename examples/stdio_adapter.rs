//! The full stack behind a stdio loop, as a library user would write it.
//!
//! ```sh
//! echo '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
//!   | cargo run --example stdio_adapter
//! ```

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load(None)?;
    let agent = AgentMcp::start(&config).await?;
    agent_mcp::transport::stdio::serve(agent.stack(), tokio::io::stdin(), tokio::io::stdout())
        .await?;
    agent.shutdown().await;
    Ok(())
}
