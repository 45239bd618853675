//! The rules of the `small` policy, one type each, in the order the policy asks them.
//!
//! Each was added for a failure shape a 1–3 B model showed in a benchmark (docs/steering.md
//! lists them with their effect); each is scoped to one step and says so in its
//! state. A capable model, under `off`, meets none of them.

use serde_json::{Value, json};

use super::memory::CallMemory;
use super::text::{
    broken_call, call, calls_in_text, clean_answer, described_read, describes_a_call, echo,
    is_test_file, missing_file, named_files, names_a_tool, without_echo,
};
use super::{Facts, FollowUp, Instead, Reply, Rule, Stop, Verdict};
use crate::agent::tools::names::{READ_FILE, RUN_COMMAND, SEARCH_TEXT};
use crate::agent::tools::{LookAlikeKind, ToolError, ToolKind, ToolOutput, parse_arguments};
use crate::ollama::ToolCall;

/// The rules of the `small` policy, fresh for one step.
pub(crate) fn small() -> Vec<Box<dyn Rule>> {
    vec![
        Box::new(ReadFirst),
        Box::new(OnText::new("text-calls", run_text_calls)),
        Box::new(Once::new(BrokenCall)),
        Box::new(super::whole_file::WholeFile::default()),
        Box::new(super::edits::DescribedEdit::default()),
        Box::new(DescribedCalls::default()),
        Box::new(OnText::new("markup", strip_markup)),
        Box::new(OnText::new("echo", strip_echo)),
        Box::new(HeldWrites::default()),
        Box::new(EmptyAnswer),
        Box::new(Once::new(NotAGuess)),
        Box::new(Once::new(ChangeReminder)),
        Box::new(Once::new(AnswerNotTools)),
        Box::new(Repeats::default()),
        Box::new(Retry::new("look-alike-read", READ_FILE, look_alike_read)),
        Box::new(Retry::new(
            "case-fold-search",
            SEARCH_TEXT,
            case_fold_search,
        )),
        Box::new(ResultsFraming),
    ]
}

/// A rule that rewrites the text of a reply without calls and gives no verdict: `rewrite`
/// is asked only for such a reply.
pub(crate) struct OnText {
    name: &'static str,
    rewrite: fn(&mut Reply, &Facts),
}

impl OnText {
    fn new(name: &'static str, rewrite: fn(&mut Reply, &Facts)) -> OnText {
        OnText { name, rewrite }
    }
}

impl Rule for OnText {
    fn name(&self) -> &'static str {
        self.name
    }

    fn read_reply(&mut self, reply: &mut Reply, facts: &Facts) -> Option<Verdict> {
        if reply.calls.is_empty() {
            (self.rewrite)(reply, facts);
        }
        None
    }
}

/// A rule that tells the model something, at most once a step (see [`Once`]): a judgment of
/// the reply or the answer, with no state of its own and nothing else to do.
pub(crate) trait Tell: Send {
    fn name(&self) -> &'static str;

    /// As [`Rule::read_reply`], without changing the reply.
    fn read_reply(&self, _reply: &Reply, _facts: &Facts) -> Option<Verdict> {
        None
    }

    /// As [`Rule::before_answer`].
    fn before_answer(&self, _answer: &str, _facts: &Facts) -> Option<Verdict> {
        None
    }
}

/// A [`Tell`] rule as a rule of the step: once it has given a verdict it is not asked again
/// in the step (what the model does after being told stands).
pub(crate) struct Once<T> {
    rule: T,
    told: bool,
}

impl<T: Tell> Once<T> {
    fn new(rule: T) -> Once<T> {
        Once { rule, told: false }
    }

    fn once(&mut self, ask: impl FnOnce(&T) -> Option<Verdict>) -> Option<Verdict> {
        if self.told {
            return None;
        }
        let verdict = ask(&self.rule);
        self.told = verdict.is_some();
        verdict
    }
}

impl<T: Tell> Rule for Once<T> {
    fn name(&self) -> &'static str {
        self.rule.name()
    }

    fn read_reply(&mut self, reply: &mut Reply, facts: &Facts) -> Option<Verdict> {
        self.once(|rule| rule.read_reply(reply, facts))
    }

    fn before_answer(&mut self, answer: &str, facts: &Facts) -> Option<Verdict> {
        self.once(|rule| rule.before_answer(answer, facts))
    }
}

