//! What the tool loop does to keep a small model on track: tool calls written as text, answers
//! cluttered with echoed markup, and the same call made again and again.
//!
//! Small local models (1–3 B parameters) pick the right first tool but often fumble what comes
//! after: they write the next call as JSON in the reply text instead of as `tool_calls`, echo
//! the `<tool_response>` block back as their answer, repeat a call whose result they already
//! have, or end with an empty reply. [`step`](super::step) uses these helpers so that such a
//! task still ends with the answer, or fails saying why; a model that answers at once is not
//! affected (its single reply is the answer, unchanged).
//!
//! ```text
//! reply text                                        taken as
//! {"name":"read_file","arguments":{"path":"a"}}     a call (bare JSON naming an offered tool)
//! a fenced block (json) holding {"name": …}        a call (fenced)
//! <tool_call>{"name": …}</tool_call>                a call (Qwen/Hermes tags)
//! <tool_response>x</tool_response> The word is y.   answer "The word is y."
//! <tool_response>x</tool_response>                  nothing: markup-only, recovered or failed
//! ```

use serde_json::Value;

use crate::ollama::{ToolCall, ToolCallFunction};

/// Tools whose result depends only on their arguments and the workspace: a repeated identical
/// call is answered from the earlier result until a tool that changes things runs.
const READ_ONLY_TOOLS: [&str; 3] = ["list_dir", "read_file", "search_text"];
/// Tools that change files: held back when they arrive in the same reply as a read.
const WRITE_TOOLS: [&str; 2] = ["write_file", "edit_file"];
/// A command may change the workspace (so it drops what the reading tools returned), but the
/// same command again with nothing run in between is answered from its earlier output.
const COMMAND_TOOL: &str = "run_command";

/// Chat-template tags a small model copies into its text; never part of an answer.
const BLOCK_TAGS: [&str; 3] = ["tool_response", "tool_call", "tool_result"];
const LINE_TOKENS: [&str; 4] = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>"];

/// Tool calls written in the reply text: the whole reply as one JSON call (or an array of
/// calls), fenced JSON blocks, or `<tool_call>` tags. Only objects naming one of `offered` with
/// object arguments (`arguments` or `parameters`) count; an empty result means the text is an
/// answer, not a call.
pub(crate) fn calls_in_text(text: &str, offered: &[&str]) -> Vec<ToolCall> {
    let mut candidates: Vec<&str> = Vec::new();
    candidates.extend(tagged(text, "tool_call"));
    candidates.extend(fenced(text));
    let trimmed = text.trim();
    if candidates.is_empty() && (trimmed.starts_with('{') || trimmed.starts_with('[')) {
        candidates.push(trimmed);
    }
    let mut calls = Vec::new();
    for candidate in candidates {
        let Ok(value) = serde_json::from_str::<Value>(candidate.trim()) else {
            continue;
        };
        let objects = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        for object in objects {
            if let Some(call) = as_call(&object, offered) {
                calls.push(call);
            }
        }
    }
    calls
}

fn as_call(object: &Value, offered: &[&str]) -> Option<ToolCall> {
    // `{"name", "arguments"}`, or OpenAI's `{"function": {"name", "arguments"}}`.
    let object = object
        .get("function")
        .filter(|f| f.is_object())
        .unwrap_or(object);
    let name = object.get("name")?.as_str()?;
    if !offered.contains(&name) {
        return None;
    }
    let arguments = match object.get("arguments").or_else(|| object.get("parameters")) {
        None => Value::Object(serde_json::Map::new()),
        Some(Value::Object(map)) => Value::Object(map.clone()),
        // Some models send the arguments as a JSON string.
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => return None,
        },
        Some(_) => return None,
    };
    Some(ToolCall {
        id: None,
        function: ToolCallFunction {
            index: None,
            name: name.to_owned(),
            arguments,
        },
    })
}

/// The insides of `<tag>…</tag>` blocks (an unclosed last block runs to the end).
fn tagged<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let inner = &rest[start + open.len()..];
        match inner.find(&close) {
            Some(end) => {
                found.push(&inner[..end]);
                rest = &inner[end + close.len()..];
            }
            None => {
                found.push(inner);
                break;
            }
        }
    }
    found
}

