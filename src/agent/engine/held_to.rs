//! What the `files` policy holds a small model's change to, from the diff, the workspace and
//! the model's own words, never the request's words: whole lines a rewrite removed (the model
//! is asked, in one short JSON call, whether the request asks for those lines to go; when it
//! says no, the file is named back once to be written again with them), and a new Python
//! script that fails when run as it is (named back once with its output).
//!
//! Why: the 1.5B model, asked for each changed file whole, rewrote a page without the `<img>`
//! line it was asked to describe, and wrote a script that prints the sum of a file's numbers
//! only when given the file's name, which nobody asked for; both ended `completed` with no
//! check to say otherwise.

use serde_json::{Value, json};
use similar::{DiffOp, TextDiff};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::agent::engine::files_task::WorkspaceFile;
use crate::agent::engine::reading::is_test_file;
use crate::agent::engine::step::{Engine, StepError, one_line};
use crate::agent::engine::step_event::StepEvent;
use crate::agent::judge::checks::may_run;
use crate::agent::tools::{CallError, CommandEnd, Toolbox};
use crate::ollama::Message;

/// What the model is told of a file whose removed `lines` it said the request does not ask
/// to remove: the lines (as many as the question showed), and to write the file again.
pub(crate) fn kept_lines_note(path: &str, lines: &[String]) -> String {
    let shown: Vec<String> = lines
        .iter()
        .take(MAX_SHOWN)
        .map(|line| format!("  {}", one_line(line, MAX_LINE_CHARS)))
        .collect();
    format!(
        "Written, but {path} no longer has these lines, and the request does not ask to \
         remove them:\n{}\nWrite {path} again, whole, with them kept and the change made.",
        shown.join("\n")
    )
}

/// The interpreter a new Python script is tried with.
const PYTHON: &str = "python3";
/// How long a new script's trial run may take: one still running by then (a server, a loop
/// reading input) has started, which is all the trial asks.
const TRIAL: std::time::Duration = std::time::Duration::from_secs(10);
/// How much of a failed trial's output the model is shown (its end: the error).
const TRIAL_OUTPUT_CHARS: usize = 800;
/// Most removed lines shown to the model (the question stays short; the first ones say it).
const MAX_SHOWN: usize = 12;
/// Most characters of one removed line shown.
const MAX_LINE_CHARS: usize = 200;

/// Whole lines `after` removes from `before`, trimmed, those without a word (blank, a brace)
/// left out: lines deleted, and
/// lines of a changed stretch that no line of its new version resembles (shares at least half
/// of their words); a line changed in place is not removed.
pub(crate) fn removed_lines(before: &str, after: &str) -> Vec<String> {
    let diff = TextDiff::from_lines(before, after);
    let old: Vec<&str> = before.split_inclusive('\n').collect();
    let new: Vec<&str> = after.split_inclusive('\n').collect();
    let mut removed = Vec::new();
    for op in diff.ops() {
        let (old_index, old_len, new_range) = match *op {
            DiffOp::Delete {
                old_index, old_len, ..
            } => (old_index, old_len, 0..0),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (old_index, old_len, new_index..new_index + new_len),
            _ => continue,
        };
        let replacing: Vec<&str> = new.get(new_range).unwrap_or_default().to_vec();
        removed.extend(
            old.iter()
                .skip(old_index)
                .take(old_len)
                .map(|line| line.trim())
                .filter(|line| !words(line).is_empty())
                .filter(|line| !replacing.iter().any(|n| resembles(line, n)))
                .map(str::to_owned),
        );
    }
    removed
}

/// The words of a line: its runs of letters, digits and `_`.
fn words(line: &str) -> Vec<&str> {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// `new` shares at least half of the words of `old`.
fn resembles(old: &str, new: &str) -> bool {
    let old_words = words(old);
    let new_words = words(new);
    let shared = old_words.iter().filter(|w| new_words.contains(w)).count();
    shared * 2 >= old_words.len()
}

/// The question. The model says its answer in words (`answer`, a free string) before the
/// verdict (`asked`): on ten hand-written cases (five removals asked for, five not, in five
/// languages) the 1.5B model, asked for the verdict alone — or for "yes"/"no" as an enum, or
/// with the verdict first — gave the same verdict to all ten; with the words first, it was
/// right on nine. The grammar Ollama builds follows the schema's key order, and `json!`
/// sorts keys, so the first field's name must sort before `asked`: `answer` does.
const SYSTEM: &str = "You check a change against the request it was made for. Answer only \
    with JSON: \"answer\" says in a few words what the request asks for; \"asked\" is true \
    only when that is removing these lines, false otherwise.";

/// Asks the model whether the request asks for `lines` of `path` to be removed. A reply
/// that is not the JSON asked for is a yes: the change stands as written.
pub(crate) async fn asked_to_remove(
    engine: &Engine,
    path: &str,
    lines: &[String],
    index: usize,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<bool, StepError> {
    let shown: Vec<String> = lines
        .iter()
        .take(MAX_SHOWN)
        .map(|line| one_line(line, MAX_LINE_CHARS))
        .collect();
    let question = format!(
        "The request:\n{}\n\nThe change removes these lines from {path}:\n{}\n\nDoes the \
         request ask for them to be removed?",
        engine.request.content,
        shown.join("\n")
    );
    let schema = json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string", "maxLength": 200},
            "asked": {"type": "boolean"},
        },
        "required": ["answer", "asked"],
    });
    let request = engine.chat_request(
        vec![Message::system(SYSTEM), Message::user(question)],
        false,
        Some(schema),
    );
    let reply = engine.chat(&request, cancel).await?;
    let _ = events.send(StepEvent::Tokens {
        step: index,
        input: reply.prompt_eval_count,
        output: reply.eval_count,
    });
    Ok(serde_json::from_str::<Value>(reply.message.content.trim())
        .ok()
        .and_then(|v| v.get("asked").and_then(Value::as_bool))
        .unwrap_or(true))
}

