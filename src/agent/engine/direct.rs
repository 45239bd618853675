//! The `files` policy: a small model's task with the workspace's files in the prompt, each
//! changed file written whole in the reply, and the project's own checks after.
//!
//! A 1.5B model in a tool loop spends most of its calls finding and reading files, and often
//! describes a change instead of making it. Given the files up front and asked for each file
//! it changes, whole, it makes the change in one call (aider measured the same: weak models
//! edit best in its "whole" format). So where the workspace's text files fit in the prompt,
//! a task of a small model runs as:
//!
//! ```text
//! files read (each an execute_tool span; the model has "read" them, so writes may follow)
//! checks before any change (agent.checks, else the workspace's own test command)
//! one JSON-schema call: what the request asks — a change? tests written? the failing checks fixed?
//! a change:   files + request → reply: `path` line + fenced whole file, per changed file
//!             → each written through write_file (approvals, no-blind-overwrite, format checks)
//!             → checks; their failures, or a refused write, go back; at most MAX_EDIT_CALLS
//! an answer:  files + request → a Python snippet (JSON) → run in the sandbox → what it
//!             printed + request → reply → the answer (see `probe`)
//! ```
//!
//! Whether a change was asked is the model's reading of the request, in any language, not a
//! word list; whether it was done is the workspace's (the runner fails a change asked for that
//! changed nothing, and checks that end worse, or failing ones the model said were the
//! request's). Nothing the model writes is dropped in silence: a block that cannot be written
//! (no file named, lines left out as `...`, a refused write) is named back to it.

use std::fmt::Write as _;
use std::ops::ControlFlow;

use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::agent::engine::approval::Gate;
use crate::agent::engine::files_task::{Direct, WorkspaceFile};
use crate::agent::engine::held_to;
use crate::agent::engine::probe;
use crate::agent::engine::step::{Engine, StepError, one_line};
use crate::agent::engine::step_event::StepEvent;
use crate::agent::engine::step_progress::Progress;
use crate::agent::judge::checks;
use crate::agent::steering::text::call;
use crate::agent::tools::names::{DELETE_FILE, READ_FILE, WRITE_FILE};
use crate::agent::tools::{CallError, NOT_THE_PROJECTS, ToolError, Toolbox, parse_problem};
use crate::ollama::{Message, Role, ToolCall};

/// Most files put in the prompt, the largest one, and all of them together: beyond these the
/// task runs the tool loop (a small model copies a short file faithfully, a long one not, and
/// the files and the whole-file reply must fit its context window together).
const MAX_FILES: usize = 16;
const MAX_FILE_BYTES: u64 = 6 * 1024;
const MAX_TOTAL_BYTES: usize = 10 * 1024;
/// Most model calls writing files: the first, and the rounds after a refused write or failed
/// checks.
const MAX_EDIT_CALLS: usize = 4;
/// The temperature of a call after a reply that changed nothing (greedy decoding would
/// repeat it).
const RETRY_TEMPERATURE: f64 = 0.6;

/// The workspace's text files when they fit in the prompt (see [`MAX_FILES`]); `None` when
/// they do not, or one is not text.
fn fitting_files(toolbox: &Toolbox) -> Option<Vec<String>> {
    let ws = toolbox.workspace();
    let mut paths = Vec::new();
    let mut total = 0u64;
    let mut fits = true;
    ws.walk_files(&NOT_THE_PROJECTS, |path| {
        let size = std::fs::symlink_metadata(&path).map_or(u64::MAX, |m| m.len());
        total = total.saturating_add(size);
        if paths.len() >= MAX_FILES || size > MAX_FILE_BYTES || total > MAX_TOTAL_BYTES as u64 {
            fits = false;
            return ControlFlow::Break(());
        }
        paths.push(ws.display(&path));
        ControlFlow::Continue(())
    });
    paths.sort();
    fits.then_some(paths)
}

/// Reads the files through the toolbox (each call is a tool run in the trace, and a file read
/// may be written after); `None` when one is not text.
async fn read_files(
    toolbox: &Toolbox,
    paths: Vec<String>,
    cancel: &CancellationToken,
) -> Result<Option<Vec<WorkspaceFile>>, StepError> {
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let call = call(READ_FILE, json!({ "path": path }));
        match toolbox.execute(&call, cancel).await {
            Ok(out) => files.push(WorkspaceFile {
                path,
                text: out.text,
            }),
            Err(CallError::Cancelled) => return Err(StepError::Cancelled),
            // Binary, unreadable: not a workspace the prompt can show.
            Err(CallError::RespondToModel(_)) => return Ok(None),
        }
    }
    Ok(Some(files))
}

/// Whether the `files` policy runs this task: the profile asks for it, the task has no
/// images, and the model may read and write files. A planned task runs each step so, one
/// after the other, each with the files as the steps before left them.
pub(crate) fn applies(engine: &Engine, images: bool) -> bool {
    engine.model.files
        && !images
        && engine
            .toolbox
            .as_ref()
            .is_some_and(|t| t.get(READ_FILE).is_some() && t.get(WRITE_FILE).is_some())
}

/// The files, the checks before any change, and the model's reading of the request; `None`
/// when the files do not fit (the tool loop runs the task) or the model's reading is not the
/// JSON asked for.
pub(crate) async fn prepare(
    engine: &Engine,
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<Option<Direct>, StepError> {
    let Some(toolbox) = engine.toolbox.as_deref() else {
        return Ok(None);
    };
    let Some(paths) = fitting_files(toolbox) else {
        return Ok(None);
    };
    let Some(files) = read_files(toolbox, paths, cancel).await? else {
        return Ok(None);
    };
    let failing = crate::agent::engine::reading::failing_before(engine, toolbox, cancel).await?;
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let Some(intent) = crate::agent::engine::reading::read_intent(
        engine,
        &names,
        failing.as_deref(),
        progress,
        cancel,
    )
    .await?
    else {
        return Ok(None);
    };
    info!(
        task_id = %progress.task.id,
        files = files.len(),
        change = intent.change,
        tests = intent.tests,
        fix_failing = intent.fix_failing,
        "files policy: the model's reading of the request"
    );
    Ok(Some(Direct {
        files,
        intent,
        failing,
    }))
}

/// The end of `text`, at most `max` bytes, on a character boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

const WHOLE_FILE_FORMAT: &str = "To change a file, write its path on a line of its own, then \
    its complete new content in a fenced code block: every line of the file, the unchanged \
    ones too, never `...` in place of lines. To create a file, do the same with its new path. \
    Write only the files that change. After the files, say in one or two sentences what you \
    changed.";

/// The files, as a message of their own before the request.
fn files_message(direct: &Direct) -> String {
    if direct.files.is_empty() {
        return "The project has no files yet.".to_owned();
    }
    let mut text = String::from("The project's files, as they are now:\n\n");
    for file in &direct.files {
        let fence = fence_for(&file.text);
        let _ = write!(text, "{}\n{fence}\n{}", file.path, file.text);
        if !file.text.ends_with('\n') && !file.text.is_empty() {
            text.push('\n');
        }
        let _ = writeln!(text, "{fence}");
        // What the workspace shows is wrong with it, for a format read here.
        if let Some(problem) = parse_problem(&file.path, &file.text) {
            let _ = writeln!(text, "({problem})");
        }
        text.push('\n');
    }
    text.truncate(text.trim_end().len());
    text
}

/// The request (after the checks that fail now), the plan's step to do when the task is
/// planned, and for a change how to write it.
fn request_message(engine: &Engine, direct: &Direct, step: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(failing) = &direct.failing {
        let _ = write!(
            text,
            "The project's tests fail now (the test runner's output):\n{}\n\n",
            tail(failing, 2000)
        );
    }
    text.push_str(&engine.request.content);
    if let Some(step) = step {
        let _ = write!(text, "\n\n{step}");
    }
    if direct.intent.change {
        let _ = write!(text, "\n\n{WRITE_REMINDER}");
    }
    text
}

/// After the request: what a small model forgets by the end of a long prompt.
const WRITE_REMINDER: &str = "Reply with each file you change, whole: its path on a line of \
    its own, then all of its new content in a fenced code block.";

/// Lines of ours a reply may echo (the prompt's headings): not part of the answer.
const OUR_HEADINGS: [&str; 3] = [
    "The project's files, as they are now:",
    "The project has no files yet.",
    "The project's tests fail now (the test runner's output):",
];

/// A fence longer than any run of backticks in `text`.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// A fenced block of a reply, with the file it names.
#[derive(Debug, PartialEq, Eq)]
struct Block {
    /// The line before the fence (or the info string), as written.
    named: Option<String>,
    content: String,
}

/// The fenced blocks of `reply`, each with the line before it, and the text outside them.
fn blocks(reply: &str) -> (Vec<Block>, String) {
    let mut found = Vec::new();
    let mut prose = String::new();
    let mut last_line: Option<String> = None;
    let mut lines = reply.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        if ticks < 3 {
            if !trimmed.trim().is_empty() {
                last_line = Some(trimmed.trim().to_owned());
            }
            prose.push_str(line);
            prose.push('\n');
            continue;
        }
        let fence = &trimmed[..ticks];
        let info = trimmed[ticks..].trim();
        let mut content = String::new();
        let mut closed = false;
        for inner in lines.by_ref() {
            let t = inner.trim();
            if t.starts_with(fence) && t.chars().all(|c| c == '`') {
                closed = true;
                break;
            }
            content.push_str(inner);
            content.push('\n');
        }
        // The line before names the file; so may an info string that is a path (```app.py).
        // A line naming two files or more names none of them (a sentence about the change);
        // a first line inside the block that is a comment naming a file (`# app.py`) does.
        let named = if looks_like_path(info) {
            Some(info.to_owned())
        } else {
            last_line.take().filter(|l| paths_in(l).len() == 1)
        };
        let mut parts = split_files(&content);
        if let Some((Some(_), _)) = parts.first()
            && parts.len() > 1
        {
            // One block holding several files, each after a comment naming it.
            let last = parts.pop();
            for (name, text) in parts.into_iter().chain(last) {
                found.push(Block {
                    named: name,
                    content: text,
                });
            }
            last_line = None;
            if !closed {
                break;
            }
            continue;
        }
        let named = content
            .lines()
            .find(|l| !l.trim().is_empty())
            .and_then(comment_name)
            .or(named);
        // The name line belongs to the block, not to the answer.
        if let Some(name) = &named
            && prose.trim_end().ends_with(name.as_str())
        {
            let cut = prose.trim_end().len() - name.len();
            prose.truncate(cut);
        }
        found.push(Block { named, content });
        last_line = None;
        if !closed {
            break;
        }
    }
    // The blocks' places leave runs of blank lines.
    let mut answer = String::new();
    for part in prose.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        if !answer.is_empty() {
            answer.push_str("\n\n");
        }
        answer.push_str(part);
    }
    (found, answer)
}

