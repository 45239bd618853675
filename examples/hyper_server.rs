//! The agent-mcp stack served with bare hyper (hyper-util), no axum.
//!
//! ```sh
//! cargo run --example hyper_server
//! ```

use std::future::Future;
use std::net::SocketAddr;

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Accepts connections until `shutdown` resolves; every request goes to the MCP edge (a
/// `tower::Service<http::Request<_>>`), with the peer address in its extensions.
pub async fn serve(
    listener: TcpListener,
    agent: &AgentMcp,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = &mut shutdown => return Ok(()),
        };
        let edge = agent.http_service();
        let svc = tower::ServiceBuilder::new()
            .map_request(move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert::<SocketAddr>(peer);
                req
            })
            .service(edge);
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc));
            if let Err(e) = conn.await {
                eprintln!("connection from {peer}: {e}");
            }
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load(None)?;
    let agent = AgentMcp::start(&config).await?;
    let listener = TcpListener::bind("127.0.0.1:3001").await?;
    eprintln!("MCP at http://{}/mcp", listener.local_addr()?);
    serve(listener, &agent, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    agent.shutdown().await;
    Ok(())
}
