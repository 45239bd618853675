//! What one task has seen of the workspace and what it changed: the judge of its writes and of
//! its claim to have done something.
//!
//! - **No blind overwrite.** `write_file` over an existing file, and `edit_file`, need the task
//!   to have read that file (any part of it) with `read_file`, or to have written it itself,
//!   and the file must not have changed since (a command, or someone else, wrote it): the rule
//!   Claude Code's file tools keep. Otherwise the call is refused, saying to read it first.
//! - **What changed.** Before a tool first changes a file, its content is kept; at the end of
//!   the task [`Ledger::changes`] compares it with the file as it is then, in lines added and
//!   removed. A [`Snapshot`] of the workspace taken when the task started also finds the files
//!   that commands created, changed or deleted.
//!
//! ```
//! use agent_mcp::agent::tools::Ledger;
//! let ledger = Ledger::default();
//! assert!(ledger.changes(std::path::Path::new("/nowhere")).is_empty());
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use super::ToolError;
use crate::store::{ChangedFile, FileState};

/// Largest file whose content is kept to count its changed lines.
const MAX_KEPT_BYTES: u64 = 4 * 1024 * 1024;

/// A file's size and modification time: enough to tell it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// What the file was before the task first changed it.
#[derive(Clone, Debug)]
enum Original {
    Absent,
    Text(String),
    /// Too large, or not UTF-8: changed, but its lines are not counted; kept by hash.
    Opaque(FileState),
}

#[derive(Debug, Default)]
struct State {
    /// Files the task has read or written, by resolved path, as they were then.
    known: HashMap<PathBuf, Stamp>,
    /// Files the task's tools changed, by resolved path: what each was before.
    originals: BTreeMap<PathBuf, Original>,
    /// Bumped by every change.
    generation: u64,
}

/// One task's record of its reads and changes; shared by its steps.
#[derive(Debug, Default)]
pub struct Ledger {
    state: Mutex<State>,
}

/// How one file changed during the task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to the workspace root.
    pub path: String,
    pub how: ChangeKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Created {
        added: usize,
    },
    Modified {
        added: usize,
        removed: usize,
    },
    Deleted {
        removed: usize,
    },
    /// Changed by a command, or too large to count: no line counts.
    Touched,
}

impl std::fmt::Display for FileChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.how {
            ChangeKind::Created { added } => write!(f, "{} (new, +{added})", self.path),
            ChangeKind::Modified { added, removed } => {
                write!(f, "{} (+{added} -{removed})", self.path)
            }
            ChangeKind::Deleted { removed } => write!(f, "{} (deleted, -{removed})", self.path),
            ChangeKind::Touched => write!(f, "{} (changed)", self.path),
        }
    }
}

impl Ledger {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Each critical section is one insert or lookup: a poisoned lock holds consistent data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The task has read `path` (resolved): it may replace or edit it until it changes.
    pub fn saw(&self, path: &Path) {
        if let Some(stamp) = Stamp::of(path) {
            self.state().known.insert(path.to_path_buf(), stamp);
        }
    }

    /// Whether the task may replace or edit the existing file `path` (resolved); `shown` is how
    /// the error names it.
    pub fn may_change(&self, path: &Path, shown: &str) -> Result<(), ToolError> {
        let Some(now) = Stamp::of(path) else {
            // Not there: a new file needs no read.
            return Ok(());
        };
        match self.state().known.get(path) {
            Some(seen) if *seen == now => Ok(()),
            Some(_) => Err(ToolError::ChangedSinceRead {
                path: shown.to_owned(),
            }),
            None => Err(ToolError::NotRead {
                path: shown.to_owned(),
            }),
        }
    }

    /// Call before a tool changes `path` (resolved): keeps what it was, once.
    pub fn before_change(&self, path: &Path) {
        let mut state = self.state();
        if state.originals.contains_key(path) {
            return;
        }
        let opaque = || Original::Opaque(FileState::read(path).unwrap_or(FileState::Unrecorded));
        let original = match std::fs::symlink_metadata(path) {
            Err(_) => Original::Absent,
            Ok(meta) if meta.len() > MAX_KEPT_BYTES => opaque(),
            Ok(_) => match std::fs::read(path).map(String::from_utf8) {
                Ok(Ok(text)) => Original::Text(text),
                _ => opaque(),
            },
        };
        state.originals.insert(path.to_path_buf(), original);
    }

