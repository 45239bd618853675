//! The span exporter: each batch the SDK's batch processor hands over, encoded straight from
//! the SDK's `SpanData` into an OTLP/HTTP protobuf body (`ExportTraceServiceRequest`) and
//! posted with the exporter's HTTP client.
//!
//! Why not `opentelemetry-otlp`'s span exporter, which the metrics still use: it first turns
//! every span into the generated `opentelemetry-proto` structs (each attribute key formatted
//! into a new `String`, each value copied, the instrumentation scope hashed per span), then
//! encodes those with `prost` and frees them. On the `agent_status` benchmark that was about
//! 24 000 instructions per span on the export thread, as much as a third of a request
//! (callgrind, issue 32); writing the same bytes directly costs a small fraction, and the
//! export thread shares the request threads' cores. The wire format is the OTLP protobuf
//! (`opentelemetry/proto/trace/v1/trace.proto`, `…/common/v1/common.proto`,
//! `…/resource/v1/resource.proto`); the tests decode what is sent with the official
//! `opentelemetry-proto` definitions.
//!
//! Like the SDK's exporter it sends the headers of `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (or else
//! `OTEL_EXPORTER_OTLP_HEADERS`): `name=value` pairs separated by commas, values
//! percent-decoded, an entry that is not a valid header skipped. They are never logged.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue, USER_AGENT};
use http::{Method, Request, Uri};
use opentelemetry::trace::{SpanContext, SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_http::HttpClient;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use super::TelemetryError;
use super::duration::Series;
use super::spans::{AttrValue, Operation, ServerSpanData};

const PROTOBUF: &str = "application/x-protobuf";

/// OTLP/HTTP protobuf span exporter (see the module docs).
#[derive(Debug)]
pub(super) struct OtlpSpanExporter<C> {
    client: C,
    endpoint: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The encoded `Resource` message, set by the provider.
    resource: Vec<u8>,
    /// The encoded `InstrumentationScope` of the server spans.
    scope: Vec<u8>,
}

impl<C> OtlpSpanExporter<C> {
    /// An exporter posting to `endpoint` (the full `…/v1/traces` URL) with `headers`.
    pub(super) fn new(
        client: C,
        endpoint: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Self, TelemetryError> {
        let endpoint: Uri = endpoint.parse().map_err(|e| TelemetryError::Exporter {
            signal: "traces",
            message: format!("the endpoint {endpoint:?} is not a URL ({e})"),
        })?;
        Ok(Self {
            client,
            endpoint,
            headers,
            resource: Vec::new(),
            scope: Vec::new(),
        })
    }

    /// The encoded `Resource` message.
    pub(super) fn resource(&self) -> &[u8] {
        &self.resource
    }

    /// The encoded instrumentation scope (see [`Self::with_server_scope`]).
    pub(super) fn scope(&self) -> &[u8] {
        &self.scope
    }

    /// The instrumentation scope the server spans (and the metric) are sent under.
    pub(super) fn with_server_scope(mut self, scope: &InstrumentationScope) -> Self {
        self.scope.clear();
        instrumentation_scope(&mut self.scope, scope);
        self
    }
}

/// The headers of `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`.
pub(super) fn headers_from_env() -> Vec<(HeaderName, HeaderValue)> {
    signal_headers_from_env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
}

/// The headers of `variable` (the signal's own), else `OTEL_EXPORTER_OTLP_HEADERS`.
pub(super) fn signal_headers_from_env(variable: &str) -> Vec<(HeaderName, HeaderValue)> {
    std::env::var(variable)
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_HEADERS"))
        .map(|text| parse_headers(&text))
        .unwrap_or_default()
}

/// `name=value,…` with percent-encoded values; entries that are no valid header are skipped.
pub(super) fn parse_headers(text: &str) -> Vec<(HeaderName, HeaderValue)> {
    text.split(',')
        .filter_map(|entry| {
            let (name, value) = entry.split_once('=')?;
            let value = value.trim();
            let decoded = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .ok()?;
            let name = HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
            let value = HeaderValue::from_str(&decoded).ok()?;
            (!value.is_empty()).then_some((name, value))
        })
        .collect()
}

impl<C: HttpClient + 'static> OtlpSpanExporter<C> {
    /// Posts the server spans of one batch (their queue is ours, not the SDK's: see
    /// [`ServerQueue`](super::queue::ServerQueue)).
    pub(super) async fn export_server_spans(
        &self,
        spans: &[ServerSpanData],
        shared: &mut SharedAttributes,
    ) -> OTelSdkResult {
        if spans.is_empty() {
            return Ok(());
        }
        self.post(encode_server_request(
            &self.resource,
            &self.scope,
            spans,
            shared,
        ))
        .await
    }

    /// Posts one protobuf body to the endpoint, with the headers (the metrics use it too, on an
    /// exporter made for their endpoint).
    pub(super) async fn post(&self, body: impl Into<Bytes>) -> OTelSdkResult {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(self.endpoint.clone())
            .header(CONTENT_TYPE, PROTOBUF)
            .header(USER_AGENT, concat!("agent-mcp/", env!("CARGO_PKG_VERSION")))
            .body(body.into())
            .map_err(|e| OTelSdkError::InternalFailure(format!("the export request: {e}")))?;
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        let response = self.client.send_bytes(request).await.map_err(|e| {
            OTelSdkError::InternalFailure(format!("the export request failed: {e}"))
        })?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(OTelSdkError::InternalFailure(format!(
                "the collector answered HTTP {}",
                response.status()
            )))
        }
    }
}

