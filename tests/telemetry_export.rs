//! The telemetry library against a real OTLP/HTTP receiver on loopback (protobuf decoded with
//! the official definitions): the spans phase B will emit (a server span parented on the
//! caller's `_meta`, a task continuing that trace from a stored carrier, `chat` with token
//! usage, `execute_tool`) arrive as the conventions say; a full queue drops and counts; the
//! duration metric arrives with its unit and buckets; shutdown is bounded.

mod support;

use std::time::{Duration, Instant};

use agent_mcp::telemetry::context::{RemoteParent, TraceCarrier, TraceCarrierExt, continue_trace};
use agent_mcp::telemetry::duration::{OperationAttributes, record_server_operation};
use agent_mcp::telemetry::semconv::{attr, metric};
use agent_mcp::telemetry::spans::{
    ChatSpan, ExecuteToolSpan, InvokeAgentSpan, McpServerSpan, Network, record_usage,
};
use agent_mcp::telemetry::subscriber::{LogFormat, dispatch};
use agent_mcp::telemetry::{Telemetry, TelemetryError, TelemetrySettings, TraceSampler};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use serde_json::json;
use support::otlp_receiver::{Attr, BlackHole, OtlpReceiver};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The process subscriber as `agent-mcp` builds it, logs discarded.
fn subscriber(telemetry: &Telemetry) -> tracing::Dispatch {
    dispatch(
        LogFormat::Text,
        false,
        EnvFilter::new("info"),
        Some(telemetry),
        BoxMakeWriter::new(std::io::sink),
    )
}

