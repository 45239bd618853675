//! What a task under the `small` policy asks, read by the model before the work: one short call
//! with a JSON-schema `format` (the question the `files` policy asks in `direct`), given the
//! workspace's file names and, when the checks fail before any change, their output. The request's words
//! are not read here, in any language: whether it asks for a change, and whether the failing
//! checks are its to fix, are the model's reading; which files are tests is the workspace's
//! (their names).
//!
//! Under `off` nothing is asked: a capable model's replies pass through untouched, and its
//! task is judged by the workspace and the checks alone.

use std::ops::ControlFlow;
use std::path::Path;

use tokio_util::sync::CancellationToken;
use tracing::info;

use serde_json::{Value, json};

use crate::agent::engine::files_task::{Intent, WorkspaceFile};
use crate::agent::engine::step::{Engine, StepError};
use crate::agent::engine::step_progress::Progress;
use crate::ollama::Message;

/// Most file names the model is shown with the request.
const MAX_NAMES: usize = 50;
/// Most files walked for test files to keep.
const MAX_WALKED: usize = 2000;

/// The model's reading of the request, and what follows from it for the workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The request asks for files to change.
    pub change: bool,
    /// When the checks failed before the work: whether the request asks for them to pass.
    pub fix_failing: Option<bool>,
    /// Test files kept as they are: the checks failed before the work, the request is to make
    /// them pass, and not to change tests.
    pub kept: Vec<String>,
}

