//! The approval gate: asked before each tool call runs, it applies `agent.approvals`.
//!
//! `allow` runs the call; `deny` refuses it at once; `ask` puts one input request on the
//! task (a key never reused within the task, naming the tool and what it would do: the
//! command line, or the file with a short diff) and waits, with the task keeping its running
//! slot, for the answer, a timeout or a cancel. The answer is read from the store
//! ([`TaskStore::input_answer`](crate::store::TaskStore::input_answer)), where whichever
//! instance the client reached recorded it; the gate wakes on every task-change signal (a
//! local answer, or a shared store's `changed:` announcement) and polls as a backstop.
//! `accept` runs the call; `decline`, `cancel` (a client whose host has no way to ask answers
//! that) and the timeout refuse it, and the model is told why, so it can go another way. A
//! cancel of the task while it waits cancels the task. A task queued by a client that cannot
//! be asked (no Tasks extension with form elicitation, no form elicitation for MRTR, no
//! `elicitation` at a 2025 stdio `initialize`) has every `ask` refused at once, with the
//! policy key that would let it run. Every decision but `allow` also goes to the
//! [`DecisionLog`] (the audit log) as an [`ApprovalEvent`].
//!
//! A restart while a task waits never runs the action: the recovered task ends `failed` as
//! interrupted (see [`crate::store::fail_interrupted`]); the request is not asked again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::agent::engine::step_event::StepEvent;
use crate::agent::tools::names::{DELETE_FILE, EDIT_FILE, RUN_COMMAND, SEARCH_TEXT, WRITE_FILE};
use crate::agent::tools::{Toolbox, parse_arguments};
use crate::config::{Approval, ApprovalsConfig};
use crate::ollama::ToolCall;
use crate::store::TaskStore;
use crate::task::input::{
    Action, Answer, AnswerPath, ApprovalEvent, Decision, DecisionLog, InputRequest,
};

/// How often a waiting call looks for its answer when no change signal came (the backstop
/// for a missed announcement).
const ANSWER_POLL: Duration = Duration::from_millis(500);
/// Most lines and characters of the diff shown with a file change.
const MAX_DIFF_LINES: usize = 60;
const MAX_DIFF_CHARS: usize = 4000;
/// Most bytes of the current file read to diff against.
const MAX_DIFF_SOURCE: u64 = 256 * 1024;

/// What the gate decided for one call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    Run,
    /// Not run; the model is sent this (as a tool error).
    Refuse(String),
    /// The task was cancelled while the call waited.
    Cancelled,
}

/// The gate of one task.
#[derive(Debug)]
pub(crate) struct ApprovalGate {
    policy: ApprovalsConfig,
    store: Arc<dyn TaskStore>,
    changes: watch::Receiver<u64>,
    task: Uuid,
    path: Option<AnswerPath>,
    asked: AtomicU32,
    /// Where each decision is recorded besides the task (the audit log).
    decisions: Option<Arc<dyn DecisionLog>>,
}

impl ApprovalGate {
    pub fn new(
        policy: ApprovalsConfig,
        store: Arc<dyn TaskStore>,
        changes: watch::Receiver<u64>,
        task: Uuid,
        path: Option<AnswerPath>,
    ) -> Self {
        Self {
            policy,
            store,
            changes,
            task,
            path,
            asked: AtomicU32::new(0),
            decisions: None,
        }
    }

    /// Sends every decision to `decisions` too (the audit log).
    pub fn with_decision_log(mut self, decisions: Option<Arc<dyn DecisionLog>>) -> Self {
        self.decisions = decisions;
        self
    }

    fn log(&self, event: ApprovalEvent) {
        if let Some(log) = &self.decisions {
            log.record(&event);
        }
    }

    /// Records a refusal nobody was asked for (`deny`, or `refused`: no path to ask).
    fn refused_unasked(&self, tool: &str, decision: &'static str, why: String) -> Gate {
        self.log(ApprovalEvent {
            task_id: self.task,
            key: None,
            tool: tool.to_owned(),
            decision,
            by: None,
        });
        Gate::Refuse(why)
    }

    /// Whether `call` would run without asking anyone (the policy allows it): a call the
    /// steering policy makes in another's place runs only then.
    pub fn runs_unasked(&self, call: &ToolCall) -> bool {
        let args = parse_arguments(&call.function.arguments);
        let argv: Option<Vec<String>> = args["argv"]
            .as_array()
            .and_then(|argv| argv.iter().map(|a| a.as_str().map(str::to_owned)).collect());
        self.policy.decide(&call.function.name, argv.as_deref()) == Approval::Allow
    }

