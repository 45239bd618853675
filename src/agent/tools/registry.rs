//! The tool registry: one [`ToolSpec`] per tool, holding everything about it in one place: its
//! name, what it does to the workspace ([`ToolKind`]), the description and parameters the model
//! is shown, the argument shape named in errors, and its handler.
//!
//! Everything else asks the registry instead of keeping lists of names: the toolbox offers and
//! runs tools from it, steering asks a tool's kind (does it read, write or run?), the
//! configuration checks `agent.tools.disabled` against the same names
//! ([`crate::config::AGENT_TOOL_NAMES`]; a test holds them to [`TOOL_NAMES`]).
//!
//! ```
//! use agent_mcp::agent::tools::{ToolKind, spec};
//! assert_eq!(spec("write_file").map(|s| s.kind), Some(ToolKind::Write));
//! assert!(spec("format_disk").is_none());
//! ```

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use ParamType::{Boolean, Integer, Text, Texts};

use super::{CallError, ToolContext, ToolError, ToolOutput, command, edit, files, run};

/// What a tool does to the workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    /// Looks only: the same call with nothing changed in between returns the same result.
    Read,
    /// Changes files.
    Write,
    /// Runs a program, which may change anything the workspace allows.
    Run,
}

/// Everything about one tool.
pub struct ToolSpec {
    pub name: &'static str,
    pub kind: ToolKind,
    /// The arguments' shape, named in the error for arguments that do not fit it.
    pub expected: &'static str,
    /// The description the model is shown; a [`ToolKind::Run`] tool's goes on to name the
    /// programs the settings allow.
    pub description: &'static str,
    /// The arguments, in the order the model is shown them.
    pub params: &'static [Param],
    pub(super) handler: &'static (dyn ToolHandler + Sync),
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// One argument of a tool, as the model is shown it.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub ty: ParamType,
    pub description: &'static str,
    pub required: bool,
}

/// The JSON type of a [`Param`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// A string.
    Text,
    /// A whole number.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// An array of strings.
    Texts,
}

/// An argument the call must have.
const fn required(name: &'static str, ty: ParamType, description: &'static str) -> Param {
    Param {
        name,
        ty,
        description,
        required: true,
    }
}

/// An argument the call may leave out.
const fn optional(name: &'static str, ty: ParamType, description: &'static str) -> Param {
    Param {
        required: false,
        ..required(name, ty, description)
    }
}

impl Param {
    /// This argument's JSON schema.
    fn schema(&self) -> Value {
        let mut schema = match self.ty {
            Text => json!({"type": "string"}),
            Integer => json!({"type": "integer"}),
            Boolean => json!({"type": "boolean"}),
            Texts => json!({"type": "array", "items": {"type": "string"}}),
        };
        schema["description"] = self.description.into();
        schema
    }
}

impl ToolSpec {
    /// The Ollama `tools` entry of this tool.
    pub fn definition(&self, settings: &super::ToolSettings) -> Value {
        let properties: serde_json::Map<String, Value> = self
            .params
            .iter()
            .map(|p| (p.name.to_owned(), p.schema()))
            .collect();
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name)
            .collect();
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.describe(settings),
                "parameters": {"type": "object", "properties": properties, "required": required}
            }
        })
    }

    /// The description the model is shown, given the settings.
    fn describe(&self, settings: &super::ToolSettings) -> String {
        match self.kind {
            ToolKind::Run => format!(
                "{} Allowed programs: {}.",
                self.description,
                settings.commands.allow.join(", ")
            ),
            ToolKind::Read | ToolKind::Write => self.description.to_owned(),
        }
    }

    /// The arguments as `T`, or the error that says what was expected.
    pub(super) fn arguments<T: DeserializeOwned>(&self, args: &Value) -> Result<T, CallError> {
        serde_json::from_value(parse_arguments(args)).map_err(|e| {
            CallError::RespondToModel(ToolError::Arguments {
                tool: self.name,
                reason: e.to_string(),
                expected: self.expected,
            })
        })
    }
}

/// One call of a tool, as its handler gets it: the tool, the context it runs in, the call's
/// arguments and the token that cancels it.
pub(super) struct Invocation<'a> {
    pub spec: &'a ToolSpec,
    pub ctx: &'a ToolContext,
    pub args: &'a Value,
    pub cancel: &'a CancellationToken,
}

/// Runs one tool's calls.
#[async_trait]
pub(super) trait ToolHandler {
    async fn run(&self, call: Invocation<'_>) -> Result<ToolOutput, CallError>;
}

/// A tool whose work is blocking file-system work: [`run_blocking`](super::run_blocking) parses
/// its arguments, then runs [`BlockingTool::work`] on the blocking pool under the call's cancel
/// token and the tool deadline. Every such tool is a [`ToolHandler`] by that alone.
pub(super) trait BlockingTool {
    type Args: DeserializeOwned + Send + 'static;

