//! Path confinement: every path a tool touches resolves inside the workspace root.
//!
//! A path from the model is first normalized lexically (an absolute path must lie under the
//! root; `..` may not climb above it), then resolved on disk with `canonicalize`, and the
//! *resolved* path must still be under the canonical root, so a symbolic link that leads out is
//! refused. Everything that escapes gets the same refusal ([`PathError::Outside`]), whether or
//! not something exists out there, so a refusal tells nothing about the outside.
//!
//! The resolved path is then used through file descriptors, never by path again: on Linux
//! 5.6+ files and folders are opened with `openat2(root, relative, RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)` (the resolved path has no links left, so a link met there means a
//! folder was swapped after the check, and the kernel refuses it), and folders are read
//! (`list_dir`, `search_text`) and commands started (`run_command`'s `cwd`) relative to the
//! folder held open.
//!
//! Only regular files are opened for reading, and never in a way that can block: the type is
//! checked with `lstat` first (a FIFO, device or socket is refused without being opened), then
//! the open uses `O_NONBLOCK | O_NOFOLLOW | O_NOCTTY` and `fstat` checks again (a swap in
//! between is caught) before `O_NONBLOCK` is cleared.
//!
//! Hard links cannot be told apart from ordinary files by path. Reads refuse regular files with
//! more than one link (another link may live outside); writes always go to a new file renamed
//! over the old one, so they never change a shared inode.
//!
//! The server's own files ([`ProtectedFiles`]: its configuration, task database, lock and
//! audit log) are refused by identity (device and inode, taken when the server starts) and by
//! path (for files such as SQLite's `-wal` that may not exist yet), even when an operator
//! places them inside the workspace.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// Outside the root: `..` above it, an absolute path elsewhere, or a symbolic link on the
    /// way that leads out. One wording for all, so a refusal reveals nothing about what exists
    /// outside.
    #[error(
        "'{0}' is outside the workspace or leads out of it through a symbolic link; use a path \
         inside the workspace root"
    )]
    Outside(String),
    #[error("'{0}' does not exist")]
    NotFound(String),
    #[error("'{0}' is not a valid path")]
    Invalid(String),
    #[error("'{0}' has several hard links and may be shared with a file outside the workspace")]
    HardLinked(String),
    #[error(
        "'{path}' is a {kind}, not a regular file; the tools only open regular files and folders \
         (use run_command for anything else)"
    )]
    Special { path: String, kind: &'static str },
    #[error(
        "'{0}' is one of the agent server's own files (configuration, task database, lock or audit \
         log); the agent's tools may not read or change it. Work on other files"
    )]
    Protected(String),
    #[error(
        "'{path}' is inside {entry}, which the agent's tools may read but not change \
         (agent.tools.read_only_paths): version-control metadata and hooks run commands for the \
         user. Change other files"
    )]
    ReadOnly { path: String, entry: String },
    #[error(
        "'{0}' holds the tests this request is checked by, and the request asks to change other \
         files, not its tests: leave the tests as they are and change the code so that they pass"
    )]
    TheCheck(String),
    #[error("cannot use workspace '{path}': {reason}")]
    Root { path: String, reason: String },
    #[error("'{path}': {reason}")]
    Io { path: String, reason: String },
}

/// The server's own files, which the workspace tools must not touch even when they lie inside
/// the workspace: each by its absolute path (also if it does not exist yet, like SQLite's
/// `-wal`) and, if it exists when the set is made, by its identity (device and inode), which
/// survives a rename or a new hard link.
///
/// Make it once, when the server starts (before the model can rename anything), and hand it
/// to the tools with [`ToolSettings::protect`](super::ToolSettings::protect).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProtectedFiles(Arc<Vec<ProtectedFile>>);

#[derive(Clone, Debug, PartialEq)]
struct ProtectedFile {
    /// Absolute, with existing folders resolved (and the file itself if it is a link).
    paths: Vec<PathBuf>,
    /// `(st_dev, st_ino)` when the file existed.
    id: Option<(u64, u64)>,
}

