//! 2026-07-28: the `io.modelcontextprotocol/tasks` extension.
//!
//! Only a `tools/call` of `agent_run` whose own `_meta` client capabilities declare the extension
//! becomes a task. `tasks/get`, `tasks/update` and `tasks/cancel` need that declaration too
//! (-32021 before anything else, unknown ids included).

use serde_json::{Map, Value};

use super::backend::{TaskBackend, Tracked};
use super::inner::{Inner, Stack};
use super::layer::TasksLayer;
use super::lookup::{Created, caller_task, create};
use super::wire::{
    InputKinds, TASKS_EXTENSION, detailed_task, extension_not_declared, modern_task, object_at,
    store_fault,
};
use crate::plugin::AGENT_RUN;
use crate::plugin::task::input::Action;
use crate::plugin::{ErrorObject, Task, code};
use crate::plugin::{
    McpRequest, McpResponse, McpResult, Method, Params, Payload, ResultKind, TaskUpdateParams,
};

/// `server/discover` gains `capabilities.extensions["io.modelcontextprotocol/tasks"] = {}`.
pub fn advertise(mut response: McpResponse) -> McpResponse {
    if let Payload::Result(result) = &mut response.payload
        && let Some(extensions) = object_at(result.body.object_mut(), "capabilities")
            .and_then(|c| object_at(c, "extensions"))
    {
        extensions.insert(TASKS_EXTENSION.into(), Value::Object(Map::new()));
    }
    response
}

/// Whether a `tools/call` becomes a task: `agent_run` from a request that declared the
/// extension. Any other is answered by the inner stack alone.
pub(super) fn creates_task(req: &McpRequest) -> bool {
    req.tool_name() == Some(AGENT_RUN) && req.ctx.declares_extension(TASKS_EXTENSION)
}

/// `agent_run` from a declaring request ([`creates_task`]) answers with a flat
/// `CreateTaskResult`; a refusal of the inner stack (invalid arguments, …) is passed back.
pub async fn tools_call<S: Stack, B: TaskBackend>(
    config: &TasksLayer<B>,
    inner: Inner<S>,
    req: McpRequest,
) -> McpResponse {
    let answer = |body: Map<String, Value>| McpResult {
        kind: ResultKind::Task,
        body: body.into(),
        cache: None,
    };
    match create(config, inner, req, modern_task, answer).await {
        Ok(Created { response, .. }) | Err(response) => response,
    }
}

/// `tasks/get`, `tasks/update`, `tasks/cancel`.
pub async fn task_method<B: TaskBackend>(config: &TasksLayer<B>, req: McpRequest) -> McpResponse {
    if !req.ctx.declares_extension(TASKS_EXTENSION) {
        return req.error(extension_not_declared(req.method.as_str()));
    }
    let backend = &*config.backend;
    let Tracked {
        task,
        queue_position,
    } = match caller_task(backend, &req).await {
        Ok(found) => found,
        Err(e) => return req.error(e),
    };
    match req.method {
        Method::TasksGet => req.result(McpResult::complete(detailed_task(
            backend,
            &task,
            queue_position,
            config.timing(),
            InputKinds::declared_by(&req.ctx),
        ))),
        Method::TasksCancel => {
            // Cancelling a finished task is acknowledged the same way (idempotent).
            if !task.state.is_terminal()
                && let Err(e) = backend.cancel(task.id).await
            {
                return req.error(store_fault(&e));
            }
            req.result(McpResult::empty())
        }
        _ => update(backend, &req, &task).await,
    }
}

/// `tasks/update {taskId, inputResponses}` (Tasks extension, `tasks/update`; the shapes of
/// the 2026-07-28 `ElicitResult`): each answer to a key the task has outstanding is recorded
/// for its runner, by the caller's identity (only the task's owner gets this far, see
/// [`caller_task`]); keys that are not outstanding (unknown, or answered already) are
/// ignored, as the extension says. Acknowledged with `{"resultType":"complete"}`; the task
/// goes on eventually.
async fn update<B: TaskBackend>(backend: &B, req: &McpRequest, task: &Task) -> McpResponse {
    let responses = match &req.params {
        Params::TaskUpdate(TaskUpdateParams {
            input_responses: Some(Value::Object(responses)),
            ..
        }) => responses,
        Params::TaskUpdate(TaskUpdateParams {
            input_responses: None,
            ..
        }) => return req.result(McpResult::empty()),
        _ => {
            return req.error(ErrorObject::new(
                code::INVALID_PARAMS,
                "tasks/update: inputResponses must be an object of answers by the keys of the                  task's inputRequests, e.g. {\"approval-1\": {\"action\": \"accept\"}}",
            ));
        }
    };
    for (key, response) in responses {
        if task.state.is_terminal() || task.input.pending(key).is_none() {
            continue;
        }
        let Some(action) = response
            .get("action")
            .and_then(Value::as_str)
            .and_then(Action::from_wire)
        else {
            return req.error(ErrorObject::new(
                code::INVALID_PARAMS,
                format!(
                    "tasks/update: inputResponses.{key} must be an ElicitResult whose action is accept, decline or cancel"
                ),
            ));
        };
        if let Err(e) = backend
            .answer(task.id, key.clone(), action, req.ctx.identity.clone())
            .await
        {
            return req.error(store_fault(&e));
        }
    }
    req.result(McpResult::empty())
}
