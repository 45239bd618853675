//! How a stored agent task looks on the wire in each era: status mapping, the status message,
//! timestamps, the final `CallToolResult`, and the JSON-RPC errors of the `tasks/*` methods.

use std::time::SystemTime;

use serde_json::{Map, Value, json};

use super::backend::TaskBackend;
use crate::plugin::{ErrorObject, RequestContext, code};
use crate::plugin::{Task, TaskState};

/// The 2026-07-28 Tasks extension identifier.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The 2025-11-25 `_meta` key that ties a `tasks/result` payload to its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Longest failure or cancellation reason copied into a `statusMessage`; the full text is in
/// the final result.
const MAX_REASON_CHARS: usize = 500;

/// The 2026-07-28 status: everything not yet terminal is `working`, and a failed agent task is
/// a *completed* tool call whose result has `isError: true` (a tool-level failure).
pub fn modern_status(state: TaskState) -> &'static str {
    match state {
        TaskState::Queued | TaskState::Planning | TaskState::Running => "working",
        TaskState::Completed | TaskState::Failed => "completed",
        TaskState::Cancelled => "cancelled",
    }
}

/// The 2025-11-25 status: there a tool result with `isError: true` makes the task `failed`.
pub fn legacy_status(state: TaskState) -> &'static str {
    match state {
        TaskState::Queued | TaskState::Planning | TaskState::Running => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Cancelled => "cancelled",
    }
}

/// Says which agent state the task is in: the queue position while queued, the step while
/// planning or running, the reason once failed or cancelled.
pub fn status_message<B: TaskBackend + ?Sized>(
    backend: &B,
    task: &Task,
    queue_position: Option<usize>,
) -> String {
    let base = backend.state_message(task.state, queue_position);
    match task.state {
        TaskState::Planning | TaskState::Running if !task.current_task.is_empty() => {
            format!("{base}（{}）", task.current_task)
        }
        TaskState::Failed | TaskState::Cancelled if !task.result.is_empty() => {
            let reason: String = task.result.chars().take(MAX_REASON_CHARS).collect();
            format!("{base} {reason}")
        }
        _ => base,
    }
}

/// ISO 8601 / RFC 3339 in UTC with milliseconds, e.g. `2026-08-21T12:00:00.123Z`.
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// The `CallToolResult` a finished task stands for: exactly the backend's result text (the
/// `agent_status` text), flagged as an error unless the task completed.
pub fn final_result<B: TaskBackend + ?Sized>(backend: &B, task: &Task) -> Map<String, Value> {
    let mut body = Map::with_capacity(2);
    body.insert(
        "content".into(),
        json!([{ "type": "text", "text": backend.result_text(task) }]),
    );
    body.insert(
        "isError".into(),
        Value::Bool(task.state != TaskState::Completed),
    );
    body
}

/// What the task fields are rendered with besides the task itself.
#[derive(Clone, Copy, Debug)]
pub struct TaskTiming {
    pub ttl_ms: u64,
    /// The interval suggested for a running task, or the next one in line.
    pub poll_interval_ms: u64,
}

/// The longest poll interval suggested for a task far back in the queue (unless the base
/// interval is longer still).
pub const MAX_POLL_INTERVAL_MS: u64 = 5 * 60 * 1000;

impl TaskTiming {
    /// The poll interval suggested for a task at `position` in the queue (`None`: not queued).
    ///
    /// A task `p` places back cannot start before the `p - 1` ahead of it have run, so it is
    /// suggested `p` times the base interval, up to [`MAX_POLL_INTERVAL_MS`]. The sum of
    /// `1 / p` grows only with the logarithm of the queue, so one caller polling every one of
    /// its tasks at the suggested pace sends few requests a second however many tasks it has
    /// queued (with a 1 s base: 1 running + 1,000 queued → under 12 per second), well inside
    /// the default read budget of the rate limit.
    pub fn poll_interval_ms(&self, position: Option<usize>) -> u64 {
        let factor = u64::try_from(position.unwrap_or(1).max(1)).unwrap_or(u64::MAX);
        let cap = MAX_POLL_INTERVAL_MS.max(self.poll_interval_ms);
        self.poll_interval_ms.saturating_mul(factor).min(cap)
    }
}