/// A rule that makes another call of `tool` in place of one whose result it judges unhelpful:
/// `retry` is given the call's arguments and its result, changes the arguments and returns the
/// note to put before the new result, or returns `None` to keep the result.
pub(crate) struct Retry {
    name: &'static str,
    tool: &'static str,
    retry: RetryFn,
}

type RetryFn = fn(&mut Value, &Result<ToolOutput, ToolError>) -> Option<String>;

impl Retry {
    fn new(name: &'static str, tool: &'static str, retry: RetryFn) -> Retry {
        Retry { name, tool, retry }
    }
}

impl Rule for Retry {
    fn name(&self) -> &'static str {
        self.name
    }

    fn instead(
        &mut self,
        original: &ToolCall,
        result: &Result<ToolOutput, ToolError>,
        _facts: &Facts,
    ) -> Option<Instead> {
        if original.function.name != self.tool {
            return None;
        }
        let mut args = parse_arguments(&original.function.arguments);
        let note = (self.retry)(&mut args, result)?;
        Some(Instead {
            call: call(self.tool, args),
            note,
        })
    }
}

/// Most files read on the model's behalf before its first call.
const FIRST_READS: usize = 3;

/// Before the first call, the files the request names (and, for a change judged by checks,
/// what the failing checks name: the source file of a traceback before its test) are read on
/// the model's behalf, and a change's checks run first to show what fails. A small model picks
/// the right first tool but fumbles what follows; with the file in front of it, its first reply
/// can be the answer or the edit. Reading changes nothing.
pub(crate) struct ReadFirst;

impl Rule for ReadFirst {
    fn name(&self) -> &'static str {
        "read-first"
    }

    fn checks_first(&self, facts: &Facts) -> bool {
        facts.asks_for_change && facts.checks
    }

    fn first_reads(&mut self, facts: &Facts, checks: Option<&str>) -> Vec<ToolCall> {
        // A question to be answered by running a program (`wc -l data.csv`) is answered by
        // running it: with the file read first, a small model counts the lines itself, and
        // wrongly. (A change that names one, "`python3 -m unittest` fails", still gets its files.)
        let runs_a_program = !facts.asks_for_change
            && facts.toolbox.get(RUN_COMMAND).is_some()
            && facts
                .toolbox
                .settings()
                .commands
                .allow
                .iter()
                .any(|program| super::text::names_word(facts.request, &program.to_lowercase()));
        if facts.toolbox.get(READ_FILE).is_none() || runs_a_program {
            return Vec::new();
        }
        let ws = facts.toolbox.workspace();
        let mut files = named_files(facts.request, ws);
        // A question about a file that is not there but has one look-alike ("settings.ini"
        // beside `settings.toml`): reading it lets `look-alike-read` read the look-alike, saying
        // so; told nothing, a small model makes the answer up. (A change may name a file it is
        // to create, so only a question does this.)
        if !facts.asks_for_change
            && let Some(missing) = super::text::missing_file(facts.request, ws)
            && crate::agent::tools::look_alike_of(ws, &missing).is_some()
        {
            files.push(missing);
        }
        if let Some(output) = checks {
            let (tests, mut sources): (Vec<String>, Vec<String>) = named_files(output, ws)
                .into_iter()
                .partition(|f| is_test_file(f));
            // A failed assertion names only its test: the code under test is what it imports.
            for test in &tests {
                let text = ws
                    .existing(test)
                    .ok()
                    .and_then(|p| std::fs::read_to_string(p).ok())
                    .unwrap_or_default();
                for source in imported_sources(&text, ws) {
                    if !sources.contains(&source) {
                        sources.push(source);
                    }
                }
            }
            for file in sources.into_iter().chain(tests) {
                if !files.contains(&file) {
                    files.push(file);
                }
            }
        }
        files
            .into_iter()
            .take(FIRST_READS)
            .map(|path| call(READ_FILE, json!({ "path": path })))
            .collect()
    }
}