impl<C: HttpClient + 'static> SpanExporter for OtlpSpanExporter<C> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if batch.is_empty() {
            return Ok(());
        }
        let body = encode_request(&self.resource, &batch);
        drop(batch);
        self.post(body).await
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = encode_resource(resource);
    }
}

/// The fields of a `Resource` message: its attributes.
fn encode_resource(resource: &Resource) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, value) in resource.iter() {
        message(&mut out, 1, |out| {
            string(out, 1, key.as_str());
            message(out, 2, |out| any_value(out, value));
        });
    }
    out
}

/// The `ExportTraceServiceRequest` of `spans`: one `ResourceSpans`, one `ScopeSpans` per run
/// of spans with the same instrumentation scope.
pub(super) fn encode_request(resource: &[u8], spans: &[SpanData]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + spans.len() * 512);
    // ExportTraceServiceRequest.resource_spans = 1
    message(&mut out, 1, |out| {
        // ResourceSpans.resource = 1
        message(out, 1, |out| out.extend_from_slice(resource));
        let mut rest = spans;
        while let Some(first) = rest.first() {
            let scope = &first.instrumentation_scope;
            let run = rest
                .iter()
                .position(|s| s.instrumentation_scope != *scope)
                .unwrap_or(rest.len());
            // ResourceSpans.scope_spans = 2
            message(out, 2, |out| {
                message(out, 1, |out| instrumentation_scope(out, scope));
                for span in &rest[..run] {
                    message(out, 2, |out| encode_span(out, span));
                }
                if let Some(url) = scope.schema_url() {
                    string(out, 3, url);
                }
            });
            rest = &rest[run..];
        }
    });
    out
}

