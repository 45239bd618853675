//! The agent's own tools: files and commands, confined to one workspace folder.
//!
//! [`Toolbox`] offers the enabled tools to the model (as Ollama `tools` definitions) and runs
//! the calls it makes. Every path goes through [`Workspace`], which refuses `..` escapes,
//! absolute paths outside the root and symbolic links that resolve outside it. A refused or
//! failed call is not an error of the task: it is a typed [`CallError::RespondToModel`], whose
//! text (`error: …`) goes back to the model as the tool's result, so the model can correct
//! itself; only a cancellation ends the step. Every tool is defined once, in one registry
//! ([`TOOLS`]), with what it does to the workspace ([`ToolKind`]).
//!
//! | tool | kind | what it does |
//! |---|---|---|
//! | `list_dir` | read | the entries of a folder |
//! | `read_file` | read | a text file, or a window of its lines, capped at `agent.tools.max_read_bytes` |
//! | `search_text` | read | lines containing a literal string (optionally in any case), under a folder |
//! | `write_file` | write | creates a file, or replaces one the task has read (write to a temporary file, then rename) |
//! | `edit_file` | write | replaces an exact string in a file the task has read |
//! | `run_command` | run | runs an allow-listed program with argv (no shell), timeout, output cap |
//!
//! The task's [`Ledger`] is the judge of writes: a file that exists is changed only after the
//! task read it, and not if it changed since; and it records what the task changed.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use agent_mcp::agent::tools::{ToolSettings, Toolbox};
//! use agent_mcp::config::AgentConfig;
//! use agent_mcp::ollama::{ToolCall, ToolCallFunction};
//! use tokio_util::sync::CancellationToken;
//!
//! let toolbox = Toolbox::open(&ToolSettings::from_config(&AgentConfig::default()))?;
//! let call = ToolCall {
//!     id: None,
//!     function: ToolCallFunction {
//!         index: None,
//!         name: "read_file".into(),
//!         arguments: serde_json::json!({"path": "Cargo.toml"}),
//!     },
//! };
//! match toolbox.execute(&call, &CancellationToken::new()).await {
//!     Ok(output) => println!("{}", output.text),
//!     Err(agent_mcp::agent::tools::CallError::RespondToModel(e)) => println!("{}", toolbox.error_text(&e)),
//!     Err(agent_mcp::agent::tools::CallError::Cancelled) => println!("cancelled"),
//! }
//! # Ok(()) }
//! ```

mod cgroup;
#[cfg(unix)]
mod child;
mod command;
mod edit;
mod files;
mod formats;
mod ledger;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod netns;
mod output;
mod registry;
mod run;
pub mod sandbox;
mod spec;
mod trace;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{AgentConfig, CommandsSwitch};
use crate::ollama::ToolCall;
pub use cgroup::describe as describe_command_isolation;
pub use command::{CommandEnd, CommandRun};
pub(crate) use files::look_alike_of;
pub(crate) use formats::parse_problem;
pub use ledger::{ChangeKind, FileChange, Ledger, Snapshot};
#[cfg(any(target_os = "linux", target_os = "android"))]
pub use netns::{Isolation as NetworkIsolation, describe as describe_network_isolation};
pub use registry::{TOOL_NAMES, TOOLS, names, spec};
pub(crate) use spec::parse_arguments;
pub use spec::{Param, ParamType, ToolKind, ToolSpec};
pub(crate) use trace::{engine_tool_span, record_engine_outcome};

/// Whether commands reach the network here (no network namespaces off Linux).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn describe_network_isolation(network: bool) -> Result<String, String> {
    if network {
        Ok("commands reach the network as the server does (agent.commands.network: true)".into())
    } else {
        Err(
            "commands cannot be cut off from the network on this system (no network \
             namespaces); they reach it as the server does"
                .into(),
        )
    }
}
use names::{DELETE_FILE, RUN_COMMAND, SEARCH_TEXT, WRITE_FILE};
pub(crate) use workspace::NOT_THE_PROJECTS;
pub use workspace::{PathError, ProtectedFiles, ReadOnlyPaths, Workspace};

/// How long a file tool call may take by default ([`ToolSettings::tool_deadline`]).
pub const DEFAULT_TOOL_DEADLINE: Duration = Duration::from_secs(60);

