//! Whether a task's work is done: the project's checks, and a rename the task left half done
//! (from its own changes and the names the request names). What a request asks for is the model's
//! reading of it (`engine::reading`, `engine::direct`), not a word list.

pub(crate) mod checks;
pub(crate) mod names;
pub(crate) mod project_checks;
pub(crate) mod renames;