/// The `ExportMetricsServiceRequest` of the duration histogram's `series` (cumulative since
/// `start`, collected at `now`): one `ResourceMetrics`, one `ScopeMetrics` (`scope` already
/// encoded), one `Metric`. `None` when there is no series yet (nothing is sent, as the SDK's
/// reader sends nothing without a data point).
pub(super) fn encode_metrics_request(
    resource: &[u8],
    scope: &[u8],
    start: SystemTime,
    now: SystemTime,
    series: &[Series],
) -> Option<Vec<u8>> {
    use super::semconv::metric;
    if series.is_empty() {
        return None;
    }
    let (start, now) = (nanos(start), nanos(now));
    let mut out = Vec::with_capacity(256 + series.len() * 512);
    // ExportMetricsServiceRequest.resource_metrics = 1
    message(&mut out, 1, |out| {
        // ResourceMetrics.resource = 1, .scope_metrics = 2
        message(out, 1, |out| out.extend_from_slice(resource));
        message(out, 2, |out| {
            // ScopeMetrics.scope = 1, .metrics = 2
            message(out, 1, |out| out.extend_from_slice(scope));
            message(out, 2, |out| {
                // Metric.name = 1, .description = 2, .unit = 3, .histogram = 9
                string(out, 1, metric::MCP_SERVER_OPERATION_DURATION);
                string(out, 2, DURATION_DESCRIPTION);
                string(out, 3, metric::UNIT_SECONDS);
                message(out, 9, |out| {
                    for s in series {
                        // Histogram.data_points = 1
                        message(out, 1, |out| histogram_point(out, s, start, now));
                    }
                    // Histogram.aggregation_temporality = 2: CUMULATIVE
                    varint_field(out, 2, 2);
                });
            });
        });
    });
    Some(out)
}

/// The histogram's description, as the SDK instrument had it.
pub(super) const DURATION_DESCRIPTION: &str = "Duration of the MCP request or notification as \
    observed on the server, from its arrival to its answer";

fn histogram_point(out: &mut Vec<u8>, s: &Series, start: u64, now: u64) {
    use super::semconv::metric::DURATION_BUCKETS;
    fn double(out: &mut Vec<u8>, field: u32, f: f64) {
        tag(out, field, 1);
        out.extend_from_slice(&f.to_bits().to_le_bytes());
    }
    // HistogramDataPoint: start_time_unix_nano = 2, time_unix_nano = 3, count = 4, sum = 5,
    // bucket_counts = 6, explicit_bounds = 7, attributes = 9, min = 11, max = 12.
    fixed64(out, 2, start);
    fixed64(out, 3, now);
    fixed64(out, 4, s.count);
    double(out, 5, s.sum);
    tag(out, 6, 2);
    varint(out, (s.buckets.len() * 8) as u64);
    for n in s.buckets {
        out.extend_from_slice(&n.to_le_bytes());
    }
    tag(out, 7, 2);
    varint(out, (DURATION_BUCKETS.len() * 8) as u64);
    for bound in DURATION_BUCKETS {
        out.extend_from_slice(&bound.to_bits().to_le_bytes());
    }
    s.for_each_attribute(|key, value| {
        message(out, 9, |out| {
            string(out, 1, key);
            message(out, 2, |out| string(out, 1, value));
        });
    });
    if s.count > 0 {
        double(out, 11, s.min);
        double(out, 12, s.max);
    }
}

/// The `ExportTraceServiceRequest` of server spans: one `ResourceSpans`, one `ScopeSpans`
/// (`scope` already encoded). The same bytes [`encode_request`] writes for the same spans as
/// `SpanData` (a test holds them to it), from the plain record, with no attribute `Vec`.
pub(super) fn encode_server_request(
    resource: &[u8],
    scope: &[u8],
    spans: &[ServerSpanData],
    shared: &mut SharedAttributes,
) -> Bytes {
    // ExportTraceServiceRequest { resource_spans = 1: ResourceSpans { resource = 1,
    // scope_spans = 2: ScopeSpans { scope = 1, spans = 2 … } } }. The two outer lengths are
    // known only once every span is written, and `message` would then move the whole body up
    // twice: instead the spans are written after room for what precedes them (both headers
    // and the resource), which is filled in last, right before them, so no byte moves.
    const HEADER: usize = 1 + 10;
    let room = 2 * HEADER + HEADER + resource.len();
    // A server span of a tool call over HTTP is about 380 bytes: room for that, so the body
    // is not grown (and copied) on the way.
    let mut out = Vec::with_capacity(room + HEADER + scope.len() + spans.len() * 400);
    out.resize(room, 0);
    message(&mut out, 1, |out| out.extend_from_slice(scope));
    for span in spans {
        message(&mut out, 2, |out| encode_server_span(out, span, shared));
    }
    let scope_spans = out.len() - room;
    let mut prefix = Vec::with_capacity(room);
    message(&mut prefix, 1, |out| out.extend_from_slice(resource));
    tag(&mut prefix, 2, 2);
    varint(&mut prefix, scope_spans as u64);
    let resource_spans = prefix.len() + scope_spans;
    let mut head = Vec::with_capacity(HEADER);
    tag(&mut head, 1, 2);
    varint(&mut head, resource_spans as u64);
    let start = room - prefix.len() - head.len();
    out[start..start + head.len()].copy_from_slice(&head);
    out[start + head.len()..room].copy_from_slice(&prefix);
    Bytes::from(out).slice(start..)
}

