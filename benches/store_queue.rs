//! Queues 100 000 tasks in the real `agent-mcp serve` binary with the SQLite store and prints
//! the server's RSS and `agent_status` latency (p50/p99, one loopback HTTP round trip each),
//! first against an empty queue, then with the whole queue waiting.
//!
//! Half the tasks carry a distinct image each, so the image bytes queued dwarf the process:
//! RSS must stay flat across that phase, because queued tasks keep their images on disk.
//!
//! ```text
//! cargo bench --bench store_queue
//! AGENT_MCP_BENCH_TASKS=20000 AGENT_MCP_BENCH_IMAGE_KIB=16 cargo bench --bench store_queue
//! ```
//!
//! The fake Ollama never answers, so the first task stays `running` and the rest stay queued.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{
    HttpClient, agent_mcp_command, field, listening_url, test_config_sqlite, tool_text,
    write_config,
};

const CONCURRENCY: usize = 16;
const STATUS_SAMPLES: usize = 2_000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident set size of `pid` in MiB, from /proc.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    kib / 1024.0
}

/// A distinct image: a PNG signature, the index, then filler derived from the index.
fn image(index: usize, bytes: usize) -> String {
    let mut data = Vec::with_capacity(bytes);
    data.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    data.extend_from_slice(&(index as u64).to_le_bytes());
    let mut x = (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while data.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.push(x as u8);
    }
    STANDARD.encode(&data)
}

async fn call(client: &HttpClient, name: &str, arguments: Value) -> String {
    let r = client
        .modern("tools/call", json!({"name": name, "arguments": arguments}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["result"]["isError"], json!(false), "{}", r.text);
    tool_text(&r.body["result"])
}

/// p50 and p99 of `agent_status` for `task_id`, in microseconds.
async fn status_latency(client: &HttpClient, task_id: &str) -> (f64, f64) {
    let mut samples = Vec::with_capacity(STATUS_SAMPLES);
    for _ in 0..STATUS_SAMPLES {
        let start = Instant::now();
        call(client, "agent_status", json!({"task_id": task_id})).await;
        samples.push(start.elapsed());
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.50).as_secs_f64() * 1e6, at(0.99).as_secs_f64() * 1e6)
}

/// Queues `count` tasks from `CONCURRENCY` clients, each reusing one session. Returns the last
/// task id and the seconds taken.
async fn queue(client: &HttpClient, count: usize, image_bytes: Option<usize>) -> (String, f64) {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let client = client.clone();
        let next = next.clone();
        workers.push(tokio::spawn(async move {
            let mut session: Option<String> = None;
            let mut last = String::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return last;
                }
                let mut args = json!({"request": format!("queued task {i}: summarise the repo")});
                if let Some(s) = &session {
                    args["session_id"] = json!(s);
                }
                if let Some(bytes) = image_bytes {
                    args["images"] =
                        json!([{"mime_type": "image/png", "data_base64": image(i, bytes)}]);
                }
                let text = call(&client, "agent_run", args).await;
                session.get_or_insert_with(|| field(&text, "session_id"));
                last = field(&text, "task_id");
            }
        }));
    }
    let mut last = String::new();
    for w in workers {
        let id = w.await.expect("worker");
        if !id.is_empty() {
            last = id;
        }
    }
    (last, start.elapsed().as_secs_f64())
}

fn file_mib(path: &std::path::Path) -> f64 {
    std::fs::metadata(path)
        .map(|m| m.len() as f64 / 1048576.0)
        .unwrap_or(0.0)
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; anything else (e.g. `cargo test --benches`) only checks
    // that this builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let tasks = env_usize("AGENT_MCP_BENCH_TASKS", 100_000);
    let image_kib = env_usize("AGENT_MCP_BENCH_IMAGE_KIB", 16);
    let fake = FakeOllama::hanging().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("state/agent-mcp.db");
    let mut config = test_config_sqlite(&fake.url(), &db);
    config.rate_limit.enabled = false;
    config.audit.enabled = false;
    // The whole point is a long queue: its caps out of the way.
    config.mcp.max_queued_tasks = usize::MAX;
    config.mcp.max_queued_per_caller = usize::MAX;
    let config_path = write_config(&dir, &config);

    let args = ["serve", "--bind", "127.0.0.1:0"];
    let mut child = agent_mcp_command(&[], &args, &config_path, dir.path(), "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-mcp");
    let pid = child.id().expect("pid");
    let url = listening_url(&mut child).await;
    let client = HttpClient::new(&url);

    println!(
        "agent-mcp store_queue: {tasks} tasks, SQLite synchronous=FULL, {CONCURRENCY} clients"
    );
    let blocker = field(
        &call(&client, "agent_run", json!({"request": "the running task"})).await,
        "task_id",
    );
    while fake.in_flight_chats() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (p50, p99) = status_latency(&client, &blocker).await;
    let rss_empty = rss_mib(pid);
    println!(
        "empty queue:        RSS {rss_empty:8.1} MiB   agent_status p50 {p50:7.0} µs  p99 {p99:7.0} µs"
    );

    let plain = tasks / 2;
    let (_, secs) = queue(&client, plain, None).await;
    let rss_plain = rss_mib(pid);
    println!(
        "+{plain} tasks:      RSS {rss_plain:8.1} MiB   queued in {secs:.1} s ({:.0} agent_run/s)",
        plain as f64 / secs
    );

    let with_images = tasks - plain;
    let image_bytes = image_kib * 1024;
    let (last, secs) = queue(&client, with_images, Some(image_bytes)).await;
    let rss_full = rss_mib(pid);
    println!(
        "+{with_images} with a distinct {image_kib} KiB image each ({:.0} MiB of images): \
         RSS {rss_full:.1} MiB   queued in {secs:.1} s ({:.0} agent_run/s)",
        (with_images * image_bytes) as f64 / 1048576.0,
        with_images as f64 / secs
    );

    let queued = call(&client, "agent_status", json!({"task_id": last})).await;
    println!("last task: {}", field(&queued, "message"));
    let (p50, p99) = status_latency(&client, &blocker).await;
    println!("{tasks} queued:      agent_status p50 {p50:7.0} µs  p99 {p99:7.0} µs (running task)");
    let (p50, p99) = status_latency(&client, &last).await;
    println!(
        "{tasks} queued:      agent_status p50 {p50:7.0} µs  p99 {p99:7.0} µs (last in queue)"
    );
    println!(
        "RSS growth over the image phase: {:+.1} MiB; database {:.0} MiB + WAL {:.0} MiB",
        rss_full - rss_plain,
        file_mib(&db),
        file_mib(&db.with_extension("db-wal"))
    );
    let _ = child.start_kill();
    let _ = child.wait().await;
}