    /// Call after a tool changed `path` (resolved): the task knows the file as it is now.
    pub fn after_change(&self, path: &Path) {
        self.saw(path);
        self.state().generation += 1;
    }

    /// How many changes the task's tools made so far: a check that ran at one generation
    /// need not run again until it moves.
    pub fn generation(&self) -> u64 {
        self.state().generation
    }

    /// Whether any tool of the task changed a file.
    pub fn changed_any(&self) -> bool {
        !self.state().originals.is_empty()
    }

    /// Every file the task's tools changed, compared with what it is now (a file written back
    /// to what it was is left out), paths relative to `root`.
    pub fn changes(&self, root: &Path) -> Vec<FileChange> {
        let state = self.state();
        state
            .originals
            .iter()
            .filter_map(|(path, original)| {
                let now = std::fs::read(path).ok();
                let how = compare(original, now.as_deref())?;
                Some(FileChange {
                    path: relative(root, path),
                    how,
                })
            })
            .collect()
    }

    /// Whether the task's tools created `path` (resolved): it did not exist when they first
    /// wrote it.
    pub fn created(&self, path: &Path) -> bool {
        matches!(self.state().originals.get(path), Some(Original::Absent))
    }

    /// The text files the task's tools changed that were there before, each with its text
    /// then (resolved paths).
    pub(crate) fn changed_texts(&self) -> Vec<(PathBuf, String)> {
        self.state()
            .originals
            .iter()
            .filter_map(|(path, original)| match original {
                Original::Text(text) => Some((path.clone(), text.clone())),
                _ => None,
            })
            .collect()
    }

    /// The resolved paths the task's tools changed.
    fn changed_paths(&self) -> Vec<PathBuf> {
        self.state().originals.keys().cloned().collect()
    }

