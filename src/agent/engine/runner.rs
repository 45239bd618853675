//! Runs one task: planning, the steps, the final answer, and the outcome into the session.
//!
//! ```text
//! queued ──► planning (agent.planning) ──► running ──► completed | failed | cancelled
//!              one /api/chat with the        steps in dependency order
//!              plan schema as `format`       (step.rs: the tool-calling loop),
//!              (a bad plan → one step        then a short synthesis when the
//!              "ollama chat (plan            plan has several leaves
//!              rejected: …)")
//! ```
//!
//! Before any model call the runner asks `/api/show` for the model's capabilities: images
//! without `vision` fail the task at once, the workspace tools are offered only with `tools`,
//! and the steering policy, `num_ctx` and `think` follow the model ([`ModelProfile`]).
//!
//! Whether a task asks for a change is the model's reading of its request (the `files` and
//! `small` policies ask it in one call with a JSON schema, `reading` and `direct`; under `off`
//! nothing is asked and nothing is read of the request's words).
//!
//! The workspace judges the outcome: a task asked to change it that changed nothing fails; one
//! that changed files has its checks run after its last change, and fails when they end worse
//! than they began (the `checks` module); the result of one that changed files lists them,
//! and how the checks began and ended, after the model's answer (the `summary` module).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, info, warn};
use uuid::Uuid;

use crate::agent::AgentCore;
use crate::agent::engine::model::ModelProfile;
use crate::agent::engine::plan::{Plan, plan_schema};
use crate::agent::engine::step::Engine;
use crate::agent::engine::step_progress::Progress;
use crate::agent::engine::step_schedule::{ScheduleError, run_steps};
use crate::agent::engine::summary::Summary;
use crate::agent::engine::task_changes::ChangeWatch;
use crate::agent::engine::trace;
use crate::agent::judge::checks::{CheckReport, Checks};
use crate::agent::tools::{PathError, Snapshot, Toolbox};
use crate::agent::worker::claim::TaskClaim;
use crate::ollama::{Message, OllamaError};
use crate::task::{Task, TaskState, Turn, TurnRole};
use serde_json::Value;

/// The title of the single step a task runs as when it is not planned.
pub const SINGLE_STEP_TITLE: &str = "ollama chat";
/// `current_task` while the model plans.
pub const PLANNING_LABEL: &str = "planning";
/// `current_task` while the model writes the answer from several steps' results.
pub const FINAL_ANSWER_LABEL: &str = "final answer";

/// Runs the queued task `id` to a terminal state. Never panics; every failure ends the task
/// `failed` with a reason.
///
/// `handed`: the task as this process accepted it (images included), handed over by the queue;
/// `None` after a restart, for a task another instance accepted, or past the queue's handover
/// budget: then the task and its images are read from the store.
pub async fn run_task(
    core: &Arc<AgentCore>,
    id: Uuid,
    handed: Option<Box<Task>>,
    cancel: CancellationToken,
) {
    let (mut task, images) = match handed {
        // A task cancelled while queued left the queue with it (or is marked to be cancelled
        // on arrival, which the token carries): a handed-over task is still queued.
        Some(task) if task.id == id && task.state == TaskState::Queued => {
            let mut task = *task;
            let images = std::mem::take(&mut task.images);
            (task, Ok(images))
        }
        _ => {
            let task = match core.store.task(id).await {
                Ok(Some(task)) if task.state == TaskState::Queued => task,
                // Cancelled while queued, or gone: nothing to run.
                Ok(_) => return,
                Err(e) => {
                    error!(task_id = %id, error = %e, "cannot load queued task");
                    return;
                }
            };
            (task, core.store.task_images(id).await)
        }
    };
    let span = trace::agent_span(&core.settings.ollama.model, &task);
    let mut progress = Progress::new(core, task.clone());
    let outcome = match images {
        Ok(images) => {
            if !images.is_empty() {
                task.images = images;
            }
            progress.task.images = task.images;
            info!(task_id = %id, session_id = %progress.task.session_id, "task started");
            drive(core, &mut progress, &cancel)
                .instrument(span.clone())
                .await
        }
        Err(e) => Err(RunError::Store(format!(
            "cannot load the task's images: {e}"
        ))),
    };
    trace::record_outcome(
        &span,
        &progress.task,
        outcome.as_ref().err().map(RunError::kind),
    );
    finish(core, &mut progress, outcome).await;
    drop(span);
    if progress.task.state.is_terminal() {
        info!(task_id = %id, state = %progress.task.state, "task finished");
    }
}

