//! Whether a task's work is done: the project's checks, and what a request says it wants.

pub(crate) mod checks;
pub(crate) mod expect;
pub(crate) mod intent;
pub(crate) mod lexicon;
pub(crate) mod project_checks;
