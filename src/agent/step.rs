//! One step: the tool-calling loop against `/api/chat`.
//!
//! The model gets the conversation (system prompt, session history, the request, and for a
//! planned step its instructions with its dependencies' results) and the workspace tools. Each
//! reply with tool calls is answered by running them and sending their results back as
//! `role: tool` messages; a reply without tool calls is the step's answer. A model still calling
//! tools after `agent.max_iterations` calls fails the step.
//!
//! A step reports what it does through [`StepEvent`]s; the runner owns the task and turns them
//! into saved progress.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::AgentSettings;
use super::claim::TaskClaim;
use super::steer::{self, CallMemory};
use super::tools::Toolbox;
use crate::ollama::{
    ChatOptions, ChatRequest, ChatResponse, Message, OllamaClient, OllamaError, Role,
};

/// Tool calls executed from one reply; further calls in the same reply are refused.
const MAX_CALLS_PER_REPLY: usize = 16;

/// What every call of one task shares.
#[derive(Debug)]
pub(crate) struct Engine {
    pub ollama: OllamaClient,
    pub settings: AgentSettings,
    /// The task's temperature, else the configured one.
    pub temperature: Option<f64>,
    /// `None` when the model lacks the `tools` capability or every tool is disabled.
    pub toolbox: Option<Arc<Toolbox>>,
    /// The session's earlier turns.
    pub history: Vec<Message>,
    /// The task's request, with its images.
    pub request: Message,
    /// Asked before every model and tool call.
    pub claim: TaskClaim,
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
            model: self.settings.model.clone(),
            messages,
            tools,
            format,
            options: ChatOptions {
                temperature: self.temperature,
                num_ctx: Some(self.settings.num_ctx),
                ..ChatOptions::default()
            },
            keep_alive: self.settings.keep_alive.clone(),
            think: Some(self.settings.think),
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

/// Progress a running step reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StepEvent {
    /// A model call finished with these counts.
    Tokens {
        step: usize,
        input: u64,
        output: u64,
    },
    /// A tool started (its one-line description) or finished (`None`).
    Tool {
        step: usize,
        description: Option<String>,
    },
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
    #[error("cancelled")]
    Cancelled,
}

impl From<OllamaError> for StepError {
    fn from(e: OllamaError) -> Self {
        match e {
            OllamaError::Cancelled => StepError::Cancelled,
            other => StepError::Ollama(other),
        }
    }
}

/// Identical calls answered from memory before the model is told to answer.
const MAX_REPEATS: usize = 2;

/// Asked once when a reply has no usable answer (empty, or only tool markup) after tools ran.
const ANSWER_FROM_RESULTS: &str = "Your last reply had no answer in it. Using the tool results \
     above, answer the request now, in plain words: give what was asked for itself (the value, \
     name, number or text), not a description of what you did. Do not call any tool.";
/// Asked once when, after tools ran, the answer talks about the tools (names one) instead of
/// giving what was asked for: a small model explains how `read_file` works, or names the tool
/// as the thing it found.
const ANSWER_NOT_TOOLS: &str = "Your last reply talks about the tools instead of answering. \
     The tool results above are what the tools returned. Using them, answer the request itself, \
     in plain words: give what was asked for (the value, name, number or text), not how a tool \
     works or which tool you used. Do not call any tool.";
/// Asked once when, before any tool ran, the answer only describes using a tool.
const CALL_IT: &str = "No tool has run yet: nothing was read, searched or run, so a reply \
     describing a tool is not an answer. Call the tool now; answer once you have its result.";
/// The same, when no tool ran.
const ANSWER_NOW: &str =
    "Your last reply was empty. Answer the request now, in plain words. Do not call any tool.";

