//! [`StepEvent`]: what a running step reports, to its progress and to the approval gate.

/// Progress a running step reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StepEvent {
    /// A model call finished with these counts.
    Tokens {
        step: usize,
        input: u64,
        output: u64,
    },
    /// A tool started (its one-line description) or finished (`None`).
    Tool {
        step: usize,
        description: Option<String>,
    },
    /// A tool ran (or was refused): what the model was sent back, for the oversight page.
    ToolResult { step: usize, ok: bool, text: String },
    /// Older tool results were compacted to fit the context window.
    Compacted { step: usize, results: usize },
    /// A tool call waits for a person's decision on `request`.
    Asking {
        step: usize,
        request: crate::task::input::InputRequest,
    },
    /// The decision came (or the timeout decided).
    Decided {
        step: usize,
        decision: crate::task::input::Decision,
    },
}
