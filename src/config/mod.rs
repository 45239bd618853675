//! `agent.yaml`: the configuration types and their defaults (this file), and beside them
//! reading the file (`load`), `AGENT_MCP_*` overrides (`env`), validation (`validate`), the
//! source of each value (`sources`), the server's own file locations (`paths`), the `auth.oauth`
//! section (`oauth`) and the `telemetry` section with its `OTEL_*` variables (`telemetry`).
//! Sections a plugin reads are its own types, used here as they are (`mcp.images` is
//! [`ImageLimits`], the tools' limits).
//!
//! Every key has a default, so no file is needed to start. Unknown keys and bad values are
//! errors that name the key (`ollama.temperature: …`). `OLLAMA_HOST` (Ollama's own variable)
//! supplies `ollama.url` when the file does not set it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

mod approvals;
mod env;
mod load;
mod oauth;
/// `mcp.images`: the tools' own type, used as it is.
pub use crate::mcp_tools::ImageLimits;
pub use crate::redact::redact_url;
pub use approvals::{
    Approval, ApprovalsConfig, CommandApproval, CommandPatterns, DEFAULT_APPROVAL_TIMEOUT,
};
pub use oauth::{JwksConfig, OAuthConfig};
mod paths;
mod sources;
mod telemetry;
pub use telemetry::{OTEL_VARIABLES, TelemetryConfig};
mod validate;

use crate::serde_with::{exact_size, humantime_serde_compat};
pub use env::ENV_PREFIX;

pub use sources::{Loaded, Source, Sources};

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `ollama`: the model server and the model.
    pub ollama: OllamaConfig,
    /// `agent`: how a task is run (planning, steps, tools, commands, approvals).
    pub agent: AgentConfig,
    /// `http`: the HTTP edge (bind address, Host/Origin, sizes, timeouts, connections).
    pub http: HttpConfig,
    /// `mcp`: what callers may hand the server (images, request size, queue limits).
    pub mcp: McpConfig,
    /// `store`: where tasks and sessions live.
    pub store: StoreConfig,
    /// `auth`: bearer tokens and OAuth access tokens.
    pub auth: AuthConfig,
    /// `rate_limit`: new tasks and reads per caller.
    pub rate_limit: RateLimitConfig,
    /// `audit`: the audit log.
    pub audit: AuditConfig,
    /// `telemetry`: OpenTelemetry export.
    pub telemetry: TelemetryConfig,
}

/// `ollama`: the model server and the model every task uses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OllamaConfig {
    /// Base URL of the Ollama server. Default: `OLLAMA_HOST`, else http://127.0.0.1:11434.
    pub url: String,
    /// The model every task uses.
    pub model: String,
    /// Default temperature; `agent_run`'s `temperature` overrides it per task. Unset: the model's.
    pub temperature: Option<f64>,
    /// The most context sent as `options.num_ctx`: the model's own context length (from
    /// `/api/show`) when that is smaller.
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
    #[serde(with = "exact_size")]
    pub max_reply_bytes: ByteSize,
    /// Extra attempts after Ollama answers 503 (its queue is full), with jittered backoff.
    pub retries: u32,
    /// Wait before the first retry; doubled for each further one (with jitter).
    #[serde(with = "humantime_serde_compat")]
    pub retry_backoff: Duration,
    /// The API key for Ollama's cloud: from the environment (`OLLAMA_API_KEY`, Ollama's own
    /// variable), never from the file, and never printed; sent over https only.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

/// An API key for Ollama's cloud (`OLLAMA_API_KEY`): sent as `Authorization: Bearer` over
/// https only, marked sensitive, and never shown (its `Debug` says `<redacted>`).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// `None` for an empty or blank key.
    pub fn new(key: &str) -> Option<ApiKey> {
        let key = key.trim();
        (!key.is_empty()).then(|| ApiKey(key.to_owned()))
    }

    /// The key itself, for the one header that carries it.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl Default for OllamaConfig {
    fn default() -> Self {
        Self {
            url: default_ollama_url(),
            model: "qwen3:8b".into(),
            temperature: None,
            num_ctx: 32_768,
            keep_alive: None,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(5),
            max_reply_bytes: ByteSize::mib(8),
            retries: 2,
            retry_backoff: Duration::from_millis(500),
            api_key: None,
        }
    }
}