/// The encoded [shared attributes](Operation::for_each_shared_attribute) of the operations
/// seen so far, kept by the export thread: most of a server span's attributes are the same for
/// every request of one method, tool, version and transport, so they are written once, not
/// once a span (issue 32: they were half of the export thread's instructions). At most
/// [`Self::MAX`] operations are kept; a further one is encoded each time (there are only so
/// many names of ours, so this does not happen).
#[derive(Debug, Default)]
pub(super) struct SharedAttributes {
    encoded: Vec<(Operation, Vec<u8>)>,
}

impl SharedAttributes {
    const MAX: usize = 64;

    /// Appends the attribute fields of `operation`'s shared attributes to `out`.
    fn write(&mut self, out: &mut Vec<u8>, operation: &Operation) {
        if let Some((_, fields)) = self
            .encoded
            .iter()
            .find(|(seen, _)| seen.same_attributes(operation))
        {
            out.extend_from_slice(fields);
            return;
        }
        let mut fields = Vec::new();
        operation.for_each_shared_attribute(|key, value| {
            attribute(&mut fields, 9, key, AttrValue::Str(value.as_bytes()));
        });
        out.extend_from_slice(&fields);
        if self.encoded.len() < Self::MAX {
            self.encoded.push((*operation, fields));
        }
    }
}

fn encode_server_span(out: &mut Vec<u8>, span: &ServerSpanData, shared: &mut SharedAttributes) {
    ids_and_state(out, &span.context);
    if span.parent_span_id != opentelemetry::trace::SpanId::INVALID {
        bytes(out, 4, &span.parent_span_id.to_bytes());
    }
    string(out, 5, &span.name());
    // SpanKind SERVER
    varint_field(out, 6, 2);
    fixed64(out, 7, nanos(span.start));
    fixed64(out, 8, nanos(span.end));
    // The order `ServerSpanData::for_each_attribute` gives: the shared ones, then its own.
    shared.write(out, &span.operation);
    span.for_each_own_attribute(|key, value| attribute(out, 9, key, value));
    if let Some(linked) = &span.link {
        message(out, 13, |out| {
            ids_and_state(out, linked);
            fixed32(out, 6, flags(linked, linked.is_remote()));
        });
    }
    status(out, &span.status());
    fixed32(out, 16, flags(&span.context, span.parent_is_remote));
}

/// A `KeyValue` field `field` of a string or integer value, its lengths computed first (no
/// body moved, one reservation): what `message(field, key_value)` writes, for less.
fn attribute(out: &mut Vec<u8>, field: u32, key: &str, value: AttrValue<'_>) {
    fn varint_len(n: u64) -> usize {
        (64 - (n | 1).leading_zeros() as usize).div_ceil(7)
    }
    // AnyValue: string_value = 1 (length-delimited) or int_value = 3 (varint).
    let any_len = match value {
        AttrValue::Str(s) => 1 + varint_len(s.len() as u64) + s.len(),
        AttrValue::Int(n) => 1 + varint_len(n as u64),
    };
    // KeyValue: key = 1, value = 2.
    let kv_len =
        1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(any_len as u64) + any_len;
    out.reserve(2 + varint_len(kv_len as u64) + kv_len);
    tag(out, field, 2);
    varint(out, kv_len as u64);
    out.push(0x0a);
    varint(out, key.len() as u64);
    out.extend_from_slice(key.as_bytes());
    out.push(0x12);
    varint(out, any_len as u64);
    match value {
        AttrValue::Str(s) => {
            out.push(0x0a);
            varint(out, s.len() as u64);
            out.extend_from_slice(s);
        }
        AttrValue::Int(n) => {
            out.push(0x18);
            varint(out, n as u64);
        }
    }
}

