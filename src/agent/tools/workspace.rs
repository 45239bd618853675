//! Path confinement: every path a tool touches resolves inside the workspace root.
//!
//! A path from the model is first normalized lexically (an absolute path must lie under the
//! root; `..` may not climb above it), then resolved on disk with `canonicalize`, and the
//! *resolved* path must still be under the canonical root, so a symbolic link that leads out is
//! refused. Files are then opened with `O_NOFOLLOW`, so a final component swapped for a link
//! after the check is not followed either.
//!
//! Hard links cannot be told apart from ordinary files by path. Reads refuse regular files with
//! more than one link (another link may live outside); writes always go to a new file renamed
//! over the old one, so they never change a shared inode.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("'{0}' is outside the workspace; use a path relative to the workspace root")]
    Outside(String),
    #[error("'{0}' leads outside the workspace through a symbolic link")]
    SymlinkOutside(String),
    #[error("'{0}' does not exist")]
    NotFound(String),
    #[error("'{0}' is not a valid path")]
    Invalid(String),
    #[error("'{0}' has several hard links and may be shared with a file outside the workspace")]
    HardLinked(String),
    #[error("cannot use workspace '{path}': {reason}")]
    Root { path: String, reason: String },
    #[error("'{path}': {reason}")]
    Io { path: String, reason: String },
}

/// The canonical workspace root.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

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
        Ok(Workspace { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
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

    /// An existing file or folder, resolved (symbolic links followed) and inside the root.
    pub fn existing(&self, raw: &str) -> Result<PathBuf, PathError> {
        let joined = self.lexical(raw)?;
        let resolved = match joined.canonicalize() {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A link whose target is missing is still a link; say where it points.
                return Err(if joined.symlink_metadata().is_ok() {
                    PathError::SymlinkOutside(raw.to_owned())
                } else {
                    PathError::NotFound(raw.to_owned())
                });
            }
            Err(e) => return Err(io_error(raw, &e)),
        };
        if !self.inside(&resolved) {
            return Err(PathError::SymlinkOutside(raw.to_owned()));
        }
        Ok(resolved)
    }

    /// Where a write to `raw` lands: the resolved target if it exists, else the resolved
    /// deepest existing ancestor joined with the missing (plain) components. Never the root.
    pub fn writable(&self, raw: &str) -> Result<PathBuf, PathError> {
        let joined = self.lexical(raw)?;
        if joined == self.root {
            return Err(PathError::Invalid(raw.to_owned()));
        }
        if joined.symlink_metadata().is_ok() {
            return self.existing(raw);
        }
        let mut missing = Vec::new();
        let mut ancestor = joined.as_path();
        loop {
            let Some(parent) = ancestor.parent() else {
                return Err(PathError::Outside(raw.to_owned()));
            };
            if let Some(name) = ancestor.file_name() {
                missing.push(name.to_owned());
            }
            ancestor = parent;
            if ancestor.symlink_metadata().is_ok() {
                break;
            }
        }
        let resolved = ancestor.canonicalize().map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => PathError::SymlinkOutside(raw.to_owned()),
            _ => io_error(raw, &e),
        })?;
        if !self.inside(&resolved) {
            return Err(PathError::SymlinkOutside(raw.to_owned()));
        }
        let mut target = resolved;
        for name in missing.into_iter().rev() {
            target.push(name);
        }
        Ok(target)
    }

    /// Opens a resolved file for reading without following a final symbolic link, and
    /// refuses a file with several hard links.
    ///
    /// On Linux 5.6+ the open itself is confined: `openat2` from the root with
    /// `RESOLVE_BENEATH`, so a folder on the way swapped for a symbolic link out *after* the
    /// check cannot lead the open outside either (the kernel refuses it, atomically).
    pub fn open_read(&self, resolved: &Path) -> Result<File, PathError> {
        let display = self.display(resolved);
        let file = match self.open_beneath(resolved) {
            Some(opened) => opened.map_err(|e| io_error(&display, &e))?,
            None => {
                let mut options = OpenOptions::new();
                options.read(true);
                no_follow(&mut options);
                options.open(resolved).map_err(|e| io_error(&display, &e))?
            }
        };
        let meta = file.metadata().map_err(|e| io_error(&display, &e))?;
        if meta.is_file() && link_count(&meta) > 1 {
            return Err(PathError::HardLinked(display));
        }
        Ok(file)
    }
}

impl Workspace {
    /// `openat2(root, relative, O_RDONLY | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`;
    /// `None` where the kernel (or platform) lacks `openat2`, so the caller falls back.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn open_beneath(&self, resolved: &Path) -> Option<io::Result<File>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let Ok(relative) = resolved.strip_prefix(&self.root) else {
            return Some(Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "outside the workspace",
            )));
        };
        let relative = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        let root = match rustix::fs::open(
            &self.root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(e) => return Some(Err(e.into())),
        };
        match rustix::fs::openat2(
            &root,
            relative,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => Some(Ok(File::from(fd))),
            // No openat2 here (Linux < 5.6, or a seccomp filter): use the path-based open.
            Err(rustix::io::Errno::NOSYS) | Err(rustix::io::Errno::PERM) => None,
            Err(e) => Some(Err(e.into())),
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn open_beneath(&self, _resolved: &Path) -> Option<io::Result<File>> {
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
        let failed = |e: Errno| match e {
            // A symbolic link, or a way out, where the resolved path had none.
            Errno::LOOP | Errno::XDEV => PathError::SymlinkOutside(display.clone()),
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
                    return Some(Err(PathError::SymlinkOutside(display)));
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
            assert!(
                matches!(ws.existing(p), Err(PathError::SymlinkOutside(_))),
                "{p}"
            );
        }
        for p in ["out_dir/new.txt", "out_file", "dangling", "out_dir/a/b.txt"] {
            assert!(
                matches!(ws.writable(p), Err(PathError::SymlinkOutside(_))),
                "{p}"
            );
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
        let (_base, ws, outside) = setup();
        let root = ws.root().to_path_buf();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::fs::write(root.join("dir/secret.txt"), "inside").unwrap();
        let checked = ws.existing("dir/secret.txt").unwrap();
        // The swap: dir becomes a link to the outside folder, which has a secret.txt too.
        std::fs::rename(root.join("dir"), root.join("old")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("dir")).unwrap();
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
}
