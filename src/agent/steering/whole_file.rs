//! The `whole-file` rule: a change a small model does not make with a tool call is asked for
//! as the whole new content of one file, in one code block, and written on its behalf.
//!
//! A 1.5B coder model that is to change a file it has read explains how one would do it,
//! writes a Python `def edit_file(...)`, or calls `edit_file` with an `old_text` taken from the
//! request; shown the file and asked for all of it as it should be, it writes the file. (Aider
//! found the same: weak models edit best in its "whole" format.) So when the model answers a
//! request for a change while the change is not in the workspace, the rule names one file —
//! where the request's stated result does not hold yet, else the new file the request asks
//! for, else the file it names (or the answer or a tool result names) — reads it on the model's
//! behalf if the step has not, and asks for its whole new content. The next reply's code block
//! is taken as that file's `write_file`; the tool refuses what it refuses from the model (a
//! test the request is checked by, a JSON or YAML file broken), and the checks and the
//! request's expectations judge the result as they judge any change.
//!
//! When the checks fail after a change, their output goes back with an ask for the file the
//! task wrote last, whole. A block that is the file as it was is no change and is not written.
//! A block that leaves lines out (`...`, "rest of the code unchanged") is not written: the
//! model is asked again for every line. One that drops a definition of the file the request
//! does not name (`def used_one` when asked to remove `old_helper`) is not written as the file
//! either; it is most often the changed part alone, which `described-edit` may make as an edit
//! of that part, and otherwise the next ask says what it dropped. Files over [`MAX_LINES`] lines are
//! never asked for whole; the rule asks at most [`MAX_ASKS`] times a step.

use serde_json::json;

use super::text::{call, echo, fenced_blocks, missing_file, named_files};
use super::{Facts, Reply, Rule, Verdict};
use crate::agent::expect::Expectations;
use crate::agent::tools::parse_arguments;

/// Most whole-file asks in one step.
const MAX_ASKS: usize = 4;
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
}

#[derive(Default)]
pub(crate) struct WholeFile {
    /// What the last message of the loop asked for: only the next reply can answer it.
    asked: Option<Asked>,
    asks: usize,
    /// Why the block that answered the last ask was not written, for the next ask.
    not_written: Option<String>,
}