fn status(out: &mut Vec<u8>, status: &Status) {
    match status {
        // An empty status is UNSET.
        Status::Unset => message(out, 15, |_| {}),
        Status::Ok => message(out, 15, |out| varint_field(out, 3, 1)),
        Status::Error { description } => message(out, 15, |out| {
            if !description.is_empty() {
                string(out, 2, description);
            }
            varint_field(out, 3, 2);
        }),
    }
}

fn instrumentation_scope(out: &mut Vec<u8>, scope: &InstrumentationScope) {
    string(out, 1, scope.name());
    if let Some(version) = scope.version() {
        string(out, 2, version);
    }
    for kv in scope.attributes() {
        message(out, 3, |out| key_value(out, kv));
    }
}

/// Span flags (trace.proto `SpanFlags`): the W3C flags, and whether the parent is remote.
fn flags(context: &SpanContext, parent_is_remote: bool) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    let mut flags = u32::from(context.trace_flags().to_u8()) | HAS_IS_REMOTE;
    if parent_is_remote {
        flags |= IS_REMOTE;
    }
    flags
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `trace_id`, `span_id` and `trace_state` (fields 1 to 3 of both a Span and a Span.Link).
fn ids_and_state(out: &mut Vec<u8>, context: &SpanContext) {
    bytes(out, 1, &context.trace_id().to_bytes());
    bytes(out, 2, &context.span_id().to_bytes());
    let state = context.trace_state().header();
    if !state.is_empty() {
        string(out, 3, &state);
    }
}

fn encode_span(out: &mut Vec<u8>, span: &SpanData) {
    let context = &span.span_context;
    ids_and_state(out, context);
    if span.parent_span_id != opentelemetry::trace::SpanId::INVALID {
        bytes(out, 4, &span.parent_span_id.to_bytes());
    }
    string(out, 5, &span.name);
    let kind = match span.span_kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    };
    varint_field(out, 6, kind);
    fixed64(out, 7, nanos(span.start_time));
    fixed64(out, 8, nanos(span.end_time));
    for kv in &span.attributes {
        message(out, 9, |out| key_value(out, kv));
    }
    varint_field(out, 10, u64::from(span.dropped_attributes_count));
    for event in &span.events.events {
        message(out, 11, |out| {
            fixed64(out, 1, nanos(event.timestamp));
            string(out, 2, &event.name);
            for kv in &event.attributes {
                message(out, 3, |out| key_value(out, kv));
            }
            varint_field(out, 4, u64::from(event.dropped_attributes_count));
        });
    }
    varint_field(out, 12, u64::from(span.events.dropped_count));
    for link in &span.links.links {
        message(out, 13, |out| {
            let linked = &link.span_context;
            ids_and_state(out, linked);
            for kv in &link.attributes {
                message(out, 4, |out| key_value(out, kv));
            }
            varint_field(out, 5, u64::from(link.dropped_attributes_count));
            fixed32(out, 6, flags(linked, linked.is_remote()));
        });
    }
    varint_field(out, 14, u64::from(span.links.dropped_count));
    status(out, &span.status);
    fixed32(out, 16, flags(context, span.parent_span_is_remote));
}

fn key_value(out: &mut Vec<u8>, kv: &KeyValue) {
    string(out, 1, kv.key.as_str());
    message(out, 2, |out| any_value(out, &kv.value));
}

