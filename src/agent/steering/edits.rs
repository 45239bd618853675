//! The `described-edit` rule: a change the model wrote out instead of making it, made as the
//! `edit_file` or `write_file` call it describes.
//!
//! A 1.5B model asked to fix a bug reads the file, finds the fault and answers "replace the
//! line `return a - b` with `return a + b`", or shows the corrected function in a code block,
//! and makes no call. When the request asks for a change and the text says exactly which one,
//! the call is made on its behalf: the tool still refuses what it would refuse from the model
//! (a file not read, text not found, not found once), and the checks still judge the result.
//! Only while no file has changed: after a change, a block in a reply quotes it.
//!
//! | the reply says | the call made |
//! |---|---|
//! | replace `A` with `B` (also: change `A` to `B`), `A` once in one file the task read | `edit_file` of that file, `A` → `B` |
//! | a code block whose first line is a line of one file the task read (`def add(a, b):`) | `edit_file` of that line and the lines it heads (deeper indented, and a closing line at its own indent) → the block; of several blocks, the last that differs from the file |
//! | a code block, when the request asks for a file that does not exist yet | `write_file` of that file with the (last) block |
//! | a code block defining something new (`def reverse_words(…):`), when the request names one file (not a test) the task read | `write_file` of that file with the block added at its end |

use serde_json::json;

use super::text::{call, fenced_blocks, missing_file};
use super::{Facts, Reply, Rule, Verdict};
use crate::agent::tools::names::{EDIT_FILE, READ_FILE, WRITE_FILE};
use crate::agent::tools::parse_arguments;
use crate::ollama::ToolCall;

/// Most calls this rule makes in one step.
const MAX_EDITS: usize = 4;
/// Longest code block taken as an edit, in lines.
const MAX_BLOCK_LINES: usize = 200;

#[derive(Default)]
pub(crate) struct DescribedEdit {
    made: usize,
}

impl Rule for DescribedEdit {
    fn name(&self) -> &'static str {
        "described-edit"
    }

    fn read_reply(&mut self, reply: &mut Reply, facts: &Facts) -> Option<Verdict> {
        // Once a file changed, a code block in the answer is most often the change quoted
        // back ("people.csv now holds: ```…```"), not another one to make: made again as an
        // edit, it mangled the file the 1.5B model had just written right. What is left to do
        // then is `whole-file`'s to ask for, by name.
        if !reply.calls.is_empty()
            || !facts.asks_for_change
            || facts.changed
            || self.made >= MAX_EDITS
        {
            return None;
        }
        let edit = described_edit(&reply.text, facts)?;
        self.made += 1;
        reply.calls = vec![edit];
        reply.text.clear();
        None
    }
}

/// The files the step read, with the text their reads returned (the last read of each).
fn files_read(facts: &Facts) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = Vec::new();
    for ran in facts
        .ran
        .iter()
        .filter(|r| r.ok && r.call.function.name == READ_FILE)
    {
        let args = parse_arguments(&ran.call.function.arguments);
        let Some(path) = args["path"].as_str() else {
            continue;
        };
        files.retain(|(p, _)| p != path);
        files.push((path.to_owned(), ran.text.clone()));
    }
    files
}

/// The edit or write `text` describes, if it describes exactly one.
fn described_edit(text: &str, facts: &Facts) -> Option<ToolCall> {
    let read = files_read(facts);
    if let Some(edit) = replace_with(text, &read) {
        return Some(edit);
    }
    let blocks: Vec<&str> = fenced_blocks(text)
        .into_iter()
        .filter(|b| {
            let lines = b.lines().count();
            lines > 0 && lines <= MAX_BLOCK_LINES && !b.trim_start().starts_with('{')
        })
        .collect();
    if let (Some(block), Some(file)) = (
        blocks.last(),
        missing_file(facts.request, facts.toolbox.workspace()),
    ) {
        let content = format!("{}\n", block.trim_end_matches('\n'));
        return Some(call(WRITE_FILE, json!({"path": file, "content": content})));
    }
    // A reply often shows the code as it is, then as it should be: the last block that
    // differs from the file is the change; a new definition goes at the end of the file.
    let named = super::text::named_files(facts.request, facts.toolbox.workspace());
    blocks.iter().rev().find_map(|block| {
        block_edit(block, &read).or_else(|| append_block(block, &read, &named, facts.request))
    })
}

