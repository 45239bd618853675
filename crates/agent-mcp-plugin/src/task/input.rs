//! A person in the loop: what a task asks its client before an action runs, and what was
//! decided. Plain data, kept with the task ([`Task::input`](super::Task::input)) so every reader
//! of the task (the Tasks extension's `tasks/get`, push, `agent_status`) sees the same thing.
//!
//! ```
//! use agent_mcp_plugin::task::input::{Action, InputRequest, TaskInput};
//! let mut input = TaskInput::default();
//! input.pending.push(InputRequest {
//!     key: "approval-1".into(),
//!     tool: "run_command".into(),
//!     summary: "cargo build".into(),
//!     detail: String::new(),
//! });
//! assert!(input.is_waiting());
//! assert_eq!(Action::from_wire("decline"), Some(Action::Decline));
//! ```

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// How the client that queued a task can answer an input request, decided from that request's
/// declared capabilities. `None` on a task: it can answer none, so an action that needs a
/// decision is refused at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerPath {
    /// 2026-07-28 with the Tasks extension and form elicitation: `inputRequests` on
    /// `tasks/get`, answered by `tasks/update`.
    TasksElicitation,
    /// 2026-07-28 with form elicitation but without the Tasks extension: `agent_status` on the
    /// waiting task answers with an `InputRequiredResult`, answered by its retry (MRTR).
    Mrtr,
    /// A 2025 session over stdio that declared `elicitation` at `initialize`: the transport
    /// sends a server→client `elicitation/create` request; its response is the answer.
    StdioElicitation,
}

/// One outstanding question: may this tool call run?
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRequest {
    /// Unique within the task's lifetime, never reused (`approval-1`, `approval-2`, …).
    pub key: String,
    /// The tool the model called.
    pub tool: String,
    /// What it would do, on one line: the command line, or the file.
    pub summary: String,
    /// More for the person deciding: a short unified diff for a file change (bounded).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// What was answered (the `action` of an `ElicitResult`), or that no answer came in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Accept,
    Decline,
    /// The client's host had no way to ask (ext-tasks answers `cancel` then), or the person
    /// dismissed the question: a refusal.
    Cancel,
    /// No answer within `agent.approvals.timeout`: a refusal.
    Timeout,
}

impl Action {
    /// An `ElicitResult.action` as sent (`accept`, `decline`, `cancel`); anything else is none.
    pub fn from_wire(action: &str) -> Option<Action> {
        match action {
            "accept" => Some(Action::Accept),
            "decline" => Some(Action::Decline),
            "cancel" => Some(Action::Cancel),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Decline => "decline",
            Action::Cancel => "cancel",
            Action::Timeout => "timeout",
        }
    }
}

/// An answer to one key, as a client sent it (or the timeout decided it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub action: Action,
    /// The identity that answered; `None` for an anonymous caller or the timeout.
    pub by: Option<String>,
    pub at: SystemTime,
}

/// A decided question, kept in the task's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub request: InputRequest,
    pub answer: Answer,
}

impl Decision {
    /// One line for the task's record: `approval-1 run_command (cargo build): decline by alice`.
    pub fn line(&self) -> String {
        let who = match (&self.answer.by, self.answer.action) {
            (_, Action::Timeout) => String::new(),
            (Some(by), _) => format!(" by {by}"),
            (None, _) => " by an anonymous caller".to_owned(),
        };
        format!(
            "{} {} ({}): {}{who}",
            self.request.key,
            self.request.tool,
            self.request.summary,
            self.answer.action.as_str()
        )
    }
}

/// What was decided about one tool call that needed a decision, as the audit log records it
/// (one `{"event":"approval",…}` line each): a person's answer, the timeout, or a refusal
/// without asking (the policy's `deny`, or a client that can answer no path). A call the
/// policy allows is not a decision and is not recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalEvent {
    pub task_id: uuid::Uuid,
    /// The input request's key; `None` when nobody was asked.
    pub key: Option<String>,
    pub tool: String,
    /// `accept`, `decline`, `cancel`, `timeout` ([`Action`]), or `deny` (the policy) and
    /// `refused` (the client that queued the task can be asked by no path).
    pub decision: &'static str,
    /// The identity that answered; `None` for an anonymous caller, the timeout and a refusal.
    pub by: Option<String>,
}

impl ApprovalEvent {
    /// The event of a decided question.
    pub fn decided(task_id: uuid::Uuid, decision: &Decision) -> Self {
        Self {
            task_id,
            key: Some(decision.request.key.clone()),
            tool: decision.request.tool.clone(),
            decision: decision.answer.action.as_str(),
            by: decision.answer.by.clone(),
        }
    }
}

/// Where the core sends each [`ApprovalEvent`]: the audit writer when `audit.enabled` (the
/// stack hands it to the core, which does not know the layers). Must not block: a decision
/// is recorded on the task's path.
pub trait DecisionLog: Send + Sync + std::fmt::Debug {
    fn record(&self, event: &ApprovalEvent);
}

/// The task's questions: how its client can answer, what waits now, what was decided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_path: Option<AnswerPath>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<InputRequest>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
}

impl InputRequest {
    /// The request as a form `elicitation/create` (2026-07-28 `ElicitRequestFormParams`:
    /// `mode`, `message`, a flat `requestedSchema`), as `inputRequests` carry it. The decision
    /// is the answer's `action`; the form asks for nothing else.
    pub fn elicitation(&self) -> serde_json::Value {
        let mut message = format!(
            "The agent asks to run {}: {}\nAccept to let it run; decline to refuse it (the \
             model is told and goes another way).",
            self.tool, self.summary
        );
        if !self.detail.is_empty() {
            message.push_str("\n\n");
            message.push_str(&self.detail);
        }
        serde_json::json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": message,
                "requestedSchema": {"type": "object", "properties": {}}
            }
        })
    }
}

impl TaskInput {
    /// Whether a question waits for its answer.
    pub fn is_waiting(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The outstanding request with this key.
    pub fn pending(&self, key: &str) -> Option<&InputRequest> {
        self.pending.iter().find(|r| r.key == key)
    }

    /// Whether nothing is worth storing (the column stays NULL).
    pub fn is_empty(&self) -> bool {
        self.answer_path.is_none() && self.pending.is_empty() && self.decisions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_says_who_decided() {
        let d = Decision {
            request: InputRequest {
                key: "approval-1".into(),
                tool: "run_command".into(),
                summary: "cargo build".into(),
                detail: String::new(),
            },
            answer: Answer {
                action: Action::Decline,
                by: Some("alice".into()),
                at: SystemTime::UNIX_EPOCH,
            },
        };
        assert_eq!(
            d.line(),
            "approval-1 run_command (cargo build): decline by alice"
        );
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["answer"]["action"], "decline");
        assert_eq!(serde_json::from_value::<Decision>(json).unwrap(), d);
    }
}