/// The workspace's Python files a Python file imports at its top level (`from greet import
/// greet`, `import pkg.mod`), that are no tests themselves.
pub(crate) fn imported_sources(text: &str, ws: &crate::agent::tools::Workspace) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for line in text.lines() {
        let modules: Vec<&str> = if let Some(rest) = line.strip_prefix("from ") {
            rest.split_whitespace().next().into_iter().collect()
        } else if let Some(rest) = line.strip_prefix("import ") {
            rest.split(',')
                .filter_map(|m| m.split_whitespace().next())
                .collect()
        } else {
            continue;
        };
        for module in modules {
            if module.starts_with('.') || module.is_empty() {
                continue;
            }
            let base = module.replace('.', "/");
            for path in [format!("{base}.py"), format!("{base}/__init__.py")] {
                if !is_test_file(&path)
                    && ws.existing(&path).is_ok_and(|p| p.is_file())
                    && !found.contains(&path)
                {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// `text-calls`: tool calls written in the reply's text (bare JSON, fenced, `<tool_call>`
/// tags) naming an offered tool are run as calls: real Ollama does not always parse them for
/// small models.
fn run_text_calls(reply: &mut Reply, facts: &Facts) {
    let written = calls_in_text(&reply.text, &facts.offered());
    if !written.is_empty() {
        reply.calls = written;
        reply.text.clear();
    }
}

/// A reply whose text tried to call an offered tool in JSON that does not parse did nothing:
/// once per step, the model is told so instead of the text being taken as the answer.
pub(crate) struct BrokenCall;

impl Tell for BrokenCall {
    fn name(&self) -> &'static str {
        "broken-call"
    }

    fn read_reply(&self, reply: &Reply, facts: &Facts) -> Option<Verdict> {
        if !reply.calls.is_empty() {
            return None;
        }
        let offered = facts.offered();
        let tool = broken_call(&reply.text, &offered)?;
        Some(Verdict::Nudge {
            message: format!(
                "Your reply tried to call {tool}, but its JSON does not parse, so it did not run \
                 and nothing was done. Call {tool} again as a tool call, with valid JSON \
                 arguments (escape every \" inside a string as \\\")."
            ),
            tools: true,
        })
    }
}

/// Asked once when, before any tool ran, the answer only describes using a tool.
const CALL_IT: &str = "No tool has run yet: nothing was read, searched or run, so a reply \
     describing a tool is not an answer. Call the tool now; answer once you have its result.";

/// An answer that only says it used a tool ("I used the `read_file` function…") is not one.
/// Before any tool ran, the model is told once to call it; described again, a read of an
/// existing path is made on its behalf (reading changes nothing), anything else ends the step.
/// After tools ran, a described read of an existing path not read yet is made at once, once.
#[derive(Default)]
pub(crate) struct DescribedCalls {
    told: bool,
    made_read: bool,
    memory: Vec<ToolCall>,
}

impl Rule for DescribedCalls {
    fn name(&self) -> &'static str {
        "described-calls"
    }

    fn read_reply(&mut self, reply: &mut Reply, facts: &Facts) -> Option<Verdict> {
        let eligible = (self.told && !facts.tools_ran()) || (facts.tools_ran() && !self.made_read);
        if !reply.calls.is_empty() || !eligible {
            return None;
        }
        let text = clean_answer(&reply.text);
        if describes_a_call(&text, &facts.offered(), facts.request)
            && let Some(read) = described_read(&text, facts.toolbox)
            && !facts.ran.iter().any(|r| same_call(&r.call, &read))
            && !self.memory.iter().any(|c| same_call(c, &read))
        {
            self.made_read = facts.tools_ran();
            self.memory.push(read.clone());
            reply.calls = vec![read];
            reply.text.clear();
        }
        None
    }

    fn before_answer(&mut self, answer: &str, facts: &Facts) -> Option<Verdict> {
        if facts.tools_ran() || !describes_a_call(answer, &facts.offered(), facts.request) {
            return None;
        }
        if self.told {
            return Some(Verdict::Stop(Stop::DescribedOnly { calls: facts.calls }));
        }
        self.told = true;
        Some(Verdict::Nudge {
            message: CALL_IT.into(),
            tools: true,
        })
    }
}

fn same_call(a: &ToolCall, b: &ToolCall) -> bool {
    a.function.name == b.function.name
        && parse_arguments(&a.function.arguments) == parse_arguments(&b.function.arguments)
}

/// `markup`: echoed chat markup (`<tool_response>…`, `<|im_end|>`) is removed from the answer.
fn strip_markup(reply: &mut Reply, _facts: &Facts) {
    reply.text = clean_answer(&reply.text);
}

/// `echo`: lines of the answer copied from the loop's own messages (or from the request) are
/// removed; an answer that was only such a copy is empty, and gets the empty-answer call.
fn strip_echo(reply: &mut Reply, facts: &Facts) {
    // The request copied back is no answer either.
    let ours = facts.ours.iter().map(String::as_str);
    reply.text = without_echo(&reply.text, ours.chain([facts.request]));
}

/// Asked when a reply has no usable answer after tools ran.
pub(crate) const ANSWER_FROM_RESULTS: &str = "Your last reply had no answer in it. Using the \
     tool results above, answer the request now, in plain words: give what was asked for itself \
     (the value, name, number or text), not a description of what you did. Do not call any tool.";
/// The same, when no tool ran.
pub(crate) const ANSWER_NOW: &str =
    "Your last reply was empty. Answer the request now, in plain words. Do not call any tool.";

/// The same, when no tool ran and the tools are offered.
pub(crate) const LOOK_OR_ANSWER: &str = "Your last reply was empty. If the request needs \
     something from the workspace, call the tool that finds it now; otherwise answer the \
     request in plain words.";

/// An empty (or markup-only) reply gets one call: after tools ran, asking for the answer
/// without tools; before any ran, for the call that finds it or the answer, tools offered; or,
/// when the last calls all failed, with them and a request for a corrected call, or, while a
/// change asked for is not made, with them and a request to make it. (The loop asks once
/// more itself and then ends the step.)
pub(crate) struct EmptyAnswer;

impl Rule for EmptyAnswer {
    fn name(&self) -> &'static str {
        "empty-answer"
    }

    fn on_empty(&mut self, facts: &Facts) -> Option<Verdict> {
        if facts.asks_for_change && !facts.changed {
            return Some(Verdict::Nudge {
                message: make_the_change(facts.request),
                tools: true,
            });
        }
        if facts.last_round_failed {
            return Some(Verdict::Nudge {
                message: after_results(facts.request, true),
                tools: true,
            });
        }
        // Before any tool ran, the tools stay offered: a model that said nothing has read
        // nothing, and asked for an answer without them it guesses (a value never read).
        Some(if facts.tools_ran() {
            Verdict::Nudge {
                message: ANSWER_FROM_RESULTS.into(),
                tools: false,
            }
        } else {
            Verdict::Nudge {
                message: LOOK_OR_ANSWER.into(),
                tools: true,
            }
        })
    }
}

/// The example values a request gives in an aside: the values with a digit in its
/// parentheses ("(for example 1.0-final)", "(z. B. 1.0-final)", "（例：1.0-final）" →
/// `1.0-final`). The words around them are not read, so this holds in any language.
fn examples(request: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = request;
    while let Some(open) = rest.find(['(', '（']) {
        let inside = &rest[open..];
        let inside = &inside[inside.chars().next().map_or(1, char::len_utf8)..];
        let end = inside.find([')', '）']).unwrap_or(inside.len());
        for word in
            inside[..end].split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '：' | '、'))
        {
            let value = word
                .trim_start_matches(':')
                .trim_end_matches(['.', '。', ':']);
            if value.chars().count() >= 2 && value.chars().any(|c| c.is_ascii_digit()) {
                found.push(value.to_owned());
            }
        }
        rest = &inside[end..];
    }
    found
}

