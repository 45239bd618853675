//! W3C trace context in and out: the caller's `traceparent` / `tracestate` / `baggage` read
//! from a request's `params._meta` (unprefixed keys, SEP-414) or its HTTP headers, and a
//! [`TraceCarrier`] that holds a span's context as a few strings, so a task can carry its
//! trace through the queue (and the database, to whichever instance runs it) and continue it.
//!
//! Parsing is the OpenTelemetry propagators' (`TraceContextPropagator`, `BaggagePropagator`):
//! an invalid `traceparent` (wrong version, all-zero ids, upper case) yields no context rather
//! than an error, and an oversized `baggage` is dropped by the propagator. Everything here is
//! a no-op on a disabled span, so nothing is parsed when export is off.
//!
//! The MCP conventions make the `_meta` context the server span's parent, and the transport's
//! (the HTTP `traceparent` header) a link when both are present and differ
//! ([`RemoteParent`]); with only a header, the header's context is the parent.
//!
//! ```
//! use agent_mcp::telemetry::context::{RemoteParent, TraceCarrier, TraceCarrierExt};
//! use opentelemetry::trace::TraceContextExt;
//!
//! let meta = serde_json::json!({
//!     "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
//!     "tracestate": "rojo=00f067aa0ba902b7",
//! });
//! let remote = RemoteParent::of_request(meta.as_object(), None);
//! let parent = remote.parent.expect("a valid traceparent");
//! assert_eq!(
//!     parent.span().span_context().trace_id().to_string(),
//!     "4bf92f3577b34da6a3ce929d0e0e4736"
//! );
//!
//! // The same context as strings to store with a task, and back.
//! let carrier = TraceCarrier::from_context(&parent).unwrap();
//! assert_eq!(carrier.traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
//! assert_eq!(carrier.tracestate.as_deref(), Some("rojo=00f067aa0ba902b7"));
//! let json = serde_json::to_string(&carrier).unwrap();
//! let back: TraceCarrier = serde_json::from_str(&json).unwrap();
//! assert!(back.to_context().is_some());
//! ```

use std::str::FromStr;
use std::sync::LazyLock;

