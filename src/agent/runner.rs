//! Runs one task: the chat with Ollama, progress into the store, the outcome into the session.

use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};
use uuid::Uuid;

use super::AgentCore;
use super::task::{Task, TaskState, Turn, TurnRole};
use crate::ollama::{ChatOptions, ChatRequest, Message, OllamaError};

/// The title of the single step a task runs as when it is not planned.
pub const SINGLE_STEP_TITLE: &str = "ollama chat";

/// Runs the queued task `id` to a terminal state. Never panics; every failure ends the task
/// `failed` with a reason.
pub async fn run_task(core: &AgentCore, id: Uuid, cancel: CancellationToken) {
    let mut task = match core.store.task(id).await {
        Ok(Some(task)) if task.state == TaskState::Queued => task,
        // Cancelled while queued, or gone: nothing to run.
        Ok(_) => return,
        Err(e) => {
            error!(task_id = %id, error = %e, "cannot load queued task");
            return;
        }
    };
    task.transition(TaskState::Running);
    task.steps_done = 0;
    task.steps_total = 1;
    task.current_task = SINGLE_STEP_TITLE.to_owned();
    save(core, &task).await;
    info!(task_id = %task.id, session_id = %task.session_id, "task running");

    match chat(core, &task, &cancel).await {
        Ok(reply) => {
            task.tokens.add(reply.prompt_eval_count, reply.eval_count);
            task.steps_done = 1;
            task.result = reply.message.content.clone();
            let turns = [
                Turn {
                    role: TurnRole::User,
                    content: task.request.clone(),
                },
                Turn {
                    role: TurnRole::Assistant,
                    content: reply.message.content,
                },
            ];
            match core.store.append_turns(task.session_id, &turns).await {
                Ok(()) => {
                    task.transition(TaskState::Completed);
                }
                Err(e) => {
                    task.fail(format!(
                        "the model answered, but the session history could not be saved: {e}"
                    ));
                }
            }
        }
        Err(RunError::Ollama(OllamaError::Cancelled)) => {
            task.transition(TaskState::Cancelled);
            task.result = "キャンセルされました。".to_owned();
        }
        Err(e) => {
            warn!(task_id = %task.id, error = %e, "task failed");
            task.fail(e.to_string());
        }
    }
    save(core, &task).await;
    info!(task_id = %task.id, state = %task.state, "task finished");
}

/// Why a run did not produce an answer.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Ollama(#[from] OllamaError),
    #[error(
        "model '{model}' cannot see images (its capabilities lack `vision`); \
         send the request without images, or set ollama.model to a vision model"
    )]
    NoVision { model: String },
    #[error("cannot read the session history: {0}")]
    History(String),
}

async fn chat(
    core: &AgentCore,
    task: &Task,
    cancel: &CancellationToken,
) -> Result<crate::ollama::ChatResponse, RunError> {
    let settings = &core.settings;
    if !task.images.is_empty() {
        let show = core.ollama.show(&settings.model).await?;
        if !show.has("vision") {
            return Err(RunError::NoVision {
                model: settings.model.clone(),
            });
        }
    }
    let history = core
        .store
        .session_turns(task.session_id)
        .await
        .map_err(|e| RunError::History(e.to_string()))?;
    let mut messages = Vec::with_capacity(history.len() + 2);
    if !settings.system_prompt.is_empty() {
        messages.push(Message::system(&settings.system_prompt));
    }
    for turn in history {
        messages.push(match turn.role {
            TurnRole::User => Message::user(turn.content),
            TurnRole::Assistant => Message::assistant(turn.content),
        });
    }
    let mut user = Message::user(&task.request);
    user.images = task.images.iter().map(|i| i.data_base64.clone()).collect();
    messages.push(user);
    let request = ChatRequest {
        model: settings.model.clone(),
        messages,
        tools: Vec::new(),
        format: None,
        options: ChatOptions {
            temperature: task.temperature.or(settings.temperature),
            num_ctx: Some(settings.num_ctx),
            ..ChatOptions::default()
        },
        keep_alive: settings.keep_alive.clone(),
        think: None,
    };
    Ok(core.ollama.chat(&request, cancel, &mut |_| {}).await?)
}

async fn save(core: &AgentCore, task: &Task) {
    if let Err(e) = core.store.update_task(task).await {
        error!(task_id = %task.id, error = %e, "cannot save task progress");
    }
}