/// The text a write call would put in a file.
fn written_text(call: &ToolCall) -> String {
    let args = parse_arguments(&call.function.arguments);
    ["content", "new_text"]
        .iter()
        .filter_map(|key| args[*key].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A write in the same reply as a read, writing the request's own example value ("for example
/// 1.0-final"), was made before the read's result was known: a small model fills in the
/// example. It is held back (left out of the conversation) and asked for after the read's
/// result; answered twice without it, the step ends saying nothing was written. Writes that do
/// not copy an example run as the model batched them.
#[derive(Default)]
pub(crate) struct HeldWrites {
    held: Vec<String>,
    told: bool,
}

impl Rule for HeldWrites {
    fn name(&self) -> &'static str {
        "held-writes"
    }

    fn before_calls(&mut self, calls: &mut Vec<ToolCall>, facts: &Facts) {
        let kind = |c: &ToolCall| facts.toolbox.get(&c.function.name).map(|s| s.kind);
        if !calls.iter().any(|c| kind(c) == Some(ToolKind::Read)) {
            return;
        }
        let examples = examples(facts.request);
        let early = |c: &ToolCall| {
            kind(c) == Some(ToolKind::Write) && {
                let text = written_text(c);
                examples.iter().any(|e| text.contains(e.as_str()))
            }
        };
        if !calls.iter().any(early) {
            return;
        }
        for held in calls.iter().filter(|c| early(c)) {
            if !self.held.contains(&held.function.name) {
                self.held.push(held.function.name.clone());
            }
        }
        calls.retain(|c| !early(c));
        self.told = false;
    }

    fn after_call(&mut self, call: &ToolCall, kind: ToolKind, _text: &str) {
        if kind == ToolKind::Write {
            self.held.retain(|name| *name != call.function.name);
        }
    }

    fn before_answer(&mut self, _answer: &str, facts: &Facts) -> Option<Verdict> {
        if self.held.is_empty() {
            return None;
        }
        if self.told {
            return Some(Verdict::Stop(Stop::WriteNotMade {
                tools: self.held.join(", "),
            }));
        }
        self.told = true;
        Some(Verdict::Nudge {
            message: after_held_writes(facts.request, &self.held),
            tools: true,
        })
    }

    fn on_empty(&mut self, facts: &Facts) -> Option<Verdict> {
        // Nothing said, and the held write is still to be made: ask for it.
        (!self.held.is_empty()).then(|| Verdict::Nudge {
            message: after_held_writes(facts.request, &self.held),
            tools: true,
        })
    }

    fn after_round(&mut self, all_failed: bool, facts: &Facts) -> Option<FollowUp> {
        // Until the held write is made again, every round asks for it (the tools stay).
        (!self.held.is_empty() && !all_failed).then(|| FollowUp {
            message: after_held_writes(facts.request, &self.held),
            withdraw_tools: false,
        })
    }
}

/// The message after a round whose writes were held back, and until they are made.
fn after_held_writes(request: &str, held: &[String]) -> String {
    format!(
        "The tool results are above; they come from the tools, not from you. The request is: \
         {}\nNothing has been written yet. Now make the {} call the request asks for, with \
         what the results hold in place of any example, then answer.",
        echo(request),
        held.join(" / "),
    )
}

/// When every call so far failed and the model answers anyway, nothing was read and the
/// answer is a guess (often written before the results came): once, the model is told so,
/// tools offered. (Answered so again, the loop ends the step: no call worked.)
pub(crate) struct NotAGuess;

impl Tell for NotAGuess {
    fn name(&self) -> &'static str {
        "not-a-guess"
    }

    fn before_answer(&self, _answer: &str, facts: &Facts) -> Option<Verdict> {
        if !facts.tools_ran() || facts.any_succeeded() {
            return None;
        }
        Some(Verdict::Nudge {
            message: format!(
                "None of your tool calls has worked yet (see the errors above), so nothing was \
                 read and that answer would be a guess. The request is: {}\nDo not guess. Call \
                 a tool that can find it: search_text finds a text in every file, list_dir shows \
                 what a folder holds, read_file reads a file it lists. Answer once a result \
                 holds what is asked.",
                echo(facts.request)
            ),
            tools: true,
        })
    }
}