/// Why a task did not produce an answer.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Ollama(OllamaError),
    #[error("cancelled")]
    Cancelled,
    #[error(
        "model '{model}' cannot see images (its capabilities lack `vision`); \
         send the request without images, or set ollama.model to a vision model"
    )]
    NoVision { model: String },
    #[error("{0}")]
    Store(String),
    #[error("{0}; set agent.workspace to an existing folder")]
    Workspace(PathError),
    #[error(transparent)]
    Steps(ScheduleError),
    #[error(
        "the steps finished, but the model's final answer from their results was empty (or only \
         tool markup); try a larger model (ollama.model) or agent.planning: false"
    )]
    EmptySynthesis,
    #[error(
        "the request asks for a change to the workspace, but no file changed, so it was not \
         done; the model said: {answer}"
    )]
    NothingChanged { answer: String },
    #[error(
        "the checks after the task's last change {} ({}; {}); the files it changed are left \
         as they are",
        if .0.worse() { "are worse than before its first" } else { "still fail" },
        .0.line(),
        .0.failures()
    )]
    Checks(CheckReport),
}

impl RunError {
    /// A short class for the `invoke_agent` span's `error.type`.
    fn kind(&self) -> &'static str {
        match self {
            RunError::Ollama(e) => e.kind(),
            RunError::Cancelled => "cancelled",
            RunError::NoVision { .. } => "no_vision",
            RunError::Store(_) => "store",
            RunError::Workspace(_) => "workspace",
            RunError::Steps(_) => "step_failed",
            RunError::EmptySynthesis => "empty_answer",
            RunError::NothingChanged { .. } => "nothing_changed",
            RunError::Checks(_) => "checks_failed",
        }
    }
}

impl From<OllamaError> for RunError {
    fn from(e: OllamaError) -> Self {
        match e {
            OllamaError::Cancelled => RunError::Cancelled,
            other => RunError::Ollama(other),
        }
    }
}

impl From<ScheduleError> for RunError {
    fn from(e: ScheduleError) -> Self {
        match e {
            ScheduleError::Cancelled => RunError::Cancelled,
            other => RunError::Steps(other),
        }
    }
}

