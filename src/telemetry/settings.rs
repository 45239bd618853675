//! [`TelemetrySettings`]: what export needs, resolved from `agent.yaml`'s `telemetry` section
//! and the standard `OTEL_*` variables by the configuration, and
//! [`parse_resource_attributes`], the `OTEL_RESOURCE_ATTRIBUTES` reader.
//!
//! ```
//! use std::time::Duration;
//! use agent_mcp::telemetry::{TelemetrySettings, parse_resource_attributes};
//!
//! let settings = TelemetrySettings::new("agent-mcp")
//!     .with_traces_endpoint("http://127.0.0.1:4318/v1/traces")
//!     .with_resource_attributes(parse_resource_attributes("deployment.environment=ci").unwrap())
//!     .with_max_queue_size(512)
//!     .with_export_timeout(Duration::from_secs(2));
//! assert!(settings.is_enabled());
//! assert!(!TelemetrySettings::new("agent-mcp").is_enabled());
//!
//! let err = parse_resource_attributes("team=core,oops").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "entry 2 (\"oops\") has no '='; write key=value pairs separated by commas"
//! );
//! ```

use std::time::Duration;

/// Export settings. Off (nothing built, nothing started) unless a traces endpoint is set.
#[derive(Clone, Debug, PartialEq)]
pub struct TelemetrySettings {
    /// The full OTLP/HTTP URL spans are posted to (`…/v1/traces`). `None`: export is off.
    pub traces_endpoint: Option<String>,
    /// The full URL metrics are posted to (`…/v1/metrics`). `None`: no metrics.
    pub metrics_endpoint: Option<String>,
    /// The resource's `service.name`.
    pub service_name: String,
    /// More resource attributes (`service.name` among them is overridden by `service_name`).
    pub resource_attributes: Vec<(String, String)>,
    /// Most finished spans waiting for export; more are dropped, and counted.
    pub max_queue_size: usize,
    /// The most one export request (and its retries) may take.
    pub export_timeout: Duration,
    /// How often the metrics are exported.
    pub metrics_interval: Duration,
    /// Whether prompts, tool arguments and outputs may be recorded on spans.
    pub capture_content: bool,
    /// Which traces are recorded and exported.
    pub sampler: TraceSampler,
}

/// The trace sampler of the OpenTelemetry specification's `OTEL_TRACES_SAMPLER` (and
/// `OTEL_TRACES_SAMPLER_ARG` for a ratio). The default, `parentbased_always_on`, records every
/// trace that has no caller's context, and follows the caller's sampled flag when there is one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceSampler {
    /// A span with a parent (the caller's, or the request's a task continues) takes its
    /// parent's decision; only a root uses [`Self::root`].
    pub parent_based: bool,
    pub root: RootSampler,
}

/// How a [`TraceSampler`] decides for a trace's root span.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RootSampler {
    AlwaysOn,
    AlwaysOff,
    /// This share of the trace ids, 0 to 1 (`traceidratio`).
    TraceIdRatio(f64),
}

impl Default for TraceSampler {
    fn default() -> Self {
        Self {
            parent_based: true,
            root: RootSampler::AlwaysOn,
        }
    }
}

impl TraceSampler {
    /// The names `OTEL_TRACES_SAMPLER` takes here.
    pub const NAMES: &[&str] = &[
        "always_on",
        "always_off",
        "traceidratio",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    ];

    /// The sampler `name` (one of [`Self::NAMES`]) with `ratio` for the ratio samplers (1 when
    /// not given, as the specification says). The error says what to write.
    pub fn parse(name: &str, ratio: Option<f64>) -> Result<Self, String> {
        let (parent_based, root) = match name.strip_prefix("parentbased_") {
            Some(root) => (true, root),
            None => (false, name),
        };
        let root = match root {
            "always_on" => RootSampler::AlwaysOn,
            "always_off" => RootSampler::AlwaysOff,
            "traceidratio" => {
                let ratio = ratio.unwrap_or(1.0);
                if !(0.0..=1.0).contains(&ratio) {
                    return Err(format!(
                        "the ratio must be between 0 and 1 (got {ratio}); 0.25 keeps a quarter \
                         of the traces"
                    ));
                }
                RootSampler::TraceIdRatio(ratio)
            }
            _ => {
                return Err(format!(
                    "{name:?} is not a sampler agent-mcp knows; write one of {}",
                    Self::NAMES.join(", ")
                ));
            }
        };
        Ok(Self { parent_based, root })
    }

