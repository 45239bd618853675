//! One step: the tool-calling loop against `/api/chat`.
//!
//! The model gets the conversation (system prompt, session history, the request, and for a
//! planned step its instructions with its dependencies' results) and the workspace tools. Each
//! reply with tool calls is answered by running them and sending their results back as
//! `role: tool` messages; a reply without tool calls is the step's answer. What is done for a
//! weak model on the way is the step's [`Steering`] policy, asked at its points; the loop
//! itself holds, under every policy:
//!
//! - an empty reply gets one call asking for the answer, then fails the step;
//! - an answer given when every call of the step failed is not a result
//!   ([`StepError::NothingWorked`]);
//! - the checks (`agent.checks`, else the workspace's own test command) run once before the
//!   first call that may change the workspace, and again when the task's tools changed a file
//!   before the answer is taken; their failures go back to the model ([`crate::agent::judge::checks`]);
//! - a prompt Ollama refuses as longer than the context window has every older tool result
//!   compacted and is sent once more, then fails the step saying so;
//! - the conversation is compacted before it outgrows `num_ctx` ([`crate::agent::engine::context`]); every
//!   other call's prompt extends the previous one unchanged;
//! - `agent.max_iterations` bounds the model calls.
//!
//! A step reports what it does through [`StepEvent`]s; the runner owns the task and turns them
//! into saved progress.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentSettings;
use crate::agent::engine::approval::{ApprovalGate, Gate};
use crate::agent::engine::context::Window;
use crate::agent::engine::model::ModelProfile;
use crate::agent::engine::step_event::StepEvent;
use crate::agent::judge::checks::{self, CheckReport, Checks};
use crate::agent::steering::{Facts, Ran, Reply, Steering, Stop, Unmet, Verdict};
use crate::agent::tools::{CallError, ToolError, ToolKind, ToolOutput, Toolbox};
use crate::agent::worker::claim::TaskClaim;
use crate::ollama::{
    ChatOptions, ChatRequest, ChatResponse, Message, OllamaClient, OllamaError, ToolCall,
};

/// Tool calls executed from one reply; further calls in the same reply are refused.
const MAX_CALLS_PER_REPLY: usize = 16;

/// What every call of one task shares.
#[derive(Debug)]
pub(crate) struct Engine {
    pub ollama: OllamaClient,
    pub settings: AgentSettings,
    /// The steering policy, `num_ctx` and `think` for this model.
    pub model: ModelProfile,
    /// The task's temperature, else the configured one.
    pub temperature: Option<f64>,
    /// `None` when the model lacks the `tools` capability or every tool is disabled.
    pub toolbox: Option<Arc<Toolbox>>,
    /// The session's earlier turns.
    pub history: Vec<Message>,
    /// The task's request, with its images.
    pub request: Message,
    /// The request asks for the workspace to change: the model's reading of it, asked before
    /// the work (`reading`, or the `files` policy's); never under `off`.
    pub asks_for_change: bool,
    /// When the checks failed before the work and the model was asked before it: whether the
    /// request is to make them pass.
    pub fix_failing: Option<bool>,
    /// `agent.checks`, and how far they got in this task.
    pub checks: Checks,
    /// The rounds of being told a change the model tried did not take.
    pub expect_rounds: std::sync::Mutex<usize>,
    /// Asked before every model and tool call.
    pub claim: TaskClaim,
    /// `agent.approvals`, asked before every tool call.
    pub gate: ApprovalGate,
    /// The task runs under the `files` policy: its files and the model's reading of it.
    pub direct: Option<crate::agent::engine::files_task::Direct>,
}

impl Engine {
    /// `system`, the history and the request.
    pub fn conversation(&self, system: &str) -> Vec<Message> {
        let mut messages = Vec::with_capacity(self.history.len() + 3);
        if !system.is_empty() {
            messages.push(Message::system(system));
        }
        messages.extend(self.history.iter().cloned());
        messages.push(self.request.clone());
        messages
    }

    /// A chat request with the configured options; tools only if `with_tools`.
    pub fn chat_request(
        &self,
        messages: Vec<Message>,
        with_tools: bool,
        format: Option<Value>,
    ) -> ChatRequest {
        let tools = match (&self.toolbox, with_tools) {
            (Some(toolbox), true) => toolbox.definitions(),
            _ => Vec::new(),
        };
        ChatRequest {
            model: self.settings.ollama.model.clone(),
            messages,
            tools,
            format,
            options: ChatOptions {
                temperature: self.temperature,
                num_ctx: Some(self.model.num_ctx),
                ..ChatOptions::default()
            },
            keep_alive: self.settings.ollama.keep_alive.clone(),
            think: self.model.think.clone(),
        }
    }

