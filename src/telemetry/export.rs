//! [`Telemetry`]: the running export — tracer and meter providers, OTLP/HTTP protobuf
//! exporters on the server's runtime, the bounded span queue — and the `tracing` layer that
//! feeds it.
//!
//! [`Telemetry::start`] builds nothing when the settings name no endpoint: no exporter, no
//! thread, no layer. When it runs there are two threads of the SDK's (the span batch and the
//! metric reader), and export requests run as tasks on the given runtime.
//!
//! The resource is built from the settings alone (`service.name`, `service.version`, the
//! `resource_attributes`, the SDK's `telemetry.sdk.*`); the SDK's own readers of
//! `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` are not used, since the configuration has
//! already merged those with `agent.yaml`.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::registry::LookupSpan;

use super::duration::Durations;
use super::health::ExportHealth;
use super::http_client::RuntimeHttpClient;
use super::otlp::OtlpSpanExporter;
use super::queue::{
    CountedExporter, GatedProcessor, QueueStats, ServerQueue, block_on, run_server_export,
};
use super::semconv::SCOPE;
use super::settings::{MAX_EXPORT_BATCH, SCHEDULED_DELAY};
use super::spans::{ExportFilter, ServerSink, SinkTarget};
use super::{TelemetryError, TelemetrySettings};

/// The `tracing` layer that exports: [`TARGET`](super::semconv::TARGET) spans only (no events, no other span), so
/// nothing but the spans built in [`spans`](super::spans) reaches a collector.
pub type ExportLayer<S> =
    Filtered<tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>, ExportFilter, S>;

/// Running export (see the module docs). Call [`Telemetry::shutdown`] before the runtime ends,
/// so the last spans are sent.
#[derive(Debug)]
pub struct Telemetry {
    tracer_provider: SdkTracerProvider,
    tracer: SdkTracer,
    metrics: Option<MetricsExport>,
    stats: Arc<QueueStats>,
    server: Arc<ServerSink>,
    server_export: ServerExport,
    traces_endpoint: String,
    metrics_endpoint: Option<String>,
}

