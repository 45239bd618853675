//! What a task changed in the workspace, kept with the task: each file it wrote, edited,
//! created or deleted (by a tool or by a command it ran), as it was before and after.
//!
//! The record is bounded: a file's text is kept up to [`MAX_TEXT_PER_FILE`], a task's texts
//! up to [`MAX_TEXT_PER_TASK`] in all; past either, and for a file that is not UTF-8, only its
//! SHA-256 and length are kept ([`FileState::Hashed`]). That is enough to say whether the file
//! is still as the task left it, not to put it back.
//!
//! ```
//! use agent_mcp::store::{ChangedFile, FileState, TaskChanges};
//! let changes = TaskChanges::bounded(vec![ChangedFile {
//!     path: "calc.py".into(),
//!     before: FileState::of_bytes(Some(b"x = 1\n")),
//!     after: FileState::of_bytes(Some(b"x = 2\n")),
//! }]);
//! assert!(changes.files[0].before.restorable());
//! assert!(FileState::of_bytes(Some(&[0xff, 0x00])).is_hashed());
//! ```

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Largest text of one file kept in a task's record.
pub const MAX_TEXT_PER_FILE: usize = 256 * 1024;
/// Most text (before and after, every file) one task's record keeps.
pub const MAX_TEXT_PER_TASK: usize = 4 * 1024 * 1024;

/// One version of a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileState {
    /// There was no file.
    Absent,
    /// Its whole text.
    Text {
        /// The text.
        text: String,
    },
    /// Too large or not UTF-8: its SHA-256 (hex) and length only.
    Hashed {
        /// SHA-256, hex.
        sha256: String,
        /// Length in bytes.
        len: u64,
    },
    /// Not recorded: a command changed a file too large for the snapshot taken when the task
    /// started.
    Unrecorded,
}

impl FileState {
    /// The state of content `bytes` (`None`: no file), bounded by [`MAX_TEXT_PER_FILE`].
    pub fn of_bytes(bytes: Option<&[u8]>) -> FileState {
        match bytes {
            None => FileState::Absent,
            Some(b) if b.len() <= MAX_TEXT_PER_FILE => match std::str::from_utf8(b) {
                Ok(text) => FileState::Text {
                    text: text.to_owned(),
                },
                Err(_) => FileState::hashed(b),
            },
            Some(b) => FileState::hashed(b),
        }
    }

    /// [`FileState::Hashed`] of `bytes`.
    pub fn hashed(bytes: &[u8]) -> FileState {
        FileState::Hashed {
            sha256: hex(&Sha256::digest(bytes)),
            len: bytes.len() as u64,
        }
    }

    /// The file at `path` as it is now (`Absent` when there is none), hashing a large file
    /// as it reads it.
    pub fn read(path: &std::path::Path) -> std::io::Result<FileState> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileState::Absent),
            Err(e) => Err(e),
            Ok(meta) if meta.len() as usize > MAX_TEXT_PER_FILE => {
                use std::io::Read;
                let mut file = std::fs::File::open(path)?;
                let mut hasher = Sha256::new();
                let mut buf = vec![0; 64 * 1024];
                let mut len = 0u64;
                loop {
                    let n = file.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                    len += n as u64;
                }
                Ok(FileState::Hashed {
                    sha256: hex(&hasher.finalize()),
                    len,
                })
            }
            Ok(_) => Ok(FileState::of_bytes(Some(&std::fs::read(path)?))),
        }
    }

    /// Whether undo can put a file back to this state.
    pub fn restorable(&self) -> bool {
        matches!(self, FileState::Absent | FileState::Text { .. })
    }

    /// Kept by hash only.
    pub fn is_hashed(&self) -> bool {
        matches!(self, FileState::Hashed { .. })
    }

    /// The text kept, if any.
    pub fn text(&self) -> Option<&str> {
        match self {
            FileState::Text { text } => Some(text),
            _ => None,
        }
    }

    /// Whether `now` is the same content as `self` (an unrecorded state matches nothing).
    pub fn same_as(&self, now: &FileState) -> bool {
        match (self, now) {
            (FileState::Absent, FileState::Absent) => true,
            (FileState::Text { text }, FileState::Text { text: other }) => text == other,
            (FileState::Text { text }, FileState::Hashed { .. }) => {
                FileState::hashed(text.as_bytes()) == *now
            }
            (FileState::Hashed { .. }, FileState::Text { text }) => {
                FileState::hashed(text.as_bytes()) == *self
            }
            (FileState::Hashed { sha256, len }, FileState::Hashed { sha256: s, len: l }) => {
                sha256 == s && len == l
            }
            _ => false,
        }
    }

    /// Demoted to its hash (a text past the task's budget).
    fn demoted(self) -> FileState {
        match self {
            FileState::Text { text } => FileState::hashed(text.as_bytes()),
            other => other,
        }
    }

    fn text_len(&self) -> usize {
        self.text().map_or(0, str::len)
    }
}

