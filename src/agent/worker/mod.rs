//! The queue and the workers that take tasks from it: claiming a task, and the shared
//! store's worker loop.

pub(crate) mod claim;
pub(crate) mod local_loop;
pub mod queue;
pub(crate) mod shared_loop;