/// A file path in a line that names a file: `app.py`, `**src/app.py**`, `File: app.py`,
/// `### app.py:` (the last word that looks like a path).
fn name_in(line: &str) -> Option<String> {
    paths_in(line).pop()
}

/// The distinct words of `line` that look like paths, in order.
fn paths_in(line: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in line
        .split(|c: char| c.is_whitespace() || c == '`' || c == '*' || c == '\'' || c == '"')
        .map(|w| w.trim_matches(|c: char| matches!(c, ':' | ',' | '#' | '(' | ')' | '[' | ']')))
        // A sentence's end is not the path's.
        .map(|w| w.trim_end_matches(['.', ';', '!', '?']))
        .filter(|w| looks_like_path(w))
    {
        let word = word.trim_start_matches("./").to_owned();
        if !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

/// A block's content cut at each line that is only a comment naming a file (`# a.py`,
/// `// b.js`) when its first line is one and another follows: the files a model put in one
/// block, each with its name, the naming lines left out. One part, unnamed, otherwise.
fn split_files(content: &str) -> Vec<(Option<String>, String)> {
    let starts_named = content
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| comment_name(l).is_some());
    let names = content
        .lines()
        .filter(|l| comment_name(l).is_some())
        .count();
    if !starts_named || names < 2 {
        return vec![(None, content.to_owned())];
    }
    let mut parts: Vec<(Option<String>, String)> = Vec::new();
    for line in content.lines() {
        if let Some(name) = comment_name(line) {
            parts.push((Some(name), String::new()));
        } else if let Some((_, text)) = parts.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    for (_, text) in &mut parts {
        let kept = text.trim_matches('\n').len();
        let start = text.len() - text.trim_start_matches('\n').len();
        *text = format!("{}\n", &text[start..start + kept]);
    }
    parts
}

/// A relative file name or path: no spaces, a name with an extension or a known extensionless
/// name, nothing that climbs out.
fn looks_like_path(word: &str) -> bool {
    let word = word.trim_start_matches("./");
    if word.is_empty() || word.len() > 200 || word.contains(char::is_whitespace) {
        return false;
    }
    if word.starts_with('/') || word.split('/').any(|part| part == "..") {
        return false;
    }
    let name = word.rsplit('/').next().unwrap_or(word);
    let dotted = name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !ext.is_empty()
            && ext.len() <= 10
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            // `2.0.1`, `3.14`: a number, not a file name.
            && ext.chars().any(|c| c.is_ascii_alphabetic())
            && (!stem.is_empty() || name.len() > 1)
    });
    dotted
        || matches!(
            name,
            "Makefile" | "Dockerfile" | "LICENSE" | "VERSION" | "Procfile" | "Gemfile"
        )
}

/// A file the reply deletes or moves, in a shell block of its own: `rm old.py`, `git rm
/// old.py`, `mv helpers.py utils.py`, `git mv a b` — commands, the same in any language.
#[derive(Debug, PartialEq, Eq)]
enum FileCommand {
    Delete(String),
    Move { from: String, to: String },
}

impl FileCommand {
    /// Whether the file it deletes or moves is one of `files`.
    fn names_one_of(&self, files: &[WorkspaceFile]) -> bool {
        let (FileCommand::Delete(path) | FileCommand::Move { from: path, .. }) = self;
        let path = path.trim_start_matches("./");
        files.iter().any(|f| f.path == path)
    }
}

/// The file commands of a block that holds only them (blank lines, `#` comments and a `$ `
/// prompt aside); `None` for any other block. Anything a shell would expand or redirect, or a
/// flag other than `-f`/`-v`, makes it another block: the block is no plain list of files.
fn file_commands(content: &str) -> Option<Vec<FileCommand>> {
    let mut found = Vec::new();
    for line in content.lines() {
        let line = line.trim();
        let line = line.strip_prefix('$').map_or(line, str::trim_start);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = shlex::split(line)?;
        let words = match words.as_slice() {
            [git, rest @ ..] if git == "git" => rest,
            all => all,
        };
        let (command, args) = words.split_first()?;
        let args: Vec<String> = args
            .iter()
            .filter(|a| !matches!(a.as_str(), "-f" | "-v" | "-fv" | "--"))
            .cloned()
            .collect();
        if args.iter().any(|a| {
            a.is_empty()
                || a.starts_with('-')
                || a.contains(['*', '?', '$', '`', '|', ';', '&', '>', '<', '~', '{'])
        }) {
            return None;
        }
        match (command.as_str(), args.as_slice()) {
            ("rm", paths) if !paths.is_empty() => {
                found.extend(paths.iter().cloned().map(FileCommand::Delete));
            }
            ("mv", [from, to]) => found.push(FileCommand::Move {
                from: from.clone(),
                to: to.clone(),
            }),
            _ => return None,
        }
    }
    (!found.is_empty()).then_some(found)
}