/// `agent`: how a task is run.
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
    /// Sent as `think` to a model with the `thinking` capability: `false`, `true`, or a level
    /// (`low`, `medium`, `high`) for the models that take one.
    pub think: ThinkSetting,
    /// How the tool loop steers the model: `auto` (by the model's size), `small`, `off`.
    pub steering: SteeringMode,
    /// Commands that judge a change (`[python3, -m, unittest]`), run before the task's first
    /// change and after the model's last change before it may answer; their failures go back
    /// to the model. Empty: the workspace's own test command, found from its files.
    pub checks: Vec<Vec<String>>,
    /// How many times failed checks go back to the model before the task fails.
    pub check_rounds: usize,
    /// The folder the agent's tools work in. Unset: the server's current directory.
    pub workspace: Option<PathBuf>,
    /// `agent.tools`: which of the agent's own tools are offered to the model.
    pub tools: AgentToolsConfig,
    /// `agent.commands`: what the `run_command` tool may run, and its limits.
    pub commands: AgentCommandsConfig,
    /// Which tool calls run at once, wait for a person's decision, or are refused.
    pub approvals: ApprovalsConfig,
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
            think: ThinkSetting::Off,
            steering: SteeringMode::Auto,
            checks: Vec::new(),
            check_rounds: 2,
            workspace: None,
            tools: AgentToolsConfig::default(),
            commands: AgentCommandsConfig::default(),
            approvals: ApprovalsConfig::default(),
        }
    }
}

/// The agent's tools, by the names `agent.tools.disabled` may list, in the order they are
/// offered. The agent's registry defines each one; its test holds the two to the same names.
pub const AGENT_TOOL_NAMES: [&str; 7] = [
    "list_dir",
    "read_file",
    "search_text",
    "write_file",
    "edit_file",
    "delete_file",
    "run_command",
];

/// `agent.steering`: which policy the agent's tool loop follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SteeringMode {
    /// `files` for models below 7 billion parameters, `off` otherwise (and when `/api/show`
    /// does not tell the size).
    #[default]
    Auto,
    /// For small local models: the workspace's files in the prompt and each changed file
    /// written whole in the reply, the project's checks after; `small` where the files do not
    /// fit the prompt, a plan is asked for, or the request holds images.
    Files,
    /// Every rule of the tool loop, for small local models.
    Small,
    /// No rule: the model's calls and answer pass through unchanged.
    Off,
}

/// `agent.think`: `false`, `true`, `low`, `medium` or `high`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThinkSetting {
    /// `false`: no thinking (the default).
    #[default]
    Off,
    /// `true`: thinking on.
    On,
    /// `low`: a low thinking level.
    Low,
    /// `medium`: a medium thinking level.
    Medium,
    /// `high`: a high thinking level.
    High,
}

// Its `think` value on the wire (`ThinkSetting::to_wire`) is the Ollama client's business:
// src/ollama/types.rs.
impl Serialize for ThinkSetting {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ThinkSetting::Off => serializer.serialize_bool(false),
            ThinkSetting::On => serializer.serialize_bool(true),
            ThinkSetting::Low => serializer.serialize_str("low"),
            ThinkSetting::Medium => serializer.serialize_str("medium"),
            ThinkSetting::High => serializer.serialize_str("high"),
        }
    }
}

impl<'de> Deserialize<'de> for ThinkSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            On(bool),
            Level(String),
        }
        match Wire::deserialize(deserializer)? {
            Wire::On(false) => Ok(ThinkSetting::Off),
            Wire::On(true) => Ok(ThinkSetting::On),
            Wire::Level(level) => match level.as_str() {
                "false" => Ok(ThinkSetting::Off),
                "true" => Ok(ThinkSetting::On),
                "low" => Ok(ThinkSetting::Low),
                "medium" => Ok(ThinkSetting::Medium),
                "high" => Ok(ThinkSetting::High),
                other => Err(serde::de::Error::custom(format!(
                    "agent.think: '{other}' is not one of false, true, low, medium, high"
                ))),
            },
        }
    }
}