async fn shutdown(telemetry: Telemetry, bound: Duration) -> Result<(), TelemetryError> {
    tokio::task::spawn_blocking(move || telemetry.shutdown(bound))
        .await
        .expect("shutdown thread")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_trace_reaches_the_collector_as_the_conventions_say() {
    let receiver = OtlpReceiver::start().await;
    let settings = TelemetrySettings::new("agent-mcp-test")
        .with_traces_endpoint(format!("{}/v1/traces", receiver.endpoint()))
        .with_resource_attributes(vec![("deployment.environment".into(), "ci".into())]);
    let telemetry = Telemetry::start(&settings, tokio::runtime::Handle::current())
        .expect("starts")
        .expect("an endpoint is set");
    let request_text = "please refactor the secret module";
    tracing::dispatcher::with_default(&subscriber(&telemetry), || {
        // The edge: the caller's context in `_meta` parents the server span.
        let meta = json!({"traceparent": CALLER, "tracestate": "rojo=00f067aa0ba902b7"});
        let server = McpServerSpan::new("tools/call")
            .with_tool("agent_run")
            .with_request_id("1")
            .with_protocol_version("2026-07-28")
            .with_network(Network::Http { peer: None })
            .start_in(RemoteParent::of_request(meta.as_object(), None));
        // What a task stores: the strings, through JSON as a database row would hold them.
        let context = server.context().expect("export is on");
        let stored = serde_json::to_string(&TraceCarrier::from_context(&context).expect("carrier"))
            .expect("json");
        tracing::info!(request = request_text, "queued");
        drop(server);

        // The runner, later: the task continues the caller's trace.
        let carrier: TraceCarrier = serde_json::from_str(&stored).expect("stored carrier");
        let agent = InvokeAgentSpan::new("qwen3:8b").with_task_id("t-1").start();
        assert!(continue_trace(&agent, &carrier));
        agent.in_scope(|| {
            for (input, output) in [(100, 20), (130, 7)] {
                let chat = ChatSpan::new("qwen3:8b")
                    .with_server("127.0.0.1", 11434)
                    .start();
                record_usage(&chat, input, output);
                drop(chat);
            }
            ExecuteToolSpan::new("list_dir").start().in_scope(|| {});
        });
        record_usage(&agent, 230, 27);
        drop(agent);

        let mut failed = McpServerSpan::new("tools/call")
            .with_tool("agent_status")
            .start();
        failed.record_rpc_error(-32602, Some("invalid params"));
    });
    shutdown(telemetry, Duration::from_secs(5))
        .await
        .expect("flushed in time");

    receiver
        .wait_until(Duration::from_secs(10), |r| r.spans().len() >= 6)
        .await;
    let spans = receiver.spans();
    assert_eq!(spans.len(), 6, "{spans:#?}");
    let find = |name: &str| spans.iter().find(|s| s.name == name).expect(name).clone();
    let server = find("tools/call agent_run");
    assert_eq!(server.kind, SpanKind::Server);
    assert_eq!(server.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(server.parent_span_id.as_deref(), Some("00f067aa0ba902b7"));
    assert_eq!(server.str_attr(attr::MCP_METHOD_NAME), Some("tools/call"));
    assert_eq!(server.str_attr(attr::GEN_AI_TOOL_NAME), Some("agent_run"));
    assert_eq!(
        server.str_attr(attr::GEN_AI_OPERATION_NAME),
        Some("execute_tool")
    );
    assert_eq!(server.str_attr(attr::JSONRPC_REQUEST_ID), Some("1"));
    assert_eq!(
        server.str_attr(attr::MCP_PROTOCOL_VERSION),
        Some("2026-07-28")
    );
    assert_eq!(server.events, 0, "log lines stay out of the export");
    assert_eq!(
        server.resource.get("service.name"),
        Some(&Attr::Str("agent-mcp-test".into()))
    );
    assert_eq!(
        server.resource.get("deployment.environment"),
        Some(&Attr::Str("ci".into()))
    );

    let agent = find("invoke_agent agent-mcp");
    assert_eq!(agent.kind, SpanKind::Internal);
    assert_eq!(agent.trace_id, server.trace_id);
    assert_eq!(
        agent.parent_span_id.as_deref(),
        Some(server.span_id.as_str())
    );
    assert_eq!(
        agent.attr(attr::GEN_AI_USAGE_INPUT_TOKENS),
        Some(&Attr::Int(230))
    );

    let chats: Vec<_> = spans.iter().filter(|s| s.name == "chat qwen3:8b").collect();
    assert_eq!(chats.len(), 2);
    let mut usage: Vec<(Option<&Attr>, Option<&Attr>)> = chats
        .iter()
        .map(|c| {
            assert_eq!(c.kind, SpanKind::Client);
            assert_eq!(c.parent_span_id.as_deref(), Some(agent.span_id.as_str()));
            assert_eq!(c.str_attr(attr::GEN_AI_PROVIDER_NAME), Some("ollama"));
            (
                c.attr(attr::GEN_AI_USAGE_INPUT_TOKENS),
                c.attr(attr::GEN_AI_USAGE_OUTPUT_TOKENS),
            )
        })
        .collect();
    usage.sort_by_key(|(i, _)| format!("{i:?}"));
    assert_eq!(
        usage,
        [
            (Some(&Attr::Int(100)), Some(&Attr::Int(20))),
            (Some(&Attr::Int(130)), Some(&Attr::Int(7)))
        ]
    );
    let tool = find("execute_tool list_dir");
    assert_eq!(tool.kind, SpanKind::Internal);
    assert_eq!(tool.parent_span_id.as_deref(), Some(agent.span_id.as_str()));

    let failed = find("tools/call agent_status");
    assert_eq!(failed.status, StatusCode::Error);
    assert_eq!(failed.status_message, "invalid params");
    assert_eq!(failed.str_attr(attr::ERROR_TYPE), Some("-32602"));

    // No span carries the request's text, in any attribute.
    for span in &spans {
        for (key, value) in &span.attributes {
            assert!(
                !matches!(value, Attr::Str(s) if s.contains("secret module")),
                "{} carries the request text in {key}",
                span.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_spans_and_counts_them_and_shutdown_stays_bounded() {
    let hole = BlackHole::start().await;
    let queue = 8;
    let settings = TelemetrySettings::new("agent-mcp-test")
        .with_traces_endpoint(format!("{}/v1/traces", hole.endpoint()))
        .with_max_queue_size(queue)
        .with_export_timeout(Duration::from_secs(30));
    let telemetry = Telemetry::start(&settings, tokio::runtime::Handle::current())
        .expect("starts")
        .expect("an endpoint is set");
    let sent = 100;
    let started = Instant::now();
    tracing::dispatcher::with_default(&subscriber(&telemetry), || {
        for _ in 0..sent {
            ExecuteToolSpan::new("read_file").start().in_scope(|| {});
        }
    });
    let took = started.elapsed();
    // The request threads never wait for the collector.
    assert!(took < Duration::from_secs(2), "{sent} spans took {took:?}");
    // At most one batch (held by the silent collector) and one queue's worth were taken.
    let dropped = telemetry.stats().dropped();
    assert!(
        (sent - 2 * queue as u64..=sent - queue as u64).contains(&dropped),
        "dropped {dropped} of {sent} with a queue of {queue}"
    );
    let started = Instant::now();
    let result = shutdown(telemetry, Duration::from_millis(500)).await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(TelemetryError::ShutdownTimeout(_))),
        "{result:?}"
    );
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    assert!(hole.connections() >= 1, "the export was attempted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_duration_metric_reaches_the_collector_with_its_unit_and_buckets() {
    let receiver = OtlpReceiver::start().await;
    let settings = TelemetrySettings::new("agent-mcp-test")
        .with_traces_endpoint(format!("{}/v1/traces", receiver.endpoint()))
        .with_metrics_endpoint(format!("{}/v1/metrics", receiver.endpoint()));
    let telemetry = Telemetry::start(&settings, tokio::runtime::Handle::current())
        .expect("starts")
        .expect("an endpoint is set");
    let call = OperationAttributes::new("tools/call")
        .with_tool("agent_status")
        .with_protocol_version("2026-07-28")
        .with_network(Network::Http { peer: None });
    for ms in [2, 40, 700] {
        record_server_operation(Duration::from_millis(ms), &call);
    }
    record_server_operation(
        Duration::from_millis(1),
        &OperationAttributes::new("tools/list").with_error_type(Some("-32601")),
    );
    // Shutdown sends the last collection.
    shutdown(telemetry, Duration::from_secs(5))
        .await
        .expect("flushed in time");
    receiver
        .wait_until(Duration::from_secs(10), |r| {
            r.histogram_points(metric::MCP_SERVER_OPERATION_DURATION)
                .len()
                >= 2
        })
        .await;
    let points = receiver.histogram_points(metric::MCP_SERVER_OPERATION_DURATION);
    let tool = points
        .iter()
        .find(|p| p.attributes.get(attr::MCP_METHOD_NAME) == Some(&Attr::Str("tools/call".into())))
        .expect("the tools/call series");
    assert_eq!(tool.unit, "s");
    assert_eq!(tool.count, 3);
    let sum = tool.sum.expect("a sum");
    assert!((sum - 0.742).abs() < 1e-6, "{sum}");
    assert_eq!(tool.explicit_bounds, metric::DURATION_BUCKETS);
    assert_eq!(
        tool.attributes.get(attr::GEN_AI_TOOL_NAME),
        Some(&Attr::Str("agent_status".into()))
    );
    assert_eq!(
        tool.attributes.get(attr::GEN_AI_OPERATION_NAME),
        Some(&Attr::Str("execute_tool".into()))
    );
    assert_eq!(
        tool.attributes.get(attr::NETWORK_TRANSPORT),
        Some(&Attr::Str("tcp".into()))
    );
    assert_eq!(
        tool.resource.get("service.name"),
        Some(&Attr::Str("agent-mcp-test".into()))
    );
    let failed = points
        .iter()
        .find(|p| p.attributes.get(attr::MCP_METHOD_NAME) == Some(&Attr::Str("tools/list".into())))
        .expect("the tools/list series");
    assert_eq!(
        failed.attributes.get(attr::ERROR_TYPE),
        Some(&Attr::Str("-32601".into()))
    );
}

/// One server span per caller's `traceparent`, parented on it, under `settings`' sampler;
/// returns the trace ids the collector received, once everything is flushed.
async fn exported_traces(settings: TelemetrySettings, receiver: &OtlpReceiver) -> Vec<String> {
    let telemetry = Telemetry::start(&settings, tokio::runtime::Handle::current())
        .expect("starts")
        .expect("an endpoint is set");
    tracing::dispatcher::with_default(&subscriber(&telemetry), || {
        for traceparent in [
            // Sampled by the caller…
            "00-11111111111111111111111111111111-1111111111111111-01",
            // …not sampled by the caller…
            "00-22222222222222222222222222222222-2222222222222222-00",
        ] {
            let meta = json!({ "traceparent": traceparent });
            let span = McpServerSpan::new("tools/call")
                .with_tool("agent_status")
                .start_in(RemoteParent::of_request(meta.as_object(), None));
            assert!(!span.is_disabled(), "export is on");
            // An unsampled span still carries the caller's trace (to a task).
            let context = span.context().expect("a context");
            assert!(TraceCarrier::from_context(&context).is_some());
        }
        // …and a request with no caller's context: a root.
        drop(McpServerSpan::new("tools/list").start());
    });
    shutdown(telemetry, Duration::from_secs(5))
        .await
        .expect("flushed in time");
    let mut traces: Vec<String> = receiver.spans().into_iter().map(|s| s.trace_id).collect();
    traces.sort();
    traces
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sampler_follows_the_callers_flag_by_default_and_a_zero_ratio_exports_nothing() {
    let settings = |receiver: &OtlpReceiver| {
        TelemetrySettings::new("agent-mcp-test")
            .with_traces_endpoint(format!("{}/v1/traces", receiver.endpoint()))
    };

    // The default, parentbased_always_on: the caller's unsampled trace is not exported, the
    // sampled one and the root are.
    let receiver = OtlpReceiver::start().await;
    let traces = exported_traces(settings(&receiver), &receiver).await;
    assert_eq!(traces.len(), 2, "{traces:?}");
    // The root's trace id is random, so it may sort before the caller's: look the caller's up.
    assert!(
        traces.contains(&"11111111111111111111111111111111".to_owned()),
        "{traces:?}"
    );
    assert!(
        !traces.contains(&"22222222222222222222222222222222".to_owned()),
        "{traces:?}"
    );

    // traceidratio 0 (not parent-based): nothing, whatever the caller says; not even a request.
    let receiver = OtlpReceiver::start().await;
    let none = TraceSampler::parse("traceidratio", Some(0.0)).expect("a sampler");
    let traces = exported_traces(settings(&receiver).with_sampler(none), &receiver).await;
    assert!(traces.is_empty(), "{traces:?}");
    assert_eq!(receiver.requests(), 0);

    // always_on: the caller's unsampled trace too.
    let receiver = OtlpReceiver::start().await;
    let all = TraceSampler::parse("always_on", None).expect("a sampler");
    let traces = exported_traces(settings(&receiver).with_sampler(all), &receiver).await;
    assert_eq!(traces.len(), 3, "{traces:?}");
    assert!(
        traces.contains(&"22222222222222222222222222222222".to_owned()),
        "{traces:?}"
    );
}