impl Rule for WholeFile {
    fn name(&self) -> &'static str {
        "whole-file"
    }

    fn wants_unmet(&self) -> bool {
        true
    }

    fn read_reply(&mut self, reply: &mut Reply, facts: &Facts) -> Option<Verdict> {
        let asked = self.asked.take()?;
        if !reply.calls.is_empty() {
            // It made calls of its own instead: they run.
            return None;
        }
        let block = fenced_blocks(&reply.text)
            .into_iter()
            .rev()
            .find(|b| !b.trim().is_empty())?;
        let content = format!("{}\n", block.trim_end_matches(['\n', '\r']));
        if let Some(line) = left_out(&content, asked.before.as_deref()) {
            if self.asks >= MAX_ASKS {
                return None;
            }
            self.asks += 1;
            let message = format!(
                "That code block was not written to {}. Its line `{line}` stands for lines it \
                 leaves out, and the block replaces the whole file. {}",
                asked.path,
                ask(&asked, facts.request)
            );
            self.asked = Some(asked);
            return Some(Verdict::Nudge {
                message,
                tools: true,
            });
        }
        if asked.before.as_deref() == Some(content.as_str()) && self.asks < MAX_ASKS {
            // The file copied back as it is: the change is not in it.
            self.asks += 1;
            let message = format!(
                "That code block is {} as it is now: the change the request asks for is not in \
                 it, so nothing was written. {}",
                asked.path,
                ask(&asked, facts.request)
            );
            self.asked = Some(asked);
            return Some(Verdict::Nudge {
                message,
                tools: true,
            });
        }
        if let Some(before) = asked.before.as_deref() {
            let dropped = dropped_definitions(before, &content, facts.expectations);
            if !dropped.is_empty() {
                // Most often the part that changes, shown alone: `described-edit` may make it
                // as an edit of that part. If it does not, the next ask says what was wrong.
                self.not_written = Some(format!(
                    "That code block was not written to {}: it drops {}, which the request does \
                     not ask to remove.",
                    asked.path,
                    dropped
                        .iter()
                        .map(|d| format!("`{d}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                return None;
            }
        }
        reply.calls = vec![call(
            "write_file",
            json!({"path": asked.path, "content": content}),
        )];
        reply.text.clear();
        None
    }

    fn after_failed_checks(&mut self, feedback: &str, facts: &Facts) -> Option<String> {
        if !facts.final_step || self.asks >= MAX_ASKS {
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
        let before = ws
            .existing(&path)
            .ok()
            .and_then(|p| std::fs::read_to_string(p).ok());
        let asked = Asked { path, before };
        let message = format!("{feedback}\n{}", ask(&asked, facts.request));
        self.asks += 1;
        self.asked = Some(asked);
        Some(message)
    }

    fn before_answer(&mut self, answer: &str, facts: &Facts) -> Option<Verdict> {
        if !facts.asks_for_change
            || !facts.final_step
            || self.asks >= MAX_ASKS
            || facts.toolbox.get("write_file").is_none()
        {
            return None;
        }
        let (path, why) = target(answer, facts)?;
        let ws = facts.toolbox.workspace();
        let before = ws
            .existing(&path)
            .ok()
            .and_then(|p| std::fs::read_to_string(p).ok());
        let asked = Asked { path, before };
        let mut message = ask(&asked, facts.request);
        if let Some(why) = why {
            message = format!("The request is not done yet: {why}.\n{message}");
        }
        if let Some(not_written) = self.not_written.take() {
            message = format!("{not_written}\n{message}");
        }
        self.asks += 1;
        let read = asked.before.is_some() && !read_in_step(&asked.path, facts);
        let path = asked.path.clone();
        self.asked = Some(asked);
        if read && facts.toolbox.get("read_file").is_some() {
            return Some(Verdict::Call {
                call: call("read_file", json!({ "path": path })),
                then: message,
            });
        }
        Some(Verdict::Nudge {
            message,
            tools: true,
        })
    }
}

/// The message asking for `asked`'s whole content.
fn ask(asked: &Asked, request: &str) -> String {
    let path = &asked.path;
    match asked.before {
        Some(_) => format!(
            "The request is: {}\nWrite the complete new content of {path}, with the change \
             made, as one fenced code block (```): every line of the file, the lines you keep as \
             well as the lines you change, and nothing else. The block is written to {path} as \
             it is.",
            echo(request)
        ),
        None => format!(
            "The request is: {}\nWrite the complete content of the new file {path} as one \
             fenced code block (```), and nothing else. The block is written to {path} as it is.",
            echo(request)
        ),
    }
}

/// The file to ask for, and what is wrong with it (`None`: nothing to ask for).
///
/// Where the request's stated result does not hold, that file. With nothing changed yet and
/// no new file named (a new file is asked for by `change-reminder` and `held-writes`, whose
/// `write_file` a small model makes), the one existing file the request names to change, or,
/// when it names none, the first one the answer names, the step read, or a tool result names,
/// files of tests after the rest. A request that names several files says too little of which is to change. A test
/// file the request is checked by is never one, nor a file too long to ask for whole.
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
    let is_test = super::rules::is_test_file;
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
            && ran.call.function.name == "read_file"
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
        r.ok && r.call.function.name == "read_file"
            && parse_arguments(&r.call.function.arguments)["path"]
                .as_str()
                .is_some_and(|p| p.trim_start_matches("./") == path)
    })
}

/// A line of `content` that stands for lines left out (`...`, `# ... rest of the code`,
/// `// existing code unchanged`) and that `before`, the file's text, does not have.
fn left_out<'a>(content: &'a str, before: Option<&str>) -> Option<&'a str> {
    const COMMENTS: [&str; 6] = ["<!--", "#", "//", "/*", "--", ";"];
    const SAYS: [&str; 5] = [
        "rest of",
        "unchanged",
        "existing code",
        "same as before",
        "remains the same",
    ];
    content.lines().map(str::trim).find(|line| {
        if before.is_some_and(|b| b.lines().any(|l| l.trim() == *line)) {
            return false;
        }
        let comment = COMMENTS.iter().find_map(|c| line.strip_prefix(c));
        let mut bare = comment.unwrap_or(line).trim();
        for end in ["*/", "-->"] {
            if let Some(b) = bare.strip_suffix(end) {
                bare = b.trim();
            }
        }
        let lower = bare.to_lowercase();
        matches!(bare, "..." | "…")
            || comment.is_some()
                && (SAYS.iter().any(|w| lower.contains(w))
                    || bare.starts_with("...")
                    || bare.starts_with('…'))
    })
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

