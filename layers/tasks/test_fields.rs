//! What a task-creating call answers on 2026-07-28, field by field: the layer's own tests and
//! the server's (`tests/tasks_ext.rs`, as `tests/support/task_fields.rs` by `#[path]`) hold the
//! answer to the same list, so the two cannot drift apart.
// Not every test binary that includes tests/support uses it.
#![allow(dead_code)]

/// The fields of a freshly created task (`resultType: "task"`), in JSON key order.
pub const CREATED_TASK_FIELDS: [&str; 9] = [
    "_meta",
    "createdAt",
    "lastUpdatedAt",
    "pollIntervalMs",
    "resultType",
    "status",
    "statusMessage",
    "taskId",
    "ttlMs",
];
