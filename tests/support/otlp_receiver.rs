//! A real OTLP/HTTP receiver on loopback for the telemetry tests: `POST /v1/traces` and
//! `POST /v1/metrics` with protobuf bodies, decoded with the official `opentelemetry-proto`
//! definitions (prost), answered as a collector does (200, an empty `Export…ServiceResponse`).
//! Every HTTP request is counted, on any path, so a test can also show that nothing came.
//!
//! [`BlackHole`] is the other collector: it accepts connections and never reads or answers.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as OtlpStatus;
use prost::Message;

/// An attribute's value, as far as these tests look.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
    Other,
}

impl Attr {
    pub fn str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            _ => None,
        }
    }
}

fn attr(value: &Option<AnyValue>) -> Attr {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => Attr::Str(s.clone()),
        Some(any_value::Value::IntValue(i)) => Attr::Int(*i),
        Some(any_value::Value::BoolValue(b)) => Attr::Bool(*b),
        Some(any_value::Value::DoubleValue(d)) => Attr::Double(*d),
        _ => Attr::Other,
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, Attr> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), attr(&kv.value)))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One span as received, with its resource and scope.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    pub name: String,
    pub kind: SpanKind,
    pub trace_id: String,
    pub span_id: String,
    /// `None` for a root span.
    pub parent_span_id: Option<String>,
    pub attributes: BTreeMap<String, Attr>,
    pub events: usize,
    pub links: Vec<(String, String)>,
    pub status: OtlpStatus,
    pub status_message: String,
    pub resource: BTreeMap<String, Attr>,
    pub scope: String,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attributes.get(key)
    }

    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(Attr::str)
    }
}

/// One histogram data point as received.
#[derive(Clone, Debug)]
pub struct ReceivedHistogramPoint {
    pub metric: String,
    pub unit: String,
    pub count: u64,
    pub sum: Option<f64>,
    pub explicit_bounds: Vec<f64>,
    pub attributes: BTreeMap<String, Attr>,
    pub resource: BTreeMap<String, Attr>,
}

#[derive(Default)]
struct Received {
    /// Keep only counts, not the spans (a benchmark's millions).
    count_only: bool,
    span_count: usize,
    requests: usize,
    /// (path, content type) of every request.
    seen: Vec<(String, String)>,
    /// Every request's headers, by name (lowercase).
    headers: Vec<(String, String)>,
    spans: Vec<ReceivedSpan>,
    histogram_points: Vec<ReceivedHistogramPoint>,
    metric_names: Vec<String>,
    undecodable: usize,
}

type Shared = Arc<(Mutex<Received>, tokio::sync::Notify)>;