    /// Every file the task changed, before and after, for its record
    /// ([`crate::store::TaskChanges`]): those its tools changed, and with `snapshot` (taken when
    /// it started) those its commands did. A file back as it was is left out.
    pub fn record(&self, ws: &super::Workspace, snapshot: Option<&Snapshot>) -> Vec<ChangedFile> {
        let root = ws.root();
        let originals: Vec<(PathBuf, Original)> = self
            .state()
            .originals
            .iter()
            .map(|(p, o)| (p.clone(), o.clone()))
            .collect();
        let mut files = Vec::new();
        let mut push = |path: &Path, before: FileState| {
            let after = FileState::read(path).unwrap_or(FileState::Unrecorded);
            if !before.same_as(&after) {
                files.push(ChangedFile {
                    path: relative(root, path),
                    before,
                    after,
                });
            }
        };
        for (path, original) in &originals {
            let before = match original {
                Original::Absent => FileState::Absent,
                Original::Text(text) => FileState::of_bytes(Some(text.as_bytes())),
                Original::Opaque(state) => state.clone(),
            };
            push(path, before);
        }
        if let Some(snapshot) = snapshot {
            let found = snapshot
                .found
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            let paths = found.unwrap_or_else(|| snapshot.changed_paths(ws, self));
            for path in paths {
                push(&path, snapshot.before(&path));
            }
        }
        files
    }
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// How a file went from `original` to `now` (`None`: not there); `None` when it is the same.
fn compare(original: &Original, now: Option<&[u8]>) -> Option<ChangeKind> {
    let now_text = now.map(|b| std::str::from_utf8(b).ok());
    match (original, now_text) {
        (Original::Absent, None) => None,
        (Original::Absent, Some(Some(text))) => Some(ChangeKind::Created {
            added: text.lines().count(),
        }),
        (Original::Absent, Some(None)) => Some(ChangeKind::Touched),
        (Original::Text(old), None) => Some(ChangeKind::Deleted {
            removed: old.lines().count(),
        }),
        (Original::Text(old), Some(Some(new))) if old == new => None,
        (Original::Text(old), Some(Some(new))) => {
            let (added, removed) = line_counts(old, new);
            Some(ChangeKind::Modified { added, removed })
        }
        (Original::Text(_) | Original::Opaque(_), _) => Some(ChangeKind::Touched),
    }
}

/// Lines added and removed from `old` to `new`, as a line diff counts them.
fn line_counts(old: &str, new: &str) -> (usize, usize) {
    let diff = similar::TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

/// Folders a snapshot does not look into: version control, build output, caches.
const SNAPSHOT_SKIPS: [&str; 9] = [
    ".git",
    "target",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".venv",
    "venv",
    ".tox",
];
/// Most files a snapshot records; past it, files changed by commands go unnoticed.
const SNAPSHOT_MAX_FILES: usize = 20_000;
/// Largest file whose content a snapshot keeps, and most content it keeps in all: what a
/// command changed can be shown and undone only when its content was kept.
const SNAPSHOT_KEEP_FILE: u64 = crate::store::MAX_TEXT_PER_FILE as u64;
const SNAPSHOT_KEEP_TOTAL: usize = 32 * 1024 * 1024;

/// The workspace's files and their stamps when a task started: what commands changed is the
/// difference with the files at its end.
#[derive(Debug, Default)]
pub struct Snapshot {
    files: BTreeMap<PathBuf, Stamp>,
    /// The content of the small files, within [`SNAPSHOT_KEEP_TOTAL`].
    kept: HashMap<PathBuf, Vec<u8>>,
    /// What [`Snapshot::changed_by_others`] found when the work ended, for the task's record:
    /// the same walk is not made twice between the last step and the outcome (the checks run
    /// after it are the server's, not the task's).
    found: Mutex<Option<Vec<PathBuf>>>,
}

impl Snapshot {
    /// Records the regular files of the workspace (not following links, skipping caches,
    /// build output and the server's own files), at most `SNAPSHOT_MAX_FILES`.
    pub fn take(ws: &super::Workspace) -> Snapshot {
        let mut snapshot = Snapshot::stamps(ws);
        let mut total = 0;
        for (path, stamp) in &snapshot.files {
            if stamp.len > SNAPSHOT_KEEP_FILE || total + stamp.len as usize > SNAPSHOT_KEEP_TOTAL {
                continue;
            }
            if let Ok(bytes) = std::fs::read(path) {
                total += bytes.len();
                snapshot.kept.insert(path.clone(), bytes);
            }
        }
        snapshot
    }

    /// [`Snapshot::take`] without the content.
    fn stamps(ws: &super::Workspace) -> Snapshot {
        let mut files = BTreeMap::new();
        ws.walk_files(&SNAPSHOT_SKIPS, |path| {
            if path.extension().is_some_and(|e| e == "pyc") {
                return ControlFlow::Continue(());
            }
            let Some(stamp) = Stamp::of(&path) else {
                return ControlFlow::Continue(());
            };
            if files.len() == SNAPSHOT_MAX_FILES {
                return ControlFlow::Break(());
            }
            files.insert(path, stamp);
            ControlFlow::Continue(())
        });
        Snapshot {
            files,
            kept: HashMap::new(),
            found: Mutex::default(),
        }
    }

    /// What `path` (resolved) was when the snapshot was taken.
    fn before(&self, path: &Path) -> FileState {
        match self.kept.get(path) {
            Some(bytes) => FileState::of_bytes(Some(bytes)),
            None if self.files.contains_key(path) => FileState::Unrecorded,
            None => FileState::Absent,
        }
    }

    /// The resolved paths created, changed or deleted since this snapshot that `ledger`'s
    /// tools did not change.
    fn changed_paths(&self, ws: &super::Workspace, ledger: &Ledger) -> Vec<PathBuf> {
        let now = Snapshot::stamps(ws);
        let tools: Vec<PathBuf> = ledger.changed_paths();
        let mut changed = Vec::new();
        for (path, stamp) in &now.files {
            if tools.contains(path) {
                continue;
            }
            match self.files.get(path) {
                Some(before) if before == stamp => {}
                _ => changed.push(path.clone()),
            }
        }
        for path in self.files.keys() {
            if !now.files.contains_key(path) && !tools.contains(path) {
                changed.push(path.clone());
            }
        }
        changed
    }

    /// The files created, changed or deleted since this snapshot that `ledger`'s tools did not
    /// change (those have line counts of their own), relative to the workspace root.
    pub fn changed_by_others(&self, ws: &super::Workspace, ledger: &Ledger) -> Vec<FileChange> {
        let root = ws.root();
        let paths = self.changed_paths(ws, ledger);
        *self.found.lock().unwrap_or_else(|e| e.into_inner()) = Some(paths.clone());
        paths
            .into_iter()
            .map(|path| FileChange {
                path: relative(root, &path),
                how: ChangeKind::Touched,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_must_be_read_before_it_is_replaced_and_not_change_after() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "one\n").unwrap();
        let ledger = Ledger::default();
        let refused = ledger.may_change(&file, "a.txt").unwrap_err().to_string();
        assert!(refused.contains("has not read it"), "{refused}");
        ledger.saw(&file);
        assert!(ledger.may_change(&file, "a.txt").is_ok());
        std::fs::write(&file, "one\ntwo and more\n").unwrap();
        let changed = ledger.may_change(&file, "a.txt").unwrap_err().to_string();
        assert!(changed.contains("changed since"), "{changed}");
        // A new file needs no read.
        assert!(
            ledger
                .may_change(&dir.path().join("b.txt"), "b.txt")
                .is_ok()
        );
    }

    #[test]
    fn changes_are_counted_in_lines_against_the_first_original() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a.txt"),
            dir.path().join("b.txt"),
            dir.path().join("c.txt"),
        );
        std::fs::write(&a, "x = 1\ny = 2\n").unwrap();
        std::fs::write(&c, "same\n").unwrap();
        let ledger = Ledger::default();
        for path in [&a, &b, &c] {
            ledger.before_change(path);
        }
        std::fs::write(&a, "x = 1\ny = 3\nz = 4\n").unwrap();
        ledger.before_change(&a);
        std::fs::write(&b, "new\nfile\n").unwrap();
        std::fs::write(&c, "same\n").unwrap();
        let shown: Vec<String> = ledger
            .changes(dir.path())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, ["a.txt (+2 -1)", "b.txt (new, +2)"]);
        assert!(ledger.changed_any());
    }

