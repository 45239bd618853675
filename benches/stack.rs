//! `tools/call agent_status` through the full stack (metrics → audit → auth → rate_limit →
//! tasks → validate → images) vs the bare `AgentService`, in-process, on each store backend:
//! `sqlite` (the default: every call reads the task from the database file) and `memory` (a
//! hash-map lookup: the service does the least work there, so the layers weigh the most).
//!
//! ```text
//! cargo bench --bench stack -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Criterion reports each variant. Then, per store, 101 paired rounds (bare and full stack
//! back to back, alternating which goes first) give the full stack's share of the bare
//! throughput as the median of the per-pair ratios with its quartiles: a shared or busy
//! machine slows both halves of a pair alike, so the ratio is steadier than either time
//! (target ≥ 90 %). Last, each layer alone around the bare service (memory store).
//! `bash scripts/stack-profile.sh` counts instructions per call of each variant instead.

#[path = "support/runtime.rs"]
mod runtime;

/// The allocator of the `agent-mcp` binary, so the counts are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use agent_mcp::AgentMcp;
use agent_mcp::Stack;
use agent_mcp::config::{Config, StoreBackend};
use agent_mcp::layers::audit::{AuditLayer, AuditSink};
use agent_mcp::layers::auth::{AuthLayer, Tokens};
use agent_mcp::layers::images::{ImageRules, ImagesLayer};
use agent_mcp::layers::metrics::MetricsLayer;
use agent_mcp::layers::rate_limit::{RateLimitLayer, RateLimits};
use agent_mcp::layers::validate::ValidateLayer;
use agent_mcp::protocol::{
    McpRequest, McpResponse, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
};
use agent_mcp::service::AgentService;
use criterion::Criterion;
use serde_json::{Map, Value, json};
use std::num::NonZeroU32;
use tower::Layer;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

fn request(id: i64, name: &str, arguments: Value) -> McpRequest {
    let mut params = Map::new();
    params.insert("name".into(), Value::from(name));
    params.insert("arguments".into(), arguments);
    McpRequest::new(
        Some(RequestId::Number(id)),
        "tools/call",
        params,
        RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
    )
}

fn text_of(response: &McpResponse) -> String {
    match &response.payload {
        Payload::Result(r) => r.first_text().unwrap_or_default().to_owned(),
        other => format!("{other:?}"),
    }
}

/// Runs `iters` calls of `req` through `svc`.
async fn run<S>(svc: &mut S, req: &McpRequest, iters: u64) -> Duration
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    let start = Instant::now();
    for _ in 0..iters {
        let Ok(ready) = svc.ready().await;
        let Ok(response) = ready.call(req.clone()).await;
        black_box(response);
    }
    start.elapsed()
}

/// The same `agent_status` call as an HTTP request to the edge (`POST /mcp`, modern era, the
/// headers `scripts/bench.sh` sends): what the `http` variant feeds [`AgentMcp::http_service`].
fn http_request(status_req: &McpRequest) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    let call = status_req.params.tools_call().expect("a tools/call");
    let params = json!({
        "name": call.name,
        "arguments": call.arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}},
    });
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params});
    http::Request::builder()
        .method("POST")
        .uri("http://127.0.0.1/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "agent_status")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string().into_bytes(),
        )))
        .unwrap_or_default()
}

/// Runs `iters` HTTP calls of `req` through the edge and the full stack, reading each body.
async fn run_http(
    svc: &mut agent_mcp::transport::http::McpHttpService<Stack>,
    req: &http::Request<http_body_util::Full<bytes::Bytes>>,
    iters: u64,
) -> Duration {
    use http_body_util::BodyExt;
    let start = Instant::now();
    for _ in 0..iters {
        let mut call = http::Request::new(req.body().clone());
        *call.method_mut() = req.method().clone();
        *call.uri_mut() = req.uri().clone();
        *call.headers_mut() = req.headers().clone();
        let Ok(()) = std::future::poll_fn(|cx| {
            Service::<http::Request<http_body_util::Full<bytes::Bytes>>>::poll_ready(svc, cx)
        })
        .await;
        let Ok(response) = svc.call(call).await;
        let body = response.into_body().collect().await.map(|b| b.to_bytes());
        black_box(body.ok());
    }
    start.elapsed()
}