/// The names of the top-level definitions of `text` (`def used_one(` → `used_one`).
fn definitions(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|line| {
            let rest = DEFINES.iter().find_map(|k| line.strip_prefix(k))?;
            let name = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .filter(|n| !n.is_empty())?;
            Some(name)
        })
        .collect()
}

/// The top-level definitions of `before` that `after` no longer has and the request does not
/// expect gone ("remove old_helper", "rename greet to welcome").
fn dropped_definitions<'a>(before: &'a str, after: &str, expected: &Expectations) -> Vec<&'a str> {
    let now = definitions(after);
    definitions(before)
        .into_iter()
        .filter(|name| !now.contains(name) && !expected.expects_gone(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_standing_for_others_are_found_and_code_is_not() {
        for (block, found) in [
            ("def a():\n    ...\n", Some("...")),
            ("- unchanged for x\n", None),
            (
                "x = 1\n# ... rest of the code unchanged\n",
                Some("# ... rest of the code unchanged"),
            ),
            ("// existing code\nfn main() {}\n", Some("// existing code")),
            (
                "<!-- rest of the page -->\n",
                Some("<!-- rest of the page -->"),
            ),
            ("def a():\n    return 'rest of it'\n", None),
            ("x = [1, 2]\nprint(x[...])\n", None),
            ("# Changelog\n\n- renamed greet to welcome\n", None),
            ("プロジェクト\n…\n", Some("…")),
        ] {
            assert_eq!(left_out(block, None), found, "{block:?}");
        }
    }

    #[test]
    fn a_line_the_file_had_is_no_gap() {
        assert_eq!(
            left_out("class P:\n    ...\n", Some("class P:\n    ...\n")),
            None
        );
    }

    #[test]
    fn a_definition_the_request_does_not_expect_gone_must_stay() {
        let before = "def used_one(x):\n    return x + 1\n\n\ndef old_helper(x):\n    return x\n";
        let dir = tempfile::tempdir().unwrap();
        let ws = crate::agent::tools::Workspace::open(dir.path()).unwrap();
        let of = |request: &str| Expectations::of(request, &ws);
        let remove = of("Remove the unused function old_helper from utils.py.");
        assert!(
            dropped_definitions(before, "def used_one(x):\n    return x + 1\n", &remove).is_empty()
        );
        assert_eq!(
            dropped_definitions(before, "def old_helper(x):\n    return x\n", &remove),
            ["used_one"]
        );
        let renamed = of("Rename used_one to first_one");
        assert!(
            dropped_definitions(
                before,
                "def first_one(x):\n    pass\ndef old_helper(x):\n    pass\n",
                &renamed
            )
            .is_empty()
        );
        // Named, but to be kept.
        let keep = of("Add reverse_words, and keep used_one and old_helper as they are.");
        assert_eq!(
            dropped_definitions(before, "def reverse_words(t):\n    pass\n", &keep),
            ["used_one", "old_helper"]
        );
        assert_eq!(
            definitions("class Cart:\n    def total(self):\n        pass\nasync def run():\n"),
            ["Cart", "run"]
        );
    }
}