/// The server spans' export thread and its queue; closed (the thread left to send what is
/// queued and end) when dropped without [`Telemetry::shutdown`].
#[derive(Debug)]
struct ServerExport {
    queue: Arc<ServerQueue>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The metrics thread and its stop flag; stopped (after one last export) when dropped without
/// [`Telemetry::shutdown`].
#[derive(Debug)]
struct MetricsExport {
    wake: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsExport {
    fn close(&self) {
        *self.wake.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.1.notify_one();
    }
}

impl Drop for MetricsExport {
    fn drop(&mut self) {
        self.close();
    }
}

/// Posts the histogram every `interval`, and once more when `wake` says stop; failures
/// counted (`signal="metrics"`) and logged as the spans' are.
fn run_metrics_export<C: opentelemetry_http::HttpClient + 'static>(
    wake: &(Mutex<bool>, Condvar),
    exporter: &OtlpSpanExporter<C>,
    durations: &Durations,
    interval: Duration,
) {
    let health = ExportHealth::new("metrics");
    loop {
        let deadline = std::time::Instant::now() + interval;
        let mut closed = wake.0.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = std::time::Instant::now();
            if *closed || now >= deadline {
                break;
            }
            closed = wake
                .1
                .wait_timeout(closed, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let stop = *closed;
        drop(closed);
        let body = super::otlp::encode_metrics_request(
            exporter.resource(),
            exporter.scope(),
            durations.start,
            std::time::SystemTime::now(),
            &durations.snapshot(),
        );
        if let Some(body) = body {
            health.finished(&block_on(exporter.post(body)));
        }
        if stop {
            return;
        }
    }
}

impl Drop for ServerExport {
    fn drop(&mut self) {
        self.queue.close();
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder(SCOPE)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

fn resource(settings: &TelemetrySettings) -> Resource {
    // Later attributes win: the configured ones over our version, the service name over both.
    Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .with_attributes(
            settings
                .resource_attributes
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(settings.service_name.clone())
        .build()
}

impl Telemetry {
    /// Starts export as `settings` say, its requests running on `runtime`; `Ok(None)` (and
    /// nothing built) when no traces endpoint is set.
    pub fn start(
        settings: &TelemetrySettings,
        runtime: tokio::runtime::Handle,
    ) -> Result<Option<Telemetry>, TelemetryError> {
        let Some(traces_endpoint) = settings.traces_endpoint.clone() else {
            return Ok(None);
        };
        let client = RuntimeHttpClient::new(runtime, settings.export_timeout)?;
        let resource = resource(settings);

        // Our own OTLP/HTTP protobuf encoding of the spans (see `otlp`), on the same client.
        let headers = super::otlp::headers_from_env();
        let exporter = OtlpSpanExporter::new(client.clone(), &traces_endpoint, headers.clone())?;
        let capacity = settings.max_queue_size.max(1);
        let stats = QueueStats::new(capacity);

        // The server spans: their own queue (the same slots) and thread (see `queue`).
        let mut server_exporter = OtlpSpanExporter::new(client.clone(), &traces_endpoint, headers)?
            .with_server_scope(&scope());
        opentelemetry_sdk::trace::SpanExporter::set_resource(&mut server_exporter, &resource);
        let queue = ServerQueue::new(stats.clone());
        let thread = {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name("agent-mcp-otel-server-spans".into())
                .spawn(move || run_server_export(&queue, &server_exporter, SCHEDULED_DELAY))
                .map_err(|source| TelemetryError::Thread {
                    what: "server span export",
                    source,
                })?
        };
        let server_export = ServerExport {
            queue: queue.clone(),
            thread: Some(thread),
        };
        let server = ServerSink::new(settings.sampler, SinkTarget::Queue(queue));
        let batch = BatchSpanProcessor::builder(CountedExporter::new(exporter, stats.clone()))
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(capacity)
                    .with_max_export_batch_size(MAX_EXPORT_BATCH.min(capacity))
                    .with_scheduled_delay(SCHEDULED_DELAY)
                    .build(),
            )
            .build();
        let tracer_provider = SdkTracerProvider::builder()
            // Ours, so the SDK's own reading of OTEL_TRACES_SAMPLER (which the configuration
            // has already merged with agent.yaml) does not apply.
            .with_sampler(settings.sampler.to_sdk())
            .with_resource(resource.clone())
            .with_span_processor(GatedProcessor::new(batch, stats.clone()))
            .build();
        let tracer = tracer_provider.tracer_with_scope(scope());

        // The duration histogram: aggregated by `duration`, posted by a thread of ours every
        // interval and once more at shutdown (the SDK's instrument hashed every measurement's
        // attributes; see `duration::Durations`).
        let metrics = match &settings.metrics_endpoint {
            None => None,
            Some(endpoint) => {
                let mut exporter = OtlpSpanExporter::new(
                    client,
                    endpoint,
                    super::otlp::signal_headers_from_env("OTEL_EXPORTER_OTLP_METRICS_HEADERS"),
                )
                .map_err(|e| match e {
                    TelemetryError::Exporter { message, .. } => TelemetryError::Exporter {
                        signal: "metrics",
                        message,
                    },
                    other => other,
                })?
                .with_server_scope(&scope());
                opentelemetry_sdk::trace::SpanExporter::set_resource(&mut exporter, &resource);
                let durations = super::duration::install();
                let wake = Arc::new((Mutex::new(false), Condvar::new()));
                let interval = settings.metrics_interval;
                let thread = {
                    let wake = wake.clone();
                    std::thread::Builder::new()
                        .name("agent-mcp-otel-metrics".into())
                        .spawn(move || run_metrics_export(&wake, &exporter, durations, interval))
                        .map_err(|source| TelemetryError::Thread {
                            what: "metrics export",
                            source,
                        })?
                };
                Some(MetricsExport {
                    wake,
                    thread: Some(thread),
                })
            }
        };
        super::spans::set_content_capture(settings.capture_content);
        Ok(Some(Telemetry {
            tracer_provider,
            tracer,
            metrics,
            stats,
            server,
            server_export,
            traces_endpoint,
            metrics_endpoint: settings.metrics_endpoint.clone(),
        }))
    }

    /// The layer to add to the process's subscriber.
    pub fn layer<S>(&self) -> ExportLayer<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        export_layer(self.tracer.clone(), self.server.clone())
    }

    /// Registers the export's Prometheus series at 0 with the installed `metrics` recorder, so
    /// an alert on them needs no first drop. Call it once the recorder is installed.
    pub fn register_metrics(&self) {
        metrics::counter!(super::SPANS_DROPPED).increment(0);
        metrics::counter!(super::EXPORT_FAILURES, "signal" => "traces").increment(0);
        if self.metrics.is_some() {
            metrics::counter!(super::EXPORT_FAILURES, "signal" => "metrics").increment(0);
        }
    }

    /// The queue's counts: spans dropped, exports failed.
    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// Where spans go.
    pub fn traces_endpoint(&self) -> &str {
        &self.traces_endpoint
    }

    /// Where metrics go, if they are exported.
    pub fn metrics_endpoint(&self) -> Option<&str> {
        self.metrics_endpoint.as_deref()
    }

    /// Sends what is queued and stops, waiting at most `bound` (a collector that never
    /// answers holds nothing longer). Blocking: call it outside the runtime's threads, while
    /// the runtime still runs (the last export runs on it).
    pub fn shutdown(self, bound: Duration) -> Result<(), TelemetryError> {
        let (done, results) = mpsc::channel();
        let mut pending = 0;
        // The providers get longer than the bound, so the bound below is what decides, and a
        // timeout is always reported as one (the SDK folds its own into a generic error).
        let slack = bound + Duration::from_secs(1);
        let tracer_provider = self.tracer_provider;
        let to_trace = done.clone();
        spawn_shutdown("traces", &mut pending, move || {
            let _ = to_trace.send(tracer_provider.shutdown_with_timeout(slack));
        })?;
        let mut server_export = self.server_export;
        let server_thread = server_export.thread.take();
        let server_done = done.clone();
        spawn_shutdown("server-spans", &mut pending, move || {
            server_export.queue.close();
            let _ = server_done.send(joined(server_thread, "the server span export thread"));
        })?;
        if let Some(mut metrics) = self.metrics {
            let thread = metrics.thread.take();
            spawn_shutdown("metrics", &mut pending, move || {
                metrics.close();
                let _ = done.send(joined(thread, "the metrics export thread"));
            })?;
        }
        let deadline = std::time::Instant::now() + bound;
        let mut failures = Vec::new();
        for _ in 0..pending {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match results.recv_timeout(left) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(e.to_string()),
                Err(_) => return Err(TelemetryError::ShutdownTimeout(bound)),
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(TelemetryError::Shutdown(failures.join("; ")))
        }
    }
}

/// Runs one provider's shutdown on a thread of its own, so the caller can stop waiting.
fn spawn_shutdown(
    what: &'static str,
    pending: &mut usize,
    work: impl FnOnce() + Send + 'static,
) -> Result<(), TelemetryError> {
    std::thread::Builder::new()
        .name(format!("agent-mcp-otel-{what}-shutdown"))
        .spawn(work)
        .map_err(|source| TelemetryError::Thread {
            what: "shutdown",
            source,
        })?;
    *pending += 1;
    Ok(())
}

/// Waits for an export thread (if it was started) to end: an error naming `thread` when it
/// panicked.
fn joined(
    handle: Option<std::thread::JoinHandle<()>>,
    thread: &str,
) -> opentelemetry_sdk::error::OTelSdkResult {
    match handle.map(std::thread::JoinHandle::join) {
        Some(Err(_)) => Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(
            format!("{thread} panicked"),
        )),
        _ => Ok(()),
    }
}

/// The export layer around any tracer (tests use one with an in-memory exporter).
pub(super) fn export_layer<S>(tracer: SdkTracer, server: Arc<ServerSink>) -> ExportLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        // Code locations, thread ids, targets and busy/idle times are not in the conventions
        // and cost a little on every span.
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        // Parents come from the `tracing` span tree; making each entered span the current
        // OpenTelemetry context too would serve only OpenTelemetry-native instrumentation,
        // which this server has none of, at a cost on every enter.
        .with_context_activation(false)
        .with_filter(ExportFilter { server })
}
