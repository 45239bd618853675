//! 2026-07-28: the `io.modelcontextprotocol/tasks` extension.
//!
//! Only a `tools/call` of `agent_run` whose own `_meta` client capabilities declare the extension
//! becomes a task. `tasks/get`, `tasks/update` and `tasks/cancel` need that declaration too
//! (-32021 before anything else, unknown ids included).

use std::convert::Infallible;

use serde_json::{Map, Value};
use tower_service::Service;

use super::layer::TasksLayer;
use super::lookup::{caller_task, create};
use super::service::Inner;
use super::wire::{
    TASKS_EXTENSION, detailed_task, extension_not_declared, modern_task, store_fault,
};
use crate::protocol::{McpRequest, McpResponse, McpResult, Payload, ResultKind};
use crate::tools::AGENT_RUN;

/// `server/discover` gains `capabilities.extensions["io.modelcontextprotocol/tasks"] = {}`.
pub fn advertise(mut response: McpResponse) -> McpResponse {
    if let Payload::Result(result) = &mut response.payload
        && let Some(extensions) =
            object_at(&mut result.body, "capabilities").and_then(|c| object_at(c, "extensions"))
    {
        extensions.insert(TASKS_EXTENSION.into(), Value::Object(Map::new()));
    }
    response
}

/// The object under `key`, made an object if it is missing or something else.
pub(super) fn object_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let slot = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// A `tools/call` the inner stack answers alone: any tool but `agent_run`, or a request that
/// did not declare the extension.
pub(super) fn passes_through(req: &McpRequest) -> bool {
    req.tool_name() != Some(AGENT_RUN) || !req.ctx.declares_extension(TASKS_EXTENSION)
}

/// `agent_run` from a declaring request answers with a flat `CreateTaskResult`; everything
/// else (other tools, undeclared requests, invalid arguments) is answered by the inner stack.
pub async fn tools_call<S>(config: &TasksLayer, inner: Inner<S>, req: McpRequest) -> McpResponse
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible> + Send,
    S::Future: Send,
{
    if passes_through(&req) {
        return inner.call(req).await;
    }
    match create(&config.core, inner, req).await {
        Ok(created) => {
            let mut response = created.response;
            response.payload = Payload::Result(McpResult {
                kind: ResultKind::Task,
                body: modern_task(&created.task, created.queue_position, config.timing()),
                cache: None,
            });
            response
        }
        Err(response) => response,
    }
}

/// `tasks/get`, `tasks/update`, `tasks/cancel`.
pub async fn task_method(config: &TasksLayer, req: McpRequest) -> McpResponse {
    if !req.ctx.declares_extension(TASKS_EXTENSION) {
        return req.error(extension_not_declared(&req.method));
    }
    let core = &config.core;
    let task = match caller_task(core, &req).await {
        Ok(task) => task,
        Err(e) => return req.error(e),
    };
    match req.method.as_str() {
        "tasks/get" => {
            let position = core.queue_position(task.id);
            req.result(McpResult::complete(detailed_task(
                &task,
                position,
                config.timing(),
            )))
        }
        "tasks/cancel" => {
            // Cancelling a finished task is acknowledged the same way (idempotent).
            if !task.state.is_terminal()
                && let Err(e) = core.cancel(task.id).await
            {
                return req.error(store_fault(&e));
            }
            req.result(McpResult::empty())
        }
        // `tasks/update`: agent tasks never ask for input, so no key is ever outstanding and
        // every response is ignored, as the extension says.
        _ => req.result(McpResult::empty()),
    }
}
