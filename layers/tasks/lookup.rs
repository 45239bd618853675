//! What both eras share: finding the caller's task, creating one through `agent_run`, and
//! waiting for a task to finish without polling the backend in a loop.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use serde_json::{Map, Value};

use super::backend::{TaskBackend, Tracked};
use super::inner::{Inner, Stack};
use super::layer::TasksLayer;
use super::wire::{TaskTiming, parse_task_id, store_fault, task_id_missing, task_not_found};
#[cfg(doc)]
use super::wire::{legacy_task, modern_task};
use crate::plugin::{ErrorObject, McpRequest, McpResponse, McpResult, Payload, Task};

/// A safety net for waits: changes saved without a notification (another instance sharing the
/// store, a runner that does not notify) are still seen this often.
const RECHECK: Duration = Duration::from_secs(1);

/// The task `params.taskId` names, if this caller may see it. Unknown ids, malformed ids and
/// other identities' tasks are all "not found", so ids cannot be probed.
pub async fn caller_task<B: TaskBackend>(
    backend: &B,
    req: &McpRequest,
) -> Result<Tracked, ErrorObject> {
    let Some(text) = req.params.task_id() else {
        return Err(task_id_missing(req.method.as_str()));
    };
    let Some(id) = parse_task_id(text) else {
        return Err(task_not_found(text));
    };
    match backend.lookup(id).await {
        Ok(Some(found)) if found.task.visible_to(req.ctx.identity.as_deref()) => Ok(found),
        Ok(_) => Err(task_not_found(text)),
        Err(e) => Err(store_fault(&e)),
    }
}

/// A task `agent_run` has just created, and the response that answers with it.
pub struct Created {
    pub response: McpResponse,
    pub created: Tracked,
}

/// Runs `agent_run` through the inner layers (validation included) and reads back the task the
/// response names ([`McpResponse::ids`]). Anything that is not a fresh task (a JSON-RPC error, a
/// tool error such as invalid arguments) comes back as `Err` with the inner response unchanged.
/// A fresh task replaces the response's result with `answer` of the task in an era's wire form,
/// `render` ([`modern_task`] or [`legacy_task`]).
pub async fn create<S: Stack, B: TaskBackend>(
    config: &TasksLayer<B>,
    inner: Inner<S>,
    req: McpRequest,
    render: fn(&B, &Task, Option<usize>, TaskTiming) -> Map<String, Value>,
    answer: impl FnOnce(Map<String, Value>) -> McpResult,
) -> Result<Created, McpResponse> {
    let backend = &*config.backend;
    let identity = req.ctx.identity.clone();
    let response = inner.call(req).await;
    let id = match &response.payload {
        Payload::Result(r) if !r.is_tool_error() => response.ids.task_id,
        _ => return Err(response),
    };
    let Some(id) = id else {
        tracing::error!(
            "agent_run succeeded without reporting a task id; answering without a task"
        );
        return Err(response);
    };
    // Stored before the inner service answered, so `tasks/get` resolves from here on.
    match backend.lookup(id).await {
        Ok(Some(created)) if created.task.visible_to(identity.as_deref()) => {
            let mut response = response;
            let body = render(
                backend,
                &created.task,
                created.queue_position,
                config.timing(),
            );
            response.payload = Payload::Result(answer(body));
            Ok(Created { response, created })
        }
        Ok(_) => {
            tracing::error!(task_id = %id, "agent_run's task is not in the store");
            Err(response)
        }
        Err(e) => {
            tracing::error!(task_id = %id, error = %e, "cannot read back agent_run's task");
            Err(response)
        }
    }
}

/// How a wait ended.
pub enum Waited {
    /// The task is terminal.
    Finished(Tracked),
    /// `stop` fired or the time limit passed first; the task as it was last read.
    GaveUp(Tracked),
}

/// Waits until `last` is terminal, `stop` fires, or `limit` passes. Wakes on the backend's
/// change notifications ([`TaskBackend::subscribe`]) and re-reads the task then (and once a
/// second as a safety net), never in a tight loop.
pub async fn until_terminal<B: TaskBackend>(
    backend: &B,
    mut last: Tracked,
    stop: &CancellationToken,
    limit: Option<Duration>,
) -> Result<Waited, B::Error> {
    let deadline = limit.map(|l| tokio::time::Instant::now() + l);
    // Subscribed before the first read, so no change after that read is missed.
    let mut changes = backend.subscribe();
    loop {
        changes.borrow_and_update();
        match backend.lookup(last.task.id).await? {
            Some(now) => last = now,
            None => return Ok(Waited::GaveUp(last)),
        }
        if last.task.state.is_terminal() {
            return Ok(Waited::Finished(last));
        }
        let expired = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return Ok(Waited::GaveUp(last)),
            () = expired => return Ok(Waited::GaveUp(last)),
            changed = changes.changed() => {
                if changed.is_err() {
                    // The backend is going away; fall back to the periodic re-check.
                    tokio::time::sleep(RECHECK).await;
                }
            }
            () = tokio::time::sleep(RECHECK) => {}
        }
    }
}
