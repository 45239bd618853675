//! [`SqliteStore`]: the durable [`TaskStore`], one SQLite file in WAL mode.
//!
//! - Durability: `agent_run` answers after `insert_task` commits; with `synchronous = FULL`
//!   (the default) that commit is on disk, power loss included. A killed process loses nothing
//!   committed at any `synchronous` level (WAL).
//! - Images are stored once per SHA-256 of their decoded bytes, as the standard base64 text the
//!   client sent (what Ollama takes), linked to the tasks that sent them; a task that reaches a
//!   terminal state drops its links, and an image no unfinished task links to is deleted.
//!   Images of 256 KiB of text or more are files in `<database>-images/`, made durable before
//!   the commit that links them (see `image_files.rs`): a backup copies that folder too. [`TaskStore::task`] never reads image bytes, so the
//!   `agent_status` hot path and the queue hold none; the runner reads them with
//!   [`TaskStore::task_images`].
//! - Threads: every SQLite call runs on one of two dedicated threads (a writer and a reader),
//!   never on the async executor; see `thread.rs` for why.
//! - Pages are 4 KiB in new files: every commit writes each page it changed to the WAL whole,
//!   and a task's writes change a few rows spread over several indexes (see `schema.rs`).
//! - Failures (read-only file, full disk, I/O error) come back as [`StoreError::Unavailable`]
//!   with what to do; the transaction rolls back, so nothing is half-written.

mod cache;
mod image_files;
pub(super) mod queries;
mod schema;
mod thread;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::ErrorCode;
use uuid::Uuid;

use super::{StoreError, TaskChanges, TaskStore};
use crate::config::StoreConfig;
use crate::task::input::Answer;
use crate::task::{Session, Task, TaskImage, TaskState, Turn};
use cache::TaskCache;
use image_files::ImageFiles;
use thread::ConnectionThread;

/// How many tasks one purge transaction deletes, so other writes interleave with a large purge.
const PURGE_BATCH: u32 = 500;

/// Tasks, sessions and images in a SQLite file. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct SqliteStore {
    writer: ConnectionThread,
    reader: ConnectionThread,
    /// Recent tasks, written through after each commit (see `cache.rs`).
    cache: Arc<TaskCache>,
    /// Large images, as files beside the database (see `image_files.rs`).
    files: Arc<ImageFiles>,
    /// The file, for error messages.
    path: Arc<str>,
    /// Held while the store is open: one process per file (see [`lock_exclusively`]).
    _lock: std::fs::File,
}

impl SqliteStore {
    /// Opens (or creates) the file at `config.path`, creating its folder, and migrates the
    /// schema to the latest version.
    pub async fn open(config: &StoreConfig) -> Result<SqliteStore, StoreError> {
        // `AgentMcp::start` fills in the default location (`Config::store_path`).
        let path = config.path.clone().ok_or_else(|| {
            StoreError::Unavailable(
                "no SQLite file given: set store.path, or resolve it with Config::store_path"
                    .into(),
            )
        })?;
        let synchronous = config.synchronous;
        let shown: Arc<str> = path.display().to_string().into();
        let opened = tokio::task::spawn_blocking(move || open_connections(&path, synchronous))
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot open {shown}: {e}")))?;
        let (lock, writer, reader, files) = opened.map_err(|e| {
            StoreError::Unavailable(format!("cannot open the task store {shown}: {e}"))
        })?;
        let files = Arc::new(files);
        let spawn = |name, conn, on_idle| {
            ConnectionThread::spawn(name, conn, on_idle).map_err(|e| {
                StoreError::Unavailable(format!("cannot start the SQLite {name} thread: {e}"))
            })
        };
        let idle_files = files.clone();
        let on_idle: thread::OnIdle = Box::new(move |conn| {
            idle_files.sweep(conn);
            schema::checkpoint(conn);
        });
        Ok(SqliteStore {
            writer: spawn("writer", writer, Some(on_idle))?,
            reader: spawn("reader", reader, None)?,
            cache: Arc::default(),
            files,
            path: shown,
            _lock: lock,
        })
    }

    /// The file this store uses.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// From now on, refuses (`true`) or accepts (`false`) writes, as a read-only disk would:
    /// every write fails with a store error and nothing is written. For maintenance windows
    /// (copy the file while the server answers `agent_status`) and for tests.
    pub async fn set_read_only(&self, read_only: bool) -> Result<(), StoreError> {
        let path = self.path.clone();
        self.writer
            .run_alone(move |conn| {
                conn.pragma_update(None, "query_only", read_only)
                    .map_err(|e| describe(&path, e))
            })
            .await
    }

