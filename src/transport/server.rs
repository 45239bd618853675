//! The standalone HTTP server: hyper (HTTP/1.1) serving the MCP edge at `/mcp`, and the
//! operator endpoints beside it.
//!
//! What one peer can make it hold is bounded before any request is parsed: at most
//! [`ServerOptions::max_connections`] connections (the one idle longest is closed to make room
//! for a new one, see `Connections`), each with at most [`MAX_BUF_BYTES`] of hyper buffers,
//! headers within `http.header_timeout`; bodies are bounded by the edge (its body cap, deadline
//! and shared budget). When `accept` fails (out of file descriptors, say), the loop backs off,
//! doubling its pause up to a second, and logs one line a minute, instead of spinning.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, warn};

use crate::transport::connections::{Admitted, Connections, InRequest};
use crate::transport::http::McpBody;

/// How long in-flight requests may take to finish after shutdown is asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// hyper's read and write buffer cap per connection (its default is about 400 KiB): request
/// headers must fit (they are a few hundred bytes for MCP), and a stream's writes wait for
/// the client beyond it. 1,024 connections hold at most 64 MiB of it.
pub const MAX_BUF_BYTES: usize = 64 * 1024;

/// File descriptors kept for everything but client connections (`http.max_connections` is
/// kept this far below the descriptor limit); a configuration value, so it lives there.
pub use crate::config::RESERVED_DESCRIPTORS;

/// The connection-level settings of [`serve_with_options`]. The body cap, deadline and budget
/// live in the MCP edge ([`HttpRules`](crate::transport::http::HttpRules)), which reads bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// How long a client may take to send its request headers (`http.header_timeout`).
    pub header_read: Duration,
    /// Most connections open at once (`http.max_connections`, fitted below the descriptor
    /// limit by [`ServerOptions::from_config`]).
    pub max_connections: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        let http = crate::config::HttpConfig::default();
        Self {
            header_read: http.header_timeout,
            max_connections: http.max_connections,
        }
    }
}

impl ServerOptions {
    /// `http.header_timeout` and `http.max_connections`, the latter lowered to fit the
    /// process's soft `RLIMIT_NOFILE` less [`RESERVED_DESCRIPTORS`] (raise that limit first:
    /// [`raise_descriptor_limit`]).
    pub fn from_config(http: &crate::config::HttpConfig) -> Self {
        Self {
            header_read: http.header_timeout,
            max_connections: fit_to_descriptors(http.max_connections, descriptor_limit()),
        }
    }
}

/// The connection cap that fits `limit` descriptors (`None`: no limit known).
fn fit_to_descriptors(configured: usize, limit: Option<u64>) -> usize {
    match limit {
        Some(limit) => {
            let room = limit.saturating_sub(RESERVED_DESCRIPTORS).max(16);
            configured.min(usize::try_from(room).unwrap_or(usize::MAX))
        }
        None => configured,
    }
}

/// The soft `RLIMIT_NOFILE` of this process, if it has one.
pub fn descriptor_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    None
}

/// What [`raise_descriptor_limit`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorLimit {
    /// The soft limit before (`None`: unlimited or unknown).
    pub was: Option<u64>,
    /// The soft limit now.
    pub now: Option<u64>,
}

/// The largest soft limit asked for when the hard limit is unlimited (Linux caps it at
/// `fs.nr_open` anyway).
const NOFILE_CEILING: u64 = 1 << 20;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit: the common soft limit of 1,024 would
/// otherwise cap the server's connections far below what the machine allows. Call it once at
/// start, before spawning threads that open files. A failure leaves the limit as it was.
pub fn raise_descriptor_limit() -> DescriptorLimit {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        let was = limit.current;
        let target = limit.maximum.unwrap_or(NOFILE_CEILING);
        if was.is_some_and(|soft| soft < target) {
            let raised = Rlimit {
                current: Some(target),
                maximum: limit.maximum,
            };
            if let Err(e) = setrlimit(Resource::Nofile, raised) {
                warn!(error = %e, "cannot raise the file descriptor limit to {target}");
            }
        }
        DescriptorLimit {
            was,
            now: getrlimit(Resource::Nofile).current,
        }
    }
    #[cfg(not(unix))]
    DescriptorLimit {
        was: None,
        now: None,
    }
}

/// The former name of [`ServerOptions`].
#[deprecated(since = "0.1.0", note = "use ServerOptions and serve_with_options")]
pub type ServerTimeouts = ServerOptions;

