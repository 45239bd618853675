//! A task's changes as one unified diff, as `git diff` prints it: `a/` before, `b/` after,
//! `/dev/null` for a file that was not there; a file kept by hash only says so in one line.

use similar::TextDiff;

use crate::store::{ChangedFile, FileState, TaskChanges};

/// The unified diff of every file in `changes` (empty when there are none).
pub fn unified(changes: &TaskChanges) -> String {
    changes.files.iter().map(file_diff).collect()
}

/// One file's part of [`unified`].
pub fn file_diff(file: &ChangedFile) -> String {
    let path = &file.path;
    let mut out = format!("diff --git a/{path} b/{path}\n");
    match (&file.before, &file.after) {
        (
            FileState::Absent | FileState::Text { .. },
            FileState::Absent | FileState::Text { .. },
        ) => {
            let before = file.before.text().unwrap_or("");
            let after = file.after.text().unwrap_or("");
            let old = if file.before == FileState::Absent {
                out.push_str("new file\n");
                "/dev/null".to_owned()
            } else {
                format!("a/{path}")
            };
            let new = if file.after == FileState::Absent {
                out.push_str("deleted file\n");
                "/dev/null".to_owned()
            } else {
                format!("b/{path}")
            };
            let diff = TextDiff::from_lines(before, after);
            let mut text = diff.unified_diff();
            out.push_str(&text.context_radius(3).header(&old, &new).to_string());
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        (before, after) => {
            out.push_str(&format!(
                "not shown: {path} ({} → {})\n",
                describe(before),
                describe(after)
            ));
        }
    }
    out
}

/// How a state that has no text to show is named.
fn describe(state: &FileState) -> String {
    match state {
        FileState::Absent => "absent".into(),
        FileState::Text { text } => format!("{} bytes of text", text.len()),
        FileState::Hashed { sha256, len } => {
            format!("{len} bytes, sha256 {}", sha256.get(..12).unwrap_or(sha256))
        }
        FileState::Unrecorded => "not recorded".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, before: Option<&str>, after: Option<&str>) -> ChangedFile {
        ChangedFile {
            path: path.into(),
            before: FileState::of_bytes(before.map(str::as_bytes)),
            after: FileState::of_bytes(after.map(str::as_bytes)),
        }
    }

    #[test]
    fn edits_creations_deletions_and_hashed_files() {
        let changes = TaskChanges::bounded(vec![
            file("calc.py", Some("a = 1\nb = 2\n"), Some("a = 1\nb = 3\n")),
            file("new.txt", None, Some("hello\n")),
            file("old.txt", Some("bye\n"), None),
            ChangedFile {
                path: "logo.png".into(),
                before: FileState::Absent,
                after: FileState::hashed(&[0x89, b'P', b'N', b'G']),
            },
        ]);
        assert_eq!(
            unified(&changes),
            "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n\
             @@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n\
             diff --git a/logo.png b/logo.png\nnot shown: logo.png (absent → 4 bytes, sha256 \
             0f4636c78f65)\n\
             diff --git a/new.txt b/new.txt\nnew file\n--- /dev/null\n+++ b/new.txt\n\
             @@ -0,0 +1 @@\n+hello\n\
             diff --git a/old.txt b/old.txt\ndeleted file\n--- a/old.txt\n+++ /dev/null\n\
             @@ -1 +0,0 @@\n-bye\n"
        );
    }
}