use opentelemetry::Context;
use opentelemetry::propagation::{
    Extractor, Injector, TextMapCompositePropagator, TextMapPropagator,
};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use serde_json::{Map, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// W3C Trace Context and Baggage, the two formats SEP-414 names for `_meta`.
static PROPAGATOR: LazyLock<TextMapCompositePropagator> = LazyLock::new(|| {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
});
static TRACE_CONTEXT: LazyLock<TraceContextPropagator> = LazyLock::new(TraceContextPropagator::new);
static BAGGAGE_PROPAGATOR: LazyLock<BaggagePropagator> = LazyLock::new(BaggagePropagator::new);

/// What [`PROPAGATOR`] extracts, into an empty context, for less: each request's server span
/// reads its caller's context, and the propagator's general parse (the header split into a
/// `Vec`, ids through `from_str_radix`) was a tenth of the span's cost. A `traceparent` in the
/// canonical form (version `00`, lowercase hex, 55 characters) is read here, with the result
/// the propagator gives; any other goes to the propagator, and baggage only when there is one.
fn extract(extractor: &dyn Extractor) -> Context {
    let cx = match extractor.get(TRACEPARENT) {
        None => Context::new(),
        Some(traceparent) => match canonical_traceparent(traceparent, extractor.get(TRACESTATE)) {
            Some(span) => Context::new().with_remote_span_context(span),
            None => TRACE_CONTEXT.extract_with_context(&Context::new(), extractor),
        },
    };
    if extractor.get(BAGGAGE).is_some() {
        BAGGAGE_PROPAGATOR.extract_with_context(&cx, extractor)
    } else {
        cx
    }
}

/// `00-{32 hex}-{16 hex}-{2 hex}`, all lowercase, as a remote span context with only the
/// sampled flag kept (as the propagator does); `None` for any other form, and for all-zero ids.
fn canonical_traceparent(value: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    // A digit's value, or 0x80 set for anything that is not a lowercase hex digit: one table
    // load a digit, the check folded into one `or` (a `match` a digit cost twice as much).
    const HEX: [u8; 256] = {
        let mut table = [0x80u8; 256];
        let mut i = 0;
        while i < 10 {
            table[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            table[b'a' as usize + i] = 10 + i as u8;
            i += 1;
        }
        table
    };
    // At most 16 digits into a u64 (a u128 shift per digit cost twice as much).
    fn hex64(bytes: &[u8]) -> Option<u64> {
        let mut n = 0u64;
        let mut bad = 0u8;
        for &b in bytes {
            let digit = HEX[usize::from(b)];
            bad |= digit;
            n = n << 4 | u64::from(digit & 0x0f);
        }
        (bad & 0x80 == 0).then_some(n)
    }
    let b = value.trim().as_bytes();
    if b.len() != 55 || &b[..3] != b"00-" || b[35] != b'-' || b[52] != b'-' {
        return None;
    }
    let trace_id =
        TraceId::from(u128::from(hex64(&b[3..19])?) << 64 | u128::from(hex64(&b[19..35])?));
    let span_id = SpanId::from(hex64(&b[36..52])?);
    // Two digits: below 256.
    let flags = hex64(&b[53..55])? as u8;
    let state = tracestate
        .map(|s| TraceState::from_str(s).unwrap_or_default())
        .unwrap_or_default();
    let span = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        state,
    );
    span.is_valid().then_some(span)
}

const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";
const BAGGAGE: &str = "baggage";

pub use agent_mcp_plugin::TraceCarrier;

/// The OpenTelemetry side of a [`TraceCarrier`] (the struct itself is plain strings, in the
/// plugin crate, so a [`Task`](crate::task::Task) can carry it without the plugin API
/// depending on OpenTelemetry).
pub trait TraceCarrierExt: Sized {
    /// The context's span (and baggage) as strings; `None` when it holds no valid span.
    fn from_context(cx: &Context) -> Option<Self>;
    /// The trace context of an exported span, to continue its trace elsewhere; `None` when the
    /// span is disabled (export off, or filtered out).
    fn of_span(span: &tracing::Span) -> Option<Self>;
    /// The stored context as a remote parent; `None` when the strings no longer parse.
    fn to_context(&self) -> Option<Context>;
}

impl TraceCarrierExt for TraceCarrier {
    fn from_context(cx: &Context) -> Option<Self> {
        let mut out = CarrierInjector::default();
        PROPAGATOR.inject_context(cx, &mut out);
        let non_empty = |v: Option<String>| v.filter(|v| !v.is_empty());
        Some(TraceCarrier {
            traceparent: non_empty(out.traceparent)?,
            tracestate: non_empty(out.tracestate),
            baggage: non_empty(out.baggage),
        })
    }

    fn of_span(span: &tracing::Span) -> Option<Self> {
        if span.is_disabled() {
            return None;
        }
        Self::from_context(&span.context())
    }

    fn to_context(&self) -> Option<Context> {
        valid(extract(&Carried(self)))
    }
}

/// A stored carrier read by the propagators.
struct Carried<'a>(&'a TraceCarrier);

impl Extractor for Carried<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(&self.0.traceparent),
            TRACESTATE => self.0.tracestate.as_deref(),
            BAGGAGE => self.0.baggage.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE, BAGGAGE]
    }
}

#[derive(Default)]
struct CarrierInjector {
    traceparent: Option<String>,
    tracestate: Option<String>,
    baggage: Option<String>,
}

impl Injector for CarrierInjector {
    fn set(&mut self, key: &str, value: String) {
        match key {
            TRACEPARENT => self.traceparent = Some(value),
            TRACESTATE => self.tracestate = Some(value),
            BAGGAGE => self.baggage = Some(value),
            _ => {}
        }
    }
}