    fn work(ctx: &ToolContext, args: Self::Args) -> Result<ToolOutput, CallError>;
}

#[async_trait]
impl<T: BlockingTool + Sync> ToolHandler for T {
    async fn run(&self, call: Invocation<'_>) -> Result<ToolOutput, CallError> {
        super::run_blocking(call, T::work).await
    }
}

/// The file a file tool reads or changes.
const FILE_PATH: Param = required("path", Text, "File relative to the workspace root");

/// Every tool, in the order they are offered.
pub const TOOLS: [ToolSpec; 6] = [
    ToolSpec {
        name: "list_dir",
        kind: ToolKind::Read,
        expected: files::LIST_DIR_EXPECTED,
        description: "List the entries of a folder of the workspace (folders end in /).",
        params: &[optional(
            "path",
            Text,
            "Folder relative to the workspace root; default \".\"",
        )],
        handler: &files::ListDir,
    },
    ToolSpec {
        name: "read_file",
        kind: ToolKind::Read,
        expected: files::READ_FILE_EXPECTED,
        description: "Read a text file of the workspace, optionally a window of its lines. \
                      Read a file before replacing or editing it.",
        params: &[
            FILE_PATH,
            optional("start_line", Integer, "First line to return, from 1"),
            optional("max_lines", Integer, "Most lines to return"),
        ],
        handler: &files::ReadFile,
    },
    ToolSpec {
        name: "search_text",
        kind: ToolKind::Read,
        expected: files::SEARCH_EXPECTED,
        description: "Find lines containing a literal string in the workspace's files (not a \
                      regex).",
        params: &[
            required("pattern", Text, "The exact text to find"),
            optional("path", Text, "Folder or file to search; default \".\""),
            optional("max_results", Integer, "Most matching lines; default 100"),
            optional(
                "ignore_case",
                Boolean,
                "Match regardless of case; default false",
            ),
        ],
        handler: &files::SearchText,
    },
    ToolSpec {
        name: "write_file",
        kind: ToolKind::Write,
        expected: edit::WRITE_FILE_EXPECTED,
        description: "Create a file of the workspace, or replace one you have read, with the \
                      given content.",
        params: &[
            FILE_PATH,
            required("content", Text, "The whole new content"),
        ],
        handler: &edit::WriteFile,
    },
    ToolSpec {
        name: "edit_file",
        kind: ToolKind::Write,
        expected: edit::EDIT_FILE_EXPECTED,
        description: "Replace an exact piece of text in a file of the workspace you have read.",
        params: &[
            FILE_PATH,
            required(
                "old_text",
                Text,
                "Text to replace, exactly as in the file (whitespace included)",
            ),
            required(
                "new_text",
                Text,
                "The replacement; empty deletes old_text (a whole line with its line end)",
            ),
            optional(
                "replace_all",
                Boolean,
                "Replace every occurrence; default: old_text must occur once",
            ),
        ],
        handler: &edit::EditFile,
    },
    ToolSpec {
        name: "run_command",
        kind: ToolKind::Run,
        expected: command::RUN_COMMAND_EXPECTED,
        description: "Run a program in the workspace without a shell (no pipes, globs or \
             redirection).",
        params: &[
            required(
                "argv",
                Texts,
                "Program and arguments, e.g. [\"cargo\", \"test\"]",
            ),
            optional(
                "cwd",
                Text,
                "Folder to run in, relative to the workspace root; default \".\"",
            ),
        ],
        handler: &run::RunCommand,
    },
];

/// Every tool name, in the order they are offered.
pub const TOOL_NAMES: [&str; TOOLS.len()] = {
    let mut names = [""; TOOLS.len()];
    let mut i = 0;
    while i < TOOLS.len() {
        names[i] = TOOLS[i].name;
        i += 1;
    }
    names
};

/// The tool called `name`.
pub fn spec(name: &str) -> Option<&'static ToolSpec> {
    static ALL: [ToolSpec; TOOLS.len()] = TOOLS;
    ALL.iter().find(|spec| spec.name == name)
}

/// Some models send the arguments object as a JSON string; accept both.
pub(crate) fn parse_arguments(args: &Value) -> Value {
    match args {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_defined_once_with_its_kind() {
        // The configuration validates `agent.tools.disabled` against its own list of names.
        assert_eq!(TOOL_NAMES, crate::config::AGENT_TOOL_NAMES);
        let kinds: Vec<ToolKind> = TOOLS.iter().map(|t| t.kind).collect();
        assert_eq!(
            kinds,
            [
                ToolKind::Read,
                ToolKind::Read,
                ToolKind::Read,
                ToolKind::Write,
                ToolKind::Write,
                ToolKind::Run
            ]
        );
        for name in TOOL_NAMES {
            assert_eq!(spec(name).map(|s| s.name), Some(name));
        }
    }

    #[test]
    fn a_definition_carries_the_schema_and_the_settings() {
        let mut settings = super::super::ToolSettings::from_config(&Default::default());
        settings.commands.allow = vec!["cargo".into()];
        let def = spec("run_command").map(|s| s.definition(&settings));
        let def = def.unwrap_or_default();
        assert_eq!(def["function"]["name"], "run_command");
        assert_eq!(def["function"]["parameters"]["required"], json!(["argv"]));
        assert!(
            def["function"]["description"]
                .as_str()
                .is_some_and(|d| d.contains("Allowed programs: cargo."))
        );
    }
}
