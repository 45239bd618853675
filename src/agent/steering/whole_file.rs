//! The `whole-file` rule: a change a small model does not make with a tool call is asked for
//! as the whole new content of one file, and the code block it answers with is written as
//! that file on its behalf.
//!
//! A 1.5B coder model that is to change a file it has read explains how one would do it,
//! writes a Python `def edit_file(...)`, or calls `edit_file` with an `old_text` taken from the
//! request; shown the file and asked for all of it as it should be, it writes the file. (Aider
//! found the same: weak models edit best in its "whole" format.) So when the model answers a
//! request for a change while the change is not in the workspace, the rule names one file —
//! where a write did not take, else the one file the request names to change, else one the
//! answer names, the step read or a tool result names — reads it on the model's behalf if the
//! step has not, and asks for its whole new content. The next code block the model writes is
//! taken as that file's `write_file`; the tool refuses what it refuses from the model (a test
//! the request is checked by, a JSON or YAML file broken), and the checks judge the result as
//! they judge any change. When the checks fail after a change, their output goes back with an
//! ask for the file the task wrote last. An empty reply while an ask stands gets the ask again.
//!
//! What is not written as the file:
//!
//! | the block | what follows |
//! |---|---|
//! | a line stands for lines it leaves out (`...`, `# rest of the code unchanged`) | asked again, saying so |
//! | the file as it was | asked again, saying so |
//! | a JSON file losing a key or value the request does not name | asked again, saying so |
//! | a top-level definition (not renamed) or block (`if __name__ == "__main__":`) dropped that the request does not name | most often the changed part alone: a block of nothing but definitions the file has (once each) takes their place in the file; else `described-edit` may make it as that part's edit; else the next ask says what it dropped |
//! | none of the file's lines (but for the names the request changes): another file's content | asked again, saying so |
//!
//! (A file the task created is the model's own: nothing it drops from it is held against it.)
//! What the request "names" is a name of the code (a definition, a value) found in its text
//! as a whole word, in whatever language the rest of it is: its words are not read. Files over
//! [`MAX_LINES`] lines are never asked for whole; the rule asks at most [`MAX_ASKS_PER_FILE`] times a file and [`MAX_ASKS`] a step.

use serde_json::json;

use super::text::request_names as names;
use super::text::{call, echo, fenced_blocks, missing_file, named_files};
use super::{Facts, Reply, Rule, Verdict};
use crate::agent::tools::names::{READ_FILE, WRITE_FILE};
use crate::agent::tools::parse_arguments;

/// Most whole-file asks in one step, and of one file.
const MAX_ASKS: usize = 6;
const MAX_ASKS_PER_FILE: usize = 3;
/// Largest file asked for whole, in lines (and bytes): a small model copies a short file
/// faithfully, a long one not.
const MAX_LINES: usize = 150;
const MAX_BYTES: u64 = 8 * 1024;

/// The file whose whole content was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Asked {
    path: String,
    /// Its text when asked (`None`: a new file).
    before: Option<String>,
    /// The task created it: what it holds is the model's own, to drop as it likes.
    own: bool,
}

impl Asked {
    fn of(path: String, toolbox: &crate::agent::tools::Toolbox) -> Asked {
        let existing = toolbox.workspace().existing(&path).ok();
        let before = existing
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok());
        let own = existing.is_some_and(|p| toolbox.ledger().created(&p));
        Asked { path, before, own }
    }
}

#[derive(Default)]
pub(crate) struct WholeFile {
    /// What the last message of the loop asked for: only the next reply can answer it.
    asked: Option<Asked>,
    /// The asks made in this step, a path each.
    asks: Vec<String>,
    /// Why the block that answered the last ask was not written, for the next ask.
    not_written: Option<String>,
}

impl WholeFile {
    /// Whether `path` may be asked for (again), and if so, counts the ask.
    fn ask_for(&mut self, path: &str) -> bool {
        let of_file = self.asks.iter().filter(|p| *p == path).count();
        if self.asks.len() >= MAX_ASKS || of_file >= MAX_ASKS_PER_FILE {
            return false;
        }
        self.asks.push(path.to_owned());
        true
    }

    /// Asks for `asked` again, saying why the last block was not written.
    fn again(&mut self, asked: Asked, why: String, request: &str) -> Option<Verdict> {
        if !self.ask_for(&asked.path) {
            return None;
        }
        let message = format!("{why} {}", ask(&asked, request));
        self.asked = Some(asked);
        Some(Verdict::Nudge {
            message,
            tools: true,
        })
    }
}