/// The insides of ``` fenced blocks (the info string, e.g. `json`, dropped).
fn fenced(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let info = after[..body_start].trim();
        if !info.is_empty() && !info.chars().all(|c| c.is_ascii_alphanumeric()) {
            // Not an info string: the block starts on the fence's own line (```{"name"…}```).
            let body = &after[..after.find("```").unwrap_or(after.len())];
            found.push(body);
            rest = after.get(body.len() + 3..).unwrap_or("");
            continue;
        }
        let body = &after[body_start..];
        match body.find("```") {
            Some(end) => {
                found.push(&body[..end]);
                rest = &body[end + 3..];
            }
            None => break,
        }
    }
    found
}

/// The reply text without echoed tool markup: `<tool_response>`/`<tool_call>`/`<tool_result>`
/// blocks and chat-template tokens removed, trimmed; empty when nothing else was said. Text
/// without such markup comes back unchanged.
pub(crate) fn clean_answer(text: &str) -> String {
    let marked = BLOCK_TAGS
        .iter()
        .any(|tag| text.contains(&format!("<{tag}>")) || text.contains(&format!("</{tag}>")))
        || LINE_TOKENS.iter().any(|token| text.contains(token));
    if !marked {
        return text.to_owned();
    }
    let mut out = text.to_owned();
    for tag in BLOCK_TAGS {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        while let Some(start) = out.find(&open) {
            let end = out[start..]
                .find(&close)
                .map_or(out.len(), |e| start + e + close.len());
            out.replace_range(start..end, "");
        }
        // A stray closing tag (the model began its copy mid-block).
        out = out.replace(&close, "");
    }
    for token in LINE_TOKENS {
        out = out.replace(token, "");
    }
    // `<|im_start|>assistant` leaves the role name on its own line.
    let kept: Vec<&str> = out
        .lines()
        .filter(|line| !matches!(line.trim(), "assistant" | "user" | "tool"))
        .collect();
    kept.join("\n").trim().to_owned()
}

/// Phrases with which a model claims to use a tool (lowercase).
const CLAIMS: [&str; 12] = [
    "i used",
    "i called",
    "i ran",
    "i will",
    "i'll",
    "let me",
    "i have used",
    "using the",
    "i can use",
    "you can use",
    "i would need to",
    "i need to",
];

/// Whether an answer given before any tool ran only describes using an offered tool ("To find
/// the word I used the `read_file` function…"): a small model's way of not calling it.
pub(crate) fn describes_a_call(text: &str, offered: &[&str]) -> bool {
    let lower = text.to_lowercase();
    offered.iter().any(|tool| lower.contains(tool)) && CLAIMS.iter().any(|c| lower.contains(c))
}

/// Whether `text` names one of the `offered` tools (`read_file`, `search_text`, …) as a word.
pub(crate) fn names_a_tool(text: &str, offered: &[&str]) -> bool {
    let lower = text.to_lowercase();
    offered.iter().any(|tool| {
        lower.match_indices(tool).any(|(at, _)| {
            let word = |c: char| c.is_alphanumeric() || c == '_';
            let before = lower[..at].chars().next_back().is_none_or(|c| !word(c));
            let after = lower[at + tool.len()..]
                .chars()
                .next()
                .is_none_or(|c| !word(c));
            before && after
        })
    })
}

/// The first file or folder the request names (a word with a `.` or `/` inside, quotes and
/// punctuation around it dropped) that exists in the workspace.
pub(crate) fn named_file(request: &str, workspace: &super::tools::Workspace) -> Option<String> {
    request
        .split_whitespace()
        .map(|word| {
            let around = |c: char| {
                matches!(
                    c,
                    '`' | '\'' | '"' | ',' | ';' | ':' | '?' | '!' | '(' | ')'
                )
            };
            // A leading `.` belongs to the path (`./a`, `.env`); a trailing one ends the
            // sentence, also after a closing quote (`` `a.txt`. ``).
            word.trim_start_matches(around)
                .trim_end_matches(|c: char| around(c) || c == '.')
        })
        .filter(|word| {
            word.len() > 2
                && word[1..].contains(['.', '/'])
                && word.chars().any(char::is_alphanumeric)
        })
        .find_map(|word| {
            if workspace.existing(word).is_ok() {
                return Some(word.to_owned());
            }
            // `.\\notes.txt`: a small model writes Windows separators (escaped or not).
            let slashed = word.replace('\\', "/");
            (slashed != word && workspace.existing(&slashed).is_ok()).then_some(slashed)
        })
        .or_else(|| by_stem(request, workspace))
}

/// Shortest word [`by_stem`] takes for a file's name.
const MIN_STEM_CHARS: usize = 4;