/// common.proto `AnyValue`. Its value is a `oneof`, so it is written even when it is the
/// type's default (`false`, `0`): its presence says which kind it is.
fn any_value(out: &mut Vec<u8>, value: &Value) {
    fn int(out: &mut Vec<u8>, n: i64) {
        tag(out, 3, 0);
        // int64: two's complement as a varint.
        varint(out, n as u64);
    }
    fn boolean(out: &mut Vec<u8>, b: bool) {
        tag(out, 2, 0);
        varint(out, u64::from(b));
    }
    fn double(out: &mut Vec<u8>, f: f64) {
        tag(out, 4, 1);
        out.extend_from_slice(&f.to_bits().to_le_bytes());
    }
    match value {
        Value::String(s) => string(out, 1, s.as_str()),
        Value::Bool(b) => boolean(out, *b),
        Value::I64(i) => int(out, *i),
        Value::F64(f) => double(out, *f),
        Value::Array(array) => message(out, 5, |out| match array {
            Array::Bool(items) => items
                .iter()
                .for_each(|v| message(out, 1, |out| boolean(out, *v))),
            Array::I64(items) => items
                .iter()
                .for_each(|v| message(out, 1, |out| int(out, *v))),
            Array::F64(items) => items
                .iter()
                .for_each(|v| message(out, 1, |out| double(out, *v))),
            Array::String(items) => items
                .iter()
                .for_each(|v| message(out, 1, |out| string(out, 1, v.as_str()))),
            // A kind of array a later `opentelemetry` adds: as one string value.
            other => message(out, 1, |out| string(out, 1, &other.to_string())),
        }),
        // A kind of value a later `opentelemetry` adds: as its text.
        other => string(out, 1, &other.to_string()),
    }
}

// The protobuf wire format: a field is its number and wire type as a varint (the "tag"), then
// a varint (type 0), 8 bytes (1), a length and that many bytes (2) or 4 bytes (5).

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire_type: u32) {
    varint(out, u64::from(field << 3 | wire_type));
}

/// A varint field; 0 is the default and is left out.
fn varint_field(out: &mut Vec<u8>, field: u32, n: u64) {
    if n != 0 {
        tag(out, field, 0);
        varint(out, n);
    }
}