impl Rule for WholeFile {
    fn name(&self) -> &'static str {
        "whole-file"
    }

    fn wants_unmet(&self) -> bool {
        true
    }

    fn read_reply(&mut self, reply: &mut Reply, facts: &Facts) -> Option<Verdict> {
        if !reply.calls.is_empty() {
            // It made calls of its own instead: they run, and the ask is answered by them.
            self.asked = None;
            return None;
        }
        // The ask stands until a block answers it (a small model often says something else
        // first), a write is made, or another ask replaces it.
        let block = whole_block(&reply.text)?;
        let asked = self.asked.take()?;
        let content = as_file(block);
        let path = &asked.path;
        if let Some(line) = left_out(&content, asked.before.as_deref(), facts.request) {
            let why = format!(
                "That code block was not written to {path}. Its line `{line}` stands for lines \
                 it leaves out, and the block replaces the whole file."
            );
            return self.again(asked, why, facts.request);
        }
        if asked.before.as_deref() == Some(content.as_str()) {
            let why = format!(
                "That code block is {path} as it is now: the change the request asks for is not \
                 in it, so nothing was written."
            );
            return self.again(asked, why, facts.request);
        }
        if let Some(before) = asked.before.as_deref() {
            let lost = if asked.own {
                Vec::new()
            } else {
                dropped_values(path, before, &content, facts.request)
            };
            if !lost.is_empty() {
                let why = format!(
                    "That code block was not written to {path}: it loses {}, which the request \
                     does not ask to change.",
                    quoted(&lost)
                );
                return self.again(asked, why, facts.request);
            }
            let dropped: Vec<&str> = if asked.own {
                Vec::new()
            } else {
                let mut dropped = dropped_definitions(before, &content, facts.request);
                dropped.extend(dropped_blocks(before, &content, facts.request));
                dropped
            };
            let merged = if dropped.is_empty() {
                None
            } else {
                with_definitions(before, &content)
            };
            if let Some(merged) = merged {
                // The changed definitions alone, each one the file has: they take the place
                // of the file's (after a change, when `described-edit` no longer acts, the
                // 1.5B model answered the failing checks with the fixed `def last` alone).
                reply.calls = vec![call(
                    WRITE_FILE,
                    json!({"path": asked.path, "content": merged}),
                )];
                reply.text.clear();
                return None;
            }
            if !dropped.is_empty() {
                // Most often the part that changes, shown alone: `described-edit` may make it
                // as an edit of that part. If it does not, the next ask says what was wrong.
                self.not_written = Some(format!(
                    "That code block was not written to {path}: it drops {}, which the request \
                     does not ask to remove.",
                    quoted(&dropped)
                ));
                return None;
            }
            if !asked.own && keeps_no_line(before, &content, facts.request) {
                // Another file's content (asked for main.py after changing cart.py, the 1.5B
                // model wrote cart.py again), not this one's with the change made.
                let why = format!(
                    "That code block was not written to {path}: it has none of the lines of \
                     {path}, so it is not {path} with the change made."
                );
                return self.again(asked, why, facts.request);
            }
        }
        reply.calls = vec![call(
            WRITE_FILE,
            json!({"path": asked.path, "content": content}),
        )];
        reply.text.clear();
        None
    }

    fn on_empty(&mut self, facts: &Facts) -> Option<Verdict> {
        // Nothing said while an ask stands (or only a lone fence): the ask again, not the
        // general "answer now", after which the 1.5B model reported the change as made.
        let asked = self.asked.take()?;
        let why = "Your last reply was empty.".to_owned();
        self.again(asked, why, facts.request)
    }

    fn after_call(
        &mut self,
        _call: &crate::ollama::ToolCall,
        kind: crate::agent::tools::ToolKind,
        _text: &str,
    ) {
        if kind == crate::agent::tools::ToolKind::Write {
            self.asked = None;
        }
    }

    fn after_failed_checks(&mut self, feedback: &str, facts: &Facts) -> Option<String> {
        if !facts.final_step {
            return None;
        }
        // The file the task wrote last (a test it was checked by cannot be one).
        let ws = facts.toolbox.workspace();
        let path = facts.ran.iter().rev().find_map(|r| {
            let written = r.ok
                && facts
                    .toolbox
                    .get(&r.call.function.name)
                    .is_some_and(|t| t.kind == crate::agent::tools::ToolKind::Write);
            let path = parse_arguments(&r.call.function.arguments)["path"]
                .as_str()
                .map(|p| p.trim_start_matches("./").to_owned())?;
            (written && fits(ws, &path)).then_some(path)
        })?;
        if !self.ask_for(&path) {
            return None;
        }
        let asked = Asked::of(path, facts.toolbox);
        let message = format!("{feedback}\n{}", ask(&asked, facts.request));
        self.asked = Some(asked);
        Some(message)
    }

    fn before_answer(&mut self, answer: &str, facts: &Facts) -> Option<Verdict> {
        if !facts.asks_for_change || !facts.final_step || facts.toolbox.get(WRITE_FILE).is_none() {
            return None;
        }
        let (path, why) = target(answer, facts)?;
        if !self.ask_for(&path) {
            return None;
        }
        let asked = Asked::of(path, facts.toolbox);
        let mut message = ask(&asked, facts.request);
        if let Some(why) = why {
            message = format!("The request is not done yet: {why}.\n{message}");
        }
        if let Some(not_written) = self.not_written.take() {
            message = format!("{not_written}\n{message}");
        }
        let read = asked.before.is_some() && !read_in_step(&asked.path, facts);
        let path = asked.path.clone();
        self.asked = Some(asked);
        if read && facts.toolbox.get(READ_FILE).is_some() {
            return Some(Verdict::Call {
                call: call(READ_FILE, json!({ "path": path })),
                then: message,
            });
        }
        Some(Verdict::Nudge {
            message,
            tools: true,
        })
    }
}