/// `agent.tools`: the workspace tools offered to models with the `tools` capability.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentToolsConfig {
    /// Tools not offered: any of list_dir, read_file, search_text, write_file, edit_file,
    /// delete_file (also not offered when write_file is not),
    /// run_command.
    pub disabled: Vec<String>,
    /// Most bytes read_file returns from one file (and largest file search_text scans).
    #[serde(with = "exact_size")]
    pub max_read_bytes: ByteSize,
    /// Most bytes of any one tool result sent back to the model.
    #[serde(with = "exact_size")]
    pub max_output_bytes: ByteSize,
    /// Paths in the workspace the tools may read but never change, nor name in a command's
    /// arguments: a name without `/` (such as `.git`) anywhere in the tree, a path with `/`
    /// from the workspace root. By default the version-control folders, whose config and hooks
    /// run commands for the user (`core.fsmonitor`, `.git/hooks/pre-commit`).
    pub read_only_paths: Vec<String>,
}

/// The default `agent.tools.read_only_paths`.
pub const DEFAULT_READ_ONLY_PATHS: [&str; 3] = [".git", ".hg", ".svn"];

impl Default for AgentToolsConfig {
    fn default() -> Self {
        Self {
            disabled: Vec::new(),
            max_read_bytes: ByteSize::kib(256),
            max_output_bytes: ByteSize::kib(64),
            read_only_paths: DEFAULT_READ_ONLY_PATHS.map(str::to_owned).to_vec(),
        }
    }
}

/// `agent.commands`: what run_command may start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentCommandsConfig {
    /// Whether the agent may run commands: `auto` (the default) where the kernel can sandbox
    /// them (Landlock), `true` also without that sandbox, `false` never.
    pub enabled: CommandsSwitch,
    /// Program names (`argv[0]`, no path) the model may run. Empty (the default): any program
    /// found on the command `PATH`.
    pub allow: Vec<String>,
    /// A command still running after this is killed (with its process group).
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// Most bytes of stdout and of stderr kept (the head and the tail of longer output).
    #[serde(with = "exact_size")]
    pub max_output_bytes: ByteSize,
    /// `PATH` for commands. Unset: the server's `PATH` without relative entries.
    pub path: Option<String>,
    /// Extra environment variables for commands; nothing else of the server's environment
    /// is passed except `PATH`, `HOME` and `TMPDIR`.
    pub env: std::collections::BTreeMap<String, String>,
    /// Resource limits set on each command's process before it starts (Linux); null: no limit.
    pub limits: CommandLimits,
    /// Let commands reach the network. Off (the default): each command runs in a network
    /// namespace of its own with only a loopback interface, where the kernel allows it.
    pub network: bool,
    /// Folders commands may read besides the workspace, the system's folders, `PATH` and the
    /// usual toolchain folders (a compiler or package cache elsewhere). Absolute paths.
    pub read_paths: Vec<PathBuf>,
}

/// `agent.commands.enabled`: `auto`, `true` or `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommandsSwitch {
    /// Commands run where the kernel sandboxes them (Landlock), and are off elsewhere.
    #[default]
    Auto,
    /// Commands run, with the Landlock sandbox where the kernel has it and without it elsewhere.
    On,
    /// No commands: `run_command` is not offered.
    Off,
}

