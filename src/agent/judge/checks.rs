//! The checks that judge a task's change: `agent.checks` when the operator set them, else the
//! workspace's own test command ([`crate::agent::judge::project_checks`]: `cargo test`, `npm test`,
//! `python3 -m unittest`, `go test ./...`, `make test`), when the agent may run its program.
//!
//! They run once before the task's first change (the baseline: before the first call of a
//! tool that writes or runs), and again when a step is about to give its answer and the task's
//! tools changed a file since they last ran; the runner runs them once more at the end if
//! anything changed after that. A failure goes back to the model with the commands' output.
//! Whether the task may still end `completed` is decided against the baseline:
//!
//! - a check that passed at the baseline and fails now, or more failures than at the baseline,
//!   go back to the model up to `agent.check_rounds` times, and past that the task fails;
//! - failures that were already there at the baseline go back to the model once, and do not by
//!   themselves fail a task that made nothing worse — unless the task was asked to make them
//!   pass: the operator's `agent.checks`, or tests the request is checked by
//!   ([`Workspace::checks`](crate::agent::tools::Workspace::checks)), must pass in the end.
//!
//! The task's result says how they ended, in one line: `checks: 1 failing → 0 failing (python3
//! -m unittest)`, `checks: passed → passed (cargo test)`, `checks: none found`, or `checks: not
//! run (commands are off: …)`. A model's word that "the tests pass" counts for nothing here:
//! the checks' exit status and their runner's summary do.

use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use crate::agent::judge::names::{self, Names};
use crate::agent::judge::project_checks;
use crate::agent::tools::names::RUN_COMMAND;
use crate::agent::tools::{CallError, ChangeKind, CommandEnd, ToolSettings, Toolbox};

/// Most characters of a failed check's output sent back to the model (its end: a test
/// runner's summary is last).
const FEEDBACK_CHARS: usize = 6000;

/// The checks of one task and how far they got.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    /// `agent.checks`.
    configured: Vec<Vec<String>>,
    rounds: usize,
    /// The checks before the task's first change.
    baseline: tokio::sync::OnceCell<CheckRun>,
    /// The workspace's Python syntax and names before the task's first change (`None`: that
    /// check cannot run here).
    names_before: tokio::sync::OnceCell<Option<Names>>,
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

/// Why no check ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoChecks {
    /// None configured, and the workspace declares no test command.
    NoneFound,
    /// The workspace declares one, but the agent may not run its program (why).
    NotRun(String),
}

/// One run of a task's checks: how each command ended, or why none ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    pub results: Vec<CheckResult>,
    /// `Some` when no command ran (then `results` is empty).
    pub none: Option<NoChecks>,
    /// The syntax and names of the Python files the task changed
    /// ([`crate::agent::judge::names`]), when any changed and that check could run: failing
    /// only with problems they did not have before the task.
    pub names: Option<Box<CheckResult>>,
}

/// How the checks ended, the last time they ran, against the baseline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Before the task's first change (`None`: they were not run then).
    pub before: Option<CheckRun>,
    pub after: CheckRun,
    /// Failures sent back to the model before this report.
    pub rounds: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    /// The command line, as one string.
    pub command: String,
    pub end: CheckEnd,
    /// How many tests failed: the runner's summary where it says, else 1 for a command that
    /// did not pass.
    pub failing: u64,
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

impl CheckResult {
    fn new(command: String, end: CheckEnd, output: String) -> CheckResult {
        let failing = match end {
            CheckEnd::Passed => 0,
            // A runner that says it failed none but exited with a failure did not run them
            // all (a build error, a crash): one failure.
            _ => project_checks::failures_in(&output)
                .filter(|n| *n > 0)
                .unwrap_or(1),
        };
        CheckResult {
            command,
            end,
            failing,
            output,
        }
    }

    pub(crate) fn passed(&self) -> bool {
        self.end == CheckEnd::Passed
    }

    /// `` `cargo test` failed (exit status 101) ``.
    fn how(&self) -> String {
        let how = match self.end {
            CheckEnd::Passed => "passed".to_owned(),
            CheckEnd::Failed(Some(code)) => format!("failed (exit status {code})"),
            CheckEnd::Failed(None) => "failed (ended by a signal)".to_owned(),
            CheckEnd::TimedOut => "timed out".to_owned(),
            CheckEnd::NotRun => "could not run".to_owned(),
        };
        format!("`{}` {how}", self.command)
    }
}

