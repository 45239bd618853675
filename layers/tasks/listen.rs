//! Following tasks by push instead of polling.
//!
//! **2026-07-28 `subscriptions/listen`** with `params.notifications.taskIds` (the Tasks
//! extension must be declared on the request, else -32021). The answer is a stream
//! ([`Payload::Stream`]): first `notifications/subscriptions/acknowledged` echoing the task ids
//! accepted (only the caller's own; another identity's task, an unknown or malformed id is
//! left out, so ids cannot be probed), then one `notifications/tasks` per accepted task with its
//! current `DetailedTask`, then one on every later change (state changes, a step starting or
//! finishing, a model call or tool of a step), each exactly what `tasks/get` would answer
//! then. Every message carries `_meta["io.modelcontextprotocol/subscriptionId"]`, the listen
//! request's id; a task notification's `_meta` also has the `agent_status` text
//! ([`STATUS_META`]). Once every accepted task is terminal (its last notification inlines the
//! result) the stream ends with the listen request's empty result. The client ends it earlier
//! by closing it (HTTP) or with `notifications/cancelled` (stdio): that cancels the listen, not
//! the tasks. When the server shuts down, open listens end the same graceful way (their
//! result) instead of holding the shutdown. A listen that asks for nothing this server sends (no `taskIds`) is -32601, as
//! before: tools and prompts never change and there are no resources.
//!
//! **2025-11-25 `notifications/tasks/status`**, on stdio only: a task-augmented `tools/call`
//! answers with its `CreateTaskResult`, then the same process writes the task (2025 shape) on
//! every change until it is terminal. Over HTTP a stateless server has no stream left after the
//! `CreateTaskResult` (it *is* the response, and there is no GET stream), so there 2025
//! clients poll `tasks/get` or wait in `tasks/result`.
//!
//! **Bounded.** The stream is pulled ([`MessageStream`]): the next notification is rendered
//! only when the transport has written the previous one, from the latest state of the task
//! (the core's [`TaskEvents`](crate::plugin::TaskEvents) coalesce changes), so a client
//! that stops reading costs one small set of "changed" ids, never a queue, and holds up no one.
//! A caller has at most [`TasksConfig::max_streams_per_caller`](super::TasksConfig) streams open
//! at once; past that a listen is refused (-32600) and a 2025 task is created without its
//! notifications.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::backend::{TaskBackend, Tracked};
use super::layer::TasksLayer;
use super::streams::StreamGuard;
use super::wire::{
    InputKinds, TASKS_EXTENSION, TaskTiming, detailed_task, extension_not_declared, legacy_task,
    parse_task_id,
};
use crate::plugin::Follower;
use crate::plugin::TaskState;
use crate::plugin::{
    ErrorObject, McpRequest, McpResponse, MessageStream, Params, Payload, RequestId, StreamSlot,
    code,
};

/// The `_meta` key naming the subscription a message belongs to.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The `_meta` key under which this server's `notifications/tasks` also carry the task as its
/// `agent_status` tool describes it (state, steps, current step, tokens), so a client can show
/// progress without a call. Not part of the `DetailedTask`, which is exactly `tasks/get`'s.
pub const STATUS_META: &str = "agent-mcp/status";

/// The most task ids one `subscriptions/listen` may name.
pub const MAX_TASK_IDS: usize = 100;

/// `subscriptions/listen` (2026-07-28).
pub async fn listen<B: TaskBackend>(config: &TasksLayer<B>, req: McpRequest) -> McpResponse {
    let texts = match requested_task_ids(&req) {
        Ok(texts) => texts,
        Err(e) => return req.error(e),
    };
    let Some(request_id) = req.id.clone() else {
        return req.error(ErrorObject::invalid_request(
            "subscriptions/listen is a request: give it an id",
        ));
    };
    let max = config.config.max_streams_per_caller;
    let Some(guard) = config.streams.open(req.ctx.identity.clone(), max) else {
        return req.error(ErrorObject::invalid_request(format!(
            "Too many open subscriptions: this caller already has {max} streams open (the \
             limit). Close one (close its SSE response, or send notifications/cancelled for its \
             subscriptions/listen on stdio), or name several taskIds in one subscriptions/listen."
        )));
    };
    let backend = config.backend.clone();
    // Unique parseable ids, in the order given.
    let mut ids: Vec<(Uuid, String)> = Vec::with_capacity(texts.len());
    for text in texts {
        if let Some(id) = parse_task_id(&text)
            && !ids.iter().any(|(known, _)| *known == id)
        {
            ids.push((id, text));
        }
    }
    // Followed before the current states are read, so no change after the read is missed.
    let follower = backend.follow(&ids.iter().map(|(id, _)| *id).collect::<Vec<_>>());
    let mut accepted = Vec::with_capacity(ids.len());
    for (id, text) in ids {
        match backend.lookup(id).await {
            Ok(Some(found)) if found.task.visible_to(req.ctx.identity.as_deref()) => {
                accepted.push(Followed::new(id, text));
            }
            Ok(_) => {}
            Err(e) => return req.error(super::wire::store_fault(&e)),
        }
    }
    let subscription = request_id_json(&request_id);
    let shape = Shape::Listen {
        ack: Some(accepted.iter().map(|f| f.text.clone()).collect()),
        subscription,
        kinds: InputKinds::declared_by(&req.ctx),
    };
    stream_response(&req, config, follower, accepted, shape, guard)
}