/// A line that stands for lines it leaves out: `…`, a comment starting with `...` (`# ...`,
/// `// ... rest`), or `...` alone at the top level (indented, it is Python's `...` body).
fn elides(content: &str) -> bool {
    content.lines().any(|line| {
        let t = line.trim();
        if t == "\u{2026}" {
            return true;
        }
        let commented = ["#", "//", "<!--", "--", "/*", ";"]
            .iter()
            .find_map(|marker| t.strip_prefix(marker));
        match commented {
            Some(rest) => {
                let rest = rest.trim_start();
                rest.starts_with("...") || rest.starts_with('\u{2026}')
            }
            None => t == "..." && !line.starts_with(char::is_whitespace),
        }
    })
}

/// The file a block is for: the one it names (exact, else by file name among the prompt's
/// files), a new file it names, or — unnamed — the only file the task could mean.
fn target(block: &Block, files: &[WorkspaceFile]) -> Option<String> {
    if let Some(named) = &block.named {
        let name = name_in(named).unwrap_or_else(|| named.clone());
        let name = name.trim_start_matches("./").to_owned();
        if files.iter().any(|f| f.path == name) {
            return Some(name);
        }
        let by_name: Vec<&WorkspaceFile> = files
            .iter()
            .filter(|f| f.path.rsplit('/').next() == Some(name.as_str()))
            .collect();
        if let [one] = by_name.as_slice() {
            return Some(one.path.clone());
        }
        return Some(name);
    }
    // An unnamed block: the only file, when the block is a version of it (it keeps one of
    // its definitions or lines; a script for a data file is not the data file).
    match files {
        [only] if resembles(&block.content, &only.text) => Some(only.path.clone()),
        _ => None,
    }
}

/// Whether `block` could be a version of the file `text`: the file is empty, or the block
/// keeps one of its top-level definitions or one of its non-blank lines.
fn resembles(block: &str, text: &str) -> bool {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return true;
    }
    let defined = definitions(text);
    definitions(block).iter().any(|d| defined.contains(d))
        || block.lines().map(str::trim).any(|l| lines.contains(&l))
}

/// `content` without a first line that is a comment naming `path` (how a model may name the
/// file inside its block), unless the file itself begins with that line.
fn without_name_line(content: &str, path: &str, before: Option<&str>) -> String {
    let mut lines = content.lines();
    let first = lines.by_ref().find(|l| !l.trim().is_empty());
    let names_it = first
        .and_then(comment_name)
        .is_some_and(|n| n == path || path.rsplit('/').next() == Some(n.as_str()));
    let file_has_it = first.is_some_and(|f| {
        before.is_some_and(|b| b.lines().find(|l| !l.trim().is_empty()) == Some(f))
    });
    if !names_it || file_has_it {
        return content.to_owned();
    }
    let rest: Vec<&str> = lines.collect();
    let rest = rest.join("\n");
    let rest = rest.trim_start_matches('\n');
    if rest.is_empty() {
        String::new()
    } else {
        format!("{rest}\n")
    }
}

/// `# app.py`, `// src/main.rs`: the path a first comment line names.
fn comment_name(line: &str) -> Option<String> {
    let t = line.trim();
    let rest = t
        .strip_prefix("#")
        .or_else(|| t.strip_prefix("//"))
        .or_else(|| t.strip_prefix("--"))?
        .trim();
    looks_like_path(rest).then(|| rest.trim_start_matches("./").to_owned())
}

/// Top-level definitions of a file (`def f`, `class C`, `fn f`, `function f`): their names.
fn definitions(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        let mut words = line.split(|c: char| !(c.is_alphanumeric() || c == '_'));
        let mut words = std::iter::from_fn(|| words.next()).filter(|w| !w.is_empty());
        let Some(mut first) = words.next() else {
            continue;
        };
        while matches!(first, "pub" | "async" | "export" | "static" | "crate") {
            match words.next() {
                Some(w) => first = w,
                None => break,
            }
        }
        if matches!(
            first,
            "def" | "class" | "fn" | "function" | "struct" | "enum"
        ) && let Some(name) = words.next()
        {
            names.push(name.to_owned());
        }
    }
    names
}

/// A top-level part of a source file: a definition with its body (and decorators), or the
/// lines between definitions.
#[derive(Debug)]
struct Part {
    /// The definition's name (see [`definitions`]).
    name: Option<String>,
    text: String,
}

/// The file's top-level parts: a part starts at each line in column 0 but for a closing line
/// (`}`, `};`, `)`, `end`) or one after decorators (`@…`).
fn parts(text: &str) -> Vec<Part> {
    let mut out: Vec<Part> = Vec::new();
    for line in text.split_inclusive('\n') {
        let top = !line.starts_with(char::is_whitespace) && !line.trim().is_empty();
        let closing = matches!(line.trim(), "}" | "};" | ")" | ");" | "end");
        let after_decorator = out.last().is_some_and(|p| {
            p.text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.starts_with('@'))
        });
        if top && !closing && !after_decorator || out.is_empty() {
            out.push(Part {
                name: None,
                text: String::new(),
            });
        }
        if let Some(part) = out.last_mut() {
            part.text.push_str(line);
            if part.name.is_none() && top {
                part.name = definitions(line).into_iter().next();
            }
        }
    }
    out
}

/// A line that brings in names (`import x`, `from x import y`, `use x;`, `#include`).
fn is_import(line: &str) -> bool {
    ["import ", "from ", "use ", "#include", "require "]
        .iter()
        .any(|p| line.starts_with(p))
}

/// A small model asked for the whole file often writes only the definitions it changed or
/// added. When a block holds only definitions (and imports), none of them one of the file's
/// as it is, and leaves out definitions the file has, it is that part: each definition
/// replaces the file's of the same name or is added (before a closing `if __name__` block),
/// and its imports the file lacks go first. `None` when the block is a whole file.
fn merge_partial(before: &str, block: &str) -> Option<String> {
    let new = parts(block);
    let old = parts(before);
    let old_names: Vec<&str> = old.iter().filter_map(|p| p.name.as_deref()).collect();
    let new_names: Vec<&str> = new.iter().filter_map(|p| p.name.as_deref()).collect();
    if new_names.is_empty() || old_names.iter().all(|n| new_names.contains(n)) {
        return None;
    }
    // A definition under a new name with the body of one the block leaves out: renamed, and
    // the block is the whole file.
    let body = |p: &Part| {
        p.text
            .trim_end()
            .split_once('\n')
            .map(|(_, b)| b.to_owned())
    };
    let renamed = new.iter().filter(|p| p.name.is_some()).any(|p| {
        old.iter().any(|o| {
            o.name.as_deref().is_some_and(|n| !new_names.contains(&n))
                && body(o).is_some()
                && body(o) == body(p)
        })
    });
    if renamed {
        return None;
    }
    let mut imports = Vec::new();
    for part in &new {
        if part.name.is_some() {
            // A definition as the file has it: the block is the whole file, minus what the
            // model meant to remove.
            if old
                .iter()
                .any(|o| o.text.trim_end() == part.text.trim_end())
            {
                return None;
            }
            continue;
        }
        for line in part.text.lines().filter(|l| !l.trim().is_empty()) {
            if !is_import(line) {
                return None;
            }
            if !before.lines().any(|l| l.trim_end() == line.trim_end()) {
                imports.push(line.to_owned());
            }
        }
    }
    let mut merged: Vec<String> = old.iter().map(|p| p.text.clone()).collect();
    for part in new.iter().filter(|p| p.name.is_some()) {
        let body = part.text.trim_end();
        match old.iter().position(|o| o.name == part.name) {
            Some(at) => {
                let tail = &old[at].text[old[at].text.trim_end().len()..];
                merged[at] = format!("{body}{tail}");
            }
            None => {
                let main = old
                    .iter()
                    .position(|o| o.name.is_none() && o.text.starts_with("if __name__"));
                let text = format!("{body}\n\n\n");
                match main {
                    Some(at) => merged.insert(at, text),
                    None => {
                        if let Some(last) = merged.last_mut() {
                            let trimmed = last.trim_end().len();
                            last.truncate(trimmed);
                            last.push_str("\n\n\n");
                        }
                        merged.push(format!("{body}\n"));
                    }
                }
            }
        }
    }
    let mut out = String::new();
    for line in imports {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&merged.concat());
    Some(out)
}

