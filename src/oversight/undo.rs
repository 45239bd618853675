//! Undo: every file a task changed put back as it was before the task, or nothing at all.
//!
//! The files must still be as the task left them. A file someone (or a later task) changed
//! since is never overwritten: undo refuses, naming the files, and changes nothing. A file the
//! record keeps by hash only (too large, or not text) cannot be put back: undo refuses
//! naming it, before touching any file. A second undo of the same task changes nothing and
//! says so.

use std::path::PathBuf;

use crate::agent::tools::Workspace;
use crate::store::{FileState, TaskChanges};

/// What an undo did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undone {
    /// These files (workspace paths) are back as they were before the task.
    Restored(Vec<String>),
    /// The task was undone before; nothing changed now.
    Already,
    /// The task changed no file.
    Nothing,
}

/// Why an undo changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UndoRefusal {
    /// Files changed since the task ended (named): nothing is overwritten.
    #[error(
        "not undone: these files changed since the task ended, and undo never overwrites \
         someone else's edit: {}. Put them back as the task left them, or undo by hand",
        .0.join(", ")
    )]
    ChangedSince(Vec<String>),
    /// Files kept by hash only (named): they cannot be put back.
    #[error(
        "not undone: these files were kept by hash only (too large, or not text), so they \
         cannot be put back: {}",
        .0.join(", ")
    )]
    NotRestorable(Vec<String>),
    /// The task has not ended (its state).
    #[error("not undone: the task is still {0}; cancel it or wait for it to end")]
    Unfinished(String),
    /// A file could not be written back.
    #[error("not undone: {path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

impl Undone {
    /// One line for people.
    pub fn line(&self) -> String {
        match self {
            Undone::Restored(files) => format!("restored: {}", files.join(", ")),
            Undone::Already => "already undone; nothing changed".into(),
            Undone::Nothing => "the task changed no file; nothing to undo".into(),
        }
    }
}

/// Puts `changes`' files back in `ws` (blocking: call it off the async executor). Checks
/// every file before writing any.
pub(crate) fn restore(ws: &Workspace, changes: &TaskChanges) -> Result<Vec<String>, UndoRefusal> {
    let mut targets: Vec<(PathBuf, &FileState)> = Vec::new();
    let mut changed = Vec::new();
    let mut opaque = Vec::new();
    for file in &changes.files {
        let target = ws.writable(&file.path).map_err(|e| UndoRefusal::Io {
            path: file.path.clone(),
            reason: e.to_string(),
        })?;
        let now = FileState::read(&target).map_err(|e| UndoRefusal::Io {
            path: file.path.clone(),
            reason: e.to_string(),
        })?;
        if !file.after.same_as(&now) {
            changed.push(file.path.clone());
        } else if !file.before.restorable() {
            opaque.push(file.path.clone());
        }
        targets.push((target, &file.before));
    }
    if !changed.is_empty() {
        return Err(UndoRefusal::ChangedSince(changed));
    }
    if !opaque.is_empty() {
        return Err(UndoRefusal::NotRestorable(opaque));
    }
    for ((target, before), file) in targets.iter().zip(&changes.files) {
        let io = |e: std::io::Error| UndoRefusal::Io {
            path: file.path.clone(),
            reason: e.to_string(),
        };
        match before {
            FileState::Absent => match std::fs::remove_file(target) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
                _ => {}
            },
            FileState::Text { text } => {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(io)?;
                }
                write_replacing(target, text.as_bytes()).map_err(io)?;
            }
            FileState::Hashed { .. } | FileState::Unrecorded => {}
        }
    }
    Ok(changes.files.iter().map(|f| f.path.clone()).collect())
}

/// Writes `bytes` to a temporary file beside `target` and renames it over `target`, so a
/// reader sees the old content or the new, never half of it.
fn write_replacing(target: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = target.parent().unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::metadata(target) {
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ChangedFile;

    fn changes(files: &[(&str, Option<&str>, Option<&str>)]) -> TaskChanges {
        TaskChanges::bounded(
            files
                .iter()
                .map(|(path, before, after)| ChangedFile {
                    path: (*path).into(),
                    before: FileState::of_bytes(before.map(str::as_bytes)),
                    after: FileState::of_bytes(after.map(str::as_bytes)),
                })
                .collect(),
        )
    }

    #[test]
    fn files_go_back_unless_one_changed_since() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.py"), "x = 2\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/new.txt"), "made\n").unwrap();
        let record = changes(&[
            ("a.py", Some("x = 1\n"), Some("x = 2\n")),
            ("sub/new.txt", None, Some("made\n")),
            ("gone.txt", Some("kept\n"), None),
        ]);
        // Someone edits a.py after the task: nothing is written.
        std::fs::write(dir.path().join("a.py"), "x = 3\n").unwrap();
        assert_eq!(
            restore(&ws, &record),
            Err(UndoRefusal::ChangedSince(vec!["a.py".into()]))
        );
        assert!(dir.path().join("sub/new.txt").exists());
        assert!(!dir.path().join("gone.txt").exists());
        // Back as the task left it: undone.
        std::fs::write(dir.path().join("a.py"), "x = 2\n").unwrap();
        assert_eq!(
            restore(&ws, &record).unwrap(),
            ["a.py", "gone.txt", "sub/new.txt"]
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.py")).unwrap(),
            "x = 1\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("gone.txt")).unwrap(),
            "kept\n"
        );
        assert!(!dir.path().join("sub/new.txt").exists());
    }

    #[test]
    fn a_file_kept_by_hash_is_not_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("img.bin"), [1, 2]).unwrap();
        let record = TaskChanges::bounded(vec![ChangedFile {
            path: "img.bin".into(),
            before: FileState::hashed(&[0xff]),
            after: FileState::hashed(&[1, 2]),
        }]);
        assert_eq!(
            restore(&ws, &record),
            Err(UndoRefusal::NotRestorable(vec!["img.bin".into()]))
        );
    }
}