/// After a 2025-11-25 task-augmented `tools/call` on stdio: the `CreateTaskResult` response,
/// then `notifications/tasks/status` until the task is terminal. `response` is returned as it
/// is when the caller has no stream to spare.
pub fn follow_legacy<B: TaskBackend>(
    config: &TasksLayer<B>,
    identity: Option<String>,
    id: Uuid,
    mut response: McpResponse,
) -> McpResponse {
    let max = config.config.max_streams_per_caller;
    let Some(guard) = config.streams.open(identity, max) else {
        tracing::debug!(task_id = %id, "no stream left for notifications/tasks/status");
        return response;
    };
    let Some(first) = response.to_json() else {
        return response;
    };
    let follower = config.backend.follow(&[id]);
    let shape = Shape::Legacy {
        response: Some(first),
    };
    let stream = follow_stream(
        config,
        follower,
        vec![Followed::new(id, id.to_string())],
        shape,
        guard,
    );
    response.payload = Payload::Stream(StreamSlot::new(stream));
    response
}

fn stream_response<B: TaskBackend>(
    req: &McpRequest,
    config: &TasksLayer<B>,
    follower: Follower,
    tasks: Vec<Followed>,
    shape: Shape,
    guard: StreamGuard,
) -> McpResponse {
    let stream = follow_stream(config, follower, tasks, shape, guard);
    req.respond(Payload::Stream(StreamSlot::new(stream)))
}

fn follow_stream<B: TaskBackend>(
    config: &TasksLayer<B>,
    follower: Follower,
    tasks: Vec<Followed>,
    shape: Shape,
    guard: StreamGuard,
) -> MessageStream {
    let state = Follow {
        backend: config.backend.clone(),
        timing: config.timing(),
        follower,
        pending: (0..tasks.len()).collect(),
        tasks,
        shape,
        opened: false,
        done: false,
        _guard: guard,
    };
    MessageStream::unfold(state, next_message)
}

/// `params.notifications.taskIds`, checked.
fn requested_task_ids(req: &McpRequest) -> Result<Vec<String>, ErrorObject> {
    let notifications = match &req.params {
        Params::Listen(listen) => listen.notifications.as_ref(),
        _ => None,
    };
    let notifications = match notifications {
        Some(Value::Object(n)) => n,
        Some(_) => {
            return Err(ErrorObject::invalid_params(
                "subscriptions/listen params.notifications must be an object, e.g. \
                 {\"taskIds\": [\"<taskId>\"]}",
            ));
        }
        None => {
            return Err(ErrorObject::invalid_params(
                "subscriptions/listen needs params.notifications, the notifications to receive, \
                 e.g. {\"taskIds\": [\"<taskId>\"]}",
            ));
        }
    };
    let Some(task_ids) = notifications.get("taskIds") else {
        return Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            "Method not found: this server's subscriptions/listen delivers only \
             notifications/tasks, asked for with params.notifications.taskIds (its tools never \
             change, and it has no prompts or resources)",
        ));
    };
    if !req.ctx.declares_extension(TASKS_EXTENSION) {
        return Err(extension_not_declared(
            "subscriptions/listen with notifications.taskIds",
        ));
    }
    let Value::Array(list) = task_ids else {
        return Err(ErrorObject::invalid_params(
            "params.notifications.taskIds must be an array of taskId strings returned by \
             tools/call agent_run",
        ));
    };
    if list.len() > MAX_TASK_IDS {
        return Err(ErrorObject::invalid_params(format!(
            "params.notifications.taskIds names {} tasks; at most {MAX_TASK_IDS} per \
             subscriptions/listen. Split them over several.",
            list.len()
        )));
    }
    list.iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(ErrorObject::invalid_params(format!(
                "params.notifications.taskIds[{i}] must be a string, a taskId returned by \
                 tools/call agent_run"
            ))),
        })
        .collect()
}

fn request_id_json(id: &RequestId) -> Value {
    serde_json::to_value(id).unwrap_or(Value::Null)
}

