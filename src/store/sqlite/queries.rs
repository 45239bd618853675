//! The blocking SQL behind each store operation. Every function runs on a connection
//! thread; writes that touch more than one row run in one transaction.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, Row, params};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::store::{StoreError, TaskChanges};
use crate::task::input::{Answer, TaskInput};
use crate::task::{Session, Task, TaskImage, TaskState, TokenUsage, Turn, TurnRole};
use crate::telemetry::context::TraceCarrier;

/// An image keyed by the SHA-256 of its decoded bytes, ready to store. `data` is the standard
/// base64 text exactly as the client sent it: that is what Ollama takes, so it is stored as is
/// and never decoded or re-encoded on the way to the model.
pub(in crate::store) struct StoredImage<'a> {
    pub mime_type: &'a str,
    pub sha256: [u8; 32],
    pub data: &'a [u8],
}

impl StoredImage<'_> {
    /// Whether SQLite keeps this image in a file of its own rather than in its row.
    pub(super) fn in_file(&self) -> bool {
        self.data.len() >= super::image_files::FILE_FROM
    }
}

/// Keys a task's images by content. The image layer has normally hashed them already (the one
/// decode on the request path); only images that arrive without a hash (a library caller
/// that bypasses the layer) are decoded here, which also rejects invalid base64.
pub(in crate::store) fn prepare_images(
    images: &[TaskImage],
) -> Result<Vec<StoredImage<'_>>, StoreError> {
    images
        .iter()
        .enumerate()
        .map(|(index, image)| {
            let sha256 = match image.sha256 {
                Some(hash) => hash,
                None => {
                    let data = STANDARD.decode(image.data_base64.as_bytes()).map_err(|e| {
                        StoreError::InvalidImage {
                            index,
                            reason: e.to_string(),
                        }
                    })?;
                    Sha256::digest(&data).into()
                }
            };
            Ok(StoredImage {
                mime_type: &image.mime_type,
                sha256,
                data: image.data_base64.as_bytes(),
            })
        })
        .collect()
}

/// A copy of `task` without its images. Every field is named, so a new `Task` field fails to
/// compile here until the schema stores it too.
pub(super) fn without_images(task: &Task) -> Task {
    Task {
        id: task.id,
        session_id: task.session_id,
        owner: task.owner.clone(),
        request: task.request.clone(),
        temperature: task.temperature,
        images: Vec::new(),
        state: task.state,
        steps_done: task.steps_done,
        steps_total: task.steps_total,
        current_task: task.current_task.clone(),
        tokens: task.tokens,
        critical_path_tokens: task.critical_path_tokens,
        result: task.result.clone(),
        created_at: task.created_at,
        updated_at: task.updated_at,
        trace: task.trace.clone(),
        input: task.input.clone(),
    }
}

const TASK_COLUMNS: &str = "id, session_id, owner, request, temperature, state, steps_done, \
    steps_total, current_task, input_tokens, output_tokens, critical_path_tokens, result, \
    created_at_ns, updated_at_ns";

/// What a task read returns: [`TASK_COLUMNS`], then `trace_context` (written once, with the
/// task) and `input` ([`task_from`]'s order).
const TASK_READ_COLUMNS: &str = "id, session_id, owner, request, temperature, state, \
    steps_done, steps_total, current_task, input_tokens, output_tokens, critical_path_tokens, \
    result, created_at_ns, updated_at_ns, trace_context, input";

/// A task's questions and decisions as the `input` column holds them: JSON, NULL when empty.
pub(in crate::store) fn input_to_column(input: &TaskInput) -> Option<String> {
    (!input.is_empty())
        .then(|| serde_json::to_string(input).ok())
        .flatten()
}