    async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.write_committed(f, |_| ()).await
    }

    /// [`Self::write`], and `on_commit` with the result once it is committed
    /// ([`ConnectionThread::run_committed`]).
    async fn write_committed<T, F, C>(&self, f: F, on_commit: C) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
        C: FnOnce(&T) + Send + 'static,
    {
        let path = self.path.clone();
        self.writer
            .run_committed(
                move |conn| f(conn).map_err(|e| describe(&path, e)),
                on_commit,
            )
            .await
    }

    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let path = self.path.clone();
        self.reader
            .run(move |conn| f(conn).map_err(|e| describe(&path, e)))
            .await
    }
}

type Opened = (
    std::fs::File,
    rusqlite::Connection,
    rusqlite::Connection,
    ImageFiles,
);

fn open_connections(
    path: &Path,
    synchronous: crate::config::Synchronous,
) -> Result<Opened, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir)
            .map_err(|e| format!("cannot create the folder {}: {e}", dir.display()))?;
    }
    let lock = lock_exclusively(path)?;
    private_files(path)?;
    let writer = schema::open_writer(path, synchronous)?;
    let reader = schema::open_reader(path)?;
    let files = ImageFiles::open(path)?;
    // What a crash left between a file and its commit, before anything new is written.
    files.sweep(&writer);
    Ok((lock, writer, reader, files))
}

/// Creates `dir` and its missing parents readable by the server's user only (0700): the
/// database holds every caller's request texts. An existing folder is left as it is.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Makes the database and its `-wal`, `-shm` and `-journal` files readable by the server's user
/// only (0600): creates the database empty with that mode if it is missing (SQLite gives its
/// companion files the database's mode), and narrows the mode of existing ones.
fn private_files(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let file = Path::new(&name);
            let Ok(meta) = std::fs::metadata(file) else {
                continue;
            };
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode & 0o700))
                    .map_err(|e| {
                        format!("cannot make {} private (chmod 600 it): {e}", file.display())
                    })?;
                tracing::info!(
                    path = %file.display(),
                    was = format!("{:o}", mode & 0o777),
                    "the task database was readable by others; it is now 0600"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Takes an exclusive lock on `<path>.lock` for as long as the returned file lives; the OS
/// drops it when the process dies, SIGKILL included. Two servers on one file would each run
/// the queue, and the second would fail the first's running task as "interrupted".
fn lock_exclusively(path: &Path) -> Result<std::fs::File, String> {
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .open(&lock_path)
        .map_err(|e| format!("cannot open the lock file {}: {e}", lock_path.display()))?;
    #[cfg(unix)]
    {
        use rustix::fs::{FlockOperation, flock};
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(format!(
                    "another agent-mcp process is using {}; stop it, or give this one its own \
                     store.path",
                    path.display()
                ));
            }
            Err(e) => return Err(format!("cannot lock {}: {e}", lock_path.display())),
        }
    }
    Ok(file)
}