/// A request that asks for a change, answered while nothing in the workspace changed, gets
/// one reminder in the step whose answer is the task's: a small model does the first half
/// (runs the tests, reads the file) and describes the fix instead of making it. When a file it
/// would change (named by the request, the answer or a result) was not read yet, it is read on
/// the model's behalf with the reminder after it. (An answer after the reminder stands, and
/// the runner fails the task if still nothing changed.)
pub(crate) struct ChangeReminder;

impl Tell for ChangeReminder {
    fn name(&self) -> &'static str {
        "change-reminder"
    }

    fn before_answer(&self, answer: &str, facts: &Facts) -> Option<Verdict> {
        if !facts.asks_for_change || facts.changed || !facts.final_step {
            return None;
        }
        let ws = facts.toolbox.workspace();
        if let Some(file) = missing_file(facts.request, ws) {
            return Some(Verdict::Nudge {
                message: format!(
                    "The request asks for '{file}' to be written, and nothing has been written \
                     yet. The request is: {}\nMake the write_file call now, with what the tool \
                     results hold, then answer.",
                    echo(facts.request)
                ),
                tools: true,
            });
        }
        let read = |path: &str| {
            facts.ran.iter().any(|r| {
                r.ok && r.call.function.name == READ_FILE
                    && parse_arguments(&r.call.function.arguments)["path"] == json!(path)
            })
        };
        let mut candidates = named_files(facts.request, ws);
        candidates.extend(named_files(answer, ws));
        for ran in facts.ran.iter().rev() {
            candidates.extend(named_files(&ran.text, ws));
        }
        let unread = candidates
            .iter()
            .filter(|f| !is_test_file(f))
            .chain(candidates.iter().filter(|f| is_test_file(f)))
            .find(|f| !read(f));
        let message = make_the_change(facts.request);
        match unread {
            Some(file) if facts.toolbox.get(READ_FILE).is_some() => Some(Verdict::Call {
                call: call(READ_FILE, json!({ "path": file })),
                then: message,
            }),
            _ => Some(Verdict::Nudge {
                message,
                tools: true,
            }),
        }
    }
}

