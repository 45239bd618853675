//! Steering: what the tool loop does to keep a small model on track, as one policy object the
//! loop asks at defined points of a step. The loop itself has no model-specific branches.
//!
//! `agent.steering` picks the policy ([`SteeringMode`]): `small` turns every rule on, `off`
//! none (the model's replies pass through unchanged: its own calls run, its answer is the
//! answer), and `auto` decides per model from `/api/show` ([`Policy::for_model`]): `small`
//! below 7B parameters, `off` from 7B.
//!
//! Each rule is a named unit (see [`rules`]) built fresh for each step, so what it remembers
//! ("told once already") is scoped to that step. The loop asks the policy at these points:
//!
//! | point | what a rule may do | rules |
//! |---|---|---|
//! | before the first call | run the checks first, read the files the request (or a failing check) names | `read-first` |
//! | a reply arrived | read calls written as text, write the whole file asked for, make the edit a reply describes, clean echoed markup and the loop's own words, ask again | `text-calls`, `broken-call`, `whole-file`, `described-edit`, `described-calls`, `markup`, `echo` |
//! | an empty reply | ask for the answer (without tools once tools ran; before, tools offered) | `empty-answer` |
//! | before the answer is taken | ask again instead (the file to change, whole; make the held write, do not guess, make the change asked for, reading the file it needs for it, answer rather than describe the tools) or end the step | `whole-file`, `described-calls`, `held-writes`, `not-a-guess`, `change-reminder`, `answer-not-tools` |
//! | before a reply's calls run | hold back a write made before the read it needs | `held-writes` |
//! | a call is about to run | answer a repeated call from its earlier result | `repeats` |
//! | a call's result | make another call instead (the look-alike of a missing file, the search in any case) | `look-alike-read`, `case-fold-search` |
//! | after a round of results | a message to follow them | `held-writes`, `repeats`, `results-framing` |
//! | the checks failed after a change | ask for the changed file whole with their output | `whole-file` |
//!
//! What holds under every policy is the loop's, not steering's: a reply that only some of
//! whose calls failed still counts; an answer given when every call of the step failed is no
//! result; a task asked to change the workspace is judged by the workspace.

mod edits;
#[cfg(test)]
pub(crate) mod generated_text;
mod memory;
#[cfg(test)]
mod props;
pub mod rules;
pub(crate) mod text;
mod whole_file;

use crate::agent::tools::{ToolError, ToolKind, ToolOutput, Toolbox};
use crate::ollama::{ShowResponse, ToolCall};
pub(crate) use text::echo as echo_request;
pub use text::{calls_in_text, clean_answer};

/// `agent.steering`, a configuration value (it lives with the configuration).
pub use crate::config::SteeringMode;

/// Models with fewer parameters than this get the `small` policy under `auto`.
pub const SMALL_BELOW_PARAMETERS: u64 = 7_000_000_000;

/// The policy in force for a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Small,
    Off,
}

impl Policy {
    /// The policy `mode` means for the model `show` describes, and why (for the start-up line
    /// and `check-config`).
    pub fn for_model(mode: SteeringMode, show: &ShowResponse) -> (Policy, String) {
        let size = show.parameter_count();
        let shown = size.map_or_else(|| "size unknown".to_owned(), describe_count);
        match mode {
            SteeringMode::Small => (Policy::Small, "small (agent.steering: small)".into()),
            SteeringMode::Files => (
                Policy::Small,
                "files (agent.steering: files; the small rules where the files do not fit)".into(),
            ),
            SteeringMode::Off => (Policy::Off, "off (agent.steering: off)".into()),
            SteeringMode::Auto => match size {
                Some(n) if n < SMALL_BELOW_PARAMETERS => (
                    Policy::Small,
                    format!(
                        "files (auto: {shown}, below 7B; the small rules where the files do not \
                         fit)"
                    ),
                ),
                Some(_) => (Policy::Off, format!("off (auto: {shown}, 7B or more)")),
                None => (Policy::Off, format!("off (auto: {shown})")),
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Small => "small",
            Policy::Off => "off",
        }
    }
}

/// `8030261248` → `8.0B parameters`.
fn describe_count(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.1}B parameters", n as f64 / 1e9)
    } else {
        format!("{}M parameters", n / 1_000_000)
    }
}

