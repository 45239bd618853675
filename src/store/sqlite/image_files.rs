//! Large images as files of their own beside the database, one per content hash.
//!
//! Why not rows: a 5 MiB image stored in SQLite goes through 1,700 overflow pages of 4 KiB, each
//! allocated, copied, checksummed and written to the WAL as a frame of its own (two `pwrite`s),
//! and later copied again into the database file by the checkpoint. Four of them made the
//! accept of a 20 MiB `agent_run` spend about 90 ms in the store, where one `write` and one
//! `fdatasync` of the same bytes take about 25 ms (`cargo bench --bench accept`). Small images
//! stay rows (below [`FILE_FROM`]): their pages share the group commit's one `fsync`, where a
//! file would cost an `fsync` of its own.
//!
//! The layout: `<database>-images/<sha256 as 64 hex digits>`, the standard base64 text the
//! client sent (what Ollama takes), mode 0600 in a 0700 folder. The `images` row of a file
//! image has `in_file = 1` and empty `data`.
//!
//! Durability and order, all on the writer thread (so a write, a release and a sweep never
//! race): a file is written under a temporary name, `fdatasync`ed, renamed to its hash and the
//! folder synced, before the transaction that links a task to it commits; a file whose name is
//! its hash is therefore whole. Files no committed row needs (a release deleted the row, a
//! transaction that wrote them rolled back, a crash came between the file and the commit) are
//! removed by [`ImageFiles::sweep`], which runs when the writer is idle after such a change, and
//! once when the store opens.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::{Connection, OptionalExtension};

use crate::store::StoreError;

/// Base64 text from which an image is a file of its own rather than a row (256 KiB: below it,
/// the pages cost less than the file's own `fsync`).
pub(super) const FILE_FROM: usize = 256 * 1024;

/// Suffix of a file being written; never a live image.
const PARTIAL: &str = ".partial";

/// The folder of image files of one database.
#[derive(Debug)]
pub(super) struct ImageFiles {
    dir: PathBuf,
    /// Set when a file may have lost its row (or never got one): the next idle sweep looks.
    dirty: AtomicBool,
}

impl ImageFiles {
    /// The folder beside `database` (`<database>-images`); created, private, when missing.
    pub(super) fn open(database: &Path) -> Result<ImageFiles, String> {
        let mut name = database.as_os_str().to_owned();
        name.push("-images");
        let dir = PathBuf::from(name);
        super::create_private_dir(&dir)
            .map_err(|e| format!("cannot create the image folder {}: {e}", dir.display()))?;
        Ok(ImageFiles {
            dir,
            // A crash may have left files behind: the first idle moment looks.
            dirty: AtomicBool::new(true),
        })
    }

    fn path(&self, sha256: &[u8; 32]) -> PathBuf {
        self.dir.join(hex(sha256))
    }