/// One followed task.
struct Followed {
    id: Uuid,
    /// The id as the client wrote it (echoed in the acknowledgement).
    text: String,
    /// The view last sent, to send nothing when nothing a client sees changed.
    last: Option<Map<String, Value>>,
    terminal: bool,
}

impl Followed {
    fn new(id: Uuid, text: String) -> Self {
        Self {
            id,
            text,
            last: None,
            terminal: false,
        }
    }
}

/// What the stream is for.
enum Shape {
    /// A 2026-07-28 listen: `ack` is sent first (then `None`). Its notifications carry input
    /// requests of the `kinds` the listen request declared only.
    Listen {
        subscription: Value,
        ack: Option<Vec<String>>,
        kinds: InputKinds,
    },
    /// 2025-11-25 on stdio: `response` (the `CreateTaskResult`) is sent first.
    Legacy { response: Option<Value> },
}

struct Follow<B> {
    backend: Arc<B>,
    timing: TaskTiming,
    follower: Follower,
    tasks: Vec<Followed>,
    /// Tasks to render and, if changed, send.
    pending: VecDeque<usize>,
    shape: Shape,
    opened: bool,
    done: bool,
    _guard: StreamGuard,
}

async fn next_message<B: TaskBackend>(mut st: Follow<B>) -> Option<(Value, Follow<B>)> {
    if st.done {
        return None;
    }
    if !st.opened {
        st.opened = true;
        let first = match &mut st.shape {
            Shape::Listen {
                subscription, ack, ..
            } => json!({
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "_meta": { SUBSCRIPTION_ID: subscription.clone() },
                    "notifications": { "taskIds": ack.take().unwrap_or_default() },
                },
            }),
            Shape::Legacy { response } => response.take().unwrap_or(Value::Null),
        };
        return Some((first, st));
    }
    loop {
        while let Some(i) = st.pending.pop_front() {
            if st.tasks[i].terminal {
                continue;
            }
            let id = st.tasks[i].id;
            let Some(now) = current(&st, id).await else {
                // Gone from the store (expired): nothing more will come for it.
                st.tasks[i].terminal = true;
                continue;
            };
            let view = match &st.shape {
                Shape::Listen { kinds, .. } => detailed_task(
                    &*st.backend,
                    &now.task,
                    now.queue_position,
                    st.timing,
                    *kinds,
                ),
                Shape::Legacy { .. } => {
                    legacy_task(&*st.backend, &now.task, now.queue_position, st.timing)
                }
            };
            let followed = &mut st.tasks[i];
            followed.terminal = now.task.state.is_terminal();
            if followed.last.as_ref() == Some(&view) {
                continue;
            }
            followed.last = Some(view.clone());
            let message = match &st.shape {
                Shape::Listen { subscription, .. } => {
                    let status = st.backend.status_text(&now.task, now.queue_position);
                    let mut params = view;
                    params.insert(
                        "_meta".into(),
                        json!({ SUBSCRIPTION_ID: subscription, STATUS_META: status }),
                    );
                    json!({ "jsonrpc": "2.0", "method": "notifications/tasks", "params": params })
                }
                Shape::Legacy { .. } => json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/tasks/status",
                    "params": view,
                }),
            };
            return Some((message, st));
        }
        if st.tasks.iter().all(|t| t.terminal) {
            st.done = true;
            return match &st.shape {
                // Every task is terminal: the listen ends with its empty result.
                Shape::Listen { subscription, .. } => {
                    let end = json!({
                        "jsonrpc": "2.0",
                        "id": subscription,
                        "result": {
                            "resultType": "complete",
                            "_meta": { SUBSCRIPTION_ID: subscription },
                        },
                    });
                    Some((end, st))
                }
                Shape::Legacy { .. } => None,
            };
        }
        let changed = st.follower.changed().await;
        if st.follower.is_closed() {
            // The server is shutting down: the stream ends as if every task were done (a
            // listen gets its result, which tells the client it may listen again later).
            for task in &mut st.tasks {
                task.terminal = true;
            }
            continue;
        }
        for id in changed {
            if let Some(i) = st.tasks.iter().position(|t| t.id == id) {
                st.pending.push_back(i);
            }
        }
    }
}

/// The task as it is now: the snapshot its last change published, or the store's copy (a
/// change known by id only, or a queued task, whose place in line moves without it changing).
async fn current<B: TaskBackend>(st: &Follow<B>, id: Uuid) -> Option<Tracked> {
    if let Some(task) = st.follower.latest(id)
        && task.state != TaskState::Queued
    {
        return Some(Tracked {
            task: (*task).clone(),
            queue_position: None,
        });
    }
    match st.backend.lookup(id).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(task_id = %id, error = %e, "cannot read a followed task; it is dropped from the stream");
            None
        }
    }
}
