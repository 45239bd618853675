//! How the peers of `scripts/bench.sh` listen and serve: on 127.0.0.1, any port, its MCP URL
//! the first line of stdout (what the script waits for); HTTP/1.1 by hyper with its defaults,
//! one task per connection, on the runtime they run in.

use std::error::Error;
use std::io::Write;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Binds the listener, prints its URL and serves every connection with `service` until the
/// process ends; says on stderr and returns when the port cannot be bound.
pub async fn serve_http1<S>(service: S)
where
    S: HttpService<Incoming> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<Box<dyn Error + Send + Sync>>,
    S::ResBody: Send + 'static,
    <S::ResBody as Body>::Data: Send,
    <S::ResBody as Body>::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind: {e}");
            return;
        }
    };
    if let Ok(addr) = listener.local_addr() {
        println!("http://{addr}/mcp");
        let _ = std::io::stdout().flush();
    }
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let service = service.clone();
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