    /// The decision [`Self::to_sdk`]'s sampler makes for a span of `trace_id` whose parent
    /// (valid, when given) is `parent`: what the server span, which is not built by the SDK,
    /// uses.
    pub(super) fn samples(
        &self,
        parent: Option<&opentelemetry::trace::SpanContext>,
        trace_id: opentelemetry::trace::TraceId,
    ) -> bool {
        if self.parent_based
            && let Some(parent) = parent
        {
            return parent.is_sampled();
        }
        match self.root {
            RootSampler::AlwaysOn => true,
            RootSampler::AlwaysOff => false,
            // The SDK's `TraceIdRatioBased`: the trace id's low 63 bits against the ratio.
            RootSampler::TraceIdRatio(ratio) => {
                if ratio >= 1.0 {
                    return true;
                }
                let bound = (ratio.max(0.0) * (1u64 << 63) as f64) as u64;
                let low = u128::from_be_bytes(trace_id.to_bytes()) as u64;
                (low >> 1) < bound
            }
        }
    }

    /// The SDK's sampler.
    pub(super) fn to_sdk(self) -> opentelemetry_sdk::trace::Sampler {
        use opentelemetry_sdk::trace::Sampler;
        let root = match self.root {
            RootSampler::AlwaysOn => Sampler::AlwaysOn,
            RootSampler::AlwaysOff => Sampler::AlwaysOff,
            RootSampler::TraceIdRatio(ratio) => Sampler::TraceIdRatioBased(ratio),
        };
        if self.parent_based {
            Sampler::ParentBased(Box::new(root))
        } else {
            root
        }
    }
}

/// Spans a batch holds at most (the SDK's default), and the wait before a partial batch is
/// sent: fixed here, so the `OTEL_BSP_*` variables the SDK would otherwise read cannot change
/// the queue behind the configuration's back.
pub(crate) const MAX_EXPORT_BATCH: usize = 512;
pub(crate) const SCHEDULED_DELAY: Duration = Duration::from_secs(5);

impl TelemetrySettings {
    /// Off until an endpoint is set; the other values at their defaults.
    pub fn new(service_name: impl Into<String>) -> Self {
        Self {
            traces_endpoint: None,
            metrics_endpoint: None,
            service_name: service_name.into(),
            resource_attributes: Vec::new(),
            max_queue_size: 2048,
            export_timeout: Duration::from_secs(10),
            metrics_interval: Duration::from_secs(60),
            capture_content: false,
            sampler: TraceSampler::default(),
        }
    }

    pub fn with_traces_endpoint(mut self, url: impl Into<String>) -> Self {
        self.traces_endpoint = Some(url.into());
        self
    }

    pub fn with_metrics_endpoint(mut self, url: impl Into<String>) -> Self {
        self.metrics_endpoint = Some(url.into());
        self
    }

    pub fn with_resource_attributes(mut self, attributes: Vec<(String, String)>) -> Self {
        self.resource_attributes = attributes;
        self
    }

    pub fn with_max_queue_size(mut self, spans: usize) -> Self {
        self.max_queue_size = spans;
        self
    }

    pub fn with_export_timeout(mut self, timeout: Duration) -> Self {
        self.export_timeout = timeout;
        self
    }

    pub fn with_metrics_interval(mut self, interval: Duration) -> Self {
        self.metrics_interval = interval;
        self
    }

    pub fn with_capture_content(mut self, capture: bool) -> Self {
        self.capture_content = capture;
        self
    }

    pub fn with_sampler(mut self, sampler: TraceSampler) -> Self {
        self.sampler = sampler;
        self
    }

    /// Whether anything is exported.
    pub fn is_enabled(&self) -> bool {
        self.traces_endpoint.is_some()
    }
}

/// Why an `OTEL_RESOURCE_ATTRIBUTES` value cannot be read. The OpenTelemetry specification
/// asks for the whole value to be discarded then, so the caller warns and goes on without it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourceAttributesError {
    #[error("entry {index} ({entry:?}) has no '='; write key=value pairs separated by commas")]
    NoEquals { index: usize, entry: String },
    #[error("entry {index} has an empty key; write key=value pairs separated by commas")]
    EmptyKey { index: usize },
    #[error(
        "entry {index} ({key:?}) is not valid percent-encoded UTF-8; encode ',', '=' and \
         non-ASCII characters as %XX"
    )]
    Encoding { index: usize, key: String },
}

