//! The agent's own tools: files and commands, confined to one workspace folder.
//!
//! [`Toolbox`] offers the enabled tools to the model (as Ollama `tools` definitions) and runs
//! the calls it makes. Every path goes through [`Workspace`], which refuses `..` escapes,
//! absolute paths outside the root and symbolic links that resolve outside it. A refused or
//! failed call is not an error of the task: its text (starting with `error:`) goes back to the
//! model as the tool's result, so the model can correct itself.
//!
//! | tool | what it does |
//! |---|---|
//! | `list_dir` | the entries of a folder |
//! | `read_file` | a text file, or a window of its lines, capped at `agent.tools.max_read_bytes` |
//! | `search_text` | lines containing a literal string, under a folder |
//! | `write_file` | creates or replaces a file (write to a temporary file, then rename) |
//! | `edit_file` | replaces an exact string in a file |
//! | `run_command` | runs an allow-listed program with argv (no shell), timeout, output cap |
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
//! let text = toolbox.execute(&call, &CancellationToken::new()).await;
//! println!("{text}");
//! # Ok(()) }
//! ```

mod cgroup;
mod command;
mod edit;
mod files;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod netns;
mod output;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::ollama::ToolCall;
pub use cgroup::describe as describe_command_isolation;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub use netns::{Isolation as NetworkIsolation, describe as describe_network_isolation};

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
pub use workspace::{PathError, ProtectedFiles, ReadOnlyPaths, Workspace};

/// How long a file tool call may take by default ([`ToolSettings::tool_deadline`]).
pub const DEFAULT_TOOL_DEADLINE: Duration = Duration::from_secs(60);

/// Every tool name, in the order they are offered.
pub const TOOL_NAMES: [&str; 6] = [
    "list_dir",
    "read_file",
    "search_text",
    "write_file",
    "edit_file",
    "run_command",
];

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
    pub allow: Vec<String>,
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
                allow: agent.commands.allow.clone(),
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

/// Why a tool call did nothing (or failed part-way); sent to the model as `error: …`.
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
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
    #[error("cancelled")]
    Cancelled,
    #[error(
        "{tool} did not finish within {limit} and was abandoned (a slow or stuck file system?); \
         try a smaller folder or another file"
    )]
    Deadline { tool: &'static str, limit: String },
}

/// The enabled tools over one opened workspace.
#[derive(Debug)]
pub struct Toolbox {
    workspace: Workspace,
    settings: ToolSettings,
    enabled: Vec<&'static str>,
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
            // A command tool with nothing allowed would only ever refuse.
            .filter(|name| *name != "run_command" || !settings.commands.allow.is_empty())
            .collect();
        Ok(Toolbox {
            workspace,
            settings: settings.clone(),
            enabled,
        })
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The enabled tool names.
    pub fn enabled(&self) -> &[&'static str] {
        &self.enabled
    }

    /// Ollama `tools` definitions of the enabled tools.
    pub fn definitions(&self) -> Vec<Value> {
        self.enabled
            .iter()
            .filter_map(|name| definition(name, &self.settings.commands.allow))
            .collect()
    }

