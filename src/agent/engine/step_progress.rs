//! The running task's progress, as `agent_status` shows it.
//!
//! The runner is the only writer of its task: steps send [`StepEvent`]s and [`Progress`]
//! folds them into `completed_tasks`, `current_task`, `token_usage` and
//! `critical_path_tokens`, saving the task (and notifying waiters) after each change. Changes
//! come per model call and per tool, never per streamed chunk.
//!
//! Progress is saved behind the runner: a save of an unfinished state hands the task to a
//! background writer and returns; while that writer waits for a commit, later saves replace
//! each other and only the newest is written next. Each change is published only once it is
//! committed, in order, so nobody sees progress the store does not hold, nor progress going
//! back. A busy store thus writes fewer progress rows per task instead of slowing the runner
//! (and the accepts it shares the writer with). The terminal state (with the result) is
//! different: it waits for the writes before it, is written, committed and only then
//! published. Progress lost to a crash is not worth waiting for: a task interrupted by a
//! restart ends `failed` anyway.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tracing::{error, warn};

use crate::store::StoreError;

use crate::agent::AgentCore;
use crate::agent::engine::plan::Plan;
use crate::agent::engine::step_event::StepEvent;
use crate::agent::worker::claim::TaskClaim;
use crate::task::{Task, TaskState, Turn};

/// How long the outcome of a task is retried while a shared store is unreachable, at most:
/// it is retried only while the task's claim holds, which the lease bounds first unless the
/// heartbeat can renew it (the database answers it, but not the pool).
const TERMINAL_SAVE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The task and what its steps are doing now.
pub(crate) struct Progress<'a> {
    core: &'a Arc<AgentCore>,
    pub task: Task,
    /// The turns the outcome adds to the task's session (its request and answer), written in
    /// one transaction with the terminal state.
    pub outcome_turns: Vec<Turn>,
    /// The background writer of unfinished states (see the module's documentation).
    behind: Behind,
    plan: Option<Plan>,
    step_tokens: Vec<u64>,
    /// Running steps' labels by step index (a title, with the tool while one runs).
    running: BTreeMap<usize, String>,
    /// Shown when no step runs: `planning`, `final answer`.
    phase: String,
    /// Older tool results compacted to fit the context window, in every step so far.
    pub compacted: usize,
    /// Where the task's changes are read from at its end, once it has a workspace.
    pub changes: Option<super::task_changes::ChangeWatch>,
}

/// The progress saves not yet written, and the writer writing them.
#[derive(Default)]
struct Behind {
    slot: Arc<Mutex<Slot>>,
    writer: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
struct Slot {
    /// The newest unfinished state not yet handed to the store.
    next: Option<Task>,
    /// A writer is running; it takes `next` when its write is committed.
    writing: bool,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    // Each critical section is a take or a replace: a poisoned slot is a consistent one.
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

impl<'a> Progress<'a> {
    pub fn new(core: &'a Arc<AgentCore>, task: Task) -> Self {
        Self {
            core,
            task,
            outcome_turns: Vec::new(),
            behind: Behind::default(),
            plan: None,
            step_tokens: Vec::new(),
            running: BTreeMap::new(),
            phase: String::new(),
            compacted: 0,
            changes: None,
        }
    }

    /// Moves to `state` showing `phase`, and saves.
    pub async fn enter(&mut self, state: TaskState, phase: &str) {
        self.task.transition(state);
        self.phase = phase.to_owned();
        self.save().await;
    }

    /// Shows `phase` while no step runs, and saves.
    pub async fn set_phase(&mut self, phase: &str) {
        self.phase = phase.to_owned();
        self.save().await;
    }

    /// The plan the steps follow: `completed_tasks` becomes `0/<steps>`. Saved with the next
    /// change.
    pub fn set_plan(&mut self, plan: &Plan) {
        self.task.steps_done = 0;
        self.task.steps_total = u32::try_from(plan.steps().len()).unwrap_or(u32::MAX);
        self.step_tokens = vec![0; plan.steps().len()];
        self.plan = Some(plan.clone());
        self.phase.clear();
    }