/// The receiver (see the module docs). Stops when dropped.
pub struct OtlpReceiver {
    pub addr: SocketAddr,
    state: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(state: &Shared, path: &str, headers: &HeaderMap) {
    let mut r = state.0.lock().unwrap();
    r.requests += 1;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    r.seen.push((path.to_owned(), content_type));
    for (name, value) in headers {
        let value = value.to_str().unwrap_or_default().to_owned();
        r.headers.push((name.as_str().to_owned(), value));
    }
}

fn protobuf(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/x-protobuf")], body).into_response()
}

/// Records the request and decodes `body` as `R`: a decoded one goes to `store`, one that is
/// not is counted as undecodable (and answered 400); then the waiters are woken.
fn export<R: Message + Default>(
    state: &Shared,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
    store: impl FnOnce(&mut Received, R),
    response: Vec<u8>,
) -> Response {
    record(state, path, headers);
    let decoded = R::decode(body);
    let answer = match &decoded {
        Ok(_) => protobuf(response),
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    };
    {
        let mut r = state.0.lock().unwrap();
        match decoded {
            Ok(request) => store(&mut r, request),
            Err(_) => r.undecodable += 1,
        }
    }
    state.1.notify_waiters();
    answer
}

fn resource_attrs(resource: &Option<Resource>) -> BTreeMap<String, Attr> {
    resource
        .as_ref()
        .map(|res| attrs(&res.attributes))
        .unwrap_or_default()
}

fn store_spans(r: &mut Received, request: ExportTraceServiceRequest) {
    for rs in &request.resource_spans {
        let resource = resource_attrs(&rs.resource);
        for ss in &rs.scope_spans {
            r.span_count += ss.spans.len();
            if r.count_only {
                continue;
            }
            let scope = ss
                .scope
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default();
            for span in &ss.spans {
                let status = span.status.clone().unwrap_or_default();
                r.spans.push(ReceivedSpan {
                    name: span.name.clone(),
                    kind: SpanKind::try_from(span.kind).unwrap_or(SpanKind::Unspecified),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    attributes: attrs(&span.attributes),
                    events: span.events.len(),
                    links: span
                        .links
                        .iter()
                        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                    status: OtlpStatus::try_from(status.code).unwrap_or(OtlpStatus::Unset),
                    status_message: status.message,
                    resource: resource.clone(),
                    scope: scope.clone(),
                });
            }
        }
    }
}

fn store_metrics(r: &mut Received, request: ExportMetricsServiceRequest) {
    for rm in &request.resource_metrics {
        let resource = resource_attrs(&rm.resource);
        for metric in rm.scope_metrics.iter().flat_map(|sm| &sm.metrics) {
            r.metric_names.push(metric.name.clone());
            let Some(Data::Histogram(h)) = &metric.data else {
                continue;
            };
            for point in &h.data_points {
                r.histogram_points.push(ReceivedHistogramPoint {
                    metric: metric.name.clone(),
                    unit: metric.unit.clone(),
                    count: point.count,
                    sum: point.sum,
                    explicit_bounds: point.explicit_bounds.clone(),
                    attributes: attrs(&point.attributes),
                    resource: resource.clone(),
                });
            }
        }
    }
}

async fn traces(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let response = ExportTraceServiceResponse::default().encode_to_vec();
    export(&state, "/v1/traces", &headers, body, store_spans, response)
}

async fn metrics(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let response = ExportMetricsServiceResponse::default().encode_to_vec();
    export(
        &state,
        "/v1/metrics",
        &headers,
        body,
        store_metrics,
        response,
    )
}

async fn anything_else(
    State(state): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> StatusCode {
    record(&state, uri.path(), &headers);
    state.1.notify_waiters();
    StatusCode::NOT_FOUND
}

impl OtlpReceiver {
    pub async fn start() -> OtlpReceiver {
        Self::start_with(false).await
    }

    /// A receiver that counts spans without keeping them.
    pub async fn start_counting() -> OtlpReceiver {
        Self::start_with(true).await
    }

    async fn start_with(count_only: bool) -> OtlpReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the OTLP receiver");
        let addr = listener.local_addr().expect("addr");
        let state: Shared = Arc::default();
        state.0.lock().unwrap().count_only = count_only;
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .fallback(anything_else)
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OtlpReceiver { addr, state, task }
    }

    /// The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every HTTP request received so far, on any path.
    pub fn requests(&self) -> usize {
        self.state.0.lock().unwrap().requests
    }

    /// (path, content type) of each request so far.
    pub fn seen(&self) -> Vec<(String, String)> {
        self.state.0.lock().unwrap().seen.clone()
    }

    /// The values a header had, over all requests.
    pub fn header_values(&self, name: &str) -> Vec<String> {
        self.state
            .0
            .lock()
            .unwrap()
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Bodies that did not decode as OTLP protobuf.
    pub fn undecodable(&self) -> usize {
        self.state.0.lock().unwrap().undecodable
    }

    /// Spans received so far, kept or not.
    pub fn span_count(&self) -> usize {
        self.state.0.lock().unwrap().span_count
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.state.0.lock().unwrap().spans.clone()
    }

    pub fn histogram_points(&self, metric: &str) -> Vec<ReceivedHistogramPoint> {
        self.state
            .0
            .lock()
            .unwrap()
            .histogram_points
            .iter()
            .filter(|p| p.metric == metric)
            .cloned()
            .collect()
    }

    /// Waits until `ready` holds for what was received, or panics after `within`.
    pub async fn wait_until(&self, within: Duration, ready: impl Fn(&OtlpReceiver) -> bool) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.state.1.notified();
            if ready(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                assert!(
                    ready(self),
                    "the receiver did not get what was awaited in {within:?}; spans: {:#?}",
                    self.spans()
                );
                return;
            }
        }
    }

    /// The first span named `name`, waiting for it up to `within`.
    pub async fn span(&self, name: &str, within: Duration) -> ReceivedSpan {
        self.wait_until(within, |r| r.spans().iter().any(|s| s.name == name))
            .await;
        self.spans()
            .into_iter()
            .find(|s| s.name == name)
            .expect("awaited above")
    }
}

/// A collector that accepts connections and never reads from them nor answers. Counts the
/// connections; stops (and closes them) when dropped.
pub struct BlackHole {
    pub addr: SocketAddr,
    connections: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BlackHole {
    pub async fn start() -> BlackHole {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the black hole");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(Mutex::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                *counted.lock().unwrap() += 1;
                held.push(socket);
            }
        });
        BlackHole {
            addr,
            connections,
            task,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}