async fn drive(
    core: &AgentCore,
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<String, RunError> {
    let settings = &core.settings;
    if settings.agent.planning {
        progress.enter(TaskState::Planning, PLANNING_LABEL).await;
    } else {
        progress.set_plan(&Plan::single(SINGLE_STEP_TITLE));
        progress.enter(TaskState::Running, SINGLE_STEP_TITLE).await;
    }
    let claim = TaskClaim::of(core, progress.task.id);
    if !claim.may_call(cancel).await {
        return Err(RunError::Cancelled);
    }
    let show = tokio::select! {
        () = cancel.cancelled() => return Err(RunError::Cancelled),
        show = core.ollama.show(&settings.ollama.model) => show?,
    };
    if !progress.task.images.is_empty() && !show.has("vision") {
        return Err(RunError::NoVision {
            model: settings.ollama.model.clone(),
        });
    }
    let toolbox = if show.has("tools") {
        let toolbox = Toolbox::open(&settings.tools).map_err(RunError::Workspace)?;
        Some(Arc::new(toolbox)).filter(|t| !t.enabled().is_empty())
    } else {
        None
    };
    let model = ModelProfile::from_show(settings, &show);
    info!(task_id = %progress.task.id, "{}", model.describe(&settings.ollama.model));
    // What commands change is found by comparing the files with these, at the end.
    let snapshot = match &toolbox {
        Some(toolbox) => {
            let ws = toolbox.workspace().clone();
            tokio::task::spawn_blocking(move || Snapshot::take(&ws))
                .await
                .ok()
                .map(Arc::new)
        }
        None => None,
    };
    let history = core
        .store
        .session_turns(progress.task.session_id)
        .await
        .map_err(|e| RunError::Store(format!("cannot read the session history: {e}")))?;
    let request = Message::user(&progress.task.request).with_images(
        progress
            .task
            .images
            .iter()
            .map(|i| i.data_base64.clone())
            .collect(),
    );
    let mut engine = Engine {
        ollama: core.ollama.clone(),
        settings: settings.clone(),
        model,
        temperature: progress.task.temperature.or(settings.ollama.temperature),
        // The model's reading decides it below; under `off` nothing asks it, and the request's
        // words are not read: a capable model passes through untouched.
        asks_for_change: false,
        fix_failing: None,
        checks: Checks::new(settings.agent.checks.clone(), settings.agent.check_rounds),
        expect_rounds: std::sync::Mutex::new(0),
        toolbox,
        history: history
            .into_iter()
            .map(|turn| match turn.role {
                TurnRole::User => Message::user(turn.content),
                TurnRole::Assistant => Message::assistant(turn.content),
            })
            .collect(),
        request,
        claim,
        gate: crate::agent::engine::approval::ApprovalGate::new(
            settings.agent.approvals.clone(),
            core.store.clone(),
            core.subscribe_task_changes(),
            progress.task.id,
            progress.task.input.answer_path,
        )
        .with_decision_log(core.decisions.clone()),
        direct: None,
    };
    // The `files` policy: what the request asks is the model's reading of it, what shows it
    // done the workspace's files and checks — the request's words are not read here.
    let direct = if crate::agent::engine::direct::applies(&engine, !progress.task.images.is_empty())
    {
        crate::agent::engine::direct::prepare(&engine, progress, cancel)
            .await
            .map_err(step_error)?
    } else {
        None
    };
    if let Some(direct) = direct {
        engine.asks_for_change = direct.intent.change;
        let kept = if direct.intent.fix_failing && !direct.intent.tests {
            crate::agent::engine::reading::test_files(&direct.files)
        } else {
            Vec::new()
        };
        if let Some(toolbox) = engine.toolbox.as_mut().and_then(Arc::get_mut) {
            toolbox.set_kept_checks(kept);
        }
        engine.direct = Some(direct);
    } else if engine.model.policy == crate::agent::steering::Policy::Small
        && engine.toolbox.is_some()
    {
        // The `small` policy (and a small model whose files do not fit, planned, or with
        // images): the same reading, asked once before the work.
        let reading = crate::agent::engine::reading::read_request(&engine, progress, cancel)
            .await
            .map_err(step_error)?;
        engine.asks_for_change = reading.change;
        engine.fix_failing = reading.fix_failing;
        if let Some(toolbox) = engine.toolbox.as_mut().and_then(Arc::get_mut) {
            toolbox.set_kept_checks(reading.kept);
        }
    }
    let engine = Arc::new(engine);
    // Only now: the files policy above changes the toolbox in place, which a clone held here
    // would prevent.
    if let Some(toolbox) = &engine.toolbox {
        progress.changes = Some(ChangeWatch::new(toolbox.clone(), snapshot.clone()));
    }

    let plan = if settings.agent.planning {
        let plan = plan(&engine, progress, cancel).await?;
        progress.set_plan(&plan);
        progress.enter(TaskState::Running, "").await;
        plan
    } else {
        Plan::single(SINGLE_STEP_TITLE)
    };
    let mut results = run_steps(&engine, &plan, progress, cancel).await?;
    let answer = match plan.leaves().as_slice() {
        [leaf] => std::mem::take(&mut results[*leaf]),
        leaves => synthesize(&engine, &plan, leaves, &results, progress, cancel).await?,
    };
    let Some(toolbox) = &engine.toolbox else {
        return Ok(answer);
    };
    let root = toolbox.workspace().root();
    let mut changes = toolbox.ledger().changes(root);
    if let Some(snapshot) = &snapshot {
        changes.extend(snapshot.changed_by_others(toolbox.workspace(), toolbox.ledger()));
    }
    if engine.asks_for_change && changes.is_empty() {
        return Err(RunError::NothingChanged {
            answer: one_line(&answer, 500),
        });
    }
    // After the last change, the checks say whether the task may end `completed`.
    let checks = if changes.is_empty() {
        engine.checks.last()
    } else {
        match engine.checks.conclude(toolbox, cancel).await {
            // Checks that failed before the change and still fail: whether that leaves the
            // task undone depends on what it was asked, which the model reads, not a word list.
            Ok(Ok(report)) if !report.passed() => {
                let asked = match &engine.direct {
                    // Asked of the model before the work, with the failures before it.
                    Some(direct) => direct.intent.fix_failing,
                    None => match engine.fix_failing {
                        // Asked before the work under the `small` policy.
                        Some(asked) => asked,
                        None => asked_to_fix(&engine, &report, progress, cancel).await?,
                    },
                };
                if asked {
                    return Err(RunError::Checks(report));
                }
                Some(report)
            }
            Ok(Ok(report)) => Some(report),
            Ok(Err(report)) => return Err(RunError::Checks(report)),
            Err(_) => return Err(RunError::Cancelled),
        }
    };
    let summary = Summary {
        changes,
        checks,
        compacted: progress.compacted,
        num_ctx: engine.model.num_ctx,
    };
    Ok(summary.after(answer))
}

pub use crate::agent::engine::step::one_line;
use crate::agent::tools::names::RUN_COMMAND;

/// A failure of the `files` policy's preparation, as the task's.
fn step_error(e: crate::agent::engine::step::StepError) -> RunError {
    match e {
        crate::agent::engine::step::StepError::Cancelled => RunError::Cancelled,
        crate::agent::engine::step::StepError::Ollama(e) => RunError::from(e),
        other => RunError::Steps(ScheduleError::Step {
            title: SINGLE_STEP_TITLE.to_owned(),
            reason: other.to_string(),
        }),
    }
}

/// The question of [`asked_to_fix`], answered as JSON by the model.
fn asked_to_fix_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {"asked_to_fix": {"type": "boolean"}},
        "required": ["asked_to_fix"]
    })
}