/// One file a task changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Relative to the workspace root.
    pub path: String,
    /// Before the task.
    pub before: FileState,
    /// After the task.
    pub after: FileState,
}

/// Every file one task changed, and whether it was undone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskChanges {
    /// One entry per file.
    pub files: Vec<ChangedFile>,
    /// Set by the store ([`TaskStore::mark_undone`](super::TaskStore::mark_undone)), not
    /// part of the stored JSON.
    #[serde(skip)]
    pub undone: bool,
}

impl TaskChanges {
    /// `files` (in path order) within [`MAX_TEXT_PER_TASK`]: texts past the budget are kept
    /// by hash.
    pub fn bounded(mut files: Vec<ChangedFile>) -> TaskChanges {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut budget = MAX_TEXT_PER_TASK;
        for file in &mut files {
            for state in [&mut file.before, &mut file.after] {
                let len = state.text_len();
                if len > budget {
                    *state = std::mem::replace(state, FileState::Absent).demoted();
                } else {
                    budget -= len;
                }
            }
        }
        TaskChanges {
            files,
            undone: false,
        }
    }

    /// The JSON kept in the store.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.files).unwrap_or_else(|_| "[]".to_owned())
    }

    /// The record from [`TaskChanges::to_json`]; one that does not read is empty.
    pub fn from_json(json: &str, undone: bool) -> TaskChanges {
        TaskChanges {
            files: serde_json::from_str(json).unwrap_or_default(),
            undone,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_or_binary_files_are_kept_by_hash() {
        let big = vec![b'a'; MAX_TEXT_PER_FILE + 1];
        assert!(FileState::of_bytes(Some(&big)).is_hashed());
        assert!(FileState::of_bytes(Some(&[0xc3, 0x28])).is_hashed());
        assert_eq!(
            FileState::of_bytes(Some("é\n".as_bytes())).text(),
            Some("é\n")
        );
        assert_eq!(FileState::of_bytes(None), FileState::Absent);
        let text = FileState::of_bytes(Some(b"x"));
        assert!(text.same_as(&FileState::hashed(b"x")));
        assert!(!FileState::Unrecorded.same_as(&FileState::Unrecorded));
    }

    #[test]
    fn a_task_keeps_at_most_its_budget_of_text() {
        let half = "b".repeat(MAX_TEXT_PER_FILE);
        let files = (0..20)
            .map(|i| ChangedFile {
                path: format!("f{i:02}"),
                before: FileState::Absent,
                after: FileState::Text { text: half.clone() },
            })
            .collect();
        let changes = TaskChanges::bounded(files);
        let kept: usize = changes.files.iter().map(|f| f.after.text_len()).sum();
        assert!(kept <= MAX_TEXT_PER_TASK, "{kept}");
        assert!(changes.files.last().unwrap().after.is_hashed());
        let back = TaskChanges::from_json(&changes.to_json(), true);
        assert_eq!(back.files, changes.files);
        assert!(back.undone);
    }
}