/// The file of the workspace's top folder whose name without its extension is a word of
/// `text` ("the README" for `README.md`), compared without case; the one file only, words of
/// at least [`MIN_STEM_CHARS`] characters.
fn by_stem(text: &str, workspace: &super::tools::Workspace) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|w| w.chars().count() >= MIN_STEM_CHARS)
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        return None;
    }
    let mut found = std::fs::read_dir(workspace.root())
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| {
            std::path::Path::new(name)
                .file_stem()
                .and_then(|stem| stem.to_str())
                .is_some_and(|stem| stem != name && words.contains(&stem.to_lowercase()))
        });
    let name = found.next()?;
    if found.next().is_some() {
        return None;
    }
    workspace
        .existing(&name)
        .is_ok_and(|p| p.is_file())
        .then_some(name)
}

/// Verbs with which a request asks for a file to be written (lowercase words).
const WRITE_VERBS: [&str; 5] = ["write", "save", "create", "store", "put"];

/// The file a request asks to be written that is not there yet: the request has a writing
/// verb ("write … into count.txt") and names a file (a word with a `.` inside) that does not
/// exist in the workspace. `None` otherwise.
pub(crate) fn file_to_write(request: &str, workspace: &super::tools::Workspace) -> Option<String> {
    let lower = request.to_lowercase();
    let asks = lower
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| WRITE_VERBS.contains(&w));
    if !asks {
        return None;
    }
    request
        .split_whitespace()
        .map(|word| {
            word.trim_matches(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '/')))
        })
        .filter(|word| {
            let name = word.rsplit('/').next().unwrap_or(word);
            name.len() > 2
                && name[1..name.len() - 1].contains('.')
                && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'))
                // An extension: `count.txt`, not a version (`2.4.1`, `1.0-final`).
                && name.rsplit('.').next().is_some_and(|ext| {
                    ext.len() <= 8
                        && ext.starts_with(|c: char| c.is_alphabetic())
                        && ext.chars().all(char::is_alphanumeric)
                })
        })
        .find(|word| workspace.existing(word).is_err())
        .map(str::to_owned)
}

/// The reminder when the model answered without writing the file the request asks for.
pub(crate) fn write_still_to_do(request: &str, file: &str) -> String {
    format!(
        "The request asks for '{file}' to be written, and nothing has been written yet. The \
         request is: {}\nMake the write_file call now, with what the tool results hold, then \
         answer.",
        echo(request)
    )
}

