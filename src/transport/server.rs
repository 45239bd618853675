//! The standalone HTTP server: hyper (HTTP/1.1) serving the MCP edge at `/mcp`.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, warn};

use crate::ops::OpsEndpoints;
use crate::transport::http::McpBody;

/// How long in-flight requests may take to finish after shutdown is asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The connection-level timeouts of [`serve_with_timeouts`]. The body timeout lives in the
/// MCP edge ([`HttpRules`](crate::transport::http::HttpRules)), which reads the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerTimeouts {
    /// How long a client may take to send its request headers (`http.header_timeout`).
    pub header_read: Duration,
}

impl Default for ServerTimeouts {
    fn default() -> Self {
        Self::from_config(&crate::config::HttpConfig::default())
    }
}

impl ServerTimeouts {
    pub fn from_config(http: &crate::config::HttpConfig) -> Self {
        Self {
            header_read: http.header_timeout,
        }
    }
}

/// Serves `mcp` at `POST /mcp` on `listener` until `shutdown` resolves, then lets in-flight
/// requests finish (bounded).
pub async fn serve<S>(
    listener: TcpListener,
    mcp: S,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Service<Request<Incoming>, Response = Response<McpBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    serve_with_ops(listener, mcp, None, shutdown).await
}

/// [`serve`], plus the operator endpoints (`GET /healthz`, `/readyz`, `/metrics`).
pub async fn serve_with_ops<S>(
    listener: TcpListener,
    mcp: S,
    ops: Option<OpsEndpoints>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Service<Request<Incoming>, Response = Response<McpBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    serve_with_timeouts(listener, mcp, ops, ServerTimeouts::default(), shutdown).await
}

/// [`serve_with_ops`] with the given connection timeouts
/// (`ServerTimeouts::from_config(&config.http)`).
pub async fn serve_with_timeouts<S>(
    listener: TcpListener,
    mcp: S,
    ops: Option<OpsEndpoints>,
    timeouts: ServerTimeouts,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Service<Request<Incoming>, Response = Response<McpBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let mcp = mcp.clone();
        let ops = ops.clone();
        let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let mcp = mcp.clone();
            let ops = ops.clone();
            req.extensions_mut().insert(peer);
            async move {
                if req.uri().path() != "/mcp" {
                    if let Some(ops) = ops.filter(|_| req.method() == http::Method::GET)
                        && let Some(resp) = ops.handle(req.uri().path()).await
                    {
                        return Ok(resp.map(Either::Left));
                    }
                    let mut resp = Response::new(Full::new(Bytes::from_static(
                        b"Not Found: the MCP endpoint is /mcp\n",
                    )));
                    *resp.status_mut() = StatusCode::NOT_FOUND;
                    return Ok::<_, Infallible>(resp.map(Either::Left));
                }
                mcp.oneshot(req).await
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(timeouts.header_read)
            .serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {},
        () = tokio::time::sleep(DRAIN_TIMEOUT) => warn!("in-flight requests did not finish within {DRAIN_TIMEOUT:?}"),
    }
    Ok(())
}