/// Runs step `index` to its answer. `prompt` (the step's instructions and its dependencies'
/// results) follows the request; an unplanned step has none.
///
/// A reply without tool calls is the answer, with echoed tool markup removed
/// ([`steer::clean_answer`]). Tool calls written as JSON in the text and naming an offered tool
/// are run as calls ([`steer::calls_in_text`]); an answer that only describes using a tool
/// before any ran gets one call telling the model to call it ([`steer::describes_a_call`]), and
/// if it describes one again, a described read of an existing path is made on its behalf
/// ([`steer::described_read`]), anything else fails the step ([`StepError::DescribedOnly`]);
/// an answer given
/// before any tool ran to a request that names an existing workspace file gets one call
/// telling the model to look at it first ([`steer::named_file`]). After tools ran, an answer
/// describing a read of an existing path not read yet gets that read made at once (once per
/// step), and an answer given when every call so far failed gets one call saying it is a guess
/// ([`steer::not_a_guess`]). A write in the same reply as a read is held back until the model
/// has seen the read's result ([`steer::reads_and_writes`]). A lone call (the only one
/// of its reply) identical to an earlier one whose result still holds ([`CallMemory`]) is answered from
/// the earlier result with a note; after [`MAX_REPEATS`] such repeats the model is told to
/// answer, without tools. An empty or markup-only reply gets one more call asking for
/// the answer (or, when the last calls all failed, for a corrected call); if that has none
/// either, the step fails ([`StepError::NoAnswer`]).
pub(crate) async fn run_step(
    engine: Arc<Engine>,
    index: usize,
    prompt: Option<String>,
    events: UnboundedSender<StepEvent>,
    cancel: CancellationToken,
) -> Result<String, StepError> {
    let mut messages = engine.conversation(&engine.settings.system_prompt);
    if let Some(prompt) = prompt {
        messages.push(Message::user(prompt));
    }
    // Messages from here on are the loop's own (results and steering): a small model may
    // echo them back as its answer.
    let first_own = messages.len();
    let max = engine.settings.max_iterations.max(1);
    let mut memory = CallMemory::default();
    // Off once the model is told to answer: its next call gets no tools.
    let mut offer_tools = true;
    let mut asked_for_answer = false;
    let mut asked_to_call = false;
    let mut asked_past_tools = false;
    // A read the model described after tools ran was made for it (once per step).
    let mut made_read = false;
    // Told that its answer came before any tool call worked (once per step).
    let mut asked_not_to_guess = false;
    // Some tool call of this step returned a result that is not an error.
    let mut any_succeeded = false;
    // Writes held back (made in the same reply as a read) and not made again since.
    let mut held: Vec<String> = Vec::new();
    // Told once, when it answered instead, that a held write is still to be made.
    let mut asked_for_held = false;
    // A write_file or edit_file ran in this step.
    let mut wrote = false;
    // Told once that the file the request asks for is not written yet.
    let mut asked_to_write = false;
    // Every result of the last round of calls was an error.
    let mut last_round_failed = false;
    let mut tools_ran = false;
    let mut calls = 0;
    loop {
        calls += 1;
        let request = engine.chat_request(messages.clone(), offer_tools, None);
        let reply = engine.chat(&request, &cancel).await?;
        // A closed channel only means the runner stopped listening; the step goes on.
        let _ = events.send(StepEvent::Tokens {
            step: index,
            input: reply.prompt_eval_count,
            output: reply.eval_count,
        });
        let mut answer = reply.message;
        if let Some(toolbox) = &engine.toolbox
            && answer.tool_calls.is_empty()
        {
            let written = steer::calls_in_text(&answer.content, toolbox.enabled());
            if !written.is_empty() {
                answer.tool_calls = written;
                answer.content.clear();
            }
        }
        if let Some(toolbox) = &engine.toolbox
            && answer.tool_calls.is_empty()
            && offer_tools
            && ((asked_to_call && !tools_ran) || (tools_ran && !made_read))
        {
            // Told once to make the call it described, it describes it again; or, after a
            // tool ran, it describes reading a path (the one a failed read suggested, say)
            // instead of reading it: when that is a read of a path that exists and was not
            // read yet, make it on its behalf (reading changes nothing).
            let text = steer::clean_answer(&answer.content);
            if steer::describes_a_call(&text, toolbox.enabled())
                && let Some(call) = steer::described_read(&text, toolbox)
                && !memory.knows(&call)
            {
                made_read = tools_ran;
                answer.tool_calls = vec![call];
                answer.content.clear();
            }
        }
        let toolbox = match &engine.toolbox {
            Some(toolbox) if offer_tools && !answer.tool_calls.is_empty() => toolbox,
            _ => {
                // Calls where none were offered are no answer either.
                let cleaned = if answer.tool_calls.is_empty() {
                    steer::clean_answer(&answer.content)
                } else {
                    String::new()
                };
                let text = steer::without_echo(
                    &cleaned,
                    messages[first_own..]
                        .iter()
                        .filter(|m| m.role == Role::User)
                        .map(|m| m.content.as_str()),
                );
                // The reply was only a copy of the loop's own words.
                let echoed = !cleaned.trim().is_empty() && text.trim().is_empty();
                if let Some(toolbox) = &engine.toolbox
                    && offer_tools
                    && !tools_ran
                    && steer::describes_a_call(&text, toolbox.enabled())
                {
                    // It said what it would do (or pretended it did) instead of doing it.
                    if asked_to_call {
                        return Err(StepError::DescribedOnly { calls });
                    }
                    // Its text is left out: a made-up result in the conversation anchors the
                    // model's next answer.
                    asked_to_call = true;
                    messages.push(Message::user(CALL_IT));
                    continue;
                }
                if let Some(toolbox) = &engine.toolbox
                    && offer_tools
                    && !tools_ran
                    && !asked_to_call
                    && !text.trim().is_empty()
                    && let Some(file) =
                        steer::named_file(&engine.request.content, toolbox.workspace())
                {
                    // The request names a file it has not looked at: the answer is a guess.
                    asked_to_call = true;
                    messages.push(Message::user(format!(
                        "Before answering, look at '{file}': no tool has run yet, so nothing was \
                         read and any answer now would be a guess. Call the tool you need first \
                         (for example read_file), then answer from its result."
                    )));
                    continue;
                }
                if !held.is_empty() && !text.trim().is_empty() {
                    // It answers, but the write it was asked to make is still unmade: the
                    // request is not done. One reminder; then the step fails saying so rather
                    // than report a write that never happened.
                    if asked_for_held || !offer_tools {
                        return Err(StepError::WriteNotMade {
                            tools: held.join(", "),
                        });
                    }
                    asked_for_held = true;
                    messages.push(Message::user(steer::after_held_writes(
                        &engine.request.content,
                        &held,
                    )));
                    continue;
                }
                if offer_tools
                    && last_round_failed
                    && !any_succeeded
                    && !asked_not_to_guess
                    && !text.trim().is_empty()
                {
                    // Every call it made failed, yet it answers: nothing was read, so the
                    // answer is a guess (often written before the results came). Its text is
                    // left out; one more call, tools still offered.
                    asked_not_to_guess = true;
                    messages.push(Message::user(steer::not_a_guess(&engine.request.content)));
                    continue;
                }
                if let Some(toolbox) = &engine.toolbox
                    && offer_tools
                    && !wrote
                    && !asked_to_write
                    && !text.trim().is_empty()
                    && let Some(file) =
                        steer::file_to_write(&engine.request.content, toolbox.workspace())
                {
                    // The request asks for a file that is not there yet and nothing was
                    // written: a small model does the first half (runs `wc`) and answers.
                    // One reminder; an answer after it stands.
                    asked_to_write = true;
                    messages.push(Message::user(steer::write_still_to_do(
                        &engine.request.content,
                        &file,
                    )));
                    continue;
                }
                if let Some(toolbox) = &engine.toolbox
                    && tools_ran
                    && !asked_past_tools
                    && steer::names_a_tool(&text, toolbox.enabled())
                    && !steer::names_a_tool(&engine.request.content, toolbox.enabled())
                {
                    // After reading, it described the tools instead of answering. Its text is
                    // left out (it would anchor the next answer); one call without tools.
                    asked_past_tools = true;
                    offer_tools = false;
                    messages.push(Message::user(ANSWER_NOT_TOOLS));
                    continue;
                }
                if !text.trim().is_empty() {
                    return Ok(text);
                }
                if asked_for_answer {
                    return Err(StepError::NoAnswer { tools_ran, calls });
                }
                asked_for_answer = true;
                if !held.is_empty() && offer_tools {
                    // Nothing said, and the held write is still to be made: ask for it.
                    messages.push(Message::user(steer::after_held_writes(
                        &engine.request.content,
                        &held,
                    )));
                    continue;
                }
                if last_round_failed && offer_tools {
                    // Nothing to answer from yet: ask for a corrected call, tools still offered.
                    messages.push(Message::user(steer::after_results(
                        &engine.request.content,
                        true,
                    )));
                    continue;
                }
                offer_tools = false;
                if echoed {
                    // It copied the message that followed the results: that message is left
                    // out of the recovery call, so the results are followed by the question
                    // alone, not by the text it copies.
                    while messages.len() > first_own
                        && messages.last().is_some_and(|m| m.role == Role::User)
                    {
                        messages.pop();
                    }
                }
                messages.push(Message::user(if tools_ran {
                    ANSWER_FROM_RESULTS
                } else {
                    ANSWER_NOW
                }));
                continue;
            }
        };
        if calls >= max {
            return Err(StepError::MaxIterations(max));
        }
        if steer::reads_and_writes(&answer.tool_calls) {
            // A write in the same reply as a read was written before the read's result was
            // known (a small model fills in the request's example). It is left out of the
            // conversation, as if only the reads were asked for; after their results the model
            // is asked for the write ([`steer::after_held_writes`]).
            for call in answer.tool_calls.iter().filter(|c| steer::is_write(c)) {
                if !held.contains(&call.function.name) {
                    held.push(call.function.name.clone());
                }
            }
            answer.tool_calls.retain(|c| !steer::is_write(c));
            asked_for_held = false;
        }
        let mut said = Message::assistant(answer.content);
        said.tool_calls = answer.tool_calls.clone();
        messages.push(said);
        let repeats_before = memory.repeats;
        let mut all_failed = true;
        // Only a lone call is answered from memory: a reply of several calls is a batch the
        // model planned (a test harness may repeat calls on purpose), and is run as asked.
        let lone = answer.tool_calls.len() == 1;
        for (n, call) in answer.tool_calls.iter().enumerate() {
            let text = if n >= MAX_CALLS_PER_REPLY {
                format!(
                    "error: not run: at most {MAX_CALLS_PER_REPLY} tool calls are run per reply; \
                     call it again"
                )
            } else if let Some(earlier) = lone.then(|| memory.recall(call)).flatten() {
                format!(
                    "{earlier}\n\n(note: {} was already called with these arguments; this is \
                     its earlier result, unchanged. Use it instead of calling again.)",
                    call.function.name
                )
            } else {
                let _ = events.send(StepEvent::Tool {
                    step: index,
                    description: Some(Toolbox::describe(call)),
                });
                if !engine.claim.may_call(&cancel).await {
                    return Err(StepError::Cancelled);
                }
                let text = toolbox.execute(call, &cancel).await;
                let _ = events.send(StepEvent::Tool {
                    step: index,
                    description: None,
                });
                tools_ran = true;
                if steer::is_write(call) {
                    wrote = true;
                    held.retain(|name| *name != call.function.name);
                }
                memory.record(call, &text);
                text
            };
            if cancel.is_cancelled() {
                return Err(StepError::Cancelled);
            }
            all_failed &= text.starts_with("error:");
            any_succeeded |= !text.starts_with("error:");
            let mut result = Message::tool(call.function.name.clone(), text);
            result.tool_call_id = call.id.clone();
            messages.push(result);
        }
        last_round_failed = all_failed;
        if !held.is_empty() && !all_failed {
            // Until the held write is made again, every round asks for it (the tools stay).
            messages.push(Message::user(steer::after_held_writes(
                &engine.request.content,
                &held,
            )));
        } else if memory.repeats > repeats_before && memory.repeats >= MAX_REPEATS {
            offer_tools = false;
            messages.push(Message::user(
                "You already have these results: calling the same tool again will not change \
                 them. Answer the request now from the tool results above, in plain words.",
            ));
        } else {
            messages.push(Message::user(steer::after_results(
                &engine.request.content,
                all_failed,
            )));
        }
    }
}