    pub async fn chat(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, OllamaError> {
        // A claim that may be lost (a freeze, a partition) is checked before the call.
        if !self.claim.may_call(cancel).await {
            return Err(OllamaError::Cancelled);
        }
        // Progress is saved per call, not per streamed chunk.
        self.ollama.chat(request, cancel, &mut |_| {}).await
    }
}

/// Why a step ended without an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    #[error(transparent)]
    Ollama(OllamaError),
    #[error(
        "the model was still calling tools after agent.max_iterations ({0}) model calls; \
         raise agent.max_iterations or narrow the request"
    )]
    MaxIterations(usize),
    #[error(
        "the model gave no answer: its reply was empty or only tool markup, also when asked \
         again for the answer ({calls} model calls{}); try a larger model (ollama.model) or \
         a more specific request",
        if *tools_ran { ", tools ran" } else { "" }
    )]
    NoAnswer { tools_ran: bool, calls: usize },
    #[error(transparent)]
    Steering(Stop),
    #[error(
        "every tool call of the step failed ({failed} calls; the last: {last}), so the model's \
         answer rests on nothing it read or ran; it said: {answer}"
    )]
    NothingWorked {
        failed: usize,
        last: String,
        answer: String,
    },
    #[error("{}", checks_failed(.0))]
    ChecksFailed(CheckReport),
    #[error(
        "the request is not done: {}; the files changed are left as they are",
        .0.join("; ")
    )]
    NotDone(Vec<String>),
    #[error(
        "the conversation no longer fits the model's context window (num_ctx {num_ctx}, about \
         {estimate} tokens) even with older tool results compacted; raise ollama.num_ctx if the \
         model allows more, or split the request"
    )]
    ContextFull { num_ctx: u32, estimate: u64 },
    #[error(
        "Ollama refused the prompt as longer than the model's context window (num_ctx \
         {num_ctx}){}: {body}; raise ollama.num_ctx if the model allows more, or split the \
         request",
        if *compacted { ", also after older tool results were compacted and the call was \
         made again" } else { ", and there were no older tool results to compact" }
    )]
    ContextRefused {
        num_ctx: u32,
        compacted: bool,
        body: String,
    },
    #[error("cancelled")]
    Cancelled,
}

/// Why the checks fail the step: worse than at the baseline, or still failing.
fn checks_failed(report: &CheckReport) -> String {
    let why = if report.worse() {
        "the model's changes left the checks worse than they began"
    } else {
        "the checks still fail after the model's changes"
    };
    format!(
        "{why} ({}; {}); the files it changed are left as they are",
        report.line(),
        report.failures()
    )
}

impl From<OllamaError> for StepError {
    fn from(e: OllamaError) -> Self {
        match e {
            OllamaError::Cancelled => StepError::Cancelled,
            other => StepError::Ollama(other),
        }
    }
}

/// Asked once, under every policy, when a reply is empty.
const ANSWER_PLEASE: &str = "Your last reply was empty. Answer the request now, in plain words.";

/// What the loop keeps about its step.
struct Loop<'a> {
    engine: &'a Engine,
    toolbox: &'a Toolbox,
    final_step: bool,
    ran: Vec<Ran>,
    ours: Vec<String>,
    last_round_failed: bool,
    calls: usize,
    /// The changes the model tried that did not take, at the last answer, for a policy that
    /// reads them ([`Steering::wants_unmet`]).
    unmet: Vec<Unmet>,
    /// The task has checks to run: the operator's, or the workspace's own test command.
    checks: bool,
}

impl Loop<'_> {
    fn facts(&self) -> Facts<'_> {
        Facts {
            request: &self.engine.request.content,
            toolbox: self.toolbox,
            ran: &self.ran,
            last_round_failed: self.last_round_failed,
            ours: &self.ours,
            asks_for_change: self.engine.asks_for_change,
            changed: self.toolbox.ledger().changed_any(),
            final_step: self.final_step,
            calls: self.calls,
            checks: self.checks,
            unmet: &self.unmet,
        }
    }
}