/// The column back into the task's questions; a value that no longer reads is none (the
/// runner of a waiting task then finds no answer and refuses at its timeout).
pub(in crate::store) fn input_from_column(text: Option<&str>) -> TaskInput {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// A task's stored trace context as the column holds it (the carrier's JSON).
pub(in crate::store) fn trace_to_column(trace: Option<&TraceCarrier>) -> Option<String> {
    trace.and_then(|t| serde_json::to_string(t).ok())
}

/// The column back into a carrier; a value that no longer reads is no context (the task runs
/// the same, in a trace of its own).
pub(in crate::store) fn trace_from_column(text: Option<&str>) -> Option<TraceCarrier> {
    text.and_then(|t| serde_json::from_str(t).ok())
}

/// Nanoseconds since the Unix epoch (negative before it), saturating at the i64 range
/// (years 1677 to 2262).
pub(in crate::store) fn to_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

pub(in crate::store) fn from_ns(ns: i64) -> SystemTime {
    let magnitude = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        UNIX_EPOCH.checked_add(magnitude)
    } else {
        UNIX_EPOCH.checked_sub(magnitude)
    }
    .unwrap_or(UNIX_EPOCH)
}

/// Counters are u64 in memory and i64 in SQLite; anything past i64::MAX is pinned there.
pub(in crate::store) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn bad_column(index: usize, what: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, Type::Text, what.to_owned().into())
}

fn uuid_at(row: &Row<'_>, index: usize) -> rusqlite::Result<Uuid> {
    let text: String = row.get(index)?;
    Uuid::parse_str(&text).map_err(|_| bad_column(index, "not a UUID"))
}

pub(in crate::store) fn state_from(text: &str) -> Option<TaskState> {
    Some(match text {
        "queued" => TaskState::Queued,
        "planning" => TaskState::Planning,
        "running" => TaskState::Running,
        "completed" => TaskState::Completed,
        "failed" => TaskState::Failed,
        "cancelled" => TaskState::Cancelled,
        _ => return None,
    })
}

fn task_from(row: &Row<'_>) -> rusqlite::Result<Task> {
    let state: String = row.get(5)?;
    let state = state_from(&state).ok_or_else(|| bad_column(5, "not a task state"))?;
    let count = |i: usize| -> rusqlite::Result<u64> {
        Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
    };
    let steps = |i: usize| -> rusqlite::Result<u32> {
        Ok(u32::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
    };
    Ok(Task {
        id: uuid_at(row, 0)?,
        session_id: uuid_at(row, 1)?,
        owner: row.get(2)?,
        request: row.get(3)?,
        temperature: row.get(4)?,
        images: Vec::new(),
        state,
        steps_done: steps(6)?,
        steps_total: steps(7)?,
        current_task: row.get(8)?,
        tokens: TokenUsage {
            input: count(9)?,
            output: count(10)?,
        },
        critical_path_tokens: count(11)?,
        result: row.get(12)?,
        created_at: from_ns(row.get(13)?),
        updated_at: from_ns(row.get(14)?),
        trace: trace_from_column(row.get::<_, Option<String>>(15)?.as_deref()),
        input: input_from_column(row.get::<_, Option<String>>(16)?.as_deref()),
    })
}

/// The values bound to `?1`..`?18` of the task INSERT, in that order ([`TASK_COLUMNS`], then
/// `finished_at_ns`, `trace_context`, `input`).
fn row_values(id: &str, task: &Task) -> [rusqlite::types::Value; 18] {
    use rusqlite::types::Value;
    [
        Value::from(id.to_owned()),
        Value::from(task.session_id.to_string()),
        Value::from(task.owner.clone()),
        Value::from(task.request.clone()),
        Value::from(task.temperature),
        Value::from(task.state.as_str().to_owned()),
        Value::from(task.steps_done),
        Value::from(task.steps_total),
        Value::from(task.current_task.clone()),
        Value::from(to_i64(task.tokens.input)),
        Value::from(to_i64(task.tokens.output)),
        Value::from(to_i64(task.critical_path_tokens)),
        Value::from(task.result.clone()),
        Value::from(to_ns(task.created_at)),
        Value::from(to_ns(task.updated_at)),
        Value::from(finished_at(task)),
        Value::from(trace_to_column(task.trace.as_ref())),
        Value::from(input_to_column(&task.input)),
    ]
}

/// When a terminal task finished, for retention; `None` while it is unfinished.
fn finished_at(task: &Task) -> Option<i64> {
    task.state.is_terminal().then(|| to_ns(task.updated_at))
}

pub(super) fn create_session(conn: &Connection, session: &Session) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO sessions (id, owner, created_at_ns) VALUES (?1, ?2, ?3)")?
        .execute(params![
            session.id.to_string(),
            session.owner,
            to_ns(session.created_at)
        ])?;
    Ok(())
}