/// The new Python scripts of the task: `.py` files it created, not test files, that no other
/// file imports, with code that runs when started (a `__main__` guard, or a call at the top
/// level).
pub(crate) fn new_scripts(before: &[WorkspaceFile], now: &[WorkspaceFile]) -> Vec<String> {
    now.iter()
        .filter(|f| f.path.ends_with(".py") && !is_test_file(&f.path))
        .filter(|f| !before.iter().any(|b| b.path == f.path))
        .filter(|f| runs_when_started(&f.text))
        .filter(|f| {
            let module = f
                .path
                .rsplit('/')
                .next()
                .unwrap_or(&f.path)
                .trim_end_matches(".py");
            !now.iter().filter(|o| o.path != f.path).any(|o| {
                o.text.lines().map(str::trim).any(|line| {
                    (line.starts_with("import ") || line.starts_with("from "))
                        && line
                            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .any(|w| w == module)
                })
            })
        })
        .map(|f| f.path.clone())
        .collect()
}

/// Python code that does something when started: a `__main__` guard, or a top-level call.
fn runs_when_started(text: &str) -> bool {
    text.contains("__main__") || calls_at_top_level(text)
}

/// A top-level line of Python that calls something and is not a definition, import or
/// decorator (what importing the module runs, beyond defining its names).
pub(crate) fn calls_at_top_level(text: &str) -> bool {
    text.lines().any(|line| {
        !line.starts_with(char::is_whitespace)
            && line.contains('(')
            && ![
                "def ", "class ", "async ", "import ", "from ", "@", "#", "\"", "'",
            ]
            .iter()
            .any(|start| line.starts_with(start))
    })
}

/// Runs each of `scripts` as `python3 <script>` (no arguments, no input, in the sandbox like
/// every command, at most [`TRIAL`]): what to tell the model of the first that ends with a
/// failure, `None` when each ran, or ran past the trial, or commands may not run.
pub(crate) async fn failed_trial(
    toolbox: &Toolbox,
    scripts: &[String],
    cancel: &CancellationToken,
) -> Result<Option<String>, StepError> {
    if may_run(toolbox.settings(), PYTHON).is_err() {
        return Ok(None);
    }
    for script in scripts {
        let argv = [PYTHON.to_owned(), script.clone()];
        let run = toolbox.run_engine_command(&argv, Some(TRIAL), cancel).await;
        let run = match run {
            Ok(run) => run,
            Err(CallError::Cancelled) => return Err(StepError::Cancelled),
            Err(CallError::RespondToModel(_)) => continue,
        };
        let CommandEnd::Exited(Some(status)) = run.end else {
            continue;
        };
        if status == 0 {
            continue;
        }
        let text = run.text.trim();
        let mut start = text.len().saturating_sub(TRIAL_OUTPUT_CHARS);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        return Ok(Some(format!(
            "{script} was written, but `{PYTHON} {script}` ends with status {status}:\n{}\n\
             If it is meant to run like that, fix it and write it whole; if it needs \
             arguments or input to run, say which in one sentence.",
            &text[start..]
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> WorkspaceFile {
        WorkspaceFile {
            path: path.to_owned(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn removed_lines_are_the_deleted_ones_not_the_changed_ones() {
        let before = "<h1>Beans</h1>\n<img src=\"beans.jpg\">\n\n<p>Fresh</p>\n";
        let after = "<h1>Beans!</h1>\n<p>Fresh</p>\n";
        assert_eq!(removed_lines(before, after), ["<img src=\"beans.jpg\">"]);
        assert!(removed_lines(before, before).is_empty());
        assert!(removed_lines("a\nb\n", "a\nb\nc\n").is_empty());
        assert!(removed_lines("", "").is_empty());
        assert_eq!(removed_lines("é\n日本\n", "é\n"), ["日本"]);
        // A line changed in place is not removed; one changed past recognition is.
        let js = "return user.name + \", \" + user.address.city;\n";
        assert!(removed_lines(js, "return user.name;\n").is_empty());
        assert_eq!(removed_lines("a = 1\nb = 2\n", "a = 1\nc = 3\n"), ["b = 2"]);
        assert!(removed_lines("}\n", "};\n").is_empty());
    }

    #[test]
    fn a_new_script_is_a_new_python_file_that_runs_when_started_and_no_file_imports() {
        let before = [file("numbers.txt", "3\n")];
        let now = [
            file("numbers.txt", "3\n"),
            file(
                "sum_file.py",
                "import sys\n\nprint(sum(int(l) for l in open('numbers.txt')))\n",
            ),
            file(
                "guarded.py",
                "def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
            ),
            file("lib.py", "def f(x):\n    return x\n"),
            file("used.py", "print(1)\n"),
            file("app.py", "from used import x\n"),
            file("test_sum.py", "print(2)\n"),
            file("notes.md", "print(3)\n"),
        ];
        assert_eq!(new_scripts(&before, &now), ["sum_file.py", "guarded.py"]);
        assert!(new_scripts(&now, &now).is_empty());
    }
}