impl ProtectedFiles {
    /// Records `paths` (relative ones against the current directory) and the identity of those
    /// that exist now.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> ProtectedFiles {
        ProtectedFiles(Arc::new(
            paths.into_iter().map(ProtectedFile::new).collect(),
        ))
    }

    /// This set and `more`.
    pub fn with(&self, more: impl IntoIterator<Item = PathBuf>) -> ProtectedFiles {
        let mut all: Vec<ProtectedFile> = self.0.as_ref().clone();
        all.extend(more.into_iter().map(ProtectedFile::new));
        ProtectedFiles(Arc::new(all))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every path of every protected file (the command sandbox keeps their folders unreadable).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.0
            .iter()
            .flat_map(|f| f.paths.iter().map(PathBuf::as_path))
    }

    /// Is `path` (absolute, resolved) one of the protected paths?
    pub fn has_path(&self, path: &Path) -> bool {
        self.0.iter().any(|f| f.paths.iter().any(|p| p == path))
    }

    /// Is `(dev, ino)` one of the protected files?
    pub fn has_id(&self, dev: u64, ino: u64) -> bool {
        self.0.iter().any(|f| f.id == Some((dev, ino)))
    }

    /// By path, then by identity if `path` exists (links followed).
    pub fn covers(&self, path: &Path) -> bool {
        if self.is_empty() {
            return false;
        }
        self.has_path(path) || std::fs::metadata(path).is_ok_and(|m| self.has_meta(&m))
    }

    fn has_meta(&self, meta: &std::fs::Metadata) -> bool {
        file_id(meta).is_some_and(|(dev, ino)| self.has_id(dev, ino))
    }
}

impl ProtectedFile {
    fn new(path: PathBuf) -> ProtectedFile {
        let absolute = if path.is_absolute() {
            path
        } else {
            std::env::current_dir()
                .map(|d| d.join(&path))
                .unwrap_or(path)
        };
        let mut paths = vec![absolute.clone()];
        // The folder resolved (a workspace reached through a link sees it there).
        if let (Some(dir), Some(name)) = (absolute.parent(), absolute.file_name())
            && let Ok(dir) = dir.canonicalize()
        {
            paths.push(dir.join(name));
        }
        // The file itself resolved, if it is a link.
        if let Ok(real) = absolute.canonicalize() {
            paths.push(real);
        }
        paths.dedup();
        let id = std::fs::metadata(&absolute).ok().and_then(|m| file_id(&m));
        ProtectedFile { paths, id }
    }
}

/// `(st_dev, st_ino)` of a file, where the platform has them.
fn file_id(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Paths of the workspace the tools may read but never change (`agent.tools.read_only_paths`):
/// an entry without `/` is a name matched at any depth (`.git` covers `sub/.git/config`), an
/// entry with `/` a path from the root; both compared without regard to ASCII case, as a
/// case-insensitive file system (or git on one) would.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadOnlyPaths(Arc<Vec<String>>);

impl ReadOnlyPaths {
    pub fn new(entries: impl IntoIterator<Item = String>) -> ReadOnlyPaths {
        ReadOnlyPaths(Arc::new(
            entries
                .into_iter()
                .map(|e| e.trim_matches('/').to_owned())
                .filter(|e| !e.is_empty())
                .collect(),
        ))
    }

    /// The entry covering `relative` (a path from the workspace root), if one does.
    pub fn covering(&self, relative: &Path) -> Option<&str> {
        let parts: Vec<&std::ffi::OsStr> = relative
            .components()
            .filter_map(|c| match c {
                Component::Normal(part) => Some(part),
                _ => None,
            })
            .collect();
        let same =
            |a: &std::ffi::OsStr, b: &str| a.as_encoded_bytes().eq_ignore_ascii_case(b.as_bytes());
        self.0.iter().map(String::as_str).find(|entry| {
            if entry.contains('/') {
                let wanted: Vec<&str> = entry.split('/').filter(|p| !p.is_empty()).collect();
                parts.len() >= wanted.len() && parts.iter().zip(&wanted).all(|(a, b)| same(a, b))
            } else {
                parts.iter().any(|part| same(part, entry))
            }
        })
    }
}

/// The canonical workspace root, the server files inside it that stay out of reach, and the
/// paths the tools may read but not change.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
    protected: ProtectedFiles,
    read_only: ReadOnlyPaths,
    /// Test files this task's request is checked by (kept when the checks fail before the
    /// work and the model reads the request as asking them to pass, not to change tests), as
    /// workspace paths: readable, never changed.
    checks: Arc<Vec<String>>,
}

/// Folders whose files are not the project's own text (version control, build output,
/// dependencies, caches, virtual environments): passed over when the engine looks at the
/// workspace as a whole ([`Workspace::walk_files`]).
pub(crate) const NOT_THE_PROJECTS: [&str; 10] = [
    ".git",
    ".hg",
    ".svn",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
];

impl Workspace {
    /// Canonicalizes `root`, which must be an existing folder.
    pub fn open(root: &Path) -> Result<Workspace, PathError> {
        let fail = |reason: String| PathError::Root {
            path: root.display().to_string(),
            reason,
        };
        let root = root.canonicalize().map_err(|e| fail(e.to_string()))?;
        if !root.is_dir() {
            return Err(fail("not a folder".into()));
        }
        Ok(Workspace {
            root,
            protected: ProtectedFiles::default(),
            read_only: ReadOnlyPaths::default(),
            checks: Arc::default(),
        })
    }