impl Serialize for CommandsSwitch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CommandsSwitch::Auto => s.serialize_str("auto"),
            CommandsSwitch::On => s.serialize_bool(true),
            CommandsSwitch::Off => s.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for CommandsSwitch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = CommandsSwitch;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("auto, true or false")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(if v {
                    CommandsSwitch::On
                } else {
                    CommandsSwitch::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "auto" => Ok(CommandsSwitch::Auto),
                    "true" => Ok(CommandsSwitch::On),
                    "false" => Ok(CommandsSwitch::Off),
                    other => Err(E::invalid_value(
                        serde::de::Unexpected::Str(other),
                        &"auto, true or false",
                    )),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `agent.commands.limits`: rlimits set in each command's process before `exec`, inherited by
/// its children; `processes` also caps the command's own cgroup where one can be made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommandLimits {
    /// CPU time of each process (`RLIMIT_CPU`, whole seconds).
    #[serde(with = "humantime_serde_compat::option")]
    pub cpu_time: Option<Duration>,
    /// Virtual memory of each process (`RLIMIT_AS`); generous, toolchains reserve more than
    /// they use.
    #[serde(with = "exact_size::option")]
    pub address_space: Option<ByteSize>,
    /// Processes (and threads) of one command: the `pids.max` of its cgroup where the server
    /// can make cgroups (root included), else `RLIMIT_NPROC` of the server's user, counted
    /// across the user and not applied to root by the kernel.
    pub processes: Option<u64>,
    /// Largest file a command may write (`RLIMIT_FSIZE`).
    #[serde(with = "exact_size::option")]
    pub file_size: Option<ByteSize>,
}

impl Default for CommandLimits {
    fn default() -> Self {
        Self {
            cpu_time: Some(Duration::from_secs(600)),
            address_space: Some(ByteSize::gib(16)),
            processes: Some(4096),
            file_size: Some(ByteSize::gib(4)),
        }
    }
}

impl Default for AgentCommandsConfig {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            timeout: Duration::from_secs(120),
            max_output_bytes: ByteSize::kib(64),
            path: None,
            env: std::collections::BTreeMap::new(),
            limits: CommandLimits::default(),
            network: false,
            enabled: CommandsSwitch::Auto,
            read_paths: Vec::new(),
        }
    }
}

/// File descriptors kept for everything but client connections (the store, the audit file,
/// Ollama's connections, a command's pipes) when `http.max_connections` is fitted to the
/// descriptor limit.
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// `http`: the HTTP edge (`agent-mcp serve`, or an edge mounted in your app).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Address `agent-mcp serve` listens on. Loopback by default.
    pub bind: SocketAddr,
    /// Extra `Host` names accepted besides localhost, 127.0.0.1 and `[::1]` (any port).
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin`s accepted besides loopback ones, e.g. `https://ide.example`.
    pub allowed_origins: Vec<String>,
    /// Largest request body. Unset: derived from the image limits (room for the largest
    /// allowed `agent_run`, base64 included).
    #[serde(with = "exact_size::option")]
    pub max_body_bytes: Option<ByteSize>,
    /// How long a client may take to send its request headers (`agent-mcp serve`).
    #[serde(with = "humantime_serde_compat")]
    pub header_timeout: Duration,
    /// How long a client may take to send its request body once the headers are in.
    #[serde(with = "humantime_serde_compat")]
    pub body_timeout: Duration,
    /// Most connections held open at once; also kept below the process's file descriptor
    /// limit. At the cap, the connection idle longest is closed to make room for a new one.
    pub max_connections: usize,
    /// Most bytes of request bodies held at once, across all connections (the first 64 KiB
    /// of each body are not counted); a body that cannot get its share within
    /// `body_timeout` is answered 503.
    #[serde(with = "exact_size")]
    pub max_buffered_bytes: ByteSize,
    /// Serve a non-loopback `bind` without `auth.tokens` (e.g. behind a proxy that
    /// authenticates). Off: such a server refuses to start.
    pub allow_unauthenticated_remote: bool,
    /// Lowercase hex SHA-256 of the bearer token `/metrics` asks for (`agent-mcp
    /// hash-token`). Unset: any of `auth.tokens` when there are some, else none.
    pub metrics_token_sha256: Option<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: None,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_buffered_bytes: ByteSize::mib(64),
            allow_unauthenticated_remote: false,
            metrics_token_sha256: None,
        }
    }
}

