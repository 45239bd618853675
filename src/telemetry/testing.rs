//! Unit-test support: the export layer over an in-memory exporter, to read back the OTel spans
//! that `tracing` spans became.

use std::sync::{Arc, Mutex};

use opentelemetry::Value;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt;

use super::TraceSampler;
use super::export::export_layer;
use super::spans::{ServerSink, SinkTarget};

#[derive(Clone, Debug, Default)]
struct Collected(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collected {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().expect("not poisoned").extend(batch);
        Ok(())
    }
}

/// Runs `f` under a subscriber with the production export layer (and its filter), exporting
/// each span as it ends; returns the spans in the order they ended.
pub(super) fn capture(f: impl FnOnce()) -> Vec<SpanData> {
    let exporter = Collected::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    // The server spans are not the SDK's: they end in the same list, in the order spans end.
    let server = ServerSink::new(
        TraceSampler::default(),
        SinkTarget::Collect(exporter.0.clone()),
    );
    let subscriber =
        tracing_subscriber::registry().with(export_layer(provider.tracer("unit-test"), server));
    tracing::subscriber::with_default(subscriber, f);
    let _ = provider.force_flush();
    exporter.0.lock().expect("not poisoned").clone()
}

/// The attribute `key` of `span`.
pub(super) fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

/// The span named `name`.
pub(super) fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name:?} in {:?}", names(spans)))
}

pub(super) fn names(spans: &[SpanData]) -> Vec<String> {
    spans.iter().map(|s| s.name.to_string()).collect()
}
