//! Whether a task's work is done: the project's checks. What a request asks for is the model's
//! reading of it (`engine::reading`, `engine::direct`), not a word list.

pub(crate) mod checks;
pub(crate) mod project_checks;
