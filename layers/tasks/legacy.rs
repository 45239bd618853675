//! 2025-11-25 experimental tasks, served from the same store as the 2026 extension, so a task
//! created in one era can be read and cancelled in the other.
//!
//! A client opts in per call with `params.task`; `tasks/result` blocks until the task is
//! terminal; `tasks/cancel` answers with the cancelled task and refuses a terminal one.
//! `tasks/list` is not offered: a stateless server cannot scope it to one client.

use serde_json::{Value, json};

use super::backend::{TaskBackend, Tracked};
use super::inner::{Inner, Stack};
use super::layer::TasksLayer;
use super::lookup::{Created, Waited, caller_task, create, until_terminal};
use super::wire::{
    RELATED_TASK, final_result, legacy_status, legacy_task, object_at, store_fault, task_not_found,
};
use crate::plugin::{AGENT_RUN, AGENT_STATUS};
use crate::plugin::{
    ErrorObject, McpRequest, McpResponse, McpResult, Method, Payload, ProtocolVersion, Transport,
    code,
};

/// The revision that defined these tasks; capabilities and `execution` are shown to it only.
const TASKS_REVISION: ProtocolVersion = ProtocolVersion::V2025_11_25;

/// `initialize` negotiating 2025-11-25 gains `capabilities.tasks` (cancel and task-augmented
/// `tools/call`; no `list`).
pub fn advertise(mut response: McpResponse) -> McpResponse {
    // The service answers `initialize` in the version it negotiated.
    if response.version == TASKS_REVISION
        && let Payload::Result(result) = &mut response.payload
        && let Some(capabilities) = object_at(result.body.object_mut(), "capabilities")
    {
        capabilities.insert(
            "tasks".into(),
            json!({ "cancel": {}, "requests": { "tools": { "call": {} } } }),
        );
    }
    response
}

/// The 2025-11-25 `tools/list` marks `agent_run` `execution.taskSupport: "optional"`.
pub fn mark_task_support(version: ProtocolVersion, mut response: McpResponse) -> McpResponse {
    if version != TASKS_REVISION {
        return response;
    }
    if let Payload::Result(result) = &mut response.payload
        && let Some(Value::Array(tools)) = result.body.object_mut().get_mut("tools")
    {
        for tool in tools.iter_mut() {
            if tool.get("name").and_then(Value::as_str) == Some(AGENT_RUN)
                && let Value::Object(tool) = tool
            {
                tool.insert("execution".into(), json!({ "taskSupport": "optional" }));
            }
        }
    }
    response
}

/// Whether a `tools/call` asks to run as a task (`params.task`). One without it is answered by
/// the inner stack alone.
pub(super) fn asks_for_task(req: &McpRequest) -> bool {
    req.params
        .tools_call()
        .is_some_and(|call| call.task.is_some())
}

/// `tools/call` with `params.task` ([`asks_for_task`]): `agent_run` answers with `{task: {…}}`.
pub async fn tools_call<S: Stack, B: TaskBackend>(
    config: &TasksLayer<B>,
    inner: Inner<S>,
    req: McpRequest,
) -> McpResponse {
    let Some(task_param) = req.params.tools_call().and_then(|call| call.task.as_ref()) else {
        return inner.call(req).await;
    };
    if !task_param.is_object() {
        return req.error(ErrorObject::invalid_params(
            "params.task must be an object, e.g. {\"ttl\": 60000}, or be left out",
        ));
    }
    match req.tool_name() {
        Some(AGENT_RUN) => {}
        Some(AGENT_STATUS) => {
            return req.error(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                "agent_status cannot run as a task (its execution.taskSupport is forbidden); \
                 call it without params.task",
            ));
        }
        // Unknown tool or no name: the inner service explains.
        _ => return inner.call(req).await,
    }
    let identity = req.ctx.identity.clone();
    let stdio = matches!(req.ctx.transport, Transport::Stdio);
    let answer = |task| {
        let mut body = serde_json::Map::with_capacity(1);
        body.insert("task".into(), Value::Object(task));
        McpResult::complete(body)
    };
    match create(config, inner, req, legacy_task, answer).await {
        Ok(Created { response, created }) => {
            // On stdio the process is the client's own channel: the task's changes follow
            // as notifications/tasks/status.
            if stdio && !created.task.state.is_terminal() {
                return super::listen::follow_legacy(config, identity, created.task.id, response);
            }
            response
        }
        Err(response) => response,
    }
}

/// `tasks/get`, `tasks/result`, `tasks/cancel`.
pub async fn task_method<B: TaskBackend>(config: &TasksLayer<B>, req: McpRequest) -> McpResponse {
    let backend = &*config.backend;
    let found = match caller_task(backend, &req).await {
        Ok(found) => found,
        Err(e) => return req.error(e),
    };
    let task = &found.task;
    let id = task.id;
    match req.method {
        Method::TasksGet => req.result(McpResult::complete(legacy_task(
            backend,
            task,
            found.queue_position,
            config.timing(),
        ))),
        Method::TasksResult => match until_terminal(backend, found, &req.ctx.cancel, None).await {
            Ok(Waited::Finished(done)) => {
                let mut body = final_result(backend, &done.task);
                body.insert(
                    "_meta".into(),
                    json!({ RELATED_TASK: { "taskId": id.to_string() } }),
                );
                req.result(McpResult::complete(body))
            }
            // The client cancelled this request; the transport sends nothing for it.
            Ok(Waited::GaveUp(_)) => req.error(ErrorObject::internal(format!(
                "tasks/result for task {id} was cancelled before the task finished"
            ))),
            Err(e) => req.error(store_fault(&e)),
        },
        _ => {
            if task.state.is_terminal() {
                return req.error(ErrorObject::invalid_params(format!(
                    "Cannot cancel task {id}: it is already {}. Read it with tasks/get or \
                     tasks/result.",
                    legacy_status(task.state)
                )));
            }
            let task = match backend.cancel(id).await {
                Ok(Some(task)) => task,
                Ok(None) => return req.error(task_not_found(&id.to_string())),
                Err(e) => return req.error(store_fault(&e)),
            };
            // A running task stops when its runner notices the token; wait (bounded) so the
            // answer shows `cancelled`, as 2025-11-25 asks.
            let limit = Some(config.config.cancel_wait);
            let asked = Tracked {
                task,
                queue_position: None,
            };
            let now = match until_terminal(backend, asked, &req.ctx.cancel, limit).await {
                Ok(Waited::Finished(now) | Waited::GaveUp(now)) => now,
                Err(e) => return req.error(store_fault(&e)),
            };
            req.result(McpResult::complete(legacy_task(
                backend,
                &now.task,
                now.queue_position,
                config.timing(),
            )))
        }
    }
}
