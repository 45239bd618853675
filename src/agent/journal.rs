//! What a running task did, step by step, for the oversight page: each step's start and end,
//! each model call with its tokens, each tool call, each approval asked and decided, each
//! compaction. Kept in memory by the process that runs the task, bounded: the last
//! [`TASKS_KEPT`] tasks, [`ENTRIES_PER_TASK`] entries each (the first ones and the newest, a
//! gap marked between), [`MAX_TEXT`] bytes of text an entry. A restart, or another instance,
//! has none of it; the task itself (its state, result, decisions, changes) is in the store.
//!
//! ```
//! use agent_mcp::agent::journal::TaskJournal;
//! let journal = TaskJournal::default();
//! let id = uuid::Uuid::new_v4();
//! journal.note(id, Some(0), "step", "ollama chat");
//! assert_eq!(journal.entries(id)[0].text, "ollama chat");
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use uuid::Uuid;

use super::engine::step_event::StepEvent;

/// Tasks whose journal is kept (the newest).
pub const TASKS_KEPT: usize = 64;
/// Entries kept per task.
pub const ENTRIES_PER_TASK: usize = 400;
/// Longest text of one entry, in bytes (cut at a character boundary).
pub const MAX_TEXT: usize = 2048;

/// One thing a task did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JournalEntry {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The plan step (0-based), when it was one's.
    pub step: Option<usize>,
    /// `step`, `step done`, `model call`, `tool`, `tool done`, `approval`, `decision`,
    /// `compacted`.
    pub kind: &'static str,
    pub text: String,
}

#[derive(Debug, Default)]
struct Entries {
    list: VecDeque<JournalEntry>,
    /// Entries dropped from the middle.
    dropped: usize,
}

/// The journals of the tasks this process ran last.
#[derive(Debug, Default)]
pub struct TaskJournal {
    inner: Mutex<(HashMap<Uuid, Entries>, VecDeque<Uuid>)>,
}

impl TaskJournal {
    /// Adds an entry to task `id`'s journal.
    pub fn note(&self, id: Uuid, step: Option<usize>, kind: &'static str, text: &str) {
        let mut text = text.to_owned();
        if text.len() > MAX_TEXT {
            let mut end = MAX_TEXT;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push('…');
        }
        let entry = JournalEntry {
            at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0),
            step,
            kind,
            text,
        };
        // A poisoned lock holds whole entries: each change is one push or pop.
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (tasks, order) = &mut *guard;
        if !tasks.contains_key(&id) {
            if order.len() == TASKS_KEPT
                && let Some(oldest) = order.pop_front()
            {
                tasks.remove(&oldest);
            }
            order.push_back(id);
        }
        let entries = tasks.entry(id).or_default();
        if entries.list.len() == ENTRIES_PER_TASK {
            // Keep the beginning (the plan's first steps) and the newest.
            entries.list.remove(ENTRIES_PER_TASK / 4);
            entries.dropped += 1;
        }
        entries.list.push_back(entry);
    }

    /// Adds what a step reported.
    pub(crate) fn event(&self, id: Uuid, event: &StepEvent) {
        match event {
            StepEvent::Tokens {
                step,
                input,
                output,
            } => self.note(
                id,
                Some(*step),
                "model call",
                &format!("{input} tokens in, {output} out"),
            ),
            StepEvent::Tool {
                step,
                description: Some(tool),
            } => self.note(id, Some(*step), "tool", tool),
            StepEvent::Tool {
                step,
                description: None,
            } => self.note(id, Some(*step), "tool done", ""),
            StepEvent::ToolResult { step, ok, text } => self.note(
                id,
                Some(*step),
                if *ok { "tool result" } else { "tool error" },
                text,
            ),
            StepEvent::Compacted { step, results } => self.note(
                id,
                Some(*step),
                "compacted",
                &format!("{results} older tool results compacted"),
            ),
            StepEvent::Asking { step, request } => self.note(
                id,
                Some(*step),
                "approval",
                &format!("{}: {} {}", request.key, request.tool, request.summary),
            ),
            StepEvent::Decided { step, decision } => {
                self.note(id, Some(*step), "decision", &decision.line())
            }
        }
    }

    /// Task `id`'s journal, oldest first (empty when this process has none), with a
    /// `dropped` entry where entries were left out.
    pub fn entries(&self, id: Uuid) -> Vec<JournalEntry> {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entries) = guard.0.get(&id) else {
            return Vec::new();
        };
        let mut list: Vec<JournalEntry> = entries.list.iter().cloned().collect();
        if entries.dropped > 0 {
            let at = ENTRIES_PER_TASK / 4;
            let marker = JournalEntry {
                at_ms: list.get(at).map_or(0, |e| e.at_ms),
                step: None,
                kind: "dropped",
                text: format!("{} entries left out", entries.dropped),
            };
            list.insert(at.min(list.len()), marker);
        }
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journals_are_bounded_in_tasks_entries_and_text() {
        let journal = TaskJournal::default();
        let first = Uuid::new_v4();
        journal.note(first, None, "step", &"é".repeat(MAX_TEXT));
        let text = &journal.entries(first)[0].text;
        assert!(text.len() <= MAX_TEXT + '…'.len_utf8() && text.ends_with('…'));
        for _ in 0..TASKS_KEPT {
            journal.note(Uuid::new_v4(), None, "step", "x");
        }
        assert!(
            journal.entries(first).is_empty(),
            "the oldest task's journal went"
        );
        let busy = Uuid::new_v4();
        for i in 0..ENTRIES_PER_TASK + 10 {
            journal.note(busy, Some(0), "tool", &i.to_string());
        }
        let entries = journal.entries(busy);
        assert_eq!(entries.len(), ENTRIES_PER_TASK + 1);
        assert_eq!(entries[0].text, "0");
        assert_eq!(entries[ENTRIES_PER_TASK / 4].text, "10 entries left out");
        assert_eq!(
            entries.last().unwrap().text,
            (ENTRIES_PER_TASK + 9).to_string()
        );
    }
}
