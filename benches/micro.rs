//! Criterion micro-benchmarks of the protocol work on each request, through public APIs:
//!
//! - `validate/*`: the argument-validation layer (compiled tool schemas + the contract's rules)
//!   around a handler that answers at once, valid and invalid arguments, against the same
//!   handler without the layer;
//! - `images/4x5MiB`: the image layer checking four 5 MiB PNGs (shape, sizes, base64 decode and
//!   SHA-256 of 20 MiB);
//! - `status/render_*`: the `agent_status` text;
//! - `jsonrpc/parse_classify_*`: one JSON-RPC message from bytes, plus its era;
//! - `ndjson/chat_stream_*`: a streamed `/api/chat` body (400 chunks) cut into 1 KiB network
//!   chunks, split into lines and folded into one reply.
//!
//! ```text
//! cargo bench --bench micro -- --warm-up-time 1 --measurement-time 3
//! ```

#[path = "support/runtime.rs"]
mod runtime;

use std::convert::Infallible;
use std::hint::black_box;

use agent_mcp::agent::status::render_status;
use agent_mcp::layers::images::ImageLimits;
use agent_mcp::layers::images::{ImageRules, ImagesLayer};
use agent_mcp::layers::validate::ValidateLayer;
use agent_mcp::ollama::ChatStreamDecoder;
use agent_mcp::protocol::{
    Incoming, McpRequest, McpResponse, McpResult, ProtocolVersion, RequestContext, RequestId,
    Transport, VersionHints, classify,
};
use agent_mcp::task::{Task, TaskState, TokenUsage};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use criterion::{Criterion, Throughput};
use serde_json::{Value, json};
use tower::{Layer, Service, ServiceExt, service_fn};
use uuid::Uuid;

const TASK_ID: &str = "9ab4a40b-86fe-432a-904f-8e429c01ea8b";

fn call(name: &str, arguments: Value) -> McpRequest {
    let params = json!({ "name": name, "arguments": arguments });
    McpRequest::new(
        Some(RequestId::Number(1)),
        "tools/call",
        params.as_object().cloned().unwrap_or_default(),
        RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
    )
}

async fn answer(req: McpRequest) -> Result<McpResponse, Infallible> {
    Ok(req.result(McpResult::empty()))
}

/// One call through `svc` on a request cloned from `req` (the clone is part of every variant).
fn once<S>(runtime: &tokio::runtime::Runtime, svc: &mut S, req: &McpRequest) -> McpResponse
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    runtime.block_on(async {
        let Ok(ready) = svc.ready().await;
        let Ok(response) = ready.call(req.clone()).await;
        response
    })
}

fn png(len: usize, seed: u8) -> Vec<u8> {
    let mut data = b"\x89PNG\r\n\x1a\n".to_vec();
    data.extend((0..len - data.len()).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    data
}

fn task(state: TaskState) -> Task {
    let mut t = Task::new(Uuid::new_v4(), None, "benchmark".into(), None);
    t.state = state;
    t.steps_done = 1;
    t.tokens = TokenUsage {
        input: 2048,
        output: 512,
    };
    if state == TaskState::Completed {
        t.result = "修正とテストが完了しました。".repeat(8);
    } else {
        t.current_task = "ollama chat".into();
    }
    t
}

/// A streamed chat body: `chunks` content chunks of a few tokens, then the `done` chunk.
fn chat_stream(chunks: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..chunks {
        let line = json!({"model": "m", "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": format!("token {i} and more ")},
            "done": false});
        body.extend_from_slice(line.to_string().as_bytes());
        body.push(b'\n');
    }
    let done = json!({"model": "m", "created_at": "2026-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
        "prompt_eval_count": 1536, "eval_count": chunks});
    body.extend_from_slice(done.to_string().as_bytes());
    body.push(b'\n');
    body
}