/// The 2026-07-28 `Task` fields (flat; `ttlMs`, `pollIntervalMs`).
pub fn modern_task<B: TaskBackend + ?Sized>(
    backend: &B,
    task: &Task,
    position: Option<usize>,
    timing: TaskTiming,
) -> Map<String, Value> {
    // A task waiting for a person's decision is `input_required` (Tasks extension, status
    // machine: `working` → `input_required` → `working` | terminal); the agent state stays
    // `running`.
    let status = if !task.state.is_terminal() && task.input.is_waiting() {
        "input_required"
    } else {
        modern_status(task.state)
    };
    let keys = ["ttlMs", "pollIntervalMs"];
    task_fields(backend, task, position, status, keys, timing)
}

/// The `Task` fields both revisions share; they name the status and the two timings apart.
fn task_fields<B: TaskBackend + ?Sized>(
    backend: &B,
    task: &Task,
    position: Option<usize>,
    status: &'static str,
    [ttl_key, poll_key]: [&str; 2],
    timing: TaskTiming,
) -> Map<String, Value> {
    let mut body = Map::with_capacity(8);
    body.insert("taskId".into(), Value::from(task.id.to_string()));
    body.insert("status".into(), Value::from(status));
    body.insert(
        "statusMessage".into(),
        Value::from(status_message(backend, task, position)),
    );
    body.insert("createdAt".into(), Value::from(timestamp(task.created_at)));
    body.insert(
        "lastUpdatedAt".into(),
        Value::from(timestamp(task.updated_at)),
    );
    body.insert(ttl_key.into(), Value::from(timing.ttl_ms));
    body.insert(
        poll_key.into(),
        Value::from(timing.poll_interval_ms(position)),
    );
    body
}

/// The kinds of input request a request may be sent: those its client capabilities declare
/// (2026-07-28 MRTR: a server MUST NOT send input requests of a kind the request did not
/// declare). This server asks only by form `elicitation/create`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputKinds {
    pub form_elicitation: bool,
}

impl InputKinds {
    /// What `ctx`, the request being answered, declares (not the request that created the
    /// task: each request is asked only what it can answer).
    pub fn declared_by(ctx: &RequestContext) -> Self {
        Self {
            form_elicitation: ctx.declares_form_elicitation(),
        }
    }
}

/// The 2026-07-28 `DetailedTask`: the task plus, once it is `completed`, its inlined result.
///
/// The inlined result is "the result type of the original request" (the extension's
/// `CompletedTask.result`): a 2026-07-28 `CallToolResult`, so it carries
/// `resultType: "complete"` like every result of that revision. The official Tasks client
/// validates it as one and fails the whole call without it. The 2025-11-25 `tasks/result`
/// payload stays legacy-shaped (see `legacy.rs`): no `resultType` there.
///
/// A waiting task is `input_required` with its waiting `statusMessage` whoever asks; its
/// `inputRequests` hold only the kinds in `kinds`, and are left out when that leaves none:
/// a request that declared no elicitation sees the task wait, and the answer comes through
/// one that does.
pub fn detailed_task<B: TaskBackend + ?Sized>(
    backend: &B,
    task: &Task,
    position: Option<usize>,
    timing: TaskTiming,
    kinds: InputKinds,
) -> Map<String, Value> {
    let mut body = modern_task(backend, task, position, timing);
    if !task.state.is_terminal() && task.input.is_waiting() {
        let requests = input_requests(task, kinds);
        if !requests.is_empty() {
            body.insert("inputRequests".into(), Value::Object(requests));
        }
    }
    if matches!(task.state, TaskState::Completed | TaskState::Failed) {
        let mut result = final_result(backend, task);
        result.insert("resultType".into(), Value::from("complete"));
        body.insert("result".into(), Value::Object(result));
    }
    body
}

/// `inputRequests` of a waiting task: every outstanding request by its key, each a form
/// `elicitation/create` (Tasks extension, `input_required`: "a map of key → elicitation/create
/// … request objects"; the 2026-07-28 `ElicitRequestFormParams`: `mode`, `message`, a flat
/// `requestedSchema`). The decision is the answer's `action`: `accept` lets the call run,
/// `decline` or `cancel` refuses it; the form asks for nothing else. Only those of `kinds`:
/// none without form elicitation.
pub fn input_requests(task: &Task, kinds: InputKinds) -> Map<String, Value> {
    if !kinds.form_elicitation {
        return Map::new();
    }
    task.input
        .pending
        .iter()
        .map(|request| (request.key.clone(), request.elicitation()))
        .collect()
}

/// The 2025-11-25 `Task` object (`ttl`, `pollInterval`).
pub fn legacy_task<B: TaskBackend + ?Sized>(
    backend: &B,
    task: &Task,
    position: Option<usize>,
    timing: TaskTiming,
) -> Map<String, Value> {
    let status = legacy_status(task.state);
    let keys = ["ttl", "pollInterval"];
    task_fields(backend, task, position, status, keys, timing)
}