    /// A one-line description of a call for `current_task`, e.g. `run_command: cargo test`.
    pub fn describe(call: &ToolCall) -> String {
        let args = parse_arguments(&call.function.arguments);
        let detail = match call.function.name.as_str() {
            "run_command" => args["argv"]
                .as_array()
                .map(|argv| {
                    argv.iter()
                        .map(|a| a.as_str().unwrap_or("?"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
            "search_text" => args["pattern"].as_str().unwrap_or_default().to_owned(),
            _ => args["path"].as_str().unwrap_or_default().to_owned(),
        };
        let name = crate::agent::plan::one_line(&call.function.name);
        match crate::agent::plan::one_line(&detail) {
            d if d.is_empty() => name,
            d => format!("{name}: {d}"),
        }
    }

    /// Runs one call. Never fails: errors become the `error: …` text the model sees.
    pub async fn execute(&self, call: &ToolCall, cancel: &CancellationToken) -> String {
        let text = match self.dispatch(call, cancel).await {
            Ok(text) => text,
            Err(e) => format!("error: {e}"),
        };
        output::cap_text(text, self.settings.max_output_bytes)
    }

    async fn dispatch(
        &self,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<String, ToolError> {
        let name = call.function.name.as_str();
        let Some(&tool) = self.enabled.iter().find(|t| **t == name) else {
            return Err(ToolError::Unknown {
                name: crate::agent::plan::one_line(name),
                available: self.enabled.join(", "),
            });
        };
        let args = &call.function.arguments;
        let ws = self.workspace.clone();
        let max_read = self.settings.max_read_bytes;
        let blocking = |work| blocking(tool, work, cancel, self.settings.tool_deadline);
        match tool {
            "list_dir" => {
                let a: files::ListDirArgs = arguments(tool, files::LIST_DIR_EXPECTED, args)?;
                blocking(Box::new(move || files::list_dir(&ws, &a))).await
            }
            "read_file" => {
                let a: files::ReadFileArgs = arguments(tool, files::READ_FILE_EXPECTED, args)?;
                blocking(Box::new(move || files::read_file(&ws, &a, max_read))).await
            }
            "search_text" => {
                let a: files::SearchArgs = arguments(tool, files::SEARCH_EXPECTED, args)?;
                blocking(Box::new(move || files::search_text(&ws, &a, max_read))).await
            }
            "write_file" => {
                let a: edit::WriteFileArgs = arguments(tool, edit::WRITE_FILE_EXPECTED, args)?;
                blocking(Box::new(move || edit::write_file(&ws, &a))).await
            }
            "edit_file" => {
                let a: edit::EditFileArgs = arguments(tool, edit::EDIT_FILE_EXPECTED, args)?;
                blocking(Box::new(move || edit::edit_file(&ws, &a))).await
            }
            "run_command" => {
                let a: command::RunCommandArgs =
                    arguments(tool, command::RUN_COMMAND_EXPECTED, args)?;
                // The command has its own timeout; this bounds what comes around it (starting,
                // draining pipes, killing what is left).
                let limit = self.settings.commands.timeout + COMMAND_DEADLINE_MARGIN;
                tokio::select! {
                    out = command::run_command(&ws, &self.settings.commands, &a, cancel) => out,
                    () = tokio::time::sleep(limit) => Err(ToolError::Deadline {
                        tool,
                        limit: humantime::format_duration(limit).to_string(),
                    }),
                }
            }
            other => Err(ToolError::Unknown {
                name: other.to_owned(),
                available: self.enabled.join(", "),
            }),
        }
    }
}

/// Extra time `run_command` gets past `agent.commands.timeout` before the call is abandoned.
const COMMAND_DEADLINE_MARGIN: Duration = Duration::from_secs(15);

type Work = Box<dyn FnOnce() -> Result<String, ToolError> + Send>;

/// Runs blocking file work off the async threads, for at most `deadline`, and gives up at
/// once when the task is cancelled. A thread stuck in the kernel is left behind (it holds no
/// lock the worker needs); the worker goes on.
async fn blocking(
    tool: &'static str,
    work: Work,
    cancel: &CancellationToken,
    deadline: Duration,
) -> Result<String, ToolError> {
    let handle = tokio::task::spawn_blocking(work);
    tokio::select! {
        done = handle => done
            .unwrap_or_else(|e| Err(ToolError::Io(format!("the tool stopped unexpectedly: {e}")))),
        () = cancel.cancelled() => Err(ToolError::Cancelled),
        () = tokio::time::sleep(deadline) => Err(ToolError::Deadline {
            tool,
            limit: humantime::format_duration(deadline).to_string(),
        }),
    }
}

/// Some models send the arguments object as a JSON string; accept both.
fn parse_arguments(args: &Value) -> Value {
    match args {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    }
}

fn arguments<T: DeserializeOwned>(
    tool: &'static str,
    expected: &'static str,
    args: &Value,
) -> Result<T, ToolError> {
    serde_json::from_value(parse_arguments(args)).map_err(|e| ToolError::Arguments {
        tool,
        reason: e.to_string(),
        expected,
    })
}

fn definition(name: &str, allow: &[String]) -> Option<Value> {
    let (description, properties, required): (String, Value, Vec<&str>) = match name {
        "list_dir" => (
            "List the entries of a folder of the workspace (folders end in /).".into(),
            json!({"path": {"type": "string", "description": "Folder relative to the workspace root; default \".\""}}),
            vec![],
        ),
        "read_file" => (
            "Read a text file of the workspace, optionally a window of its lines.".into(),
            json!({
                "path": {"type": "string", "description": "File relative to the workspace root"},
                "start_line": {"type": "integer", "description": "First line to return, from 1"},
                "max_lines": {"type": "integer", "description": "Most lines to return"}
            }),
            vec!["path"],
        ),
        "search_text" => (
            "Find lines containing a literal string in the workspace's files (not a regex).".into(),
            json!({
                "pattern": {"type": "string", "description": "The exact text to find"},
                "path": {"type": "string", "description": "Folder or file to search; default \".\""},
                "max_results": {"type": "integer", "description": "Most matching lines; default 100"}
            }),
            vec!["pattern"],
        ),
        "write_file" => (
            "Create or replace a file of the workspace with the given content.".into(),
            json!({
                "path": {"type": "string", "description": "File relative to the workspace root"},
                "content": {"type": "string", "description": "The whole new content"}
            }),
            vec!["path", "content"],
        ),
        "edit_file" => (
            "Replace an exact piece of text in a file of the workspace.".into(),
            json!({
                "path": {"type": "string", "description": "File relative to the workspace root"},
                "old_text": {"type": "string", "description": "Text to replace, exactly as in the file (whitespace included)"},
                "new_text": {"type": "string", "description": "The replacement"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence; default: old_text must occur once"}
            }),
            vec!["path", "old_text", "new_text"],
        ),
        "run_command" => (
            format!(
                "Run a program in the workspace without a shell (no pipes, globs or redirection). \
                 Allowed programs: {}.",
                allow.join(", ")
            ),
            json!({
                "argv": {"type": "array", "items": {"type": "string"}, "description": "Program and arguments, e.g. [\"cargo\", \"test\"]"},
                "cwd": {"type": "string", "description": "Folder to run in, relative to the workspace root; default \".\""}
            }),
            vec!["argv"],
        ),
        _ => return None,
    };
    Some(json!({
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required}
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ollama::ToolCallFunction;

    fn settings(dir: &std::path::Path) -> ToolSettings {
        let mut s = ToolSettings::from_config(&AgentConfig::default());
        s.workspace = dir.to_path_buf();
        s
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
    fn run_command_is_offered_only_with_an_allow_list() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings(dir.path());
        assert!(
            !Toolbox::open(&s)
                .unwrap()
                .enabled()
                .contains(&"run_command")
        );
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
        let cancel = CancellationToken::new();
        let text = tb.execute(&call("format_disk", json!({})), &cancel).await;
        assert!(
            text.starts_with("error: unknown tool 'format_disk'"),
            "{text}"
        );
        let text = tb
            .execute(&call("read_file", json!({"path": 42})), &cancel)
            .await;
        assert!(
            text.starts_with("error: invalid arguments for read_file"),
            "{text}"
        );
        let text = tb
            .execute(&call("write_file", json!("nonsense")), &cancel)
            .await;
        assert!(text.starts_with("error: invalid arguments"), "{text}");
        // Arguments sent as a JSON string still work.
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        let text = tb
            .execute(&call("read_file", json!("{\"path\":\"a.txt\"}")), &cancel)
            .await;
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
        let work =
            |stuck: std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>| -> Work {
                Box::new(move || {
                    let _ = stuck.lock().map(|rx| rx.recv());
                    Ok("finished".into())
                })
            };
        let cancel = CancellationToken::new();
        let started = std::time::Instant::now();
        let out = blocking(
            "read_file",
            work(stuck.clone()),
            &cancel,
            Duration::from_millis(200),
        )
        .await;
        assert!(
            matches!(
                &out,
                Err(ToolError::Deadline {
                    tool: "read_file",
                    ..
                })
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
        let out = blocking(
            "search_text",
            work(stuck.clone()),
            &cancel,
            Duration::from_secs(3600),
        )
        .await;
        assert!(matches!(out, Err(ToolError::Cancelled)), "{out:?}");
        // Let the stuck threads go, so the runtime can stop.
        let _ = release.send(());
        let _ = release.send(());
    }
}