/// What the tools may do, from `agent.*` in the configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSettings {
    /// The workspace root as configured (resolved when a [`Toolbox`] opens).
    pub workspace: PathBuf,
    pub disabled: Vec<String>,
    pub max_read_bytes: usize,
    pub max_output_bytes: usize,
    pub commands: CommandSettings,
    /// The server's own files, refused by every tool even inside the workspace.
    pub protected: ProtectedFiles,
    /// Paths the tools may read but never change (`agent.tools.read_only_paths`).
    pub read_only: ReadOnlyPaths,
    /// Longest a file tool call (`list_dir`, `read_file`, `search_text`, `write_file`,
    /// `edit_file`) may take; past it the call ends with an error and the task goes on.
    /// `run_command` is bounded by `commands.timeout` instead.
    pub tool_deadline: Duration,
}

/// `agent.commands`.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandSettings {
    /// Whether `run_command` is offered (`agent.commands.enabled`, `auto` resolved).
    pub enabled: bool,
    /// The kernel's Landlock, which confines every command; `None`: commands run without the
    /// filesystem sandbox (only with `agent.commands.enabled: true`).
    pub landlock: Option<sandbox::Landlock>,
    /// Programs the model may start; empty: any found on the command `PATH`.
    pub allow: Vec<String>,
    /// `agent.commands.read_paths`.
    pub read_paths: Vec<PathBuf>,
    pub timeout: Duration,
    pub max_output_bytes: usize,
    pub path: Option<String>,
    pub env: BTreeMap<String, String>,
    pub limits: crate::config::CommandLimits,
    /// `agent.commands.network`: let commands reach the network (off: a namespace of their
    /// own, where the kernel allows).
    pub network: bool,
}

fn bytes(size: bytesize::ByteSize) -> usize {
    usize::try_from(size.as_u64()).unwrap_or(usize::MAX)
}

impl ToolSettings {
    pub fn from_config(agent: &AgentConfig) -> Self {
        let workspace = agent
            .workspace
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        Self {
            workspace,
            disabled: agent.tools.disabled.clone(),
            max_read_bytes: bytes(agent.tools.max_read_bytes),
            max_output_bytes: bytes(agent.tools.max_output_bytes),
            commands: CommandSettings {
                enabled: match agent.commands.enabled {
                    CommandsSwitch::Auto => sandbox::landlock().is_ok(),
                    CommandsSwitch::On => true,
                    CommandsSwitch::Off => false,
                },
                landlock: sandbox::landlock().ok(),
                allow: agent.commands.allow.clone(),
                read_paths: agent.commands.read_paths.clone(),
                timeout: agent.commands.timeout,
                max_output_bytes: bytes(agent.commands.max_output_bytes),
                path: agent.commands.path.clone(),
                env: agent.commands.env.clone(),
                limits: agent.commands.limits.clone(),
                network: agent.commands.network,
            },
            protected: ProtectedFiles::default(),
            read_only: ReadOnlyPaths::new(agent.tools.read_only_paths.iter().cloned()),
            tool_deadline: DEFAULT_TOOL_DEADLINE,
        }
    }

    /// Also refuses `paths` (the server's configuration file, database, audit log…) in every
    /// tool, by path and by identity taken now (see [`ProtectedFiles`]). Call it when the
    /// server starts, before the model runs.
    pub fn protect(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.protected = self.protected.with(paths);
    }
}

/// Why a tool call did not do what it was asked. The model is sent `error: …` with this
/// text and may correct itself; the task goes on.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("unknown tool '{name}'; the tools are: {available}")]
    Unknown { name: String, available: String },
    #[error("invalid arguments for {tool}: {reason}; expected {expected}")]
    Arguments {
        tool: &'static str,
        reason: String,
        expected: &'static str,
    },
    #[error(transparent)]
    Path(#[from] PathError),
    /// A file that is not there, with what its folder holds (`message`) and the one file it
    /// most likely meant, if there is one.
    #[error("{message}")]
    NotFound {
        message: String,
        look_alike: Option<LookAlike>,
    },
    #[error(
        "'{path}' exists and this task has not read it; call read_file on it first (write_file \
         replaces the whole file, so what else it holds would be lost)"
    )]
    NotRead { path: String },
    #[error(
        "'{path}' changed since this task read it (a command or someone else wrote it); call \
         read_file on it again first"
    )]
    ChangedSinceRead { path: String },
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
    #[error(
        "{tool} did not finish within {limit} and was abandoned (a slow or stuck file system?); \
         try a smaller folder or another file"
    )]
    Deadline { tool: &'static str, limit: String },
}