/// Runs step `index` to its answer. `prompt` (the step's instructions and its dependencies'
/// results) follows the request; an unplanned step has none. `final_step`: this step's
/// answer is the task's (it is a leaf of the plan).
pub(crate) async fn run_step(
    engine: Arc<Engine>,
    index: usize,
    prompt: Option<String>,
    final_step: bool,
    events: UnboundedSender<StepEvent>,
    cancel: CancellationToken,
) -> Result<String, StepError> {
    let mut messages = engine.conversation(&engine.settings.agent.system_prompt);
    if let Some(prompt) = prompt {
        messages.push(Message::user(prompt));
    }
    let Some(toolbox) = engine.toolbox.clone() else {
        return plain_chat(&engine, index, messages, &events, &cancel).await;
    };
    let mut step = StepLoop::new(
        &engine, &toolbox, messages, final_step, index, &events, &cancel,
    );
    tracing::debug!(step = index, rules = ?step.steering.names(), "steering");
    step.before_work().await?;
    loop {
        let Some(reply) = step.call().await? else {
            continue;
        };
        match step.take(reply).await? {
            Next::Again => {}
            Next::Done(answer) => return Ok(answer),
            Next::Run { said, calls, then } => step.run_calls(said, calls, then).await?,
        }
    }
}

/// What a stage of the loop leaves it to do.
enum Next {
    /// Call the model again.
    Again,
    /// The step's answer.
    Done(String),
    /// Run `calls` (the reply's, with the text `said` beside them, or one call made on the
    /// model's behalf) and, after their results, say `then` (else the policy's follow-up).
    Run {
        said: String,
        calls: Vec<ToolCall>,
        then: Option<String>,
    },
}

impl Next {
    /// A call the policy makes in the reply's place, and what it says after its result.
    fn instead((call, then): (ToolCall, String)) -> Next {
        Next::Run {
            said: String::new(),
            calls: vec![call],
            then: Some(then),
        }
    }
}

/// One step's tool-calling loop. Its stages, in order, are the methods below, and the policy
/// ([`Steering`]) is asked at each:
///
/// 1. [`StepLoop::before_work`]: the checks found and, if the policy asks, run first; the
///    files the policy reads on the model's behalf, and its first word.
/// 2. [`StepLoop::call`]: the conversation fitted to the window, one model call; a prompt
///    Ollama refuses as too long is compacted and sent once more.
/// 3. [`StepLoop::take`]: the policy reads the reply ([`Steering::read_reply`]); a reply without
///    calls goes to [`StepLoop::answer`], calls to [`Steering::before_calls`].
/// 4. [`StepLoop::answer`]: an empty reply asked for once ([`Steering::on_empty`]), the policy's
///    last word on the answer ([`Steering::before_answer`]), then [`StepLoop::judge`]: nothing
///    worked, the checks, what did not take.
/// 5. [`StepLoop::run_calls`]: the round of calls, and what follows it
///    ([`Steering::after_round`]).
struct StepLoop<'a> {
    engine: &'a Engine,
    toolbox: &'a Arc<Toolbox>,
    steering: Steering,
    state: Loop<'a>,
    round: Round<'a>,
    messages: Vec<Message>,
    window: Window,
    /// The size of the tool definitions, sent with every call that offers tools.
    fixed: usize,
    /// The first message of the last round: what compaction must keep.
    last_round: usize,
    /// Off once the model is told to answer: its next calls get no tools.
    offer_tools: bool,
    /// An empty reply was asked once for the answer.
    asked_empty: bool,
    /// Ollama refused the last prompt as too long for the window (the next one is its retry).
    refused_context: bool,
    /// `agent.max_iterations`.
    max: usize,
}