/// The code block of a reply asked for a whole file: its last non-empty fenced block, else a
/// block whose closing fence never came (the reply starts with an opening fence).
fn whole_block(text: &str) -> Option<&str> {
    if let Some(block) = fenced_blocks(text)
        .into_iter()
        .rev()
        .find(|b| !b.trim().is_empty())
    {
        return Some(block);
    }
    let rest = text.trim_start().strip_prefix("```")?;
    let (_, body) = rest.split_once('\n')?;
    (!body.trim().is_empty() && !body.contains("```")).then_some(body)
}

/// `a`, `b` → "`a`, `b`".
fn quoted(names: &[impl AsRef<str>]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The block as the file's content: its lines, each ending in a line end.
fn as_file(block: &str) -> String {
    let mut content = String::with_capacity(block.len() + 1);
    for line in block.trim_end_matches(['\n', '\r']).lines() {
        content.push_str(line);
        content.push('\n');
    }
    content
}

/// The message asking for `asked`'s whole content.
fn ask(asked: &Asked, request: &str) -> String {
    // No word on the block's form: asked to reply "in one code block that opens and closes
    // with ``` lines" (or "as one fenced code block (```)"), the 1.5B model wrote a lone fence
    // and stopped; asked only for the content, it writes the block, or the write_file call.
    let path = &asked.path;
    match asked.before {
        Some(_) => format!(
            "The request is: {}\nWrite the complete new content of {path}, with the change \
             made: every line of the file, the lines you keep as well as the lines you change. \
             It is written to {path} as it is.",
            echo(request)
        ),
        None => format!(
            "The request is: {}\nWrite the complete content of the new file {path}. It is \
             written to {path} as it is.",
            echo(request)
        ),
    }
}

/// The file to ask for, and what is wrong with it (`None`: nothing to ask for).
///
/// Where a write the model tried did not take, that file. With nothing changed yet and
/// no new file named (a new file is asked for by `change-reminder` and `held-writes`, whose
/// `write_file` a small model makes), the one existing file the request names to change, or,
/// when it names none, the first one the answer names, the step read, or a tool result names,
/// files of tests after the rest. A request that names several files says too little of which
/// is to change. A test file the request is checked by is never one, nor a file too long to
/// ask for whole.
fn target(answer: &str, facts: &Facts) -> Option<(String, Option<String>)> {
    let ws = facts.toolbox.workspace();
    let kept = ws.checks();
    let fits = |path: &str| fits(ws, path);
    for unmet in facts.unmet {
        if let Some(file) = unmet.files.iter().find(|f| fits(f)) {
            return Some((file.clone(), Some(unmet.line.clone())));
        }
    }
    if facts.changed || missing_file(facts.request, ws).is_some() {
        return None;
    }
    let is_test = super::text::is_test_file;
    let named: Vec<String> = named_files(facts.request, ws)
        .into_iter()
        .filter(|f| !kept.contains(f))
        .collect();
    let to_change: Vec<&String> = named.iter().filter(|f| !is_test(f)).collect();
    match to_change.as_slice() {
        [one] => return fits(one).then(|| ((*one).clone(), None)),
        [] if named.is_empty() => {}
        _ => return None,
    }
    let mut seen = named_files(answer, ws);
    for ran in facts.ran.iter().rev() {
        if ran.ok
            && ran.call.function.name == READ_FILE
            && let Some(path) = parse_arguments(&ran.call.function.arguments)["path"].as_str()
        {
            seen.push(path.trim_start_matches("./").to_owned());
        }
    }
    for ran in facts.ran.iter().rev() {
        seen.extend(named_files(&ran.text, ws));
    }
    seen.iter()
        .filter(|f| !is_test(f))
        .chain(seen.iter().filter(|f| is_test(f)))
        .find(|f| fits(f))
        .map(|f| (f.clone(), None))
}

/// Whether `path` may be asked for whole: an existing file of at most [`MAX_LINES`] lines and
/// [`MAX_BYTES`], not a test the request is checked by.
fn fits(ws: &crate::agent::tools::Workspace, path: &str) -> bool {
    !ws.checks().iter().any(|k| k == path)
        && ws.existing(path).is_ok_and(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.len() <= MAX_BYTES)
                && std::fs::read_to_string(&p).is_ok_and(|t| t.lines().count() <= MAX_LINES)
        })
}