/// Asks the model what the request wants (its tokens counted in the task's).
///
/// A reply that is not the JSON asked for is read as the reading that fails loudly rather
/// than completes silently: a change asked for (a task that changes nothing then fails,
/// saying so, instead of completing on an answer that did nothing), and, when the checks fail
/// before the work, asked to make them pass and not to change the tests (the tests stay as
/// they are, and checks still failing at the end fail the task with their output).
pub(crate) async fn read_request(
    engine: &Engine,
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<Reading, StepError> {
    let Some(toolbox) = engine.toolbox.as_deref() else {
        return Ok(Reading::default());
    };
    let ws = toolbox.workspace().clone();
    let paths = tokio::task::spawn_blocking(move || {
        let mut paths = Vec::new();
        ws.walk_files(&crate::agent::tools::NOT_THE_PROJECTS, |path| {
            paths.push(ws.display(&path));
            if paths.len() >= MAX_WALKED {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        paths.sort();
        paths
    })
    .await
    .unwrap_or_default();
    let failing = failing_before(engine, toolbox, cancel).await?;
    let names: Vec<&str> = paths.iter().take(MAX_NAMES).map(String::as_str).collect();
    let read = read_intent(engine, &names, failing.as_deref(), progress, cancel).await?;
    let understood = read.is_some();
    // Unclear is the loud reading (see above).
    let intent = read.unwrap_or(Intent {
        change: true,
        tests: false,
        fix_failing: failing.is_some(),
    });
    let kept = if failing.is_some() && intent.fix_failing && !intent.tests {
        let files: Vec<WorkspaceFile> = paths
            .into_iter()
            .map(|path| WorkspaceFile {
                path,
                text: String::new(),
            })
            .collect();
        test_files(&files)
    } else {
        Vec::new()
    };
    info!(
        task_id = %progress.task.id,
        understood,
        change = intent.change,
        tests = intent.tests,
        fix_failing = intent.fix_failing,
        kept = kept.len(),
        "the model's reading of the request"
    );
    Ok(Reading {
        change: intent.change,
        fix_failing: failing.is_some().then_some(intent.fix_failing),
        kept,
    })
}

/// The project's checks before any change (the baseline): their failing output, `None` when
/// they pass or there are none.
pub(crate) async fn failing_before(
    engine: &Engine,
    toolbox: &crate::agent::tools::Toolbox,
    cancel: &CancellationToken,
) -> Result<Option<String>, StepError> {
    if !engine.checks.available(toolbox).await {
        return Ok(None);
    }
    engine
        .checks
        .before_work(toolbox, cancel)
        .await
        .map_err(|_| StepError::Cancelled)
}

/// How much of the failing checks' output the model is shown.
const FAILURE_CHARS: usize = 1200;

/// The two readings of a request, as the model picks one.
const WANTS_ANSWER: &str = "an answer";
const WANTS_CHANGES: &str = "file changes";

/// What the model is told it answers, and examples: requests in several languages, neither
/// list nor rule (a model follows examples better than a definition). The same question as the
/// `files` policy's (`direct`), which keeps its own private.
const SYSTEM: &str = "You read a request to a coding assistant and say what it wants. Answer \
    only with JSON: \"goal\" says in a few words what the person wants; \"wants\" is \"an \
    answer\" when they want to know something (an explanation, a value, a count, advice) and \
    the files stay as they are, or \"file changes\" when files are to be created, changed or \
    deleted; \"tests\" is true when tests are to be written or changed; \"fix_failing\", when \
    asked, is true when the failing tests are to pass or the fault they show is to be fixed.";

const EXAMPLES: [(&str, &str); 4] = [
    (
        "The project's files: util.py\n\nThe request:\nWhat does parse() in util.py return for \
         an empty string?",
        r#"{"goal": "know what parse returns for an empty string", "wants": "an answer", "tests": false}"#,
    ),
    (
        "The project's files: cart.py, test_cart.py\n\nThe request:\nLa función total de \
         cart.py suma mal los descuentos.",
        r#"{"goal": "total in cart.py handles discounts correctly", "wants": "file changes", "tests": false}"#,
    ),
    (
        "The project's files: README.md, app.py\n\nThe request:\nREADME.md \
         にインストール手順を書いてほしい。",
        r#"{"goal": "installation steps in README.md", "wants": "file changes", "tests": false}"#,
    ),
    (
        "The project's files: app.py, test_app.py\n\nThe request:\nWie viele Tests gibt es in \
         test_app.py?",
        r#"{"goal": "the number of tests in test_app.py", "wants": "an answer", "tests": false}"#,
    ),
];

fn schema(failing: bool) -> Value {
    let mut properties = json!({
        "goal": {"type": "string", "maxLength": 200},
        "wants": {"type": "string", "enum": [WANTS_ANSWER, WANTS_CHANGES]},
        "tests": {"type": "boolean"},
    });
    let mut required = vec!["goal", "wants", "tests"];
    if failing {
        properties["fix_failing"] = json!({"type": "boolean"});
        required.push("fix_failing");
    }
    json!({"type": "object", "properties": properties, "required": required})
}

/// The end of `text`, at most `max` bytes, on a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The call (also the `files` policy's): `None` when the reply is not the JSON asked for. Its
/// tokens count in the task's.
pub(crate) async fn read_intent(
    engine: &Engine,
    names: &[&str],
    failing: Option<&str>,
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<Option<Intent>, StepError> {
    let mut question = format!(
        "The project's files: {}\n",
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    );
    if let Some(failing) = failing {
        question.push_str(&format!(
            "\nThe project's tests fail now:\n{}\n",
            tail(failing, FAILURE_CHARS)
        ));
    }
    question.push_str(&format!("\nThe request:\n{}", engine.request.content));
    if failing.is_some() {
        question.push_str("\n\n(Say \"fix_failing\" too.)");
    }
    let mut messages = vec![Message::system(SYSTEM)];
    for (asked, answered) in EXAMPLES {
        messages.push(Message::user(asked));
        messages.push(Message::assistant(answered));
    }
    messages.push(Message::user(question));
    let request = engine.chat_request(messages, false, Some(schema(failing.is_some())));
    let reply = engine.chat(&request, cancel).await?;
    progress.add_tokens(None, reply.prompt_eval_count, reply.eval_count);
    let parsed = serde_json::from_str::<Value>(reply.message.content.trim()).ok();
    let flag = |key: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(key))
            .and_then(Value::as_bool)
    };
    let change = match parsed
        .as_ref()
        .and_then(|v| v.get("wants"))
        .and_then(Value::as_str)
    {
        Some(WANTS_CHANGES) => true,
        Some(WANTS_ANSWER) => false,
        _ => return Ok(None),
    };
    Ok(Some(Intent {
        change,
        tests: flag("tests").unwrap_or(false),
        // Unclear is "asked" (see `read_request`).
        fix_failing: failing.is_some() && flag("fix_failing").unwrap_or(true),
    }))
}

/// Test files, by the names test runners look for (`test_*.py`, `*_test.go`, `*.test.js`,
/// `*.spec.ts`, files under `tests/`): kept as they are when the request is to make failing
/// tests pass and not to change tests.
pub(crate) fn test_files(files: &[WorkspaceFile]) -> Vec<String> {
    files
        .iter()
        .map(|f| f.path.clone())
        .filter(|path| is_test_file(path))
        .collect()
}

pub(crate) fn is_test_file(path: &str) -> bool {
    let p = Path::new(path);
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let stem = p.file_stem().and_then(|n| n.to_str()).unwrap_or_default();
    let in_tests = p.components().rev().skip(1).any(|c| {
        matches!(
            c.as_os_str().to_str(),
            Some("tests" | "test" | "__tests__" | "spec")
        )
    });
    in_tests
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || name.contains(".test.")
        || name.contains(".spec.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_files_are_found_by_the_names_test_runners_use() {
        for path in [
            "test_a.py",
            "a_test.go",
            "src/a.test.js",
            "b.spec.ts",
            "tests/x.rs",
        ] {
            assert!(is_test_file(path), "{path}");
        }
        for path in ["a.py", "latest.py", "contest.txt", "testing.md"] {
            assert!(!is_test_file(path), "{path}");
        }
    }
}
