//! `agent.yaml`: types, defaults and validation.
//!
//! Every key has a default, so no file is needed to start. Unknown keys and bad values are
//! errors that name the key (`ollama.temperature: …`). `OLLAMA_HOST` (Ollama's own variable)
//! supplies `ollama.url` when the file does not set it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub ollama: OllamaConfig,
    pub agent: AgentConfig,
    pub http: HttpConfig,
    pub mcp: McpConfig,
    pub store: StoreConfig,
    pub auth: AuthConfig,
    pub rate_limit: RateLimitConfig,
    pub audit: AuditConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OllamaConfig {
    /// Base URL of the Ollama server. Default: `OLLAMA_HOST`, else http://127.0.0.1:11434.
    pub url: String,
    /// The model every task uses.
    pub model: String,
    /// Default temperature; `agent_run`'s `temperature` overrides it per task. Unset: the model's.
    pub temperature: Option<f64>,
    /// Context window sent as `options.num_ctx` on every call.
    pub num_ctx: u32,
    /// How long Ollama keeps the model loaded after a call (`"10m"`, `"-1"`); unset: Ollama's.
    pub keep_alive: Option<String>,
    /// Whole-call timeout of one Ollama request.
    #[serde(with = "humantime_serde_compat")]
    pub request_timeout: Duration,
    /// TCP connect timeout to Ollama.
    #[serde(with = "humantime_serde_compat")]
    pub connect_timeout: Duration,
    /// The largest reply accepted from one chat call.
    pub max_reply_bytes: ByteSize,
}

impl Default for OllamaConfig {
    fn default() -> Self {
        Self {
            url: default_ollama_url(),
            model: "qwen3:8b".into(),
            temperature: None,
            num_ctx: 65_536,
            keep_alive: None,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(5),
            max_reply_bytes: ByteSize::mib(8),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// The system prompt sent first in every chat.
    pub system_prompt: String,
    /// Ask the model for a plan first (one extra call, the `planning` state). Off: every task
    /// runs as one step `ollama chat`.
    pub planning: bool,
    /// Most steps a plan may have; a longer plan falls back to one step.
    pub max_steps: usize,
    /// Steps whose dependencies are done may run at once, up to this many.
    pub step_concurrency: usize,
    /// Most model calls in one step's tool loop; a step still calling tools then fails.
    pub max_iterations: usize,
    /// Sent as `think`; true needs a model with the `thinking` capability.
    pub think: bool,
    /// The folder the agent's tools work in. Unset: the server's current directory.
    pub workspace: Option<PathBuf>,
    pub tools: AgentToolsConfig,
    pub commands: AgentCommandsConfig,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            system_prompt: "You are a careful software engineering agent. Do the user's request \
                            and answer with a short, factual report of what you did and found."
                .into(),
            planning: false,
            max_steps: 8,
            step_concurrency: 1,
            max_iterations: 20,
            think: false,
            workspace: None,
            tools: AgentToolsConfig::default(),
            commands: AgentCommandsConfig::default(),
        }
    }
}

/// `agent.tools`: the workspace tools offered to models with the `tools` capability.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentToolsConfig {
    /// Tools not offered: any of list_dir, read_file, search_text, write_file, edit_file,
    /// run_command.
    pub disabled: Vec<String>,
    /// Most bytes read_file returns from one file (and largest file search_text scans).
    pub max_read_bytes: ByteSize,
    /// Most bytes of any one tool result sent back to the model.
    pub max_output_bytes: ByteSize,
}

impl Default for AgentToolsConfig {
    fn default() -> Self {
        Self {
            disabled: Vec::new(),
            max_read_bytes: ByteSize::kib(256),
            max_output_bytes: ByteSize::kib(64),
        }
    }
}

/// `agent.commands`: what run_command may start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentCommandsConfig {
    /// Program names (argv[0], no path) the model may run. Empty: run_command is not offered.
    pub allow: Vec<String>,
    /// A command still running after this is killed (with its process group).
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// Most bytes of stdout and of stderr kept (the head and the tail of longer output).
    pub max_output_bytes: ByteSize,
    /// `PATH` for commands. Unset: the server's `PATH` without relative entries.
    pub path: Option<String>,
    /// Extra environment variables for commands; nothing else of the server's environment
    /// is passed except `PATH`, `HOME` and `TMPDIR`.
    pub env: std::collections::BTreeMap<String, String>,
}