/// One reply of the model as the loop reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Reply {
    pub text: String,
    pub calls: Vec<ToolCall>,
}

/// A call that ran in this step, and how it went.
#[derive(Clone, Debug)]
pub(crate) struct Ran {
    pub call: ToolCall,
    pub ok: bool,
    pub text: String,
}

/// What the loop knows about the step so far; the rules read it.
pub(crate) struct Facts<'a> {
    pub request: &'a str,
    pub toolbox: &'a Toolbox,
    /// Every call that ran in this step, in order.
    pub ran: &'a [Ran],
    /// The calls of the last round all failed.
    pub last_round_failed: bool,
    /// The messages the loop itself sent in this step (framing, reminders).
    pub ours: &'a [String],
    /// The request asks for the workspace to change, and whether anything changed yet (in
    /// the whole task).
    pub asks_for_change: bool,
    pub changed: bool,
    /// This step's answer is the task's answer (an unplanned task, or a plan's last step).
    pub final_step: bool,
    /// Model calls made so far in this step.
    pub calls: usize,
    /// The task has checks to run: `agent.checks`, or the workspace's own test command.
    pub checks: bool,
    /// What is not done yet — writes the model tried that did not take — when a rule asked
    /// for it ([`Steering::wants_unmet`]) before the answer; empty otherwise.
    pub unmet: &'a [Unmet],
}

/// A change the model tried that the workspace does not show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unmet {
    /// What is wrong, as a line for the model and the result.
    pub line: String,
    /// The files where it does not hold.
    pub files: Vec<String>,
}

impl Facts<'_> {
    pub fn tools_ran(&self) -> bool {
        !self.ran.is_empty()
    }

    pub fn any_succeeded(&self) -> bool {
        self.ran.iter().any(|r| r.ok)
    }

    pub fn offered(&self) -> Vec<&'static str> {
        self.toolbox.enabled()
    }
}

/// What a rule decides instead of letting the loop go on.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Leave the reply out of the conversation and ask the model again with `message`; with
    /// `tools: false` the next call offers none (the model is to answer).
    Nudge { message: String, tools: bool },
    /// Take the reply as this call, made on the model's behalf (a read: it changes nothing),
    /// and follow its result with `then` instead of the round's usual message.
    Call { call: ToolCall, then: String },
    /// End the step.
    Stop(Stop),
}

/// Why a rule ended a step.
#[derive(Debug, thiserror::Error)]
pub enum Stop {
    #[error(
        "the model described using a tool instead of calling it, also when told to call it \
         ({calls} model calls, no tool ran); try a larger model (ollama.model) or a more \
         specific request"
    )]
    DescribedOnly { calls: usize },
    #[error(
        "the model answered without making the {tools} call it had made too early (in the \
         same reply as the read it needed) and was asked to make again; nothing was written. \
         Try a larger model (ollama.model) or ask for the read and the write in two requests"
    )]
    WriteNotMade { tools: String },
}

/// A call to make in place of one whose result a rule judges unhelpful.
#[derive(Clone, Debug)]
pub(crate) struct Instead {
    pub call: ToolCall,
    /// Put before the other call's result, saying what was done.
    pub note: String,
}

/// A message to send after a round of results.
#[derive(Clone, Debug)]
pub(crate) struct FollowUp {
    pub message: String,
    /// The next call offers no tools (the model is to answer).
    pub withdraw_tools: bool,
}

/// One rule: a named unit asked at the points of the step it cares about (see the module's
/// table). Every method has a default that does nothing.
pub(crate) trait Rule: Send {
    fn name(&self) -> &'static str;