fn main() {
    let runtime = runtime::start(&mut tokio::runtime::Builder::new_current_thread());
    let mut c = Criterion::default().configure_from_args();

    // Argument validation.
    {
        let mut group = c.benchmark_group("validate");
        let mut bare = service_fn(answer);
        let mut layered = ValidateLayer::default().layer(service_fn(answer));
        let status = call("agent_status", json!({ "task_id": TASK_ID }));
        let run = call(
            "agent_run",
            json!({"request": "fix the build", "temperature": 0.2, "session_id": TASK_ID}),
        );
        let bad = call(
            "agent_status",
            json!({"task_id": "nope", "extra": 1, "session_id": 5}),
        );
        group.bench_function("no_layer_agent_status", |b| {
            b.iter(|| black_box(once(&runtime, &mut bare, &status)))
        });
        group.bench_function("agent_status_valid", |b| {
            b.iter(|| black_box(once(&runtime, &mut layered, &status)))
        });
        group.bench_function("agent_run_valid", |b| {
            b.iter(|| black_box(once(&runtime, &mut layered, &run)))
        });
        group.bench_function("agent_status_3_violations", |b| {
            b.iter(|| black_box(once(&runtime, &mut layered, &bad)))
        });
        group.finish();
    }

    // Image validation: 4 × 5 MiB.
    {
        let mut group = c.benchmark_group("images");
        group.sample_size(10);
        const MIB5: usize = 5 * 1024 * 1024;
        group.throughput(Throughput::Bytes(4 * MIB5 as u64));
        let images: Vec<Value> = (0..4u8)
            .map(
                |i| json!({"mime_type": "image/png", "data_base64": STANDARD.encode(png(MIB5, i))}),
            )
            .collect();
        let req = call(
            "agent_run",
            json!({"request": "describe", "images": images}),
        );
        let mut layered =
            ImagesLayer::new(ImageRules(ImageLimits::default())).layer(service_fn(answer));
        let probe = once(&runtime, &mut layered, &req);
        if probe.error_code().is_some()
            || probe
                .to_json()
                .is_some_and(|v| v.to_string().contains("isError\":true"))
        {
            eprintln!("the images were refused: {:?}", probe.to_json());
            return;
        }
        group.bench_function("4x5MiB", |b| {
            b.iter(|| black_box(once(&runtime, &mut layered, &req)))
        });
        group.finish();
    }

    // Status text.
    {
        let mut group = c.benchmark_group("status");
        let running = task(TaskState::Running);
        let queued = task(TaskState::Queued);
        let done = task(TaskState::Completed);
        group.bench_function("render_running", |b| {
            b.iter(|| black_box(render_status(black_box(&running), None)))
        });
        group.bench_function("render_queued", |b| {
            b.iter(|| black_box(render_status(black_box(&queued), Some(3))))
        });
        group.bench_function("render_completed", |b| {
            b.iter(|| black_box(render_status(black_box(&done), None)))
        });
        group.finish();
    }

    // JSON-RPC parse + era classification.
    {
        let mut group = c.benchmark_group("jsonrpc");
        let modern = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "agent_status", "arguments": {"task_id": TASK_ID},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}}))
        .unwrap_or_default();
        let legacy =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
                .unwrap_or_default();
        let parse = |bytes: &[u8], header: Option<&str>| {
            let Ok(Incoming::Request { method, params, .. }) = Incoming::from_slice(bytes) else {
                return None;
            };
            let hints = VersionHints {
                header,
                negotiated: None,
                default_legacy: true,
            };
            classify(&method, &params, hints).ok().map(|c| c.version)
        };
        if parse(&modern, Some("2026-07-28")) != Some(ProtocolVersion::V2026_07_28) {
            eprintln!("the modern message did not classify as 2026-07-28");
            return;
        }
        group.bench_function("parse_classify_modern_tools_call", |b| {
            b.iter(|| black_box(parse(black_box(&modern), Some("2026-07-28"))))
        });
        group.bench_function("parse_classify_legacy_tools_list", |b| {
            b.iter(|| black_box(parse(black_box(&legacy), Some("2025-11-25"))))
        });
        group.finish();
    }

    // NDJSON stream parsing.
    {
        let mut group = c.benchmark_group("ndjson");
        let body = chat_stream(400);
        group.throughput(Throughput::Bytes(body.len() as u64));
        let decode = |body: &[u8], cut: usize| {
            let mut decoder = ChatStreamDecoder::new(8 * 1024 * 1024);
            for piece in body.chunks(cut) {
                if let Ok(Some(reply)) = decoder.push(piece, &mut |_| {}) {
                    return Some(reply.message.content.len());
                }
            }
            None
        };
        if decode(&body, 1024).is_none() {
            eprintln!("the chat stream did not decode");
            return;
        }
        group.bench_function("chat_stream_400_chunks_1KiB_cuts", |b| {
            b.iter(|| black_box(decode(black_box(&body), 1024)))
        });
        group.bench_function("chat_stream_400_chunks_16B_cuts", |b| {
            b.iter(|| black_box(decode(black_box(&body), 16)))
        });
        group.finish();
    }

    c.final_summary();
}
