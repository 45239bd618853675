//! A task's changes kept with the task: at its end, every file it changed (by a tool, or by
//! a command, found against the snapshot taken when it started) goes to the store as it was
//! before and after ([`crate::store::TaskChanges`]), whatever the outcome, so that
//! `agent-mcp diff` can show it and `agent-mcp undo` take it back.

use std::sync::Arc;

use tracing::warn;
use uuid::Uuid;

use crate::agent::tools::{Snapshot, Toolbox};
use crate::store::{TaskChanges, TaskStore};

/// What a running task's changes are read from at its end.
pub(crate) struct ChangeWatch {
    toolbox: Arc<Toolbox>,
    snapshot: Option<Arc<Snapshot>>,
}

impl ChangeWatch {
    pub fn new(toolbox: Arc<Toolbox>, snapshot: Option<Arc<Snapshot>>) -> Self {
        Self { toolbox, snapshot }
    }

    /// Stores what task `id` changed, if anything. A failure is logged: the task's outcome
    /// does not depend on its record.
    pub async fn record(self, store: &Arc<dyn TaskStore>, id: Uuid) {
        // In place, as the runner reads the ledger's changes: the walk was made when the work
        // ended (the snapshot keeps what it found), so this reads the changed files only, and
        // no hop to another thread lets the last progress save overtake the outcome.
        let files = self
            .toolbox
            .ledger()
            .record(self.toolbox.workspace(), self.snapshot.as_deref());
        if files.is_empty() {
            return;
        }
        if let Err(e) = store.save_changes(id, &TaskChanges::bounded(files)).await {
            warn!(task_id = %id, error = %e, "cannot keep the task's changes; diff and undo will not know them");
        }
    }
}