pub(super) fn session(conn: &Connection, id: Uuid) -> rusqlite::Result<Option<Session>> {
    conn.prepare_cached("SELECT id, owner, created_at_ns FROM sessions WHERE id = ?1")?
        .query_row([id.to_string()], |row| {
            Ok(Session {
                id: uuid_at(row, 0)?,
                owner: row.get(1)?,
                created_at: from_ns(row.get(2)?),
            })
        })
        .optional()
}

fn session_exists(conn: &Connection, id: Uuid) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .exists([id.to_string()])
}

/// `None` when the session is unknown.
pub(super) fn session_turns(conn: &Connection, id: Uuid) -> rusqlite::Result<Option<Vec<Turn>>> {
    if !session_exists(conn, id)? {
        return Ok(None);
    }
    let mut stmt =
        conn.prepare_cached("SELECT role, content FROM turns WHERE session_id = ?1 ORDER BY seq")?;
    let turns = stmt
        .query_map([id.to_string()], |row| {
            let role = match row.get::<_, String>(0)?.as_str() {
                "user" => TurnRole::User,
                "assistant" => TurnRole::Assistant,
                _ => return Err(bad_column(0, "not a turn role")),
            };
            Ok(Turn {
                role,
                content: row.get(1)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some(turns))
}

/// `false` when the session is unknown (nothing is written then).
pub(super) fn append_turns(
    conn: &mut Connection,
    id: Uuid,
    turns: &[Turn],
) -> rusqlite::Result<bool> {
    let tx = conn.savepoint()?;
    if !insert_turns(&tx, id, turns)? {
        return Ok(false);
    }
    tx.commit()?;
    Ok(true)
}

/// The statements of [`append_turns`], inside the caller's transaction.
fn insert_turns(conn: &Connection, id: Uuid, turns: &[Turn]) -> rusqlite::Result<bool> {
    if !session_exists(conn, id)? {
        return Ok(false);
    }
    let mut insert =
        conn.prepare_cached("INSERT INTO turns (session_id, role, content) VALUES (?1, ?2, ?3)")?;
    for turn in turns {
        let role = match turn.role {
            TurnRole::User => "user",
            TurnRole::Assistant => "assistant",
        };
        insert.execute(params![id.to_string(), role, turn.content])?;
    }
    Ok(true)
}

/// The task row and its images in one transaction: all of it is stored, or none.
pub(super) fn insert_task(
    conn: &mut Connection,
    task: &Task,
    images: &[StoredImage],
) -> rusqlite::Result<()> {
    let tx = conn.savepoint()?;
    let id = task.id.to_string();
    // The session was looked up before; if a purge removed it since (its last task expired),
    // it comes back empty rather than leaving this task without one.
    tx.prepare_cached(
        "INSERT INTO sessions (id, owner, created_at_ns) VALUES (?1, ?2, ?3) \
         ON CONFLICT (id) DO NOTHING",
    )?
    .execute(params![
        task.session_id.to_string(),
        task.owner,
        to_ns(task.created_at)
    ])?;
    tx.prepare_cached(&format!(
        "INSERT INTO tasks ({TASK_COLUMNS}, finished_at_ns, trace_context, input) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
    ))?
    .execute(rusqlite::params_from_iter(row_values(&id, task)))?;
    // A task that is already terminal holds no images (they would never be released).
    if !task.state.is_terminal() {
        let mut keep = tx.prepare_cached(
            "INSERT INTO images (sha256, data, in_file) VALUES (?1, ?2, ?3) \
             ON CONFLICT (sha256) DO NOTHING",
        )?;
        let mut link = tx.prepare_cached(
            "INSERT INTO task_images (task_id, position, mime_type, sha256) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for (position, image) in images.iter().enumerate() {
            // A file image's bytes are in its file (written before this commits); its row
            // only says so.
            let (data, in_file) = match image.in_file() {
                true => (&[][..], 1),
                false => (image.data, 0),
            };
            keep.execute(params![image.sha256, data, in_file])?;
            link.execute(params![id, position as i64, image.mime_type, image.sha256])?;
        }
    }
    tx.commit()
}

/// One image of a task as its row says: the base64 text itself, or the hash of its file.
pub(super) enum ImageRow {
    Inline { mime_type: String, data: String },
    InFile { mime_type: String, sha256: [u8; 32] },
}

impl ImageRow {
    /// The image, reading a file image's text from `files`.
    pub(super) fn load(
        self,
        files: &super::image_files::ImageFiles,
    ) -> Result<TaskImage, StoreError> {
        let (mime_type, data) = match self {
            ImageRow::Inline { mime_type, data } => (mime_type, data),
            ImageRow::InFile { mime_type, sha256 } => (mime_type, files.read(&sha256)?),
        };
        Ok(TaskImage {
            mime_type,
            data_base64: Arc::new(data),
            sha256: None,
        })
    }
}

pub(super) fn task(conn: &Connection, id: Uuid) -> rusqlite::Result<Option<Task>> {
    conn.prepare_cached(&format!(
        "SELECT {TASK_READ_COLUMNS} FROM tasks WHERE id = ?1"
    ))?
    .query_row([id.to_string()], task_from)
    .optional()
}

/// `None` when the task is unknown. File images come back as their hash, for the caller to
/// read ([`ImageRow::load`]).
pub(super) fn task_images(conn: &Connection, id: Uuid) -> rusqlite::Result<Option<Vec<ImageRow>>> {
    let images = conn
        .prepare_cached(
            "SELECT ti.mime_type, i.data, i.in_file, i.sha256 FROM task_images ti \
             JOIN images i ON i.sha256 = ti.sha256 \
             WHERE ti.task_id = ?1 ORDER BY ti.position",
        )?
        .query_map([id.to_string()], |row| {
            let mime_type = row.get(0)?;
            if row.get::<_, i64>(2)? != 0 {
                return Ok(ImageRow::InFile {
                    mime_type,
                    sha256: row.get(3)?,
                });
            }
            Ok(ImageRow::Inline {
                mime_type,
                data: String::from_utf8_lossy(row.get_ref(1)?.as_blob()?).into_owned(),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if images.is_empty()
        && !conn
            .prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?
            .exists([id.to_string()])?
    {
        return Ok(None);
    }
    Ok(Some(images))
}

/// Writes what changes over a task's life, inside the caller's transaction: `false` when the
/// task is unknown. A terminal state releases the task's images.
fn update_row(tx: &Connection, task: &Task) -> rusqlite::Result<bool> {
    let id = task.id.to_string();
    // Only the columns that change over a task's life: SQLite rewrites the entries of every
    // index whose column is SET, and `tasks_by_session` (keyed by a random UUID) would cost a
    // page written to the WAL on each progress save.
    let changed = tx
        .prepare_cached(
            "UPDATE tasks SET state = ?2, steps_done = ?3, steps_total = ?4, current_task = ?5, \
             input_tokens = ?6, output_tokens = ?7, critical_path_tokens = ?8, result = ?9, \
             updated_at_ns = ?10, \
             finished_at_ns = CASE WHEN ?11 IS NULL THEN NULL \
                                   ELSE COALESCE(finished_at_ns, ?11) END, \
             input = ?12 \
             WHERE id = ?1",
        )?
        .execute(params![
            id,
            task.state.as_str(),
            task.steps_done,
            task.steps_total,
            task.current_task,
            to_i64(task.tokens.input),
            to_i64(task.tokens.output),
            to_i64(task.critical_path_tokens),
            task.result,
            to_ns(task.updated_at),
            finished_at(task),
            input_to_column(&task.input),
        ])?;
    if changed == 0 {
        return Ok(false);
    }
    if task.state.is_terminal() {
        release_images(tx, &id)?;
    }
    Ok(true)
}

/// What [`finish_task`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// The task (and, with turns, its session): written.
    Both,
    /// No such task: nothing written.
    NoTask,
    /// The task, but turns for a session that is gone: nothing written.
    NoSession,
}

/// The task's row and `turns` appended to its session, in one transaction: both or neither.
pub(super) fn finish_task(
    conn: &mut Connection,
    task: &Task,
    turns: &[Turn],
) -> rusqlite::Result<Found> {
    let tx = conn.savepoint()?;
    if !update_row(&tx, task)? {
        return Ok(Found::NoTask);
    }
    if !turns.is_empty() && !insert_turns(&tx, task.session_id, turns)? {
        return Ok(Found::NoSession);
    }
    tx.commit()?;
    Ok(Found::Both)
}

/// Records `answer` for `key` of task `id` unless the key has one: `Some(recorded)`, or
/// `None` when the task is unknown.
pub(super) fn answer_input(
    conn: &Connection,
    id: Uuid,
    key: &str,
    answer: &Answer,
) -> rusqlite::Result<Option<bool>> {
    let id = id.to_string();
    let text = serde_json::to_string(answer).map_err(|e| bad_column(2, &e.to_string()))?;
    let added = conn
        .prepare_cached(
            "INSERT INTO input_answers (task_id, key, answer) \
             SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?1) \
             ON CONFLICT (task_id, key) DO NOTHING",
        )?
        .execute(params![id, key, text])?;
    if added > 0 {
        return Ok(Some(true));
    }
    let known = conn
        .prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?
        .exists([&id])?;
    Ok(known.then_some(false))
}

/// The answer recorded for `key` of task `id`; one that no longer reads is none.
pub(super) fn input_answer(
    conn: &Connection,
    id: Uuid,
    key: &str,
) -> rusqlite::Result<Option<Answer>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT answer FROM input_answers WHERE task_id = ?1 AND key = ?2")?
        .query_row(params![id.to_string(), key], |row| row.get(0))
        .optional()?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

/// Keeps task `id`'s changes (not undone); `false` when the task is unknown.
pub(super) fn save_changes(conn: &Connection, id: Uuid, files: &str) -> rusqlite::Result<bool> {
    let saved = conn
        .prepare_cached(
            "INSERT INTO task_changes (task_id, files, undone) \
             SELECT ?1, ?2, 0 WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?1) \
             ON CONFLICT (task_id) DO UPDATE SET files = excluded.files, undone = 0",
        )?
        .execute(params![id.to_string(), files])?;
    Ok(saved > 0)
}

pub(super) fn task_changes(conn: &Connection, id: Uuid) -> rusqlite::Result<Option<TaskChanges>> {
    conn.prepare_cached("SELECT files, undone FROM task_changes WHERE task_id = ?1")?
        .query_row([id.to_string()], |row| {
            Ok(TaskChanges::from_json(
                &row.get::<_, String>(0)?,
                row.get::<_, bool>(1)?,
            ))
        })
        .optional()
}

pub(super) fn mark_undone(conn: &Connection, id: Uuid) -> rusqlite::Result<bool> {
    let marked = conn
        .prepare_cached("UPDATE task_changes SET undone = 1 WHERE task_id = ?1 AND undone = 0")?
        .execute([id.to_string()])?;
    Ok(marked > 0)
}

pub(super) fn recent_tasks(
    conn: &Connection,
    owner: Option<&str>,
    limit: usize,
) -> rusqlite::Result<Vec<Task>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    conn.prepare_cached(&format!(
        "SELECT {TASK_READ_COLUMNS} FROM tasks WHERE owner IS ?1 ORDER BY seq DESC LIMIT ?2"
    ))?
    .query_map(params![owner, limit], task_from)?
    .collect()
}

/// Unlinks a task's images and deletes those no other task refers to.
fn release_images(conn: &Connection, task_id: &str) -> rusqlite::Result<()> {
    let hashes = conn
        .prepare_cached("DELETE FROM task_images WHERE task_id = ?1 RETURNING sha256")?
        .query_map([task_id], |row| row.get::<_, Vec<u8>>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut drop_unused = conn.prepare_cached(
        "DELETE FROM images WHERE sha256 = ?1 \
         AND NOT EXISTS (SELECT 1 FROM task_images WHERE sha256 = ?1)",
    )?;
    for hash in hashes {
        drop_unused.execute([hash])?;
    }
    Ok(())
}

pub(super) fn tasks_in_state(conn: &Connection, state: TaskState) -> rusqlite::Result<Vec<Task>> {
    conn.prepare_cached(&format!(
        "SELECT {TASK_READ_COLUMNS} FROM tasks WHERE state = ?1 ORDER BY seq"
    ))?
    .query_map([state.as_str()], task_from)?
    .collect()
}

/// Deletes up to `limit` terminal tasks that finished before `cutoff_ns`, with anything they
/// still link to, and the sessions (with their turns) left without any task. Returns how many
/// tasks went.
pub(super) fn purge_batch(
    conn: &mut Connection,
    cutoff_ns: i64,
    limit: u32,
) -> rusqlite::Result<u64> {
    let tx = conn.savepoint()?;
    let gone = tx
        .prepare_cached(
            "DELETE FROM tasks WHERE seq IN (\
                 SELECT seq FROM tasks WHERE finished_at_ns < ?1 \
                 AND state IN ('completed', 'failed', 'cancelled') LIMIT ?2) \
             RETURNING id, session_id",
        )?
        .query_map(params![cutoff_ns, limit], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut sessions: Vec<&str> = Vec::with_capacity(gone.len());
    for (id, session) in &gone {
        release_images(&tx, id)?;
        tx.prepare_cached("DELETE FROM input_answers WHERE task_id = ?1")?
            .execute([id])?;
        tx.prepare_cached("DELETE FROM task_changes WHERE task_id = ?1")?
            .execute([id])?;
        sessions.push(session);
    }
    sessions.sort_unstable();
    sessions.dedup();
    {
        let mut forget = tx.prepare_cached(
            "DELETE FROM sessions WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM tasks WHERE session_id = ?1)",
        )?;
        let mut forget_turns = tx.prepare_cached("DELETE FROM turns WHERE session_id = ?1")?;
        for session in sessions {
            if forget.execute([session])? > 0 {
                forget_turns.execute([session])?;
            }
        }
    }
    tx.commit()?;
    Ok(gone.len() as u64)
}

/// Removes image links of tasks that no longer exist and images nothing links to. Cheap: only
/// unfinished tasks have links.
pub(super) fn sweep_images(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.savepoint()?;
    tx.execute(
        "DELETE FROM task_images WHERE task_id NOT IN (SELECT id FROM tasks)",
        [],
    )?;
    tx.execute(
        "DELETE FROM images WHERE sha256 NOT IN (SELECT sha256 FROM task_images)",
        [],
    )?;
    tx.commit()
}
