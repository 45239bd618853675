//! What the OpenTelemetry spans cost the thread that makes them: one request's server span
//! (built, parented on a caller's `_meta`, entered, an error recorded, ended) and one task's
//! tree (`invoke_agent`, two `chat` with usage, one `execute_tool`), under the subscriber
//! `agent-mcp` installs, export off and then on (to an OTLP/HTTP receiver in this process).
//!
//! ```text
//! cargo bench --bench telemetry
//! ```
//!
//! Off is measured first, before any exporting subscriber exists, because `tracing` caches each
//! call site's interest over every subscriber alive: that is the server's situation, one
//! subscriber for the process. Prints the median and quartiles of ns per operation over 21
//! rounds, as wall time and as the measuring thread's CPU time (the export thread and the
//! receiver share the cores; a silent collector leaves the export thread idle, and drops
//! most spans at the full queue), and the spans the queue dropped.

#[path = "support/runtime.rs"]
mod runtime;

#[path = "../tests/support/otlp_receiver.rs"]
mod otlp_receiver;

use std::hint::black_box;
use std::time::{Duration, Instant};

use agent_mcp::telemetry::context::RemoteParent;
use agent_mcp::telemetry::spans::{
    ChatSpan, ExecuteToolSpan, InvokeAgentSpan, McpServerSpan, Network, record_usage,
};
use agent_mcp::telemetry::subscriber::{LogFormat, dispatch};
use agent_mcp::telemetry::{Telemetry, TelemetrySettings};
use serde_json::{Map, Value, json};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

const ROUNDS: usize = 21;
const PER_ROUND: usize = 5_000;

fn request_span(meta: &Map<String, Value>) {
    let span = McpServerSpan::new("tools/call")
        .with_tool("agent_status")
        .with_request_id("17")
        .with_protocol_version("2026-07-28")
        .with_network(Network::Http { peer: None });
    let mut span = span.start_in(RemoteParent::of_request(Some(meta), None));
    black_box(&span);
    span.record_rpc_error(-32602, None);
}

fn task_tree() {
    let agent = InvokeAgentSpan::new("qwen3:8b").with_task_id("t").start();
    agent.in_scope(|| {
        for _ in 0..2 {
            let chat = ChatSpan::new("qwen3:8b")
                .with_server("127.0.0.1", 11434)
                .start();
            record_usage(&chat, 100, 20);
        }
        ExecuteToolSpan::new("read_file").start().in_scope(|| {});
    });
    record_usage(&agent, 200, 40);
}

/// The CPU time this thread has used: what the spans cost the request's thread, whatever else
/// (the export thread, the receiver, other processes) runs on the same cores.
#[cfg(unix)]
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

#[cfg(not(unix))]
fn thread_cpu() -> Duration {
    Duration::ZERO
}

/// Quartiles of ns per call of `f` over the rounds: wall time, and this thread's CPU time.
fn measure(dispatch: &tracing::Dispatch, f: &dyn Fn()) -> [(f64, f64, f64); 2] {
    let (mut wall, mut cpu): (Vec<f64>, Vec<f64>) = (0..ROUNDS)
        .map(|_| {
            tracing::dispatcher::with_default(dispatch, || {
                let (started, cpu_started) = (Instant::now(), thread_cpu());
                for _ in 0..PER_ROUND {
                    f();
                }
                let per = |d: Duration| d.as_nanos() as f64 / PER_ROUND as f64;
                (per(started.elapsed()), per(thread_cpu() - cpu_started))
            })
        })
        .unzip();
    let quartiles = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[ROUNDS / 4], v[ROUNDS / 2], v[3 * ROUNDS / 4])
    };
    [quartiles(&mut wall), quartiles(&mut cpu)]
}

fn print(label: &str, [wall, cpu]: [(f64, f64, f64); 2]) {
    println!(
        "{label:<40} wall {:>7.0} ns ({:.0}–{:.0})   thread CPU {:>7.0} ns ({:.0}–{:.0})",
        wall.1, wall.0, wall.2, cpu.1, cpu.0, cpu.2
    );
}

fn main() {
    let meta = json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"});
    let meta = meta.as_object().cloned().unwrap_or_default();
    let logs = || {
        (
            LogFormat::Text,
            false,
            EnvFilter::new("info"),
            BoxMakeWriter::new(std::io::sink),
        )
    };

    let (format, ansi, filter, writer) = logs();
    let off = dispatch(format, ansi, filter, None, writer);
    print(
        "export off: request span",
        measure(&off, &|| request_span(&meta)),
    );
    print("export off: task tree (4 spans)", measure(&off, &task_tree));
    drop(off);

    let runtime = runtime::start(tokio::runtime::Builder::new_multi_thread().worker_threads(2));
    let receiver = runtime.block_on(otlp_receiver::OtlpReceiver::start_counting());
    let hole = runtime.block_on(otlp_receiver::BlackHole::start());
    for (label, endpoint) in [
        ("export on", receiver.endpoint()),
        ("export on, collector silent", hole.endpoint()),
    ] {
        let settings = TelemetrySettings::new("agent-mcp-bench")
            .with_traces_endpoint(format!("{endpoint}/v1/traces"));
        let telemetry = match Telemetry::start(&settings, runtime.handle().clone()) {
            Ok(Some(telemetry)) => telemetry,
            other => {
                eprintln!("cannot start export: {other:?}");
                return;
            }
        };
        let (format, ansi, filter, writer) = logs();
        let on = dispatch(format, ansi, filter, Some(&telemetry), writer);
        print(
            &format!("{label}: request span"),
            measure(&on, &|| request_span(&meta)),
        );
        print(
            &format!("{label}: task tree (4 spans)"),
            measure(&on, &task_tree),
        );
        let dropped = telemetry.stats().dropped();
        let _ = telemetry.shutdown(Duration::from_secs(5));
        println!(
            "{label}: {dropped} of {} spans dropped by the full queue",
            ROUNDS * PER_ROUND * 5
        );
    }
    println!("spans the receiver got: {}", receiver.span_count());
}
