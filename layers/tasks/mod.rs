//! Agent tasks as MCP tasks, in both protocol eras, from the agent's own task store.
//!
//! The agent task *is* the MCP task: the MCP `taskId` is the agent task's UUID (v4, random), so
//! `tasks/*` and `agent_status` read the same record, and a task created in one era can be read
//! or cancelled in the other. The layer sits between rate limiting and validation, so an
//! `agent_run` with invalid arguments is answered by the inner layers as a tool error and is
//! passed back unchanged: only a task the inner service actually stored becomes an MCP task.
//!
//! **2026-07-28, `io.modelcontextprotocol/tasks`.** `server/discover` advertises
//! `capabilities.extensions["io.modelcontextprotocol/tasks"] = {}`. A `tools/call` of
//! `agent_run` whose own `_meta` client capabilities declare the extension answers with a flat
//! `CreateTaskResult` (`resultType: "task"`), returned only after the task is stored, so an
//! immediate `tasks/get` finds it. Without the declaration `agent_run` answers with its text as
//! before. Statuses: `queued`/`planning`/`running` → `working` (the `statusMessage` says which,
//! with the queue position while queued), `completed` → `completed`, `failed` → `completed`
//! with `isError: true` (a tool-level failure), `cancelled` → `cancelled`; a running task whose
//! tool call waits for a person's decision is `input_required`, and `tasks/get` (and push)
//! carry its `inputRequests`, which `tasks/update` answers through
//! [`TaskBackend::answer`]; only to a request whose own client capabilities declare form
//! elicitation ([`InputKinds`]): another sees the task wait, without them. `tasks/get` inlines the final `CallToolResult`, whose text is
//! exactly the `agent_status` text; `tasks/cancel` and `tasks/update` answer with the empty ack
//! (terminal tasks included); `tasks/result` and
//! `tasks/list` are -32601. A request that did not declare the extension gets -32021 with
//! `data.requiredCapabilities` before anything else is checked; an unknown id, a malformed id
//! and another identity's task are all -32602.
//!
//! **2025-11-25 experimental tasks.** `initialize` (negotiating 2025-11-25) advertises
//! `tasks: {cancel, requests.tools.call}`; that era's `tools/list` marks `agent_run`
//! `execution.taskSupport: "optional"`; `tools/call` with `params.task` answers with
//! `{task: {…, ttl, pollInterval}}`; `tasks/get` returns the task; `tasks/result` waits until the
//! task is terminal (or the client cancels the request) and returns the `CallToolResult` with
//! `_meta["io.modelcontextprotocol/related-task"]`; `tasks/cancel` returns the cancelled task and
//! -32602 for a terminal one (a running task is given [`TasksConfig::cancel_wait`] to
//! stop, so the answer normally already says `cancelled`). There, `failed` stays `failed`.
//! Capabilities and `execution` are shown to 2025-11-25 only; `params.task` and `tasks/*` are
//! honoured for any 2025 revision, since a client that sends them speaks 2025-11-25 tasks even
//! when a stateless HTTP request lacks its `MCP-Protocol-Version` header.
//!
//! **The backend.** The layer is generic over a [`TaskBackend`] (the agent core in the server):
//! it looks tasks up, cancels them and waits on the backend's change notifications, never
//! polling in a loop. A task is created by passing `agent_run` to the inner service; the new
//! task's id is the one the service reports on the response
//! ([`McpResponse::ids`](crate::plugin::McpResponse::ids)). **Cancellation** through the agent
//! core: a queued task leaves the queue at once; a running one has its token fired, which
//! aborts the Ollama request.
//!
//! The server's `agent_mcp::stack` module shows the layer around the agent core, in a
//! doc example of that crate.

mod backend;
mod future;
mod inner;
mod layer;
mod legacy;
mod listen;
mod lookup;
mod modern;
mod service;
mod streams;
mod wire;

pub use backend::{TaskBackend, Tracked};
pub use future::ResponseFuture;
pub use layer::{
    DEFAULT_CANCEL_WAIT, DEFAULT_MAX_STREAMS_PER_CALLER, DEFAULT_POLL_INTERVAL, TasksConfig,
    TasksLayer,
};
pub use listen::{MAX_TASK_IDS, STATUS_META, SUBSCRIPTION_ID};
pub use service::Tasks;
pub use streams::OpenStreams;
pub use wire::{
    InputKinds, MAX_POLL_INTERVAL_MS, RELATED_TASK, TASKS_EXTENSION, TaskTiming, legacy_status,
    modern_status, status_message,
};

#[cfg(test)]
mod test_fields;
#[cfg(test)]
mod tests;
