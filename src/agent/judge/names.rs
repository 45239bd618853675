//! The syntax and names of the Python files a task changed: a check of the workspace's own,
//! beside its tests, for the many workspaces that have none.
//!
//! A small model that rewrites a file whole can leave it unable to run — a name it never
//! defined (`print(APP_PORT)` with no `APP_PORT`), a syntax error — and nothing else says so
//! when the project has no tests. Before the task's first change the workspace's Python files
//! are read once (found by the project's own bounded search; `python_names.py`, beside this
//! file, run with `python3 -c` under the sandbox like every command); after a change the changed Python files are read
//! again. A problem a changed file has now that it did not have before the task — a syntax
//! error, or a name it reads that neither the file, its imports nor Python's builtins define
//! (pyflakes' F821, found with Python's own parser and symbol tables, not a pattern) — is the
//! task's, and fails the check like a test that passed at the baseline and fails now. What was
//! there before the task is never held against it.
//!
//! It runs when the agent may run `python3` (commands on, `python3` allowed) and there is a
//! Python file to read; otherwise it says nothing and holds nothing.

use std::collections::BTreeSet;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::agent::judge::checks::{CheckEnd, CheckResult, may_run};
use crate::agent::judge::project_checks;
use crate::agent::tools::{CallError, ChangeKind, CommandEnd, Toolbox};

/// The check itself, run as `python3 -c SCRIPT [PATH…]`.
const SCRIPT: &str = include_str!("python_names.py");
const PROGRAM: &str = "python3";
/// Most of the workspace's Python files read at the baseline (the project's bounded search;
/// a changed file past it is judged by its syntax alone).
const MAX_FILES: usize = 400;
/// How the check is named in the task's result and in what the model is told.
pub(crate) const NAME: &str = "Python syntax and names";

/// What one run of the check found.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub(crate) struct Names {
    /// The files it read (relative paths).
    checked: Vec<String>,
    problems: Vec<Problem>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
struct Problem {
    path: String,
    line: u64,
    /// `syntax`, or `name NAME`: what makes two runs' problems the same one.
    key: String,
    text: String,
}

/// The workspace's Python files before the task's first change: `None` when the check cannot
/// run (no `python3` the agent may run, or it failed). A workspace without Python files has
/// none to read (no command runs), and a Python file the task writes in it is judged whole.
pub(crate) async fn before(
    toolbox: &Toolbox,
    cancel: &CancellationToken,
) -> Result<Option<Names>, CallError> {
    if may_run(toolbox.settings(), PROGRAM).is_err() {
        return Ok(None);
    }
    let root = toolbox.workspace().root().to_path_buf();
    let files = tokio::task::spawn_blocking(move || project_checks::python_files(&root, MAX_FILES))
        .await
        .unwrap_or_default();
    if files.is_empty() {
        return Ok(Some(Names::default()));
    }
    run(toolbox, &files, cancel).await
}

/// The Python files the task changed, against `before`: `None` when none changed or the check
/// could not run; else a result that fails with the problems they have that they did not have
/// before the task.
pub(crate) async fn after(
    toolbox: &Toolbox,
    before: &Names,
    cancel: &CancellationToken,
) -> Result<Option<CheckResult>, CallError> {
    let root = toolbox.workspace().root();
    let changes = toolbox.ledger().changes(root);
    let changed: Vec<(String, bool)> = changes
        .iter()
        .filter(|c| c.path.ends_with(".py") && !matches!(c.how, ChangeKind::Deleted { .. }))
        .map(|c| (c.path.clone(), matches!(c.how, ChangeKind::Created { .. })))
        .collect();
    if changed.is_empty() {
        return Ok(None);
    }
    let paths: Vec<String> = changed.iter().map(|(p, _)| p.clone()).collect();
    let Some(now) = run(toolbox, &paths, cancel).await? else {
        return Ok(None);
    };
    let created: BTreeSet<&str> = changed
        .iter()
        .filter(|(_, created)| *created)
        .map(|(p, _)| p.as_str())
        .collect();
    let new = new_problems(before, &now, &created);
    let shown = paths.join(", ");
    let command = format!("{NAME} ({shown})");
    let mut output = format!("$ the {NAME} check of {shown}\n");
    for p in &new {
        output.push_str(&format!("{}:{}: {}\n", p.path, p.line, p.text));
    }
    Ok(Some(CheckResult {
        command,
        end: if new.is_empty() {
            CheckEnd::Passed
        } else {
            CheckEnd::Failed(Some(1))
        },
        failing: new.len() as u64,
        output,
    }))
}

