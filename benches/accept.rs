//! `agent_run` with 4 × 5 MiB images over HTTP: the time from sending the request to the
//! answer (the task is durable by then: SQLite store, `synchronous = FULL`), against a plain
//! `serde_json` parse of the same body. Target: at most 3× the parse.
//!
//! ```text
//! cargo bench --bench accept
//! ```
//!
//! The server is the real HTTP edge and full stack (`AgentMcp::http_service`, served by
//! `transport::server::serve`) on loopback, with audit on and a rate limit that never
//! triggers. Every request carries fresh image bytes so the store's per-hash dedupe cannot
//! skip a write. Between requests the benchmark waits until the worker has finished the
//! previous task (no model answers, so it fails at once), so the store is idle at each send.

use std::time::{Duration, Instant};

use agent_mcp::AgentMcp;
use agent_mcp::config::{Config, StoreBackend, Synchronous};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const IMAGES: usize = 4;
const IMAGE_BYTES: usize = 5 * 1024 * 1024;
const ROUNDS: usize = 9;

/// A PNG signature followed by pseudo-random bytes unique to `seed`.
fn image(seed: u64) -> Vec<u8> {
    let mut data = Vec::with_capacity(IMAGE_BYTES);
    data.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while data.len() < IMAGE_BYTES {
        // xorshift64: cheap, and incompressible enough for a store.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(IMAGE_BYTES);
    data
}

fn body(round: usize) -> Bytes {
    let images: Vec<Value> = (0..IMAGES)
        .map(|i| {
            json!({"mime_type": "image/png",
                   "data_base64": STANDARD.encode(image((round * IMAGES + i) as u64 + 1))})
        })
        .collect();
    let msg = json!({
        "jsonrpc": "2.0", "id": round, "method": "tools/call",
        "params": {
            "name": "agent_run",
            "arguments": {"request": "describe these images", "images": images},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    Bytes::from(serde_json::to_vec(&msg).unwrap_or_default())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return;
        }
    };
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("accept benchmark failed: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut config = Config::default();
    // Nothing listens on the discard port: each task fails at once, after it was accepted.
    config.ollama.url = "http://127.0.0.1:9".into();
    config.store.backend = StoreBackend::Sqlite;
    config.store.path = Some(dir.path().join("store").join("agent-mcp.db"));
    config.store.synchronous = Synchronous::Full;
    config.rate_limit.per_minute = u32::MAX;
    config.rate_limit.burst = u32::MAX;
    config.rate_limit.reads.per_minute = u32::MAX;
    config.rate_limit.reads.burst = u32::MAX;
    config.audit.enabled = true;
    config.audit.file = Some(dir.path().join("audit.jsonl"));
    let server = AgentMcp::start(&config).await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(agent_mcp::transport::server::serve(
        listener,
        server.http_service(),
        async {
            let _ = stopped.await;
        },
    ));
    let client = reqwest::Client::new();

    let mut accepted = Vec::new();
    let mut parsed = Vec::new();
    let mut body_len = 0;
    // Round 0 warms up connections, caches and the SQLite file; it is not counted.
    for round in 0..=ROUNDS {
        let body = body(round);
        body_len = body.len();
        let started = Instant::now();
        let value: Value = serde_json::from_slice(&body)?;
        let parse = started.elapsed();
        drop(value);

        let started = Instant::now();
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "agent_run")
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        let accept = started.elapsed();
        if !status.is_success() || !text.contains("task_id: ") || text.contains("\"isError\":true")
        {
            return Err(format!("agent_run was not accepted ({status}): {text:.300}").into());
        }
        if round > 0 {
            accepted.push(accept);
            parsed.push(parse);
        }
        // Let the worker take the task and fail it, so the next round starts on an idle store.
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    let (accept, parse) = (median(accepted.clone()), median(parsed.clone()));
    let spread = |v: &[Duration]| {
        let lo = v.iter().min().copied().unwrap_or_default();
        let hi = v.iter().max().copied().unwrap_or_default();
        format!("{:.1}–{:.1} ms", ms(lo), ms(hi))
    };
    println!(
        "body: {:.1} MiB ({IMAGES} images of {} MiB decoded), {ROUNDS} rounds, medians",
        body_len as f64 / (1024.0 * 1024.0),
        IMAGE_BYTES / (1024 * 1024)
    );
    println!(
        "serde_json parse:     {:>8.1} ms  (range {})",
        ms(parse),
        spread(&parsed)
    );
    println!(
        "accepted over HTTP:   {:>8.1} ms  (range {})",
        ms(accept),
        spread(&accepted)
    );
    println!(
        "ratio {:.2} (accepted / parse; target <= 3)",
        accept.as_secs_f64() / parse.as_secs_f64()
    );
    let _ = stop.send(());
    let _ = serving.await;
    server.shutdown().await;
    Ok(())
}
