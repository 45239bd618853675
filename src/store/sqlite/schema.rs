//! Opening the database file and bringing its schema up to date.
//!
//! Migrations are numbered by their place in [`MIGRATIONS`]; `PRAGMA user_version` records
//! how many have run. Each runs in its own transaction with its version bump, so a crash
//! mid-migration leaves the previous version intact. Never edit a published migration: append
//! a new one.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::config::Synchronous;

/// Schema migrations, oldest first; entry `i` takes `user_version` from `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: tasks, sessions with their turns, and images stored once per content hash.
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY NOT NULL,
        owner TEXT,
        created_at_ns INTEGER NOT NULL
    );
    CREATE TABLE turns (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL
    );
    CREATE INDEX turns_by_session ON turns (session_id, seq);
    CREATE TABLE tasks (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        owner TEXT,
        request TEXT NOT NULL,
        temperature REAL,
        state TEXT NOT NULL CHECK (state IN
            ('queued', 'planning', 'running', 'completed', 'failed', 'cancelled')),
        steps_done INTEGER NOT NULL,
        steps_total INTEGER NOT NULL,
        current_task TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        critical_path_tokens INTEGER NOT NULL,
        result TEXT NOT NULL,
        created_at_ns INTEGER NOT NULL,
        updated_at_ns INTEGER NOT NULL,
        finished_at_ns INTEGER
    );
    CREATE INDEX tasks_by_state ON tasks (state, seq);
    CREATE INDEX tasks_by_finish ON tasks (finished_at_ns) WHERE finished_at_ns IS NOT NULL;
    -- data: the image as the standard base64 text the client sent (what Ollama takes).
    CREATE TABLE images (
        sha256 BLOB PRIMARY KEY NOT NULL,
        data BLOB NOT NULL
    );
    CREATE TABLE task_images (
        task_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        mime_type TEXT NOT NULL,
        sha256 BLOB NOT NULL,
        PRIMARY KEY (task_id, position)
    ) WITHOUT ROWID;
    CREATE INDEX task_images_by_hash ON task_images (sha256);",
    // 2: sessions are purged with their last task, which looks tasks up by session.
    "CREATE INDEX tasks_by_session ON tasks (session_id);",
    // 3: the trace context of the request that queued a task (the W3C strings as JSON), so
    // the runner continues the caller's trace; NULL when export was off.
    "ALTER TABLE tasks ADD COLUMN trace_context TEXT;",
    // 4: approvals. `input` is the task's questions and decisions (JSON; NULL when it has
    // none), written by its runner with the rest of the row; the answers are rows of their
    // own, written by whoever answers, so a progress save never overwrites one.
    "ALTER TABLE tasks ADD COLUMN input TEXT;
    CREATE TABLE input_answers (
        task_id TEXT NOT NULL,
        key TEXT NOT NULL,
        answer TEXT NOT NULL,
        PRIMARY KEY (task_id, key)
    ) WITHOUT ROWID;",
    // 5: large images live in files beside the database (`image_files.rs`); their row keeps
    // the hash, empty `data` and `in_file = 1`. Rows written before keep their data.
    "ALTER TABLE images ADD COLUMN in_file INTEGER NOT NULL DEFAULT 0;",
    // 6: what each task changed in the workspace (`store::TaskChanges`, JSON), deleted with
    // the task; and a caller's own tasks, newest first, for the oversight page.
    "CREATE TABLE task_changes (
        task_id TEXT PRIMARY KEY NOT NULL,
        files TEXT NOT NULL,
        undone INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE INDEX tasks_by_owner ON tasks (owner, seq);",
];

/// How long a statement waits for a lock held by another connection (the other thread, or a
/// backup tool) before it fails with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens (creating if needed) the writer connection: WAL, the given `synchronous`, and the
/// schema migrated to the latest version.
pub(super) fn open_writer(path: &Path, synchronous: Synchronous) -> Result<Connection, String> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| e.to_string())?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| e.to_string())?;
    // Takes effect only for a new, empty file (an existing one keeps its page size). Every
    // commit writes each page it changed to the WAL whole, and a task's writes (its accept, its
    // progress, its outcome) change a few rows spread over several indexes: over the same
    // window of `agent_run` load, 16 KiB pages wrote 4–6× the bytes of 4 KiB pages (SQLite's
    // default) and took 1.8× the server CPU per accepted task. The price: a 20 MiB image upload
    // writes four times as many frames, and was accepted about 15 % slower
    // (`benches/README.md`).
    conn.pragma_update(None, "page_size", 4096)
        .map_err(|e| e.to_string())?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(|e| e.to_string())?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!(
            "SQLite refused WAL mode (journal_mode is {mode}); put store.path on a local disk"
        ));
    }
    conn.pragma_update(None, "synchronous", synchronous.as_str())
        .map_err(|e| e.to_string())?;
    // A commit would otherwise copy the whole WAL into the database file (and sync it) once
    // the WAL passes 1000 pages: 20 MiB of images made every `agent_run` pay for that. The
    // writer thread checkpoints when idle instead (`checkpoint`), after answering.
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(|e| e.to_string())?;
    migrate(&mut conn)?;
    Ok(conn)
}

/// Copies committed WAL pages into the database file without waiting for readers (a
/// `PASSIVE` checkpoint). Durability does not depend on it; a failure (e.g. a read-only
/// store) is left for the next write to report.
pub(super) fn checkpoint(conn: &Connection) {
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::debug!(error = %e, "WAL checkpoint failed");
    }
}

/// Opens a connection that only reads (`query_only`); WAL lets it read while the writer
/// commits.
pub(super) fn open_reader(path: &Path) -> Result<Connection, String> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| e.to_string())?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| e.to_string())?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| e.to_string())?;
    Ok(conn)
}

/// Runs every migration newer than the file's `user_version`. Returns the version reached.
pub(super) fn migrate(conn: &mut Connection) -> Result<usize, String> {
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|e| e.to_string())?;
    let current = usize::try_from(current).unwrap_or(usize::MAX);
    let latest = MIGRATIONS.len();
    if current > latest {
        return Err(format!(
            "the database has schema version {current}, newer than this agent-mcp knows \
             ({latest}); run a newer agent-mcp, or set store.path to another file"
        ));
    }
    for (version, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let next = version + 1;
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        tx.execute_batch(sql)
            .and_then(|()| tx.pragma_update(None, "user_version", next as i64))
            .and_then(|()| tx.commit())
            .map_err(|e| format!("schema migration {next} failed: {e}"))?;
    }
    Ok(latest)
}
