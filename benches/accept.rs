//! `agent_run` with 4 × 5 MiB images over HTTP: the time from sending the request to the
//! answer (the task is durable by then: SQLite store, `synchronous = FULL`), against its own
//! floor, each part measured in the same run on the same bytes. Target: at most 1.5× the floor.
//!
//! The floor is what any server that accepts this request durably must do at least:
//! - the HTTP transfer of the body to a loopback hyper server that only reads it;
//! - a bare `serde_json` parse of the body (into a `Value`);
//! - base64-decoding the 4 images and hashing them with SHA-256 (in 48 KiB chunks, as the
//!   images layer does);
//! - writing the decoded image bytes to a file in the store's folder and `fdatasync`-ing it (the
//!   least the store must put on disk before answering; the file is overwritten in place each
//!   round, as SQLite reuses its WAL).
//!
//! It also prints the write + `fdatasync` of the images' base64 text (what the store keeps,
//! since that is what Ollama takes), for reference; the floor uses the decoded bytes.
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

#[path = "support/runtime.rs"]
mod runtime;

use std::convert::Infallible;
use std::io::{Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

use agent_mcp::AgentMcp;
use agent_mcp::config::{Config, StoreBackend, Synchronous};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

const IMAGES: usize = 4;
const IMAGE_BYTES: usize = 5 * 1024 * 1024;
const ROUNDS: usize = 9;
/// Most the accept may take, as a multiple of its floor.
const TARGET: f64 = 1.5;

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
    let runtime = runtime::start(&mut tokio::runtime::Builder::new_multi_thread());
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("accept benchmark failed: {e}");
        std::process::exit(1);
    }
}

/// Base64 characters decoded per step, as the images layer does (a multiple of 4).
const CHUNK_CHARS: usize = 64 * 1024;

/// The base64 text of every image in `body`, as the client sent it.
fn images_of(body: &[u8]) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let value: Value = serde_json::from_slice(body)?;
    let images = value
        .pointer("/params/arguments/images")
        .and_then(Value::as_array)
        .ok_or("the body has no images")?;
    Ok(images
        .iter()
        .filter_map(|i| i.get("data_base64").and_then(Value::as_str))
        .map(str::to_owned)
        .collect())
}

/// Decodes every image chunk by chunk into SHA-256; returns the hashes (so the work is used).
fn decode_and_hash(images: &[String]) -> Result<Vec<[u8; 32]>, base64::DecodeSliceError> {
    let mut scratch = vec![0u8; CHUNK_CHARS / 4 * 3];
    images
        .iter()
        .map(|text| {
            let mut hasher = Sha256::new();
            for chunk in text.as_bytes().chunks(CHUNK_CHARS) {
                let n = STANDARD.decode_slice(chunk, &mut scratch)?;
                hasher.update(&scratch[..n]);
            }
            Ok(hasher.finalize().into())
        })
        .collect()
}

/// Overwrites `file` from its start with `parts` and waits until they are on disk.
fn write_and_sync(file: &mut std::fs::File, parts: &[&[u8]]) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(0))?;
    for part in parts {
        file.write_all(part)?;
    }
    file.sync_data()
}

/// A loopback HTTP/1.1 server (the same hyper setup as `agent-mcp serve`) that reads each
/// request body whole and answers an empty 200: the transfer part of the floor.
async fn reading_server(
    shutdown: tokio::sync::oneshot::Receiver<()>,
) -> std::io::Result<(String, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let service = tower::service_fn(|req: http::Request<hyper::body::Incoming>| async move {
        let read = req.into_body().collect().await.map(|c| c.to_bytes().len());
        let status = match read {
            Ok(_) => http::StatusCode::OK,
            Err(_) => http::StatusCode::BAD_REQUEST,
        };
        let mut response: http::Response<agent_mcp::transport::http::McpBody> =
            http::Response::new(http_body_util::Either::Left(Full::new(Bytes::new())));
        *response.status_mut() = status;
        Ok::<_, Infallible>(response)
    });
    let serving = tokio::spawn(agent_mcp::transport::server::serve(
        listener,
        service,
        async {
            let _ = shutdown.await;
        },
    ));
    Ok((url, serving))
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
) -> Result<(reqwest::StatusCode, String), reqwest::Error> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "agent_run")
        .body(body)
        .send()
        .await?;
    let status = response.status();
    Ok((status, response.text().await?))
}