/// Definitions `before` had that `after` drops.
fn dropped(before: &str, after: &str) -> Vec<String> {
    let kept = definitions(after);
    definitions(before)
        .into_iter()
        .filter(|name| !kept.contains(name))
        .collect()
}

/// Whether another of the files uses one of `names` (as a word of code).
fn used_elsewhere(names: &[String], files: &[WorkspaceFile], path: &str) -> Vec<String> {
    names
        .iter()
        .filter(|name| {
            files
                .iter()
                .filter(|f| f.path != path)
                .any(|f| mentions(&f.text, name))
        })
        .cloned()
        .collect()
}

/// `text` holds `name` as a word of code.
/// The files whose import lines (`import x`, `from x import`, `require('./x')`, `use x`) name
/// the module of `path` (its file name without the extension).
fn importers(path: &str, files: &[WorkspaceFile]) -> Vec<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let module = name.split('.').next().unwrap_or(name);
    if module.is_empty() {
        return Vec::new();
    }
    files
        .iter()
        .filter(|f| {
            f.text.lines().map(str::trim).any(|line| {
                (is_import(line) || line.contains("require(") || line.contains(" from "))
                    && mentions(line, module)
            })
        })
        .map(|f| f.path.clone())
        .collect()
}

/// A file of `files` that defines every definition of `content` (`content` is a version of
/// it: it defines nothing new), and the first of them.
fn defined_elsewhere(content: &str, files: &[WorkspaceFile]) -> Option<(String, String)> {
    let defined = definitions(content);
    let first = defined.first()?;
    files
        .iter()
        .find(|f| {
            let there = definitions(&f.text);
            defined.iter().all(|d| there.contains(d))
        })
        .map(|f| (f.path.clone(), first.clone()))
}

fn mentions(text: &str, name: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == name)
}

