//! `tools/call agent_status` through the full stack (audit → auth → rate_limit → tasks →
//! validate → images) vs the bare `AgentService`, both in-process on a memory store.
//!
//! ```text
//! cargo bench --bench stack -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Criterion reports each variant; afterwards an interleaved run (best of 7 rounds) prints
//! ns/op for both and the full stack's share of the bare throughput (target ≥ 90 %).

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use agent_mcp::AgentMcp;
use agent_mcp::Stack;
use agent_mcp::config::{Config, StoreBackend};
use agent_mcp::layers::audit::{AuditLayer, AuditSink};
use agent_mcp::layers::auth::AuthLayer;
use agent_mcp::layers::images::ImagesLayer;
use agent_mcp::layers::metrics::MetricsLayer;
use agent_mcp::layers::rate_limit::RateLimitLayer;
use agent_mcp::layers::tasks::TasksLayer;
use agent_mcp::layers::validate::ValidateLayer;
use agent_mcp::protocol::{
    McpRequest, McpResponse, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
};
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
    McpRequest {
        id: Some(RequestId::Number(id)),
        method: "tools/call".into(),
        params,
        ctx: RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
    }
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

fn main() {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return;
        }
    };
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot make a tempdir: {e}");
            return;
        }
    };
    let mut config = Config::default();
    // Nothing listens on the discard port: the one task fails fast and then stays put.
    config.ollama.url = "http://127.0.0.1:9".into();
    config.store.backend = StoreBackend::Memory;
    config.rate_limit.per_minute = u32::MAX;
    config.rate_limit.burst = u32::MAX;
    config.audit.enabled = true;
    config.audit.file = Some(dir.path().join("audit.jsonl"));

    let (server, status_req) = match runtime.block_on(async {
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
        Ok::<_, Box<dyn std::error::Error>>((server, status_req))
    }) {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("cannot set up the benchmark: {e}");
            return;
        }
    };
    let mut stack = server.stack();
    let mut bare = server.service();
    // Both must answer the same thing, or the comparison means nothing.
    let (a, b) = runtime.block_on(async {
        let Ok(a) = stack.clone().oneshot(status_req.clone()).await;
        let Ok(b) = bare.clone().oneshot(status_req.clone()).await;
        (text_of(&a), text_of(&b))
    });
    if a != b || !a.starts_with("task_id: ") {
        eprintln!("full stack and bare service disagree:\n{a}\n---\n{b}");
        return;
    }

    // For an instruction profiler (`valgrind --tool=callgrind`): only `STACK_PROFILE_ITERS`
    // calls of the named variant, no criterion run.
    if let Ok(variant) = std::env::var("STACK_PROFILE") {
        let iters = std::env::var("STACK_PROFILE_ITERS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(10_000);
        let t = match variant.as_str() {
            "bare" => runtime.block_on(run(&mut bare, &status_req, iters)),
            _ => runtime.block_on(run(&mut stack, &status_req, iters)),
        };
        println!("{variant}: {:.0} ns/op", t.as_nanos() as f64 / iters as f64);
        runtime.block_on(server.shutdown());
        return;
    }

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("tools_call_agent_status");
    group.bench_function("bare_service", |bencher| {
        bencher.iter_custom(|iters| runtime.block_on(run(&mut bare, &status_req, iters)))
    });
    group.bench_function("full_stack", |bencher| {
        bencher.iter_custom(|iters| runtime.block_on(run(&mut stack, &status_req, iters)))
    });
    group.finish();

    // Interleaved rounds so both variants see the same machine state; best round wins.
    const ROUND: u64 = 20_000;
    let (mut best_bare, mut best_stack) = (f64::MAX, f64::MAX);
    for _ in 0..7 {
        let t = runtime.block_on(run(&mut bare, &status_req, ROUND));
        best_bare = best_bare.min(t.as_nanos() as f64 / ROUND as f64);
        let t = runtime.block_on(run(&mut stack, &status_req, ROUND));
        best_stack = best_stack.min(t.as_nanos() as f64 / ROUND as f64);
    }
    let share = best_bare / best_stack * 100.0;
    println!("tools/call agent_status, best of 7 rounds of {ROUND} calls:");
    println!("  bare AgentService: {best_bare:>8.0} ns/op");
    println!("  full stack:        {best_stack:>8.0} ns/op");
    println!("  full stack keeps {share:.1} % of the bare throughput (target >= 90 %)");

    // Where the difference goes: each layer alone around the bare service (each boxed once,
    // like the full stack).
    let core = server.service();
    let audit_sink = AuditSink::file(&dir.path().join("breakdown.jsonl"));
    let mut variants: Vec<(&str, Stack)> = vec![
        ("bare (boxed)", BoxCloneSyncService::new(core.clone())),
        (
            "images",
            BoxCloneSyncService::new(ImagesLayer::new(config.mcp.images).layer(core.clone())),
        ),
        (
            "validate",
            BoxCloneSyncService::new(ValidateLayer::new().layer(core.clone())),
        ),
        (
            "tasks",
            BoxCloneSyncService::new(
                TasksLayer::new(core.core().clone(), config.store.retention).layer(core.clone()),
            ),
        ),
        (
            "rate_limit",
            BoxCloneSyncService::new(
                RateLimitLayer::new(NonZeroU32::MAX, NonZeroU32::MAX).layer(core.clone()),
            ),
        ),
        (
            "auth",
            BoxCloneSyncService::new(AuthLayer::from_config(&config.auth).layer(core.clone())),
        ),
        (
            "metrics",
            BoxCloneSyncService::new(MetricsLayer::new().layer(core.clone())),
        ),
    ];
    if let Ok(sink) = audit_sink {
        variants.push((
            "audit",
            BoxCloneSyncService::new(AuditLayer::new(sink).layer(core.clone())),
        ));
    }
    println!("one layer around the bare service (best of 5 rounds of {ROUND} calls):");
    for (name, svc) in &mut variants {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = runtime.block_on(run(svc, &status_req, ROUND));
            best = best.min(t.as_nanos() as f64 / ROUND as f64);
        }
        println!("  {name:<14} {best:>8.0} ns/op");
    }
    criterion.final_summary();
    runtime.block_on(server.shutdown());
}
