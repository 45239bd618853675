//! The `execute_tool {gen_ai.tool.name}` span of one tool call (gen-ai-spans.md "Execute
//! tool"), a child of the task's `invoke_agent` span. Only the tool's name (one of ours, or
//! `_OTHER` for a name the model made up), the model's call id and the error class are
//! recorded; the arguments and the output only with content capture on.

use tracing::Span;

use super::{CallError, ToolError, ToolOutput};
use crate::ollama::ToolCall;
use crate::telemetry::semconv::{attr, value};
use crate::telemetry::spans::{self, ExecuteToolSpan};

/// The span of `call` to the tool named `tool` (`None`: not a tool of the box). Disabled, with
/// nothing prepared, when export is off.
pub(super) fn tool_span(tool: Option<&'static str>, call: &ToolCall) -> Span {
    if !spans::export_enabled() {
        return Span::none();
    }
    let mut builder = ExecuteToolSpan::new(tool.unwrap_or(value::OTHER));
    if let Some(id) = call.id.as_deref() {
        builder = builder.with_call_id(id);
    }
    let span = builder.start();
    if spans::content_capture_enabled() {
        let arguments = call.function.arguments.to_string();
        spans::record_content(&span, attr::GEN_AI_TOOL_CALL_ARGUMENTS, &arguments);
    }
    span
}

/// Records how the call ended: its error class, or (content capture on) its output.
pub(super) fn record_outcome(span: &Span, outcome: &Result<ToolOutput, CallError>) {
    match outcome {
        Ok(output) => spans::record_content(span, attr::GEN_AI_TOOL_CALL_RESULT, &output.text),
        Err(e) => spans::record_error(span, error_type(e), None),
    }
}

/// A short, stable class of the failure: never its message, which quotes paths and output.
fn error_type(e: &CallError) -> &'static str {
    match e {
        CallError::Cancelled => "cancelled",
        CallError::RespondToModel(e) => match e {
            ToolError::Unknown { .. } => "unknown_tool",
            ToolError::Arguments { .. } => "invalid_arguments",
            ToolError::Path(_) => "path",
            ToolError::NotFound { .. } => "not_found",
            ToolError::NotRead { .. } => "not_read",
            ToolError::ChangedSinceRead { .. } => "changed_since_read",
            ToolError::Refused(_) => "refused",
            ToolError::Io(_) => "io",
            ToolError::Deadline { .. } => "deadline",
        },
    }
}

/// The span of a tool run the engine makes itself, not the model (a check run): the same
/// `execute_tool {name}` span, with no call id.
pub(crate) fn engine_tool_span(tool: &'static str) -> Span {
    if !spans::export_enabled() {
        return Span::none();
    }
    ExecuteToolSpan::new(tool).start()
}

/// Records how an engine's own run ended: its error class, if it failed to run.
pub(crate) fn record_engine_outcome(span: &Span, outcome: Result<(), &CallError>) {
    if let Err(e) = outcome {
        spans::record_error(span, error_type(e), None);
    }
}