impl Default for AgentCommandsConfig {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            timeout: Duration::from_secs(120),
            max_output_bytes: ByteSize::kib(64),
            path: None,
            env: std::collections::BTreeMap::new(),
        }
    }
}

impl AgentConfig {
    /// Checks the `agent` section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        if !(1..=64).contains(&self.max_steps) {
            return invalid("agent.max_steps", "must be from 1 through 64".into());
        }
        if !(1..=16).contains(&self.step_concurrency) {
            return invalid("agent.step_concurrency", "must be from 1 through 16".into());
        }
        if self.max_iterations == 0 {
            return invalid("agent.max_iterations", "must be greater than 0".into());
        }
        for name in &self.tools.disabled {
            if !crate::agent::tools::TOOL_NAMES.contains(&name.as_str()) {
                return invalid(
                    "agent.tools.disabled",
                    format!(
                        "unknown tool '{name}'; tools are {}",
                        crate::agent::tools::TOOL_NAMES.join(", ")
                    ),
                );
            }
        }
        if self.tools.max_read_bytes.as_u64() == 0 || self.tools.max_output_bytes.as_u64() == 0 {
            return invalid(
                "agent.tools",
                "max_read_bytes and max_output_bytes must be greater than 0".into(),
            );
        }
        for program in &self.commands.allow {
            if program.is_empty() || program.contains(['/', '\\']) {
                return invalid(
                    "agent.commands.allow",
                    format!("'{program}' must be a bare program name found on PATH, e.g. cargo"),
                );
            }
        }
        if self.commands.timeout.is_zero() {
            return invalid("agent.commands.timeout", "must be greater than 0".into());
        }
        if self.commands.max_output_bytes.as_u64() == 0 {
            return invalid(
                "agent.commands.max_output_bytes",
                "must be greater than 0".into(),
            );
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Address `agent-mcp serve` listens on. Loopback by default.
    pub bind: SocketAddr,
    /// Extra `Host` names accepted besides localhost, 127.0.0.1 and [::1] (any port).
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin`s accepted besides loopback ones, e.g. `https://ide.example`.
    pub allowed_origins: Vec<String>,
    /// Largest request body. Unset: derived from the image limits (room for the largest
    /// allowed `agent_run`, base64 included).
    pub max_body_bytes: Option<ByteSize>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: None,
        }
    }
}

impl HttpConfig {
    /// The body cap in force: the configured one, or one derived from the image limits.
    pub fn body_limit(&self, images: &ImageLimits) -> usize {
        match self.max_body_bytes {
            Some(b) => usize::try_from(b.as_u64()).unwrap_or(usize::MAX),
            None => images.max_request_body(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    pub images: ImageLimits,
}

/// `mcp.images`: seed 000 §2.2 limits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImageLimits {
    /// Most images in one `agent_run`.
    pub max_count: usize,
    /// Largest decoded size of one image.
    pub max_bytes: ByteSize,
    /// Largest decoded size of all images of one `agent_run`.
    pub max_total_bytes: ByteSize,
}

impl Default for ImageLimits {
    fn default() -> Self {
        Self {
            max_count: 4,
            max_bytes: ByteSize::mib(10),
            max_total_bytes: ByteSize::mib(20),
        }
    }
}

impl ImageLimits {
    /// A body that can carry the largest allowed images as base64 (4/3 of the decoded size)
    /// plus a generous 1 MiB for the request text and the JSON around it.
    pub fn max_request_body(&self) -> usize {
        let total = self.max_total_bytes.as_u64();
        let base64 = total.div_ceil(3).saturating_mul(4);
        usize::try_from(base64.saturating_add(1024 * 1024)).unwrap_or(usize::MAX)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Where tasks and sessions live: `sqlite` (a file; survives restarts) or `memory` (lost
    /// on exit).
    pub backend: StoreBackend,
    /// The SQLite file; a relative path is under the current directory. Its folder is created.
    pub path: PathBuf,
    /// SQLite `synchronous`. `FULL`: a task is on disk, power loss included, before
    /// `agent_run` answers.
    pub synchronous: Synchronous,
    /// How long finished (completed, failed, cancelled) tasks are kept before they are purged;
    /// also the Tasks extension's `ttlMs`.
    #[serde(with = "humantime_serde_compat")]
    pub retention: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: StoreBackend::Sqlite,
            path: PathBuf::from(".agent-mcp/agent-mcp.db"),
            synchronous: Synchronous::Full,
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl StoreConfig {
    /// The default SQLite settings with the file at `path`.
    pub fn sqlite_at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            ..Self::default()
        }
    }

    /// `retention` in milliseconds (the Tasks `ttlMs`), saturating.
    pub fn retention_ms(&self) -> u64 {
        u64::try_from(self.retention.as_millis()).unwrap_or(u64::MAX)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    Sqlite,
    Memory,
}

/// SQLite's `PRAGMA synchronous` levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Synchronous {
    #[serde(alias = "off")]
    Off,
    #[serde(alias = "normal")]
    Normal,
    #[serde(alias = "full")]
    Full,
    #[serde(alias = "extra")]
    Extra,
}

impl Synchronous {
    /// The value for `PRAGMA synchronous`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
            Synchronous::Extra => "EXTRA",
        }
    }
}

/// `auth`: bearer tokens for HTTP. With no tokens, HTTP is open to whoever passes the
/// Host/Origin checks (loopback by default).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub tokens: Vec<TokenConfig>,
}

