//! What the `files` policy knows of a task before its step runs (the files put in the prompt,
//! the model's reading of the request): data the engine carries from the runner to the step,
//! apart from the policy's code in `direct` so that the step's types need not import it.

/// One of the workspace's files, as put in the prompt.
#[derive(Clone, Debug)]
pub(crate) struct WorkspaceFile {
    pub path: String,
    pub text: String,
}

/// What the model read the request as asking, before any work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Intent {
    /// Files are to be created, changed or deleted (else: an answer).
    pub change: bool,
    /// Tests are to be written or changed.
    pub tests: bool,
    /// The checks that fail now are to pass (asked only when they fail).
    pub fix_failing: bool,
}

/// The task's files and intent, when the `files` policy runs it.
#[derive(Clone, Debug)]
pub(crate) struct Direct {
    pub files: Vec<WorkspaceFile>,
    pub intent: Intent,
    /// The checks' failing output before any change.
    pub failing: Option<String>,
}