/// The problems of `now` the task made: each one `before` did not have in the same file. A
/// file `before` did not read (past its bound, or not there yet and not `created` by the task
/// either) is judged only by its syntax: a name it lacks may have been lacking all along.
fn new_problems<'a>(before: &Names, now: &'a Names, created: &BTreeSet<&str>) -> Vec<&'a Problem> {
    now.problems
        .iter()
        .filter(|p| {
            let known = before.checked.contains(&p.path);
            if known {
                !before
                    .problems
                    .iter()
                    .any(|b| b.path == p.path && b.key == p.key)
            } else {
                created.contains(p.path.as_str()) || p.key == "syntax"
            }
        })
        .collect()
}

/// Runs the script over `paths` in its own
/// `execute_tool run_command` span; `None` when it could not run or printed no report.
async fn run(
    toolbox: &Toolbox,
    paths: &[String],
    cancel: &CancellationToken,
) -> Result<Option<Names>, CallError> {
    let mut argv = vec![PROGRAM.to_owned(), "-c".to_owned(), SCRIPT.to_owned()];
    argv.extend(paths.iter().cloned());
    let run = toolbox.run_engine_command(&argv, None, cancel).await;
    let run = match run {
        Ok(run) => run,
        Err(CallError::Cancelled) => return Err(CallError::Cancelled),
        Err(CallError::RespondToModel(e)) => {
            tracing::debug!(error = %e, "the Python names check could not run");
            return Ok(None);
        }
    };
    if run.end != CommandEnd::Exited(Some(0)) {
        tracing::debug!(end = ?run.end, "the Python names check did not finish");
        return Ok(None);
    }
    Ok(report(&run.text))
}

/// The report in a run's output: the line that is the script's JSON.
fn report(text: &str) -> Option<Names> {
    text.lines()
        .filter(|line| line.starts_with("{\"checked\""))
        .find_map(|line| serde_json::from_str(line).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(path: &str, key: &str) -> Problem {
        Problem {
            path: path.into(),
            line: 1,
            key: key.into(),
            text: format!("{key} in {path}"),
        }
    }

    fn names(checked: &[&str], problems: Vec<Problem>) -> Names {
        Names {
            checked: checked.iter().map(|s| (*s).to_owned()).collect(),
            problems,
        }
    }

    #[test]
    fn only_what_the_file_did_not_have_before_is_the_tasks() {
        let before = names(&["a.py", "b.py"], vec![problem("a.py", "name X")]);
        let now = names(
            &["a.py", "b.py"],
            vec![
                problem("a.py", "name X"),
                problem("a.py", "name Y"),
                problem("b.py", "name X"),
            ],
        );
        let new = new_problems(&before, &now, &BTreeSet::new());
        let keys: Vec<(&str, &str)> = new.iter().map(|p| (&*p.path, &*p.key)).collect();
        assert_eq!(keys, [("a.py", "name Y"), ("b.py", "name X")]);
    }

    #[test]
    fn a_file_not_read_before_is_judged_by_its_syntax_unless_the_task_created_it() {
        let before = names(&[], Vec::new());
        let now = names(
            &["old.py", "new.py"],
            vec![
                problem("old.py", "name X"),
                problem("old.py", "syntax"),
                problem("new.py", "name Z"),
            ],
        );
        let created = BTreeSet::from(["new.py"]);
        let new = new_problems(&before, &now, &created);
        let keys: Vec<(&str, &str)> = new.iter().map(|p| (&*p.path, &*p.key)).collect();
        assert_eq!(keys, [("old.py", "syntax"), ("new.py", "name Z")]);
    }

    #[test]
    fn the_report_is_the_scripts_json_line_and_anything_else_is_none() {
        let text = "$ python3 -c …\nexit status: 0\nstdout:\n{\"checked\": [\"a.py\"], \
                    \"problems\": [{\"path\": \"a.py\", \"line\": 3, \"key\": \"name X\", \
                    \"text\": \"undefined name 'X'\"}]}\n";
        let names = report(text).expect("a report");
        assert_eq!(names.checked, ["a.py"]);
        assert_eq!(names.problems[0].line, 3);
        assert_eq!(report("exit status: 0\nstdout:\n{\"checked\": [tru"), None);
        assert_eq!(report(""), None);
    }
}
