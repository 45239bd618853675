//! The full stack behind a stdio loop, as a library user would write it.
//!
//! ```sh
//! echo '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
//!   | cargo run --example stdio_adapter
//! ```

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use tokio::io::{AsyncRead, AsyncWrite};

/// Serves MCP over any pair of byte streams (a pipe, a socket, a child's stdio) until the input
/// ends, then stops the agent.
pub async fn run<R, W>(agent: AgentMcp, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    agent_mcp::transport::stdio::serve(agent.stack(), input, output).await?;
    agent.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load(None)?;
    let agent = AgentMcp::start(&config).await?;
    run(agent, tokio::io::stdin(), tokio::io::stdout()).await?;
    Ok(())
}