    /// The same workspace, refusing `files` as well (see [`ProtectedFiles`]).
    pub fn protect(mut self, files: ProtectedFiles) -> Workspace {
        self.protected = files;
        self
    }

    /// The same workspace, with `paths` readable but never written (see [`ReadOnlyPaths`]).
    pub fn read_only(mut self, paths: ReadOnlyPaths) -> Workspace {
        self.read_only = paths;
        self
    }

    /// The same workspace, with these test files (workspace paths) kept as they are: the
    /// checks a request is judged by (see [`Workspace::checks`]).
    pub fn keep_checks(mut self, files: Vec<String>) -> Workspace {
        self.checks = Arc::new(files);
        self
    }

    /// The test files kept as the request's checks (see [`Workspace::keep_checks`]).
    pub fn checks(&self) -> &[String] {
        &self.checks
    }

    /// Refuses a change to `resolved` (absolute, resolved) when it lies in a read-only path
    /// or is one of the request's checks.
    pub fn refuse_read_only(&self, resolved: &Path) -> Result<(), PathError> {
        let Ok(relative) = resolved.strip_prefix(&self.root) else {
            return Ok(());
        };
        if !self.checks.is_empty() {
            let shown = self.display(resolved);
            if self.checks.contains(&shown) {
                return Err(PathError::TheCheck(shown));
            }
        }
        match self.read_only.covering(relative) {
            Some(entry) => Err(PathError::ReadOnly {
                path: self.display(resolved),
                entry: entry.to_owned(),
            }),
            None => Ok(()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn protected(&self) -> &ProtectedFiles {
        &self.protected
    }

    /// `agent.tools.read_only_paths`.
    pub fn read_only_paths(&self) -> &ReadOnlyPaths {
        &self.read_only
    }

    /// Visits the workspace's regular files depth first, not following links, passing over
    /// folders named in `skip` and the server's own files ([`Self::protected`]), until `visit`
    /// breaks.
    pub(crate) fn walk_files(
        &self,
        skip: &[&str],
        mut visit: impl FnMut(PathBuf) -> ControlFlow<()>,
    ) {
        let mut folders = vec![self.root.clone()];
        while let Some(folder) = folders.pop() {
            let Ok(entries) = std::fs::read_dir(&folder) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    if !skip.iter().any(|s| entry.file_name() == *s) {
                        folders.push(path);
                    }
                } else if kind.is_file() && !self.protected.covers(&path) && visit(path).is_break()
                {
                    return;
                }
            }
        }
    }

    /// `path` relative to the root, for messages (`.` for the root itself).
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// The root joined with `raw` normalized, without touching the disk.
    fn lexical(&self, raw: &str) -> Result<PathBuf, PathError> {
        if raw.contains('\0') {
            return Err(PathError::Invalid(raw.to_owned()));
        }
        let raw_path = Path::new(if raw.trim().is_empty() { "." } else { raw });
        let relative = if raw_path.is_absolute() {
            raw_path
                .strip_prefix(&self.root)
                .map_err(|_| PathError::Outside(raw.to_owned()))?
        } else {
            raw_path
        };
        let mut normalized = PathBuf::new();
        for component in relative.components() {
            match component {
                Component::Normal(part) => normalized.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !normalized.pop() {
                        return Err(PathError::Outside(raw.to_owned()));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::Outside(raw.to_owned()));
                }
            }
        }
        Ok(self.root.join(normalized))
    }

    fn inside(&self, resolved: &Path) -> bool {
        resolved.starts_with(&self.root)
    }

    /// Refuses the server's own files: by path, and by identity if `resolved` exists.
    pub fn refuse_protected(&self, resolved: &Path) -> Result<(), PathError> {
        if self.protected.covers(resolved) {
            return Err(PathError::Protected(self.display(resolved)));
        }
        Ok(())
    }