/// `answer` without the lines it copied from the loop's own messages (`ours`: the results
/// framing and steering it was sent), which a small model sometimes returns as its answer.
/// Empty when nothing else is left.
pub(crate) fn without_echo<'a>(answer: &str, ours: impl Iterator<Item = &'a str>) -> String {
    let copied: std::collections::HashSet<&str> = ours
        .flat_map(str::lines)
        .map(str::trim)
        .filter(|line| line.len() >= 20)
        .collect();
    if copied.is_empty() || !answer.lines().any(|l| copied.contains(l.trim())) {
        return answer.to_owned();
    }
    answer
        .lines()
        .filter(|line| !copied.contains(line.trim()))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

/// The read the model described instead of making (after being told to make it): the reading
/// tool it names (`read_file`, or `list_dir` for a folder) on the first existing workspace path
/// the text names. `None` when it names no reading tool or no existing path.
pub(crate) fn described_read(text: &str, toolbox: &super::tools::Toolbox) -> Option<ToolCall> {
    let offered = toolbox.enabled();
    let path = named_file(text, toolbox.workspace())?;
    let is_dir = toolbox
        .workspace()
        .existing(&path)
        .is_ok_and(|p| p.is_dir());
    let name = match (
        is_dir,
        offered.contains(&"read_file"),
        offered.contains(&"list_dir"),
    ) {
        (false, true, _) if text.contains("read_file") => "read_file",
        (true, _, true) if text.contains("list_dir") || text.contains("read_file") => "list_dir",
        _ => return None,
    };
    Some(ToolCall {
        id: None,
        function: ToolCallFunction {
            index: None,
            name: name.to_owned(),
            arguments: serde_json::json!({ "path": path }),
        },
    })
}

/// Longest piece of the request repeated after tool results.
const REQUEST_ECHO_CHARS: usize = 300;

/// The message that follows a round of tool results: it tells them apart from the model's own
/// words, repeats the request, and asks for the answer if the results hold it. When every
/// result of the round was an error it says the request is not answered yet instead (a small
/// model otherwise makes an answer up).
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

/// The message after a round whose every call failed, when the model then answered anyway
/// without any call having worked: nothing was read, so the answer is a guess.
pub(crate) fn not_a_guess(request: &str) -> String {
    format!(
        "None of your tool calls has worked yet (see the errors above), so nothing was read \
         and that answer would be a guess. The request is: {}\nDo not guess. Call a tool that \
         can find it: search_text finds a text in every file, list_dir shows what a folder \
         holds, read_file reads a file it lists. Answer once a result holds what is asked.",
        echo(request)
    )
}

/// Whether a reply's calls both read (`read_file`, `list_dir`, `search_text`) and write
/// (`write_file`, `edit_file`): the write was made before the read's result was known.
pub(crate) fn reads_and_writes(calls: &[ToolCall]) -> bool {
    calls
        .iter()
        .any(|c| READ_ONLY_TOOLS.contains(&c.function.name.as_str()))
        && calls.iter().any(is_write)
}

/// Whether the call changes files (`write_file`, `edit_file`).
pub(crate) fn is_write(call: &ToolCall) -> bool {
    WRITE_TOOLS.contains(&call.function.name.as_str())
}

/// The message after a round whose writes were held back ([`reads_and_writes`]), and until
/// they are made: the reads' results are above, and the write is asked for with them.
pub(crate) fn after_held_writes(request: &str, held: &[String]) -> String {
    format!(
        "The tool results are above; they come from the tools, not from you. The request is: \
         {}\nNothing has been written yet. Now make the {} call the request asks for, with \
         what the results hold in place of any example, then answer.",
        echo(request),
        held.join(" / "),
    )
}

/// The request as one line, cut to [`REQUEST_ECHO_CHARS`].
fn echo(request: &str) -> String {
    let mut request = request.split_whitespace().collect::<Vec<_>>().join(" ");
    if request.chars().count() > REQUEST_ECHO_CHARS {
        request = request.chars().take(REQUEST_ECHO_CHARS).collect();
        request.push('…');
    }
    request
}

/// Earlier tool results of one step, to answer a repeated identical call without running it.
#[derive(Debug, Default)]
pub(crate) struct CallMemory {
    /// (tool, arguments) → its result, for read-only tools since the last change.
    results: Vec<(String, Value, String)>,
    /// Calls answered from memory so far in this step.
    pub repeats: usize,
}

impl CallMemory {
    /// The earlier result of an identical read-only call, counting the repeat.
    pub fn recall(&mut self, call: &ToolCall) -> Option<String> {
        let found = self.earlier(call)?.to_owned();
        self.repeats += 1;
        Some(found)
    }

    /// Whether an identical read-only call ran since the last change (not counted as a repeat).
    pub fn knows(&self, call: &ToolCall) -> bool {
        self.earlier(call).is_some()
    }

    /// The remembered result of a call with the same tool and arguments.
    fn earlier(&self, call: &ToolCall) -> Option<&str> {
        let args = normalized(&call.function.arguments);
        self.results
            .iter()
            .find(|(name, a, _)| *name == call.function.name && *a == args)
            .map(|(_, _, text)| text.as_str())
    }

    /// Records a call that ran. A read-only one is remembered. A command may have changed the
    /// workspace: every remembered result is dropped, then its own output is remembered (the
    /// same command again, with nothing in between, gets that output). A write or an edit drops
    /// everything.
    pub fn record(&mut self, call: &ToolCall, result: &str) {
        let name = call.function.name.as_str();
        if !READ_ONLY_TOOLS.contains(&name) {
            self.results.clear();
        }
        if READ_ONLY_TOOLS.contains(&name) || name == COMMAND_TOOL {
            self.results.push((
                name.to_owned(),
                normalized(&call.function.arguments),
                result.to_owned(),
            ));
        }
    }
}

/// Arguments as an object whatever the model sent (an object, or a JSON string of one).
fn normalized(args: &Value) -> Value {
    match args {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| args.clone()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OFFERED: [&str; 3] = ["list_dir", "read_file", "run_command"];

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: None,
            function: ToolCallFunction {
                index: None,
                name: name.into(),
                arguments,
            },
        }
    }

    fn names(calls: &[ToolCall]) -> Vec<(&str, &Value)> {
        calls
            .iter()
            .map(|c| (c.function.name.as_str(), &c.function.arguments))
            .collect()
    }

    #[test]
    fn bare_fenced_and_tagged_json_naming_an_offered_tool_are_calls() {
        let args = json!({"path": "NOTE.txt"});
        for text in [
            r#"{"name": "read_file", "arguments": {"path": "NOTE.txt"}}"#,
            " \n{\"name\": \"read_file\", \"parameters\": {\"path\": \"NOTE.txt\"}}\n",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"NOTE.txt\"}}\n```",
            "I will read it.\n```\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"NOTE.txt\"}}\n```",
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"NOTE.txt\"}}\n</tool_call>",
            r#"[{"function": {"name": "read_file", "arguments": "{\"path\": \"NOTE.txt\"}"}}]"#,
        ] {
            let calls = calls_in_text(text, &OFFERED);
            assert_eq!(names(&calls), [("read_file", &args)], "{text:?}");
        }
        let two = "<tool_call>{\"name\": \"list_dir\"}</tool_call>\n<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call>";
        let calls = calls_in_text(two, &OFFERED);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].function.arguments, json!({}));
    }

    #[test]
    fn text_json_and_unknown_tools_stay_answers() {
        for text in [
            "The secret word is marigold.",
            r#"{"secret": "marigold"}"#,
            r#"{"name": "delete_everything", "arguments": {}}"#,
            r#"{"name": "read_file", "arguments": ["NOTE.txt"]}"#,
            "```rust\nfn main() {}\n```",
            "{not json",
            "",
        ] {
            assert!(calls_in_text(text, &OFFERED).is_empty(), "{text:?}");
        }
    }

    #[test]
    fn an_answer_describing_a_call_is_told_apart_from_an_answer() {
        assert!(describes_a_call(
            "To find the code name, I used the `read_file` function with the path docs/NOTE.txt.",
            &OFFERED
        ));
        assert!(describes_a_call("Let me run_command ls.", &OFFERED));
        assert!(!describes_a_call("The code name is bluefin.", &OFFERED));
        assert!(!describes_a_call("I used a hammer.", &OFFERED));
        assert!(!describes_a_call("read_file returns the text.", &OFFERED));
    }

    #[test]
    fn a_tool_named_as_a_word_is_told_apart_from_a_word_containing_it() {
        assert!(names_a_tool(
            "Use the `read_file` function to read it.",
            &OFFERED
        ));
        assert!(names_a_tool("The TODO is in list_dir.", &OFFERED));
        assert!(!names_a_tool("The secret word is tangerine.", &OFFERED));
        assert!(!names_a_tool("see my_read_file_helper()", &OFFERED));
    }

    #[test]
    fn a_named_path_is_found_in_quotes_before_a_full_stop_and_with_windows_separators() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        std::fs::write(dir.path().join("docs/memo.txt"), "x").unwrap();
        let ws = crate::agent::tools::Workspace::open(dir.path()).unwrap();
        for (text, found) in [
            (
                "use read_file with the path `docs/memo.txt`.",
                Some("docs/memo.txt"),
            ),
            ("the path is \"docs/memo.txt\".", Some("docs/memo.txt")),
            ("read `.\\\\docs\\\\memo.txt`.", Some(".//docs//memo.txt")),
            ("read docs\\memo.txt", Some("docs/memo.txt")),
            ("read ./docs/memo.txt.", Some("./docs/memo.txt")),
            ("read docs/other.txt", None),
            ("no path here.", None),
        ] {
            assert_eq!(named_file(text, &ws).as_deref(), found, "{text}");
        }
    }

    #[test]
    fn a_file_is_named_by_its_stem_when_it_is_the_only_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("README.md"), "# x").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::write(dir.path().join("notes.md"), "x").unwrap();
        std::fs::write(dir.path().join("data.csv"), "x").unwrap();
        let ws = crate::agent::tools::Workspace::open(dir.path()).unwrap();
        let named = |text: &str| named_file(text, &ws);
        assert_eq!(
            named("What does the readme say?").as_deref(),
            Some("README.md")
        );
        assert_eq!(named("Sum the data column.").as_deref(), Some("data.csv"));
        assert_eq!(named("Read the notes."), None, "two files have that stem");
        assert_eq!(named("What is the answer?"), None);
    }

    #[test]
    fn a_file_to_write_is_a_missing_file_named_by_a_request_that_asks_for_a_write() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("names.txt"), "x").unwrap();
        let ws = crate::agent::tools::Workspace::open(dir.path()).unwrap();
        let to_write = |text: &str| file_to_write(text, &ws);
        assert_eq!(
            to_write("Count the lines of names.txt and write the number into count.txt.")
                .as_deref(),
            Some("count.txt")
        );
        assert_eq!(
            to_write(
                "Write its version followed by -final (for example 1.0-final) into out/release.txt"
            )
            .as_deref(),
            Some("out/release.txt")
        );
        assert_eq!(
            to_write("Save the list as `list.md`.").as_deref(),
            Some("list.md")
        );
        assert_eq!(
            to_write("Write the number into names.txt."),
            None,
            "it exists"
        );
        assert_eq!(
            to_write("What does count.txt hold?"),
            None,
            "no write asked"
        );
        assert_eq!(to_write("Write the version 2.4.1 down."), None);
    }

    #[test]
    fn lines_copied_from_the_loops_own_messages_are_no_answer() {
        let ours = [
            "The tool results are above; they come from the tools, not from you. The \
                     request is: change it.\nIf the results hold what it asks for, answer it now.",
        ];
        assert_eq!(
            without_echo(
                "The tool results are above; they come from the tools, not from you. The \
                 request is: change it.\nIf the results hold what it asks for, answer it now.",
                ours.into_iter()
            ),
            ""
        );
        assert_eq!(
            without_echo(
                "If the results hold what it asks for, answer it now.\nThe word is changed.",
                ours.into_iter()
            ),
            "The word is changed."
        );
        assert_eq!(
            without_echo("The word is changed.", ours.into_iter()),
            "The word is changed."
        );
    }

    #[test]
    fn reads_and_writes_in_one_reply_are_told_apart_from_either_alone() {
        let reply = |names: &[&str]| names.iter().map(|n| call(n, json!({}))).collect::<Vec<_>>();
        assert!(reads_and_writes(&reply(&["read_file", "write_file"])));
        assert!(reads_and_writes(&reply(&["edit_file", "search_text"])));
        assert!(!reads_and_writes(&reply(&["read_file", "list_dir"])));
        assert!(!reads_and_writes(&reply(&["write_file", "edit_file"])));
        assert!(!reads_and_writes(&reply(&["run_command", "write_file"])));
    }

    #[test]
    fn echoed_markup_is_stripped_from_answers() {
        assert_eq!(
            clean_answer(
                "<tool_response>\nerror: 'notes.txt' does not exist\n</tool_response>\nThe word is juniper."
            ),
            "The word is juniper."
        );
        assert_eq!(
            clean_answer("<tool_response>\nThe secret word is: marigold\n</tool_response>"),
            ""
        );
        assert_eq!(
            clean_answer("<|im_start|>assistant\nmarigold<|im_end|>"),
            "marigold"
        );
        assert_eq!(clean_answer("  a < b, plain\n"), "  a < b, plain\n");
        assert_eq!(clean_answer("<tool_call>\n{\"name\": \"x\"}"), "");
    }

    #[test]
    fn repeated_read_only_calls_are_recalled_until_something_changes() {
        let read = call("read_file", json!({"path": "a"}));
        let mut memory = CallMemory::default();
        assert_eq!(memory.recall(&read), None);
        memory.record(&read, "alpha");
        // The same arguments as a JSON string are the same call.
        let as_string = call("read_file", json!("{\"path\": \"a\"}"));
        assert_eq!(memory.recall(&as_string).as_deref(), Some("alpha"));
        assert_eq!(
            memory.recall(&call("read_file", json!({"path": "b"}))),
            None
        );
        assert_eq!(memory.repeats, 1);
        assert!(memory.knows(&read));
        assert!(!memory.knows(&call("read_file", json!({"path": "b"}))));
        assert_eq!(memory.repeats, 1, "knowing is not a repeat");
        let write = call("write_file", json!({"path": "a", "content": "x"}));
        memory.record(&write, "replaced 'a'");
        assert_eq!(memory.recall(&read), None);
        assert_eq!(memory.recall(&write), None, "writes are never recalled");
        // A command drops what was read (it may have changed the files) but is recalled itself
        // until something else that changes things runs.
        memory.record(&read, "alpha");
        let ls = call("run_command", json!({"argv": ["ls"]}));
        memory.record(&ls, "a\n");
        assert_eq!(memory.recall(&read), None);
        assert_eq!(memory.recall(&ls).as_deref(), Some("a\n"));
        let other = call("run_command", json!({"argv": ["wc", "a"]}));
        memory.record(&other, "1 a\n");
        assert_eq!(memory.recall(&ls), None);
        assert_eq!(memory.recall(&other).as_deref(), Some("1 a\n"));
    }
}