impl HttpConfig {
    /// `max_buffered_bytes` in bytes.
    pub fn buffered_limit(&self) -> usize {
        usize::try_from(self.max_buffered_bytes.as_u64()).unwrap_or(usize::MAX)
    }

    /// The body cap in force: the configured one, or one derived from the image limits.
    pub fn body_limit(&self, images: &ImageLimits) -> usize {
        match self.max_body_bytes {
            Some(b) => usize::try_from(b.as_u64()).unwrap_or(usize::MAX),
            None => images.max_request_body(),
        }
    }
}

/// `mcp`: what callers may hand the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// `mcp.images`: how many images `agent_run` takes, their types and sizes.
    pub images: ImageLimits,
    /// Longest `agent_run` request text, in bytes (UTF-8). Far below the body cap, which is
    /// there for images: put large inputs in a workspace file and name it.
    #[serde(with = "exact_size")]
    pub max_request_bytes: ByteSize,
    /// Most tasks waiting in the queue, all callers together; past it `agent_run` answers a
    /// tool error saying the queue is full.
    pub max_queued_tasks: usize,
    /// Most tasks one caller (token name; every anonymous HTTP caller is one caller) may have
    /// waiting in the queue.
    pub max_queued_per_caller: usize,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            images: ImageLimits::default(),
            max_request_bytes: ByteSize::kib(256),
            max_queued_tasks: 10_000,
            max_queued_per_caller: 1_000,
        }
    }
}

/// `store`: where tasks, sessions and queued images live.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Where tasks and sessions live: `sqlite` (a file; survives restarts), `postgres` (a
    /// database several instances share; see `url`) or `memory` (lost on exit).
    pub backend: StoreBackend,
    /// The PostgreSQL database when `backend` is `postgres`:
    /// `postgres://user:password@host:port/dbname`. Its password is never printed.
    pub url: Option<String>,
    /// `postgres` only: how long a running task's claim lasts without a heartbeat (each
    /// instance renews its task's every second). A task whose instance stopped renewing ends
    /// `failed` once it lapses, on the database clock.
    #[serde(with = "humantime_serde_compat")]
    pub lease: Duration,
    /// `postgres` only: the deadline of each database call a request or the worker makes
    /// (waiting for a pooled connection, connecting, and the statements, which the server also
    /// cancels past it). A call past it fails with a store error, so an instance cut off from
    /// the database answers within about this long instead of hanging.
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// The SQLite file; a relative path is under the current directory. Its folder is created
    /// (0700). Unset: a file of its own for each workspace under the user's state directory
    /// ([`Config::store_path`]), so the agent's tools never see it.
    pub path: Option<PathBuf>,
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
            url: None,
            lease: Duration::from_secs(10),
            timeout: Duration::from_secs(2),
            path: None,
            synchronous: Synchronous::Full,
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl StoreConfig {
    /// The default SQLite settings with the file at `path`.
    pub fn sqlite_at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: Some(path.into()),
            ..Self::default()
        }
    }

    /// `retention` in milliseconds (the Tasks `ttlMs`), saturating.
    pub fn retention_ms(&self) -> u64 {
        u64::try_from(self.retention.as_millis()).unwrap_or(u64::MAX)
    }
}

/// `store.backend`: which store keeps the tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// SQLite, one file (`store.path`); survives restarts. The default.
    Sqlite,
    /// PostgreSQL, shared by any number of instances (`store.url`).
    Postgres,
    /// In memory, lost on exit: for tests and embedding.
    Memory,
}

/// SQLite's `PRAGMA synchronous` levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Synchronous {
    /// `OFF`: no syncs; a power cut may lose or corrupt recent writes.
    #[serde(alias = "off")]
    Off,
    /// `NORMAL`: WAL syncs at checkpoints; a power cut may lose the last commits.
    #[serde(alias = "normal")]
    Normal,
    /// `FULL`: every commit synced.
    #[serde(alias = "full")]
    Full,
    /// `EXTRA`: `FULL`, and the directory synced too.
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
    /// Static bearer tokens, each a name and the SHA-256 of its secret.
    pub tokens: Vec<TokenConfig>,
    /// An OAuth 2.1 authorization server's access tokens, next to `tokens`.
    pub oauth: OAuthConfig,
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