    /// Applies the policy to `call` before it runs (in step `step`, whose events get the
    /// question and its decision).
    pub async fn check(
        &self,
        call: &ToolCall,
        toolbox: &Toolbox,
        step: usize,
        events: &UnboundedSender<StepEvent>,
        cancel: &CancellationToken,
    ) -> Gate {
        let tool = call.function.name.as_str();
        if toolbox.get(tool).is_none() {
            // An unknown or disabled tool is refused by the toolbox itself.
            return Gate::Run;
        }
        let args = parse_arguments(&call.function.arguments);
        let argv: Option<Vec<String>> = args["argv"]
            .as_array()
            .and_then(|argv| argv.iter().map(|a| a.as_str().map(str::to_owned)).collect());
        if tool == RUN_COMMAND && argv.is_none() {
            // Arguments run_command cannot run: its own check refuses them.
            return Gate::Run;
        }
        let summary = summary(tool, &args, argv.as_deref());
        match self.policy.decide(tool, argv.as_deref()) {
            Approval::Allow => Gate::Run,
            Approval::Deny => self.refused_unasked(
                tool,
                "deny",
                format!(
                    "not run: {tool} ({summary}) is denied by the server's policy ({}); do not try \
                 it again, go another way, or say in your answer what would be needed",
                    policy_key(tool)
                ),
            ),
            Approval::Ask if self.path.is_none() => self.refused_unasked(
                tool,
                "refused",
                format!(
                    "not run: {tool} ({summary}) needs a person's approval ({}: ask), and the \
                 client that queued this task cannot be asked (it did not declare the Tasks \
                 extension io.modelcontextprotocol/tasks with form elicitation, nor form \
                 elicitation for agent_status, nor elicitation at a 2025 initialize over \
                 stdio); the server's \
                 operator can let it run without asking by setting {} to allow; do not try it \
                 again, go another way or say in your answer what would be needed",
                    policy_key(tool),
                    allow_key(tool)
                ),
            ),
            Approval::Ask => {
                let n = self.asked.fetch_add(1, Ordering::Relaxed) + 1;
                let request = InputRequest {
                    key: format!("approval-{n}"),
                    tool: tool.to_owned(),
                    summary,
                    detail: detail(tool, &args, toolbox).await,
                };
                self.ask(request, step, events, cancel).await
            }
        }
    }

    async fn ask(
        &self,
        request: InputRequest,
        step: usize,
        events: &UnboundedSender<StepEvent>,
        cancel: &CancellationToken,
    ) -> Gate {
        tracing::info!(
            task_id = %self.task,
            key = %request.key,
            tool = %request.tool,
            "waiting for approval"
        );
        let _ = events.send(StepEvent::Asking {
            step,
            request: request.clone(),
        });
        let answer = match self.wait(&request.key, cancel).await {
            Some(answer) => answer,
            None => {
                // The question goes with the task (its terminal save clears what waits).
                tracing::info!(task_id = %self.task, key = %request.key, "cancelled while waiting for approval");
                return Gate::Cancelled;
            }
        };
        let decision = Decision { request, answer };
        tracing::info!(
            target: "agent_mcp::approvals",
            task_id = %self.task,
            key = %decision.request.key,
            tool = %decision.request.tool,
            action = decision.answer.action.as_str(),
            by = decision.answer.by.as_deref().unwrap_or(""),
            "approval decided"
        );
        self.log(ApprovalEvent::decided(self.task, &decision));
        let _ = events.send(StepEvent::Decided {
            step,
            decision: decision.clone(),
        });
        let Decision { request, answer } = decision;
        let what = format!("{} ({})", request.tool, request.summary);
        let by = answer
            .by
            .as_deref()
            .map(|b| format!(" ({b})"))
            .unwrap_or_default();
        match answer.action {
            Action::Accept => Gate::Run,
            Action::Decline => Gate::Refuse(format!(
                "not run: the person asked{by} declined {what}; do not try it again in another \
                 form; go another way, or say in your answer what would be needed"
            )),
            Action::Cancel => Gate::Refuse(format!(
                "not run: the approval request for {what} was dismissed without a decision{by}; \
                 do not try it again; go another way, or say in your answer what would be needed"
            )),
            Action::Timeout => Gate::Refuse(format!(
                "not run: no decision on {what} came within {} (agent.approvals.timeout); do \
                 not try it again; go another way, or say in your answer what would be needed",
                humantime::format_duration(self.policy.timeout)
            )),
        }
    }

    /// The answer to `key`, or the timeout's; `None` when the task is cancelled first.
    async fn wait(&self, key: &str, cancel: &CancellationToken) -> Option<Answer> {
        let deadline = tokio::time::Instant::now() + self.policy.timeout;
        let mut changes = self.changes.clone();
        loop {
            match self.store.input_answer(self.task, key).await {
                Ok(Some(answer)) => return Some(answer),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(task_id = %self.task, error = %e, "cannot read the approval's answer; trying again");
                }
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                () = tokio::time::sleep_until(deadline) => break,
                changed = changes.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(ANSWER_POLL).await;
                    }
                }
                () = tokio::time::sleep(ANSWER_POLL) => {}
            }
        }
        // The timeout is recorded as the key's answer, so a late one is ignored everywhere;
        // one that came just before it wins.
        let timeout = Answer {
            action: Action::Timeout,
            by: None,
            at: SystemTime::now(),
        };
        match self.store.answer_input(self.task, key, &timeout).await {
            Ok(false) => match self.store.input_answer(self.task, key).await {
                Ok(Some(answer)) => Some(answer),
                _ => Some(timeout),
            },
            _ => Some(timeout),
        }
    }
}