/// Reads `key1=value1,key2=value2` (W3C Baggage octets: keys and values percent-encoded,
/// blanks around them trimmed) into pairs, in order. An empty value yields no pairs.
pub fn parse_resource_attributes(
    value: &str,
) -> Result<Vec<(String, String)>, ResourceAttributesError> {
    let mut pairs = Vec::new();
    for (i, entry) in value.split(',').enumerate() {
        let index = i + 1;
        let entry = entry.trim();
        // A trailing comma, or nothing at all, is no entry.
        if entry.is_empty() {
            continue;
        }
        let Some((key, val)) = entry.split_once('=') else {
            return Err(ResourceAttributesError::NoEquals {
                index,
                entry: shown(entry),
            });
        };
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s.trim())
                .decode_utf8()
                .map(|c| c.into_owned())
        };
        let (Ok(key_text), Ok(val_text)) = (decode(key), decode(val)) else {
            return Err(ResourceAttributesError::Encoding {
                index,
                key: shown(key.trim()),
            });
        };
        if key_text.is_empty() {
            return Err(ResourceAttributesError::EmptyKey { index });
        }
        pairs.push((key_text, val_text));
    }
    Ok(pairs)
}

/// At most 64 characters of a value quoted in an error, so a long variable does not flood the
/// log line.
fn shown(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server span decides with [`TraceSampler::samples`], every other span with the SDK's
    /// sampler ([`TraceSampler::to_sdk`]): the two must never disagree, or a trace would lose
    /// its root or keep children of a dropped one.
    #[test]
    fn samples_decides_as_the_sdk_sampler_does() {
        use opentelemetry::trace::{
            SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState,
        };
        use opentelemetry_sdk::trace::{SamplingDecision, ShouldSample};
        // Trace ids spread over the whole range (the ratio sampler reads their low bits).
        let mut x: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
        let ids: Vec<TraceId> = (0..400)
            .map(|_| {
                x = x
                    .wrapping_mul(0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645)
                    .wrapping_add(1);
                TraceId::from_bytes(x.to_be_bytes())
            })
            .collect();
        for name in TraceSampler::NAMES {
            for ratio in [0.0, 0.25, 0.5, 0.999, 1.0] {
                let ours = TraceSampler::parse(name, Some(ratio)).unwrap();
                let sdk = ours.to_sdk();
                for &trace_id in &ids {
                    for parent_flags in
                        [None, Some(TraceFlags::SAMPLED), Some(TraceFlags::default())]
                    {
                        let parent = parent_flags.map(|flags| {
                            SpanContext::new(
                                trace_id,
                                SpanId::from_bytes([7; 8]),
                                flags,
                                true,
                                TraceState::default(),
                            )
                        });
                        let cx = parent
                            .clone()
                            .map(|p| opentelemetry::Context::new().with_remote_span_context(p));
                        let decision = sdk
                            .should_sample(cx.as_ref(), trace_id, "x", &SpanKind::Server, &[], &[])
                            .decision;
                        assert_eq!(
                            ours.samples(parent.as_ref(), trace_id),
                            decision == SamplingDecision::RecordAndSample,
                            "{name} ratio {ratio}, parent {parent_flags:?}, trace {trace_id}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn pairs_are_read_trimmed_and_decoded() {
        let pairs = parse_resource_attributes(
            " service.version = 1.2 ,deployment.environment=prod%2Ceu,team=%E3%83%81%E3%83%BC%E3%83%A0,",
        )
        .unwrap();
        assert_eq!(
            pairs,
            [
                ("service.version".to_owned(), "1.2".to_owned()),
                ("deployment.environment".to_owned(), "prod,eu".to_owned()),
                ("team".to_owned(), "チーム".to_owned()),
            ]
        );
        assert!(parse_resource_attributes("").unwrap().is_empty());
        assert_eq!(
            parse_resource_attributes("a=").unwrap(),
            [("a".to_owned(), String::new())]
        );
        // Only the first '=' splits: the value may hold more.
        assert_eq!(
            parse_resource_attributes("url=a=b").unwrap(),
            [("url".to_owned(), "a=b".to_owned())]
        );
    }

    #[test]
    fn malformed_values_are_errors_never_panics() {
        let cases = [
            ("k=v,novalue", "entry 2 (\"novalue\") has no '='"),
            ("=v", "entry 1 has an empty key"),
            (
                "k=%FF%FE",
                "entry 1 (\"k\") is not valid percent-encoded UTF-8",
            ),
        ];
        for (input, want) in cases {
            match parse_resource_attributes(input) {
                Ok(pairs) => panic!("{input:?} was read as {pairs:?}"),
                Err(e) => assert!(e.to_string().starts_with(want), "{input:?}: {e}"),
            }
        }
        // "%ZZ" is no escape, so it stays as text.
        assert_eq!(parse_resource_attributes("k%ZZ=v").unwrap()[0].0, "k%ZZ");
        let long = "x".repeat(500);
        let e = parse_resource_attributes(&long).unwrap_err().to_string();
        assert!(e.len() < 200, "the quoted entry is cut: {e}");
    }
}