impl<'a> StepLoop<'a> {
    fn new(
        engine: &'a Engine,
        toolbox: &'a Arc<Toolbox>,
        messages: Vec<Message>,
        final_step: bool,
        index: usize,
        events: &'a UnboundedSender<StepEvent>,
        cancel: &'a CancellationToken,
    ) -> StepLoop<'a> {
        let fixed = toolbox
            .definitions()
            .iter()
            .map(|d| d.to_string().len())
            .sum::<usize>();
        StepLoop {
            engine,
            toolbox,
            steering: Steering::for_step(engine.model.policy),
            state: Loop {
                engine,
                toolbox,
                final_step,
                ran: Vec::new(),
                ours: Vec::new(),
                last_round_failed: false,
                calls: 0,
                unmet: Vec::new(),
                checks: false,
            },
            round: Round {
                toolbox,
                index,
                events,
                cancel,
            },
            last_round: messages.len(),
            messages,
            window: Window::new(engine.model.num_ctx),
            fixed,
            offer_tools: true,
            asked_empty: false,
            refused_context: false,
            max: engine.settings.agent.max_iterations.max(1),
        }
    }

    /// A user message of the loop's own.
    fn say(&mut self, text: &str) {
        self.messages.push(Message::user(text));
        self.state.ours.push(text.to_owned());
    }

    /// Before the first call, what the policy does on the model's behalf: the checks first,
    /// the files the request names read.
    async fn before_work(&mut self) -> Result<(), StepError> {
        let (engine, cancel) = (self.engine, self.round.cancel);
        // Found once: the operator's checks, or the workspace's own test command (a Python
        // test file, Cargo.toml, package.json…), so a small model sees what fails before it
        // answers whether or not anyone configured checks.
        self.state.checks = engine.checks.available(self.toolbox).await;
        let failing = if self.steering.checks_first(&self.state.facts()) {
            match engine.checks.before_work(self.toolbox, cancel).await {
                Ok(failing) => failing,
                Err(_) => return Err(StepError::Cancelled),
            }
        } else {
            None
        };
        let reads = self
            .steering
            .first_reads(&self.state.facts(), failing.as_deref());
        let mut after_reads = None;
        if !reads.is_empty() {
            let all_failed = self.round_of(String::new(), reads).await?;
            after_reads = self.steering.after_round(all_failed, &self.state.facts());
        }
        // What fails goes before the framing, so the model's reply follows the request to
        // change.
        let mut first = failing.map(|failing| {
            format!(
                "The checks this workspace is judged by fail now (the output is the test \
                 runner's; the fix goes into the code):\n{failing}"
            )
        });
        if let Some(follow) = after_reads {
            self.offer_tools &= !follow.withdraw_tools;
            first = Some(match first {
                Some(checks) => format!("{checks}\n{}", follow.message),
                None => follow.message,
            });
        }
        if let Some(first) = first {
            self.say(&first);
        }
        Ok(())
    }

    /// One model call on the conversation fitted to the window: its reply, or `None` when
    /// Ollama refused the prompt as too long and it was compacted to be sent again.
    async fn call(&mut self) -> Result<Option<Reply>, StepError> {
        let (engine, index, events) = (self.engine, self.round.index, self.round.events);
        match self
            .window
            .fit(&mut self.messages, self.last_round, self.fixed)
        {
            Ok(0) => {}
            Ok(results) => {
                let _ = events.send(StepEvent::Compacted {
                    step: index,
                    results,
                });
            }
            Err(full) => {
                return Err(StepError::ContextFull {
                    num_ctx: full.num_ctx,
                    estimate: full.estimate,
                });
            }
        }
        self.state.calls += 1;
        let fixed = if self.offer_tools { self.fixed } else { 0 };
        let request = engine.chat_request(self.messages.clone(), self.offer_tools, None);
        let reply = match engine.chat(&request, self.round.cancel).await {
            Ok(reply) => reply,
            // The estimate fell short (Japanese, code): Ollama refuses the prompt rather than
            // cut it. The estimate learns from it, every older tool result is compacted, and
            // the call is made again, once.
            Err(e) if e.exceeds_context() => {
                let body = e.to_string();
                self.window.refused(&self.messages, fixed);
                let compacted = if self.refused_context {
                    0
                } else {
                    self.window.compact_all(&mut self.messages, self.last_round)
                };
                if compacted == 0 {
                    return Err(StepError::ContextRefused {
                        num_ctx: engine.model.num_ctx,
                        compacted: self.refused_context,
                        body,
                    });
                }
                self.refused_context = true;
                let _ = events.send(StepEvent::Compacted {
                    step: index,
                    results: compacted,
                });
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        self.refused_context = false;
        self.window.observed(&self.messages, fixed, &reply);
        // A closed channel only means the runner stopped listening; the step goes on.
        let _ = events.send(StepEvent::Tokens {
            step: index,
            input: reply.prompt_eval_count,
            output: reply.eval_count,
        });
        Ok(Some(Reply {
            text: reply.message.content,
            calls: reply.message.tool_calls,
        }))
    }

    /// What the reply leads to: the policy reads it first; a reply without calls is the
    /// answer's to judge, calls are run (past `agent.max_iterations` model calls, the step
    /// fails instead).
    async fn take(&mut self, mut turn: Reply) -> Result<Next, StepError> {
        // A call the policy makes instead of the reply, and what follows its result.
        let mut instead: Option<(ToolCall, String)> = None;
        if let Some(verdict) = self.steering.read_reply(&mut turn, &self.state.facts()) {
            match self.apply(verdict)? {
                Some(call) => instead = Some(call),
                None => return Ok(Next::Again),
            }
        }
        if !self.offer_tools {
            // Calls where none were offered are no answer either.
            turn.calls.clear();
        }
        let next = match instead {
            // The reply is taken as the call made on the model's behalf.
            Some(instead) => Next::instead(instead),
            None if turn.calls.is_empty() => self.answer(turn.text).await?,
            None => {
                self.steering
                    .before_calls(&mut turn.calls, &self.state.facts());
                Next::Run {
                    said: turn.text,
                    calls: turn.calls,
                    then: None,
                }
            }
        };
        if matches!(next, Next::Run { .. }) && self.state.calls >= self.max {
            return Err(StepError::MaxIterations(self.max));
        }
        Ok(next)
    }

    /// A reply without calls: an empty one is asked for once, then the policy has its last
    /// word on the answer, then [`StepLoop::judge`].
    async fn answer(&mut self, answer: String) -> Result<Next, StepError> {
        let verdict = if answer.trim().is_empty() {
            let verdict = (!self.asked_empty)
                .then(|| self.steering.on_empty(&self.state.facts()))
                .flatten();
            if verdict.is_none() {
                if self.asked_empty {
                    let (engine, cancel) = (self.engine, self.round.cancel);
                    if let Some(done) =
                        checked_without_answer(engine, self.toolbox, &self.state, cancel).await?
                    {
                        return Ok(Next::Done(done));
                    }
                    return Err(StepError::NoAnswer {
                        tools_ran: !self.state.ran.is_empty(),
                        calls: self.state.calls,
                    });
                }
                self.asked_empty = true;
                self.say(ANSWER_PLEASE);
                return Ok(Next::Again);
            }
            self.asked_empty = true;
            verdict
        } else {
            if self.state.final_step && self.engine.asks_for_change && self.steering.wants_unmet() {
                self.state.unmet = unmet_now(self.engine, self.toolbox, &self.state.ran).await;
            }
            self.steering.before_answer(&answer, &self.state.facts())
        };
        match verdict {
            Some(verdict) => Ok(match self.apply(verdict)? {
                Some(instead) => Next::instead(instead),
                None => Next::Again,
            }),
            None => self.judge(answer).await,
        }
    }

    /// The answer against the workspace, under every policy: no answer from calls that all
    /// failed; the checks after the change (their failures go back to the model); a change
    /// tried that did not take.
    async fn judge(&mut self, answer: String) -> Result<Next, StepError> {
        let (engine, toolbox, cancel) = (self.engine, self.toolbox, self.round.cancel);
        let ran = &self.state.ran;
        if !ran.is_empty() && !ran.iter().any(|r| r.ok) {
            return Err(StepError::NothingWorked {
                failed: ran.len(),
                last: ran
                    .last()
                    .map(|r| one_line(&r.text, 200))
                    .unwrap_or_default(),
                answer: one_line(&answer, 500),
            });
        }
        match engine.checks.after_answer(toolbox, cancel).await {
            Ok(checks::Verdict::Pass) => {
                let unmade = unmet_now(engine, toolbox, &self.state.ran).await;
                match not_done(engine, toolbox, self.state.final_step, unmade) {
                    None => Ok(Next::Done(answer)),
                    Some(Ok(told)) => {
                        self.offer_tools = true;
                        self.say(&told);
                        Ok(Next::Again)
                    }
                    Some(Err(unmet)) => Err(StepError::NotDone(unmet)),
                }
            }
            Ok(checks::Verdict::Retry { feedback, holds }) => {
                // The answer is left out: the work it reports is not done. Failures that were
                // there before the change are only told: the policy's way of having a change
                // made again is for the change's own.
                self.offer_tools = true;
                let told = if holds {
                    self.steering
                        .after_failed_checks(&feedback, &self.state.facts())
                        .unwrap_or(feedback)
                } else {
                    feedback
                };
                self.say(&told);
                Ok(Next::Again)
            }
            Ok(checks::Verdict::GiveUp(report)) => Err(StepError::ChecksFailed(report)),
            Err(_) => Err(StepError::Cancelled),
        }
    }

    /// Runs a round of calls, then says `then`, or what the policy has to follow the round.
    async fn run_calls(
        &mut self,
        said: String,
        calls: Vec<ToolCall>,
        then: Option<String>,
    ) -> Result<(), StepError> {
        let all_failed = self.round_of(said, calls).await?;
        match then {
            Some(then) => {
                self.offer_tools = true;
                self.say(&then);
            }
            // The policy's message to follow the round's results.
            None => {
                if let Some(follow) = self.steering.after_round(all_failed, &self.state.facts()) {
                    if follow.withdraw_tools {
                        self.offer_tools = false;
                    }
                    self.say(&follow.message);
                }
            }
        }
        Ok(())
    }

    /// Runs one round of calls (`said`: the model's text beside them; empty for calls made on
    /// its behalf), the first message compaction must keep; whether every call failed.
    async fn round_of(&mut self, said: String, calls: Vec<ToolCall>) -> Result<bool, StepError> {
        self.last_round = self.messages.len();
        let all_failed = self
            .round
            .run_said(
                said,
                calls,
                &mut self.steering,
                &mut self.state,
                &mut self.messages,
            )
            .await?;
        self.state.last_round_failed = all_failed;
        Ok(all_failed)
    }

    /// Carries out a rule's verdict: the reply is left out and the model asked again, or the
    /// step ends; a call made on the model's behalf is handed back to be run.
    fn apply(&mut self, verdict: Verdict) -> Result<Option<(ToolCall, String)>, StepError> {
        match verdict {
            Verdict::Stop(stop) => Err(StepError::Steering(stop)),
            Verdict::Nudge { message, tools } => {
                self.offer_tools = tools;
                self.say(&message);
                Ok(None)
            }
            Verdict::Call { call, then } => Ok(Some((call, then))),
        }
    }
}

/// The answer of a task whose model made the change asked for and then gave no answer, also
/// when asked again: the runner follows it with the list of what changed.
pub(crate) const NO_ANSWER_BUT_CHECKED: &str = "The model gave no answer of its own, but the \
    change the request asked for is in the workspace and was checked against it.";

/// When the model falls silent after its change: `Some` answer when the change is checked —
/// the configured checks pass — and nothing it tried failed to take; `None` when nothing can
/// vouch for it (then the step fails for want of an answer, as before).
async fn checked_without_answer(
    engine: &Engine,
    toolbox: &Arc<Toolbox>,
    state: &Loop<'_>,
    cancel: &CancellationToken,
) -> Result<Option<String>, StepError> {
    // What changed is the workspace's to say (no reading of the request needed).
    if !state.final_step || !toolbox.ledger().changed_any() {
        return Ok(None);
    }
    if !engine.checks.configured()
        || !unmade_changes(&state.ran, toolbox, engine.checks.configured()).is_empty()
    {
        return Ok(None);
    }
    match engine.checks.after_answer(toolbox, cancel).await {
        Ok(checks::Verdict::Pass) => Ok(Some(NO_ANSWER_BUT_CHECKED.to_owned())),
        Ok(_) => Ok(None),
        Err(_) => Err(StepError::Cancelled),
    }
}

/// What is not done now: the changes the model tried that did not take, then, when the model
/// read the request as asking for a change, a rename it left half done.
async fn unmet_now(engine: &Engine, toolbox: &Arc<Toolbox>, ran: &[Ran]) -> Vec<Unmet> {
    let mut unmet = unmade_changes(ran, toolbox, engine.checks.configured());
    if engine.asks_for_change && toolbox.ledger().changed_any() {
        let (toolbox, request) = (toolbox.clone(), engine.request.content.clone());
        unmet.extend(
            tokio::task::spawn_blocking(move || {
                crate::agent::judge::renames::unfinished(&toolbox, &request)
            })
            .await
            .unwrap_or_default(),
        );
    }
    unmet
}

/// Rounds of "the request is not done yet" before the step fails.
const EXPECT_ROUNDS: usize = 1;

/// The changes the model tried that did not take (`unmade`), in a task the model read as
/// asking for a change or that changed files (under `off` the request is not read: what
/// changed says a change was meant, in any language): `None` when there are none, a message
/// to send the model while rounds are left, the changes past them.
fn not_done(
    engine: &Engine,
    toolbox: &Toolbox,
    final_step: bool,
    unmade: Vec<Unmet>,
) -> Option<Result<String, Vec<String>>> {
    if !final_step || !(engine.asks_for_change || toolbox.ledger().changed_any()) {
        return None;
    }
    let unmet: Vec<String> = unmade.into_iter().map(|u| u.line).collect();
    if unmet.is_empty() {
        return None;
    }
    let mut rounds = engine
        .expect_rounds
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if *rounds >= EXPECT_ROUNDS {
        return Some(Err(unmet));
    }
    *rounds += 1;
    Some(Ok(format!(
        "The request is not done yet: {}. The request is: {}\nMake the rest of the change now \
         (read a file before you change it), then answer.",
        unmet.join("; "),
        crate::agent::steering::echo_request(&engine.request.content)
    )))
}

/// The changes the model tried that did not take and that it never tried again: each failed
/// call of a writing tool with no later call of one on the same path. Its answer may say the
/// change was made (a 1.5B model wrote the header of `people.csv`, failed the edit that was to
/// add the rows, and reported the rows); the workspace says it was not. A write refused
/// because it would change the test files kept as the request's checks, aimed at a folder,
/// or at a path the workspace never lets the tools write, is not one of them.
/// With `agent.checks` configured (`checked`) none is: the checks judge the change (a 1.5B
/// model fixed `cart.py` one way, then tried another way on the text the first had changed,
/// and the checks passed).
fn unmade_changes(ran: &[Ran], toolbox: &Toolbox, checked: bool) -> Vec<Unmet> {
    if checked {
        return Vec::new();
    }
    let writes = |r: &Ran| {
        toolbox
            .get(&r.call.function.name)
            .is_some_and(|spec| spec.kind == ToolKind::Write)
    };
    let path_of = |r: &Ran| {
        r.call
            .function
            .arguments
            .get("path")
            .and_then(Value::as_str)
            .map(|p| p.trim().trim_start_matches("./").to_owned())
    };
    let mut unmade: Vec<Unmet> = Vec::new();
    for (at, failed) in ran.iter().enumerate().filter(|(_, r)| !r.ok && writes(r)) {
        let Some(path) = path_of(failed) else {
            continue;
        };
        // A test the request is checked by was kept on purpose: not a change to make. A
        // folder is no file to change (a 1.5B model called edit_file on "." before writing
        // each file of a rename).
        // Nor is a path the workspace's rules never let the tools write (outside it, a
        // read-only path such as `.git`, the server's own files): refused by policy, the model
        // told so, not a change left to make.
        let ws = toolbox.workspace();
        if ws.checks().contains(&path)
            || ws.existing(&path).is_ok_and(|p| p.is_dir())
            || ws.writable(&path).is_err()
        {
            continue;
        }
        let again = ran[at + 1..]
            .iter()
            .any(|later| writes(later) && path_of(later).as_ref() == Some(&path));
        if !again && !unmade.iter().any(|u| u.files == [path.as_str()]) {
            let why = one_line(&failed.text, 200);
            let line = format!(
                "the {} of {path} did not take ({why})",
                failed.call.function.name
            );
            unmade.push(Unmet {
                line,
                files: vec![path],
            });
        }
    }
    unmade
}

/// What running a round of calls needs besides the step's state.
struct Round<'a> {
    toolbox: &'a Toolbox,
    index: usize,
    events: &'a UnboundedSender<StepEvent>,
    cancel: &'a CancellationToken,
}