/// The reminder that a change asked for is not made yet.
fn make_the_change(request: &str) -> String {
    format!(
        "The request asks for a change to the workspace, and no file has changed yet: describing \
         a change does not make it. The request is: {}\nMake the change now: call edit_file \
         with the file's path, old_text copied exactly from the file as shown above (whitespace \
         included) and new_text the corrected text, or write_file with the whole new content. \
         Then answer in one sentence.",
        echo(request)
    )
}

/// Asked once when, after tools ran, the answer talks about the tools instead of giving what
/// was asked for.
const ANSWER_NOT_TOOLS: &str = "Your last reply talks about the tools instead of answering. \
     The tool results above are what the tools returned. Using them, answer the request itself, \
     in plain words: give what was asked for (the value, name, number or text), not how a tool \
     works or which tool you used. Do not call any tool.";

/// After tools ran, an answer that names a tool (when neither the request nor any result of
/// the step does: a README that mentions `list_dir`, a function of the user's called
/// `read_file`) describes the tools instead of answering: once, it is asked for the thing
/// itself, without tools.
pub(crate) struct AnswerNotTools;

impl Tell for AnswerNotTools {
    fn name(&self) -> &'static str {
        "answer-not-tools"
    }

    fn before_answer(&self, answer: &str, facts: &Facts) -> Option<Verdict> {
        if !facts.tools_ran() {
            return None;
        }
        let offered = facts.offered();
        let named: Vec<&str> = offered
            .iter()
            .copied()
            .filter(|tool| names_a_tool(answer, &[tool]))
            .filter(|tool| !names_a_tool(facts.request, &[tool]))
            .filter(|tool| !facts.ran.iter().any(|r| names_a_tool(&r.text, &[tool])))
            .collect();
        if named.is_empty() {
            return None;
        }
        Some(Verdict::Nudge {
            message: ANSWER_NOT_TOOLS.into(),
            tools: false,
        })
    }
}

/// Identical calls answered from memory before the model is told to answer.
const MAX_REPEATS: usize = 2;

/// A lone call (the only one of its reply) identical to an earlier one whose result still
/// holds is answered from that result with a note; after [`MAX_REPEATS`] such repeats the
/// model is told to answer, without tools. A write clears the memory; a command clears what
/// the reading tools returned.
#[derive(Default)]
pub(crate) struct Repeats {
    memory: CallMemory,
    counted: usize,
}

impl Rule for Repeats {
    fn name(&self) -> &'static str {
        "repeats"
    }

    fn recall(&mut self, call: &ToolCall, lone: bool) -> Option<String> {
        if !lone {
            return None;
        }
        let earlier = self.memory.recall(call)?;
        Some(format!(
            "{earlier}\n\n(note: {} was already called with these arguments; this is its \
             earlier result, unchanged. Use it instead of calling again.)",
            call.function.name
        ))
    }

    fn after_call(&mut self, call: &ToolCall, kind: ToolKind, text: &str) {
        self.memory.record(call, kind, text);
    }

    fn after_round(&mut self, _all_failed: bool, _facts: &Facts) -> Option<FollowUp> {
        let new = self.memory.repeats > self.counted;
        self.counted = self.memory.repeats;
        (new && self.memory.repeats >= MAX_REPEATS).then(|| FollowUp {
            message: "You already have these results: calling the same tool again will not \
                      change them. Answer the request now from the tool results above, in plain \
                      words."
                .into(),
            withdraw_tools: true,
        })
    }
}