/// `rate_limit`: per-caller request limits, in two budgets that follow what a call costs.
///
/// Creating a task (`tools/call agent_run`) spends the main budget: 60 per minute per caller.
/// Everything else (`agent_status`, `tasks/*`, `tools/list`, `server/discover`) spends
/// [`ReadBudget`], large enough that a client polling its tasks at the advertised
/// `pollIntervalMs` never meets it. stdio is not limited unless `stdio: true`: its one client
/// started the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Whether callers are limited at all.
    pub enabled: bool,
    /// Sustained new tasks (`agent_run` calls) per minute per caller.
    pub per_minute: u32,
    /// New tasks a rested caller may create at once before the sustained rate applies.
    pub burst: u32,
    /// The budget of every other request.
    pub reads: ReadBudget,
    /// Also limit requests that arrive over stdio (the caller `stdio`).
    pub stdio: bool,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            per_minute: 60,
            burst: 60,
            reads: ReadBudget::default(),
            stdio: false,
        }
    }
}

/// `rate_limit.reads`: the budget of every request but `agent_run` (status reads, `tasks/*`,
/// listing, discovery). Each costs microseconds; the budget stops floods, not clients.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadBudget {
    /// Sustained requests per minute per caller (20 a second by default).
    pub per_minute: u32,
    /// Requests a rested caller may send at once.
    pub burst: u32,
}

impl Default for ReadBudget {
    fn default() -> Self {
        Self {
            per_minute: 1200,
            burst: 300,
        }
    }
}

/// `audit`: one JSON line per tools/call, tasks/* request and rejection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Whether audit lines are written at all.
    pub enabled: bool,
    /// Append audit lines to this file (created 0600, parent directories created); unset: stderr.
    pub file: Option<PathBuf>,
    /// Also record the full request text (off: only its length and SHA-256).
    pub include_request: bool,
    /// Rotate `file` before it would grow past this size (`file` → `file.1` → … →
    /// `file.<keep>`, whole lines only), so the audit trail on disk stays below
    /// `(keep + 1) × max_bytes`. `null`: never by size (rotate with logrotate and SIGHUP,
    /// which reopens `file` either way). No effect when audit lines go to stderr.
    #[serde(with = "exact_size::option")]
    pub max_bytes: Option<ByteSize>,
    /// Rotated files kept beside `file` when `max_bytes` is set (the oldest is deleted).
    pub keep: u32,
}

/// The smallest `audit.max_bytes`: room for many lines, even ones with a full request text.
pub const AUDIT_MIN_MAX_BYTES: u64 = 64 * 1024;
/// The most rotated audit files `audit.keep` may ask for.
pub const AUDIT_MAX_KEEP: u32 = 1000;

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            file: None,
            include_request: false,
            max_bytes: Some(ByteSize::mib(100)),
            keep: 5,
        }
    }
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not YAML of the configuration's shape (an unknown key, a wrong type).
    #[error("{path}: {message}")]
    Parse {
        /// The file (or the variable) read.
        path: PathBuf,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A value is out of range or contradicts another.
    #[error("{key}: {message}")]
    Invalid {
        /// The dotted key, e.g. `ollama.temperature`.
        key: &'static str,
        /// What is wrong and what would do.
        message: String,
    },
}

/// `ollama.url` when neither the file, `AGENT_MCP_OLLAMA_URL` nor `OLLAMA_HOST` sets it.
const DEFAULT_OLLAMA_URL: &str = "http://127.0.0.1:11434";

fn default_ollama_url() -> String {
    std::env::var("OLLAMA_HOST")
        .ok()
        .map(|h| normalize_ollama_host(&h))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| DEFAULT_OLLAMA_URL.into())
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