/// `params._meta` as a propagation carrier: only string values count, keys exactly as SEP-414
/// writes them (lowercase, unprefixed).
struct MetaExtractor<'a>(&'a Map<String, Value>);

impl Extractor for MetaExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// `params._meta` as a carrier with its three trace keys found in one pass over it: a
/// server span reads all three, and three `BTreeMap` lookups cost about three times the key
/// comparisons of one pass over the few keys a `_meta` holds (issue 32). Any other key is
/// looked up as [`MetaExtractor`] does.
struct MetaFields<'a> {
    meta: &'a Map<String, Value>,
    traceparent: Option<&'a str>,
    tracestate: Option<&'a str>,
    baggage: Option<&'a str>,
}

impl<'a> MetaFields<'a> {
    fn new(meta: &'a Map<String, Value>) -> Self {
        let mut fields = MetaFields {
            meta,
            traceparent: None,
            tracestate: None,
            baggage: None,
        };
        for (key, value) in meta {
            let slot = match key.as_str() {
                TRACEPARENT => &mut fields.traceparent,
                TRACESTATE => &mut fields.tracestate,
                BAGGAGE => &mut fields.baggage,
                _ => continue,
            };
            *slot = value.as_str();
        }
        fields
    }
}

impl Extractor for MetaFields<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.traceparent,
            TRACESTATE => self.tracestate,
            BAGGAGE => self.baggage,
            other => self.meta.get(other).and_then(Value::as_str),
        }
    }

    fn keys(&self) -> Vec<&str> {
        self.meta.keys().map(String::as_str).collect()
    }
}

/// A context only if it holds a valid (remote) span.
fn valid(cx: Context) -> Option<Context> {
    cx.span().span_context().is_valid().then_some(cx)
}

/// The caller's context from a request's `params._meta`; `None` without a valid
/// `traceparent` there.
pub fn context_from_meta(meta: &Map<String, Value>) -> Option<Context> {
    valid(extract(&MetaExtractor(meta)))
}

/// The caller's context from HTTP headers (`traceparent`, `tracestate`, `baggage`).
pub fn context_from_headers(headers: &http::HeaderMap) -> Option<Context> {
    valid(extract(&opentelemetry_http::HeaderExtractor(headers)))
}

/// Where a server span's trace comes from: its parent, and the transport's context to link
/// when it differs from the parent.
#[derive(Debug, Default)]
pub struct RemoteParent {
    pub parent: Option<Context>,
    pub link: Option<SpanContext>,
}

impl RemoteParent {
    /// `_meta`'s context is the parent; the headers' is the parent when `_meta` has none, and
    /// a link when both are present and name different spans.
    pub fn of_request(
        meta: Option<&Map<String, Value>>,
        headers: Option<&http::HeaderMap>,
    ) -> Self {
        let (parent, link) = parent_and_link(
            meta.and_then(context_from_meta),
            headers.and_then(context_from_headers),
            |a, b| a.span().span_context() == b.span().span_context(),
        );
        RemoteParent {
            parent,
            link: link.map(|cx| cx.span().span_context().clone()),
        }
    }

    /// Makes `span` a child of the parent (and links the transport context). Call it before
    /// the span is first entered: a started span's parent cannot change. Returns whether a
    /// parent was set.
    pub fn adopt(self, span: &tracing::Span) -> bool {
        if let Some(link) = self.link {
            span.add_link(link);
        }
        match self.parent {
            Some(parent) => span.set_parent(parent).is_ok(),
            None => false,
        }
    }
}

/// What a server span needs of its caller: the same parent and link as
/// [`RemoteParent::of_request`] chooses, as span contexts. A whole `Context` is built only when
/// the parent's carrier holds baggage (to pass on to a task); otherwise nothing is allocated
/// unless there is a `tracestate` to keep, and headers are looked up by prepared names.
#[derive(Debug, Default)]
pub struct Caller {
    pub parent: Option<SpanContext>,
    /// The parent's whole context (its baggage with it), when the caller sent baggage.
    pub baggage: Option<Context>,
    pub link: Option<SpanContext>,
}