    /// Counts a model call; `step` is `None` for planning and the final synthesis, which are
    /// in `token_usage` but on no step's chain. Saved with the next change.
    pub fn add_tokens(&mut self, step: Option<usize>, input: u64, output: u64) {
        if step.is_none() {
            // A step's calls are journaled with its events; these are the task's own.
            let what = format!("{input} tokens in, {output} out ({})", self.phase);
            self.core
                .journal
                .note(self.task.id, None, "model call", &what);
        }
        self.task.tokens.add(input, output);
        if let Some(tokens) = step.and_then(|i| self.step_tokens.get_mut(i)) {
            *tokens = tokens.saturating_add(input.saturating_add(output));
        }
    }

    pub async fn step_started(&mut self, step: usize) {
        let title = self.title(step);
        self.core
            .journal
            .note(self.task.id, Some(step), "step", &title);
        self.running.insert(step, title);
        self.save().await;
    }

    pub async fn step_finished(&mut self, step: usize) {
        self.core
            .journal
            .note(self.task.id, Some(step), "step done", "");
        self.running.remove(&step);
        self.task.steps_done = self.task.steps_done.saturating_add(1);
        self.save().await;
    }

    /// A step stopped without finishing (failure or cancellation).
    pub fn step_stopped(&mut self, step: usize) {
        self.running.remove(&step);
    }

    /// Folds one event in without saving (for a batch).
    pub fn fold(&mut self, event: StepEvent) {
        self.core.journal.event(self.task.id, &event);
        match event {
            StepEvent::Tokens {
                step,
                input,
                output,
            } => self.add_tokens(Some(step), input, output),
            StepEvent::Compacted { step, results } => {
                self.compacted += results;
                if self.running.contains_key(&step) {
                    let label = format!(
                        "{} (context compacted: {} older tool results)",
                        self.title(step),
                        self.compacted
                    );
                    self.running.insert(step, label);
                }
            }
            StepEvent::Asking { step, request } => {
                if self.running.contains_key(&step) {
                    let label = format!(
                        "{} (waiting for approval: {}: {})",
                        self.title(step),
                        request.tool,
                        request.summary
                    );
                    self.running.insert(step, label);
                }
                self.task.input.pending.push(request);
            }
            StepEvent::Decided { step, decision } => {
                if self.running.contains_key(&step) {
                    let label = format!(
                        "{} ({}: {})",
                        self.title(step),
                        decision.request.tool,
                        decision.request.summary
                    );
                    self.running.insert(step, label);
                }
                let key = &decision.request.key;
                self.task.input.pending.retain(|r| &r.key != key);
                self.task.input.decisions.push(decision);
            }
            // Journaled above; the task's progress does not change.
            StepEvent::ToolResult { .. } => {}
            StepEvent::Tool { step, description } => {
                if !self.running.contains_key(&step) {
                    return;
                }
                let title = self.title(step);
                let label = match description {
                    Some(tool) => format!("{title} ({tool})"),
                    None => title,
                };
                self.running.insert(step, label);
            }
        }
    }

    /// Folds one event in and saves.
    pub async fn apply(&mut self, event: StepEvent) {
        // A tool's result is journaled only: the task's progress is as it was, so nothing is
        // saved or pushed for it (the next event's save carries it to the page).
        let saves = !matches!(event, StepEvent::ToolResult { .. });
        self.fold(event);
        if saves {
            self.save().await;
        }
    }

    /// Saves the task as it is now, and wakes whoever waits on it once it is committed: an
    /// unfinished state behind the runner (this returns at once), a terminal one before this
    /// returns (see the module's documentation).
    pub async fn save(&mut self) {
        if !self.task.state.is_terminal() {
            self.task.current_task = if self.running.is_empty() {
                self.phase.clone()
            } else {
                self.running
                    .values()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            };
        }
        if let Some(plan) = &self.plan {
            self.task.critical_path_tokens = plan.critical_path(&self.step_tokens);
        }
        self.task.updated_at = SystemTime::now();
        if !self.task.state.is_terminal() {
            self.save_behind();
            return;
        }
        // The outcome: nothing older may land after it, so the pending progress is dropped
        // (this supersedes it) and the write in flight is waited for.
        lock(&self.behind.slot).next = None;
        if let Some(writer) = self.behind.writer.take() {
            let _ = writer.await;
        }
        self.save_outcome().await;
    }

