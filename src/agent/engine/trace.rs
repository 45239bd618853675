//! The task's `invoke_agent` span (gen-ai-agent-spans.md): started when the runner takes the
//! task, as a **child** of the span of the request that queued it (the carrier stored with the
//! task), so the caller's trace runs on through the queue — on whichever instance runs it. A
//! child rather than a link: the issue asks for one trace from the request to every model and
//! tool call, and a linked span would start a trace of its own that a backend shows apart
//! (the queue wait is then the gap between the server span's end and this span's start).
//! Every `chat` and `execute_tool` span of the task is created inside it.

use tracing::Span;

use crate::task::Task;
use crate::telemetry::context::continue_trace;
use crate::telemetry::spans::{self, InvokeAgentSpan};

/// The span of `task`, run with `model`; disabled, with nothing prepared, when export is off.
pub(crate) fn agent_span(model: &str, task: &Task) -> Span {
    if !spans::export_enabled() {
        return Span::none();
    }
    let task_id = task.id.to_string();
    let session_id = task.session_id.to_string();
    let span = InvokeAgentSpan::new(model)
        .with_task_id(&task_id)
        .with_session_id(&session_id)
        .start();
    if let Some(carrier) = &task.trace {
        continue_trace(&span, carrier);
    }
    span
}

/// The task's token totals, and its error class when it failed.
pub(crate) fn record_outcome(span: &Span, task: &Task, error: Option<&'static str>) {
    if span.is_disabled() {
        return;
    }
    spans::record_usage(span, task.tokens.input, task.tokens.output);
    if let Some(kind) = error {
        spans::record_error(span, kind, None);
    }
}