/// Whether `path` was read in this step.
fn read_in_step(path: &str, facts: &Facts) -> bool {
    facts.ran.iter().any(|r| {
        r.ok && r.call.function.name == READ_FILE
            && parse_arguments(&r.call.function.arguments)["path"]
                .as_str()
                .is_some_and(|p| p.trim_start_matches("./") == path)
    })
}

/// A line of `content` that stands for lines left out and that `before`, the file's text, does
/// not have: told by its shape, in any language — `...` or `…` alone or in a comment
/// (`# ... rest of the code`), or a new comment standing where the file had two lines or more
/// that are not blank (`// 其余代码不变`, `# existing code unchanged`), unless those lines name
/// something the request names ("remove old_helper" may leave a note where it was).
fn left_out<'a>(content: &'a str, before: Option<&str>, request: &str) -> Option<&'a str> {
    let before_lines: Vec<&str> =
        before.map_or_else(Vec::new, |b| b.lines().map(str::trim).collect());
    let stands_in = before.map(|b| comments_standing_for_lines(b, content, request));
    content.lines().map(str::trim).find(|line| {
        if before_lines.contains(line) {
            return false;
        }
        let comment = comment_text(line);
        matches!(*line, "..." | "…")
            || comment.is_some_and(|bare| bare.contains("...") || bare.contains('…'))
            || comment.is_some() && stands_in.as_ref().is_some_and(|s| s.contains(line))
    })
}

/// The text of a comment line (`# x`, `// x`, `<!-- x -->`, `/* x */`, `-- x`, `; x`), trimmed.
fn comment_text(line: &str) -> Option<&str> {
    const COMMENTS: [&str; 6] = ["<!--", "#", "//", "/*", "--", ";"];
    let mut bare = COMMENTS.iter().find_map(|c| line.strip_prefix(c))?.trim();
    for end in ["*/", "-->"] {
        if let Some(b) = bare.strip_suffix(end) {
            bare = b.trim();
        }
    }
    Some(bare)
}

/// The lines of `after` (trimmed) that alone take the place of two or more lines of `before`
/// that are not blank, in a line diff, where those lines name nothing the request names.
fn comments_standing_for_lines<'a>(before: &str, after: &'a str, request: &str) -> Vec<&'a str> {
    let diff = similar::TextDiff::from_lines(before, after);
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&'a str> = after.lines().collect();
    let mut found = Vec::new();
    // A change is a run of deletions and insertions between equal lines.
    let (mut gone, mut came): (Vec<&str>, Vec<&'a str>) = (Vec::new(), Vec::new());
    let mut flush = |gone: &mut Vec<&str>, came: &mut Vec<&'a str>| {
        let kept: Vec<&'a str> = came
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        let lost: Vec<&str> = gone
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        if let [one] = kept[..]
            && lost.len() >= 2
            && comment_text(one).is_some()
            && !lost.iter().any(|l| {
                l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| names(request, w))
            })
        {
            found.push(one);
        }
        gone.clear();
        came.clear();
    };
    for op in diff.ops() {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        match tag {
            similar::DiffTag::Equal => flush(&mut gone, &mut came),
            _ => {
                gone.extend(old_range.filter_map(|i| old.get(i).copied()));
                came.extend(new_range.filter_map(|i| new.get(i).copied()));
            }
        }
    }
    flush(&mut gone, &mut came);
    found
}

/// The values of a JSON file that a whole new content of it no longer has and the request
/// does not name: each string and number of `before` (read leniently, so a file that
/// does not parse is read too), compared with those of `after`. Other files: none.
fn dropped_values(path: &str, before: &str, after: &str, request: &str) -> Vec<String> {
    if !path.to_ascii_lowercase().ends_with(".json") {
        return Vec::new();
    }
    let now = json_literals(after);
    let mut lost: Vec<String> = Vec::new();
    for literal in json_literals(before) {
        if !now.contains(&literal) && !names(request, &literal) && !lost.contains(&literal) {
            lost.push(literal);
        }
    }
    lost
}

/// The strings (without their quotes) and numbers of a JSON text, in order, read leniently.
fn json_literals(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c == '"' {
            let mut value = String::new();
            let mut escaped = false;
            for (_, c) in chars.by_ref() {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '"') => break,
                    _ => {
                        escaped = false;
                        value.push(c);
                    }
                }
            }
            found.push(value);
        } else if c == '-' || c.is_ascii_digit() {
            let mut end = at + c.len_utf8();
            while let Some(&(next, d)) = chars.peek() {
                if d.is_ascii_digit() || matches!(d, '.' | 'e' | 'E' | '+' | '-') {
                    end = next + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let number = &text[at..end];
            if number.chars().any(|d| d.is_ascii_digit()) {
                found.push(number.to_owned());
            }
        }
    }
    found
}

