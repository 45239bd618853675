//! Runs a plan's steps in dependency order, up to `agent.step_concurrency` at once.
//!
//! Steps are spawned Tokio tasks (a panic in one becomes a failed step, not a crashed worker)
//! sharing a child of the task's cancellation token: the first failed step cancels the others,
//! which stops their Ollama streams and kills their commands.

use std::fmt::Write as _;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::agent::engine::plan::Plan;
use crate::agent::engine::step::{Engine, StepError, run_step};
use crate::agent::engine::step_progress::Progress;
use tracing::Instrument as _;

/// Why the steps did not all finish.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScheduleError {
    #[error("cancelled")]
    Cancelled,
    #[error("step '{title}' failed: {reason}")]
    Step { title: String, reason: String },
}

/// Runs every step; returns their answers by step index.
pub(crate) async fn run_steps(
    engine: &Arc<Engine>,
    plan: &Plan,
    progress: &mut Progress<'_>,
    cancel: &CancellationToken,
) -> Result<Vec<String>, ScheduleError> {
    let steps = plan.steps();
    let steps_cancel = cancel.child_token();
    // Cancels the remaining steps however this function is left.
    let _stop_steps = steps_cancel.clone().drop_guard();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut results: Vec<Option<String>> = vec![None; steps.len()];
    let mut started = vec![false; steps.len()];
    let mut running: JoinSet<(usize, Result<String, StepError>)> = JoinSet::new();
    // Under the `files` policy a step writes files whole from what it was shown: two at once
    // would write over each other's changes, so its steps run one after the other.
    let concurrency = if engine.direct.is_some() {
        1
    } else {
        engine.settings.agent.step_concurrency.max(1)
    };
    let leaves = plan.leaves();
    loop {
        for &i in plan.order() {
            if running.len() >= concurrency {
                break;
            }
            let ready = steps[i].dependencies.iter().all(|&d| results[d].is_some());
            if started[i] || !ready {
                continue;
            }
            started[i] = true;
            progress.step_started(i).await;
            let prompt = plan.is_planned().then(|| step_prompt(plan, i, &results));
            let final_step = leaves.contains(&i);
            let (engine, tx, token) = (engine.clone(), events_tx.clone(), steps_cancel.clone());
            // In the task's span, so the step's model and tool calls are its children.
            running.spawn(
                async move {
                    // The `files` policy runs each step its own way.
                    let answer = match &engine.direct {
                        Some(direct) => {
                            crate::agent::engine::direct::run(
                                &engine,
                                direct,
                                i,
                                prompt.as_deref(),
                                &tx,
                                &token,
                            )
                            .await
                        }
                        None => run_step(engine, i, prompt, final_step, tx, token).await,
                    };
                    (i, answer)
                }
                .in_current_span(),
            );
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some(event) = events.recv() => progress.apply(event).await,
            joined = running.join_next() => {
                // Events a step sent before it ended come first.
                while let Ok(event) = events.try_recv() {
                    progress.fold(event);
                }
                let failure = match joined {
                    None => break,
                    Some(Ok((i, Ok(answer)))) => {
                        results[i] = Some(answer);
                        progress.step_finished(i).await;
                        continue;
                    }
                    Some(Ok((i, Err(StepError::Cancelled)))) => {
                        progress.step_stopped(i);
                        ScheduleError::Cancelled
                    }
                    Some(Ok((i, Err(e)))) => {
                        progress.step_stopped(i);
                        ScheduleError::Step { title: steps[i].title.clone(), reason: e.to_string() }
                    }
                    Some(Err(e)) => ScheduleError::Step {
                        title: "?".to_owned(),
                        reason: format!("the step stopped unexpectedly: {e}"),
                    },
                };
                steps_cancel.cancel();
                while running.join_next().await.is_some() {}
                // A step cancelled by the task's own token reports the cancellation.
                return Err(if cancel.is_cancelled() { ScheduleError::Cancelled } else { failure });
            }
        }
    }
    Ok(results.into_iter().map(Option::unwrap_or_default).collect())
}

/// A planned step's instructions and the results of the steps it depends on.
fn step_prompt(plan: &Plan, index: usize, results: &[Option<String>]) -> String {
    let steps = plan.steps();
    let step = &steps[index];
    let position = plan
        .order()
        .iter()
        .position(|&i| i == index)
        .unwrap_or(index)
        + 1;
    let mut prompt = format!(
        "This is step {position} of {} of the plan for the request above: {}\n\n{}\n\n\
         Do only this step, then answer with its result.",
        steps.len(),
        step.title,
        step.instructions
    );
    if !step.dependencies.is_empty() {
        prompt.push_str("\n\nResults of the steps it builds on:");
        for &d in &step.dependencies {
            let result = results
                .get(d)
                .and_then(Option::as_deref)
                .unwrap_or_default();
            let _ = write!(prompt, "\n\n### {}\n{result}", steps[d].title);
        }
    }
    prompt
}