impl Caller {
    pub fn of_request(
        meta: Option<&Map<String, Value>>,
        headers: Option<&http::HeaderMap>,
    ) -> Self {
        let (parent, link) = parent_and_link(
            meta.and_then(|meta| side(&MetaFields::new(meta))),
            headers.and_then(|headers| side(&PreparedHeaders(headers))),
            |(a, _), (b, _)| a == b,
        );
        let (parent, baggage) = parent.unzip();
        Caller {
            parent,
            baggage: baggage.flatten(),
            link: link.map(|(transport, _)| transport),
        }
    }
}

/// The choice both [`RemoteParent::of_request`] and [`Caller::of_request`] make, given what
/// `_meta` and the headers hold: `_meta`'s context is the parent; the headers' is the parent
/// when `_meta` has none, and the link when both are present and not the `same` span.
fn parent_and_link<T>(
    from_meta: Option<T>,
    from_headers: Option<T>,
    same: impl FnOnce(&T, &T) -> bool,
) -> (Option<T>, Option<T>) {
    match (from_meta, from_headers) {
        (Some(parent), Some(transport)) => {
            let link = (!same(&parent, &transport)).then_some(transport);
            (Some(parent), link)
        }
        (Some(parent), None) | (None, Some(parent)) => (Some(parent), None),
        (None, None) => (None, None),
    }
}

/// One carrier's valid span context, with its whole context when it holds baggage; what
/// `valid(extract(carrier))` gives, without the `Context` when there is no baggage.
fn side(extractor: &dyn Extractor) -> Option<(SpanContext, Option<Context>)> {
    let traceparent = extractor.get(TRACEPARENT)?;
    if extractor.get(BAGGAGE).is_some() {
        let cx = valid(extract(extractor))?;
        let span = cx.span().span_context().clone();
        return Some((span, Some(cx)));
    }
    let span = match canonical_traceparent(traceparent, extractor.get(TRACESTATE)) {
        Some(span) => span,
        None => TRACE_CONTEXT
            .extract_with_context(&Context::new(), extractor)
            .span()
            .span_context()
            .clone(),
    };
    span.is_valid().then_some((span, None))
}

static TRACEPARENT_HEADER: http::HeaderName = http::HeaderName::from_static(TRACEPARENT);
static TRACESTATE_HEADER: http::HeaderName = http::HeaderName::from_static(TRACESTATE);
static BAGGAGE_HEADER: http::HeaderName = http::HeaderName::from_static(BAGGAGE);

/// HTTP headers as a propagation carrier, the three names prepared (a `&str` key is parsed
/// and validated on every lookup).
struct PreparedHeaders<'a>(&'a http::HeaderMap);

impl Extractor for PreparedHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = match key {
            TRACEPARENT => self.0.get(&TRACEPARENT_HEADER),
            TRACESTATE => self.0.get(&TRACESTATE_HEADER),
            BAGGAGE => self.0.get(&BAGGAGE_HEADER),
            other => self.0.get(other),
        };
        value.and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Parents `span` on the caller's context from `_meta` or the headers ([`RemoteParent`]).
/// Nothing is parsed when the span is disabled. Returns whether a parent was set.
pub fn set_remote_parent(
    span: &tracing::Span,
    meta: Option<&Map<String, Value>>,
    headers: Option<&http::HeaderMap>,
) -> bool {
    if span.is_disabled() {
        return false;
    }
    RemoteParent::of_request(meta, headers).adopt(span)
}

