//! The writing tools: `write_file`, `edit_file` and `delete_file`, and their handlers.
//!
//! None changes a file the task has not read: replacing, editing or deleting an existing file
//! needs a `read_file` of it first, and the file must not have changed since
//! ([`Ledger::may_change`]).
//! Each change is recorded in the task's [`Ledger`], which counts the lines changed at the end.
//! Neither turns a JSON or YAML file that parses into one that does not (`formats.rs`).
//!
//! Both write a new file next to the target and rename it over the target. The rename replaces
//! the directory entry, so a hard link to a file outside the workspace is never written
//! through, and a reader never sees half a file. On Linux 5.6+ every step is relative to the
//! target's folder held open beneath the workspace root, so a folder swapped for a symbolic
//! link after the path was checked cannot redirect the write.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::Path;

use serde::Deserialize;

use super::formats;
use super::names::{EDIT_FILE, WRITE_FILE};
use super::spec::BlockingTool;
use super::workspace::{Workspace, io_error, no_follow};
use super::{CallError, Ledger, ToolContext, ToolError, ToolOutput};

/// Largest file `edit_file` rewrites.
const MAX_EDIT_BYTES: u64 = 4 * 1024 * 1024;

pub(super) const WRITE_FILE_EXPECTED: &str = "{\"path\": string, \"content\": string}";
pub(super) const DELETE_FILE_EXPECTED: &str = "{\"path\": string}";
pub(super) const EDIT_FILE_EXPECTED: &str = "{\"path\": string, \"old_text\": string, \"new_text\": string, \"replace_all\": boolean (optional)}";

