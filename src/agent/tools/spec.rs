//! What a tool is ([`ToolSpec`]: its kind, the parameters and description the model is shown,
//! its handler) and how its calls are run ([`ToolHandler`], [`BlockingTool`]); the tools
//! themselves are listed in the registry.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{CallError, ToolContext, ToolError, ToolOutput};
use ParamType::{Boolean, Integer, Text, Texts};

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
pub(super) const fn required(
    name: &'static str,
    ty: ParamType,
    description: &'static str,
) -> Param {
    Param {
        name,
        ty,
        description,
        required: true,
    }
}

/// An argument the call may leave out.
pub(super) const fn optional(
    name: &'static str,
    ty: ParamType,
    description: &'static str,
) -> Param {
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
            ToolKind::Run => {
                let programs = if settings.commands.allow.is_empty() {
                    "Any program on PATH may run, e.g. the project's tests.".to_owned()
                } else {
                    format!("Allowed programs: {}.", settings.commands.allow.join(", "))
                };
                let sandbox = if settings.commands.landlock.is_some() {
                    " It runs sandboxed: it may write only inside the workspace and $TMPDIR, \
                     and has no network."
                } else {
                    ""
                };
                format!("{} {programs}{sandbox}", self.description)
            }
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

/// Some models send the arguments object as a JSON string; accept both.
pub(crate) fn parse_arguments(args: &Value) -> Value {
    match args {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    }
}