/// `read_file` of a missing file whose folder holds exactly one look-alike reads that file
/// instead, saying so: a model that got the name slightly wrong has its answer in one call,
/// where a small model fumbles the second call a "Did you mean" would need. A path written
/// with `\` is read with `/`. (The `look-alike-read` rule, a [`Retry`] of `read_file`.)
fn look_alike_read(args: &mut Value, result: &Result<ToolOutput, ToolError>) -> Option<String> {
    let Err(ToolError::NotFound {
        look_alike: Some(look_alike),
        ..
    }) = result
    else {
        return None;
    };
    let asked = args["path"].as_str().unwrap_or_default().to_owned();
    args["path"] = json!(look_alike.path);
    Some(match look_alike.why {
        LookAlikeKind::Backslashes => String::new(),
        LookAlikeKind::SimilarName => format!(
            "'{asked}' does not exist; the one file like it there, '{}', was read instead:\n",
            look_alike.path
        ),
    })
}

/// `search_text` without an exact match searches again ignoring case, saying so: a model
/// asking for "secret" most likely wants "Secret word: …" too. (The `case-fold-search` rule, a
/// [`Retry`] of `search_text`.)
fn case_fold_search(args: &mut Value, result: &Result<ToolOutput, ToolError>) -> Option<String> {
    let Ok(ToolOutput {
        matches: Some(0), ..
    }) = result
    else {
        return None;
    };
    let pattern = args["pattern"].as_str()?.to_owned();
    if args["ignore_case"] == json!(true) || pattern.to_lowercase() == pattern.to_uppercase() {
        return None;
    }
    args["ignore_case"] = json!(true);
    Some(format!(
        "no line contains '{pattern}' exactly; these contain it in another case:\n"
    ))
}

/// After each round of results one message says they come from the tools, repeats the
/// request and asks for the answer, quoted from the results, if they hold it, else the next
/// call; after a round of failures, that the request is not answered yet.
pub(crate) struct ResultsFraming;

impl Rule for ResultsFraming {
    fn name(&self) -> &'static str {
        "results-framing"
    }

    fn after_round(&mut self, all_failed: bool, facts: &Facts) -> Option<FollowUp> {
        let message = if facts.asks_for_change && !facts.changed && !all_failed {
            change_after_results(facts.request)
        } else {
            after_results(facts.request, all_failed)
        };
        Some(FollowUp {
            message,
            withdraw_tools: false,
        })
    }
}

/// The message after a round of results when a change is asked for and not made yet.
fn change_after_results(request: &str) -> String {
    format!(
        "The tool results are above; they come from the tools, not from you. The request is: \
         {}\nIt asks for a change, and no file has changed yet. If you know the change, make it \
         now: call edit_file (old_text copied exactly from the file above) or write_file. If \
         not, call the next tool you need.",
        echo(request)
    )
}