#[derive(Debug, Deserialize)]
pub(super) struct WriteFileArgs {
    path: String,
    content: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct DeleteFileArgs {
    path: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct EditFileArgs {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

/// `write_file`.
pub(super) struct WriteFile;
/// `edit_file`.
pub(super) struct EditFile;
/// `delete_file`.
pub(super) struct DeleteFile;

/// Both tools are the function of their name run on the call's workspace and ledger, the
/// message it returns the result.
macro_rules! ledger_tool {
    ($tool:ty, $args:ty, $work:ident) => {
        impl BlockingTool for $tool {
            type Args = $args;
            fn work(ctx: &ToolContext, args: $args) -> Result<ToolOutput, CallError> {
                Ok(ToolOutput::text($work(&ctx.workspace, &ctx.ledger, &args)?))
            }
        }
    };
}

ledger_tool!(WriteFile, WriteFileArgs, write_file);
ledger_tool!(EditFile, EditFileArgs, edit_file);
ledger_tool!(DeleteFile, DeleteFileArgs, delete_file);

/// How `target` is shown to the model; refused when it is a folder (neither tool writes one).
fn not_a_folder(ws: &Workspace, target: &Path) -> Result<String, ToolError> {
    let shown = ws.display(target);
    if target.is_dir() {
        return Err(ToolError::Refused(format!("'{shown}' is a folder")));
    }
    Ok(shown)
}

pub(super) fn write_file(
    ws: &Workspace,
    ledger: &Ledger,
    args: &WriteFileArgs,
) -> Result<String, ToolError> {
    let target = ws.writable(&args.path)?;
    let shown = not_a_folder(ws, &target)?;
    let existed = target.exists();
    ledger.may_change(&target, &shown)?;
    if existed
        && let Ok(file) = ws.open_read(&target)
        && same_content(file, args.content.as_bytes())
    {
        return Ok(format!(
            "'{shown}' already holds exactly this content; nothing was changed"
        ));
    }
    let before = || {
        let mut text = String::new();
        let file = ws.open_read(&target).ok()?;
        file.take(MAX_EDIT_BYTES)
            .read_to_string(&mut text)
            .ok()
            .map(|_| text)
    };
    formats::keeps_parsing(
        WRITE_FILE,
        &shown,
        || existed.then(before).flatten(),
        &args.content,
    )?;
    ledger.before_change(&target);
    replace(ws, &target, args.content.as_bytes(), &shown)?;
    ledger.after_change(&target);
    Ok(format!(
        "{} '{shown}' ({} bytes)",
        if existed { "replaced" } else { "created" },
        args.content.len()
    ))
}

/// Deletes a file the task has read (a folder, a symbolic link, a file of `.git` or of the
/// server's own, or one changed since it was read, is refused). The ledger keeps its content,
/// so the task's result counts it as deleted.
pub(super) fn delete_file(
    ws: &Workspace,
    ledger: &Ledger,
    args: &DeleteFileArgs,
) -> Result<String, ToolError> {
    let given = ws.root().join(args.path.trim_start_matches("./"));
    if given
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(ToolError::Refused(format!(
            "'{}' is a symbolic link; delete_file deletes files only",
            args.path
        )));
    }
    let target = ws.existing(&args.path)?;
    let target = ws.writable(&ws.display(&target)).map(|_| target)?;
    let shown = not_a_folder(ws, &target)?;
    ledger.may_change(&target, &shown)?;
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(ToolError::Refused(format!("'{shown}' has no folder")));
    };
    ledger.before_change(&target);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(held) = ws.hold_dir(dir) {
        rustix::fs::unlinkat(&held?, name, rustix::fs::AtFlags::empty())
            .map_err(|e| io_error(&shown, &e.into()))?;
        ledger.after_change(&target);
        return Ok(format!("deleted '{shown}'"));
    }
    let _ = (dir, name);
    std::fs::remove_file(&target).map_err(|e| io_error(&shown, &e))?;
    ledger.after_change(&target);
    Ok(format!("deleted '{shown}'"))
}

pub(super) fn edit_file(
    ws: &Workspace,
    ledger: &Ledger,
    args: &EditFileArgs,
) -> Result<String, ToolError> {
    let target = ws.existing(&args.path)?;
    ws.refuse_read_only(&target)?;
    let shown = not_a_folder(ws, &target)?;
    if args.old_text.is_empty() {
        return Err(ToolError::Refused(
            "old_text must not be empty; use write_file to write a whole file".into(),
        ));
    }
    if args.old_text == args.new_text {
        return Err(ToolError::Refused(
            "old_text and new_text are the same, so nothing would change; give the corrected \
             text as new_text"
                .into(),
        ));
    }
    // Opened first: a FIFO, device or socket is refused for what it is.
    let file = ws.open_read(&target)?;
    ledger.may_change(&target, &shown)?;
    let mut bytes = Vec::new();
    file.take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(&shown, &e))?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(ToolError::Refused(format!(
            "'{shown}' is larger than {MAX_EDIT_BYTES} bytes; edit_file does not rewrite it"
        )));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(ToolError::Refused(format!("'{shown}' is not UTF-8 text")));
    };
    let count = text.matches(&args.old_text).count();
    if count == 0 && already_made(&text, &args.new_text) {
        // The same edit again (a small model repeats its own): its result is there.
        return Ok(format!(
            "old_text is not in '{shown}' and new_text already is, so this edit looks made \
             already; nothing was changed (if it was not made, read the file and copy old_text \
             exactly)"
        ));
    }
    if count == 0 {
        return Err(ToolError::Refused(format!(
            "old_text was not found in '{shown}'; read the file again and copy the text exactly, \
             whitespace included"
        )));
    }
    if count > 1 && !args.replace_all {
        return Err(ToolError::Refused(format!(
            "old_text occurs {count} times in '{shown}'; include more surrounding text to make it \
             unique, or set replace_all"
        )));
    }
    let edited = if args.new_text.is_empty() {
        delete(&text, &args.old_text, args.replace_all)
    } else if args.replace_all {
        text.replace(&args.old_text, &args.new_text)
    } else {
        text.replacen(&args.old_text, &args.new_text, 1)
    };
    formats::keeps_parsing(EDIT_FILE, &shown, || Some(text.clone()), &edited)?;
    ledger.before_change(&target);
    replace(ws, &target, edited.as_bytes(), &shown)?;
    ledger.after_change(&target);
    Ok(format!(
        "replaced {} occurrence{} in '{shown}'",
        if args.replace_all { count } else { 1 },
        if args.replace_all && count != 1 {
            "s"
        } else {
            ""
        }
    ))
}

