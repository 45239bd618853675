//! Reading a small model's reply text: tool calls written as text, echoed markup, described
//! calls, the files a text names. The [rules](super) use these; every function takes any text
//! and never panics on it (slices are cut only where `find`, `char_indices` or a split put the
//! cut), which `tests/properties.rs` and the `text_calls` fuzz target check.
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

use crate::agent::tools::names::{LIST_DIR, READ_FILE};
use crate::agent::tools::{Toolbox, Workspace};
use crate::ollama::{ToolCall, ToolCallFunction};

/// Chat-template tags a small model copies into its text; never part of an answer.
const BLOCK_TAGS: [&str; 3] = ["tool_response", "tool_call", "tool_result"];
const LINE_TOKENS: [&str; 4] = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>"];

/// The chat template's block of tool definitions (Qwen, Hermes), which a small model sometimes
/// copies, or imitates with a tool of its own invention, instead of answering.
const TOOLS_OPEN: &str = "<tools>";
const TOOLS_CLOSE: &str = "</tools>";

/// `text` without `<tools>…</tools>` blocks that define functions (`"function"` inside): the
/// template's, copied. A `<tools>` element of anything else (an XML file quoted) stays.
fn without_tool_definitions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(TOOLS_OPEN) {
        let inner = &rest[start + TOOLS_OPEN.len()..];
        let (body, after) = match inner.find(TOOLS_CLOSE) {
            Some(end) => (&inner[..end], &inner[end + TOOLS_CLOSE.len()..]),
            None => (inner, ""),
        };
        if body.contains("\"function\"") {
            out.push_str(&rest[..start]);
        } else {
            out.push_str(&rest[..start + TOOLS_OPEN.len()]);
            rest = inner;
            continue;
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Tool calls written in the reply text: the whole reply as one JSON call (or an array of
/// calls), fenced JSON blocks, or `<tool_call>` tags. Only objects naming one of `offered` with
/// object arguments (`arguments` or `parameters`) count; an empty result means the text is an
/// answer, not a call.
pub fn calls_in_text(text: &str, offered: &[&str]) -> Vec<ToolCall> {
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

/// The insides of ``` fenced blocks (the info string, e.g. `python`, dropped).
pub(crate) fn fenced_blocks(text: &str) -> Vec<&str> {
    fenced(text)
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
/// blocks, `<tools>` blocks of function definitions and chat-template tokens removed, trimmed; empty when nothing else was said. Text
/// without such markup comes back unchanged.
pub fn clean_answer(text: &str) -> String {
    let marked = BLOCK_TAGS
        .iter()
        .any(|tag| text.contains(&format!("<{tag}>")) || text.contains(&format!("</{tag}>")))
        || LINE_TOKENS.iter().any(|token| text.contains(token))
        || text.contains(TOOLS_OPEN);
    if !marked {
        return text.to_owned();
    }
    let mut out = without_tool_definitions(text);
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

/// Whether an answer given before any tool ran only describes using an offered tool ("To find
/// the word I used the `read_file` function…", "Voy a usar `read_file`…"): a small model's way
/// of not calling it. Told by the tool's name alone, in any language: the answer names an
/// offered tool as a word and the request does not (a question about a tool is answered by
/// naming it).
pub(crate) fn describes_a_call(text: &str, offered: &[&str], request: &str) -> bool {
    offered
        .iter()
        .any(|tool| names_word(text, tool) && !names_word(request, tool))
}

/// Whether `text` names one of the `offered` tools (`read_file`, `search_text`, …) as a word.
pub(crate) fn names_a_tool(text: &str, offered: &[&str]) -> bool {
    offered.iter().any(|tool| names_word(text, tool))
}

/// Whether `text` holds `word` (lowercase) as a word of its own, in any case.
pub(crate) fn names_word(text: &str, word: &str) -> bool {
    let lower = text.to_lowercase();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    lower.match_indices(word).any(|(at, found)| {
        let before = lower[..at].chars().next_back().is_none_or(|c| !is_word(c));
        let after = lower[at + found.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_word(c));
        before && after
    })
}

/// Whether the request names `word`, a name of the code (a definition, a value): the request
/// holds it with no letter, digit or `_` right before or after it — of its own kind: an ASCII
/// name is found in text of a script written without spaces (`greetをwelcomeに`). The
/// request's other words are not read, so this holds in any language.
pub(crate) fn request_names(request: &str, word: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    let joins = |edge: Option<char>, c: char| {
        let ascii = edge.is_some_and(|e| e.is_ascii());
        if ascii {
            c.is_ascii_alphanumeric() || c == '_'
        } else {
            c.is_alphanumeric() || c == '_'
        }
    };
    let (first, last) = (word.chars().next(), word.chars().next_back());
    request.match_indices(word).any(|(at, found)| {
        let before = request[..at].chars().next_back();
        let after = request[at + found.len()..].chars().next();
        !before.is_some_and(|c| joins(first, c)) && !after.is_some_and(|c| joins(last, c))
    })
}

/// `text` without the characters of `rest` after its first one: `rest` of "écrit" is "crit".
fn after_first_char(word: &str) -> &str {
    word.char_indices().nth(1).map_or("", |(at, _)| &word[at..])
}

/// The first file or folder the request names (a word with a `.` or `/` inside, quotes and
/// punctuation around it dropped) that exists in the workspace; else a file of the top folder
/// the text names by its stem (`README` for `README.md`, see [`by_stem`]).
pub(crate) fn named_file(request: &str, workspace: &Workspace) -> Option<String> {
    words_and_ascii_runs(request)
        .into_iter()
        .map(|word| {
            let around = |c: char| {
                matches!(
                    c,
                    '`' | '\''
                        | '"'
                        | ','
                        | ';'
                        | ':'
                        | '?'
                        | '!'
                        | '('
                        | ')'
                        | '、'
                        | '。'
                        | '「'
                        | '」'
                        | '？'
                        | '！'
                )
            };
            // A leading `.` belongs to the path (`./a`, `.env`); a trailing one ends the
            // sentence, also after a closing quote (`` `a.txt`. ``).
            word.trim_start_matches(around)
                .trim_end_matches(|c: char| around(c) || c == '.')
        })
        .filter(|word| {
            word.chars().count() > 2
                && after_first_char(word).contains(['.', '/'])
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

/// Every existing file the text names (as [`named_file`] finds one: a path-like word, or a
/// stem written as a name), in order, once each, as workspace paths; folders left out.
pub(crate) fn named_files(text: &str, workspace: &Workspace) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut push = |path: std::path::PathBuf| {
        if path.is_file() {
            let shown = workspace.display(&path);
            if !found.contains(&shown) {
                found.push(shown);
            }
        }
    };
    for word in words_and_ascii_runs(text) {
        let word = word
            .trim_start_matches(['`', '\'', '"', '(', '「'])
            .trim_end_matches(|c: char| {
                matches!(
                    c,
                    '`' | '\'' | '"' | ',' | ';' | ':' | '?' | '!' | ')' | '.' | '」'
                )
            });
        if word.chars().count() > 2
            && (after_first_char(word).contains(['.', '/']) || bare_file_name(word))
            && let Ok(path) = workspace.existing(word)
        {
            push(path);
        }
    }
    if let Some(stem) = by_stem(text, workspace)
        && let Ok(path) = workspace.existing(&stem)
    {
        push(path);
    }
    found
}

/// A file name without an ending that a request names as it is: `VERSION`, `LICENSE`,
/// `CHANGELOG` (capitals, digits and `_`), or a build file such as `Makefile`. Only a file of
/// that name in the workspace makes it one.
fn bare_file_name(word: &str) -> bool {
    const BUILD_FILES: [&str; 7] = [
        "Makefile",
        "Dockerfile",
        "Containerfile",
        "Justfile",
        "Gemfile",
        "Rakefile",
        "Procfile",
    ];
    BUILD_FILES.contains(&word)
        || (word.chars().any(|c| c.is_ascii_uppercase())
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
}

/// The whitespace-separated words of `text`, each followed by its runs of ASCII path
/// characters when it has others too: Japanese puts no space between a file name and the
/// words around it (`slugify.pyの関数`).
fn words_and_ascii_runs(text: &str) -> Vec<&str> {
    let path_char =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '\\' | '_' | '-');
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        out.push(word);
        if word.is_ascii() {
            continue;
        }
        out.extend(
            word.split(|c: char| !path_char(c))
                .filter(|run| !run.is_empty()),
        );
    }
    out
}

/// Shortest stem [`by_stem`] takes for a file's name.
const MIN_STEM_CHARS: usize = 4;

/// Whether a file's stem reads as a name rather than a word of some language: a capital
/// letter, a digit, `_` or `-` in it (`README`, `CHANGELOG`, `notes-2024`), and at least
/// [`MIN_STEM_CHARS`] characters.
fn stem_is_a_name(stem: &str) -> bool {
    stem.chars().count() >= MIN_STEM_CHARS
        && stem
            .chars()
            .any(|c| c.is_uppercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// The file of the workspace's top folder whose name without its extension is a word of
/// `text`, written as the file writes it ("according to the README" for `README.md`), when
/// that stem reads as a name ([`stem_is_a_name`]); the one such file only. Nothing else of the
/// text is read, so this holds in any language (`READMEによると`).
fn by_stem(text: &str, workspace: &Workspace) -> Option<String> {
    let words: std::collections::HashSet<&str> = words_and_ascii_runs(text)
        .into_iter()
        .flat_map(|w| w.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-')))
        .filter(|w| !w.is_empty())
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
                .is_some_and(|stem| stem != name && stem_is_a_name(stem) && words.contains(stem))
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

/// A missing file a request names (a word with an extension after a `.`, `count.txt`, not a
/// version such as `2.4.1`): the file it asks to be written, when it asks for a change.
pub(crate) fn missing_file(request: &str, workspace: &Workspace) -> Option<String> {
    words_and_ascii_runs(request)
        .into_iter()
        .map(|word| {
            word.trim_matches(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '/')))
        })
        .filter(|word| {
            let name = word.rsplit('/').next().unwrap_or(word);
            let inner = after_first_char(name);
            let inner = inner
                .char_indices()
                .next_back()
                .map_or("", |(at, _)| &inner[..at]);
            name.chars().count() > 2
                && inner.contains('.')
                && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'))
                // An extension: `count.txt`, not a version (`2.4.1`, `1.0-final`), nor a name
                // with the word after it (Korean and Japanese write no space between them:
                // `utils.py에`, `count.txtに`; their ASCII run is the name).
                && name.rsplit('.').next().is_some_and(|ext| {
                    ext.len() <= 8
                        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
                        && ext.chars().all(|c| c.is_ascii_alphanumeric())
                })
        })
        .find(|word| workspace.existing(word).is_err())
        .map(str::to_owned)
}

/// `answer` without the lines it copied from the loop's own messages (`ours`: the results
/// framing and steering it was sent), which a small model sometimes returns as its answer.
/// Empty when nothing else is left.
pub(crate) fn without_echo<'a>(answer: &str, ours: impl Iterator<Item = &'a str>) -> String {
    let copied: std::collections::HashSet<&str> = ours
        .flat_map(str::lines)
        .map(str::trim)
        .filter(|line| line.chars().count() >= 20)
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

/// The read the model described instead of making: the reading tool it names (`read_file`,
/// or `list_dir` for a folder) on the first existing workspace path the text names. `None`
/// when it names no reading tool or no existing path.
pub(crate) fn described_read(text: &str, toolbox: &Toolbox) -> Option<ToolCall> {
    let offered = toolbox.enabled();
    let path = named_file(text, toolbox.workspace())?;
    let is_dir = toolbox
        .workspace()
        .existing(&path)
        .is_ok_and(|p| p.is_dir());
    let name = match (
        is_dir,
        offered.contains(&READ_FILE),
        offered.contains(&LIST_DIR),
    ) {
        (false, true, _) if text.contains(READ_FILE) => READ_FILE,
        (true, _, true) if text.contains(LIST_DIR) || text.contains(READ_FILE) => LIST_DIR,
        _ => return None,
    };
    Some(call(name, serde_json::json!({ "path": path })))
}

/// A call of `name` with `arguments`, as the loop makes one on the model's behalf.
pub(crate) fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: None,
        function: ToolCallFunction {
            index: None,
            name: name.to_owned(),
            arguments,
        },
    }
}

/// The offered tool a reply meant to call in JSON that does not parse (`{"name": "write_file",
/// "arguments": {"content": "a "b" c"}}`): the text names it after a `"name"` key. `None`
/// when the text holds no such attempt.
pub(crate) fn broken_call<'a>(text: &str, offered: &[&'a str]) -> Option<&'a str> {
    let (_, after) = text.split_once("\"name\"")?;
    let after = after.trim_start().strip_prefix(':')?.trim_start();
    let after = after.strip_prefix('"')?;
    let (name, _) = after.split_once('"')?;
    offered.iter().copied().find(|tool| *tool == name)
}

/// Longest piece of the request repeated in the loop's messages.
const REQUEST_ECHO_CHARS: usize = 300;

/// The request as one line, cut to [`REQUEST_ECHO_CHARS`] characters.
pub(crate) fn echo(request: &str) -> String {
    let mut request = request.split_whitespace().collect::<Vec<_>>().join(" ");
    if request.chars().count() > REQUEST_ECHO_CHARS {
        request = request.chars().take(REQUEST_ECHO_CHARS).collect();
        request.push('…');
    }
    request
}

/// `test_calc.py`, `tests/x.rs`, `calc_test.go`: a file of tests, read after the code it tests.
pub(crate) fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("test") || name.contains("_test.") || path.contains("tests/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_found_as_a_whole_word_in_any_language() {
        for request in [
            "Rename greet to welcome in hello.py.",
            "greet fonksiyonunun adını welcome yap.",
            "Badilisha jina la greet kuwa welcome.",
            "greetをwelcomeに名前変更して",
            "「greet」",
        ] {
            assert!(request_names(request, "greet"), "{request}");
            assert!(!request_names(request, "gree"), "{request}");
        }
        assert!(!request_names("greeting", "greet"));
        assert!(!request_names("old_greet()", "greet"));
        assert!(request_names("1.4.2'den 1.5.0'a", "1.4.2"));
        assert!(!request_names("11.4.2", "1.4.2"));
        assert!(!request_names("修复函数名", "函数名"));
        assert!(!request_names("anything", ""));
    }
    use serde_json::json;

    const OFFERED: [&str; 3] = ["list_dir", "read_file", "run_command"];

    /// A workspace of `files` (paths from its root, folders made as needed), each holding `x`:
    /// what the file-naming functions look at is which files there are, not what they hold.
    fn workspace_of(files: &[&str]) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        for file in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    /// `find` on each `(text, the file it should find)`, in a workspace of `files`.
    fn finds(
        find: fn(&str, &Workspace) -> Option<String>,
        files: &[&str],
        cases: &[(&str, Option<&str>)],
    ) {
        let (_dir, ws) = workspace_of(files);
        for (text, found) in cases {
            assert_eq!(find(text, &ws).as_deref(), *found, "{text}");
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
    fn files_without_an_ending_are_named_when_the_workspace_has_them() {
        let (_dir, ws) = workspace_of(&["VERSION", "package.json", "Makefile", "JSON_NOTES"]);
        assert_eq!(
            named_files(
                "Bump the version from 1.4.2 to 1.5.0 in both VERSION and package.json.",
                &ws
            ),
            ["VERSION", "package.json"]
        );
        assert_eq!(
            named_files("Add a clean target to the Makefile.", &ws),
            ["Makefile"]
        );
        // A capital word that names no file is no file name.
        assert!(named_files("Explain the JSON format.", &ws).is_empty());
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
        let find = "What is the code name in docs/NOTE.txt?";
        for (text, request, describes) in [
            (
                "To find the code name, I used the `read_file` function with the path docs/NOTE.txt.",
                find,
                true,
            ),
            ("Let me run_command ls.", find, true),
            // The same in other languages: the tool's name is what tells.
            (
                "Para encontrarlo, uso `read_file` con docs/NOTE.txt.",
                find,
                true,
            ),
            ("まず read_file で docs/NOTE.txt を読みます。", find, true),
            ("The code name is bluefin.", find, false),
            ("I used a hammer.", find, false),
            ("see my_read_file_helper()", find, false),
            // A question about a tool is answered by naming it.
            (
                "read_file returns the text.",
                "What does read_file return?",
                false,
            ),
        ] {
            assert_eq!(
                describes_a_call(text, &OFFERED, request),
                describes,
                "{text}"
            );
        }
    }

    #[test]
    fn a_tool_named_as_a_word_is_told_apart_from_a_word_containing_it() {
        for (text, names) in [
            ("Use the `read_file` function to read it.", true),
            ("The TODO is in list_dir.", true),
            ("The secret word is tangerine.", false),
            ("see my_read_file_helper()", false),
        ] {
            assert_eq!(names_a_tool(text, &OFFERED), names, "{text}");
        }
    }

    #[test]
    fn a_named_path_is_found_in_quotes_before_a_full_stop_and_with_windows_separators() {
        finds(
            named_file,
            &["docs/memo.txt"],
            &[
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
            ],
        );
    }

    #[test]
    fn a_file_is_named_by_its_stem_when_it_is_the_only_one() {
        finds(
            named_file,
            &[
                "README.md",
                "notes-2024.txt",
                "notes-2024.md",
                "data.csv",
                "CHANGELOG.md",
            ],
            &[
                ("What does the README say?", Some("README.md")),
                ("READMEによると、何をしますか？", Some("README.md")),
                ("CHANGELOG inasema nini?", Some("CHANGELOG.md")),
                // Two files have that stem.
                ("Read notes-2024.", None),
                // A word of a language, whichever: no file's name.
                ("Sum the data column.", None),
                ("What does the readme say?", None),
                ("What is the answer?", None),
            ],
        );
    }

    #[test]
    fn a_missing_file_is_a_name_with_an_extension_that_is_not_there() {
        finds(
            missing_file,
            &["names.txt"],
            &[
                (
                    "Count the lines of names.txt and write the number into count.txt.",
                    Some("count.txt"),
                ),
                (
                    "Write its version followed by -final (for example 1.0-final) into out/release.txt",
                    Some("out/release.txt"),
                ),
                ("Save the list as `list.md`.", Some("list.md")),
                ("result.txtというファイルを作って", Some("result.txt")),
                // It exists.
                ("Write the number into names.txt.", None),
                ("Write the version 2.4.1 down.", None),
                // A name starting with é.
                ("é.txt", Some("é.txt")),
                // A particle written on the name: the name alone.
                ("names.txt에 줄을 추가해 주세요", None),
                ("result.txt에 저장해 주세요", Some("result.txt")),
                ("count.txtに数を書いてください", Some("count.txt")),
            ],
        );
    }

    #[test]
    fn a_named_file_is_found_in_japanese_text() {
        finds(
            named_file,
            &["slugify.py"],
            &[
                (
                    "slugify.pyの関数 slugify が何をするか説明して",
                    Some("slugify.py"),
                ),
                ("この関数が何をするか一文で説明してください。", None),
            ],
        );
    }

    #[test]
    fn a_broken_call_names_the_tool_it_meant() {
        let offered = ["read_file", "write_file"];
        assert_eq!(
            broken_call(
                r#"{"name": "write_file", "arguments": {"content": "a "b" c"}}"#,
                &offered
            ),
            Some("write_file")
        );
        assert_eq!(broken_call(r#"{"name": "format_disk"}"#, &offered), None);
        assert_eq!(broken_call("the name is write_file", &offered), None);
        assert_eq!(broken_call("\"name\": \"", &offered), None);
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
        // The template's tool definitions, copied or imitated: no answer. A `<tools>` element
        // of a quoted file is text.
        assert_eq!(
            clean_answer(
                "<tools>\n{\"function\": {\"name\": \"get_timeout\", \"parameters\": {}}, \"type\": \"function\"}\n</tools>"
            ),
            ""
        );
        assert_eq!(
            clean_answer("<tools>{\"type\": \"function\"}</tools> The timeout is 45."),
            "The timeout is 45."
        );
        assert_eq!(
            clean_answer("The file has <tools><hammer/></tools> in it."),
            "The file has <tools><hammer/></tools> in it."
        );
        assert_eq!(clean_answer("<tools> {\"function\""), "");
    }
}