    /// The deepest existing entry of `joined` (not following a final link) and the names
    /// below it that do not exist.
    pub(super) fn deepest_existing<'a>(
        &self,
        joined: &'a Path,
    ) -> (&'a Path, Vec<std::ffi::OsString>) {
        let mut missing = Vec::new();
        let mut at = joined;
        while at.symlink_metadata().is_err() {
            // The last component as written (`file_name` is `None` for a final `..`).
            let (Some(parent), Some(last)) = (at.parent(), at.components().next_back()) else {
                break;
            };
            missing.push(last.as_os_str().to_owned());
            at = parent;
        }
        missing.reverse();
        (at, missing)
    }

    /// Why `joined` (which does not resolve) is refused: outside if what exists of it resolves
    /// outside (or is a dangling link), else `error` as it is. What lies outside is never told.
    fn unresolved(&self, raw: &str, joined: &Path, error: &io::Error) -> PathError {
        let (existing, _) = self.deepest_existing(joined);
        match existing.canonicalize() {
            Ok(real) if self.inside(&real) => match error.kind() {
                io::ErrorKind::NotFound => PathError::NotFound(raw.to_owned()),
                _ => io_error(raw, error),
            },
            _ => PathError::Outside(raw.to_owned()),
        }
    }

    /// An existing file or folder, resolved (symbolic links followed) and inside the root.
    pub fn existing(&self, raw: &str) -> Result<PathBuf, PathError> {
        let joined = self.lexical(raw)?;
        let resolved = match joined.canonicalize() {
            Ok(p) => p,
            Err(e) => return Err(self.unresolved(raw, &joined, &e)),
        };
        if !self.inside(&resolved) {
            return Err(PathError::Outside(raw.to_owned()));
        }
        self.refuse_protected(&resolved)?;
        Ok(resolved)
    }

    /// Where a write to `raw` lands: the resolved target if it exists, else the resolved
    /// deepest existing ancestor joined with the missing (plain) components. Never the root,
    /// never one of the server's own files, never inside a read-only path (`.git`…), also when
    /// a symbolic link leads there.
    pub fn writable(&self, raw: &str) -> Result<PathBuf, PathError> {
        let joined = self.lexical(raw)?;
        if joined == self.root {
            return Err(PathError::Invalid(raw.to_owned()));
        }
        if joined.symlink_metadata().is_ok() {
            let resolved = self.existing(raw)?;
            self.refuse_read_only(&resolved)?;
            return Ok(resolved);
        }
        let (ancestor, missing) = self.deepest_existing(&joined);
        let resolved = match ancestor.canonicalize() {
            Ok(p) if self.inside(&p) => p,
            Ok(_) => return Err(PathError::Outside(raw.to_owned())),
            Err(e) => return Err(self.unresolved(raw, ancestor, &e)),
        };
        let mut target = resolved;
        for name in missing {
            target.push(name);
        }
        self.refuse_protected(&target)?;
        self.refuse_read_only(&target)?;
        Ok(target)
    }
}

/// What kind of special file `file_type` is, if it is not a regular file or a folder.
#[cfg(unix)]
fn special_kind(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        Some("FIFO (named pipe)")
    } else if file_type.is_char_device() {
        Some("character device")
    } else if file_type.is_block_device() {
        Some("block device")
    } else if file_type.is_socket() {
        Some("socket")
    } else {
        None
    }
}

#[cfg(not(unix))]
fn special_kind(_file_type: std::fs::FileType) -> Option<&'static str> {
    None
}

#[cfg(unix)]
fn special_mode(mode: u32) -> Option<&'static str> {
    use rustix::fs::FileType;
    match FileType::from_raw_mode(mode) {
        FileType::Fifo => Some("FIFO (named pipe)"),
        FileType::CharacterDevice => Some("character device"),
        FileType::BlockDevice => Some("block device"),
        FileType::Socket => Some("socket"),
        FileType::Symlink => Some("symbolic link"),
        FileType::Directory => Some("folder"),
        _ => None,
    }
}