/// The policy key that decided a tool's calls.
fn policy_key(tool: &str) -> String {
    // Deleting is writing: `delete_file` follows `write_file`'s policy.
    let tool = if tool == DELETE_FILE {
        WRITE_FILE
    } else {
        tool
    };
    format!("agent.approvals.{tool}")
}

/// The key that would let the call run without asking.
fn allow_key(tool: &str) -> String {
    if tool == RUN_COMMAND {
        "agent.approvals.run_command (or a pattern under agent.approvals.run_command.allow)".into()
    } else {
        policy_key(tool)
    }
}

/// What the call would do, on one line.
fn summary(tool: &str, args: &serde_json::Value, argv: Option<&[String]>) -> String {
    let text = match (tool, argv) {
        (RUN_COMMAND, Some(argv)) => {
            let line = argv
                .iter()
                .map(|a| {
                    if a.is_empty() || a.contains(char::is_whitespace) {
                        format!("{a:?}")
                    } else {
                        a.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ");
            match args["cwd"].as_str() {
                Some(cwd) if !cwd.is_empty() && cwd != "." => format!("{line} (in {cwd})"),
                _ => line,
            }
        }
        (SEARCH_TEXT, _) => args["pattern"].as_str().unwrap_or_default().to_owned(),
        _ => args["path"].as_str().unwrap_or(".").to_owned(),
    };
    crate::agent::engine::plan::one_line(&text)
}

/// A short unified diff for a file change; empty for other tools.
async fn detail(tool: &str, args: &serde_json::Value, toolbox: &Toolbox) -> String {
    let Some(path) = args["path"].as_str().map(str::to_owned) else {
        return String::new();
    };
    let (old, new) = match tool {
        WRITE_FILE => {
            let Some(content) = args["content"].as_str() else {
                return String::new();
            };
            let workspace = toolbox.workspace().clone();
            let read = path.clone();
            let old = tokio::task::spawn_blocking(move || current(&workspace, &read))
                .await
                .unwrap_or_default();
            (old, content.to_owned())
        }
        EDIT_FILE => match (args["old_text"].as_str(), args["new_text"].as_str()) {
            (Some(old), Some(new)) => (old.to_owned(), new.to_owned()),
            _ => return String::new(),
        },
        // What a delete loses, shown as the whole file removed.
        DELETE_FILE => {
            let workspace = toolbox.workspace().clone();
            let read = path.clone();
            let old = tokio::task::spawn_blocking(move || current(&workspace, &read))
                .await
                .unwrap_or_default();
            (old, String::new())
        }
        _ => return String::new(),
    };
    bounded_diff(&path, &old, &new)
}

/// The file's text now, if it is there and readable (empty otherwise: a new file).
fn current(workspace: &crate::agent::tools::Workspace, path: &str) -> String {
    use std::io::Read;
    let Ok(resolved) = workspace.existing(path) else {
        return String::new();
    };
    let Ok(file) = workspace.open_read(&resolved) else {
        return String::new();
    };
    let mut text = String::new();
    match file.take(MAX_DIFF_SOURCE).read_to_string(&mut text) {
        Ok(_) => text,
        Err(_) => String::new(),
    }
}

/// A unified diff of `old` → `new`, cut at [`MAX_DIFF_LINES`] lines and [`MAX_DIFF_CHARS`].
pub(crate) fn bounded_diff(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let mut out = String::new();
    for (n, line) in text.lines().enumerate() {
        if n >= MAX_DIFF_LINES || out.len() + line.len() + 1 > MAX_DIFF_CHARS {
            out.push_str("… (diff cut)\n");
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_is_short_and_bounded() {
        let d = bounded_diff("a.txt", "one\ntwo\nthree\n", "one\n2\nthree\n");
        assert!(d.starts_with("--- a/a.txt\n+++ b/a.txt\n"), "{d}");
        assert!(d.contains("-two\n+2\n"), "{d}");
        let long: String = (0..500).map(|i| format!("line {i} ✓\n")).collect();
        let d = bounded_diff("b.txt", "", &long);
        assert!(d.lines().count() <= MAX_DIFF_LINES + 1, "{d}");
        assert!(d.len() <= MAX_DIFF_CHARS + 20);
        assert!(d.ends_with("… (diff cut)\n"));
    }

    #[test]
    fn a_command_is_summed_up_on_one_line() {
        let args = serde_json::json!({"argv": ["cargo", "test", "a b"], "cwd": "sub"});
        let argv = vec!["cargo".into(), "test".into(), "a b".into()];
        assert_eq!(
            summary("run_command", &args, Some(&argv)),
            "cargo test \"a b\" (in sub)"
        );
        assert_eq!(
            summary("write_file", &serde_json::json!({"path": "x\ny"}), None),
            "x y"
        );
    }
}
