//! What a task did, as the lines after its answer in the result: the files it changed (lines
//! added and removed), how the checks began and ended, and whether the context was compacted.
//!
//! ```text
//! add now adds.
//!
//! changed: calc.py (+1 -1)
//! checks: 1 failing → 0 failing (python3 -m unittest)
//! ```
//!
//! The answer above these lines is the model's, unchanged; a task that changed nothing and ran
//! no checks has no such lines.

use crate::agent::judge::checks::CheckReport;
use crate::agent::tools::FileChange;

/// What a task did besides answering.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    pub changes: Vec<FileChange>,
    pub checks: Option<CheckReport>,
    /// Older tool results compacted to fit the context window, and the window.
    pub compacted: usize,
    pub num_ctx: u32,
}

impl Summary {
    /// The lines that follow the answer; `None` when there is nothing to say.
    pub fn lines(&self) -> Option<String> {
        let mut lines = Vec::new();
        if !self.changes.is_empty() {
            let each: Vec<String> = self.changes.iter().map(ToString::to_string).collect();
            lines.push(format!("changed: {}", each.join(", ")));
        }
        if let Some(checks) = &self.checks {
            lines.push(checks.line());
        }
        if self.compacted > 0 {
            lines.push(format!(
                "context: {} older tool results compacted to fit num_ctx {}",
                self.compacted, self.num_ctx
            ));
        }
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    /// `answer`, followed by [`Summary::lines`] after a blank line.
    pub fn after(&self, answer: String) -> String {
        match self.lines() {
            Some(lines) => format!("{answer}\n\n{lines}"),
            None => answer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::ChangeKind;

    #[test]
    fn the_answer_stays_first_and_unchanged() {
        let summary = Summary {
            changes: vec![
                FileChange {
                    path: "notes/todo.md".into(),
                    how: ChangeKind::Created { added: 1 },
                },
                FileChange {
                    path: "calc.py".into(),
                    how: ChangeKind::Modified {
                        added: 1,
                        removed: 1,
                    },
                },
            ],
            checks: None,
            compacted: 3,
            num_ctx: 8192,
        };
        assert_eq!(
            summary.after("Done.".into()),
            "Done.\n\nchanged: notes/todo.md (new, +1), calc.py (+1 -1)\n\
             context: 3 older tool results compacted to fit num_ctx 8192"
        );
        assert_eq!(Summary::default().after("4.".into()), "4.");
    }
}