/// Whether `text` already holds `new` — an edit's result — where that says something: `new`
/// has at least four characters besides white space, so a stray `1` or `}` does not count.
fn already_made(text: &str, new: &str) -> bool {
    new.chars().filter(|c| !c.is_whitespace()).count() >= 4 && text.contains(new)
}

/// `text` without `old` (its first occurrence, or every one). An occurrence that is a whole
/// line or lines without their line end (`DEBUG=true` for "remove the line DEBUG=true") takes
/// its line end with it, so the line is removed rather than left blank; any other occurrence
/// is cut exactly.
fn delete(text: &str, old: &str, all: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut at_line_start = true;
    while let Some(found) = rest.find(old) {
        let (before, after) = rest.split_at(found);
        let after = &after[old.len()..];
        let starts_line = if before.is_empty() {
            at_line_start
        } else {
            before.ends_with('\n')
        };
        out.push_str(before);
        rest = match after.strip_prefix('\n') {
            Some(next) if starts_line && !old.ends_with('\n') => next,
            _ => after,
        };
        at_line_start = out.is_empty() || out.ends_with('\n');
        if !all {
            break;
        }
    }
    out.push_str(rest);
    out
}

/// Whether `file` holds exactly `content` (read no further than it could).
fn same_content(file: std::fs::File, content: &[u8]) -> bool {
    let mut bytes = Vec::new();
    file.take(content.len() as u64 + 1)
        .read_to_end(&mut bytes)
        .is_ok_and(|_| bytes == content)
}

/// The mode bits a rewritten file keeps from the old one: permissions and the sticky bit, not
/// setuid/setgid (the model must not be able to make a privileged program of its own).
const KEPT_MODE_BITS: u32 = 0o1777;

fn without_set_id(permissions: std::fs::Permissions) -> std::fs::Permissions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::Permissions::from_mode(permissions.mode() & KEPT_MODE_BITS)
    }
    #[cfg(not(unix))]
    permissions
}

/// Writes `content` to a fresh file beside `target` (creating missing folders), keeps the old
/// file's permissions (setuid and setgid cleared), and renames it over `target`. Where the kernel allows, every step is
/// made relative to the target's folder held open beneath the workspace root
/// ([`Workspace::hold_dir`]), so a folder swapped on the way after the path was checked cannot
/// redirect the write; elsewhere by path.
fn replace(ws: &Workspace, target: &Path, content: &[u8], shown: &str) -> Result<(), ToolError> {
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(ToolError::Refused(format!("'{shown}' has no folder")));
    };
    let temp = format!(".agent-mcp-{}.tmp", uuid::Uuid::new_v4().simple());
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(held) = ws.hold_dir(dir) {
        return replace_beneath(&held?, name, &temp, content)
            .map_err(|e| io_error(shown, &e).into());
    }
    let _ = ws;
    // Every missing folder is a plain name under a resolved folder inside the workspace.
    std::fs::create_dir_all(dir).map_err(|e| io_error(shown, &e))?;
    let temp = dir.join(temp);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    no_follow(&mut options);
    let result = (|| {
        let mut file = options.open(&temp)?;
        file.write_all(content)?;
        if let Ok(meta) = std::fs::symlink_metadata(target)
            && meta.is_file()
        {
            file.set_permissions(without_set_id(meta.permissions()))?;
        }
        file.sync_all()?;
        std::fs::rename(&temp, target)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&temp);
        return Err(io_error(shown, &e).into());
    }
    Ok(())
}

