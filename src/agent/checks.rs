//! `agent.checks`: the operator's commands (`python3 -m unittest`, `cargo test`) that judge a
//! change. They run when a step is about to give its answer and the task's tools changed a
//! file since they last ran; a failure goes back to the model with the commands' output, up to
//! `agent.check_rounds` times, and past that the step fails with what the checks said. The
//! last report goes into the task's result.
//!
//! A model's word that "the tests pass" counts for nothing here: the checks' exit status does.
//!
//! With no checks configured, the tests the task itself wrote are its checks: a Python test
//! file it created or changed (`test_x.py`, `x_test.py`) runs as `python3 -m unittest x` when
//! `python3` (or `python`) is a program the agent may run. A 1.5B model asked for a unit test
//! wrote one that imports names its module does not have; run, it fails, and the task does
//! not end `completed` on the model's word.

use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use super::tools::{CallError, ChangeKind, CommandEnd, Toolbox};

/// Most characters of a failed check's output sent back to the model (its end: a test
/// runner's summary is last).
const FEEDBACK_CHARS: usize = 6000;

/// The checks of one task and how far they got.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    commands: Vec<Vec<String>>,
    rounds: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The ledger generation the checks last ran at.
    ran_at: Option<u64>,
    /// Failures already sent back to the model.
    rounds_used: usize,
    last: Option<CheckReport>,
}

/// How each check command ended, the last time they ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    pub results: Vec<CheckResult>,
    /// Failures sent back to the model before this report.
    pub rounds: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    /// The command line, as one string.
    pub command: String,
    pub end: CheckEnd,
    /// What the model is sent: the command line, how it ended, its output.
    pub output: String,
}

/// How one check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckEnd {
    Passed,
    /// Exited with this failure status (`None`: ended by a signal).
    Failed(Option<i32>),
    TimedOut,
    /// It could not start (its program is not on the command `PATH`, say).
    NotRun,
}

impl From<CommandEnd> for CheckEnd {
    fn from(end: CommandEnd) -> Self {
        match end {
            CommandEnd::Exited(Some(0)) => CheckEnd::Passed,
            CommandEnd::Exited(code) => CheckEnd::Failed(code),
            CommandEnd::TimedOut | CommandEnd::Cancelled => CheckEnd::TimedOut,
        }
    }
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.end == CheckEnd::Passed)
    }

    /// One line for the task's result: `checks: python3 -m unittest passed`.
    pub fn line(&self) -> String {
        let each: Vec<String> = self
            .results
            .iter()
            .map(|r| {
                let how = match r.end {
                    CheckEnd::Passed => "passed".to_owned(),
                    CheckEnd::Failed(Some(code)) => format!("failed (exit status {code})"),
                    CheckEnd::Failed(None) => "failed (ended by a signal)".to_owned(),
                    CheckEnd::TimedOut => "timed out".to_owned(),
                    CheckEnd::NotRun => "could not run".to_owned(),
                };
                format!("`{}` {how}", r.command)
            })
            .collect();
        let rounds = match self.rounds {
            0 => String::new(),
            1 => " (after 1 round of fixes)".to_owned(),
            n => format!(" (after {n} rounds of fixes)"),
        };
        format!("checks: {}{rounds}", each.join(", "))
    }
}

/// What the step does after the checks.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Nothing to check (no checks, or nothing changed since they last ran), or they passed.
    Pass,
    /// They failed: send the model this and go on.
    Retry(String),
    /// They failed again with no round left.
    GiveUp(CheckReport),
}