    /// Whether the rule reads [`Facts::unmet`] before the answer (only then is it found).
    fn wants_unmet(&self) -> bool {
        false
    }

    /// Before the step's first call: whether the checks should run first, to show the model
    /// what fails.
    fn checks_first(&self, _facts: &Facts) -> bool {
        false
    }

    /// Before the step's first call (after the checks, if they ran first, with their output):
    /// reads to make on the model's behalf.
    fn first_reads(&mut self, _facts: &Facts, _checks: Option<&str>) -> Vec<ToolCall> {
        Vec::new()
    }

    /// A reply arrived (its calls, or its text when it has none).
    fn read_reply(&mut self, _reply: &mut Reply, _facts: &Facts) -> Option<Verdict> {
        None
    }

    /// The reply had neither calls nor text.
    fn on_empty(&mut self, _facts: &Facts) -> Option<Verdict> {
        None
    }

    /// The reply's text is about to be taken as the answer.
    fn before_answer(&mut self, _answer: &str, _facts: &Facts) -> Option<Verdict> {
        None
    }

    /// A reply's calls are about to run.
    fn before_calls(&mut self, _calls: &mut Vec<ToolCall>, _facts: &Facts) {}

    /// `call` is about to run; `lone` when it is its reply's only call.
    fn recall(&mut self, _call: &ToolCall, _lone: bool) -> Option<String> {
        None
    }

    /// `call` ran with `result`.
    fn instead(
        &mut self,
        _call: &ToolCall,
        _result: &Result<ToolOutput, ToolError>,
        _facts: &Facts,
    ) -> Option<Instead> {
        None
    }

    /// `call` of `kind` ran with the text the model was sent (not for an answer from memory).
    fn after_call(&mut self, _call: &ToolCall, _kind: ToolKind, _text: &str) {}

    /// A round of calls ended; `all_failed` when every call of it failed.
    fn after_round(&mut self, _all_failed: bool, _facts: &Facts) -> Option<FollowUp> {
        None
    }

    /// The checks failed after the model's change and `feedback` (their output) is to go back
    /// to it: the message to send instead, which keeps what `feedback` says.
    fn after_failed_checks(&mut self, _feedback: &str, _facts: &Facts) -> Option<String> {
        None
    }
}

/// The policy of one step: its rules, asked in order; the first that decides wins.
pub(crate) struct Steering {
    rules: Vec<Box<dyn Rule>>,
}

impl std::fmt::Debug for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.rules.iter().map(|r| r.name()))
            .finish()
    }
}

impl Steering {
    /// Fresh rules of `policy` for one step.
    pub fn for_step(policy: Policy) -> Steering {
        Steering {
            rules: match policy {
                Policy::Off => Vec::new(),
                Policy::Small => rules::small(),
            },
        }
    }

