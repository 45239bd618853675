//! Servers of the tests (the fake Ollama, the TCP proxy) on a thread of their own with a Tokio
//! runtime of their own, so that they keep answering while a test blocks (e.g. waiting on a
//! spawned `agent-mcp` process), under any test runtime flavour.

#![allow(dead_code)]

use std::future::Future;

use tokio::sync::oneshot;

/// Runs `serve(listener)` on the thread `name` with `workers` runtime threads, until it ends
/// or the returned sender is used or dropped; then every connection and task it started is
/// dropped, hanging ones included. `listener` must be non-blocking.
pub fn serve_in_background<F>(
    name: String,
    workers: usize,
    listener: std::net::TcpListener,
    serve: impl FnOnce(tokio::net::TcpListener) -> F + Send + 'static,
) -> oneshot::Sender<()>
where
    F: Future<Output = ()>,
{
    let (stop, stopped) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("{name}: runtime: {e}"));
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                tokio::select! {
                    () = serve(listener) => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_background();
        })
        .expect("spawn a server thread");
    stop
}
