//! `telemetry`: OpenTelemetry export (see [`crate::telemetry`]), its defaults, its checks, and
//! the standard `OTEL_*` variables that override the file.
//!
//! Off while no endpoint is set. `OTEL_*` variables override `agent.yaml` (and `AGENT_MCP_*`
//! override both, as for every key); an empty one counts as unset. A value the OpenTelemetry
//! specification would have an SDK ignore (an unreadable number, a malformed
//! `OTEL_RESOURCE_ATTRIBUTES`) is ignored with a warning; an endpoint that cannot be exported
//! to is an error, since export was asked for and could not work.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::serde_with::humantime_serde_compat;
use crate::telemetry::{TelemetrySettings, TraceSampler, parse_resource_attributes, semconv};

/// `telemetry` (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// false: no export even with an endpoint (`OTEL_SDK_DISABLED=true`).
    pub enabled: bool,
    /// The collector's OTLP/HTTP base URL, e.g. `http://127.0.0.1:4318`; spans go to
    /// `<endpoint>/v1/traces`, metrics to `<endpoint>/v1/metrics`
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`). Unset, with `traces_endpoint` unset too: export is off.
    pub endpoint: Option<String>,
    /// The full URL for spans, instead of `<endpoint>/v1/traces`
    /// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    pub traces_endpoint: Option<String>,
    /// The full URL for metrics, instead of `<endpoint>/v1/metrics`
    /// (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`).
    pub metrics_endpoint: Option<String>,
    /// Export `mcp.server.operation.duration` too (`OTEL_METRICS_EXPORTER=none` turns it off).
    pub metrics: bool,
    /// The resource's `service.name` (`OTEL_SERVICE_NAME`).
    pub service_name: String,
    /// More resource attributes, e.g. `deployment.environment: prod`
    /// (`OTEL_RESOURCE_ATTRIBUTES=k=v,k2=v2`, merged over these).
    pub resource_attributes: BTreeMap<String, String>,
    /// The most one export request may take, retries included (`OTEL_EXPORTER_OTLP_TIMEOUT`,
    /// in milliseconds).
    #[serde(with = "humantime_serde_compat")]
    pub export_timeout: Duration,
    /// Finished spans waiting for export at most; more are dropped and counted in
    /// `agent_mcp_otel_spans_dropped_total` (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub max_queue_size: usize,
    /// How often metrics are exported (`OTEL_METRIC_EXPORT_INTERVAL`, in milliseconds).
    #[serde(with = "humantime_serde_compat")]
    pub metrics_interval: Duration,
    /// Record prompts, tool arguments and tool output on spans. Off: spans carry names, ids,
    /// counts and timings only. On, the collector and everyone who can read it sees the
    /// requests' text and whatever the agent read or ran (secrets, personal data).
    pub capture_content: bool,
    /// Which traces are exported (`OTEL_TRACES_SAMPLER`): `parentbased_always_on` (the
    /// default: all, but a caller's unsampled trace stays unsampled), `always_on`,
    /// `always_off`, `traceidratio`, `parentbased_always_off`, `parentbased_traceidratio`.
    pub sampler: String,
    /// The share of traces the ratio samplers keep, 0 to 1; 1 when unset
    /// (`OTEL_TRACES_SAMPLER_ARG`).
    pub sampler_arg: Option<f64>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            endpoint: None,
            traces_endpoint: None,
            metrics_endpoint: None,
            metrics: true,
            service_name: semconv::DEFAULT_SERVICE_NAME.into(),
            resource_attributes: BTreeMap::new(),
            export_timeout: Duration::from_secs(10),
            max_queue_size: 2048,
            metrics_interval: Duration::from_secs(60),
            capture_content: false,
            sampler: DEFAULT_SAMPLER.into(),
            sampler_arg: None,
        }
    }
}

/// `telemetry.sampler` by default, as the specification says.
const DEFAULT_SAMPLER: &str = "parentbased_always_on";

/// The `OTEL_*` variables read, each with the key it sets.
pub const OTEL_VARIABLES: &[(&str, &str)] = &[
    ("OTEL_SDK_DISABLED", "telemetry.enabled"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "telemetry.endpoint"),
    (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "telemetry.traces_endpoint",
    ),
    (
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "telemetry.metrics_endpoint",
    ),
    ("OTEL_METRICS_EXPORTER", "telemetry.metrics"),
    ("OTEL_SERVICE_NAME", "telemetry.service_name"),
    ("OTEL_RESOURCE_ATTRIBUTES", "telemetry.resource_attributes"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "telemetry.export_timeout"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "telemetry.max_queue_size"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "telemetry.metrics_interval"),
    ("OTEL_TRACES_SAMPLER", "telemetry.sampler"),
    ("OTEL_TRACES_SAMPLER_ARG", "telemetry.sampler_arg"),
];