    /// Makes the file of each `(hash, text)` durable (those already there are whole and kept),
    /// then syncs the folder once. Marks the folder for a sweep: if the transaction these files
    /// are written for rolls back, nothing will link to them.
    pub(super) fn write_all<'a>(
        &self,
        images: impl IntoIterator<Item = (&'a [u8; 32], &'a [u8])>,
    ) -> Result<(), StoreError> {
        let mut missing: Vec<(PathBuf, &[u8])> = images
            .into_iter()
            .map(|(sha256, data)| (self.path(sha256), data))
            .filter(|(path, _)| !path.exists())
            .collect();
        // The same image twice in one task is one file, written once.
        missing.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        missing.dedup_by(|a, b| a.0 == b.0);
        if missing.is_empty() {
            return Ok(());
        }
        self.dirty.store(true, Ordering::Relaxed);
        // Each file's write and `fdatasync` on a thread of its own: the disk overlaps them,
        // where one after the other each waits for the last. A thread that cannot start
        // leaves its file to this one.
        let written: Vec<Result<(), StoreError>> = std::thread::scope(|scope| {
            let started: Vec<_> = missing
                .iter()
                .skip(1)
                .map(|(path, data)| {
                    let spawned = std::thread::Builder::new()
                        .name("agent-mcp-image-file".into())
                        .spawn_scoped(scope, || self.write_one(path, data));
                    (path, data, spawned)
                })
                .collect();
            let mut written: Vec<_> = missing
                .first()
                .map(|(path, data)| self.write_one(path, data))
                .into_iter()
                .collect();
            for (path, data, spawned) in started {
                written.push(match spawned {
                    Ok(handle) => handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    Err(_) => self.write_one(path, data),
                });
            }
            written
        });
        written.into_iter().collect::<Result<(), _>>()?;
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| self.failure("sync", &self.dir, &e))
    }

    /// Writes one file under a temporary name, syncs it and gives it its final name.
    fn write_one(&self, path: &Path, data: &[u8]) -> Result<(), StoreError> {
        let mut partial = path.to_path_buf().into_os_string();
        partial.push(PARTIAL);
        let partial = PathBuf::from(partial);
        write_durably(&partial, data)
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&partial);
                self.failure("write", path, &e)
            })
    }

    /// The base64 text of the image with this hash.
    pub(super) fn read(&self, sha256: &[u8; 32]) -> Result<String, StoreError> {
        let path = self.path(sha256);
        std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                StoreError::Unavailable(format!(
                    "the image file {} is missing (was the database copied without its \
                     -images folder?); send the task again with its images",
                    path.display()
                ))
            } else {
                self.failure("read", &path, &e)
            }
        })
    }

    /// Something may have unlinked an image (a task ended, a purge ran): sweep when idle.
    pub(super) fn mark(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// When marked: removes every file no committed `images` row with `in_file = 1` names,
    /// and every partial file. Runs on the writer thread between transactions; a failure is
    /// logged and the sweep tried again the next time.
    pub(super) fn sweep(&self, conn: &Connection) {
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.sweep_now(conn) {
            self.dirty.store(true, Ordering::Relaxed);
            tracing::warn!(folder = %self.dir.display(), error = %e, "could not sweep unused image files");
        }
    }

    fn sweep_now(&self, conn: &Connection) -> Result<(), String> {
        let mut needed = conn
            .prepare_cached("SELECT 1 FROM images WHERE sha256 = ?1 AND in_file = 1")
            .map_err(|e| e.to_string())?;
        let entries = std::fs::read_dir(&self.dir).map_err(|e| e.to_string())?;
        for entry in entries {
            let entry = entry.map_err(|e| e.to_string())?;
            let name = entry.file_name();
            let keep = match name.to_str().and_then(unhex) {
                Some(sha256) => needed
                    .query_row([&sha256[..]], |_| Ok(()))
                    .optional()
                    .map_err(|e| e.to_string())?
                    .is_some(),
                // A partial write of an earlier run, or a stranger's file: only ours go.
                None => !name.to_string_lossy().ends_with(PARTIAL),
            };
            if !keep {
                let path = entry.path();
                match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(format!("{}: {e}", path.display()));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn failure(&self, what: &str, path: &Path, e: &std::io::Error) -> StoreError {
        StoreError::Unavailable(format!(
            "cannot {what} the image file {} ({e}); nothing was stored. Check the disk and the \
             folder {} (free space, permissions), then send the task again",
            path.display(),
            self.dir.display()
        ))
    }
}

/// Creates `path` (0600), writes `data` and `fdatasync`s it.
fn write_durably(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(data)?;
    file.sync_data()
}

fn hex(sha256: &[u8; 32]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(64);
    for b in sha256 {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The hash a file name stands for: exactly 64 lowercase hex digits.
fn unhex(name: &str) -> Option<[u8; 32]> {
    let digits = name.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_hash_in_hex_and_nothing_else_parses() {
        let hash: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        let name = hex(&hash);
        assert_eq!(name.len(), 64);
        assert_eq!(unhex(&name), Some(hash));
        for other in [
            "",
            "notes.txt",
            &name[..63],
            &format!("{name}0"),
            &format!("{name}{PARTIAL}"),
            &name.to_uppercase(),
            &format!("{}g", &name[..63]),
            &format!("{}é", &name[..62]),
        ] {
            assert_eq!(unhex(other), None, "{other:?}");
        }
    }
}