/// Whether the request asked for the checks that still fail to pass: one short call with a
/// JSON-schema `format`, asked only when the project's tests failed before the change and still
/// fail after it. The model reads the request in whatever language it came; an answer that is
/// not the JSON asked for counts as "asked", so unclear cases end `failed` with the checks'
/// output rather than `completed` over failing tests.
async fn asked_to_fix(
    engine: &Engine,
    report: &CheckReport,
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<bool, RunError> {
    let question = format!(
        "The request was:\n{}\n\nBefore the work on it began, the project's own tests \
         failed, and after it they still fail ({}):\n{}\n\nDid the request ask for these \
         failures to be fixed, or for the tests to pass? Answer only with JSON: \
         {{\"asked_to_fix\": true}} or {{\"asked_to_fix\": false}}.",
        engine.request.content,
        report.line(),
        report.failures_tail(1500),
    );
    let messages = vec![
        Message::system(
            "You judge whether a finished coding task was asked to fix failing tests. Answer \
             only with the JSON asked for.",
        ),
        Message::user(question),
    ];
    let request = engine.chat_request(messages, false, Some(asked_to_fix_schema()));
    let reply = engine.chat(&request, cancel).await?;
    progress.add_tokens(None, reply.prompt_eval_count, reply.eval_count);
    let answer = serde_json::from_str::<Value>(reply.message.content.trim())
        .ok()
        .and_then(|v| v.get("asked_to_fix").and_then(Value::as_bool));
    info!(task_id = %progress.task.id, ?answer, "asked whether the failing checks were the request's");
    Ok(answer.unwrap_or(true))
}

/// The planning call. A plan that fails the checks becomes one unplanned step whose title says
/// why.
async fn plan(
    engine: &Engine,
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<Plan, RunError> {
    let max_steps = engine.settings.agent.max_steps;
    let system = format!(
        "{}\n\nBefore any work is done, plan it. Answer only with JSON: \
         {{\"steps\": [{{\"id\", \"title\", \"instructions\", \"dependencies\"}}]}}. Use at most \
         {max_steps} steps, as few as the request needs (a simple request is one step). Give each \
         step a short unique id, a short title, and self-contained instructions; \
         `dependencies` lists the ids of the steps whose results it needs. You will have tools \
         to read, search and edit the workspace's files{} during the steps, not now.",
        engine.settings.agent.system_prompt,
        if engine
            .toolbox
            .as_ref()
            .is_some_and(|t| t.enabled().contains(&RUN_COMMAND))
        {
            " and to run commands"
        } else {
            ""
        }
    );
    let request = engine.chat_request(
        engine.conversation(&system),
        false,
        Some(plan_schema(max_steps)),
    );
    let reply = engine.chat(&request, cancel).await?;
    progress.add_tokens(None, reply.prompt_eval_count, reply.eval_count);
    match Plan::parse(&reply.message.content, max_steps) {
        Ok(plan) => {
            info!(task_id = %progress.task.id, steps = plan.steps().len(), "plan accepted");
            Ok(plan)
        }
        Err(reason) => {
            warn!(task_id = %progress.task.id, %reason, "plan rejected; running as one step");
            Ok(Plan::single(format!(
                "{SINGLE_STEP_TITLE} (plan rejected: {reason})"
            )))
        }
    }
}

/// One call writing the final answer from the results of a plan's leaves.
async fn synthesize(
    engine: &Engine,
    plan: &Plan,
    leaves: &[usize],
    results: &[String],
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<String, RunError> {
    progress.set_phase(FINAL_ANSWER_LABEL).await;
    let mut summary =
        String::from("The plan's steps for the request above are done. Their results:");
    for &leaf in leaves {
        let title = plan
            .steps()
            .get(leaf)
            .map(|s| s.title.as_str())
            .unwrap_or("");
        let result = results.get(leaf).map(String::as_str).unwrap_or("");
        summary.push_str(&format!("\n\n### {title}\n{result}"));
    }
    summary.push_str(
        "\n\nWrite the final answer to the request from these results: a short, factual report.",
    );
    let mut messages = engine.conversation(&engine.settings.agent.system_prompt);
    messages.push(Message::user(summary));
    let request = engine.chat_request(messages, false, None);
    let reply = engine.chat(&request, cancel).await?;
    progress.add_tokens(None, reply.prompt_eval_count, reply.eval_count);
    let answer = match engine.model.policy {
        crate::agent::steering::Policy::Small => {
            crate::agent::steering::clean_answer(&reply.message.content)
        }
        crate::agent::steering::Policy::Off => reply.message.content,
    };
    if answer.trim().is_empty() {
        return Err(RunError::EmptySynthesis);
    }
    Ok(answer)
}

/// The terminal state: the answer (saved with the turns it adds to the session), or why there
/// is none. A task whose claim was lost is not written: it is no longer this instance's.
async fn finish(core: &AgentCore, progress: &mut Progress<'_>, outcome: Result<String, RunError>) {
    if let Some(loss) = TaskClaim::of(core, progress.task.id).loss() {
        warn!(
            task_id = %progress.task.id,
            reason = %loss,
            "the task's claim is lost; its work stopped, and the instance that ends it writes its \
             outcome"
        );
        progress.abandon().await;
        return;
    }
    // Kept before the outcome is published: a finished task's diff is there to read.
    if let Some(changes) = progress.changes.take() {
        changes.record(&core.store, progress.task.id).await;
    }
    let task = &mut progress.task;
    match outcome {
        Ok(answer) => {
            progress.outcome_turns = vec![
                Turn {
                    role: TurnRole::User,
                    content: task.request.clone(),
                },
                Turn {
                    role: TurnRole::Assistant,
                    content: answer.clone(),
                },
            ];
            task.result = answer;
            task.transition(TaskState::Completed);
        }
        Err(RunError::Cancelled) if core.is_shutting_down() => {
            let result = crate::store::interrupted_result(task);
            task.fail(result);
        }
        Err(RunError::Cancelled) => {
            task.transition(TaskState::Cancelled);
            task.result = "キャンセルされました。".to_owned();
        }
        Err(e) => {
            warn!(task_id = %task.id, error = %e, "task failed");
            task.fail(e.to_string());
        }
    }
    // Who decided what, in the task's record.
    if !task.input.decisions.is_empty() {
        task.result.push_str("\n\napprovals:");
        for decision in &task.input.decisions {
            task.result.push_str("\n- ");
            task.result.push_str(&decision.line());
        }
    }
    progress.save().await;
}