/// The task id in `params.taskId`, accepting exactly what `format: uuid` accepts (`Uuid`'s own
/// parser also takes braced and URN forms).
pub fn parse_task_id(text: &str) -> Option<uuid::Uuid> {
    if text.len() != 36 {
        return None;
    }
    uuid::Uuid::parse_str(text).ok()
}

/// -32021: `tasks/*` from a request that did not declare the extension.
pub fn extension_not_declared(method: &str) -> ErrorObject {
    ErrorObject::new(
        code::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "Missing required client capability: {method} belongs to the \
             {TASKS_EXTENSION} extension; declare it in this request's \
             _meta[\"io.modelcontextprotocol/clientCapabilities\"].extensions"
        ),
    )
    .with_data(json!({
        "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } }
    }))
}

/// -32602: no such task for this caller (unknown, malformed, or another identity's).
pub fn task_not_found(task_id: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!(
        "Failed to retrieve task: Task not found ({task_id}). Pass a taskId returned by \
         tools/call agent_run."
    ))
}

/// -32602: `params.taskId` is missing or not a string.
pub fn task_id_missing(method: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!(
        "{method} needs params.taskId, the taskId returned by tools/call agent_run"
    ))
}

/// -32603: the store could not be read or written.
pub fn store_fault(e: &impl std::fmt::Display) -> ErrorObject {
    tracing::error!(error = %e, "task store failure");
    ErrorObject::internal(format!(
        "The task store failed ({e}). Try again; if it persists, check the server log."
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use uuid::Uuid;

    use crate::tasks::tests::MemoryTasks;

    /// Only its texts are used here.
    static B: std::sync::LazyLock<MemoryTasks> = std::sync::LazyLock::new(MemoryTasks::default);

    fn task(state: TaskState) -> Task {
        let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
        t.state = state;
        t.created_at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_787_313_600_123);
        t.updated_at = t.created_at + Duration::from_secs(5);
        t
    }

    const TIMING: TaskTiming = TaskTiming {
        ttl_ms: 604_800_000,
        poll_interval_ms: 1000,
    };

    #[test]
    fn status_mapping_per_era() {
        use TaskState::*;
        let modern: Vec<_> = [Queued, Planning, Running, Completed, Failed, Cancelled]
            .map(modern_status)
            .into();
        assert_eq!(
            modern,
            [
                "working",
                "working",
                "working",
                "completed",
                "completed",
                "cancelled"
            ]
        );
        let legacy: Vec<_> = [Queued, Planning, Running, Completed, Failed, Cancelled]
            .map(legacy_status)
            .into();
        assert_eq!(
            legacy,
            [
                "working",
                "working",
                "working",
                "completed",
                "failed",
                "cancelled"
            ]
        );
    }

    #[test]
    fn status_messages_say_which_state() {
        assert_eq!(
            status_message(&*B, &task(TaskState::Queued), Some(2)),
            "queued #2."
        );
        let mut running = task(TaskState::Running);
        running.current_task = "ollama chat".into();
        assert_eq!(
            status_message(&*B, &running, None),
            "running.（ollama chat）"
        );
        let mut failed = task(TaskState::Failed);
        failed.result = "x".repeat(600);
        assert_eq!(
            status_message(&*B, &failed, None),
            format!("failed. {}", "x".repeat(500))
        );
    }

    #[test]
    fn modern_and_legacy_task_shapes_are_pinned() {
        type Render = fn(&MemoryTasks, &Task, Option<usize>, TaskTiming) -> Map<String, Value>;
        let t = task(TaskState::Queued);
        // The eras differ only in the names of the two timing members.
        let cases: [(&str, Render, &str, &str); 2] = [
            ("modern", modern_task, "ttlMs", "pollIntervalMs"),
            ("legacy", legacy_task, "ttl", "pollInterval"),
        ];
        for (era, render, ttl, poll_interval) in cases {
            let mut expected = json!({
                "taskId": t.id.to_string(), "status": "working",
                "statusMessage": "queued #1.",
                "createdAt": "2026-08-21T12:00:00.123Z",
                "lastUpdatedAt": "2026-08-21T12:00:05.123Z",
            });
            expected[ttl] = json!(604_800_000);
            expected[poll_interval] = json!(1000);
            assert_eq!(
                Value::Object(render(&B, &t, Some(1), TIMING)),
                expected,
                "{era}"
            );
        }
    }

    #[test]
    fn poll_interval_grows_with_the_queue_position_up_to_a_cap() {
        let t = TIMING;
        assert_eq!(t.poll_interval_ms(None), 1000, "running");
        assert_eq!(t.poll_interval_ms(Some(1)), 1000, "next in line");
        assert_eq!(t.poll_interval_ms(Some(2)), 2000);
        assert_eq!(t.poll_interval_ms(Some(37)), 37_000);
        assert_eq!(t.poll_interval_ms(Some(300)), MAX_POLL_INTERVAL_MS);
        assert_eq!(t.poll_interval_ms(Some(usize::MAX)), MAX_POLL_INTERVAL_MS);
        // One caller polling a running task and 1,000 queued ones at the suggested pace.
        let per_second: f64 = std::iter::once(None)
            .chain((1..=1000).map(Some))
            .map(|p| 1000.0 / t.poll_interval_ms(p) as f64)
            .sum();
        assert!(per_second < 12.0, "{per_second} polls per second");
        // A base interval longer than the cap is never shortened.
        let slow = TaskTiming {
            ttl_ms: 1,
            poll_interval_ms: 10 * MAX_POLL_INTERVAL_MS,
        };
        assert_eq!(slow.poll_interval_ms(Some(3)), 10 * MAX_POLL_INTERVAL_MS);
    }

    #[test]
    fn only_finished_tool_calls_inline_a_result() {
        for state in [TaskState::Running, TaskState::Cancelled] {
            assert!(
                !detailed_task(&*B, &task(state), None, TIMING, ELICITS).contains_key("result")
            );
        }
        let done = task(TaskState::Completed);
        let body = detailed_task(&*B, &done, None, TIMING, ELICITS);
        // A 2026-07-28 CallToolResult: the official Tasks client rejects it without resultType.
        assert_eq!(body["result"]["resultType"], json!("complete"));
        assert_eq!(body["result"]["isError"], json!(false));
        assert_eq!(
            body["result"]["content"][0]["text"],
            json!(B.result_text(&done))
        );
        let failed = detailed_task(&*B, &task(TaskState::Failed), None, TIMING, ELICITS);
        assert_eq!(failed["status"], json!("completed"));
        assert_eq!(failed["result"]["isError"], json!(true));
        assert_eq!(failed["result"]["resultType"], json!("complete"));
        // The legacy tasks/result payload is built from the same fields without it.
        assert!(!final_result(&*B, &done).contains_key("resultType"));
    }

    const ELICITS: InputKinds = InputKinds {
        form_elicitation: true,
    };

    /// A waiting task is `input_required` with the same fields for everyone; its
    /// `inputRequests` only for a request that declared form elicitation (`elicitation: {}`
    /// or `{"form": …}`), never for one that declared none or only URL mode.
    #[test]
    fn input_requests_go_only_to_a_request_that_declared_form_elicitation() {
        let mut waiting = task(TaskState::Running);
        waiting
            .input
            .pending
            .push(crate::plugin::task::input::InputRequest {
                key: "approval-1".into(),
                tool: "run_command".into(),
                summary: "touch made.txt".into(),
                detail: String::new(),
            });
        let asked = json!({"approval-1": waiting.input.pending[0].elicitation()});
        let ctx = |caps: Value| {
            let mut ctx = RequestContext::new(
                crate::plugin::ProtocolVersion::V2026_07_28,
                crate::plugin::Transport::InProcess,
            );
            ctx.client_capabilities = caps;
            ctx
        };
        for (caps, elicits) in [
            (json!({"elicitation": {}}), true),
            (json!({"elicitation": {"form": {}}}), true),
            (json!({"elicitation": {"form": {}, "url": {}}}), true),
            (json!({"elicitation": {"url": {}}}), false),
            (json!({"extensions": {TASKS_EXTENSION: {}}}), false),
            (json!({}), false),
        ] {
            let kinds = InputKinds::declared_by(&ctx(caps.clone()));
            assert_eq!(kinds.form_elicitation, elicits, "{caps}");
            let mut body = detailed_task(&*B, &waiting, None, TIMING, kinds);
            assert_eq!(body["status"], json!("input_required"), "{caps}");
            let requests = body.remove("inputRequests");
            assert_eq!(requests, elicits.then(|| asked.clone()), "{caps}");
            assert_eq!(
                body,
                modern_task(&*B, &waiting, None, TIMING),
                "the rest is the same for every request: {caps}"
            );
        }
    }

    #[test]
    fn undeclared_error_carries_required_capabilities() {
        let e = extension_not_declared("tasks/get");
        assert_eq!(e.code, -32021);
        assert_eq!(
            e.data,
            Some(
                json!({"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}})
            )
        );
    }
}
