//! Running one task: the runner, its steps, the plan, the context window, the model's
//! profile, the `files` policy, approvals, the result's summary and the trace.

pub(crate) mod approval;
pub(crate) mod context;
pub(crate) mod direct;
pub(crate) mod files_task;
pub(crate) mod held_to;
pub(crate) mod model;
pub mod plan;
pub(crate) mod probe;
pub(crate) mod reading;
pub mod runner;
pub(crate) mod step;
pub(crate) mod step_event;
pub(crate) mod step_progress;
pub(crate) mod step_schedule;
pub(crate) mod summary;
pub(crate) mod task_changes;
pub(crate) mod trace;