/// The file a missing path most likely meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookAlike {
    /// A workspace path that exists.
    pub path: String,
    pub why: LookAlikeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookAlikeKind {
    /// The same path written with `\` for `/`.
    Backslashes,
    /// The only file of the folder whose name is like the one asked for.
    SimilarName,
}

/// A call that did not finish: the model gets its error, or the step ends.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The model is told (`error: …`) and may correct itself.
    #[error(transparent)]
    RespondToModel(ToolError),
    /// The task was cancelled while the call ran.
    #[error("cancelled")]
    Cancelled,
}

impl From<ToolError> for CallError {
    fn from(e: ToolError) -> Self {
        CallError::RespondToModel(e)
    }
}

impl From<PathError> for CallError {
    fn from(e: PathError) -> Self {
        CallError::RespondToModel(e.into())
    }
}

/// What a call that worked returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// What the model is sent (capped at `agent.tools.max_output_bytes`).
    pub text: String,
    /// For `search_text`: how many matches it found.
    pub matches: Option<usize>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            matches: None,
        }
    }
}

/// What a tool's handler works with.
#[derive(Clone, Debug)]
pub(crate) struct ToolContext {
    pub workspace: Workspace,
    pub settings: ToolSettings,
    pub ledger: Arc<Ledger>,
    /// The task's temporary folder for its commands, removed when the task's toolbox goes.
    pub scratch: Arc<sandbox::TaskScratch>,
}

/// The enabled tools over one opened workspace, for one task: it keeps the task's
/// [`Ledger`].
#[derive(Debug)]
pub struct Toolbox {
    ctx: ToolContext,
    enabled: Vec<&'static ToolSpec>,
}

impl Toolbox {
    /// Resolves the workspace root (it must be an existing folder).
    pub fn open(settings: &ToolSettings) -> Result<Toolbox, PathError> {
        let workspace = Workspace::open(&settings.workspace)?
            .protect(settings.protected.clone())
            .read_only(settings.read_only.clone());
        let enabled = TOOL_NAMES
            .into_iter()
            .filter(|name| !settings.disabled.iter().any(|d| d == name))
            // Deleting is writing: with write_file disabled, no file is deleted either.
            .filter(|name| {
                *name != DELETE_FILE || !settings.disabled.iter().any(|d| d == WRITE_FILE)
            })
            .filter(|name| *name != RUN_COMMAND || settings.commands.enabled)
            .filter_map(spec)
            .collect();
        Ok(Toolbox {
            ctx: ToolContext {
                workspace,
                settings: settings.clone(),
                ledger: Arc::new(Ledger::default()),
                scratch: Arc::default(),
            },
            enabled,
        })
    }

    pub fn workspace(&self) -> &Workspace {
        &self.ctx.workspace
    }

    /// The same toolbox, keeping these test files as they are (the request's checks: see
    /// [`Workspace::keep_checks`]).
    pub fn keep_checks(mut self, files: Vec<String>) -> Toolbox {
        self.ctx.workspace = self.ctx.workspace.keep_checks(files);
        self
    }

    /// Keeps these test files as they are from now on, in place of those given before (see
    /// [`Workspace::keep_checks`]).
    pub(crate) fn set_kept_checks(&mut self, files: Vec<String>) {
        self.ctx.workspace = self.ctx.workspace.clone().keep_checks(files);
    }

    pub fn settings(&self) -> &ToolSettings {
        &self.ctx.settings
    }

    /// What this task read and changed.
    pub fn ledger(&self) -> &Ledger {
        &self.ctx.ledger
    }