/// A server on `backend` with one failed task, and the `agent_status` request for it.
fn start(
    runtime: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    backend: StoreBackend,
) -> Result<(AgentMcp, McpRequest, Config), Box<dyn std::error::Error>> {
    let mut config = Config::default();
    // Nothing listens on the discard port: the one task fails fast and then stays put.
    config.ollama.url = "http://127.0.0.1:9".into();
    config.store.backend = backend;
    config.store.path = Some(dir.join(format!("{backend:?}.db")));
    config.rate_limit.per_minute = u32::MAX;
    config.rate_limit.burst = u32::MAX;
    config.rate_limit.reads.per_minute = u32::MAX;
    config.rate_limit.reads.burst = u32::MAX;
    config.audit.enabled = true;
    config.audit.file = Some(dir.join(format!("audit-{backend:?}.jsonl")));
    runtime.block_on(async {
        let server = AgentMcp::start(&config).await?;
        let run_req = request(1, "agent_run", json!({"request": "benchmark task"}));
        let Ok(created) = server.stack().oneshot(run_req).await;
        let text = text_of(&created);
        let task_id = text
            .lines()
            .find_map(|l| l.strip_prefix("task_id: "))
            .ok_or_else(|| format!("agent_run did not answer a task_id: {text}"))?
            .to_owned();
        let status_req = request(2, "agent_status", json!({"task_id": task_id}));
        // Wait for the task to fail, so no background work runs during the measurement.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let Ok(status) = server.service().oneshot(status_req.clone()).await;
            if text_of(&status).contains("status: failed") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("the task did not fail: {}", text_of(&status)).into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Both must answer the same thing, or the comparison means nothing.
        let Ok(a) = server.stack().oneshot(status_req.clone()).await;
        let Ok(b) = server.service().oneshot(status_req.clone()).await;
        let (a, b) = (text_of(&a), text_of(&b));
        if a != b || !a.starts_with("task_id: ") {
            return Err(format!("full stack and bare service disagree:\n{a}\n---\n{b}").into());
        }
        Ok((server, status_req, config))
    })
}

/// The quartiles of `values` (sorted in place).
fn quartiles(values: &mut [f64]) -> [f64; 3] {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    [at(0.25), at(0.5), at(0.75)]
}