/// Runs the task's one step under the `files` policy: its answer, or why there is none.
pub(crate) async fn run(
    engine: &Engine,
    direct: &Direct,
    index: usize,
    step: Option<&str>,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<String, StepError> {
    let Some(toolbox) = engine.toolbox.as_deref() else {
        return Err(StepError::NoAnswer {
            tools_ran: false,
            calls: 0,
        });
    };
    // A step of a plan sees the files as the steps before it left them (read again through
    // the tools; if they no longer fit, as the task began).
    let refreshed;
    let direct = match step {
        Some(_) => {
            let files = match fitting_files(toolbox) {
                Some(paths) => read_files(toolbox, paths, cancel).await?,
                None => None,
            };
            refreshed = Direct {
                files: files.unwrap_or_else(|| direct.files.clone()),
                intent: direct.intent,
                failing: direct.failing.clone(),
            };
            &refreshed
        }
        None => direct,
    };
    let mut system = engine.settings.agent.system_prompt.clone();
    if direct.intent.change {
        system.push_str("\n\n");
        system.push_str(WHOLE_FILE_FORMAT);
    } else {
        system.push_str(
            "\n\nAnswer the request from the project's files shown. Answer in plain words; do \
             not write files.",
        );
    }
    // The files, then the request on its own at the end, where a small model attends most.
    // (No acknowledging turn between them: a 1.5B model copied "Ok." as its reply.)
    // The session's earlier turns go in as text: given as turns, the 1.5B model repeated the
    // last answer (the result of the task before) as its reply.
    let mut first = String::new();
    if !engine.history.is_empty() {
        first.push_str("Earlier in this session:\n");
        for turn in &engine.history {
            let who = if turn.role == Role::User {
                "request"
            } else {
                "result"
            };
            let _ = writeln!(first, "- {who}: {}", one_line(&turn.content, 600));
        }
        first.push('\n');
    }
    first.push_str(&files_message(direct));
    let mut messages = vec![Message::system(system), Message::user(first)];
    messages.push(Message::user(request_message(engine, direct, step)));
    // A question: what a snippet of the model's printed in the project's folder, before the
    // request (the model's answer checked against the code, not only read from it).
    if !direct.intent.change {
        match probe::run(
            engine,
            toolbox,
            &direct.files,
            &messages,
            index,
            events,
            cancel,
        )
        .await?
        {
            probe::Probe::Printed(found) => {
                if let Some(last) = messages.last_mut() {
                    last.content = format!("{found}\n\n{}", last.content);
                }
            }
            probe::Probe::Nothing => {}
            probe::Probe::Answered(text) => {
                return Ok(crate::agent::steering::clean_answer(&text));
            }
        }
    }
    // The prompt as first sent: a reply that changed nothing is answered by a fresh sample of
    // it, warmer, not by a longer conversation (shown its own unchanged copy, or asked to say
    // what must change, the 1.5B model repeated itself or only described the change).
    let initial = messages.clone();
    let mut calls = 0;
    let mut asked_empty = false;
    // Files whose dropped definitions were named back once: the next write of them stands.
    let mut warned: Vec<String> = Vec::new();
    // Files whose removed lines the model was asked about: asked once per file.
    let mut questioned: Vec<String> = Vec::new();
    // The new scripts were tried (once per task); one failed: the answer before, and what
    // the model was told of it.
    let mut tried = false;
    let mut trial: Option<(String, String)> = None;
    let mut files = direct.files.clone();
    let mut answer = String::new();
    // The model called tools although none were offered: they run, and are offered from then
    // on (its calls are its work, never dropped).
    let mut tools = false;
    // The last reply changed nothing although a change was asked.
    let mut stuck = false;
    // The replies that changed nothing: one given a third time, word for word, at the warmer
    // temperature too, says the model's answer to this prompt is settled, and further samples
    // only cost calls (the 1.5B model sent the same unchanged `cleanup.py` four times). Not
    // at the second time: on the benchmark's 34 that lost three tasks a later warm sample had
    // done (`add-function`, `fix-return-type`, `user-tabs-too`).
    let mut unchanged: Vec<String> = Vec::new();
    // What the last round named back (a block not written, a file that does not parse).
    let mut pending: Vec<String> = Vec::new();
    let max = engine.settings.agent.max_iterations.max(1);
    loop {
        if calls >= if tools { max } else { MAX_EDIT_CALLS.min(max) } {
            // Out of calls with what was named back still so: not done, saying what.
            if !pending.is_empty() {
                return Err(StepError::NotDone(pending));
            }
            return Ok(answer);
        }
        calls += 1;
        let mut request = engine.chat_request(messages.clone(), tools, None);
        if std::mem::take(&mut stuck) {
            // Greedy decoding answers the same prompt the same way: a reply that changed
            // nothing is asked again with some randomness, so the next one can differ.
            let warmer = request
                .options
                .temperature
                .unwrap_or(0.0)
                .max(RETRY_TEMPERATURE);
            request.options.temperature = Some(warmer);
        }
        let reply = engine.chat(&request, cancel).await?;
        let _ = events.send(StepEvent::Tokens {
            step: index,
            input: reply.prompt_eval_count,
            output: reply.eval_count,
        });
        let text = reply.message.content;
        if !reply.message.tool_calls.is_empty() {
            tools = true;
            let calls = reply.message.tool_calls;
            let mut turn = Message::assistant(text);
            turn.tool_calls = calls.clone();
            messages.push(turn);
            for call in &calls {
                let result = run_tool(engine, toolbox, call, index, events, cancel).await?;
                let mut message = Message::tool(call.function.name.clone(), result);
                message.tool_call_id = call.id.clone();
                messages.push(message);
            }
            continue;
        }
        if text.trim().is_empty() {
            if asked_empty {
                return Err(StepError::NoAnswer {
                    tools_ran: toolbox.ledger().changed_any(),
                    calls,
                });
            }
            asked_empty = true;
            messages.push(Message::user(
                "Your last reply was empty. Answer the request now.",
            ));
            continue;
        }
        messages.push(Message::assistant(text.clone()));
        let (found, prose) = blocks(&text);
        // Files deleted or moved by a shell block (`rm`, `mv`), or by a line of the reply that
        // is such a command and nothing else, naming the project's files: run after the files
        // are written, so a file moved and changed in one reply is written at its new path.
        let mut commands = Vec::new();
        let prose: String = prose
            .lines()
            .filter(|line| !OUR_HEADINGS.contains(&line.trim()))
            .filter(|line| {
                let listed = file_commands(line.trim().trim_matches('`')).filter(|listed| {
                    direct.intent.change && listed.iter().all(|c| c.names_one_of(&files))
                });
                match listed {
                    Some(listed) => {
                        commands.extend(listed);
                        false
                    }
                    None => true,
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        answer = crate::agent::steering::clean_answer(&prose);
        // What it was just told, said back (the 1.5B model repeated a failed trial's message
        // as its reply), is no answer.
        if messages
            .iter()
            .rev()
            .skip(1)
            .find(|m| m.role == Role::User)
            .is_some_and(|told| echoes(&answer, &told.content))
        {
            answer.clear();
        }
        if !direct.intent.change {
            if answer.trim().is_empty() {
                answer = crate::agent::steering::clean_answer(&text);
            }
            return Ok(answer);
        }
        let mut told = Vec::new();
        let mut wrote = Vec::new();
        // Whole lines a write removed, by file: asked about after the writes.
        let mut removals: Vec<(String, Vec<String>)> = Vec::new();
        for block in &found {
            if !names_a_script(block)
                && let Some(listed) = file_commands(&block.content)
            {
                commands.extend(listed);
                continue;
            }
            let Some(path) = target(block, &files) else {
                told.push(
                    "A code block had no file name on the line before it, so it was not \
                     written; put the file's path on the line before its block."
                        .to_owned(),
                );
                continue;
            };
            let before = files
                .iter()
                .find(|f| f.path == path)
                .map(|f| f.text.clone());
            let content = without_name_line(&block.content, &path, before.as_deref());
            // A new file the request names only outside the workspace (`../secret/key.txt`
            // written as `secret/key.txt`): the tools can neither read nor write there, and a
            // file of the model's own in its place answers nothing (the 1.5B model wrote a
            // key of its own invention into `secret/api_key.txt`).
            if before.is_none()
                && let Some(outside) = named_outside(&engine.request.content, &path)
            {
                told.push(format!(
                    "{path} was not written: the request names {outside}, which is outside \
                     the workspace, where no tool can read or write; answer in words what you \
                     can and cannot do about it."
                ));
                continue;
            }
            // A new file the request does not name, defining nothing a file of the project does
            // not: the model's edit of that file under another name (the 1.5B model named a
            // block after the function it fixed), not a file to create beside it.
            if before.is_none()
                && !crate::agent::steering::text::request_names(&engine.request.content, &path)
                && let Some((owner, name)) = defined_elsewhere(&content, &files)
            {
                told.push(format!(
                    "{path} is not one of the project's files and the request does not name \
                     it, so its block was not written: it defines {name}, which {owner} \
                     defines. To change {owner}, write it whole under its own path."
                ));
                continue;
            }
            // A file written out as it is: no change, and nothing to refuse.
            if before
                .as_deref()
                .is_some_and(|b| b.trim_end() == content.trim_end())
            {
                continue;
            }
            if content.trim().is_empty() {
                told.push(format!(
                    "The block for {path} was empty, so it was not written; write the file's \
                     whole content."
                ));
                continue;
            }
            if elides(&content) {
                told.push(format!(
                    "The block for {path} leaves lines out (`...`), so it was not written; \
                     write every line of the file."
                ));
                continue;
            }
            let mut content = content;
            if let Some(before) = &before {
                let defined = definitions(before);
                if let Some(merged) = merge_partial(before, &content) {
                    content = merged;
                } else if !defined.is_empty() && definitions(&content).is_empty() {
                    // A line or two meant for the file (a comment, a docstring), not the file.
                    told.push(format!(
                        "The block for {path} holds none of its definitions ({}), so it was \
                         not written; write the whole file, with the parts that stay as they \
                         are.",
                        defined.join(", ")
                    ));
                    continue;
                } else {
                    // A whole file that drops what other files use: named back once; written
                    // as it is the second time (the checks judge it).
                    let gone = used_elsewhere(&dropped(before, &content), &files, &path);
                    if !gone.is_empty() && !warned.contains(&path) {
                        warned.push(path.clone());
                        told.push(format!(
                            "The block for {path} leaves out {}, which other files use, so it \
                             was not written; write the whole file, with the parts that stay \
                             as they are.",
                            gone.join(", ")
                        ));
                        continue;
                    }
                }
            }
            match write(engine, toolbox, &path, &content, index, events, cancel).await? {
                Ok(result) => {
                    if before.as_deref() != Some(content.as_str()) {
                        wrote.push(path.clone());
                    }
                    // Lines of the file as the task found it (not lines of the task's own).
                    if let Some(original) = direct.files.iter().find(|f| f.path == path)
                        && !result.starts_with("error")
                        && !questioned.contains(&path)
                    {
                        let lines = held_to::removed_lines(&original.text, &content);
                        if !lines.is_empty() {
                            removals.push((path.clone(), lines));
                        }
                    }
                    match files.iter_mut().find(|f| f.path == path) {
                        Some(file) => file.text = content.clone(),
                        None => files.push(WorkspaceFile {
                            path: path.clone(),
                            text: content.clone(),
                        }),
                    }
                    if result.starts_with("error") {
                        told.push(format!("{path}: {result}"));
                    } else if let Some(problem) = parse_problem(&path, &content) {
                        told.push(format!("Written, but {problem}."));
                    }
                }
                Err(refused) => told.push(format!("{path}: {refused}")),
            }
        }
        // Whole lines removed: the model says whether the request asks for that; where it
        // says not, the file is named back once, written as it is (a removal the request asks
        // for stands when the model sends the file again as it is).
        for (path, lines) in removals {
            questioned.push(path.clone());
            if !held_to::asked_to_remove(engine, &path, &lines, index, events, cancel).await? {
                told.push(held_to::kept_lines_note(&path, &lines));
            }
        }
        for command in commands {
            match move_or_delete(
                engine, toolbox, &command, &mut files, &wrote, index, events, cancel,
            )
            .await?
            {
                Ok(done) => wrote.extend(done),
                Err(refused) => told.push(refused),
            }
        }
        // A file deleted that the project's code still imports: named back until it is not.
        for gone in direct
            .files
            .iter()
            .filter(|f| !files.iter().any(|n| n.path == f.path))
        {
            let users = importers(&gone.path, &files);
            if !users.is_empty() {
                told.push(format!(
                    "{} still {} {}, which was deleted; change {} to match.",
                    users.join(" and "),
                    if users.len() == 1 {
                        "imports"
                    } else {
                        "import"
                    },
                    gone.path,
                    if users.len() == 1 { "it" } else { "them" },
                ));
            }
        }
        if found.is_empty() && !toolbox.ledger().changed_any() {
            // Out of calls, the runner fails it: a change asked for, none made.
            if settled(&mut unchanged, &text) {
                return Ok(answer);
            }
            stuck = true;
            messages.clone_from(&initial);
            continue;
        }
        // A file the task changed that does not parse stays named back, also when the block
        // just written holds it as it already was.
        for problem in changed(&files, &direct.files)
            .filter_map(|f| parse_problem(&f.path, &f.text))
            .map(|problem| format!("Written, but {problem}."))
        {
            if !told.contains(&problem) {
                told.push(problem);
            }
        }
        told.dedup();
        pending.clone_from(&told);
        if !told.is_empty() {
            let mut message = told.join("\n");
            if !wrote.is_empty() {
                let _ = write!(message, "\n(Written: {}.)", wrote.join(", "));
            }
            message.push_str("\nReply with the files that still need writing, each whole.");
            messages.push(Message::user(message));
            continue;
        }
        if !toolbox.ledger().changed_any() {
            // Every block held its file as it is: a fresh, warmer sample of the first prompt.
            if settled(&mut unchanged, &text) {
                return Ok(answer);
            }
            stuck = true;
            messages.clone_from(&initial);
            continue;
        }
        match engine.checks.after_answer(toolbox, cancel).await {
            Ok(checks::Verdict::Pass) => {
                // A new script tried once as it is: one that fails is named back with its
                // output (it may need arguments: then the model says so, and it stands).
                if !tried {
                    tried = true;
                    let scripts = held_to::new_scripts(&direct.files, &files);
                    if let Some(told) = held_to::failed_trial(toolbox, &scripts, cancel).await? {
                        trial = Some((answer.clone(), told.clone()));
                        messages.push(Message::user(told));
                        continue;
                    }
                }
                // The reply after a failed trial changed nothing: it says how the script runs
                // (after the answer before it), or, saying nothing, leaves the failure so.
                if wrote.is_empty()
                    && let Some((before, told)) = trial.take()
                {
                    if answer.trim().is_empty() {
                        return Err(StepError::NotDone(vec![told]));
                    }
                    if !before.trim().is_empty() {
                        answer = format!("{before} {answer}");
                    }
                }
                if answer.trim().is_empty() {
                    let paths: Vec<&str> = changed(&files, &direct.files)
                        .map(|f| f.path.as_str())
                        .collect();
                    let gone: Vec<&str> = direct
                        .files
                        .iter()
                        .filter(|f| !files.iter().any(|now| now.path == f.path))
                        .map(|f| f.path.as_str())
                        .collect();
                    answer = match (paths.is_empty(), gone.is_empty()) {
                        (false, true) => format!("Wrote {}.", paths.join(", ")),
                        (true, false) => format!("Deleted {}.", gone.join(", ")),
                        _ => format!("Wrote {}; deleted {}.", paths.join(", "), gone.join(", ")),
                    };
                }
                return Ok(answer);
            }
            Ok(checks::Verdict::Retry { feedback, .. }) => {
                stuck = true;
                messages.push(Message::user(format!(
                    "{feedback}\nReply with each file that needs to change, whole."
                )));
            }
            Ok(checks::Verdict::GiveUp(report)) => return Err(StepError::ChecksFailed(report)),
            Err(_) => return Err(StepError::Cancelled),
        }
    }
}

/// The path outside the workspace the request names `path` by, when it names it only so: each
/// mention of `path` is the end of a path that climbs out (`../secret/key.txt`) or starts at
/// the root (`/etc/app/key.txt`, `~/key.txt`). `None` when the request names `path` as it is,
/// or not at all.
fn named_outside(request: &str, path: &str) -> Option<String> {
    let path = path.trim_start_matches("./");
    if path.is_empty() {
        return None;
    }
    let mut outside = None;
    for word in request.split_whitespace() {
        let word = word.trim_matches(|c: char| !(c.is_alphanumeric() || "./_-~".contains(c)));
        let word = word.trim_end_matches('.');
        if word == path || word == format!("./{path}") {
            return None;
        }
        let Some(head) = word.strip_suffix(path) else {
            continue;
        };
        let climbs = head.ends_with('/')
            && (head.starts_with('/')
                || head.starts_with("~/")
                || head.split('/').any(|part| part == ".."));
        if climbs {
            outside.get_or_insert_with(|| word.to_owned());
        }
    }
    outside
}

/// Whether `answer` says back what the model was `told`: five words or more, nearly all of
/// them (nine in ten) words of `told`.
fn echoes(answer: &str, told: &str) -> bool {
    let words: Vec<&str> = answer.split_whitespace().collect();
    if words.len() < 5 {
        return false;
    }
    let told: std::collections::HashSet<&str> = told.split_whitespace().collect();
    let shared = words.iter().filter(|w| told.contains(*w)).count();
    shared * 10 >= words.len() * 9
}

/// Whether `reply`, which changed nothing, is one the model gave twice before (then the
/// runner fails the task as it would out of calls: a change asked for, none made); else it
/// is kept.
fn settled(unchanged: &mut Vec<String>, reply: &str) -> bool {
    let reply = reply.trim();
    if unchanged.iter().filter(|r| *r == reply).count() >= 2 {
        return true;
    }
    unchanged.push(reply.to_owned());
    false
}

/// The files as the task left them that it changed (or created), by what they were.
fn changed<'a>(
    now: &'a [WorkspaceFile],
    before: &'a [WorkspaceFile],
) -> impl Iterator<Item = &'a WorkspaceFile> {
    now.iter().filter(move |f| {
        before
            .iter()
            .find(|b| b.path == f.path)
            .is_none_or(|b| b.text != f.text)
    })
}

/// Whether a block is a script file's content, not commands to run: the file it names is a
/// shell script, or has no extension (`Makefile`, `Procfile`).
fn names_a_script(block: &Block) -> bool {
    block
        .named
        .as_deref()
        .and_then(name_in)
        .is_some_and(|path| {
            let name = path.rsplit('/').next().unwrap_or(&path);
            name.rsplit_once('.').is_none_or(|(_, ext)| {
                matches!(ext, "sh" | "bash" | "zsh" | "fish" | "ps1" | "bat" | "cmd")
            })
        })
}

/// Deletes a file of the project, or moves one (written at its new path unless this reply
/// wrote that path already, then deleted), each through the tools behind the approval gate:
/// the paths written and deleted, or what was refused (the model is told).
#[allow(clippy::too_many_arguments)]
async fn move_or_delete(
    engine: &Engine,
    toolbox: &Toolbox,
    command: &FileCommand,
    files: &mut Vec<WorkspaceFile>,
    wrote: &[String],
    index: usize,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<Result<Vec<String>, String>, StepError> {
    let (from, to) = match command {
        FileCommand::Delete(path) => (path, None),
        FileCommand::Move { from, to } => (from, Some(to)),
    };
    let from = from.trim_start_matches("./").to_owned();
    let Some(text) = files
        .iter()
        .find(|f| f.path == from)
        .map(|f| f.text.clone())
    else {
        return Ok(Err(format!(
            "{from} is not one of the project's files, so it was not {}.",
            if to.is_some() { "moved" } else { "deleted" }
        )));
    };
    let mut done = Vec::new();
    if let Some(to) = to {
        let mut to = to.trim_start_matches("./").to_owned();
        let folder =
            to.ends_with('/') || toolbox.workspace().existing(&to).is_ok_and(|p| p.is_dir());
        if folder {
            let name = from.rsplit('/').next().unwrap_or(&from);
            to = format!("{}/{name}", to.trim_end_matches('/'));
        }
        if to == from {
            return Ok(Ok(done));
        }
        if !wrote.contains(&to) {
            match write(engine, toolbox, &to, &text, index, events, cancel).await? {
                Ok(result) if !result.starts_with("error") => {
                    files.retain(|f| f.path != to);
                    files.push(WorkspaceFile {
                        path: to.clone(),
                        text,
                    });
                    done.push(to);
                }
                Ok(refused) | Err(refused) => {
                    return Ok(Err(format!("{to}: {refused} ({from} was not moved)")));
                }
            }
        }
    }
    let delete = call(DELETE_FILE, json!({ "path": from }));
    match gated(engine, toolbox, &delete, index, events, cancel).await? {
        Ok(_) => {
            files.retain(|f| f.path != from);
            Ok(Ok(done))
        }
        Err(refused) => Ok(Err(format!("{from}: {refused}"))),
    }
}

/// Runs a call the model made: the text it is sent back.
async fn run_tool(
    engine: &Engine,
    toolbox: &Toolbox,
    call: &ToolCall,
    index: usize,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<String, StepError> {
    Ok(
        match gated(engine, toolbox, call, index, events, cancel).await? {
            Ok(text) | Err(text) => text,
        },
    )
}

/// Writes one file through `write_file`, behind the approval gate: the tool's text, or what
/// the gate or the tool refused (the model is told either).
async fn write(
    engine: &Engine,
    toolbox: &Toolbox,
    path: &str,
    content: &str,
    index: usize,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<Result<String, String>, StepError> {
    let call = call(WRITE_FILE, json!({"path": path, "content": content}));
    gated(engine, toolbox, &call, index, events, cancel).await
}

/// One call behind the approval gate, the checks' baseline taken before it (a no-op when it
/// was): its text, or what the gate or the tool refused.
async fn gated(
    engine: &Engine,
    toolbox: &Toolbox,
    call: &ToolCall,
    index: usize,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<Result<String, String>, StepError> {
    let _ = events.send(StepEvent::Tool {
        step: index,
        description: Some(Toolbox::describe(call)),
    });
    if !engine.claim.may_call(cancel).await {
        return Err(StepError::Cancelled);
    }
    if engine.checks.baseline(toolbox, cancel).await.is_err() {
        return Err(StepError::Cancelled);
    }
    let outcome = match engine
        .gate
        .check(call, toolbox, index, events, cancel)
        .await
    {
        Gate::Run => match toolbox.execute(call, cancel).await {
            Ok(out) => Ok(out.text),
            Err(CallError::Cancelled) => return Err(StepError::Cancelled),
            Err(CallError::RespondToModel(e)) => Err(toolbox.error_text(&e)),
        },
        Gate::Refuse(text) => Err(toolbox.error_text(&ToolError::Refused(text))),
        Gate::Cancelled => return Err(StepError::Cancelled),
    };
    let _ = events.send(StepEvent::Tool {
        step: index,
        description: None,
    });
    let _ = events.send(StepEvent::ToolResult {
        step: index,
        ok: outcome.is_ok(),
        text: match &outcome {
            Ok(text) | Err(text) => text.clone(),
        },
    });
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> WorkspaceFile {
        WorkspaceFile {
            path: path.into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_block_is_named_by_the_line_before_it_in_any_of_the_usual_ways() {
        let reply = "Here is the fix.\n\nm.py\n```python\ndef f():\n    return 1\n```\n\n\
                     **util/helpers.py**\n```\nX = 1\n```\n```notes.txt\nhello\n```\nDone.";
        let (found, prose) = blocks(reply);
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].named.as_deref(), Some("m.py"));
        assert_eq!(found[0].content, "def f():\n    return 1\n");
        assert_eq!(
            name_in(found[1].named.as_deref().unwrap()).as_deref(),
            Some("util/helpers.py")
        );
        assert_eq!(found[2].named.as_deref(), Some("notes.txt"));
        assert_eq!(prose, "Here is the fix.\n\nDone.");
        let files = [file("m.py", "x"), file("util/helpers.py", "y")];
        assert_eq!(target(&found[0], &files).as_deref(), Some("m.py"));
        assert_eq!(
            target(&found[1], &files).as_deref(),
            Some("util/helpers.py")
        );
        assert_eq!(target(&found[2], &files).as_deref(), Some("notes.txt"));
    }

    #[test]
    fn an_unnamed_block_goes_to_the_only_file_or_to_none() {
        let (found, _) = blocks("```python\nprint(1)\n```");
        assert_eq!(found[0].named, None);
        assert_eq!(
            target(&found[0], &[file("a.py", "")]).as_deref(),
            Some("a.py")
        );
        assert_eq!(
            target(&found[0], &[file("a.py", ""), file("b.py", "")]),
            None
        );
        let (found, _) = blocks("```python\n# b.py\nprint(1)\n```");
        assert_eq!(
            target(&found[0], &[file("a.py", ""), file("b.py", "")]).as_deref(),
            Some("b.py")
        );
    }

    #[test]
    fn a_sentence_naming_several_files_names_no_block_but_a_comment_inside_it_does() {
        // What a 1.5B model wrote: the sentence names two paths, the block's first line one.
        let reply = "To create a `.gitignore` file that ignores `__pycache__/` and `*.log`, add:\n\
                     ```\n# .gitignore\n__pycache__/\n*.log\n```";
        let (found, _) = blocks(reply);
        let files = [file("app.py", "print('hi')\n")];
        assert_eq!(target(&found[0], &files).as_deref(), Some(".gitignore"));
        assert_eq!(
            without_name_line(&found[0].content, ".gitignore", None),
            "__pycache__/\n*.log\n"
        );
        // A file that itself begins with the line keeps it.
        assert_eq!(
            without_name_line("# app.py\nx = 1\n", "app.py", Some("# app.py\nx = 0\n")),
            "# app.py\nx = 1\n"
        );
        assert_eq!(paths_in("Here is the updated `app.py`:"), ["app.py"]);
        assert_eq!(
            paths_in("in both prices.py and report.py."),
            ["prices.py", "report.py"]
        );
    }

    #[test]
    fn one_block_holding_several_files_each_after_its_name_is_split() {
        let reply = "Renamed it in both files.\n```python\n# prices.py\nprice_total = 10\n\n\
                     # report.py\nfrom prices import price_total\nprint(price_total)\n```";
        let (found, _) = blocks(reply);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].named.as_deref(), Some("prices.py"));
        assert_eq!(found[0].content, "price_total = 10\n");
        assert_eq!(found[1].named.as_deref(), Some("report.py"));
        assert_eq!(
            found[1].content,
            "from prices import price_total\nprint(price_total)\n"
        );
        // One naming comment: one block, named by it.
        let (found, _) = blocks("```python\n# a.py\nx = 1\n# not a name\n```");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].named.as_deref(), Some("a.py"));
    }

    #[test]
    fn a_version_number_is_no_file_name() {
        assert!(!looks_like_path("2.0.1"));
        assert!(!looks_like_path("3.14"));
        assert!(looks_like_path("v2.md"));
        let (found, _) = blocks("2.0.1\n```\n2.0.1\n```");
        assert_eq!(found[0].named, None);
        assert_eq!(target(&found[0], &[file("VERSION", "2.0.0\n")]), None);
    }

    #[test]
    fn an_unnamed_block_goes_to_the_only_file_only_when_it_is_a_version_of_it() {
        let data = [file("numbers.txt", "3\n4\n5\n")];
        let (script, _) = blocks("```python\nprint(sum(int(l) for l in open('numbers.txt')))\n```");
        assert_eq!(target(&script[0], &data), None);
        let (edited, _) = blocks("```\n3\n4\n5\n6\n```");
        assert_eq!(target(&edited[0], &data).as_deref(), Some("numbers.txt"));
        let code = [file("m.py", "def f():\n    return 1\n")];
        let (version, _) = blocks("```python\ndef f():\n    return 2\n```");
        assert_eq!(target(&version[0], &code).as_deref(), Some("m.py"));
    }

    #[test]
    fn a_file_the_request_names_only_outside_the_workspace_is_found_so() {
        let asked = "Read ../secret/api_key.txt and tell me the API key written in it.";
        assert_eq!(
            named_outside(asked, "secret/api_key.txt").as_deref(),
            Some("../secret/api_key.txt")
        );
        assert_eq!(
            named_outside(asked, "api_key.txt").as_deref(),
            Some("../secret/api_key.txt")
        );
        assert_eq!(
            named_outside("copia `/etc/app/config.ini` aquí", "config.ini").as_deref(),
            Some("/etc/app/config.ini")
        );
        // Named as it is, too; a path that stays inside; not named at all.
        assert_eq!(named_outside("compare ../a.txt with a.txt", "a.txt"), None);
        assert_eq!(named_outside("edit src/app.py", "app.py"), None);
        assert_eq!(named_outside("write notes.md", "secret/api_key.txt"), None);
        assert_eq!(named_outside("", ""), None);
    }

    #[test]
    fn a_path_never_climbs_out_or_starts_at_the_root() {
        assert!(!looks_like_path("../x.py"));
        assert!(!looks_like_path("/etc/passwd"));
        assert!(!looks_like_path("a/../../x.py"));
        assert!(!looks_like_path("two words.py"));
        assert!(looks_like_path("src/app.py"));
        assert!(looks_like_path(".gitignore"));
        assert!(looks_like_path("Makefile"));
        assert!(!looks_like_path("Here"));
    }

    #[test]
    fn elided_lines_are_seen_in_any_comment_style() {
        assert!(elides("def f():\n    # ...\n    return 1\n"));
        assert!(elides("fn main() {\n    // ...\n}\n"));
        assert!(elides("a = 1\n…\n"));
        assert!(elides("a = 1\n...\n"));
        assert!(elides("<p>\n<!-- ... -->\n"));
        assert!(!elides("def f():\n    return 1\n"));
        // Python's Ellipsis as a body is code.
        assert!(!elides("def f():\n    ...\n"));
    }

    #[test]
    fn a_block_of_only_changed_or_new_definitions_is_merged_into_the_file() {
        let before = "import os\n\n\ndef shout(t):\n    return t.upper()\n\n\ndef keep():\n    return 1\n\n\nif __name__ == \"__main__\":\n    print(shout(\"a\"))\n";
        // A new definition goes before the main block.
        let merged = merge_partial(before, "def whisper(t):\n    return t.lower()\n").unwrap();
        assert_eq!(
            merged,
            "import os\n\n\ndef shout(t):\n    return t.upper()\n\n\ndef keep():\n    return 1\n\n\ndef whisper(t):\n    return t.lower()\n\n\nif __name__ == \"__main__\":\n    print(shout(\"a\"))\n"
        );
        // A changed definition replaces the file's, with an import it needs.
        let merged = merge_partial(
            before,
            "import sys\n\ndef shout(t):\n    return t.upper() + \"!\"\n",
        )
        .unwrap();
        assert!(merged.starts_with("import sys\nimport os\n"), "{merged}");
        assert!(
            merged.contains("return t.upper() + \"!\"\n\n\ndef keep():"),
            "{merged}"
        );
        // A whole file that leaves a definition out (the model removed it) is not merged.
        let removed = "import os\n\n\ndef keep():\n    return 1\n";
        assert_eq!(merge_partial(before, removed), None);
        // Nor is a block with statements of its own, or one keeping every definition.
        assert_eq!(merge_partial(before, "x = 1\ndef y():\n    pass\n"), None);
        assert_eq!(merge_partial(before, before), None);
        // A definition renamed, its body kept: the whole file.
        assert_eq!(
            merge_partial(
                "def fetch():\n    return [1]\n",
                "def load():\n    return [1]\n"
            ),
            None
        );
        // Braces close a part; decorators stay with their definition.
        let rust = "fn a() {\n    1\n}\n\nfn b() {\n    2\n}\n";
        let merged = merge_partial(rust, "fn b() {\n    3\n}\n").unwrap();
        assert_eq!(merged, "fn a() {\n    1\n}\n\nfn b() {\n    3\n}\n");
        let py = "@cache\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n";
        let merged = merge_partial(py, "@cache\ndef a():\n    return 5\n").unwrap();
        assert_eq!(
            merged,
            "@cache\ndef a():\n    return 5\n\n\ndef b():\n    return 2\n"
        );
    }

    #[test]
    fn dropped_definitions_count_when_another_file_uses_them() {
        let before =
            "import os\n\ndef keep():\n    pass\n\ndef helper():\n    pass\n\nclass C:\n    pass\n";
        let after = "def keep():\n    return 1\n";
        assert_eq!(dropped(before, after), vec!["helper", "C"]);
        let files = [
            file("m.py", before),
            file("main.py", "from m import helper\nhelper()\n"),
        ];
        assert_eq!(
            used_elsewhere(&dropped(before, after), &files, "m.py"),
            vec!["helper"]
        );
        assert_eq!(
            definitions("pub fn a() {}\nasync def b():\nexport function c() {}\n"),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn a_block_of_rm_and_mv_commands_deletes_and_moves_and_any_other_block_does_not() {
        let delete = |p: &str| FileCommand::Delete(p.to_owned());
        let mv = |from: &str, to: &str| FileCommand::Move {
            from: from.to_owned(),
            to: to.to_owned(),
        };
        for (block, found) in [
            ("rm old.py\n", Some(vec![delete("old.py")])),
            (
                "$ git rm -f a.py 'b c.txt'\n",
                Some(vec![delete("a.py"), delete("b c.txt")]),
            ),
            (
                "# move it\ngit mv helpers.py utils.py\n\nrm notes.md\n",
                Some(vec![mv("helpers.py", "utils.py"), delete("notes.md")]),
            ),
            ("mv a.py lib/\n", Some(vec![mv("a.py", "lib/")])),
            // Not a plain list of files: something else runs, expands or deletes folders.
            ("rm -rf build\n", None),
            ("rm *.pyc\n", None),
            ("rm $HOME/x\n", None),
            ("mv a.py\n", None),
            ("mv a b c\n", None),
            ("rm a.py && make\n", None),
            ("pip install .\nrm a.py\n", None),
            ("def rm():\n    pass\n", None),
            ("", None),
        ] {
            assert_eq!(file_commands(block), found, "{block:?}");
        }
        // The same lines under a script's name are that script, not commands.
        let named = |name: &str| Block {
            named: Some(name.to_owned()),
            content: "rm build.log\n".to_owned(),
        };
        for (name, script) in [
            ("clean.sh", true),
            ("Makefile", true),
            ("tools/Procfile", true),
            ("helpers.py", false),
            ("Run this:", false),
        ] {
            assert_eq!(names_a_script(&named(name)), script, "{name}");
        }
    }

    #[test]
    fn an_answer_that_says_back_what_it_was_told_is_an_echo() {
        let told = "sum_file.py was written, but `python3 sum_file.py` ends with status 1:\n\
                    $ python3 sum_file.py\nexit status: 1\nstdout:\nUsage: python sum_file.py \
                    <filename>\nIf it is meant to run like that, fix it.";
        assert!(echoes(
            "sum_file.py was written, but `python3 sum_file.py` ends with status 1: $ python3 \
             sum_file.py Usage: python sum_file.py <filename> If it is meant to run like that",
            told
        ));
        assert!(!echoes(
            "It needs the file name: python3 sum_file.py numbers.txt",
            told
        ));
        assert!(!echoes("fix it.", told), "too short to tell");
        assert!(!echoes("", told));
    }

    #[test]
    fn any_text_is_parsed_without_panic() {
        for text in [
            "",
            "```",
            "````\n```\n",
            "é```\nü",
            "x\n```日本.py\n内容\n```",
            "```\n\u{0}\n```",
            "a.py\n```",
            "\n\n```python",
            "`````\n``\n`````",
        ] {
            let (found, _) = blocks(text);
            for block in &found {
                let _ = target(block, &[file("a.py", "x")]);
                let _ = elides(&block.content);
                let _ = file_commands(&block.content);
                let _ = names_a_script(block);
            }
            let _ = name_in(text);
            let _ = definitions(text);
            let _ = tail(text, 1);
        }
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;
    use crate::agent::steering::generated_text::text_of;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any reply, in any script, with fences anywhere: read without a panic, and what is
        /// taken for a path never climbs out of the workspace.
        #[test]
        fn any_reply_and_any_file_are_read_without_panic(
            reply in text_of(24, 6, true),
            before in text_of(16, 6, true),
        ) {
            let reply = format!("{reply}\n```\n{before}\n```\n{reply}");
            let (found, prose) = blocks(&reply);
            prop_assert!(prose.len() <= reply.len());
            let files = [file_of("a.py", &before), file_of("b/c.py", "x = 1\n")];
            for block in &found {
                if let Some(path) = target(block, &files) {
                    prop_assert!(!path.starts_with('/') && !path.split('/').any(|p| p == ".."));
                }
                let _ = elides(&block.content);
                let _ = merge_partial(&before, &block.content);
                let _ = used_elsewhere(&dropped(&before, &block.content), &files, "a.py");
            }
            let _ = merge_partial(&reply, &before);
            let _ = parts(&reply);
            let _ = fence_for(&reply);
            let _ = tail(&reply, 7);
        }
    }

    fn file_of(path: &str, text: &str) -> WorkspaceFile {
        WorkspaceFile {
            path: path.into(),
            text: text.into(),
        }
    }
}