impl CheckRun {
    fn none(why: NoChecks) -> CheckRun {
        CheckRun {
            results: Vec::new(),
            none: Some(why),
            names: None,
        }
    }

    pub fn passed(&self) -> bool {
        self.every().all(CheckResult::passed)
    }

    /// The commands' results, then the names check's.
    fn every(&self) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().chain(self.names.as_deref())
    }

    /// Failing tests, summed over the commands.
    pub fn failing(&self) -> u64 {
        self.results.iter().map(|r| r.failing).sum()
    }

    /// One side of the result line: `3 failing`, `passed`, `none found`, `not run`.
    fn side(&self) -> String {
        match &self.none {
            Some(NoChecks::NoneFound) => "none found".to_owned(),
            Some(NoChecks::NotRun(_)) => "not run".to_owned(),
            None if self.failing() == 0 => "passed".to_owned(),
            None => format!("{} failing", self.failing()),
        }
    }
}

impl CheckReport {
    /// Nothing failed at the end (also when no check ran).
    pub fn passed(&self) -> bool {
        self.after.passed()
    }

    /// The checks ended worse than they began: a check that passed at the baseline (or was
    /// not there) fails now, or fails more tests than it did.
    pub fn worse(&self) -> bool {
        // The names check fails only with problems the task made.
        self.after.names.as_ref().is_some_and(|n| !n.passed())
            || self.after.results.iter().any(|now| {
                let then = self
                    .before
                    .iter()
                    .flat_map(|b| &b.results)
                    .find(|b| b.command == now.command);
                match then {
                    None => !now.passed(),
                    Some(then) => (then.passed() && !now.passed()) || now.failing > then.failing,
                }
            })
    }

    /// One line for the task's result: `checks: 1 failing → 0 failing (python3 -m unittest)`.
    pub fn line(&self) -> String {
        let names = match &self.after.names {
            None => String::new(),
            Some(names) if names.passed() => format!("; {}: passed", names.command),
            Some(names) => format!(
                "; {}: {} new problem{}",
                names.command,
                names.failing,
                if names.failing == 1 { "" } else { "s" }
            ),
        };
        format!("{}{names}", self.commands_line())
    }

    /// The commands' side of [`CheckReport::line`].
    fn commands_line(&self) -> String {
        match &self.after.none {
            Some(NoChecks::NoneFound) => return "checks: none found".to_owned(),
            Some(NoChecks::NotRun(why)) => return format!("checks: not run ({why})"),
            None => {}
        }
        let before_failing = self.before.as_ref().map_or(0, CheckRun::failing);
        let before = match &self.before {
            Some(before) => before.side(),
            None => "not run".to_owned(),
        };
        // `3 failing → 0 failing`, but `passed → passed`.
        let after = if before_failing > 0 && self.after.failing() == 0 {
            "0 failing".to_owned()
        } else {
            self.after.side()
        };
        let sides = format!("{before} → {after}");
        let commands: Vec<&str> = self
            .after
            .results
            .iter()
            .map(|r| r.command.as_str())
            .collect();
        let rounds = match self.rounds {
            0 => String::new(),
            1 => "; after 1 round of fixes".to_owned(),
            n => format!("; after {n} rounds of fixes"),
        };
        format!("checks: {sides} ({}{rounds})", commands.join(", "))
    }

    /// The end of each failing check's output, at most `max` characters each.
    pub fn failures_tail(&self, max: usize) -> String {
        self.after
            .every()
            .filter(|r| !r.passed())
            .map(|r| tail(&r.output, max))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// How each failing check ended: `` `cargo test` failed (exit status 101) ``.
    pub fn failures(&self) -> String {
        let each: Vec<String> = self
            .after
            .every()
            .filter(|r| !r.passed())
            .map(CheckResult::how)
            .collect();
        each.join(", ")
    }
}

/// What the step does after the checks.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Nothing to check (no checks, or nothing changed since they last ran), they passed, or
    /// what still fails is no reason to hold the answer.
    Pass,
    /// They failed: send the model `feedback` and go on. `holds`: the failures hold the answer
    /// (the change made them, or they must pass); else they were there before the change, and
    /// the model is only told.
    Retry { feedback: String, holds: bool },
    /// They failed again with no round left.
    GiveUp(CheckReport),
}

