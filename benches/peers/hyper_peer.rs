//! The practical ceiling for `scripts/bench.sh`: bare hyper (HTTP/1.1 on a multi-thread tokio
//! runtime like `agent-mcp serve`'s, with hyper's defaults: no timer, so no header-read timeout,
//! which `agent-mcp serve` sets) answering every request with one fixed JSON body, after
//! reading the request body. No MCP work at all.
//!
//! ```text
//! cargo bench --bench hyper_peer -- <body.json>   # prints http://127.0.0.1:PORT/mcp
//! ```

#[path = "../support/listen.rs"]
mod listen;
#[path = "../support/runtime.rs"]
mod runtime;

use std::convert::Infallible;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

fn main() {
    // `cargo bench` passes `--bench`; the body file is the first argument that is not a flag.
    let Some(path) = std::env::args().skip(1).find(|a| !a.starts_with("--")) else {
        eprintln!("usage: hyper_peer <response-body.json>");
        std::process::exit(2);
    };
    let body = match std::fs::read(&path) {
        Ok(b) => Bytes::from(b),
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let runtime = runtime::start(&mut tokio::runtime::Builder::new_multi_thread());
    runtime.block_on(serve(body));
}

async fn serve(body: Bytes) {
    listen::serve_http1(hyper::service::service_fn(move |req: Request<Incoming>| {
        let body = body.clone();
        async move {
            // Read the request like a real server would, then ignore it.
            let _ = req.into_body().collect().await;
            let mut resp = Response::new(Full::new(body));
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok::<_, Infallible>(resp)
        }
    }))
    .await;
}