/// Keywords that start a top-level definition, and the name after them.
const DEFINES: [&str; 9] = [
    "def ",
    "async def ",
    "class ",
    "function ",
    "async function ",
    "fn ",
    "pub fn ",
    "func ",
    "export function ",
];

/// The top-level definitions of `lines` as spans: (name, first line, end), the end past the
/// last indented or blank line that follows, trailing blank lines left out.
fn definition_spans<'a>(lines: &[&'a str]) -> Vec<(&'a str, usize, usize)> {
    let mut spans = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let Some(rest) = DEFINES.iter().find_map(|k| line.strip_prefix(k)) else {
            continue;
        };
        let Some(name) = rest
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        let mut end = at + 1;
        while end < lines.len()
            && (lines[end].trim().is_empty() || lines[end].starts_with(char::is_whitespace))
        {
            end += 1;
        }
        while end > at + 1 && lines[end - 1].trim().is_empty() {
            end -= 1;
        }
        spans.push((name, at, end));
    }
    spans
}

/// `before` with its top-level definitions replaced by those of `block`, when `block` is
/// nothing but top-level definitions (blank lines between them) and `before` has each of them
/// once, by name: the changed part of the file, given alone. `None` otherwise, or when nothing
/// would change.
fn with_definitions(before: &str, block: &str) -> Option<String> {
    let new_lines: Vec<&str> = block.lines().collect();
    let new_spans = definition_spans(&new_lines);
    if new_spans.is_empty() {
        return None;
    }
    let covered = |at: usize| {
        new_spans
            .iter()
            .any(|(_, from, to)| (*from..*to).contains(&at))
    };
    if new_lines
        .iter()
        .enumerate()
        .any(|(at, line)| !line.trim().is_empty() && !covered(at))
    {
        return None;
    }
    let old_lines: Vec<&str> = before.lines().collect();
    let old_spans = definition_spans(&old_lines);
    let mut replace: Vec<(usize, usize, &[&str])> = Vec::new();
    for (name, from, to) in &new_spans {
        let mut same = old_spans.iter().filter(|(n, _, _)| n == name);
        let (Some((_, old_from, old_to)), None) = (same.next(), same.next()) else {
            return None;
        };
        if replace.iter().any(|(f, _, _)| f == old_from) {
            return None;
        }
        replace.push((*old_from, *old_to, &new_lines[*from..*to]));
    }
    replace.sort_by_key(|(from, _, _)| *from);
    let mut out: Vec<&str> = Vec::with_capacity(old_lines.len());
    let mut at = 0;
    for (from, to, lines) in replace {
        out.extend_from_slice(&old_lines[at..from]);
        out.extend_from_slice(lines);
        at = to;
    }
    out.extend_from_slice(&old_lines[at..]);
    let mut merged = out.join("\n");
    merged.push('\n');
    (merged != before).then_some(merged)
}

/// The top-level definitions of `text`: (`def used_one(` → `used_one`, and the lines of its
/// body: the indented or blank lines that follow, trimmed, blank ones left out).
fn defined(text: &str) -> Vec<(&str, Vec<&str>)> {
    let lines: Vec<&str> = text.lines().collect();
    definition_spans(&lines)
        .into_iter()
        .map(|(name, from, to)| {
            let body = lines[from + 1..to]
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty())
                .collect();
            (name, body)
        })
        .collect()
}

/// The names of the top-level definitions of `text`.
#[cfg(test)]
fn definitions(text: &str) -> Vec<&str> {
    defined(text).into_iter().map(|(name, _)| name).collect()
}

/// The top-level lines of `before` that open a block (`if __name__ == "__main__":`, `impl
/// Cart {`), other than definitions, that `after` no longer has and that name (past their
/// keyword) nothing the request names: a small model rewriting a file whole leaves out its
/// main block.
fn dropped_blocks<'a>(before: &'a str, after: &str, request: &str) -> Vec<&'a str> {
    let now: Vec<&str> = after.lines().map(str::trim_end).collect();
    before
        .lines()
        .map(str::trim_end)
        .filter(|line| {
            !line.starts_with(char::is_whitespace)
                && (line.ends_with(':') || line.ends_with('{'))
                && !DEFINES.iter().any(|k| line.starts_with(k))
                // Its first word is the language's keyword (`if`, `impl`), not a name.
                && !line
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .skip(1)
                    .any(|w| names(request, w))
                && !now.contains(line)
        })
        .collect()
}