/// Paired rounds of bare and full stack; prints the share of the bare throughput.
fn compare(
    runtime: &tokio::runtime::Runtime,
    label: &str,
    bare: &mut AgentService,
    stack: &mut Stack,
    req: &McpRequest,
) {
    const PAIRS: usize = 101;
    const ROUND: u64 = 2_000;
    let (mut bare_ns, mut stack_ns, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..PAIRS {
        let (b, s) = if pair % 2 == 0 {
            let b = runtime.block_on(run(bare, req, ROUND));
            (b, runtime.block_on(run(stack, req, ROUND)))
        } else {
            let s = runtime.block_on(run(stack, req, ROUND));
            (runtime.block_on(run(bare, req, ROUND)), s)
        };
        let (b, s) = (
            b.as_nanos() as f64 / ROUND as f64,
            s.as_nanos() as f64 / ROUND as f64,
        );
        bare_ns.push(b);
        stack_ns.push(s);
        shares.push(b / s * 100.0);
    }
    let [_, b, _] = quartiles(&mut bare_ns);
    let [_, s, _] = quartiles(&mut stack_ns);
    let [q1, share, q3] = quartiles(&mut shares);
    println!(
        "{label} store: tools/call agent_status, {PAIRS} paired rounds of {ROUND} calls (medians):"
    );
    println!("  bare AgentService: {b:>8.0} ns/op");
    println!("  full stack:        {s:>8.0} ns/op (+{:.0} ns)", s - b);
    println!(
        "  full stack keeps {share:.1} % of the bare throughput (quartiles {q1:.1}–{q3:.1} %; target >= 90 %)"
    );
}

fn main() {
    let runtime = runtime::start(&mut tokio::runtime::Builder::new_current_thread());
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot make a tempdir: {e}");
            return;
        }
    };
    // The instruction profiler (see below) measures the memory store only.
    let profiling = std::env::var_os("STACK_PROFILE").is_some();
    let backends: &[StoreBackend] = if profiling {
        &[StoreBackend::Memory]
    } else {
        &[StoreBackend::Sqlite, StoreBackend::Memory]
    };
    let mut servers = Vec::new();
    for &backend in backends {
        match start(&runtime, dir.path(), backend) {
            Ok(s) => servers.push((backend, s)),
            Err(e) => {
                eprintln!("cannot set up the {backend:?} benchmark: {e}");
                return;
            }
        }
    }
    let Some((_, (server, status_req, config))) = servers.pop() else {
        return;
    };
    let mut stack = server.stack();
    let mut bare = server.service();

    // Where the difference goes: each layer alone around the bare service (each boxed once,
    // like the full stack).
    let core = server.service();
    let audit_sink = AuditSink::file(&dir.path().join("breakdown.jsonl"));
    let mut variants: Vec<(&str, Stack)> = vec![
        ("boxed", BoxCloneSyncService::new(core.clone())),
        (
            "images",
            BoxCloneSyncService::new(
                ImagesLayer::new(ImageRules(config.mcp.images)).layer(core.clone()),
            ),
        ),
        (
            "validate",
            BoxCloneSyncService::new(ValidateLayer::default().layer(core.clone())),
        ),
        (
            "tasks",
            BoxCloneSyncService::new(server.stack_builder().tasks().layer(core.clone())),
        ),
        (
            "rate_limit",
            BoxCloneSyncService::new(
                RateLimitLayer::new(RateLimits::one_budget(NonZeroU32::MAX, NonZeroU32::MAX))
                    .layer(core.clone()),
            ),
        ),
        (
            "auth",
            BoxCloneSyncService::new(
                AuthLayer::new(Tokens::from(&config.auth)).layer(core.clone()),
            ),
        ),
        (
            "metrics",
            BoxCloneSyncService::new(MetricsLayer::default().layer(core.clone())),
        ),
    ];
    if let Ok(sink) = audit_sink {
        variants.push((
            "audit",
            BoxCloneSyncService::new(AuditLayer::new(sink).layer(core.clone())),
        ));
    }
    // The full stack without its one layer that hands work to another thread.
    variants.push((
        "all_but_audit",
        agent_mcp::stack::build_with_audit(&config, core.clone(), None),
    ));
    // For an instruction profiler (`valgrind --tool=callgrind`): only `STACK_PROFILE_ITERS`
    // calls of the named variant (`bare`, `full`, `http` — the full stack behind the HTTP
    // edge, body bytes in and out — or one layer's name), no criterion run.
    if let Ok(name) = std::env::var("STACK_PROFILE") {
        let iters = std::env::var("STACK_PROFILE_ITERS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(10_000);
        let t = match name.as_str() {
            "http" => {
                let mut edge = server.http_service();
                let req = http_request(&status_req);
                // It must answer the status, or the count means nothing.
                let mut once = edge.clone();
                let answer = runtime.block_on(async {
                    use http_body_util::BodyExt;
                    let Ok(resp) = once.call(http_request(&status_req)).await;
                    (
                        resp.status(),
                        resp.into_body().collect().await.map(|b| b.to_bytes()),
                    )
                });
                match answer {
                    (http::StatusCode::OK, Ok(body))
                        if String::from_utf8_lossy(&body).contains("status: failed") =>
                    {
                        println!(
                            "http: a {}-byte request, a {}-byte answer",
                            http_body::Body::size_hint(req.body()).exact().unwrap_or(0),
                            body.len()
                        );
                        if std::env::var_os("STACK_PROFILE_SHOW").is_some() {
                            println!("{}", String::from_utf8_lossy(&body));
                        }
                    }
                    (status, body) => {
                        eprintln!(
                            "STACK_PROFILE=http: the edge did not answer the status: {status} {body:?}"
                        );
                        return;
                    }
                }
                runtime.block_on(run_http(&mut edge, &req, iters))
            }
            "bare" => runtime.block_on(run(&mut bare, &status_req, iters)),
            "full" => runtime.block_on(run(&mut stack, &status_req, iters)),
            layer => match variants.iter_mut().find(|(n, _)| *n == layer) {
                Some((_, svc)) => runtime.block_on(run(svc, &status_req, iters)),
                None => {
                    eprintln!(
                        "STACK_PROFILE: no variant {layer:?}; try bare, full or a layer name"
                    );
                    return;
                }
            },
        };
        println!("{name}: {:.0} ns/op", t.as_nanos() as f64 / iters as f64);
        runtime.block_on(server.shutdown());
        return;
    }

    let mut criterion = Criterion::default().configure_from_args();
    let mut sqlite = servers
        .pop()
        .map(|(_, (server, req, _))| (server.service(), server.stack(), req, server));
    {
        let mut group = criterion.benchmark_group("tools_call_agent_status");
        if let Some((bare, stack, req, _)) = &mut sqlite {
            group.bench_function("sqlite/bare_service", |bencher| {
                bencher.iter_custom(|iters| runtime.block_on(run(bare, req, iters)))
            });
            group.bench_function("sqlite/full_stack", |bencher| {
                bencher.iter_custom(|iters| runtime.block_on(run(stack, req, iters)))
            });
        }
        group.bench_function("memory/bare_service", |bencher| {
            bencher.iter_custom(|iters| runtime.block_on(run(&mut bare, &status_req, iters)))
        });
        group.bench_function("memory/full_stack", |bencher| {
            bencher.iter_custom(|iters| runtime.block_on(run(&mut stack, &status_req, iters)))
        });
        group.finish();
    }
    if let Some((bare, stack, req, _)) = &mut sqlite {
        compare(&runtime, "sqlite (default)", bare, stack, req);
    }
    compare(&runtime, "memory", &mut bare, &mut stack, &status_req);

    const ROUND: u64 = 2_000;
    // Round-robin over the variants so a slow spell of the machine hits them all alike.
    const ROUNDS: usize = 31;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..ROUNDS {
        for ((_, svc), times) in variants.iter_mut().zip(&mut times) {
            let t = runtime.block_on(run(svc, &status_req, ROUND));
            times.push(t.as_nanos() as f64 / ROUND as f64);
        }
    }
    println!("memory store: one layer around the bare service, boxed once like the full stack");
    println!("  (median of {ROUNDS} round-robin rounds of {ROUND} calls):");
    let medians: Vec<f64> = times.iter_mut().map(|t| quartiles(t)[1]).collect();
    for ((name, _), median) in variants.iter().zip(&medians) {
        println!(
            "  {name:<14} {median:>8.0} ns/op ({:+.0} ns)",
            median - medians[0]
        );
    }
    criterion.final_summary();
    runtime.block_on(server.shutdown());
    if let Some((_, _, _, server)) = sqlite {
        runtime.block_on(server.shutdown());
    }
}
