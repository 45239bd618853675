//! OpenTelemetry export of the real `agent-mcp serve` binary, against a real OTLP/HTTP receiver
//! on loopback that decodes what it gets with the official protobuf definitions: spans arrive
//! with the configured resource when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; nothing is started
//! or sent when it is not; a collector that never answers holds neither a request nor the exit.

mod support;

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use serde_json::json;
use support::fake_ollama::FakeOllama;
use support::harness::{ServeProcess, test_config};
use support::otlp_receiver::{Attr, BlackHole, OtlpReceiver};

/// Names of the threads of process `pid` (Linux `/proc`; 15 characters at most each).
fn thread_names(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

fn otel_threads(pid: u32) -> Vec<String> {
    thread_names(pid)
        .into_iter()
        .filter(|n| n.starts_with("OpenTelemetry"))
        .collect()
}

async fn metrics_text(server: &ServeProcess) -> String {
    server.get_text("/metrics").await
}

async fn tools_list_within(server: &ServeProcess, bound: Duration) -> Duration {
    let started = Instant::now();
    let reply = server.client().modern("tools/list", json!({})).await;
    let took = started.elapsed();
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(reply.body["result"]["tools"].is_array(), "{}", reply.text);
    assert!(took < bound, "tools/list took {took:?}");
    took
}

#[tokio::test]
async fn the_startup_span_reaches_the_collector_with_the_resource() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    let endpoint = receiver.endpoint();
    let server = ServeProcess::spawn_with_env(
        &test_config(&fake.url()),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "agent-mcp-under-test"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=test,team=platform%20core",
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=s3cr3t-key"),
        ],
    )
    .await;
    let pid = server.child.id().expect("running");
    assert!(
        otel_threads(pid)
            .iter()
            .any(|n| n.starts_with("OpenTelemetry.T")),
        "the span batch thread runs: {:?}",
        thread_names(pid)
    );
    tools_list_within(&server, Duration::from_secs(5)).await;
    // The queue's counters are in /metrics from the start.
    let text = metrics_text(&server).await;
    assert!(
        text.lines()
            .any(|l| l == "agent_mcp_otel_spans_dropped_total 0"),
        "{text}"
    );
    assert!(
        text.contains("agent_mcp_otel_export_failures_total{signal=\"traces\"} 0"),
        "{text}"
    );
    // The span ended at startup; SIGTERM flushes the queue before the exit.
    let mut server = server;
    let mut logged = std::mem::take(&mut server.startup);
    let status = server.sigterm_within(Duration::from_secs(20)).await;
    assert!(status.success(), "{status:?}");
    while let Some(line) = server.stderr.recv().await {
        logged.push(line);
    }
    assert!(
        logged
            .iter()
            .any(|l| l.contains("exporting OpenTelemetry spans")),
        "{logged:#?}"
    );
    assert!(
        !logged.iter().any(|l| l.contains("s3cr3t")),
        "the collector's key is never logged: {logged:#?}"
    );
    let span = receiver.span("startup", Duration::from_secs(10)).await;
    assert_eq!(span.kind, SpanKind::Internal, "{span:?}");
    assert_eq!(span.parent_span_id, None);
    assert_eq!(span.scope, "agent-mcp");
    assert_eq!(span.str_attr("network.transport"), Some("tcp"));
    assert_eq!(span.events, 0, "log lines are not exported as span events");
    for (key, value) in [
        ("service.name", "agent-mcp-under-test"),
        ("deployment.environment", "test"),
        ("team", "platform core"),
        ("service.version", env!("CARGO_PKG_VERSION")),
    ] {
        assert_eq!(
            span.resource.get(key),
            Some(&Attr::Str(value.into())),
            "{key}"
        );
    }
    assert!(span.resource.contains_key("telemetry.sdk.name"), "{span:?}");
    assert_eq!(receiver.undecodable(), 0);
    let keys = receiver.header_values("x-collector-key");
    assert!(
        !keys.is_empty() && keys.iter().all(|k| k == "s3cr3t-key"),
        "OTEL_EXPORTER_OTLP_HEADERS reaches the collector: {keys:?}"
    );
    let seen = receiver.seen();
    assert!(
        seen.iter()
            .any(|(path, ct)| path == "/v1/traces" && ct == "application/x-protobuf"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn nothing_is_started_or_sent_without_an_endpoint() {
    let receiver = OtlpReceiver::start().await;
    let fake = FakeOllama::start().await;
    // Everything but the endpoint: still off.
    let server = ServeProcess::spawn_with_env(
        &test_config(&fake.url()),
        &[
            ("OTEL_SERVICE_NAME", "agent-mcp-under-test"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=secret"),
        ],
    )
    .await;
    let pid = server.child.id().expect("running");
    let names = thread_names(pid);
    assert!(!names.is_empty(), "/proc lists the server's threads");
    assert!(otel_threads(pid).is_empty(), "no export thread: {names:?}");
    tools_list_within(&server, Duration::from_secs(5)).await;
    let text = metrics_text(&server).await;
    assert!(!text.contains("agent_mcp_otel_"), "{text}");
    assert!(server.terminate().await.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.requests(), 0, "{:?}", receiver.seen());
}

#[tokio::test]
async fn a_collector_that_never_answers_holds_no_request_and_not_the_exit() {
    let hole = BlackHole::start().await;
    let fake = FakeOllama::start().await;
    let endpoint = hole.endpoint();
    let mut server = ServeProcess::spawn_with_env(
        &test_config(&fake.url()),
        // The default export timeout (10 s) is longer than the exit's bound (3 s).
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
    )
    .await;
    for _ in 0..5 {
        tools_list_within(&server, Duration::from_secs(2)).await;
    }
    let signalled = Instant::now();
    let status = server.sigterm_within(Duration::from_secs(20)).await;
    let took = signalled.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(8),
        "the exit waited {took:?} for a collector that never answers"
    );
    assert!(
        hole.connections() >= 1,
        "the final export did reach the collector (and was held there)"
    );
    let lines = server.stderr_so_far();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("OpenTelemetry export did not finish within 3s of shutdown")),
        "the lost spans are reported: {lines:#?}"
    );
}