/// The top-level definitions of `before` that `after` no longer has, neither by name nor
/// renamed (the same body under a name spelled alike, "the function's name is misspelled",
/// or under a name the request names, "rename greet to welcome"; a new function given the
/// body of one it drops is no rename), nor removed (the request names it, and nothing new is
/// defined in its place: "remove old_helper").
fn dropped_definitions<'a>(before: &'a str, after: &str, request: &str) -> Vec<&'a str> {
    let now = defined(after);
    let old = defined(before);
    let names_before: Vec<&str> = old.iter().map(|(n, _)| *n).collect();
    // Definitions the block has that the file had not: a named one dropped beside them is
    // replaced, not removed ("add reverse_words, keep shout" names both).
    let added = now.iter().any(|(n, _)| !names_before.contains(n));
    old.iter()
        .filter(|(name, body)| {
            let kept = now.iter().any(|(n, _)| n == name);
            let renamed = !body.is_empty()
                && now.iter().any(|(n, b)| {
                    !names_before.contains(n)
                        && b == body
                        && (spelled_alike(name, n) || names(request, n))
                });
            let removed = !added && names(request, name);
            !kept && !renamed && !removed
        })
        .map(|(name, _)| *name)
        .collect()
}

/// Whether `after`, a file's whole new content, keeps none of the lines of `before` (its
/// text, of two lines or more that are not blank), lines compared trimmed and without the
/// names the request names (`from cart import calc_total` is kept as `from cart import
/// compute_total` by a rename whose request names both).
fn keeps_no_line(before: &str, after: &str, request: &str) -> bool {
    let plain = |line: &str| -> String {
        line.trim()
            .split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(|piece| {
                let end = piece.len()
                    - piece
                        .chars()
                        .next_back()
                        .filter(|c| !(c.is_alphanumeric() || *c == '_'))
                        .map_or(0, char::len_utf8);
                let (word, rest) = piece.split_at(end);
                if names(request, word) { rest } else { piece }
            })
            .collect()
    };
    // A set: each line of `after` is looked up once, not compared with every line before;
    // the count is of lines, repeated ones included.
    let mut was = std::collections::HashSet::new();
    let mut lines = 0;
    for line in before.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        was.insert(plain(line));
    }
    if lines < 2 {
        return false;
    }
    !after
        .lines()
        .filter(|l| !l.trim().is_empty())
        .any(|l| was.contains(&plain(l)))
}

/// Whether two names differ by a slip of spelling (`format_nmae`, `format_name`): at most two
/// edits, or a quarter of the longer name's characters.
fn spelled_alike(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) =
        (a.chars().take(64).collect(), b.chars().take(64).collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()] <= 2.max(a.len().max(b.len()) / 4)
}