/// What [`TelemetryConfig::apply_otel_env`] changed.
#[derive(Debug, Default)]
pub(super) struct OtelOverrides {
    /// Dotted key → the variable that set it.
    pub applied: Vec<(String, String)>,
    /// Values ignored, and why.
    pub warnings: Vec<String>,
}

impl TelemetryConfig {
    /// Applies the `OTEL_*` variables in `vars` over this section.
    pub(super) fn apply_otel_env(
        &mut self,
        vars: &[(String, String)],
    ) -> Result<OtelOverrides, ConfigError> {
        let mut out = OtelOverrides::default();
        for (name, key) in OTEL_VARIABLES {
            let Some(value) = vars
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.trim())
                .filter(|v| !v.is_empty())
            else {
                continue;
            };
            let ignored = |why: &str| format!("{name}={value:?} is ignored: {why}");
            let millis = || value.parse::<u64>().ok().map(Duration::from_millis);
            let mut set = true;
            match *name {
                "OTEL_SDK_DISABLED" => match value.to_ascii_lowercase().as_str() {
                    "true" => self.enabled = false,
                    // Only `true` disables (the specification); `false` changes nothing.
                    "false" => set = false,
                    _ => {
                        out.warnings.push(ignored("write true or false"));
                        set = false;
                    }
                },
                "OTEL_EXPORTER_OTLP_ENDPOINT"
                | "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
                | "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" => {
                    check_endpoint(key, value).map_err(|e| ConfigError::Parse {
                        path: PathBuf::from(format!("environment variable {name}")),
                        message: e.to_string(),
                    })?;
                    let slot = match *name {
                        "OTEL_EXPORTER_OTLP_ENDPOINT" => &mut self.endpoint,
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => &mut self.traces_endpoint,
                        _ => &mut self.metrics_endpoint,
                    };
                    *slot = Some(value.to_owned());
                }
                "OTEL_METRICS_EXPORTER" => match value.to_ascii_lowercase().as_str() {
                    "none" => self.metrics = false,
                    "otlp" => self.metrics = true,
                    _ => {
                        out.warnings.push(ignored(
                            "agent-mcp exports metrics over otlp, or none (Prometheus text is \
                             at GET /metrics either way)",
                        ));
                        set = false;
                    }
                },
                "OTEL_SERVICE_NAME" => self.service_name = value.to_owned(),
                "OTEL_RESOURCE_ATTRIBUTES" => {
                    set = false;
                    match parse_resource_attributes(value) {
                        Ok(pairs) => {
                            for (k, v) in pairs {
                                out.applied.push((format!("{key}.{k}"), (*name).to_owned()));
                                self.resource_attributes.insert(k, v);
                            }
                        }
                        // The specification: discard the whole value, say so, go on.
                        Err(e) => out.warnings.push(format!("{name} is ignored: {e}")),
                    }
                }
                "OTEL_EXPORTER_OTLP_TIMEOUT" | "OTEL_METRIC_EXPORT_INTERVAL" => match millis() {
                    Some(d) if *name == "OTEL_EXPORTER_OTLP_TIMEOUT" => self.export_timeout = d,
                    Some(d) => self.metrics_interval = d,
                    None => {
                        out.warnings
                            .push(ignored("write a whole number of milliseconds"));
                        set = false;
                    }
                },
                "OTEL_BSP_MAX_QUEUE_SIZE" => match value.parse::<usize>() {
                    Ok(n) => self.max_queue_size = n,
                    Err(_) => {
                        out.warnings.push(ignored("write a whole number of spans"));
                        set = false;
                    }
                },
                "OTEL_TRACES_SAMPLER" => match TraceSampler::parse(value, Some(1.0)) {
                    Ok(_) => self.sampler = value.to_owned(),
                    Err(why) => {
                        out.warnings.push(ignored(&why));
                        set = false;
                    }
                },
                "OTEL_TRACES_SAMPLER_ARG" => match value.parse::<f64>() {
                    Ok(ratio) if (0.0..=1.0).contains(&ratio) => self.sampler_arg = Some(ratio),
                    _ => {
                        out.warnings
                            .push(ignored("write a number between 0 and 1, e.g. 0.25"));
                        set = false;
                    }
                },
                _ => set = false,
            }
            if set {
                out.applied.push(((*key).to_owned(), (*name).to_owned()));
            }
        }
        Ok(out)
    }

    /// Checks the section; every error names its key and says what to write.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        for (key, url) in [
            ("telemetry.endpoint", &self.endpoint),
            ("telemetry.traces_endpoint", &self.traces_endpoint),
            ("telemetry.metrics_endpoint", &self.metrics_endpoint),
        ] {
            if let Some(url) = url {
                check_endpoint(key, url)?;
            }
        }
        if self.service_name.trim().is_empty() {
            return invalid(
                "telemetry.service_name",
                format!(
                    "must not be empty; the default is {}",
                    semconv::DEFAULT_SERVICE_NAME
                ),
            );
        }
        if let Some(key) = self
            .resource_attributes
            .keys()
            .find(|k| k.trim().is_empty())
        {
            return invalid(
                "telemetry.resource_attributes",
                format!(
                    "{key:?} is not an attribute name; use dotted names, e.g. deployment.environment"
                ),
            );
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&self.export_timeout) {
            return invalid(
                "telemetry.export_timeout",
                format!(
                    "must be between 100ms and 60s (got {})",
                    humantime::format_duration(self.export_timeout)
                ),
            );
        }
        if !(1..=1_000_000).contains(&self.max_queue_size) {
            return invalid(
                "telemetry.max_queue_size",
                format!(
                    "must be between 1 and 1000000 spans (got {})",
                    self.max_queue_size
                ),
            );
        }
        if let Err(why) = TraceSampler::parse(&self.sampler, self.sampler_arg) {
            return invalid(
                if TraceSampler::parse(&self.sampler, None).is_ok() {
                    "telemetry.sampler_arg"
                } else {
                    "telemetry.sampler"
                },
                why,
            );
        }
        if self.metrics_interval < Duration::from_secs(1) {
            return invalid(
                "telemetry.metrics_interval",
                format!(
                    "must be at least 1s (got {})",
                    humantime::format_duration(self.metrics_interval)
                ),
            );
        }
        Ok(())
    }

    /// The URL spans go to: `traces_endpoint`, else `<endpoint>/v1/traces`; `None` when
    /// export is off.
    pub fn traces_url(&self) -> Option<String> {
        if !self.enabled {
            return None;
        }
        self.traces_endpoint.clone().or_else(|| {
            self.endpoint
                .as_deref()
                .map(|base| signal_url(base, "traces"))
        })
    }

    /// The URL metrics go to: `metrics_endpoint`, else `<endpoint>/v1/metrics`; `None` when
    /// export or metrics are off, or only `traces_endpoint` names a collector.
    pub fn metrics_url(&self) -> Option<String> {
        if !self.enabled || !self.metrics || self.traces_url().is_none() {
            return None;
        }
        self.metrics_endpoint.clone().or_else(|| {
            self.endpoint
                .as_deref()
                .map(|base| signal_url(base, "metrics"))
        })
    }

    /// What the exporter needs.
    pub(crate) fn settings(&self) -> TelemetrySettings {
        let mut settings = TelemetrySettings::new(self.service_name.clone())
            .with_resource_attributes(
                self.resource_attributes
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
            .with_export_timeout(self.export_timeout)
            .with_max_queue_size(self.max_queue_size)
            .with_metrics_interval(self.metrics_interval)
            .with_capture_content(self.capture_content)
            // `validate` has refused a sampler that does not parse.
            .with_sampler(TraceSampler::parse(&self.sampler, self.sampler_arg).unwrap_or_default());
        if let Some(url) = self.traces_url() {
            settings = settings.with_traces_endpoint(url);
        }
        if let Some(url) = self.metrics_url() {
            settings = settings.with_metrics_endpoint(url);
        }
        settings
    }

    /// What check-config says about the endpoints in force.
    pub(super) fn derived(&self) -> Vec<(&'static str, String)> {
        let mut notes = Vec::new();
        match self.traces_url() {
            None if !self.enabled => notes.push(("telemetry.enabled", "export is off".into())),
            None => notes.push((
                "telemetry.endpoint",
                "no endpoint: OpenTelemetry export is off".into(),
            )),
            Some(url) => {
                if self.traces_endpoint.is_none() {
                    notes.push(("telemetry.traces_endpoint", format!("from endpoint: {url}")));
                }
                if self.metrics_endpoint.is_none() {
                    let note = match self.metrics_url() {
                        Some(url) => format!("from endpoint: {url}"),
                        None => "metrics are not exported".into(),
                    };
                    notes.push(("telemetry.metrics_endpoint", note));
                }
            }
        }
        notes
    }
}

