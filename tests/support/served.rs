//! The server with its operator and oversight routes (the page at `/`, `/api/…`) in this
//! process on 127.0.0.1:0, as `agent-mcp serve` serves them.

#![allow(dead_code)]

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;

use super::harness::HttpClient;

pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    pub async fn start(config: &Config) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = AgentMcp::start(config).await.expect("start");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let ops = server.ops_endpoints(None);
            let _ = agent_mcp::transport::server::serve_with_ops(
                listener,
                server.http_service(),
                Some(std::sync::Arc::new(ops)),
                async {
                    let _ = stopped.await;
                },
            )
            .await;
            server.shutdown().await;
        });
        Served {
            base: format!("http://{addr}"),
            stop,
            task,
        }
    }

    /// An MCP client of `/mcp` with the bearer `token`.
    pub fn client(&self, token: &str) -> HttpClient {
        let mut client = HttpClient::new(&format!("{}/mcp", self.base));
        client.set_token(token);
        client
    }

    /// Stops the server and waits for it to let go of the store.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}