/// Continues a stored trace: `span` becomes a child of the carrier's span. Call it before the
/// span is first entered. Returns whether a parent was set (not when the span is disabled or
/// the carrier no longer parses).
pub fn continue_trace(span: &tracing::Span, carrier: &TraceCarrier) -> bool {
    if span.is_disabled() {
        return false;
    }
    match carrier.to_context() {
        Some(parent) => span.set_parent(parent).is_ok(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::baggage::BaggageExt;
    use serde_json::json;

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn meta(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn meta_context_is_read_with_state_and_baggage() {
        let m = meta(json!({
            "traceparent": PARENT,
            "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
            "baggage": "userId=alice,isProduction=false",
            "io.modelcontextprotocol/related-task": {"taskId": "x"},
        }));
        let cx = context_from_meta(&m).expect("valid");
        let sc = cx.span().span_context().clone();
        assert!(sc.is_remote());
        assert!(sc.is_sampled());
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert_eq!(sc.trace_state().get("congo"), Some("t61rcWkgMzE"));
        assert_eq!(
            cx.baggage().get("userId").map(|v| v.as_str().to_owned()),
            Some("alice".to_owned())
        );
    }

    #[test]
    fn the_fast_read_gives_what_the_propagators_give() {
        let parents = [
            PARENT,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736+00f067aa0ba902b7-01",
            "00-abc-def-01",
            "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01",
            // The bytes beside the digits' ranges.
            "00-4bf92f3577b34da6a3ce929d0e0e473/-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473:-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473`-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0G",
            "00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b-01",
        ];
        for traceparent in parents {
            for extra in [
                json!({}),
                json!({"tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}),
                json!({"tracestate": "not a valid state"}),
                json!({"baggage": "userId=alice"}),
            ] {
                let mut m = meta(extra);
                m.insert("traceparent".into(), traceparent.into());
                let fast = extract(&MetaExtractor(&m));
                let slow = PROPAGATOR.extract_with_context(&Context::new(), &MetaExtractor(&m));
                assert_eq!(
                    fast.span().span_context(),
                    slow.span().span_context(),
                    "{m:?}"
                );
                assert_eq!(
                    fast.baggage().get("userId"),
                    slow.baggage().get("userId"),
                    "{m:?}"
                );
            }
        }
    }

    #[test]
    fn invalid_or_absent_traceparents_yield_no_context() {
        let cases = [
            json!({}),
            json!({"traceparent": 7}),
            json!({"traceparent": ""}),
            json!({"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}),
            json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}),
            json!({"traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}),
            json!({"traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
            json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"}),
            json!({"Traceparent": PARENT}),
            json!({"traceparent": "x".repeat(100_000)}),
        ];
        for case in cases {
            assert!(context_from_meta(&meta(case.clone())).is_none(), "{case}");
        }
    }

    /// The server span's read of its caller (`_meta` in one pass, no `Context` without
    /// baggage) chooses the parent, link and baggage that `RemoteParent::of_request` (the
    /// propagators' read) chooses, for every mix of `_meta` and headers.
    #[test]
    fn the_callers_read_agrees_with_the_remote_parents() {
        let other = "00-11111111111111111111111111111111-2222222222222222-01";
        let metas = [
            None,
            Some(json!({})),
            Some(json!({"traceparent": PARENT})),
            Some(json!({"traceparent": other})),
            Some(json!({"traceparent": PARENT, "tracestate": "rojo=00f067aa0ba902b7"})),
            Some(json!({"traceparent": PARENT, "baggage": "userId=alice"})),
            Some(json!({"traceparent": PARENT.to_uppercase()})),
            Some(json!({"traceparent": 7, "tracestate": "rojo=1"})),
            Some(json!({"traceparent": "garbage", "baggage": "userId=bob"})),
            Some(json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "a": 1, "zzz": [], "traceparent": PARENT, "tracestatex": "no",
            })),
        ];
        let header_sets: [&[(&str, &str)]; 5] = [
            &[],
            &[("traceparent", PARENT)],
            &[("traceparent", other)],
            &[("traceparent", other), ("baggage", "userId=carol")],
            &[("traceparent", "nonsense")],
        ];
        for m in &metas {
            let m = m.clone().map(meta);
            for set in header_sets {
                let mut headers = http::HeaderMap::new();
                for (name, value) in set {
                    headers.insert(*name, value.parse().unwrap());
                }
                let expected = RemoteParent::of_request(m.as_ref(), Some(&headers));
                let caller = Caller::of_request(m.as_ref(), Some(&headers));
                let case = format!("{m:?} {set:?}");
                assert_eq!(
                    caller.parent,
                    expected
                        .parent
                        .as_ref()
                        .map(|cx| cx.span().span_context().clone()),
                    "{case}"
                );
                assert_eq!(caller.link, expected.link, "{case}");
                let baggage = |cx: Option<&Context>| {
                    cx.and_then(|cx| cx.baggage().get("userId").map(|v| v.to_string()))
                };
                assert_eq!(
                    baggage(caller.baggage.as_ref()),
                    baggage(expected.parent.as_ref()),
                    "{case}"
                );
            }
        }
    }

    #[test]
    fn headers_parent_only_without_meta_and_are_linked_when_different() {
        let mut headers = http::HeaderMap::new();
        let other = "00-11111111111111111111111111111111-2222222222222222-01";
        headers.insert("traceparent", other.parse().unwrap());

        let only_headers = RemoteParent::of_request(None, Some(&headers));
        let parent = only_headers.parent.expect("headers parent");
        assert_eq!(
            parent.span().span_context().span_id().to_string(),
            "2222222222222222"
        );
        assert!(only_headers.link.is_none());

        let m = meta(json!({"traceparent": PARENT}));
        let both = RemoteParent::of_request(Some(&m), Some(&headers));
        let parent = both.parent.expect("meta parent");
        assert_eq!(
            parent.span().span_context().span_id().to_string(),
            "00f067aa0ba902b7"
        );
        let link = both.link.expect("the transport context is linked");
        assert_eq!(link.span_id().to_string(), "2222222222222222");

        let mut same = http::HeaderMap::new();
        same.insert("traceparent", PARENT.parse().unwrap());
        assert!(
            RemoteParent::of_request(Some(&m), Some(&same))
                .link
                .is_none()
        );
        assert!(RemoteParent::of_request(None, None).parent.is_none());
    }

    #[test]
    fn a_carrier_round_trips_through_json() {
        let m = meta(json!({"traceparent": PARENT, "baggage": "k=v%20w"}));
        let cx = context_from_meta(&m).unwrap();
        let carrier = TraceCarrier::from_context(&cx).unwrap();
        assert_eq!(carrier.traceparent, PARENT);
        assert_eq!(carrier.tracestate, None, "an empty tracestate is not kept");
        assert_eq!(carrier.baggage.as_deref(), Some("k=v%20w"));
        let text = serde_json::to_string(&carrier).unwrap();
        assert_eq!(
            text,
            format!(r#"{{"traceparent":"{PARENT}","baggage":"k=v%20w"}}"#)
        );
        let back: TraceCarrier = serde_json::from_str(&text).unwrap();
        assert_eq!(back, carrier);
        let again = back.to_context().unwrap();
        assert_eq!(again.span().span_context(), cx.span().span_context());
        assert_eq!(
            again.baggage().get("k").map(|v| v.as_str().to_owned()),
            Some("v w".to_owned())
        );
    }

    #[test]
    fn nothing_to_carry_without_a_span() {
        assert!(TraceCarrier::from_context(&Context::new()).is_none());
        let corrupted = TraceCarrier {
            traceparent: "garbage".into(),
            tracestate: None,
            baggage: None,
        };
        assert!(corrupted.to_context().is_none());
        // A disabled span (export off): nothing is parsed or set.
        let span = tracing::Span::none();
        assert!(TraceCarrier::of_span(&span).is_none());
        let m = meta(json!({"traceparent": PARENT}));
        assert!(!set_remote_parent(&span, Some(&m), None));
        let carrier = TraceCarrier::from_context(&context_from_meta(&m).unwrap()).unwrap();
        assert!(!continue_trace(&span, &carrier));
    }
}