impl Workspace {
    /// `resolved` relative to the root (`.` for the root), or a refusal if it is not under it.
    fn relative<'a>(&self, resolved: &'a Path) -> Result<&'a Path, PathError> {
        let relative = resolved
            .strip_prefix(&self.root)
            .map_err(|_| PathError::Outside(self.display(resolved)))?;
        Ok(if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        })
    }

    /// Opens a resolved regular file for reading, without blocking and without following a
    /// final symbolic link. Refuses FIFOs, devices and sockets (checked before the open, and
    /// again on the opened file), files with several hard links, and the server's own files.
    ///
    /// On Linux 5.6+ the open itself is confined: `openat2` from the root with
    /// `RESOLVE_BENEATH`, so a folder on the way swapped for a symbolic
    /// link out *after* the check cannot lead the open outside (the kernel refuses it).
    pub fn open_read(&self, resolved: &Path) -> Result<File, PathError> {
        let display = self.display(resolved);
        // Before any open: opening a FIFO for reading blocks until a writer comes.
        let meta = resolved
            .symlink_metadata()
            .map_err(|e| self.unresolved(&display, resolved, &e))?;
        if let Some(kind) = special_kind(meta.file_type()) {
            return Err(PathError::Special {
                path: display,
                kind,
            });
        }
        let file = match self.open_beneath(resolved, false) {
            Some(opened) => opened?,
            None => {
                let mut options = OpenOptions::new();
                options.read(true);
                no_follow_no_block(&mut options);
                options.open(resolved).map_err(|e| io_error(&display, &e))?
            }
        };
        self.checked_regular(file, &display)
    }

    /// Opens the regular file `name` of the held folder `dir` for reading, with the checks of
    /// [`Workspace::open_read`]. `display` names it in refusals.
    #[cfg(unix)]
    pub fn open_read_at(
        &self,
        dir: &std::os::fd::OwnedFd,
        name: &std::ffi::OsStr,
        display: &str,
    ) -> Result<File, PathError> {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| io_error(display, &e.into()))?;
        if let Some(kind) = special_mode(st.st_mode) {
            return Err(PathError::Special {
                path: display.to_owned(),
                kind,
            });
        }
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_error(display, &e.into()))?;
        self.checked_regular(File::from(fd), display)
    }

    /// The checks on an opened file: a regular file, one link, not the server's own; then
    /// back to blocking reads.
    fn checked_regular(&self, file: File, display: &str) -> Result<File, PathError> {
        let meta = file.metadata().map_err(|e| io_error(display, &e))?;
        if let Some(kind) = special_kind(meta.file_type()) {
            return Err(PathError::Special {
                path: display.to_owned(),
                kind,
            });
        }
        if self.protected.has_meta(&meta) {
            return Err(PathError::Protected(display.to_owned()));
        }
        if meta.is_file() && link_count(&meta) > 1 {
            return Err(PathError::HardLinked(display.to_owned()));
        }
        #[cfg(unix)]
        {
            use rustix::fs::OFlags;
            let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| io_error(display, &e.into()))?;
            rustix::fs::fcntl_setfl(&file, flags - OFlags::NONBLOCK)
                .map_err(|e| io_error(display, &e.into()))?;
        }
        Ok(file)
    }

    /// Opens the resolved folder `dir` for reading its entries (and as a `cwd`), beneath the
    /// root: `openat2(root, relative, O_DIRECTORY | O_NOFOLLOW, RESOLVE_BENEATH)`, so a folder
    /// swapped for a link out since the check is refused by the kernel. Where `openat2` is missing (Linux < 5.6, a seccomp
    /// filter) the folder is opened by path.
    #[cfg(unix)]
    pub fn open_dir(&self, dir: &Path) -> Result<std::os::fd::OwnedFd, PathError> {
        use rustix::fs::{Mode, OFlags};
        let display = self.display(dir);
        let opened = match self.open_beneath(dir, true) {
            Some(opened) => opened?,
            None => {
                let fd = rustix::fs::open(
                    dir,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| match e {
                    rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP => {
                        PathError::Invalid(display.clone())
                    }
                    e => io_error(&display, &e.into()),
                })?;
                File::from(fd)
            }
        };
        Ok(opened.into())
    }
}

impl Workspace {
    /// `openat2(root, relative, …, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, for a regular file (non-blocking) or a folder. `None` where the
    /// kernel (or platform) lacks `openat2`, so the caller falls back.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn open_beneath(&self, resolved: &Path, folder: bool) -> Option<Result<File, PathError>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        let display = self.display(resolved);
        let relative = match self.relative(resolved) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let root = match rustix::fs::open(
            &self.root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(e) => return Some(Err(io_error(&display, &e.into()))),
        };
        let flags = if folder {
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
        } else {
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC
        };
        // Links inside are followed (the check followed them too); the kernel refuses any step
        // that leaves the root, absolute links included.
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(&root, relative, flags, Mode::empty(), how) {
            Ok(fd) => Some(Ok(File::from(fd))),
            // No openat2 here (Linux < 5.6, or a seccomp filter): use the path-based open.
            Err(Errno::NOSYS) | Err(Errno::PERM) => None,
            // A symbolic link where the resolved path had none, or a way out: the path
            // changed since it was checked.
            Err(Errno::LOOP) | Err(Errno::XDEV) => Some(Err(PathError::Outside(display))),
            // With O_NOFOLLOW, a final link (a swap since the check) is "not a folder".
            Err(Errno::NOTDIR) if folder => Some(Err(
                if resolved
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
                {
                    PathError::Outside(display)
                } else {
                    PathError::Invalid(display)
                },
            )),
            Err(e) => Some(Err(io_error(&display, &e.into()))),
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn open_beneath(&self, _resolved: &Path, _folder: bool) -> Option<Result<File, PathError>> {
        None
    }

    /// Opens the resolved folder `dir`, creating the folders that are missing, one name at a
    /// time beneath the root: `openat2(…, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` and
    /// `mkdirat`, each relative to the folder opened before. Writes made relative to the
    /// returned handle land in that folder even if a folder on its path is swapped for a
    /// symbolic link afterwards; a symbolic link met on the way (the path changed since it was
    /// resolved) is refused. `None` where the kernel (or platform) lacks `openat2`.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(super) fn hold_dir(&self, dir: &Path) -> Option<Result<std::os::fd::OwnedFd, PathError>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        use std::path::Component;
        let display = self.display(dir);
        // Every write goes through here: a read-only folder is never held for one.
        if let Err(refused) = self.refuse_read_only(dir) {
            return Some(Err(refused));
        }
        let failed = |e: Errno| match e {
            // A symbolic link, or a way out, where the resolved path had none.
            Errno::LOOP | Errno::XDEV => PathError::Outside(display.clone()),
            e => io_error(&display, &e.into()),
        };
        let Ok(relative) = dir.strip_prefix(&self.root) else {
            return Some(Err(PathError::Outside(display)));
        };
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let mut held = match rustix::fs::open(&self.root, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => return Some(Err(failed(e))),
        };
        for component in relative.components() {
            let Component::Normal(name) = component else {
                return Some(Err(PathError::Invalid(display)));
            };
            let next = match rustix::fs::openat2(&held, name, flags, Mode::empty(), how) {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&held, name, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Some(Err(failed(e))),
                    }
                    rustix::fs::openat2(&held, name, flags, Mode::empty(), how)
                }
                other => other,
            };
            held = match next {
                Ok(fd) => fd,
                // No openat2 here (Linux < 5.6, or a seccomp filter): use path-based writes.
                Err(Errno::NOSYS) | Err(Errno::PERM) => return None,
                // With O_NOFOLLOW a final symbolic link is opened as itself, not a folder.
                Err(Errno::NOTDIR)
                    if rustix::fs::statat(&held, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| {
                            rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::Symlink
                        }) =>
                {
                    return Some(Err(PathError::Outside(display)));
                }
                Err(e) => return Some(Err(failed(e))),
            };
        }
        Some(Ok(held))
    }
}