/// Serves `mcp` at `POST /mcp` on `listener` until `shutdown` resolves, then lets in-flight
/// requests finish (bounded).
pub async fn serve<S: HttpEdge>(
    listener: TcpListener,
    mcp: S,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with_options(listener, mcp, None, ServerOptions::default(), shutdown).await
}

/// What the server serves: the MCP HTTP edge ([`McpHttpService`](crate::transport::http::McpHttpService)),
/// or any cloneable service like it.
pub trait HttpEdge:
    Service<Request<Incoming>, Response = Response<McpBody>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<S> HttpEdge for S
where
    S: Service<Request<Incoming>, Response = Response<McpBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
}

/// Routes the server answers beside `/mcp`, for `GET` requests only: the operator endpoints
/// ([`OpsEndpoints`](crate::ops::OpsEndpoints) is one). The server knows them by this trait
/// alone, so the HTTP server does not depend on what answers them.
pub trait OpsRoutes: Send + Sync + 'static {
    /// The answer to `req`, or `None` when no route of these matches (the server answers 404).
    fn answer<'a>(&'a self, req: &'a Request<Incoming>) -> OpsAnswer<'a>;

    /// The answer of a page or its routes to `req` (any method), asked before
    /// [`OpsRoutes::answer`]; `None` when none matches. None by default.
    fn page<'a>(&'a self, _req: &'a Request<Incoming>) -> PageAnswer<'a> {
        Box::pin(std::future::ready(None))
    }
}

/// What [`OpsRoutes::answer`] returns: the response, when a route matched.
pub type OpsAnswer<'a> = Pin<Box<dyn Future<Output = Option<Response<Full<Bytes>>>> + Send + 'a>>;

/// [`serve`], plus the operator endpoints (`GET /healthz`, `/readyz`, `/metrics`).
pub async fn serve_with_ops<S: HttpEdge>(
    listener: TcpListener,
    mcp: S,
    ops: Option<Arc<dyn OpsRoutes>>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with_options(listener, mcp, ops, ServerOptions::default(), shutdown).await
}

/// [`serve_with_ops`] with the given connection settings
/// (`ServerOptions::from_config(&config.http)`).
pub async fn serve_with_options<S: HttpEdge>(
    listener: TcpListener,
    mcp: S,
    ops: Option<Arc<dyn OpsRoutes>>,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let connections = Connections::new(options.max_connections);
    let mut backoff = AcceptBackoff::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => {
                    backoff.reset();
                    pair
                }
                Err(e) => {
                    tokio::select! {
                        () = backoff.wait(&e) => continue,
                        () = &mut shutdown => break,
                    }
                }
            },
            () = &mut shutdown => break,
        };
        let slot = match connections.admit() {
            Admitted::Open(slot) => Arc::new(slot),
            Admitted::Full => {
                crate::metrics::record_http_refusal("connections");
                refuse_connection(stream);
                continue;
            }
        };
        // One edge per connection, called in place: HTTP/1.1 serves its requests one at a
        // time, so no request needs a clone of its own (the stack inside is cloned once, by
        // the endpoint), and hyper holds only the edge's small future.
        let edge = std::cell::RefCell::new(mcp.clone());
        let ops = ops.clone();
        let in_conn = slot.clone();
        let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            // Busy until the answer's body is written or dropped: never closed for room.
            let request = in_conn.request();
            req.extensions_mut().insert(peer);
            let answer = if req.uri().path() == "/mcp" {
                Either::Left(call_edge(&edge, req))
            } else {
                Either::Right(Box::pin(other(req, ops.clone())))
            };
            async move {
                let resp = match answer {
                    Either::Left(mcp) => mcp.await.map(Either::Right),
                    Either::Right(other) => other.await,
                };
                Ok::<_, Infallible>(resp.map(|body| TrackedBody {
                    body,
                    _request: request,
                }))
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(options.header_read)
            .max_buf_size(MAX_BUF_BYTES)
            .serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            tokio::select! {
                ended = conn => if let Err(e) = ended {
                    debug!(%peer, error = %e, "connection ended with an error");
                },
                () = slot.closed().cancelled() => debug!(%peer, "idle connection closed to make room"),
            }
            drop(slot);
        });
    }
    drop(listener);
    let drained = async {
        graceful.shutdown().await;
        // hyper reports a connection done before its task drops the service it was given,
        // and with it the server's handles (the task store's among them). Wait for those
        // too: a caller that stops this server and starts another on the same store file
        // found it still locked by the first (a flake of `oversight`'s restart test).
        while !connections.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        () = drained => {},
        () = tokio::time::sleep(DRAIN_TIMEOUT) => warn!("in-flight requests did not finish within {DRAIN_TIMEOUT:?}"),
    }
    Ok(())
}

