//! An answer checked against the workspace: under the `files` policy, before a small model
//! answers a question about the project, it may write one short Python snippet that prints
//! what answers it (calls the project's functions, reads its files), and the snippet runs in
//! the project's folder, under the sandbox like every command; what it printed goes into the
//! prompt of the answer, before the request.
//!
//! Why: the 1.5B model, with the files in front of it, answered `total([1, 2, 3])` with 10,
//! a route without the prefix another file adds to it, and a length off by one; the code
//! would have said. Nothing here reads the request's words: whether to run anything, and
//! what, is the model's; what is true is what the code prints.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::agent::engine::files_task::WorkspaceFile;
use crate::agent::engine::held_to::calls_at_top_level;
use crate::agent::engine::reading::is_test_file;
use crate::agent::engine::step::{Engine, StepError};
use crate::agent::engine::step_event::StepEvent;
use crate::agent::judge::checks::may_run;
use crate::agent::tools::{CallError, CommandEnd, Toolbox};
use crate::ollama::Message;

const PYTHON: &str = "python3";
/// How long the snippet may run.
const WITHIN: Duration = Duration::from_secs(10);
/// Most characters of a snippet run, and of its output shown.
const MAX_CODE_CHARS: usize = 800;
const MAX_OUTPUT_CHARS: usize = 1500;

/// Asked after the request, in the answer's own prompt (the system prompt and the files are
/// the answer call's, so the model server reuses them).
const ASK: &str = "Before you answer: write one short Python snippet that, run with python3 in \
    the project's folder, prints what answers this request or checks your answer (import the \
    project's modules and call their functions, or read its files). Reply only with JSON: \
    \"code\" is the snippet, or \"\" when running code cannot help.";

/// What the question before the answer came to.
pub(crate) enum Probe {
    /// The snippet's output, as the answer's prompt shows it before the request.
    Printed(String),
    /// Nothing to show: commands may not run, the model wrote no snippet, or it did not run
    /// cleanly (its error is not shown: a wrong snippet's traceback says nothing of the
    /// answer).
    Nothing,
    /// The reply was not the JSON asked for but text (a server or model that ignores
    /// `format`): the model's answer, kept as it is — nothing it says is dropped.
    Answered(String),
}

/// Asks the model for the snippet and runs it.
pub(crate) async fn run(
    engine: &Engine,
    toolbox: &Toolbox,
    files: &[WorkspaceFile],
    messages: &[Message],
    index: usize,
    events: &UnboundedSender<StepEvent>,
    cancel: &CancellationToken,
) -> Result<Probe, StepError> {
    if may_run(toolbox.settings(), PYTHON).is_err() {
        return Ok(Probe::Nothing);
    }
    let mut asked = messages.to_vec();
    if let Some(last) = asked.last_mut() {
        last.content = format!("{}\n\n{ASK}", last.content);
    }
    let schema = json!({
        "type": "object",
        "properties": {"code": {"type": "string", "maxLength": MAX_CODE_CHARS}},
        "required": ["code"],
    });
    let request = engine.chat_request(asked, false, Some(schema));
    let reply = engine.chat(&request, cancel).await?;
    let _ = events.send(StepEvent::Tokens {
        step: index,
        input: reply.prompt_eval_count,
        output: reply.eval_count,
    });
    let content = reply.message.content.trim();
    // The JSON asked for: an object with a `code` string. Anything else (`4410`, a JSON
    // example the request asked for, prose) is the model's answer.
    let Some(code) = serde_json::from_str::<Value>(content)
        .ok()
        .and_then(|v| v.get("code").and_then(Value::as_str).map(str::to_owned))
    else {
        return Ok(if content.is_empty() {
            Probe::Nothing
        } else {
            Probe::Answered(content.to_owned())
        });
    };
    let code = code.trim().to_owned();
    if code.is_empty() || code.len() > MAX_CODE_CHARS * 4 {
        return Ok(Probe::Nothing);
    }
    // `-B`: no `__pycache__` left in the workspace by a question.
    let argv = [
        PYTHON.to_owned(),
        "-B".to_owned(),
        "-c".to_owned(),
        format!("{}{code}", prelude(files)),
    ];
    let run = toolbox
        .run_engine_command(&argv, Some(WITHIN), cancel)
        .await;
    let run = match run {
        Ok(run) => run,
        Err(CallError::Cancelled) => return Err(StepError::Cancelled),
        Err(CallError::RespondToModel(_)) => return Ok(Probe::Nothing),
    };
    if run.end != CommandEnd::Exited(Some(0)) {
        return Ok(Probe::Nothing);
    }
    let Some(printed) = stdout_of(&run.text).filter(|p| !p.trim().is_empty()) else {
        return Ok(Probe::Nothing);
    };
    Ok(Probe::Printed(format!(
        "This ran in the project's folder:\n```python\n{code}\n```\nIt printed:\n```\n{}\n```",
        head(printed.trim_end(), MAX_OUTPUT_CHARS)
    )))
}

/// What runs before the snippet: the names of the project's top-level Python modules that
/// only define things (importing one runs nothing else), each imported if it can be — the
/// 1.5B model's snippets called the project's functions without importing them
/// (`print(total([1, 2, 3]))`). Test files are left out.
fn prelude(files: &[WorkspaceFile]) -> String {
    let mut text = String::new();
    for file in files {
        let Some(module) = file.path.strip_suffix(".py") else {
            continue;
        };
        let identifier = module
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && module.chars().all(|c| c.is_alphanumeric() || c == '_');
        if !identifier || is_test_file(&file.path) || calls_at_top_level(&file.text) {
            continue;
        }
        text.push_str(&format!(
            "try:\n    from {module} import *\nexcept Exception:\n    pass\n"
        ));
    }
    text
}

/// The standard output of a command's report (`$ …`, `exit status: 0`, `stdout:`, …,
/// `stderr:`, …).
fn stdout_of(report: &str) -> Option<&str> {
    let start = report.find("\nstdout:\n")? + "\nstdout:\n".len();
    let rest = &report[start..];
    Some(rest.find("\nstderr:\n").map_or(rest, |end| &rest[..=end]))
}

/// The start of `text`, at most `max` bytes, on a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_output_is_read_from_a_commands_report() {
        let report = "$ python3 -B -c print(6)\nexit status: 0\nstdout:\n6\n";
        assert_eq!(stdout_of(report), Some("6\n"));
        let both = "$ x\nexit status: 0\nstdout:\na\nb\nstderr:\nwarn\n";
        assert_eq!(stdout_of(both), Some("a\nb\n"));
        assert_eq!(stdout_of("$ x\nexit status: 0\nstderr:\nwarn\n"), None);
        assert_eq!(head("日本語", 4), "日");
    }

    #[test]
    fn the_prelude_imports_the_modules_that_only_define_things() {
        let file = |path: &str, text: &str| WorkspaceFile {
            path: path.to_owned(),
            text: text.to_owned(),
        };
        let files = [
            file("cart.py", "def total(items):\n    return sum(items)\n"),
            file(
                "guarded.py",
                "def f():\n    pass\n\nif __name__ == '__main__':\n    f()\n",
            ),
            file("serve.py", "import app\napp.run(port=80)\n"),
            file("test_cart.py", "import unittest\n"),
            file("pkg/inner.py", "X = 1\n"),
            file("my-script.py", "X = 1\n"),
            file("notes.md", "# notes\n"),
        ];
        assert_eq!(
            prelude(&files),
            "try:\n    from cart import *\nexcept Exception:\n    pass\n\
             try:\n    from guarded import *\nexcept Exception:\n    pass\n"
        );
    }
}