/// `<base>/v1/<signal>`, as the OTLP exporter specification builds signal URLs.
fn signal_url(base: &str, signal: &str) -> String {
    format!("{}/v1/{signal}", base.trim_end_matches('/'))
}

/// An http(s) URL with a host, without credentials (they would be printed and logged with the
/// endpoint: headers are the place for them).
fn check_endpoint(key: &'static str, url: &str) -> Result<(), ConfigError> {
    let invalid = |message: String| Err(ConfigError::Invalid { key, message });
    let parsed = match url::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => {
            return invalid(format!(
                "{url:?} is not a URL ({e}); write e.g. http://127.0.0.1:4318"
            ));
        }
    };
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return invalid(format!(
            "{url:?} is not an http:// or https:// URL with a host (OTLP over gRPC is not \
             supported; the collector's OTLP/HTTP port is usually 4318)"
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return invalid(
            "carries credentials, which would be printed and logged with the URL; send them \
             as a header instead: OTEL_EXPORTER_OTLP_HEADERS=authorization=Basic%20…"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::vars;

    /// The default section with the `OTEL_*` variables `pairs` applied, and what applying
    /// them reported.
    fn default_with_env(pairs: &[(&str, &str)]) -> (TelemetryConfig, OtelOverrides) {
        let mut c = TelemetryConfig::default();
        let out = c.apply_otel_env(&vars(pairs)).unwrap();
        (c, out)
    }

    #[test]
    fn off_by_default_and_urls_follow_the_spec() {
        let c = TelemetryConfig::default();
        assert!(!c.settings().is_enabled());
        assert_eq!(c.settings().metrics_endpoint, None);

        let c = TelemetryConfig {
            endpoint: Some("http://collector:4318/".into()),
            ..TelemetryConfig::default()
        };
        let s = c.settings();
        assert_eq!(
            s.traces_endpoint.as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(
            s.metrics_endpoint.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );

        let c = TelemetryConfig {
            endpoint: Some("https://otlp.example/base".into()),
            traces_endpoint: Some("https://traces.example/in".into()),
            metrics: false,
            ..TelemetryConfig::default()
        };
        let s = c.settings();
        assert_eq!(
            s.traces_endpoint.as_deref(),
            Some("https://traces.example/in")
        );
        assert_eq!(s.metrics_endpoint, None);

        let c = TelemetryConfig {
            traces_endpoint: Some("http://127.0.0.1:4318/v1/traces".into()),
            ..TelemetryConfig::default()
        };
        assert!(c.settings().is_enabled());
        assert_eq!(
            c.settings().metrics_endpoint,
            None,
            "no base: no metrics URL"
        );

        let c = TelemetryConfig {
            enabled: false,
            endpoint: Some("http://collector:4318".into()),
            ..TelemetryConfig::default()
        };
        assert!(!c.settings().is_enabled());
    }

    #[test]
    fn otel_variables_override_and_bad_ones_are_ignored_with_a_warning() {
        let mut c = TelemetryConfig {
            service_name: "from-file".into(),
            resource_attributes: BTreeMap::from([
                ("team".to_owned(), "core".to_owned()),
                ("deployment.environment".to_owned(), "staging".to_owned()),
            ]),
            ..TelemetryConfig::default()
        };
        let out = c
            .apply_otel_env(&vars(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_SERVICE_NAME", "from-env"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "deployment.environment=prod,region=eu%2Dwest",
                ),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
                ("OTEL_BSP_MAX_QUEUE_SIZE", "lots"),
                ("OTEL_METRICS_EXPORTER", "prometheus"),
                ("OTEL_METRIC_EXPORT_INTERVAL", ""),
                ("OTEL_SDK_DISABLED", "false"),
            ]))
            .unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(c.service_name, "from-env");
        assert_eq!(c.resource_attributes["deployment.environment"], "prod");
        assert_eq!(c.resource_attributes["region"], "eu-west");
        assert_eq!(c.resource_attributes["team"], "core", "file entries stay");
        assert_eq!(c.export_timeout, Duration::from_millis(2500));
        assert_eq!(c.max_queue_size, 2048);
        assert!(c.metrics && c.enabled);
        let applied: Vec<&str> = out.applied.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            applied,
            [
                "telemetry.endpoint",
                "telemetry.service_name",
                "telemetry.resource_attributes.deployment.environment",
                "telemetry.resource_attributes.region",
                "telemetry.export_timeout",
            ]
        );
        assert_eq!(out.warnings.len(), 2, "{:?}", out.warnings);
        assert!(out.warnings[0].starts_with("OTEL_METRICS_EXPORTER=\"prometheus\" is ignored"));
        assert!(out.warnings[1].starts_with("OTEL_BSP_MAX_QUEUE_SIZE=\"lots\" is ignored"));

        let (c, out) = default_with_env(&[("OTEL_RESOURCE_ATTRIBUTES", "ok=1,broken")]);
        assert!(
            c.resource_attributes.is_empty(),
            "the whole value is discarded"
        );
        assert_eq!(
            out.warnings,
            [
                "OTEL_RESOURCE_ATTRIBUTES is ignored: entry 2 (\"broken\") has no '='; write \
              key=value pairs separated by commas"
            ]
        );

        let (c, _) = default_with_env(&[
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ]);
        assert!(!c.enabled && !c.metrics);
    }

    #[test]
    fn the_sampler_is_parent_based_by_default_and_read_from_the_standard_variables() {
        let default = TelemetryConfig::default();
        assert_eq!(default.settings().sampler, TraceSampler::default());
        assert!(default.settings().sampler.parent_based);

        let (c, out) = default_with_env(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
        ]);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        c.validate().unwrap();
        assert_eq!(
            c.settings().sampler,
            TraceSampler {
                parent_based: false,
                root: crate::telemetry::RootSampler::TraceIdRatio(0.0)
            }
        );

        // Unreadable values are ignored with a warning that says what to write.
        let (c, out) = default_with_env(&[
            ("OTEL_TRACES_SAMPLER", "sometimes"),
            ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
        ]);
        assert_eq!(c.sampler, "parentbased_always_on");
        assert_eq!(c.sampler_arg, None);
        assert_eq!(out.warnings.len(), 2, "{:?}", out.warnings);
        assert!(
            out.warnings[0].starts_with("OTEL_TRACES_SAMPLER=\"sometimes\" is ignored")
                && out.warnings[0].contains("parentbased_traceidratio"),
            "{}",
            out.warnings[0]
        );
        assert!(
            out.warnings[1].contains("between 0 and 1"),
            "{}",
            out.warnings[1]
        );

        // In agent.yaml they are errors naming the key.
        let bad_name = TelemetryConfig {
            sampler: "never".into(),
            ..TelemetryConfig::default()
        };
        let err = bad_name.validate().unwrap_err().to_string();
        assert!(
            err.contains("telemetry.sampler") && err.contains("always_off"),
            "{err}"
        );
        let bad_ratio = TelemetryConfig {
            sampler: "parentbased_traceidratio".into(),
            sampler_arg: Some(-1.0),
            ..TelemetryConfig::default()
        };
        let err = bad_ratio.validate().unwrap_err().to_string();
        assert!(
            err.contains("telemetry.sampler_arg") && err.contains("between 0 and 1"),
            "{err}"
        );
    }

    #[test]
    fn unusable_endpoints_are_errors_naming_their_source() {
        let mut c = TelemetryConfig::default();
        let e = c
            .apply_otel_env(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("environment variable OTEL_EXPORTER_OTLP_ENDPOINT: telemetry.endpoint:"),
            "{e}"
        );
        let cases = [
            ("grpc://collector:4317", "is not an http:// or https:// URL"),
            ("not a url", "is not a URL"),
            ("https://user:secret@otlp.example", "carries credentials"),
        ];
        for (url, want) in cases {
            let c = TelemetryConfig {
                endpoint: Some(url.into()),
                ..TelemetryConfig::default()
            };
            let e = c.validate().unwrap_err().to_string();
            assert!(e.starts_with("telemetry.endpoint: "), "{e}");
            assert!(e.contains(want), "{url}: {e}");
            assert!(!e.contains("secret"), "credentials are never repeated: {e}");
        }
        let c = TelemetryConfig {
            export_timeout: Duration::from_secs(600),
            ..TelemetryConfig::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .starts_with("telemetry.export_timeout: must be between 100ms and 60s")
        );
    }
}