/// "replace `A` with `B`" (or 'A' and "B" in quotes), in any language (`A` を `B` に, `A` por
/// `B`, `A` → `B`): two spans a word or two apart in one sentence, `A` once in exactly one file
/// read, `B` not in it and spelled like `A` (a fix of it, not another thing the sentence
/// names: "`add` calls `mul`"). An arrow between them needs no likeness.
fn replace_with(text: &str, read: &[(String, String)]) -> Option<ToolCall> {
    let mut spans = backticked(text);
    spans.extend(quoted(text));
    spans.sort_by_key(|s| s.start);
    for pair in spans.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        let Some(between) = text.get(old.end..new.start).map(str::trim) else {
            continue;
        };
        let arrow = matches!(between, "→" | "->" | "=>");
        let joined = arrow
            || (!between.is_empty()
                && between.chars().count() <= 24
                && between.split_whitespace().count() <= 2
                && !between.chars().any(|c| {
                    matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | '\n')
                        || matches!(c, '。' | '、' | '，' | '；' | '：' | '！' | '？')
                }));
        if !joined || old.text == new.text {
            continue;
        }
        let mut holding = read
            .iter()
            .filter(|(_, content)| content.matches(old.text).count() == 1);
        let (Some((path, content)), None) = (holding.next(), holding.next()) else {
            continue;
        };
        let alike = similar::TextDiff::from_chars(old.text, new.text).ratio() >= 0.5;
        if !arrow && (content.contains(new.text) || !alike) {
            continue;
        }
        return Some(call(
            EDIT_FILE,
            json!({"path": path, "old_text": old.text, "new_text": new.text}),
        ));
    }
    None
}

/// A `` `span` `` of a text: its text, and the byte offsets of its opening backtick and just
/// past its closing one.
struct Span<'a> {
    text: &'a str,
    start: usize,
    end: usize,
}

/// The single-backtick spans of a text (fences skipped), on one line each.
fn backticked(text: &str) -> Vec<Span<'_>> {
    let mut spans = Vec::new();
    let mut rest = 0;
    while let Some(open) = text.get(rest..).and_then(|t| t.find('`')).map(|o| rest + o) {
        if text.get(open..).is_some_and(|t| t.starts_with("```")) {
            rest = open + 3;
            continue;
        }
        let Some(close) = text
            .get(open + 1..)
            .and_then(|t| t.find('`'))
            .map(|c| open + 1 + c)
        else {
            break;
        };
        spans.extend(one_line_span(text, open, close));
        rest = close + 1;
    }
    spans
}

/// The spans of a text in single or double quotes, on one line each. A quote opens only after
/// the start, a space or an opening bracket and closes only before the end, a space or
/// punctuation, so the apostrophe of "don't" is no quote.
fn quoted(text: &str) -> Vec<Span<'_>> {
    let mut spans = Vec::new();
    let mut rest = 0;
    while let Some((open, q)) = text.get(rest..).and_then(|t| {
        t.char_indices()
            .find(|&(_, c)| c == '\'' || c == '"')
            .map(|(i, c)| (rest + i, c))
    }) {
        let opens = text[..open]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || matches!(c, '(' | '[' | ':'));
        let close = opens
            .then(|| {
                text[open + 1..].char_indices().find(|&(i, c)| {
                    c == q
                        && text[open + 1 + i + 1..]
                            .chars()
                            .next()
                            .is_none_or(|n| n.is_whitespace() || n.is_ascii_punctuation())
                })
            })
            .flatten()
            .map(|(i, _)| open + 1 + i);
        let Some(close) = close else {
            rest = open + 1;
            continue;
        };
        spans.extend(one_line_span(text, open, close));
        rest = close + 1;
    }
    spans
}

/// The span from the one-byte quote at `open` to the one at `close`, if what they enclose is
/// not empty and on one line.
fn one_line_span(text: &str, open: usize, close: usize) -> Option<Span<'_>> {
    let inner = &text[open + 1..close];
    (!inner.is_empty() && !inner.contains('\n')).then_some(Span {
        text: inner,
        start: open,
        end: close + 1,
    })
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// `lines` moved from `from` columns of indentation (their first line's: a block inside a
/// Markdown list is indented) to `to` (the line it replaces).
fn reindent(lines: &[&str], from: usize, to: usize) -> String {
    lines
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                return String::new();
            }
            let cut = indent(l).min(from);
            format!("{}{}", " ".repeat(to), &l[cut..])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Words that open a definition: a block that starts with one defines something.
const DEFINITIONS: [&str; 7] = [
    "def ",
    "class ",
    "fn ",
    "pub fn ",
    "function ",
    "func ",
    "async def ",
];