    /// The enabled tool names.
    pub fn enabled(&self) -> Vec<&'static str> {
        self.enabled.iter().map(|s| s.name).collect()
    }

    /// The enabled tool called `name`.
    pub fn get(&self, name: &str) -> Option<&'static ToolSpec> {
        self.enabled.iter().copied().find(|s| s.name == name)
    }

    /// Whether `name` is an enabled tool of this kind.
    pub fn is(&self, name: &str, kind: ToolKind) -> bool {
        self.get(name).is_some_and(|s| s.kind == kind)
    }

    /// Ollama `tools` definitions of the enabled tools.
    pub fn definitions(&self) -> Vec<serde_json::Value> {
        self.enabled
            .iter()
            .map(|spec| spec.definition(&self.ctx.settings))
            .collect()
    }

    /// A one-line description of a call for `current_task`, e.g. `run_command: cargo test`.
    pub fn describe(call: &ToolCall) -> String {
        let args = parse_arguments(&call.function.arguments);
        let detail = match call.function.name.as_str() {
            RUN_COMMAND => args["argv"]
                .as_array()
                .map(|argv| {
                    argv.iter()
                        .map(|a| a.as_str().unwrap_or("?"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
            SEARCH_TEXT => args["pattern"].as_str().unwrap_or_default().to_owned(),
            _ => args["path"].as_str().unwrap_or_default().to_owned(),
        };
        let name = crate::agent::engine::plan::one_line(&call.function.name);
        match crate::agent::engine::plan::one_line(&detail) {
            d if d.is_empty() => name,
            d => format!("{name}: {d}"),
        }
    }

    /// Runs one call. A failure the model can act on is [`CallError::RespondToModel`]; the
    /// text it is sent is [`Toolbox::error_text`].
    pub async fn execute(
        &self,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, CallError> {
        let span = trace::tool_span(self.get(&call.function.name).map(|s| s.name), call);
        let outcome = self.run_call(call, cancel).await;
        trace::record_outcome(&span, &outcome);
        outcome
    }

    async fn run_call(
        &self,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, CallError> {
        let name = call.function.name.as_str();
        let Some(spec) = self.get(name) else {
            return Err(ToolError::Unknown {
                name: crate::agent::engine::plan::one_line(name),
                available: self.enabled().join(", "),
            }
            .into());
        };
        let mut output = spec
            .handler
            .run(spec::Invocation {
                spec,
                ctx: &self.ctx,
                args: &call.function.arguments,
                cancel,
            })
            .await?;
        output.text = output::cap_text(output.text, self.ctx.settings.max_output_bytes);
        Ok(output)
    }

    /// The text the model is sent for a failed call: `error: …`, capped.
    pub fn error_text(&self, error: &ToolError) -> String {
        output::cap_text(
            format!("error: {error}"),
            self.ctx.settings.max_output_bytes,
        )
    }
}

/// Extra time `run_command` gets past `agent.commands.timeout` before the call is abandoned.
const COMMAND_DEADLINE_MARGIN: Duration = Duration::from_secs(15);

type Work = Box<dyn FnOnce() -> Result<ToolOutput, CallError> + Send>;

/// Runs blocking file work off the async threads, for at most `deadline`, and gives up at
/// once when the task is cancelled. A thread stuck in the kernel is left behind (it holds no
/// lock the worker needs); the worker goes on.
/// Parses the call's arguments as its tool's, then runs `work` with a copy of its context on
/// the blocking pool under its cancel token and the tool deadline: the whole `run` of every
/// file tool.
async fn run_blocking<A: serde::de::DeserializeOwned + Send + 'static>(
    call: spec::Invocation<'_>,
    work: fn(&ToolContext, A) -> Result<ToolOutput, CallError>,
) -> Result<ToolOutput, CallError> {
    let args: A = call.spec.arguments(call.args)?;
    let deadline = call.ctx.settings.tool_deadline;
    let ctx = call.ctx.clone();
    blocking(
        call.spec.name,
        Box::new(move || work(&ctx, args)),
        call.cancel,
        deadline,
    )
    .await
}

async fn blocking(
    tool: &'static str,
    work: Work,
    cancel: &CancellationToken,
    deadline: Duration,
) -> Result<ToolOutput, CallError> {
    let handle = tokio::task::spawn_blocking(work);
    tokio::select! {
        done = handle => done.unwrap_or_else(|e| {
            Err(ToolError::Io(format!("the tool stopped unexpectedly: {e}")).into())
        }),
        () = cancel.cancelled() => Err(CallError::Cancelled),
        () = tokio::time::sleep(deadline) => Err(ToolError::Deadline {
            tool,
            limit: humantime::format_duration(deadline).to_string(),
        }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ollama::ToolCallFunction;
    use serde_json::{Value, json};

    fn settings(dir: &std::path::Path) -> ToolSettings {
        let mut s = ToolSettings::from_config(&AgentConfig::default());
        s.workspace = dir.to_path_buf();
        s
    }

    /// The text the model would be sent for `call`.
    async fn run(tb: &Toolbox, call: ToolCall) -> String {
        match tb.execute(&call, &CancellationToken::new()).await {
            Ok(out) => out.text,
            Err(CallError::RespondToModel(e)) => tb.error_text(&e),
            Err(CallError::Cancelled) => "cancelled".into(),
        }
    }

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: None,
            function: ToolCallFunction {
                index: None,
                name: name.into(),
                arguments,
            },
        }
    }

    #[test]
    fn run_command_is_offered_when_commands_are_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings(dir.path());
        s.commands.enabled = false;
        assert!(
            !Toolbox::open(&s)
                .unwrap()
                .enabled()
                .contains(&"run_command")
        );
        s.commands.enabled = true;
        s.commands.allow = vec!["cargo".into()];
        s.disabled = vec!["write_file".into()];
        let tb = Toolbox::open(&s).unwrap();
        assert_eq!(
            tb.enabled(),
            &[
                "list_dir",
                "read_file",
                "search_text",
                "edit_file",
                "run_command"
            ]
        );
        let defs = tb.definitions();
        assert_eq!(defs.len(), 5);
        assert_eq!(defs[4]["function"]["name"], "run_command");
        assert!(
            defs[4]["function"]["description"]
                .as_str()
                .unwrap()
                .contains("cargo")
        );
    }

    #[tokio::test]
    async fn bad_calls_become_error_text() {
        let dir = tempfile::tempdir().unwrap();
        let tb = Toolbox::open(&settings(dir.path())).unwrap();
        let text = run(&tb, call("format_disk", json!({}))).await;
        assert!(
            text.starts_with("error: unknown tool 'format_disk'"),
            "{text}"
        );
        let text = run(&tb, call("read_file", json!({"path": 42}))).await;
        assert!(
            text.starts_with("error: invalid arguments for read_file"),
            "{text}"
        );
        let text = run(&tb, call("write_file", json!("nonsense"))).await;
        assert!(text.starts_with("error: invalid arguments"), "{text}");
        // Arguments sent as a JSON string still work.
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        let text = run(&tb, call("read_file", json!("{\"path\":\"a.txt\"}"))).await;
        assert_eq!(text, "hello");
    }

    #[test]
    fn calls_are_described_on_one_line() {
        assert_eq!(
            Toolbox::describe(&call("run_command", json!({"argv": ["cargo", "test"]}))),
            "run_command: cargo test"
        );
        assert_eq!(
            Toolbox::describe(&call("read_file", json!({"path": "src/\nlib.rs"}))),
            "read_file: src/ lib.rs"
        );
        assert_eq!(
            Toolbox::describe(&call("list_dir", json!(null))),
            "list_dir"
        );
    }

    /// A file tool stuck in the kernel does not hold the worker: the call ends at its
    /// deadline, or at once when the task is cancelled.
    #[tokio::test]
    async fn a_stuck_file_tool_gives_up_at_its_deadline_and_on_cancel() {
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let stuck = std::sync::Arc::new(std::sync::Mutex::new(stuck));
        let cancel = CancellationToken::new();
        // `tool` runs work that waits for `release`, within `deadline`.
        let stuck_call = |tool, deadline| {
            let stuck = stuck.clone();
            let work: Work = Box::new(move || {
                let _ = stuck.lock().map(|rx| rx.recv());
                Ok(ToolOutput::text("finished"))
            });
            blocking(tool, work, &cancel, deadline)
        };
        let started = std::time::Instant::now();
        let out = stuck_call("read_file", Duration::from_millis(200)).await;
        assert!(
            matches!(
                &out,
                Err(CallError::RespondToModel(ToolError::Deadline {
                    tool: "read_file",
                    ..
                }))
            ),
            "{out:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        let text = out.unwrap_err().to_string();
        assert!(text.contains("did not finish within 200ms"), "{text}");
        let fired = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            fired.cancel();
        });
        let out = stuck_call("search_text", Duration::from_secs(3600)).await;
        assert!(matches!(out, Err(CallError::Cancelled)), "{out:?}");
        // Let the stuck threads go, so the runtime can stop.
        let _ = release.send(());
        let _ = release.send(());
    }
}