    #[test]
    fn a_snapshot_finds_what_others_changed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "k").unwrap();
        std::fs::write(dir.path().join("gone.txt"), "g").unwrap();
        std::fs::create_dir(dir.path().join("__pycache__")).unwrap();
        std::fs::write(dir.path().join("server.db"), "s").unwrap();
        let ws = super::super::Workspace::open(dir.path()).unwrap().protect(
            super::super::ProtectedFiles::new([dir.path().join("server.db")]),
        );
        let before = Snapshot::take(&ws);
        std::fs::write(dir.path().join("server.db"), "changed by the server").unwrap();
        std::fs::remove_file(dir.path().join("gone.txt")).unwrap();
        std::fs::write(dir.path().join("made.txt"), "m").unwrap();
        std::fs::write(dir.path().join("__pycache__/x.pyc"), "c").unwrap();
        let mut shown: Vec<String> = before
            .changed_by_others(&ws, &Ledger::default())
            .iter()
            .map(ToString::to_string)
            .collect();
        shown.sort();
        assert_eq!(shown, ["gone.txt (changed)", "made.txt (changed)"]);
    }

    #[test]
    fn the_record_has_what_tools_and_commands_changed_before_and_after() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tool.txt"), "old\n").unwrap();
        std::fs::write(dir.path().join("cmd.txt"), "before\n").unwrap();
        std::fs::write(dir.path().join("gone.txt"), "bye\n").unwrap();
        std::fs::write(dir.path().join("same.txt"), "same\n").unwrap();
        let ws = super::super::Workspace::open(dir.path()).unwrap();
        let snapshot = Snapshot::take(&ws);
        let ledger = Ledger::default();
        let tool = ws.existing("tool.txt").unwrap();
        ledger.before_change(&tool);
        std::fs::write(&tool, "new\n").unwrap();
        ledger.after_change(&tool);
        // What a command did: changed, made and deleted files the tools never touched.
        std::fs::write(dir.path().join("cmd.txt"), "after, longer\n").unwrap();
        std::fs::write(dir.path().join("made.bin"), [0xff, 0xfe]).unwrap();
        std::fs::remove_file(dir.path().join("gone.txt")).unwrap();
        let mut record = ledger.record(&ws, Some(&snapshot));
        record.sort_by(|a, b| a.path.cmp(&b.path));
        let text = |s: &str| FileState::Text { text: s.into() };
        let got: Vec<(&str, &FileState, &FileState)> = record
            .iter()
            .map(|f| (f.path.as_str(), &f.before, &f.after))
            .collect();
        assert_eq!(
            got,
            [
                ("cmd.txt", &text("before\n"), &text("after, longer\n")),
                ("gone.txt", &text("bye\n"), &FileState::Absent),
                (
                    "made.bin",
                    &FileState::Absent,
                    &FileState::hashed(&[0xff, 0xfe])
                ),
                ("tool.txt", &text("old\n"), &text("new\n")),
            ]
        );
    }
}