/// A SQLite failure as a store error that says what to do about it.
fn describe(path: &str, e: rusqlite::Error) -> StoreError {
    let message = match e.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => format!(
            "the disk holding {path} is full ({e}); free space there, or shorten store.retention"
        ),
        Some(ErrorCode::ReadOnly) => format!(
            "{path} is read-only ({e}); make the file and its folder writable, or set store.path \
             to a writable place"
        ),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "{path} is locked by another process ({e}); is a second agent-mcp using the same \
             store.path?"
        ),
        Some(ErrorCode::SystemIoFailure) => {
            format!("I/O error on {path} ({e}); check the disk")
        }
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => format!(
            "{path} is damaged or not an agent-mcp database ({e}); restore it from a backup or \
             set store.path to a new file"
        ),
        _ => format!("{path}: {e}"),
    };
    StoreError::Unavailable(message)
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        let session = session.clone();
        self.write(move |conn| queries::create_session(conn, &session))
            .await
    }

    async fn session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        self.read(move |conn| queries::session(conn, id)).await
    }

    async fn session_turns(&self, id: Uuid) -> Result<Vec<Turn>, StoreError> {
        self.read(move |conn| queries::session_turns(conn, id))
            .await?
            .ok_or(StoreError::UnknownSession(id))
    }

    async fn append_turns(&self, id: Uuid, turns: &[Turn]) -> Result<(), StoreError> {
        let turns = turns.to_vec();
        let known = self
            .write(move |conn| queries::append_turns(conn, id, &turns))
            .await?;
        if known {
            Ok(())
        } else {
            Err(StoreError::UnknownSession(id))
        }
    }

    async fn insert_task(&self, task: &Task) -> Result<(), StoreError> {
        self.insert_task_owned(task.clone()).await
    }

    async fn insert_task_owned(&self, mut task: Task) -> Result<(), StoreError> {
        let images = std::mem::take(&mut task.images);
        let path = self.path.clone();
        let cache = self.cache.clone();
        let files = self.files.clone();
        let cached = task.clone();
        // Decoding and hashing run on the writer thread too: CPU work of up to the image
        // limit's size that does not belong on the executor.
        self.writer
            .run_committed(
                move |conn| {
                    let images = queries::prepare_images(&images)?;
                    queries::insert_task(conn, &task, &images).map_err(|e| describe(&path, e))?;
                    // The large images' files are durable before the rows naming them commit;
                    // if this job fails, its rows roll back and the sweep removes its files.
                    if task.state.is_terminal() {
                        return Ok(());
                    }
                    files.write_all(
                        images
                            .iter()
                            .filter(|image| image.in_file())
                            .map(|image| (&image.sha256, image.data)),
                    )
                },
                move |()| cache.committed(cached),
            )
            .await
    }

    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        let epoch = match self.cache.get(id) {
            Ok(known) => return Ok(known),
            Err(epoch) => epoch,
        };
        let task = self.read(move |conn| queries::task(conn, id)).await?;
        match &task {
            Some(task) => self.cache.fill(task, epoch),
            None => self.cache.fill_absent(id, epoch),
        }
        Ok(task)
    }

    async fn task_images(&self, id: Uuid) -> Result<Vec<TaskImage>, StoreError> {
        let path = self.path.clone();
        let files = self.files.clone();
        self.reader
            .run(move |conn| {
                let Some(rows) = queries::task_images(conn, id).map_err(|e| describe(&path, e))?
                else {
                    return Ok(None);
                };
                let images = rows.into_iter().map(|row| row.load(&files));
                images.collect::<Result<Vec<_>, _>>().map(Some)
            })
            .await?
            .ok_or(StoreError::UnknownTask(id))
    }

    async fn update_task(&self, task: &Task) -> Result<(), StoreError> {
        self.finish_task(task, &[]).await
    }

    async fn finish_task(&self, task: &Task, turns: &[Turn]) -> Result<(), StoreError> {
        let id = task.id;
        let session = task.session_id;
        let turns = turns.to_vec();
        // The runner saves progress with the images it holds; copying their bytes on every
        // save would be wasted work, and the row does not hold them anyway.
        let task = queries::without_images(task);
        let cached = task.clone();
        let cache = self.cache.clone();
        let files = self.files.clone();
        let known = self
            .write_committed(
                move |conn| {
                    if task.state.is_terminal() {
                        // It may release the last link to an image file.
                        files.mark();
                    }
                    queries::finish_task(conn, &task, &turns)
                },
                move |found| {
                    if *found == queries::Found::Both {
                        cache.committed(cached);
                    }
                },
            )
            .await?;
        match known {
            queries::Found::Both => Ok(()),
            queries::Found::NoTask => Err(StoreError::UnknownTask(id)),
            queries::Found::NoSession => Err(StoreError::UnknownSession(session)),
        }
    }

    async fn answer_input(&self, id: Uuid, key: &str, answer: &Answer) -> Result<bool, StoreError> {
        let key = key.to_owned();
        let answer = answer.clone();
        self.write(move |conn| queries::answer_input(conn, id, &key, &answer))
            .await?
            .ok_or(StoreError::UnknownTask(id))
    }

    async fn input_answer(&self, id: Uuid, key: &str) -> Result<Option<Answer>, StoreError> {
        let key = key.to_owned();
        self.read(move |conn| queries::input_answer(conn, id, &key))
            .await
    }

    async fn tasks_in_state(&self, state: TaskState) -> Result<Vec<Task>, StoreError> {
        self.read(move |conn| queries::tasks_in_state(conn, state))
            .await
    }

    async fn save_changes(&self, id: Uuid, changes: &TaskChanges) -> Result<(), StoreError> {
        let files = changes.to_json();
        if self
            .write(move |conn| queries::save_changes(conn, id, &files))
            .await?
        {
            Ok(())
        } else {
            Err(StoreError::UnknownTask(id))
        }
    }

    async fn task_changes(&self, id: Uuid) -> Result<Option<TaskChanges>, StoreError> {
        self.read(move |conn| queries::task_changes(conn, id)).await
    }

    async fn mark_undone(&self, id: Uuid) -> Result<bool, StoreError> {
        self.write(move |conn| queries::mark_undone(conn, id)).await
    }

    async fn recent_tasks(
        &self,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Task>, StoreError> {
        let owner = owner.map(str::to_owned);
        self.read(move |conn| queries::recent_tasks(conn, owner.as_deref(), limit))
            .await
    }

    async fn purge_finished(&self, finished_before: SystemTime) -> Result<u64, StoreError> {
        let cutoff = queries::to_ns(finished_before);
        let mut purged = 0;
        loop {
            let cache = self.cache.clone();
            let files = self.files.clone();
            let n = self
                .write_committed(
                    move |conn| {
                        files.mark();
                        queries::purge_batch(conn, cutoff, PURGE_BATCH)
                    },
                    move |n| {
                        if *n > 0 {
                            cache.purged();
                        }
                    },
                )
                .await?;
            purged += n;
            if n < u64::from(PURGE_BATCH) {
                break;
            }
        }
        let files = self.files.clone();
        self.write(move |conn| {
            files.mark();
            queries::sweep_images(conn)
        })
        .await?;
        Ok(purged)
    }
}