/// One accepted token, stored as the SHA-256 of the token (`agent-mcp hash-token`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The caller identity this token stands for (tasks and sessions belong to it).
    pub name: String,
    /// Lowercase hex SHA-256 of the token.
    pub sha256: String,
}

/// `rate_limit`: per-caller request limits (seed 002: 60 requests per minute per user).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    pub enabled: bool,
    /// Sustained requests per minute per caller.
    pub per_minute: u32,
    /// Requests a caller may make at once before the sustained rate applies.
    pub burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            per_minute: 60,
            burst: 60,
        }
    }
}

/// `audit`: one JSON line per tools/call, tasks/* request and rejection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    pub enabled: bool,
    /// Append audit lines to this file (created 0600, parent directories created); unset: stderr.
    pub file: Option<PathBuf>,
    /// Also record the full request text (off: only its length and SHA-256).
    pub include_request: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            file: None,
            include_request: false,
        }
    }
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{key}: {message}")]
    Invalid { key: &'static str, message: String },
}

impl Config {
    /// Loads `path`; with `None`, `./agent.yaml` if it exists, else the defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match path {
            Some(p) => Some(p.to_path_buf()),
            None => Some(PathBuf::from("agent.yaml")).filter(|p| p.is_file()),
        };
        let config = match path {
            None => Config::default(),
            Some(path) => {
                let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                Config::from_yaml(&text).map_err(|e| match e {
                    ConfigError::Parse { message, .. } => ConfigError::Parse { path, message },
                    other => other,
                })?
            }
        };
        Ok(config)
    }

    /// Parses and validates YAML text. An empty document means all defaults.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = if text.trim().is_empty() {
            Config::default()
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Parse {
                path: PathBuf::from("<yaml>"),
                message: e.to_string(),
            })?
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks values serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        let url = self.ollama.url.as_str();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 8 {
            return invalid(
                "ollama.url",
                format!("\"{url}\" is not an http:// or https:// URL"),
            );
        }
        if self.ollama.model.trim().is_empty() {
            return invalid("ollama.model", "must name a model, e.g. qwen3:8b".into());
        }
        if let Some(t) = self.ollama.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return invalid(
                "ollama.temperature",
                format!("must be from 0.0 through 2.0, got {t}"),
            );
        }
        if self.ollama.num_ctx == 0 {
            return invalid("ollama.num_ctx", "must be greater than 0".into());
        }
        if self.ollama.request_timeout.is_zero() {
            return invalid("ollama.request_timeout", "must be greater than 0".into());
        }
        if self.ollama.connect_timeout.is_zero() {
            return invalid("ollama.connect_timeout", "must be greater than 0".into());
        }
        if self.ollama.max_reply_bytes.as_u64() == 0 {
            return invalid("ollama.max_reply_bytes", "must be greater than 0".into());
        }
        let images = &self.mcp.images;
        if images.max_bytes.as_u64() == 0 {
            return invalid("mcp.images.max_bytes", "must be greater than 0".into());
        }
        if images.max_total_bytes < images.max_bytes {
            return invalid(
                "mcp.images.max_total_bytes",
                format!(
                    "must be at least mcp.images.max_bytes ({})",
                    images.max_bytes.display().iec()
                ),
            );
        }
        if let Some(cap) = self.http.max_body_bytes
            && cap.as_u64() < 1024
        {
            return invalid(
                "http.max_body_bytes",
                "must be at least 1 KiB to carry any request".into(),
            );
        }
        for (i, token) in self.auth.tokens.iter().enumerate() {
            if token.name.trim().is_empty() {
                return invalid("auth.tokens", format!("entry {i} has an empty name"));
            }
            let hex = token.sha256.len() == 64
                && token
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex {
                return invalid(
                    "auth.tokens",
                    format!(
                        "entry {i} ({}): sha256 must be 64 lowercase hex digits; \
                         print it with `agent-mcp hash-token`",
                        token.name
                    ),
                );
            }
        }
        self.agent.validate()?;
        if self.rate_limit.enabled {
            if self.rate_limit.per_minute == 0 {
                return invalid(
                    "rate_limit.per_minute",
                    "must be greater than 0 (set rate_limit.enabled: false to turn limits off)"
                        .into(),
                );
            }
            if self.rate_limit.burst == 0 {
                return invalid("rate_limit.burst", "must be greater than 0".into());
            }
        }
        Ok(())
    }
}