fn fixed64(out: &mut Vec<u8>, field: u32, n: u64) {
    if n != 0 {
        tag(out, field, 1);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

fn fixed32(out: &mut Vec<u8>, field: u32, n: u32) {
    if n != 0 {
        tag(out, field, 5);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    tag(out, field, 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn string(out: &mut Vec<u8>, field: u32, text: &str) {
    bytes(out, field, text.as_bytes());
}

/// An embedded message written by `body`, preceded by its length. The length is not known
/// before the body is written: one byte is reserved, which holds it below 128, and the body is
/// moved up when the length needs more.
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    tag(out, field, 2);
    let at = out.len();
    out.push(0);
    body(out);
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return;
    }
    let mut prefix = Vec::with_capacity(10);
    varint(&mut prefix, len as u64);
    let extra = prefix.len() - 1;
    out.resize(out.len() + extra, 0);
    out.copy_within(at + 1..at + 1 + len, at + 1 + extra);
    out[at..at + prefix.len()].copy_from_slice(&prefix);
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::str::FromStr;

    use opentelemetry::trace::{Event, Link, SpanId, TraceFlags, TraceId, TraceState};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message as _;

    use super::*;

    fn context(trace: u128, span: u64, sampled: bool, remote: bool, state: &str) -> SpanContext {
        let flags = if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            flags,
            remote,
            TraceState::from_str(state).unwrap(),
        )
    }

    fn span(name: &'static str, scope: &InstrumentationScope) -> SpanData {
        let start = UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789);
        SpanData {
            span_context: context(7, 9, true, false, ""),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed(name),
            start_time: start,
            end_time: start + Duration::from_micros(1500),
            attributes: vec![KeyValue::new("k", "v")],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope.clone(),
        }
    }

    /// Our bytes decode, with the official definitions, to exactly what the official
    /// conversion of the same spans gives.
    #[test]
    fn the_encoding_matches_the_official_conversion() {
        let ours_scope = InstrumentationScope::builder("agent-mcp")
            .with_version("1.2.3")
            .with_attributes([KeyValue::new("scope.attr", true)])
            .build();
        let other_scope = InstrumentationScope::builder("other")
            .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
            .build();
        let mut full = span("tools/call agent_run", &ours_scope);
        full.span_context = context(
            0x4bf92f3577b34da6a3ce929d0e0e4736,
            0xabc,
            true,
            false,
            "rojo=00f067aa0ba902b7",
        );
        full.parent_span_id = SpanId::from(0x00f067aa0ba902b7);
        full.parent_span_is_remote = true;
        full.span_kind = SpanKind::Server;
        full.attributes = vec![
            KeyValue::new("s", "text é"),
            KeyValue::new("long", "x".repeat(300)),
            KeyValue::new("b", false),
            KeyValue::new("i", -5_i64),
            KeyValue::new("big", i64::MAX),
            KeyValue::new("f", 0.25),
            KeyValue::new("bs", Value::Array(Array::Bool(vec![true, false]))),
            KeyValue::new("is", Value::Array(Array::I64(vec![1, -1]))),
            KeyValue::new("fs", Value::Array(Array::F64(vec![1.5]))),
            KeyValue::new(
                "ss",
                Value::Array(Array::String(vec!["a".into(), "".into()])),
            ),
        ];
        full.dropped_attributes_count = 2;
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            "exception",
            full.start_time + Duration::from_micros(3),
            vec![KeyValue::new("exception.type", "timeout")],
            1,
        ));
        events.dropped_count = 4;
        full.events = events;
        let mut links = SpanLinks::default();
        links.links.push(Link::new(
            context(0x1111, 0x2222, false, true, "congo=t61rcWkgMzE"),
            vec![KeyValue::new("why", "transport")],
            3,
        ));
        links.dropped_count = 1;
        full.links = links;
        full.status = Status::error("invalid params");

        let mut ok = span("chat m", &ours_scope);
        ok.span_kind = SpanKind::Client;
        ok.status = Status::Ok;
        ok.span_context = context(7, 10, false, false, "");
        let mut bare_error = span("execute_tool x", &ours_scope);
        bare_error.status = Status::error("");
        let mut many = span("many", &ours_scope);
        many.attributes = (0..50)
            .map(|i| KeyValue::new(format!("k{i}"), i as i64))
            .collect();
        let other = span("other", &other_scope);
        let spans = vec![full, ok, bare_error, many, other];

        let resource = Resource::builder_empty()
            .with_service_name("agent-mcp-test")
            .with_attribute(KeyValue::new("deployment.environment", "ci"))
            .build();
        let ours = ExportTraceServiceRequest::decode(
            encode_request(&encode_resource(&resource), &spans).as_slice(),
        )
        .expect("decodes");
        let official = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans,
                &ResourceAttributesWithSchema::from(&resource),
            ),
        };
        assert_eq!(ours, official);
    }

    /// The server spans' own encoder (the shared attributes written once per operation, the
    /// rest per span) decodes to exactly what the official conversion of the same spans as the
    /// SDK's `SpanData` gives, for every kind of operation, id, peer, error and link, and
    /// again on a second batch, when every operation's shared attributes come from the cache.
    #[test]
    fn server_spans_encode_as_the_official_conversion_of_their_span_data() {
        use super::super::spans::{Network, RequestIdAttr, ServerError};
        let start = UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789);
        let server = |operation: Operation, n: u64| ServerSpanData {
            context: context(
                0x4bf9_2f35 + u128::from(n),
                0x100 + n,
                !n.is_multiple_of(3),
                false,
                "",
            ),
            parent_span_id: SpanId::INVALID,
            parent_is_remote: false,
            start,
            end: start + Duration::from_micros(40 + n),
            operation,
            request_id: RequestIdAttr::None,
            error: None,
            link: None,
        };
        let http = |peer: &str| Network::Http {
            peer: Some(peer.parse().unwrap()),
        };
        let tool = |name, network| Operation {
            tool: Some(name),
            protocol_version: Some("2026-07-28"),
            network,
            ..Operation::new("tools/call")
        };
        let mut run = server(tool("agent_run", http("127.0.0.1:50123")), 1);
        run.request_id = RequestIdAttr::Number(-42);
        run.parent_span_id = SpanId::from(0x00f0_67aa_0ba9_02b7);
        run.parent_is_remote = true;
        run.context = context(0x4bf9, 0xabc, true, false, "rojo=00f067aa0ba902b7");
        run.link = Some(Box::new(context(
            0x1111,
            0x2222,
            false,
            true,
            "congo=t61rcWkgMzE",
        )));
        // The same operation from another peer, with a text id: the cache's hit.
        let mut again = server(tool("agent_run", http("[fe80::1]:443")), 2);
        again.request_id = RequestIdAttr::Text("req-é-7".to_owned());
        let mut failed = server(tool("agent_status", http("10.20.100.255:1")), 3);
        failed.request_id = RequestIdAttr::Number(i64::MAX);
        failed.error = Some(ServerError::Rpc(-32602, "invalid params"));
        let mut tool_error = server(tool("agent_status", Network::Stdio), 4);
        tool_error.error = Some(ServerError::Tool);
        let other = server(tool("_OTHER", Network::Http { peer: None }), 5);
        let initialize = server(Operation::new("initialize"), 6);
        let tasks = server(
            Operation {
                protocol_version: Some("2025-11-25"),
                network: Network::InProcess,
                ..Operation::new("tasks/get")
            },
            7,
        );
        let spans = vec![run, again, failed, tool_error, other, initialize, tasks];

        let scope = InstrumentationScope::builder(super::super::semconv::SCOPE).build();
        let mut scope_bytes = Vec::new();
        instrumentation_scope(&mut scope_bytes, &scope);
        let resource = Resource::builder_empty()
            .with_service_name("agent-mcp-test")
            .build();
        // The official conversion of `spans`, and ours, decoded.
        let official = |spans: &[ServerSpanData]| ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans.iter().map(ServerSpanData::to_span_data).collect(),
                &ResourceAttributesWithSchema::from(&resource),
            ),
        };
        let ours = |spans: &[ServerSpanData], shared: &mut SharedAttributes| {
            let body =
                encode_server_request(&encode_resource(&resource), &scope_bytes, spans, shared);
            ExportTraceServiceRequest::decode(body).expect("decodes")
        };
        let mut shared = SharedAttributes::default();
        for batch in ["first", "second"] {
            assert_eq!(
                ours(&spans, &mut shared),
                official(&spans),
                "the {batch} batch"
            );
        }
        // One entry per operation: the peer is not part of the shared attributes.
        assert_eq!(shared.encoded.len(), 6);
        // A full batch and more (lengths of three varint bytes), and a lone span.
        for count in [1, 600] {
            let many: Vec<ServerSpanData> = spans.iter().cycle().take(count).cloned().collect();
            assert_eq!(ours(&many, &mut shared), official(&many), "{count} spans");
        }
    }

    #[test]
    fn lengths_of_any_size_are_varints() {
        for len in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let mut out = Vec::new();
            message(&mut out, 1, |out| out.resize(out.len() + len, 7));
            let mut expected = vec![0x0a];
            varint(&mut expected, len as u64);
            expected.resize(expected.len() + len, 7);
            assert_eq!(out, expected, "length {len}");
        }
    }

    #[test]
    fn headers_are_decoded_and_bad_entries_skipped() {
        let headers = parse_headers("api-key=s%20e,bad header=x, x-team = core ,empty=,=v,novalue");
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("api-key".to_owned(), "s e".to_owned()),
                ("x-team".to_owned(), "core".to_owned())
            ]
        );
    }
}