/// A code block that defines something the one non-test file the request names (and the task
/// read) does not have yet: that file with the block added at its end.
fn append_block(
    block: &str,
    read: &[(String, String)],
    named: &[String],
    request: &str,
) -> Option<ToolCall> {
    let first = block.lines().find(|l| !l.trim().is_empty())?.trim();
    if !DEFINITIONS.iter().any(|d| first.starts_with(d)) {
        return None;
    }
    let mut targets = named.iter().filter(|f| !super::text::is_test_file(f));
    let (Some(target), None) = (targets.next(), targets.next()) else {
        return None;
    };
    let (_, content) = read.iter().find(|(path, _)| path == target)?;
    if content.lines().any(|l| l.trim() == first) {
        return None;
    }
    // What it defines is asked for: named by the request or by a test the task read (a
    // tutorial's `def edit_file(…)` is not).
    let name: String = DEFINITIONS
        .iter()
        .find_map(|d| first.strip_prefix(d))
        .unwrap_or_default()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let asked =
        |text: &str| !name.is_empty() && super::text::names_word(text, &name.to_lowercase());
    if !asked(request)
        && !read
            .iter()
            .any(|(path, text)| super::text::is_test_file(path) && asked(text))
    {
        return None;
    }
    let lines: Vec<&str> = block.trim_end().lines().collect();
    let from = lines
        .iter()
        .find(|l| !l.trim().is_empty())
        .map_or(0, |l| indent(l));
    let added = reindent(&lines, from, 0);
    let content = format!("{}\n\n\n{added}\n", content.trim_end());
    Some(call(
        WRITE_FILE,
        json!({"path": target, "content": content}),
    ))
}

