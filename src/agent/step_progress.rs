//! The running task's progress, as `agent_status` shows it.
//!
//! The runner is the only writer of its task: steps send [`StepEvent`]s and [`Progress`]
//! folds them into `completed_tasks`, `current_task`, `token_usage` and
//! `critical_path_tokens`, saving the task (and notifying waiters) after each change. Changes
//! come per model call and per tool, never per streamed chunk.

use std::collections::BTreeMap;
use std::time::SystemTime;

use tracing::{error, warn};

use crate::store::StoreError;

use super::AgentCore;
use super::plan::Plan;
use super::step::StepEvent;
use crate::task::{Task, TaskState};

/// How long the outcome of a task is retried while a shared store is unreachable.
const TERMINAL_SAVE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The task and what its steps are doing now.
pub(crate) struct Progress<'a> {
    core: &'a AgentCore,
    pub task: Task,
    plan: Option<Plan>,
    step_tokens: Vec<u64>,
    /// Running steps' labels by step index (a title, with the tool while one runs).
    running: BTreeMap<usize, String>,
    /// Shown when no step runs: `planning`, `final answer`.
    phase: String,
}

impl<'a> Progress<'a> {
    pub fn new(core: &'a AgentCore, task: Task) -> Self {
        Self {
            core,
            task,
            plan: None,
            step_tokens: Vec::new(),
            running: BTreeMap::new(),
            phase: String::new(),
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
        self.task.tokens.add(input, output);
        if let Some(tokens) = step.and_then(|i| self.step_tokens.get_mut(i)) {
            *tokens = tokens.saturating_add(input.saturating_add(output));
        }
    }

    pub async fn step_started(&mut self, step: usize) {
        let title = self.title(step);
        self.running.insert(step, title);
        self.save().await;
    }

    pub async fn step_finished(&mut self, step: usize) {
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
        match event {
            StepEvent::Tokens {
                step,
                input,
                output,
            } => self.add_tokens(Some(step), input, output),
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
        self.fold(event);
        self.save().await;
    }

    /// Writes the task as it is now, and wakes whoever waits on it.
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
        let mut backoff = std::time::Duration::from_millis(250);
        let mut waited = std::time::Duration::ZERO;
        loop {
            match self.core.store.update_task(&self.task).await {
                Ok(()) => break,
                // With a shared store the outcome must not be lost to a database blip (a
                // restart, a failover): the heartbeat keeps the lease meanwhile, and a lost
                // lease answers Fenced, which ends the retries.
                Err(StoreError::Unavailable(e))
                    if self.task.state.is_terminal()
                        && self.core.store.shared().is_some()
                        && waited < TERMINAL_SAVE_PATIENCE =>
                {
                    warn!(task_id = %self.task.id, error = %e, "cannot save the task's outcome; retrying");
                    tokio::time::sleep(backoff).await;
                    waited += backoff;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
                }
                Err(e) => {
                    error!(task_id = %self.task.id, error = %e, "cannot save task progress");
                    break;
                }
            }
        }
        self.core.publish_task(&self.task);
    }

    fn title(&self, step: usize) -> String {
        self.plan
            .as_ref()
            .and_then(|p| p.steps().get(step))
            .map(|s| s.title.clone())
            .unwrap_or_default()
    }
}