/// `(name, value)` pairs as an environment, for the tests of what the environment overrides.
#[cfg(test)]
pub(crate) fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
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
        let e = Config::from_yaml("store:\n  retention: 0s\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("store.retention: must be at least 1m"), "{e}");
        assert!(Config::from_yaml("store:\n  retention: 1m\n").is_ok());
        let e = Config::from_yaml("ollama:\n  request_timeout: soon\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("soon"), "{e}");
    }

    #[test]
    fn env_overrides_every_scalar_key_and_names_the_bad_one() {
        let (c, unknown) = Config::default()
            .with_env_overrides(vars(&[
                ("AGENT_MCP_OLLAMA_MODEL", "llama3.2"),
                ("AGENT_MCP_OLLAMA_TEMPERATURE", "0.4"),
                ("AGENT_MCP_MCP_IMAGES_MAX_BYTES", "5 MiB"),
                ("AGENT_MCP_RATE_LIMIT_ENABLED", "false"),
                ("AGENT_MCP_HTTP_BIND", "127.0.0.1:9999"),
                ("AGENT_MCP_OLAMA_MODEL", "typo"),
                ("AGENT_MCP_TOKEN", "client-side"),
                ("PATH", "/bin"),
            ]))
            .unwrap();
        assert_eq!(c.ollama.model, "llama3.2");
        assert_eq!(c.ollama.temperature, Some(0.4));
        assert_eq!(c.mcp.images.max_bytes, ByteSize::mib(5));
        assert!(!c.rate_limit.enabled);
        assert_eq!(c.http.bind.port(), 9999);
        assert_eq!(unknown, ["AGENT_MCP_OLAMA_MODEL"]);

        let e = Config::default()
            .with_env_overrides(vars(&[("AGENT_MCP_OLLAMA_NUM_CTX", "lots")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("AGENT_MCP_OLLAMA_NUM_CTX"), "{e}");
        let e = Config::default()
            .with_env_overrides(vars(&[("AGENT_MCP_OLLAMA_TEMPERATURE", "7")]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("ollama.temperature:"), "{e}");
    }

    #[test]
    fn think_takes_a_switch_or_a_level_and_names_a_bad_one() {
        let think = |yaml: &str| Config::from_yaml(yaml).map(|c| c.agent.think);
        assert_eq!(
            think("agent:\n  think: true\n").ok(),
            Some(ThinkSetting::On)
        );
        assert_eq!(
            think("agent:\n  think: high\n").ok(),
            Some(ThinkSetting::High)
        );
        assert_eq!(think("").ok(), Some(ThinkSetting::Off));
        let e = think("agent:\n  think: max\n").unwrap_err().to_string();
        assert!(
            e.contains("'max' is not one of false, true, low, medium, high"),
            "{e}"
        );
        let c =
            Config::from_yaml("agent:\n  steering: small\n  checks: [[python3, -m, unittest]]\n")
                .unwrap();
        assert_eq!(c.agent.steering, SteeringMode::Small);
        assert_eq!(c.agent.checks, [["python3", "-m", "unittest"]]);
        let text = serde_yaml_ng::to_string(&c).unwrap();
        assert_eq!(Config::from_yaml(&text).unwrap(), c);
    }

    #[test]
    fn sizes_print_back_exactly() {
        let mut c = Config::default();
        c.ollama.max_reply_bytes = ByteSize::b(1537);
        c.http.max_body_bytes = Some(ByteSize::kib(3));
        let text = serde_yaml_ng::to_string(&c).unwrap();
        assert!(text.contains("max_reply_bytes: 1537"), "{text}");
        assert!(text.contains("max_body_bytes: 3 KiB"), "{text}");
        assert!(text.contains("max_bytes: 10 MiB"), "{text}");
        assert_eq!(Config::from_yaml(&text).unwrap(), c);
    }

    #[test]
    fn redaction_hides_token_hashes() {
        let mut c = Config::default();
        c.auth.tokens.push(TokenConfig {
            name: "ci".into(),
            sha256: "a".repeat(64),
        });
        let printed = serde_yaml_ng::to_string(&c.redacted()).unwrap();
        assert!(!printed.contains(&"a".repeat(64)));
        assert!(printed.contains("<redacted>"));
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
