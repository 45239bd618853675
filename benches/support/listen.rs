//! How the peers of `scripts/bench.sh` listen: on 127.0.0.1, any port, its MCP URL the first
//! line of stdout (what the script waits for).

use std::io::Write;

use tokio::net::TcpListener;

/// The listener, its URL printed; `None` (said on stderr) when the port cannot be bound.
pub async fn listen() -> Option<TcpListener> {
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind: {e}");
            return None;
        }
    };
    if let Ok(addr) = listener.local_addr() {
        println!("http://{addr}/mcp");
        let _ = std::io::stdout().flush();
    }
    Some(listener)
}
