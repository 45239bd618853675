//! The task model and its state machine: [`Task`], [`TaskState`], [`Session`] and a session's
//! [`Turn`]s.
//!
//! It sits beneath both the agent (which runs tasks) and the store (which keeps them), in the
//! plugin crate, so the compiler keeps it from depending on either.

pub mod events;
pub mod input;

use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A span's trace context as the W3C strings (`traceparent`, `tracestate`, `baggage`), small
/// enough to store beside a task and serialisable (`{"traceparent": …, "tracestate": …,
/// "baggage": …}`, absent keys omitted).
///
/// Plain data here; the core builds one from a parsed context (the propagator's normalised
/// output, never a caller's raw text) and reads it back as a parent, which yields nothing
/// for a corrupted value (`agent_mcp::telemetry::context::TraceCarrierExt`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceCarrier {
    pub traceparent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baggage: Option<String>,
}

/// The six published task states (`docs/contract.md` §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Queued,
    Planning,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl TaskState {
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Planning => "planning",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tokens Ollama reported (`prompt_eval_count` in, `eval_count` out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
}

impl TokenUsage {
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    pub fn add(&mut self, input: u64, output: u64) {
        self.input = self.input.saturating_add(input);
        self.output = self.output.saturating_add(output);
    }
}

/// One agent task.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    pub id: Uuid,
    pub session_id: Uuid,
    /// The identity that created it; only that identity can see it.
    pub owner: Option<String>,
    pub request: String,
    pub temperature: Option<f64>,
    /// Images for the model, validated on the way in.
    pub images: Vec<TaskImage>,
    pub state: TaskState,
    pub steps_done: u32,
    pub steps_total: u32,
    /// What runs now (a step title, or `step: tool`); empty when nothing does.
    pub current_task: String,
    pub tokens: TokenUsage,
    pub critical_path_tokens: u64,
    /// The final answer, or why it failed.
    pub result: String,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
    /// The trace context of the request that queued it (its MCP server span), when export ran
    /// there: the runner continues that trace, on whichever instance takes the task. Written
    /// once with the task, never changed.
    pub trace: Option<TraceCarrier>,
    /// What the task asks its client (approvals) and what was decided; written by the runner.
    pub input: input::TaskInput,
}

impl Task {
    /// A new queued task.
    pub fn new(
        session_id: Uuid,
        owner: Option<String>,
        request: String,
        temperature: Option<f64>,
    ) -> Task {
        let now = SystemTime::now();
        Task {
            id: Uuid::new_v4(),
            session_id,
            owner,
            request,
            temperature,
            images: Vec::new(),
            state: TaskState::Queued,
            steps_done: 0,
            steps_total: 1,
            current_task: String::new(),
            tokens: TokenUsage::default(),
            critical_path_tokens: 0,
            result: String::new(),
            created_at: now,
            updated_at: now,
            trace: None,
            input: input::TaskInput::default(),
        }
    }

    /// Moves to `state`, unless the task is already terminal (a terminal state never changes).
    /// Returns whether it moved.
    pub fn transition(&mut self, state: TaskState) -> bool {
        if self.state.is_terminal() {
            return false;
        }
        self.state = state;
        self.updated_at = SystemTime::now();
        if state.is_terminal() {
            self.current_task.clear();
            // A finished task asks nothing more; what was decided stays in its record.
            self.input.pending.clear();
        }
        true
    }

    /// Ends the task as failed with a reason shown as its result.
    pub fn fail(&mut self, reason: impl Into<String>) -> bool {
        if self.transition(TaskState::Failed) {
            self.result = reason.into();
            true
        } else {
            false
        }
    }

    /// Is this task visible to `identity`?
    pub fn visible_to(&self, identity: Option<&str>) -> bool {
        self.owner.as_deref() == identity
    }
}

/// An image attached to a task, as the client sent it (standard base64, which is also what
/// Ollama takes, so it is never re-encoded).
///
/// The text is shared, not copied: the accepted task, the store's insert, the runner and every
/// Ollama request hold the same buffer (up to `mcp.images.max_bytes`, 5 MiB by default, each).
/// An `Arc<String>` rather than an `Arc<str>`, so taking over the client's `String` moves it
/// instead of copying it into a new allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskImage {
    pub mime_type: String,
    pub data_base64: Arc<String>,
    /// SHA-256 of the decoded bytes, when the image layer has already computed it; the store
    /// keys images by it and computes it only when it is missing.
    #[serde(skip)]
    pub sha256: Option<[u8; 32]>,
}

impl TaskImage {
    pub fn new(mime_type: impl Into<String>, data_base64: impl Into<String>) -> Self {
        Self {
            mime_type: mime_type.into(),
            data_base64: Arc::new(data_base64.into()),
            sha256: None,
        }
    }
}

/// A conversation: the tasks of one session see each other's turns.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub id: Uuid,
    pub owner: Option<String>,
    pub created_at: SystemTime,
}

impl Session {
    pub fn new(owner: Option<String>) -> Session {
        Session {
            id: Uuid::new_v4(),
            owner,
            created_at: SystemTime::now(),
        }
    }
}

/// Who spoke a turn of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnRole {
    User,
    Assistant,
}

/// One turn of a session's history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub role: TurnRole,
    pub content: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_never_change() {
        let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
        assert!(t.transition(TaskState::Running));
        assert!(t.transition(TaskState::Cancelled));
        assert!(!t.transition(TaskState::Completed));
        assert!(!t.fail("late"));
        assert_eq!(t.state, TaskState::Cancelled);
        assert_eq!(t.result, "");
    }
}