/// A code block whose first line is one line of exactly one file read: that line and the lines
/// it heads, replaced by the block (shifted to the line's indentation).
fn block_edit(block: &str, read: &[(String, String)]) -> Option<ToolCall> {
    let block_lines: Vec<&str> = block.trim_end().lines().collect();
    let first = block_lines.iter().find(|l| !l.trim().is_empty())?;
    let mut found = read.iter().filter_map(|(path, content)| {
        let lines: Vec<&str> = content.lines().collect();
        let mut at = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.trim() == first.trim())
            .map(|(i, _)| i);
        match (at.next(), at.next()) {
            (Some(i), None) => Some((path, lines, i)),
            _ => None,
        }
    });
    let (Some((path, lines, start)), None) = (found.next(), found.next()) else {
        return None;
    };
    let base = indent(lines[start]);
    let mut end = start + 1;
    while end < lines.len() && (lines[end].trim().is_empty() || indent(lines[end]) > base) {
        end += 1;
    }
    while end > start + 1 && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    // A closing line at the opening's indent (`}`, `end`) belongs to it when the block has one.
    let closes = |l: &str| matches!(l.trim(), "}" | "};" | "end" | ")" | "]");
    if block_lines.last().is_some_and(|l| closes(l))
        && lines
            .get(end)
            .is_some_and(|l| closes(l) && indent(l) == base)
    {
        end += 1;
    }
    let old = lines[start..end].join("\n");
    let new = reindent(&block_lines, indent(first), base);
    if old == new {
        return None;
    }
    Some(call(
        EDIT_FILE,
        json!({"path": path, "old_text": old, "new_text": new}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(content: &str) -> Vec<(String, String)> {
        vec![("calc.py".to_owned(), content.to_owned())]
    }

    fn args(call: Option<ToolCall>) -> serde_json::Value {
        call.map(|c| json!({"name": c.function.name, "arguments": c.function.arguments}))
            .unwrap_or_default()
    }

    /// The `key` argument of the edit [`block_edit`] makes of `reply` when calc.py holds
    /// `file` (`null` when it makes none).
    fn block_edit_arg(reply: &str, file: &str, key: &str) -> serde_json::Value {
        args(block_edit(reply, &read(file)))["arguments"][key].clone()
    }

    const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";

    #[test]
    fn replace_a_with_b_is_an_edit_of_the_one_file_holding_a() {
        assert_eq!(
            args(replace_with(
                "To fix it, replace the line `return a - b` with `return a + b`.",
                &read(CALC)
            )),
            json!({"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}})
        );
        assert!(replace_with("`add` and `mul` are functions", &read(CALC)).is_none());
        assert!(
            replace_with("replace `return` with `yield`", &read(CALC)).is_none(),
            "twice"
        );
        assert!(replace_with("replace `x` with", &read(CALC)).is_none());
        // The same sentence in other languages, or with an arrow.
        for text in [
            "`return a - b` を `return a + b` に置き換えてください。",
            "Cambia `return a - b` por `return a + b`.",
            "`return a - b` → `return a + b`",
        ] {
            assert_eq!(
                args(replace_with(text, &read(CALC)))["arguments"]["new_text"],
                json!("return a + b"),
                "{text}"
            );
        }
        // Two things a sentence names are no replacement of one by the other.
        assert!(replace_with("`add` returns `None`", &read(CALC)).is_none());
        assert!(replace_with("`add` calls `multiply` here", &read(CALC)).is_none());
        assert!(
            replace_with("Replace `return a - b`. Use `return a + b`", &read(CALC)).is_none(),
            "two sentences"
        );
        // In quotes, as small models often write it.
        let todo = vec![("todo.txt".to_owned(), "buy milk\ncall mum\n".to_owned())];
        for text in [
            "In todo.txt, change 'buy milk' to 'buy oat milk'.",
            "Replace \"buy milk\" with \"buy oat milk\"",
        ] {
            assert_eq!(
                args(replace_with(text, &todo)),
                json!({"name": "edit_file", "arguments": {"path": "todo.txt", "old_text": "buy milk", "new_text": "buy oat milk"}}),
                "{text}"
            );
        }
        // An apostrophe is no quote.
        assert!(replace_with("don't change buy milk to 'x'", &todo).is_none());
        assert!(
            quoted("it's Ada's 'pen' — 「x」 'é'")
                .iter()
                .map(|s| s.text)
                .eq(["pen", "é"])
        );
    }

    #[test]
    fn a_corrected_function_replaces_the_one_it_rewrites() {
        let edit = block_edit("def add(a, b):\n    return a + b\n", &read(CALC));
        assert_eq!(
            args(edit),
            json!({"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "def add(a, b):\n    return a - b", "new_text": "def add(a, b):\n    return a + b"}})
        );
        // The same text is no edit; a first line found nowhere is none either.
        assert!(block_edit("def add(a, b):\n    return a - b", &read(CALC)).is_none());
        assert!(block_edit("def sub(a, b):\n    return a - b", &read(CALC)).is_none());
        // A method inside a class keeps the class's indentation.
        let class =
            "class C:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n";
        assert_eq!(
            block_edit_arg("def f(self):\n    return 3", class, "new_text"),
            json!("    def f(self):\n        return 3")
        );
        // Braces: the closing line at the opening's indent goes with it.
        let rust = "fn f() -> i32 {\n    1\n}\n\nfn g() {}\n";
        assert_eq!(
            block_edit_arg("fn f() -> i32 {\n    2\n}", rust, "old_text"),
            json!("fn f() -> i32 {\n    1\n}")
        );
    }

    #[test]
    fn a_block_indented_in_a_list_is_moved_to_the_lines_it_replaces() {
        assert_eq!(
            block_edit_arg("   def add(a, b):\n       return a + b", CALC, "new_text"),
            json!("def add(a, b):\n    return a + b")
        );
    }

    #[test]
    fn a_new_definition_goes_at_the_end_of_the_one_file_named() {
        let named = vec!["calc.py".to_owned(), "test_calc.py".to_owned()];
        let asks = "Add the function sub to calc.py.";
        let write = append_block(
            "def sub(a, b):\n    return a - b\n",
            &read(CALC),
            &named,
            asks,
        );
        assert_eq!(
            args(write)["arguments"]["content"],
            json!(format!(
                "{}\n\n\ndef sub(a, b):\n    return a - b\n",
                CALC.trim_end()
            ))
        );
        // Not a definition, or one the file has: no write.
        assert!(append_block("print(1)", &read(CALC), &named, asks).is_none());
        assert!(append_block("def add(a, b):\n    return 0", &read(CALC), &named, asks).is_none());
        // A definition nobody asked for (a tutorial's) is not added.
        assert!(append_block("def edit_file(p):\n    pass", &read(CALC), &named, asks).is_none());
    }

    #[test]
    fn spans_and_fences_are_told_apart() {
        let spans: Vec<&str> = backticked("a `x` b ```py\ncode\n``` c `y`")
            .into_iter()
            .map(|s| s.text)
            .collect();
        assert!(spans.contains(&"x") && spans.contains(&"y"), "{spans:?}");
        assert!(backticked("`é` to `ü` ✓").len() == 2);
        assert!(backticked("unclosed `span").is_empty());
    }
}