type Answer = Either<PageBody, McpBody>;

/// The body of a page or operator answer: whole, or a stream (the oversight page's events).
pub type PageBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// What [`OpsRoutes::page`] returns: the response, when a route matched.
pub type PageAnswer<'a> = Pin<Box<dyn Future<Output = Option<Response<PageBody>>> + Send + 'a>>;

/// The MCP edge's answer to `req`: the connection's `edge` is called in place when it is ready
/// (as it always is), with no clone; otherwise a clone of its own waits for readiness.
fn call_edge<S: HttpEdge>(
    edge: &std::cell::RefCell<S>,
    req: Request<Incoming>,
) -> impl Future<Output = Response<McpBody>> + Send + use<S> {
    let mut edge = edge.borrow_mut();
    let called = match edge.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
        Poll::Ready(Ok(())) => Either::Left(edge.call(req)),
        Poll::Pending => Either::Right(edge.clone().oneshot(req)),
    };
    async move {
        let Ok(resp) = match called {
            Either::Left(future) => future.await,
            Either::Right(oneshot) => oneshot.await,
        };
        resp
    }
}

/// The pages and their routes `ops` serves (any method), then its operator endpoints (GET
/// only), anything else 404.
async fn other(req: Request<Incoming>, ops: Option<Arc<dyn OpsRoutes>>) -> Response<Answer> {
    if let Some(ops) = &ops
        && let Some(resp) = ops.page(&req).await
    {
        return resp.map(Either::Left);
    }
    if let Some(ops) = ops.filter(|_| req.method() == http::Method::GET)
        && let Some(resp) = ops.answer(&req).await
    {
        return resp.map(|body| Either::Left(body.boxed()));
    }
    let mut resp = Response::new(Full::new(Bytes::from_static(
        b"Not Found: the MCP endpoint is /mcp\n",
    )));
    *resp.status_mut() = StatusCode::NOT_FOUND;
    resp.map(|body| Either::Left(body.boxed()))
}

/// Every slot is busy with a request: a short 503 written without hyper, then the
/// connection is closed (it would otherwise wait in the backlog for a slot).
fn refuse_connection(stream: TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
        Retry-After: 1\r\nConnection: close\r\nContent-Length: 79\r\n\r\n\
        Service Unavailable: every connection (http.max_connections) is busy; retry\n";
    // A fresh socket's send buffer takes this at once; a peer that cannot read it loses it.
    let _ = stream.try_write(BUSY);
}

/// An answer's body that keeps its connection busy until it is written or dropped.
struct TrackedBody<B> {
    body: B,
    _request: InRequest,
}

impl<B: Body + Unpin> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The pause after a failed `accept`: 5 ms, doubled per failure in a row up to a second, and
/// one warning a minute naming the error and how often it happened.
#[derive(Debug)]
struct AcceptBackoff {
    pause: Duration,
    failures: u64,
    warned: Option<Instant>,
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self {
            pause: Self::FIRST,
            failures: 0,
            warned: None,
        }
    }
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);
    const WARN_EVERY: Duration = Duration::from_secs(60);

    fn reset(&mut self) {
        self.pause = Self::FIRST;
    }

    async fn wait(&mut self, error: &std::io::Error) {
        self.failures += 1;
        if self
            .warned
            .is_none_or(|at| at.elapsed() >= Self::WARN_EVERY)
        {
            warn!(
                error = %error,
                failures = self.failures,
                "accept failed (out of file descriptors? see http.max_connections); backing off"
            );
            self.warned = Some(Instant::now());
            self.failures = 0;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Self::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_fits_below_the_descriptor_limit() {
        assert_eq!(fit_to_descriptors(1024, None), 1024);
        assert_eq!(fit_to_descriptors(1024, Some(1024)), 896);
        assert_eq!(fit_to_descriptors(1024, Some(65_536)), 1024);
        assert_eq!(fit_to_descriptors(1024, Some(100)), 16);
    }

    #[tokio::test(start_paused = true)]
    async fn accept_errors_back_off_up_to_a_second() {
        let mut backoff = AcceptBackoff::default();
        let error = std::io::Error::from_raw_os_error(24);
        let started = tokio::time::Instant::now();
        for _ in 0..12 {
            backoff.wait(&error).await;
        }
        // 5 + 10 + … + 640 ms, then a second each: well past a spin, yet it keeps trying.
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(1275 + 4000), "{waited:?}");
        assert_eq!(backoff.pause, AcceptBackoff::MAX);
        backoff.reset();
        assert_eq!(backoff.pause, AcceptBackoff::FIRST);
    }
}