/// Whether the agent may run `program`, as `run_command` would: commands enabled
/// (`agent.commands.enabled`, `auto` resolved), `run_command` not disabled, and `program` on
/// `agent.commands.allow` when that narrows them. `Err` says why not. The workspace's own test
/// command runs only then; the operator's `agent.checks` run always.
pub(crate) fn may_run(settings: &ToolSettings, program: &str) -> Result<(), String> {
    let commands = &settings.commands;
    if !commands.enabled {
        return Err(if commands.landlock.is_some() {
            "commands are off: agent.commands.enabled is false".into()
        } else {
            "commands are off: agent.commands.enabled is false, or auto on a system without \
             Landlock"
                .into()
        });
    }
    if settings.disabled.iter().any(|d| d == RUN_COMMAND) {
        return Err("commands are off: run_command is in agent.tools.disabled".into());
    }
    if !commands.allow.is_empty() && !commands.allow.iter().any(|a| a == program) {
        return Err(format!("`{program}` is not on agent.commands.allow"));
    }
    Ok(())
}

/// The command `PATH` commands run with.
fn command_path(settings: &ToolSettings) -> String {
    settings
        .commands
        .path
        .clone()
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default()
}

impl Checks {
    pub fn new(commands: Vec<Vec<String>>, rounds: usize) -> Checks {
        Checks {
            configured: commands.into_iter().filter(|c| !c.is_empty()).collect(),
            rounds,
            baseline: tokio::sync::OnceCell::new(),
            names_before: tokio::sync::OnceCell::new(),
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
        !self.configured.is_empty()
    }

    /// Whether this task has checks to run: the operator's, or the workspace's own test
    /// command when the agent may run its program.
    pub async fn available(&self, toolbox: &Toolbox) -> bool {
        self.commands(toolbox).await.is_ok()
    }

    /// Whether a failure left at the end fails the task even when it was there at the
    /// baseline: the task was asked to make these checks pass (the operator's `agent.checks`,
    /// or tests the request is checked by).
    fn must_pass(&self, toolbox: &Toolbox) -> bool {
        self.configured() || !toolbox.workspace().checks().is_empty()
    }

    /// The commands to run now, or why there are none.
    async fn commands(&self, toolbox: &Toolbox) -> Result<Vec<Vec<String>>, NoChecks> {
        if self.configured() {
            return Ok(self.configured.clone());
        }
        let root = toolbox.workspace().root().to_path_buf();
        let path_var = command_path(toolbox.settings());
        let found =
            tokio::task::spawn_blocking(move || project_checks::test_commands(&root, &path_var))
                .await
                .unwrap_or_default();
        let mut refused = None;
        for argv in found {
            let Some(program) = argv.first() else {
                continue;
            };
            match may_run(toolbox.settings(), program) {
                Ok(()) => return Ok(vec![argv]),
                Err(why) => {
                    refused.get_or_insert(why);
                }
            }
        }
        Err(refused.map_or(NoChecks::NoneFound, NoChecks::NotRun))
    }

    /// Runs the checks as they are now.
    async fn run(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<CheckRun, CallError> {
        let names = match self.names_before.get() {
            Some(Some(before)) => names::after(toolbox, before, cancel).await?.map(Box::new),
            _ => None,
        };
        let commands = match self.commands(toolbox).await {
            Ok(commands) => commands,
            Err(none) => {
                return Ok(CheckRun {
                    names,
                    ..CheckRun::none(none)
                });
            }
        };
        let mut results = run_all(&commands, toolbox, cancel).await?;
        // A test file the task wrote that runs no test checks nothing (a run that finds no
        // test in a project's own files is no failure of the task's).
        let wrote_tests = toolbox
            .ledger()
            .changes(toolbox.workspace().root())
            .iter()
            .any(|c| {
                !matches!(c.how, ChangeKind::Deleted { .. })
                    && project_checks::is_python_test(&c.path)
            });
        if !self.configured() && wrote_tests {
            for result in &mut results {
                no_test_ran_is_a_failure(result);
            }
        }
        Ok(CheckRun {
            results,
            none: None,
            names,
        })
    }

    /// Runs the checks once, before the task's first change: call it before any call that
    /// may change the workspace. Later calls return the same run.
    pub async fn baseline(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<&CheckRun, CallError> {
        self.names_before
            .get_or_try_init(|| names::before(toolbox, cancel))
            .await?;
        self.baseline
            .get_or_try_init(|| self.run(toolbox, cancel))
            .await
    }

    /// The baseline, shown to the model before any change (the `small` policy's first step of
    /// a change): the failing checks' output, or `None` when they pass.
    pub async fn before_work(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<Option<String>, CallError> {
        let baseline = self.baseline(toolbox, cancel).await?;
        let mut text = String::new();
        for result in baseline.results.iter().filter(|r| !r.passed()) {
            text.push_str(&tail(&result.output, FEEDBACK_CHARS));
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        Ok((!text.is_empty()).then_some(text))
    }
}

/// Runs `commands` in turn, each as a check, each in its own `execute_tool run_command`
/// span: the engine's runs are tool runs in the trace like the model's.
async fn run_all(
    commands: &[Vec<String>],
    toolbox: &Toolbox,
    cancel: &CancellationToken,
) -> Result<Vec<CheckResult>, CallError> {
    let mut results = Vec::new();
    for argv in commands {
        let command = argv.join(" ");
        let run = toolbox.run_engine_command(argv, None, cancel).await;
        let (end, output) = match run {
            Ok(run) => (run.end.into(), run.text),
            Err(CallError::Cancelled) => return Err(CallError::Cancelled),
            Err(CallError::RespondToModel(e)) => (
                CheckEnd::NotRun,
                format!("$ {command}\ncould not run: {e}\n"),
            ),
        };
        results.push(CheckResult::new(command, end, output));
    }
    Ok(results)
}

/// A unittest run that runs no test checks nothing: `unittest` says `Ran 0 tests` and, before
/// Python 3.12, exits 0 (3.12 exits 5, "no tests ran"). The 1.5B model asked for a unit test
/// wrote a file holding only the function it was to test, and the check passed. Such a run
/// counts as failed, with exit status 5, saying why.
fn no_test_ran_is_a_failure(result: &mut CheckResult) {
    if result.end == CheckEnd::Passed && result.output.contains("\nRan 0 tests") {
        result.end = CheckEnd::Failed(Some(5));
        result.failing = 1;
        result.output.push_str(
            "\nno test ran: a unittest test file needs a unittest.TestCase class whose methods \
             are named test_…, each asserting what the code does\n",
        );
    }
}

impl Checks {
    /// Runs the checks if the task's tools changed something since they last ran, and judges
    /// them against the baseline.
    pub async fn after_answer(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<Verdict, CallError> {
        let generation = toolbox.ledger().generation();
        if generation == 0 {
            return Ok(Verdict::Pass);
        }
        let must_pass = self.must_pass(toolbox);
        {
            // Nothing changed since they last ran: their outcome stands. Answering again
            // after a failure is another round, not a pass.
            let mut state = self.state();
            if state.ran_at == Some(generation)
                && let Some(last) = state.last.clone()
            {
                return Ok(self.judge(last, must_pass, &mut state));
            }
        }
        let report = self.run_report(toolbox, cancel).await?;
        let mut state = self.state();
        state.ran_at = Some(generation);
        state.last = Some(report.clone());
        Ok(self.judge(report, must_pass, &mut state))
    }

    /// The checks after the task's last change, for its result: the last report if nothing
    /// changed since it, else a run now. `Err(report)` when the task may not end `completed`
    /// for them: worse than at the baseline, or failing checks it was asked to make pass.
    pub async fn conclude(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<Result<CheckReport, CheckReport>, CallError> {
        let generation = toolbox.ledger().generation();
        let last = {
            let state = self.state();
            state
                .last
                .clone()
                .filter(|_| state.ran_at == Some(generation))
        };
        let report = match last {
            Some(last) => last,
            None => {
                let report = self.run_report(toolbox, cancel).await?;
                let mut state = self.state();
                state.ran_at = Some(generation);
                state.last = Some(report.clone());
                report
            }
        };
        let report = CheckReport {
            rounds: self.state().rounds_used,
            ..report
        };
        let fails = !report.passed() && (self.must_pass(toolbox) || report.worse());
        Ok(if fails { Err(report) } else { Ok(report) })
    }

    /// Runs the checks now, against the baseline.
    async fn run_report(
        &self,
        toolbox: &Toolbox,
        cancel: &CancellationToken,
    ) -> Result<CheckReport, CallError> {
        let after = self.run(toolbox, cancel).await?;
        Ok(CheckReport {
            before: self.baseline.get().cloned(),
            after,
            rounds: self.state().rounds_used,
        })
    }

    /// What the step does with `report`. Failures the task made (or must fix) go back to the
    /// model for up to `agent.check_rounds` rounds, then fail the step; failures that were
    /// there before go back once, then the answer stands.
    fn judge(&self, report: CheckReport, must_pass: bool, state: &mut State) -> Verdict {
        if report.passed() {
            return Verdict::Pass;
        }
        let holds_the_answer = must_pass || report.worse();
        let rounds = if holds_the_answer {
            self.rounds
        } else {
            self.rounds.min(1)
        };
        if state.rounds_used >= rounds {
            return if holds_the_answer {
                Verdict::GiveUp(CheckReport {
                    rounds: state.rounds_used,
                    ..report
                })
            } else {
                Verdict::Pass
            };
        }
        state.rounds_used += 1;
        Verdict::Retry {
            feedback: feedback(&report, holds_the_answer),
            holds: holds_the_answer,
        }
    }
}

/// The message after failed checks: their output (its end) and what to do. `holds`: the
/// failures hold the answer (the change made them, or they must pass); else they were there
/// before the change.
fn feedback(report: &CheckReport, holds: bool) -> String {
    let mut text = String::from(if holds {
        "The checks this workspace is judged by failed after your change, so the request is \
         not done yet:\n"
    } else {
        "The checks this workspace is judged by fail, as they did before your change:\n"
    });
    for result in report.after.every().filter(|r| !r.passed()) {
        text.push_str(&tail(&result.output, FEEDBACK_CHARS));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(if holds {
        "Read what failed, fix the code (not the tests, unless the request asks for that), \
         then answer."
    } else {
        "If the request is about what fails, fix the code (not the tests, unless the request \
         asks for that); otherwise leave it, and answer."
    });
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

    fn result(command: &str, end: CheckEnd, failing: u64) -> CheckResult {
        CheckResult {
            command: command.into(),
            end,
            failing,
            output: format!("$ {command}\nFAILED (failures={failing})\n"),
        }
    }

    fn run(results: Vec<CheckResult>) -> CheckRun {
        CheckRun {
            results,
            none: None,
            names: None,
        }
    }

    const UNITTEST: &str = "python3 -m unittest";

    #[test]
    fn the_line_says_how_the_checks_began_and_ended() {
        let failing = |n| result(UNITTEST, CheckEnd::Failed(Some(1)), n);
        let passed = || result(UNITTEST, CheckEnd::Passed, 0);
        let cases = [
            (
                Some(run(vec![failing(3)])),
                run(vec![passed()]),
                0,
                "checks: 3 failing → 0 failing (python3 -m unittest)",
            ),
            (
                Some(run(vec![passed()])),
                run(vec![passed()]),
                0,
                "checks: passed → passed (python3 -m unittest)",
            ),
            (
                Some(run(vec![passed()])),
                run(vec![failing(1)]),
                2,
                "checks: passed → 1 failing (python3 -m unittest; after 2 rounds of fixes)",
            ),
            (
                Some(CheckRun::none(NoChecks::NoneFound)),
                run(vec![passed()]),
                0,
                "checks: none found → passed (python3 -m unittest)",
            ),
            (
                None,
                CheckRun::none(NoChecks::NoneFound),
                0,
                "checks: none found",
            ),
            (
                Some(CheckRun::none(NoChecks::NoneFound)),
                CheckRun::none(NoChecks::NotRun(
                    "commands are off: agent.commands.allow is empty".into(),
                )),
                0,
                "checks: not run (commands are off: agent.commands.allow is empty)",
            ),
        ];
        for (before, after, rounds, line) in cases {
            let report = CheckReport {
                before,
                after,
                rounds,
            };
            assert_eq!(report.line(), line);
        }
    }

    /// Worse: a check that passed fails, or more tests fail, or a new check fails; fewer or
    /// the same failures are not worse.
    #[test]
    fn worse_is_judged_against_the_baseline() {
        let failing = |n| result(UNITTEST, CheckEnd::Failed(Some(1)), n);
        let passed = || result(UNITTEST, CheckEnd::Passed, 0);
        let worse = |before: Option<CheckRun>, after| {
            CheckReport {
                before,
                after,
                rounds: 0,
            }
            .worse()
        };
        assert!(worse(Some(run(vec![passed()])), run(vec![failing(1)])));
        assert!(worse(Some(run(vec![failing(1)])), run(vec![failing(2)])));
        assert!(worse(
            Some(CheckRun::none(NoChecks::NoneFound)),
            run(vec![failing(1)])
        ));
        assert!(!worse(Some(run(vec![failing(2)])), run(vec![failing(2)])));
        assert!(!worse(Some(run(vec![failing(2)])), run(vec![failing(1)])));
        assert!(!worse(Some(run(vec![failing(2)])), run(vec![passed()])));
    }

    #[test]
    fn a_failed_run_counts_its_failures_from_the_summary_or_as_one() {
        let counted = CheckResult::new(
            UNITTEST.into(),
            CheckEnd::Failed(Some(1)),
            "Ran 3 tests\n\nFAILED (failures=2)\n".into(),
        );
        assert_eq!(counted.failing, 2);
        let unsaid = CheckResult::new(
            "make test".into(),
            CheckEnd::Failed(Some(2)),
            "make: *** [test] Error 2\n".into(),
        );
        assert_eq!(unsaid.failing, 1);
        let ok = CheckResult::new("cargo test".into(), CheckEnd::Passed, String::new());
        assert_eq!(ok.failing, 0);
    }

    #[test]
    fn feedback_sends_only_what_failed() {
        let report = CheckReport {
            before: None,
            after: run(vec![
                result(UNITTEST, CheckEnd::Passed, 0),
                result("cargo test", CheckEnd::Failed(Some(101)), 1),
            ]),
            rounds: 0,
        };
        assert_eq!(report.failures(), "`cargo test` failed (exit status 101)");
        let message = feedback(&report, true);
        assert!(message.contains("$ cargo test\nFAILED"), "{message}");
        assert!(
            !message.contains("$ python3"),
            "only what failed: {message}"
        );
        let before = feedback(&report, false);
        assert!(
            before.contains("as they did before your change"),
            "{before}"
        );
    }

    #[test]
    fn whether_the_agent_may_run_a_program() {
        let mut settings = ToolSettings::from_config(&crate::config::AgentConfig::default());
        settings.commands.enabled = false;
        let off = may_run(&settings, "cargo");
        assert!(
            off.as_ref()
                .is_err_and(|e| e.starts_with("commands are off: agent.commands.enabled")),
            "{off:?}"
        );
        settings.commands.enabled = true;
        settings.commands.allow = Vec::new();
        assert_eq!(may_run(&settings, "cargo"), Ok(()), "any program on PATH");
        settings.commands.allow = vec!["python3".into()];
        assert_eq!(may_run(&settings, "python3"), Ok(()));
        assert_eq!(
            may_run(&settings, "cargo"),
            Err("`cargo` is not on agent.commands.allow".into())
        );
        settings.disabled = vec!["run_command".into()];
        assert_eq!(
            may_run(&settings, "python3"),
            Err("commands are off: run_command is in agent.tools.disabled".into())
        );
    }

    #[test]
    fn long_output_keeps_its_end() {
        let text: String = "é".repeat(10) + "END";
        assert_eq!(tail(&text, 3), "[… 10 characters cut …]\nEND");
        assert_eq!(tail("short", 10), "short");
    }
}