/// [`replace`] relative to the held folder `dir`: `openat(O_CREAT | O_EXCL | O_NOFOLLOW)`,
/// `fstatat` of the old file for its permissions, `renameat`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn replace_beneath(
    dir: &std::os::fd::OwnedFd,
    name: &std::ffi::OsStr,
    temp: &str,
    content: &[u8],
) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )?;
    let mut file = std::fs::File::from(fd);
    let result = (|| {
        file.write_all(content)?;
        if let Ok(old) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            && FileType::from_raw_mode(old.st_mode) == FileType::RegularFile
        {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(old.st_mode & KEPT_MODE_BITS))?;
        }
        file.sync_all()?;
        rustix::fs::renameat(dir, temp, dir, name)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "x = 1;\ny = 1;\n").unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    /// A ledger that has read every file of the workspace as it is now.
    fn read_everything(ws: &Workspace) -> Ledger {
        let ledger = Ledger::default();
        let mut folders = vec![ws.root().to_path_buf()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).unwrap().flatten() {
                if entry.path().is_dir() {
                    folders.push(entry.path());
                } else {
                    ledger.saw(&entry.path());
                }
            }
        }
        ledger
    }

    /// `content` written to `path` once every file was read: what write_file says.
    fn write_after_reading(ws: &Workspace, path: &str, content: &str) -> String {
        let args = WriteFileArgs {
            path: path.into(),
            content: content.into(),
        };
        write_file(ws, &read_everything(ws), &args).unwrap()
    }

    fn delete_path(ws: &Workspace, ledger: &Ledger, path: &str) -> Result<String, ToolError> {
        delete_file(ws, ledger, &DeleteFileArgs { path: path.into() })
    }

    #[test]
    fn delete_file_deletes_a_file_read_and_the_ledger_counts_it_deleted() {
        let (dir, ws) = ws();
        let ledger = read_everything(&ws);
        assert_eq!(
            delete_path(&ws, &ledger, "a.txt").unwrap(),
            "deleted 'a.txt'"
        );
        assert!(!dir.path().join("a.txt").exists());
        let changes = ledger.changes(ws.root());
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].to_string(), "a.txt (deleted, -2)");
    }

    #[test]
    fn delete_file_refuses_what_it_must_not_delete_and_keeps_it() {
        let (dir, ws) = ws();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "x").unwrap();
        std::fs::write(dir.path().join("b.txt"), "b").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("a.txt", dir.path().join("link.txt")).unwrap();
        let ws = ws.read_only(super::super::workspace::ReadOnlyPaths::new([
            ".git".to_owned()
        ]));
        let ledger = read_everything(&ws);
        // Not read by this task: no blind delete.
        std::fs::write(dir.path().join("new.txt"), "n").unwrap();
        for (path, says) in [
            ("new.txt", "read_file"),
            ("sub", "is a folder"),
            (".git/config", ".git"),
            ("../outside.txt", ""),
            ("missing.txt", ""),
            #[cfg(unix)]
            ("link.txt", "symbolic link"),
        ] {
            let refused = delete_path(&ws, &ledger, path).expect_err(path).to_string();
            assert!(refused.contains(says), "{path}: {refused}");
        }
        for kept in ["new.txt", ".git/config", "a.txt", "b.txt"] {
            assert!(dir.path().join(kept).exists(), "{kept}");
        }
        // Changed since it was read: refused too.
        std::fs::write(dir.path().join("b.txt"), "changed since").unwrap();
        assert!(delete_path(&ws, &ledger, "b.txt").is_err());
        assert!(dir.path().join("b.txt").exists());
        assert!(ledger.changes(ws.root()).is_empty());
    }

    /// The permission bits of `path`, setuid and setgid included.
    #[cfg(unix)]
    fn mode(path: &std::path::Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    /// Sets the permission bits of `path` to `mode`.
    #[cfg(unix)]
    fn set_mode(path: &std::path::Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A file `name` of the workspace in `dir`, holding `text`, with the permission bits
    /// `mode`.
    #[cfg(unix)]
    fn file_with_mode(
        dir: &tempfile::TempDir,
        name: &str,
        text: &str,
        mode: u32,
    ) -> std::path::PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        set_mode(&path, mode);
        path
    }

    #[test]
    fn an_existing_file_is_changed_only_after_it_was_read() {
        let (dir, ws) = ws();
        let ledger = Ledger::default();
        let write = WriteFileArgs {
            path: "a.txt".into(),
            content: "gone".into(),
        };
        let refused = write_file(&ws, &ledger, &write).unwrap_err().to_string();
        assert_eq!(
            refused,
            "'a.txt' exists and this task has not read it; call read_file on it first \
             (write_file replaces the whole file, so what else it holds would be lost)"
        );
        let edit = EditFileArgs {
            path: "a.txt".into(),
            old_text: "x = 1".into(),
            new_text: "x = 2".into(),
            replace_all: false,
        };
        assert!(
            edit_file(&ws, &ledger, &edit)
                .unwrap_err()
                .to_string()
                .contains("has not read it")
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "x = 1;\ny = 1;\n"
        );
        // Read, it may be changed, and again after its own change.
        ledger.saw(&ws.existing("a.txt").unwrap());
        edit_file(&ws, &ledger, &edit).unwrap();
        write_file(&ws, &ledger, &write).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "gone"
        );
        // Changed by someone else since: read it again first.
        std::fs::write(dir.path().join("a.txt"), "someone else's longer text").unwrap();
        let stale = write_file(&ws, &ledger, &write).unwrap_err().to_string();
        assert!(stale.contains("changed since this task read it"), "{stale}");
        let shown: Vec<String> = ledger
            .changes(ws.root())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, ["a.txt (+1 -2)"]);
    }

    fn edit(ws: &Workspace, old: &str, new: &str, all: bool) -> Result<String, String> {
        let args = EditFileArgs {
            path: "a.txt".into(),
            old_text: old.into(),
            new_text: new.into(),
            replace_all: all,
        };
        edit_file(ws, &read_everything(ws), &args).map_err(|e| e.to_string())
    }

    #[test]
    fn writes_new_and_existing_files() {
        let (dir, ws) = ws();
        assert_eq!(
            write_after_reading(&ws, "deep/new/b.txt", "hi"),
            "created 'deep/new/b.txt' (2 bytes)"
        );
        assert_eq!(
            write_after_reading(&ws, "deep/new/b.txt", "bye"),
            "replaced 'deep/new/b.txt' (3 bytes)"
        );
        let again = WriteFileArgs {
            path: "deep/new/b.txt".into(),
            content: "bye".into(),
        };
        assert_eq!(
            std::fs::read_to_string(dir.path().join("deep/new/b.txt")).unwrap(),
            "bye"
        );
        // The same content again changes nothing, and says so.
        let ledger = read_everything(&ws);
        assert_eq!(
            write_file(&ws, &ledger, &again).unwrap(),
            "'deep/new/b.txt' already holds exactly this content; nothing was changed"
        );
        assert!(!ledger.changed_any());
        // No temporary file is left behind.
        assert_eq!(
            std::fs::read_dir(dir.path().join("deep/new"))
                .unwrap()
                .count(),
            1
        );
    }

    #[test]
    fn edits_exact_text_once_or_everywhere() {
        let (dir, ws) = ws();
        for (old, new, error) in [
            ("= 1", "= 2", "occurs 2 times"),
            ("z", "w", "not found"),
            ("", "w", "must not be empty"),
            ("x = 1", "x = 1", "nothing would change"),
        ] {
            let err = edit(&ws, old, new, false).unwrap_err();
            assert!(err.contains(error), "{old:?} by {new:?}: {err}");
        }
        assert_eq!(
            edit(&ws, "x = 1", "x = 2", false).unwrap(),
            "replaced 1 occurrence in 'a.txt'"
        );
        assert_eq!(
            edit(&ws, "= ", "== ", true).unwrap(),
            "replaced 2 occurrences in 'a.txt'"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "x == 2;\ny == 1;\n"
        );
    }

    #[test]
    fn the_same_edit_again_is_no_failure_and_changes_nothing() {
        let (dir, ws) = ws();
        std::fs::write(
            dir.path().join("calc.py"),
            "def add(a, b):\n    return a - b\n",
        )
        .unwrap();
        let ledger = read_everything(&ws);
        let args = |old: &str, new: &str| EditFileArgs {
            path: "calc.py".into(),
            old_text: old.into(),
            new_text: new.into(),
            replace_all: false,
        };
        let fix = args("return a - b", "return a + b");
        assert!(edit_file(&ws, &ledger, &fix).is_ok());
        let again = edit_file(&ws, &ledger, &fix).expect("the same edit again");
        assert!(
            again.contains("looks made already; nothing was changed"),
            "{again}"
        );
        // A short new_text says nothing, and a wrong old_text is still an error.
        assert!(edit_file(&ws, &ledger, &args("x = 9", "b")).is_err());
        assert!(edit_file(&ws, &ledger, &args("return a * b", "return a / b")).is_err());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("calc.py")).unwrap(),
            "def add(a, b):\n    return a + b\n"
        );
    }

    #[test]
    fn deleting_a_whole_line_removes_it_and_anything_else_is_cut_exactly() {
        let text = "HOST=0.0.0.0\nDEBUG=true\nPORT=80\nDEBUG=true";
        for (old, all, expected) in [
            // A whole line, given without its line end: the line goes.
            ("DEBUG=true", false, "HOST=0.0.0.0\nPORT=80\nDEBUG=true"),
            ("DEBUG=true", true, "HOST=0.0.0.0\nPORT=80\n"),
            ("HOST=0.0.0.0", false, "DEBUG=true\nPORT=80\nDEBUG=true"),
            // With its line end, or two whole lines: exactly that.
            ("DEBUG=true\n", false, "HOST=0.0.0.0\nPORT=80\nDEBUG=true"),
            ("DEBUG=true\nPORT=80", false, "HOST=0.0.0.0\nDEBUG=true"),
            // Part of a line: cut exactly, the line stays.
            ("=true", false, "HOST=0.0.0.0\nDEBUG\nPORT=80\nDEBUG=true"),
            ("PORT", false, "HOST=0.0.0.0\nDEBUG=true\n=80\nDEBUG=true"),
        ] {
            assert_eq!(
                delete(text, old, all),
                expected,
                "deleting {old:?} (all: {all})"
            );
        }
        // Non-ASCII text around the cut.
        assert_eq!(
            delete("名前=太郎\n古い行\n終わり\n", "古い行", false),
            "名前=太郎\n終わり\n"
        );
    }

    #[cfg(unix)]
    #[test]
    fn writing_a_hard_link_leaves_the_other_link_alone() {
        let (dir, ws) = ws();
        let outside = tempfile::tempdir().unwrap();
        let shared = outside.path().join("shared.txt");
        std::fs::write(&shared, "outside").unwrap();
        std::fs::hard_link(&shared, dir.path().join("link.txt")).unwrap();
        write_after_reading(&ws, "link.txt", "inside");
        assert_eq!(std::fs::read_to_string(&shared).unwrap(), "outside");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("link.txt")).unwrap(),
            "inside"
        );
    }

    /// The check-then-write race: the folder is swapped for a link out after the path was
    /// resolved. The write is refused and nothing lands outside.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_folder_swapped_for_a_link_after_the_check_is_not_written_through() {
        let (dir, ws) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let target = ws.writable("sub/new.txt").unwrap();
        std::fs::rename(dir.path().join("sub"), dir.path().join("sub-old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).unwrap();
        let err = replace(&ws, &target, b"data", "sub/new.txt")
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // A missing folder on the way is created beneath the root, as before.
        let deeper = ws.writable("sub-old/a/b/c.txt").unwrap();
        replace(&ws, &deeper, b"ok", "sub-old/a/b/c.txt").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sub-old/a/b/c.txt")).unwrap(),
            "ok"
        );
    }

    /// A rewrite keeps the permissions but never setuid/setgid.
    #[cfg(unix)]
    #[test]
    fn permissions_survive_a_rewrite_but_setuid_and_setgid_are_cleared() {
        let (dir, ws) = ws();
        // (file, its text, its mode, the text written, the mode after)
        for (name, text, before, rewritten, after) in [
            ("run.sh", "echo 1", 0o755, "echo 2", 0o755),
            ("tool", "#!/bin/sh\n", 0o6755, "#!/bin/sh\nid\n", 0o755),
        ] {
            let file = file_with_mode(&dir, name, text, before);
            write_after_reading(&ws, name, rewritten);
            assert_eq!(mode(&file), after, "{name}");
        }
        // An edit clears them too.
        let tool = dir.path().join("tool");
        set_mode(&tool, 0o4755);
        let edit = EditFileArgs {
            path: "tool".into(),
            old_text: "id".into(),
            new_text: "whoami".into(),
            replace_all: false,
        };
        edit_file(&ws, &read_everything(&ws), &edit).unwrap();
        assert_eq!(mode(&tool), 0o755);
    }
}