/// One figure per round for each part, medians printed at the end.
#[derive(Default)]
struct Samples {
    transfer: Vec<Duration>,
    parse: Vec<Duration>,
    decode_hash: Vec<Duration>,
    write_decoded: Vec<Duration>,
    write_base64: Vec<Duration>,
    accept: Vec<Duration>,
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store_dir = dir.path().join("store");
    let mut config = Config::default();
    // Nothing listens on the discard port: each task fails at once, after it was accepted.
    config.ollama.url = "http://127.0.0.1:9".into();
    config.store.backend = StoreBackend::Sqlite;
    config.store.path = Some(store_dir.join("agent-mcp.db"));
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
    let (stop_reader, reader_stopped) = tokio::sync::oneshot::channel::<()>();
    let (reader_url, reading) = reading_server(reader_stopped).await?;
    // Beside the database, so the same filesystem and disk.
    let mut floor_file = std::fs::File::create(store_dir.join("floor-write.bin"))?;
    let client = reqwest::Client::new();

    let mut samples = Samples::default();
    let mut body_len = 0;
    let mut decoded_len = 0;
    let mut base64_len = 0;
    // Round 0 warms up connections, caches and the files; it is not counted.
    for round in 0..=ROUNDS {
        let body = body(round);
        body_len = body.len();
        let counted = round > 0;
        let keep = |v: &mut Vec<Duration>, d: Duration| {
            if counted {
                v.push(d);
            }
        };

        let started = Instant::now();
        let (status, _) = post(&client, &reader_url, body.clone()).await?;
        keep(&mut samples.transfer, started.elapsed());
        if !status.is_success() {
            return Err(format!("the reading server answered {status}").into());
        }

        let started = Instant::now();
        let value: Value = serde_json::from_slice(&body)?;
        keep(&mut samples.parse, started.elapsed());
        drop(value);

        let images = images_of(&body)?;
        let started = Instant::now();
        let hashes = decode_and_hash(&images)?;
        keep(&mut samples.decode_hash, started.elapsed());
        std::hint::black_box(hashes);

        let decoded: Vec<Vec<u8>> = images
            .iter()
            .map(|text| STANDARD.decode(text))
            .collect::<Result<_, _>>()?;
        decoded_len = decoded.iter().map(Vec::len).sum();
        base64_len = images.iter().map(String::len).sum();
        let parts: Vec<&[u8]> = decoded.iter().map(Vec::as_slice).collect();
        let started = Instant::now();
        write_and_sync(&mut floor_file, &parts)?;
        keep(&mut samples.write_decoded, started.elapsed());
        let parts: Vec<&[u8]> = images.iter().map(String::as_bytes).collect();
        let started = Instant::now();
        write_and_sync(&mut floor_file, &parts)?;
        keep(&mut samples.write_base64, started.elapsed());
        drop((decoded, images));

        let started = Instant::now();
        let (status, text) = post(&client, &url, body).await?;
        keep(&mut samples.accept, started.elapsed());
        if !status.is_success() || !text.contains("task_id: ") || text.contains("\"isError\":true")
        {
            return Err(format!("agent_run was not accepted ({status}): {text:.300}").into());
        }
        // Let the worker take the task and fail it, and the writer checkpoint the WAL, so the
        // next round starts on an idle store and disk.
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    let spread = |v: &[Duration]| {
        let lo = v.iter().min().copied().unwrap_or_default();
        let hi = v.iter().max().copied().unwrap_or_default();
        format!("{:.1}–{:.1} ms", ms(lo), ms(hi))
    };
    let line = |name: &str, v: &[Duration]| {
        println!(
            "{name:<44} {:>8.1} ms  (range {})",
            ms(median(v.to_vec())),
            spread(v)
        );
    };
    let mib = |n: usize| n as f64 / (1024.0 * 1024.0);
    println!(
        "body: {:.1} MiB ({IMAGES} images: {:.1} MiB decoded, {:.1} MiB base64), {ROUNDS} rounds, medians",
        mib(body_len),
        mib(decoded_len),
        mib(base64_len)
    );
    line(
        "HTTP transfer to a server that only reads",
        &samples.transfer,
    );
    line("serde_json parse (Value)", &samples.parse);
    line(
        "base64 decode + SHA-256 of the images",
        &samples.decode_hash,
    );
    line(
        "write + fdatasync of the decoded images",
        &samples.write_decoded,
    );
    let floor = median(samples.transfer.clone())
        + median(samples.parse.clone())
        + median(samples.decode_hash.clone())
        + median(samples.write_decoded.clone());
    println!(
        "{:<44} {:>8.1} ms",
        "floor (sum of the four above)",
        ms(floor)
    );
    line(
        "(write + fdatasync of the base64 text)",
        &samples.write_base64,
    );
    line(
        "agent_run accepted over HTTP (SQLite, FULL)",
        &samples.accept,
    );
    let ratio = median(samples.accept.clone()).as_secs_f64() / floor.as_secs_f64();
    println!(
        "ratio {ratio:.2} (accepted / floor; target <= {TARGET}): {}",
        if ratio <= TARGET { "met" } else { "MISSED" }
    );
    let _ = stop.send(());
    let _ = stop_reader.send(());
    let _ = serving.await;
    let _ = reading.await;
    server.shutdown().await;
    Ok(())
}