impl Round<'_> {
    /// Sends the assistant's turn (`said`, `calls`) into the conversation, runs each call (or
    /// answers it from the policy's memory) and adds its result; whether every call failed.
    async fn run_said(
        &self,
        said: String,
        calls: Vec<ToolCall>,
        steering: &mut Steering,
        state: &mut Loop<'_>,
        messages: &mut Vec<Message>,
    ) -> Result<bool, StepError> {
        let toolbox = self.toolbox;
        let mut turn = Message::assistant(said);
        turn.tool_calls = calls.clone();
        messages.push(turn);
        let lone = calls.len() == 1;
        let mut all_failed = true;
        for (n, call) in calls.iter().enumerate() {
            let (text, ok) = if n >= MAX_CALLS_PER_REPLY {
                let refused = ToolError::Refused(format!(
                    "not run: at most {MAX_CALLS_PER_REPLY} tool calls are run per reply; call \
                     it again"
                ));
                (toolbox.error_text(&refused), false)
            } else if let Some(earlier) = steering.recall(call, lone) {
                (earlier, true)
            } else {
                let _ = self.events.send(StepEvent::Tool {
                    step: self.index,
                    description: Some(Toolbox::describe(call)),
                });
                if !state.engine.claim.may_call(self.cancel).await {
                    return Err(StepError::Cancelled);
                }
                let gate = state
                    .engine
                    .gate
                    .check(call, toolbox, self.index, self.events, self.cancel)
                    .await;
                // `Err`: refused by the policy or a person, with what the model is told.
                let outcome = match gate {
                    Gate::Run => {
                        // The checks' baseline is taken before the task's first change.
                        let changes = toolbox
                            .get(&call.function.name)
                            .is_some_and(|s| s.kind != ToolKind::Read);
                        if changes
                            && state
                                .engine
                                .checks
                                .baseline(toolbox, self.cancel)
                                .await
                                .is_err()
                        {
                            return Err(StepError::Cancelled);
                        }
                        Ok(run_call(toolbox, steering, state, call, self.cancel).await)
                    }
                    Gate::Refuse(text) => Err(toolbox.error_text(&ToolError::Refused(text))),
                    Gate::Cancelled => Ok(Err(StepError::Cancelled)),
                };
                let _ = self.events.send(StepEvent::Tool {
                    step: self.index,
                    description: None,
                });
                match outcome {
                    // A refusal by the policy or a person is no failure of the model's: it is
                    // told why, and its answer may report it (the call is not among those
                    // that ran).
                    Err(refused) => (refused, false),
                    Ok(outcome) => {
                        let (text, ok) = outcome?;
                        let kind = toolbox
                            .get(&call.function.name)
                            .map_or(ToolKind::Read, |s| s.kind);
                        steering.after_call(call, kind, &text);
                        state.ran.push(Ran {
                            call: call.clone(),
                            ok,
                            text: text.clone(),
                        });
                        (text, ok)
                    }
                }
            };
            let _ = self.events.send(StepEvent::ToolResult {
                step: self.index,
                ok,
                text: text.clone(),
            });
            if self.cancel.is_cancelled() {
                return Err(StepError::Cancelled);
            }
            all_failed &= !ok;
            let mut result = Message::tool(call.function.name.clone(), text);
            result.tool_call_id = call.id.clone();
            messages.push(result);
        }
        Ok(all_failed)
    }
}