fn default_ollama_url() -> String {
    std::env::var("OLLAMA_HOST")
        .ok()
        .map(|h| normalize_ollama_host(&h))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "http://127.0.0.1:11434".into())
}

/// Turns an `OLLAMA_HOST` value (`host`, `host:port`, `0.0.0.0`, `http://host:port`) into a URL
/// to connect to, as the ollama CLI does.
pub fn normalize_ollama_host(value: &str) -> String {
    let value = value.trim().trim_end_matches('/');
    if value.is_empty() {
        return String::new();
    }
    let (scheme, rest) = match value.split_once("://") {
        Some((s, r)) => (s, r),
        None => ("http", value),
    };
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => (h, p),
        _ => (rest, if scheme == "https" { "443" } else { "11434" }),
    };
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "[::]" => "[::1]",
        h => h,
    };
    format!("{scheme}://{host}:{port}")
}

/// Durations as humantime strings (`"10m"`, `"5s"`, `"7d"`).
mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "\"{text}\" is not a duration ({e}); write e.g. \"30s\", \"10m\" or \"7d\""
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_all_defaults() {
        assert_eq!(Config::from_yaml("").unwrap(), Config::default());
        assert_eq!(Config::from_yaml("# nothing\n").unwrap(), Config::default());
    }

    #[test]
    fn values_are_read() {
        let c = Config::from_yaml(
            "ollama:\n  model: llama3.2\n  temperature: 0.3\n  request_timeout: 90s\n\
             mcp:\n  images:\n    max_bytes: 5 MiB\n    max_total_bytes: 10485760\n",
        )
        .unwrap();
        assert_eq!(c.ollama.model, "llama3.2");
        assert_eq!(c.ollama.temperature, Some(0.3));
        assert_eq!(c.ollama.request_timeout, Duration::from_secs(90));
        assert_eq!(c.mcp.images.max_bytes, ByteSize::mib(5));
        assert_eq!(c.mcp.images.max_total_bytes, ByteSize::mib(10));
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = Config::from_yaml("ollama:\n  modle: x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("modle"), "{e}");
        let e = Config::from_yaml("olama: {}\n").unwrap_err().to_string();
        assert!(e.contains("olama"), "{e}");
    }

    #[test]
    fn bad_values_name_the_key() {
        let e = Config::from_yaml("ollama:\n  temperature: 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("ollama.temperature:"), "{e}");
        let e = Config::from_yaml("ollama:\n  url: localhost\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("ollama.url:"), "{e}");
        let e = Config::from_yaml("ollama:\n  request_timeout: soon\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("soon"), "{e}");
    }

    #[test]
    fn ollama_host_forms() {
        assert_eq!(normalize_ollama_host("0.0.0.0"), "http://127.0.0.1:11434");
        assert_eq!(normalize_ollama_host("example:1234"), "http://example:1234");
        assert_eq!(
            normalize_ollama_host("https://ollama.example"),
            "https://ollama.example:443"
        );
        assert_eq!(
            normalize_ollama_host("http://127.0.0.1:11434/"),
            "http://127.0.0.1:11434"
        );
    }

    #[test]
    fn default_body_cap_fits_the_largest_images() {
        let limits = ImageLimits::default();
        let cap = HttpConfig::default().body_limit(&limits);
        assert!(cap > 20 * 1024 * 1024 * 4 / 3);
    }
}