    /// Drops the progress not yet written and waits for the write in flight: for a task that is
    /// no longer this instance's, nothing of it may land later (the store refuses the write
    /// while the lost claim is held, and the claim is released after this).
    pub async fn abandon(&mut self) {
        lock(&self.behind.slot).next = None;
        if let Some(writer) = self.behind.writer.take() {
            let _ = writer.await;
        }
    }

    /// Writes the terminal task with its turns, retrying a shared store's blips, then
    /// publishes it. A task whose claim was lost meanwhile is not published: the instance that
    /// ends it does.
    async fn save_outcome(&mut self) {
        let turns = std::mem::take(&mut self.outcome_turns);
        let saved = match self.write_outcome(&turns).await {
            Err(e) if !turns.is_empty() && !matches!(e, StoreError::Fenced(_)) => {
                // The answer cannot go into the session: the task says so, rather than stand
                // completed with an answer its session lacks.
                self.task.state = TaskState::Failed;
                self.task.result =
                    format!("the model answered, but the session history could not be saved: {e}");
                self.write_outcome(&[]).await
            }
            other => other,
        };
        match saved {
            Ok(()) => {}
            Err(StoreError::Fenced(_)) => {
                warn!(
                    task_id = %self.task.id,
                    "the task's claim was lost before its outcome was saved; the instance that \
                     ends it writes its state"
                );
                return;
            }
            Err(e) => error!(task_id = %self.task.id, error = %e, "cannot save the task's outcome"),
        }
        self.core.publish_task(&self.task);
    }

    /// One outcome write, retried while a shared store is unreachable and the claim holds.
    async fn write_outcome(&self, turns: &[Turn]) -> Result<(), StoreError> {
        let claim = TaskClaim::of(self.core, self.task.id);
        let mut backoff = std::time::Duration::from_millis(250);
        let mut waited = std::time::Duration::ZERO;
        loop {
            match self.core.store.finish_task(&self.task, turns).await {
                // With a shared store the outcome must not be lost to a database blip (a
                // restart, a failover): the heartbeat keeps the lease meanwhile, and once it
                // cannot, the claim is lost and the write is refused (Fenced), which ends this.
                Err(StoreError::Unavailable(e))
                    if self.core.store.shared().is_some()
                        && claim.loss().is_none()
                        && waited < TERMINAL_SAVE_PATIENCE =>
                {
                    warn!(task_id = %self.task.id, error = %e, "cannot save the task's outcome; retrying");
                    tokio::time::sleep(backoff).await;
                    waited += backoff;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    /// Hands the task as it is now to the background writer, starting one if none runs.
    fn save_behind(&mut self) {
        // Without its images (up to 20 MiB, fixed since the accept; the store ignores them).
        let images = std::mem::take(&mut self.task.images);
        let snapshot = self.task.clone();
        self.task.images = images;
        let mut slot = lock(&self.behind.slot);
        slot.next = Some(snapshot);
        if slot.writing {
            return;
        }
        slot.writing = true;
        drop(slot);
        let (core, slot) = (self.core.clone(), self.behind.slot.clone());
        self.behind.writer = Some(tokio::spawn(async move {
            loop {
                let task = {
                    let mut slot = lock(&slot);
                    match slot.next.take() {
                        Some(task) => task,
                        None => {
                            slot.writing = false;
                            return;
                        }
                    }
                };
                match core.store.update_task(&task).await {
                    Ok(()) => core.publish_task(&task),
                    Err(e) => {
                        error!(task_id = %task.id, error = %e, "cannot save task progress");
                    }
                }
            }
        }));
    }

    fn title(&self, step: usize) -> String {
        self.plan
            .as_ref()
            .and_then(|p| p.steps().get(step))
            .map(|s| s.title.clone())
            .unwrap_or_default()
    }
}