impl Checks {
    pub fn new(commands: Vec<Vec<String>>, rounds: usize) -> Checks {
        Checks {
            commands: commands.into_iter().filter(|c| !c.is_empty()).collect(),
            rounds,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Each critical section replaces whole values: a poisoned lock holds consistent data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last report, if the checks ran.
    pub fn last(&self) -> Option<CheckReport> {
        self.state().last.clone()
    }

    /// Whether any check is configured.
    pub fn configured(&self) -> bool {
        !self.commands.is_empty()
    }

    /// Runs the checks before any change, to show the model what fails (the `small` policy's
    /// first step of a change): the failing checks' output, or `None` when they pass.
    pub async fn before_work(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<Option<String>, CallError> {
        let results = run_all(&self.commands, toolbox, cancel).await?;
        let mut text = String::new();
        for result in results.iter().filter(|r| r.end != CheckEnd::Passed) {
            text.push_str(&tail(&result.output, FEEDBACK_CHARS));
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        Ok((!text.is_empty()).then_some(text))
    }
}

/// Runs `commands` in turn, each as a check.
async fn run_all(
    commands: &[Vec<String>],
    toolbox: &Toolbox,
    cancel: &CancellationToken,
) -> Result<Vec<CheckResult>, CallError> {
    let mut results = Vec::new();
    for argv in commands {
        let command = argv.join(" ");
        let (end, output) = match toolbox.run_check(argv, cancel).await {
            Ok(run) => (run.end.into(), run.text),
            Err(CallError::Cancelled) => return Err(CallError::Cancelled),
            Err(CallError::RespondToModel(e)) => (
                CheckEnd::NotRun,
                format!("$ {command}\ncould not run: {e}\n"),
            ),
        };
        results.push(CheckResult {
            command,
            end,
            output,
        });
    }
    Ok(results)
}

/// The checks of a task without configured ones: `python3 -m unittest <module>` for each
/// Python test file the request is checked by (`expect::tests_kept`) and each the task created
/// or changed, when the agent may run `python3` (or `python`); else none.
fn own_tests(toolbox: &Toolbox) -> Vec<Vec<String>> {
    let allow = &toolbox.settings().commands.allow;
    let Some(python) = ["python3", "python"]
        .into_iter()
        .find(|p| allow.iter().any(|a| a == p))
    else {
        return Vec::new();
    };
    let changed = toolbox
        .ledger()
        .changes(toolbox.workspace().root())
        .into_iter()
        .filter(|c| !matches!(c.how, ChangeKind::Deleted { .. }))
        .map(|c| c.path);
    let mut modules: Vec<String> = Vec::new();
    for path in toolbox.workspace().checks().iter().cloned().chain(changed) {
        if let Some(module) = python_test_module(&path)
            && !modules.contains(&module)
        {
            modules.push(module);
        }
    }
    modules
        .into_iter()
        .map(|module| vec![python.to_owned(), "-m".into(), "unittest".into(), module])
        .collect()
}

/// A test file of the task's own that runs no test checks nothing: `unittest` says `Ran 0
/// tests` and, before Python 3.12, exits 0 (3.12 exits 5, "no tests ran"). The 1.5B model
/// asked for a unit test wrote a file holding only the function it was to test, and the check
/// passed. Such a run counts as failed, with exit status 5, saying why.
fn no_test_ran_is_a_failure(result: &mut CheckResult) {
    if result.end == CheckEnd::Passed && result.output.contains("\nRan 0 tests") {
        result.end = CheckEnd::Failed(Some(5));
        result.output.push_str(
            "\nno test ran: a unittest test file needs a unittest.TestCase class whose methods \
             are named test_…, each asserting what the code does\n",
        );
    }
}

/// `tests/test_calc.py` → `tests.test_calc`: the module `unittest` runs, for a file named as
/// a test whose path is plain module names; else `None`.
fn python_test_module(path: &str) -> Option<String> {
    let stem = path.strip_suffix(".py")?;
    let name = stem.rsplit('/').next()?;
    let is_test = name.starts_with("test_") || name.ends_with("_test") || name == "tests";
    let plain = stem.split('/').all(|part| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_alphanumeric() || c == '_')
    });
    (is_test && plain).then(|| stem.replace('/', "."))
}

impl Checks {
    /// Runs the checks if the task's tools changed something since they last ran.
    pub async fn after_answer(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<Verdict, CallError> {
        let generation = toolbox.ledger().generation();
        if generation == 0 {
            return Ok(Verdict::Pass);
        }
        let own;
        let commands = if self.commands.is_empty() {
            own = own_tests(toolbox);
            &own
        } else {
            &self.commands
        };
        if commands.is_empty() {
            return Ok(Verdict::Pass);
        }
        let ours = self.commands.is_empty();
        {
            // Nothing changed since they last ran: their outcome stands. Answering again
            // after a failure is another round, not a pass.
            let mut state = self.state();
            if state.ran_at == Some(generation)
                && let Some(last) = state.last.clone()
            {
                if last.passed() {
                    return Ok(Verdict::Pass);
                }
                if state.rounds_used >= self.rounds {
                    return Ok(Verdict::GiveUp(last));
                }
                state.rounds_used += 1;
                return Ok(Verdict::Retry(feedback(&last)));
            }
        }
        let mut results = run_all(commands, toolbox, cancel).await?;
        if ours {
            for result in &mut results {
                no_test_ran_is_a_failure(result);
            }
        }
        let mut state = self.state();
        let report = CheckReport {
            results,
            rounds: state.rounds_used,
        };
        state.ran_at = Some(generation);
        state.last = Some(report.clone());
        if report.passed() {
            return Ok(Verdict::Pass);
        }
        if state.rounds_used >= self.rounds {
            return Ok(Verdict::GiveUp(report));
        }
        state.rounds_used += 1;
        Ok(Verdict::Retry(feedback(&report)))
    }
}

/// The message after failed checks: their output (its end) and what to do.
fn feedback(report: &CheckReport) -> String {
    let mut text = String::from(
        "The checks this workspace is judged by failed after your change, so the request is \
         not done yet:\n",
    );
    for result in report.results.iter().filter(|r| r.end != CheckEnd::Passed) {
        text.push_str(&tail(&result.output, FEEDBACK_CHARS));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(
        "Read what failed, fix the code (not the tests, unless the request asks for that), \
         then answer.",
    );
    text
}

/// The last `max` characters of `text`, marked when cut.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().skip(count - max).collect();
    format!("[… {} characters cut …]\n{kept}", count - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(command: &str, end: CheckEnd) -> CheckResult {
        CheckResult {
            command: command.into(),
            end,
            output: format!("$ {command}\nFAILED (failures=1)\n"),
        }
    }

    #[test]
    fn a_report_says_how_each_check_ended() {
        let report = CheckReport {
            results: vec![
                result("python3 -m unittest", CheckEnd::Passed),
                result("cargo test", CheckEnd::Failed(Some(101))),
            ],
            rounds: 2,
        };
        assert!(!report.passed());
        assert_eq!(
            report.line(),
            "checks: `python3 -m unittest` passed, `cargo test` failed (exit status 101) (after 2 \
             rounds of fixes)"
        );
        let message = feedback(&report);
        assert!(message.contains("$ cargo test\nFAILED"), "{message}");
        assert!(
            !message.contains("$ python3"),
            "only what failed: {message}"
        );
    }

    #[test]
    fn test_files_name_the_module_unittest_runs() {
        for (file, module) in [
            ("test_calc.py", Some("test_calc")),
            ("tests/test_calc.py", Some("tests.test_calc")),
            ("calc_test.py", Some("calc_test")),
            ("calc.py", None),
            ("test_calc.txt", None),
            ("my-tests/test_a.py", None),
        ] {
            assert_eq!(python_test_module(file).as_deref(), module, "{file}");
        }
    }

    #[test]
    fn long_output_keeps_its_end() {
        let text: String = "é".repeat(10) + "END";
        assert_eq!(tail(&text, 3), "[… 10 characters cut …]\nEND");
        assert_eq!(tail("short", 10), "short");
    }
}