/// Runs one call, or the call steering makes in its place: the text the model is sent and
/// whether the call worked.
async fn run_call(
    toolbox: &Toolbox,
    steering: &mut Steering,
    state: &Loop<'_>,
    call: &ToolCall,
    cancel: &CancellationToken,
) -> Result<(String, bool), StepError> {
    let result = match toolbox.execute(call, cancel).await {
        Ok(output) => Ok(output),
        Err(CallError::RespondToModel(e)) => Err(e),
        Err(CallError::Cancelled) => return Err(StepError::Cancelled),
    };
    if let Some(instead) = steering.instead(call, &result, &state.facts())
        && state.engine.gate.runs_unasked(&instead.call)
    {
        match toolbox.execute(&instead.call, cancel).await {
            Ok(ToolOutput { text, matches }) if matches != Some(0) => {
                return Ok((format!("{}{text}", instead.note), true));
            }
            Err(CallError::Cancelled) => return Err(StepError::Cancelled),
            _ => {}
        }
    }
    Ok(match result {
        Ok(output) => (output.text, true),
        Err(e) => (toolbox.error_text(&e), false),
    })
}

/// A model without tools: its reply is the answer; an empty one gets one more call.
async fn plain_chat(
    engine: &Engine,
    index: usize,
    mut messages: Vec<Message>,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<String, StepError> {
    for calls in 1..=2 {
        let request = engine.chat_request(messages.clone(), false, None);
        let reply = engine.chat(&request, cancel).await?;
        let _ = events.send(StepEvent::Tokens {
            step: index,
            input: reply.prompt_eval_count,
            output: reply.eval_count,
        });
        let answer = match engine.model.policy {
            crate::agent::steering::Policy::Small => {
                crate::agent::steering::clean_answer(&reply.message.content)
            }
            crate::agent::steering::Policy::Off => reply.message.content,
        };
        if !answer.trim().is_empty() {
            return Ok(answer);
        }
        if calls == 1 {
            messages.push(Message::user(crate::agent::steering::rules::ANSWER_NOW));
        }
    }
    Err(StepError::NoAnswer {
        tools_ran: false,
        calls: 2,
    })
}

/// `text` on one line: every run of white space (newlines included) becomes one space, and
/// a text longer than `max` characters is cut to its first `max`, followed by `…`.
///
/// ```
/// use agent_mcp::agent::runner::one_line;
///
/// assert_eq!(one_line("  all\n done ", 20), "all done");
/// assert_eq!(one_line("abcdef", 3), "abc…");
/// ```
pub fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let mut cut: String = joined.chars().take(max).collect();
    cut.push('…');
    cut
}