    /// The names of the rules in force, in the order they are asked.
    pub fn names(&self) -> Vec<&'static str> {
        self.rules.iter().map(|r| r.name()).collect()
    }

    pub fn wants_unmet(&self) -> bool {
        self.rules.iter().any(|r| r.wants_unmet())
    }

    pub fn checks_first(&self, facts: &Facts) -> bool {
        self.rules.iter().any(|r| r.checks_first(facts))
    }

    pub fn first_reads(&mut self, facts: &Facts, checks: Option<&str>) -> Vec<ToolCall> {
        self.rules
            .iter_mut()
            .flat_map(|r| r.first_reads(facts, checks))
            .collect()
    }

    pub fn read_reply(&mut self, reply: &mut Reply, facts: &Facts) -> Option<Verdict> {
        self.rules
            .iter_mut()
            .find_map(|r| r.read_reply(reply, facts))
    }

    pub fn on_empty(&mut self, facts: &Facts) -> Option<Verdict> {
        self.rules.iter_mut().find_map(|r| r.on_empty(facts))
    }

    pub fn before_answer(&mut self, answer: &str, facts: &Facts) -> Option<Verdict> {
        self.rules
            .iter_mut()
            .find_map(|r| r.before_answer(answer, facts))
    }

    pub fn before_calls(&mut self, calls: &mut Vec<ToolCall>, facts: &Facts) {
        for rule in &mut self.rules {
            rule.before_calls(calls, facts);
        }
    }

    pub fn recall(&mut self, call: &ToolCall, lone: bool) -> Option<String> {
        self.rules.iter_mut().find_map(|r| r.recall(call, lone))
    }

    pub fn instead(
        &mut self,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolError>,
        facts: &Facts,
    ) -> Option<Instead> {
        self.rules
            .iter_mut()
            .find_map(|r| r.instead(call, result, facts))
    }

    pub fn after_call(&mut self, call: &ToolCall, kind: ToolKind, text: &str) {
        for rule in &mut self.rules {
            rule.after_call(call, kind, text);
        }
    }

    pub fn after_failed_checks(&mut self, feedback: &str, facts: &Facts) -> Option<String> {
        self.rules
            .iter_mut()
            .find_map(|r| r.after_failed_checks(feedback, facts))
    }

    pub fn after_round(&mut self, all_failed: bool, facts: &Facts) -> Option<FollowUp> {
        self.rules
            .iter_mut()
            .find_map(|r| r.after_round(all_failed, facts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn show(count: Option<u64>, size: Option<&str>) -> ShowResponse {
        let mut info = serde_json::Map::new();
        if let Some(n) = count {
            info.insert("general.parameter_count".into(), json!(n));
        }
        serde_json::from_value(json!({
            "details": {"parameter_size": size},
            "model_info": info,
        }))
        .unwrap_or_default()
    }

    #[test]
    fn auto_picks_files_below_seven_billion_and_off_from_there() {
        for (name, mode, count, size, wanted) in [
            (
                "1.8B by count",
                SteeringMode::Auto,
                Some(1_777_088_000),
                None,
                Policy::Small,
            ),
            (
                "1.5B by label",
                SteeringMode::Auto,
                None,
                Some("1.5B"),
                Policy::Small,
            ),
            (
                "270M by label",
                SteeringMode::Auto,
                None,
                Some("270M"),
                Policy::Small,
            ),
            (
                "8B by count",
                SteeringMode::Auto,
                Some(8_030_261_248),
                None,
                Policy::Off,
            ),
            (
                "120B by label",
                SteeringMode::Auto,
                None,
                Some("120B"),
                Policy::Off,
            ),
            ("size unknown", SteeringMode::Auto, None, None, Policy::Off),
            (
                "small forced",
                SteeringMode::Small,
                Some(70_000_000_000),
                None,
                Policy::Small,
            ),
            (
                "off forced",
                SteeringMode::Off,
                Some(500_000_000),
                None,
                Policy::Off,
            ),
        ] {
            let got = Policy::for_model(mode, &show(count, size)).0;
            assert_eq!(got, wanted, "{name}");
        }
        assert_eq!(
            Policy::for_model(SteeringMode::Auto, &show(Some(1_777_088_000), None)).1,
            "files (auto: 1.8B parameters, below 7B; the small rules where the files do not fit)"
        );
        assert_eq!(
            Policy::for_model(SteeringMode::Files, &show(Some(70_000_000_000), None)).0,
            Policy::Small
        );
    }

    #[test]
    fn off_asks_no_rule_and_small_asks_them_all() {
        assert!(Steering::for_step(Policy::Off).names().is_empty());
        assert_eq!(
            Steering::for_step(Policy::Small).names(),
            [
                "read-first",
                "text-calls",
                "broken-call",
                "whole-file",
                "described-edit",
                "described-calls",
                "markup",
                "echo",
                "held-writes",
                "empty-answer",
                "not-a-guess",
                "change-reminder",
                "answer-not-tools",
                "repeats",
                "look-alike-read",
                "case-fold-search",
                "results-framing",
            ]
        );
    }
}