/// Every text helper of the rule on `text` (a reply) and `before` (a file): for the property
/// tests, which give them any text; what they return stays within what they were given.
#[cfg(test)]
pub(super) fn check_any_text(text: &str, before: &str, request: &str) {
    if let Some(block) = whole_block(text) {
        assert!(text.contains(block));
        let content = as_file(block);
        assert!(content.len() <= block.len() + 1);
        let _ = left_out(&content, Some(before), request);
        let _ = dropped_definitions(before, &content, request);
        let _ = dropped_blocks(before, &content, request);
        let _ = dropped_values("x.json", before, &content, request);
        let _ = keeps_no_line(before, &content, request);
        if let Some(merged) = with_definitions(before, &content) {
            assert_ne!(merged, before);
        }
    }
    for literal in json_literals(text) {
        assert!(text.contains(literal.as_str()) || literal.len() <= text.len());
    }
    for name in definitions(text) {
        assert!(text.contains(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_the_last_fenced_one_or_one_never_closed() {
        assert_eq!(whole_block("a\n```\nx\n```\n```py\ny\n```"), Some("y\n"));
        assert_eq!(
            whole_block("```csv\nname,age\nada,36\n"),
            Some("name,age\nada,36\n")
        );
        for none in ["```", "```\n", "no block", "```\n\n", ""] {
            assert_eq!(whole_block(none), None, "{none:?}");
        }
    }

    #[test]
    fn lines_standing_for_others_are_found_and_code_is_not() {
        for (block, found) in [
            ("def a():\n    ...\n", Some("...")),
            ("- unchanged for x\n", None),
            (
                "x = 1\n# ... rest of the code unchanged\n",
                Some("# ... rest of the code unchanged"),
            ),
            (
                "// … código existente\nfn main() {}\n",
                Some("// … código existente"),
            ),
            ("def a():\n    return 'rest of it'\n", None),
            ("x = [1, 2]\nprint(x[...])\n", None),
            ("# Changelog\n\n- renamed greet to welcome\n", None),
            ("プロジェクト\n…\n", Some("…")),
        ] {
            assert_eq!(left_out(block, None, ""), found, "{block:?}");
        }
    }

    #[test]
    fn a_comment_in_the_place_of_the_files_lines_stands_for_them_in_any_language() {
        let before = "import os\n\n\ndef first(items):\n    return items[0]\n\n\ndef last(items):\n    return items[len(items)]\n";
        for note in [
            "# existing code unchanged",
            "# 其余代码不变",
            "# остальной код без изменений",
        ] {
            let after =
                format!("import os\n\n\n{note}\n\n\ndef last(items):\n    return items[-1]\n");
            assert_eq!(
                left_out(&after, Some(before), "fix last"),
                Some(note),
                "{note}"
            );
        }
        // A comment beside the file's lines, or where one line was, stands for nothing.
        let annotated = "import os\n\n\n# the first one\ndef first(items):\n    return items[0]\n\n\ndef last(items):\n    return items[-1]\n";
        assert_eq!(left_out(annotated, Some(before), "fix last"), None);
        let html = "<ul>\n  <li>a</li>\n  <li>b</li>\n</ul>\n";
        assert_eq!(
            left_out("<ul>\n  <!-- the list -->\n</ul>\n", Some(html), "add c"),
            Some("<!-- the list -->")
        );
        // Lines the request names may be replaced by a note.
        let with_helper = "def old_helper():\n    return 1\n\n\ndef main():\n    pass\n";
        assert_eq!(
            left_out(
                "# old_helper removed\n\n\ndef main():\n    pass\n",
                Some(with_helper),
                "remove old_helper"
            ),
            None
        );
    }

    #[test]
    fn the_changed_definitions_alone_take_the_place_of_the_files() {
        let before = "import os\n\n\ndef first(items):\n    return items[0]\n\n\ndef last(items):\n    return items[len(items)]\n\n\nif __name__ == \"__main__\":\n    print(last([1]))\n";
        assert_eq!(
            with_definitions(before, "def last(items):\n    return items[-1]\n").as_deref(),
            Some(
                "import os\n\n\ndef first(items):\n    return items[0]\n\n\ndef last(items):\n    return items[-1]\n\n\nif __name__ == \"__main__\":\n    print(last([1]))\n"
            )
        );
        // Two of them, in another order.
        let both = with_definitions(
            before,
            "def last(items):\n    return items[-1]\n\n\ndef first(items):\n    return items[:1][0]\n",
        )
        .unwrap();
        assert!(both.contains("return items[:1][0]\n\n\ndef last(items):\n    return items[-1]\n"));
        for block in [
            // A definition the file does not have (a new one is described-edit's to add).
            "def middle(items):\n    return items[1]\n",
            // Anything besides definitions.
            "import sys\n\ndef last(items):\n    return items[-1]\n",
            // The same as the file.
            "def first(items):\n    return items[0]\n",
            "",
        ] {
            assert_eq!(with_definitions(before, block), None, "{block:?}");
        }
        // A name the file defines twice is not guessed at.
        assert_eq!(
            with_definitions(
                "def f():\n    pass\n\ndef f():\n    pass\n",
                "def f():\n    return 1\n"
            ),
            None
        );
    }

    #[test]
    fn a_block_that_keeps_none_of_the_files_lines_is_another_file() {
        let rename = "Benenne die Funktion calc_total in compute_total um, in cart.py und main.py.";
        let main = "from cart import calc_total\n\nprint(calc_total([1, 2, 3]))\n";
        // cart.py's content, asked for main.py (the held-out holdout-7-rename-de).
        assert!(keeps_no_line(
            main,
            "def compute_total(prices):\n    return sum(prices)\n",
            rename
        ));
        // main.py renamed: its lines are kept but for the names the request changes.
        assert!(!keeps_no_line(
            main,
            "from cart import compute_total\n\nprint(compute_total([1, 2, 3]))\n",
            rename
        ));
        // The same in a language no list knows: the names are what is read.
        assert!(!keeps_no_line(
            main,
            "from cart import compute_total\n\nprint(compute_total([1, 2, 3]))\n",
            "calc_total fonksiyonunun adını compute_total yap."
        ));
        // One line kept is enough; a one-line file may change its one line.
        assert!(!keeps_no_line(
            main,
            "from cart import compute_total\nprint(6)\n",
            rename
        ));
        assert!(!keeps_no_line("TIMEOUT = 3\n", "LIMIT = 4\n", ""));
        assert!(!keeps_no_line("", "x\ny\n", ""));
        // Two lines that are the same are two lines: the file is not a one-line file.
        assert!(keeps_no_line("pass\npass\n", "x = 1\ny = 2\n", ""));
    }

    #[test]
    fn a_json_file_rewritten_whole_keeps_its_values_unless_asked() {
        assert_eq!(
            json_literals(
                "{\n  \"name\": \"a\\\"pi\",\n  \"port\": -8080.5e3,\n  \"debug\": false,\n}"
            ),
            ["name", "a\"pi", "port", "-8080.5e3", "debug"]
        );
        let broken = "{\n  \"name\": \"api\",\n  \"port\": 8080,\n  \"debug\": false,\n}\n";
        let none = "config.json does not parse. Fix it.";
        assert_eq!(
            dropped_values(
                "config.json",
                broken,
                "{\"api\": {\"port\": 8080, \"debug\": false}}",
                none
            ),
            ["name"]
        );
        assert!(
            dropped_values(
                "config.json",
                broken,
                "{\"name\": \"api\", \"port\": 8080, \"debug\": false}",
                none
            )
            .is_empty()
        );
        let bump = "Sürümü 1.4.2'den 1.5.0'a yükselt (package.json).";
        assert!(
            dropped_values(
                "package.json",
                "{\"version\": \"1.4.2\"}",
                "{\"version\": \"1.5.0\"}",
                bump
            )
            .is_empty()
        );
        // Other files are not read as JSON; any text never panics.
        assert!(dropped_values("a.py", "\"x\"", "", none).is_empty());
        assert_eq!(json_literals("\"テスト🧪"), ["テスト🧪"]);
        assert!(json_literals("- -- e").is_empty());
    }

    #[test]
    fn a_main_block_left_out_is_dropped() {
        let rename = "Rename the function greet to welcome in hello.py.";
        let before = "def greet(name):\n    return \"Hi \" + name\n\n\nif __name__ == \"__main__\":\n    print(greet(\"Ada\"))\n";
        assert_eq!(
            dropped_blocks(
                before,
                "def welcome(name):\n    return \"Hi \" + name\n",
                rename
            ),
            ["if __name__ == \"__main__\":"]
        );
        assert!(
            dropped_blocks(
                before,
                "def welcome(name):\n    return \"Hi \" + name\n\n\nif __name__ == \"__main__\":\n    print(welcome(\"Ada\"))\n",
                rename
            )
            .is_empty()
        );
    }

    #[test]
    fn a_line_the_file_had_is_no_gap() {
        assert_eq!(
            left_out("class P:\n    ...\n", Some("class P:\n    ...\n"), ""),
            None
        );
    }

    #[test]
    fn a_definition_the_request_does_not_name_must_stay() {
        let before = "def used_one(x):\n    return x + 1\n\n\ndef old_helper(x):\n    return x\n";
        let remove = "Remove the unused function old_helper from utils.py.";
        assert!(
            dropped_definitions(before, "def used_one(x):\n    return x + 1\n", remove).is_empty()
        );
        assert_eq!(
            dropped_definitions(before, "def old_helper(x):\n    return x\n", remove),
            ["used_one"]
        );
        // Any language: the request names it.
        let swahili = "Ondoa kazi old_helper kutoka utils.py.";
        assert!(
            dropped_definitions(before, "def used_one(x):\n    return x + 1\n", swahili).is_empty()
        );
        let renamed = "Rename used_one to first_one";
        assert!(
            dropped_definitions(
                before,
                "def first_one(x):\n    return x + 1\n\n\ndef old_helper(x):\n    return x\n",
                renamed
            )
            .is_empty()
        );
        // Named, but another definition takes its place with another body: replaced.
        let keep = "Add reverse_words, and keep used_one and old_helper as they are.";
        assert_eq!(
            dropped_definitions(before, "def reverse_words(t):\n    pass\n", keep),
            ["used_one", "old_helper"]
        );
        // Renamed: a name spelled alike over the same body.
        let typo = "def format_nmae(first, last):\n    return f\"{last}, {first}\"\n";
        assert!(
            dropped_definitions(
                typo,
                "def format_name(first, last):\n    return f\"{last}, {first}\"\n",
                remove
            )
            .is_empty()
        );
        // A new function over the body of the one it drops (the model's reverse_words with
        // shout's body, shout gone) is no rename.
        let shout = "def shout(text):\n    return text.upper() + \"!\"\n";
        assert_eq!(
            dropped_definitions(
                shout,
                "def reverse_words(text):\n    return text.upper() + \"!\"\n",
                remove
            ),
            ["shout"]
        );
        assert!(spelled_alike("format_nmae", "format_name"));
        assert!(!spelled_alike("shout", "reverse_words"));
        assert!(spelled_alike("", ""));
        assert!(!spelled_alike("テスト関数", "別の名前です"));
        // Not named: kept.
        let add = "Add reverse_words.";
        assert_eq!(
            dropped_definitions(before, "def reverse_words(t):\n    pass\n", add),
            ["used_one", "old_helper"]
        );
        // A new function in place of another is no rename.
        assert_eq!(
            dropped_definitions(
                before,
                "def used_one(x):\n    return x + 1\n\n\ndef fresh(x):\n    return 2\n",
                add
            ),
            ["old_helper"]
        );
        assert_eq!(
            definitions("class Cart:\n    def total(self):\n        pass\nasync def run():\n"),
            ["Cart", "run"]
        );
    }
}