pub(super) fn io_error(path: &str, e: &io::Error) -> PathError {
    PathError::Io {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// Adds `O_NOFOLLOW` where the platform has it.
pub(super) fn no_follow(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // The flag's bits fit an i32 on every unix (it is a C int there).
        options.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    }
    #[cfg(not(unix))]
    let _ = options;
}

/// Adds `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY` where the platform has them: an open that does
/// not follow a final link and cannot block (a FIFO swapped in after the type check).
pub(super) fn no_follow_no_block(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use rustix::fs::OFlags;
        use std::os::unix::fs::OpenOptionsExt;
        // The flags' bits fit an i32 on every unix (they are a C int there).
        options.custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
    }
    #[cfg(not(unix))]
    let _ = options;
}

pub(super) fn link_count(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.nlink()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`setup`], with a folder `dir` in the workspace; also the workspace's root.
    #[cfg(target_os = "linux")]
    fn setup_with_dir() -> (tempfile::TempDir, Workspace, PathBuf, PathBuf) {
        let (base, ws, outside) = setup();
        let root = ws.root().to_path_buf();
        std::fs::create_dir(root.join("dir")).unwrap();
        (base, ws, outside, root)
    }

    /// The swap of a check-then-use race: `root/dir` moved to `root/old`, and a symbolic link
    /// to `target` put in its place.
    #[cfg(target_os = "linux")]
    fn swap_dir_for_link(root: &Path, target: &Path) {
        std::fs::rename(root.join("dir"), root.join("old")).unwrap();
        std::os::unix::fs::symlink(target, root.join("dir")).unwrap();
    }

    fn setup() -> (tempfile::TempDir, Workspace, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let ws_dir = base.path().join("ws");
        let outside = base.path().join("outside");
        std::fs::create_dir_all(ws_dir.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(ws_dir.join("src/lib.rs"), "fn x() {}").unwrap();
        std::fs::write(outside.join("secret.txt"), "secret").unwrap();
        let ws = Workspace::open(&ws_dir).unwrap();
        (base, ws, outside)
    }

    #[test]
    fn inside_paths_resolve() {
        let (_base, ws, _) = setup();
        let p = ws.existing("src/lib.rs").unwrap();
        assert_eq!(p, ws.root().join("src/lib.rs"));
        assert_eq!(ws.existing("src/../src/./lib.rs").unwrap(), p);
        let abs = ws.root().join("src/lib.rs");
        assert_eq!(ws.existing(abs.to_str().unwrap()).unwrap(), p);
        assert_eq!(ws.existing("").unwrap(), ws.root());
        assert_eq!(
            ws.writable("new/dir/file.txt").unwrap(),
            ws.root().join("new/dir/file.txt")
        );
    }

    #[test]
    fn escapes_are_refused() {
        let (_base, ws, outside) = setup();
        assert!(matches!(
            ws.existing("../outside/secret.txt"),
            Err(PathError::Outside(_))
        ));
        assert!(matches!(
            ws.existing("src/../../x"),
            Err(PathError::Outside(_))
        ));
        assert!(matches!(
            ws.existing("/etc/passwd"),
            Err(PathError::Outside(_))
        ));
        let abs = outside.join("secret.txt");
        assert!(matches!(
            ws.existing(abs.to_str().unwrap()),
            Err(PathError::Outside(_))
        ));
        assert!(matches!(
            ws.writable("../new.txt"),
            Err(PathError::Outside(_))
        ));
        assert!(matches!(ws.writable("."), Err(PathError::Invalid(_))));
        assert!(matches!(ws.existing("a\0b"), Err(PathError::Invalid(_))));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_are_refused_and_in_are_followed() {
        let (_base, ws, outside) = setup();
        let root = ws.root().to_path_buf();
        std::os::unix::fs::symlink(&outside, root.join("out_dir")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("out_file")).unwrap();
        std::os::unix::fs::symlink(outside.join("nope.txt"), root.join("dangling")).unwrap();
        std::os::unix::fs::symlink(root.join("src"), root.join("in_dir")).unwrap();
        for p in ["out_dir/secret.txt", "out_file", "out_dir", "dangling"] {
            assert!(matches!(ws.existing(p), Err(PathError::Outside(_))), "{p}");
        }
        for p in ["out_dir/new.txt", "out_file", "dangling", "out_dir/a/b.txt"] {
            assert!(matches!(ws.writable(p), Err(PathError::Outside(_))), "{p}");
        }
        assert_eq!(
            ws.existing("in_dir/lib.rs").unwrap(),
            root.join("src/lib.rs")
        );
    }

    #[cfg(unix)]
    #[test]
    fn hard_linked_files_are_not_read() {
        let (_base, ws, outside) = setup();
        let link = ws.root().join("linked.txt");
        std::fs::hard_link(outside.join("secret.txt"), &link).unwrap();
        let resolved = ws.existing("linked.txt").unwrap();
        assert!(matches!(
            ws.open_read(&resolved),
            Err(PathError::HardLinked(_))
        ));
        assert!(ws.open_read(&ws.existing("src/lib.rs").unwrap()).is_ok());
    }

    /// The race between check and use: a folder that was checked, then swapped for a symbolic
    /// link out before the open, must not be followed.
    #[cfg(target_os = "linux")]
    #[test]
    fn open_read_refuses_a_folder_swapped_for_a_link_after_the_check() {
        let (_base, ws, outside, root) = setup_with_dir();
        std::fs::write(root.join("dir/secret.txt"), "inside").unwrap();
        let checked = ws.existing("dir/secret.txt").unwrap();
        // The swap: dir becomes a link to the outside folder, which has a secret.txt too.
        swap_dir_for_link(&root, &outside);
        let err = ws.open_read(&checked).unwrap_err().to_string();
        assert!(err.contains("dir/secret.txt"), "{err}");
        // A relative link that stays inside still works. (The check hands over canonical
        // paths, so the open meets a link only when something changed in between.)
        std::fs::remove_file(root.join("dir")).unwrap();
        std::os::unix::fs::symlink("old", root.join("dir")).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut ws.open_read(&checked).unwrap(), &mut text).unwrap();
        assert_eq!(text, "inside");
    }

    #[cfg(unix)]
    #[test]
    fn open_read_does_not_follow_a_final_symlink() {
        let (_base, ws, outside) = setup();
        let link = ws.root().join("swapped");
        std::os::unix::fs::symlink(outside.join("secret.txt"), &link).unwrap();
        // As if the check had passed and the file was swapped for a link afterwards.
        assert!(ws.open_read(&link).is_err());
    }

    /// An escape through a link out is refused with the same words whether or not the path
    /// exists outside (no oracle for the outside).
    #[cfg(unix)]
    #[test]
    fn refusals_through_a_link_out_do_not_tell_what_exists_outside() {
        let (_base, ws, outside) = setup();
        std::os::unix::fs::symlink(&outside, ws.root().join("out")).unwrap();
        let text =
            |r: Result<PathBuf, PathError>, p: &str| r.unwrap_err().to_string().replace(p, "P");
        let existing = text(ws.existing("out/secret.txt"), "out/secret.txt");
        for p in [
            "out/missing.txt",
            "out/missing/deeper",
            "out/secret.txt/below",
        ] {
            assert_eq!(text(ws.existing(p), p), existing, "{p}");
            assert_eq!(text(ws.writable(p), p), existing, "{p}");
        }
        assert_eq!(
            existing,
            "'P' is outside the workspace or leads out of it through a symbolic link; use a \
             path inside the workspace root"
        );
        // Inside, a missing path is still named as missing.
        assert!(matches!(
            ws.existing("src/nope"),
            Err(PathError::NotFound(_))
        ));
    }

    /// FIFOs, sockets and devices are refused before any open (a FIFO's open would block).
    #[cfg(unix)]
    #[test]
    fn special_files_are_refused_before_they_are_opened() {
        let (_base, ws, _) = setup();
        let root = ws.root().to_path_buf();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let ws2 = ws.clone();
        std::thread::spawn(move || {
            let fifo = ws2.open_read(&ws2.existing("fifo").unwrap());
            let sock = ws2.open_read(&ws2.existing("sock").unwrap());
            let dir = rustix::fs::open(
                ws2.root(),
                rustix::fs::OFlags::RDONLY,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
            let at = ws2.open_read_at(&dir, std::ffi::OsStr::new("fifo"), "fifo");
            let _ = tx.send((fifo.map(|_| ()), sock.map(|_| ()), at.map(|_| ())));
        });
        let (fifo, sock, at) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("opening a FIFO blocked");
        for (r, kind) in [(fifo, "FIFO"), (sock, "socket"), (at, "FIFO")] {
            let e = r.unwrap_err().to_string();
            assert!(e.contains(kind) && e.contains("not a regular file"), "{e}");
        }
    }

    /// The server's own files: by path (also before they exist) and by identity (after a
    /// rename, through a link).
    #[cfg(unix)]
    #[test]
    fn the_servers_files_are_refused_by_path_and_by_identity() {
        let (_base, ws, _) = setup();
        let root = ws.root().to_path_buf();
        std::fs::write(root.join("agent.yaml"), "x").unwrap();
        let ws = ws.protect(ProtectedFiles::new([
            root.join("agent.yaml"),
            root.join("db-wal"),
        ]));
        let own = |r: Result<PathBuf, PathError>| matches!(r, Err(PathError::Protected(_)));
        assert!(own(ws.existing("agent.yaml")));
        assert!(own(ws.writable("agent.yaml")));
        assert!(own(ws.writable("db-wal")), "a file that does not exist yet");
        std::os::unix::fs::symlink("agent.yaml", root.join("alias")).unwrap();
        assert!(own(ws.existing("alias")));
        // Renamed by someone else: the identity stays.
        std::fs::rename(root.join("agent.yaml"), root.join("moved.txt")).unwrap();
        assert!(own(ws.existing("moved.txt")));
        let moved = root.join("moved.txt");
        assert!(matches!(ws.open_read(&moved), Err(PathError::Protected(_))));
        // Other files are untouched.
        assert!(ws.existing("src/lib.rs").is_ok());
    }

    /// Version-control metadata is read-only: the tools read it, writes anywhere in it (at
    /// any depth, in any case, through a link into it) are refused, and other files are not.
    #[cfg(unix)]
    #[test]
    fn read_only_paths_are_readable_but_never_writable() {
        let (_base, ws, _) = setup();
        let root = ws.root().to_path_buf();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join("vendor/lib/.git")).unwrap();
        std::fs::create_dir_all(root.join("build/cache")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", root.join("hooks")).unwrap();
        let ws = ws.read_only(ReadOnlyPaths::new(
            [".git", ".hg", ".svn", "build/cache"].map(str::to_owned),
        ));
        assert!(ws.existing(".git/config").is_ok(), "reading stays allowed");
        let refused = |p: &str| matches!(ws.writable(p), Err(PathError::ReadOnly { .. }));
        for p in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".git",
            ".GIT/config",
            "vendor/lib/.git/HEAD",
            "new/.hg/hgrc",
            ".svn/entries",
            "hooks/post-checkout",
            "build/cache/x",
            "./.git/../.git/config",
        ] {
            assert!(refused(p), "{p}: {:?}", ws.writable(p));
        }
        for p in [
            "src/git.rs",
            ".gitignore",
            "build/out.txt",
            ".github/ci.yml",
            "x.git",
        ] {
            assert!(ws.writable(p).is_ok(), "{p}: {:?}", ws.writable(p));
        }
        let e = ws.writable(".git/config").unwrap_err().to_string();
        assert!(
            e.contains("inside .git") && e.contains("read but not change"),
            "{e}"
        );
        #[cfg(target_os = "linux")]
        assert!(matches!(
            ws.hold_dir(&root.join(".git/hooks")),
            Some(Err(PathError::ReadOnly { .. }))
        ));
    }

    /// list_dir's and run_command's folders are opened beneath the root: a folder swapped for
    /// a link out after the check is refused.
    #[cfg(target_os = "linux")]
    #[test]
    fn open_dir_refuses_a_folder_swapped_for_a_link_after_the_check() {
        let (_base, ws, outside, root) = setup_with_dir();
        let checked = ws.existing("dir").unwrap();
        swap_dir_for_link(&root, &outside);
        assert!(matches!(ws.open_dir(&checked), Err(PathError::Outside(_))));
        std::fs::remove_file(root.join("dir")).unwrap();
        std::fs::rename(root.join("old"), root.join("dir")).unwrap();
        assert!(ws.open_dir(&checked).is_ok());
    }
}