/// The message that follows a round of tool results (see [`ResultsFraming`]).
pub(crate) fn after_results(request: &str, all_failed: bool) -> String {
    let request = echo(request);
    if all_failed {
        return format!(
            "The tool call failed: the error above comes from the tool, not from you. The \
             request is not answered yet: {request}\nDo not guess. Call a tool again, correcting \
             what the error points out (for example, use a name from the listing it shows)."
        );
    }
    format!(
        "The tool results are above; they come from the tools, not from you. The request is: \
         {request}\nIf the results hold what it asks for, answer it now from them, in plain \
         words: quote the names, values or lines it asks for, not a description of what you did. \
         If not, call the next tool you need."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::steering::Ran;
    use crate::agent::tools::{ToolSettings, Toolbox};

    fn toolbox(files: &[(&str, &str)]) -> (tempfile::TempDir, Toolbox) {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            std::fs::write(dir.path().join(path), content).unwrap();
        }
        let mut settings = ToolSettings::from_config(&Default::default());
        settings.workspace = dir.path().to_path_buf();
        let toolbox = Toolbox::open(&settings).unwrap();
        (dir, toolbox)
    }

    fn facts<'a>(request: &'a str, toolbox: &'a Toolbox, ran: &'a [Ran]) -> Facts<'a> {
        Facts {
            request,
            toolbox,
            ran,
            last_round_failed: false,
            ours: &[],
            asks_for_change: false,
            changed: false,
            final_step: true,
            calls: 1,
            checks: false,
            unmet: &[],
        }
    }

    fn ran(name: &str, text: &str, ok: bool) -> Ran {
        Ran {
            call: call(name, json!({"path": "README.md"})),
            ok,
            text: text.into(),
        }
    }

    #[test]
    fn a_write_of_the_requests_example_waits_for_the_read_and_other_writes_run() {
        let (_dir, tb) = toolbox(&[("VERSION", "2.4.1\n"), ("PORT.txt", "8080\n")]);
        let mut rule = HeldWrites::default();
        let request = "Read VERSION, then write its version followed by -final into release.txt \
                       (for example 1.0-final).";
        let mut calls = vec![
            call("read_file", json!({"path": "VERSION"})),
            call(
                "write_file",
                json!({"path": "release.txt", "content": "1.0-final\n"}),
            ),
        ];
        rule.before_calls(&mut calls, &facts(request, &tb, &[]));
        assert_eq!(calls.len(), 1, "the early write is held");
        let mut batched = vec![
            call("read_file", json!({"path": "PORT.txt"})),
            call(
                "write_file",
                json!({"path": "notes/todo.md", "content": "start\n"}),
            ),
        ];
        let mut other = HeldWrites::default();
        other.before_calls(
            &mut batched,
            &facts(
                "Tell me the port in PORT.txt, and create notes/todo.md with the line start.",
                &tb,
                &[],
            ),
        );
        assert_eq!(batched.len(), 2, "an independent write runs as batched");
    }

    #[test]
    fn a_tool_word_the_results_hold_is_quoted_not_described() {
        let (_dir, tb) = toolbox(&[("README.md", "Run `list_dir` first.\n")]);
        let request = "What does README.md say to run first?";
        let quoted = [ran("read_file", "Run `list_dir` first.\n", true)];
        let mut rule = Once::new(AnswerNotTools);
        assert!(
            rule.before_answer(
                "It says to run `list_dir` first.",
                &facts(request, &tb, &quoted)
            )
            .is_none()
        );
        let plain = [ran("read_file", "Launch the app.\n", true)];
        assert!(matches!(
            rule.before_answer("Use the `list_dir` tool.", &facts(request, &tb, &plain)),
            Some(Verdict::Nudge { tools: false, .. })
        ));
    }

    #[test]
    fn the_change_reminder_comes_once_and_only_for_a_change_not_made() {
        let (_dir, tb) = toolbox(&[("calc.py", "x\n")]);
        let mut rule = Once::new(ChangeReminder);
        // The model's reading: a change (in any language: the request's words are not read).
        let request = "calc.py'deki hatayı düzelt.";
        let mut f = facts(request, &tb, &[]);
        f.asks_for_change = true;
        assert!(rule.before_answer("Done.", &f).is_some());
        assert!(rule.before_answer("Done.", &f).is_none(), "once");
        let mut fresh = Once::new(ChangeReminder);
        f.changed = true;
        assert!(fresh.before_answer("Done.", &f).is_none());
        assert!(
            Once::new(ChangeReminder)
                .before_answer("It adds.", &facts("What does calc.py do?", &tb, &[]))
                .is_none()
        );
    }

    #[test]
    fn a_tests_imports_of_the_workspace_are_its_sources() {
        let (dir, tb) = toolbox(&[
            ("greet.py", "x\n"),
            ("util.py", "x\n"),
            ("test_x.py", "x\n"),
        ]);
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        std::fs::write(dir.path().join("pkg/mod.py"), "x\n").unwrap();
        let test = "import unittest, util\nfrom greet import greet\nfrom pkg.mod import f\n\
                    import os.path\nfrom . import rel\nfrom test_x import t\n    import util\nimport\n";
        assert_eq!(
            imported_sources(test, tb.workspace()),
            ["util.py", "greet.py", "pkg/mod.py"]
        );
        assert!(imported_sources("テスト 🧪\nfrom ", tb.workspace()).is_empty());
    }

    #[test]
    fn examples_are_the_values_of_an_aside() {
        for request in [
            "write it into release.txt (for example 1.0-final).",
            "escríbelo en release.txt (por ejemplo 1.0-final).",
            "andika kwenye release.txt (kwa mfano 1.0-final)",
            "release.txt に書いて（例：1.0-final）",
        ] {
            assert_eq!(examples(request), ["1.0-final"], "{request}");
        }
        assert_eq!(examples("(42, or foo) and (x7"), ["42", "x7"]);
        assert!(examples("例えば").is_empty());
        assert!(examples("no example here (none)").is_empty());
        assert!(examples("(").is_empty());
    }
}
