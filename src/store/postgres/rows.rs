//! Tasks as rows: the column values of a task, a row back into a task, and the statements
//! several writes share (releasing images, announcing).

use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::CHANNEL;
use crate::store::StoreError;
use crate::store::sqlite::queries::{
    from_ns, input_from_column, input_to_column, state_from, to_i64, to_ns, trace_from_column,
    trace_to_column,
};
use crate::task::{Task, TokenUsage};

/// The columns every task read returns, in [`task_from`]'s order.
pub(super) const TASK_COLUMNS: &str = "id, session_id, owner, request, temperature, state, \
    steps_done, steps_total, current_task, input_tokens, output_tokens, critical_path_tokens, \
    result, created_at_ns, updated_at_ns";

/// What a task read returns: [`TASK_COLUMNS`], then `trace_context` (written once, by the
/// INSERT, never by the UPDATE of [`TaskValues`]) and `input`, in [`task_from`]'s order.
pub(super) const TASK_READ_COLUMNS: &str = "id, session_id, owner, request, temperature, \
    state, steps_done, steps_total, current_task, input_tokens, output_tokens, \
    critical_path_tokens, result, created_at_ns, updated_at_ns, trace_context, input";

/// A task's columns as SQL values: `$1`..`$17` of both the INSERT and the UPDATE
/// ([`TASK_COLUMNS`], `finished_at_ns`, `input`).
pub(super) struct TaskValues {
    pub(super) id: String,
    pub(super) session_id: String,
    pub(super) owner: Option<String>,
    pub(super) request: String,
    pub(super) temperature: Option<f64>,
    pub(super) state: &'static str,
    pub(super) steps_done: i64,
    pub(super) steps_total: i64,
    pub(super) current_task: String,
    pub(super) input: i64,
    pub(super) output: i64,
    pub(super) critical_path: i64,
    pub(super) result: String,
    pub(super) created: i64,
    pub(super) updated: i64,
    pub(super) finished: Option<i64>,
    /// The task's questions and decisions (JSON), `$17`.
    pub(super) task_input: Option<String>,
    /// `$18` of the INSERT only.
    pub(super) trace: Option<String>,
}

impl TaskValues {
    pub(super) fn of(task: &Task) -> Self {
        Self {
            id: task.id.to_string(),
            session_id: task.session_id.to_string(),
            owner: task.owner.clone(),
            request: task.request.clone(),
            temperature: task.temperature,
            state: task.state.as_str(),
            steps_done: i64::from(task.steps_done),
            steps_total: i64::from(task.steps_total),
            current_task: task.current_task.clone(),
            input: to_i64(task.tokens.input),
            output: to_i64(task.tokens.output),
            critical_path: to_i64(task.critical_path_tokens),
            result: task.result.clone(),
            created: to_ns(task.created_at),
            updated: to_ns(task.updated_at),
            finished: task.state.is_terminal().then(|| to_ns(task.updated_at)),
            task_input: input_to_column(&task.input),
            trace: trace_to_column(task.trace.as_ref()),
        }
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 17] {
        [
            &self.id,
            &self.session_id,
            &self.owner,
            &self.request,
            &self.temperature,
            &self.state,
            &self.steps_done,
            &self.steps_total,
            &self.current_task,
            &self.input,
            &self.output,
            &self.critical_path,
            &self.result,
            &self.created,
            &self.updated,
            &self.finished,
            &self.task_input,
        ]
    }
}

pub(super) fn bad_row(what: &str) -> StoreError {
    StoreError::Unavailable(format!("the tasks table holds {what}"))
}

pub(super) fn task_from(row: &tokio_postgres::Row) -> Result<Task, StoreError> {
    let get_uuid = |i: usize| -> Result<Uuid, StoreError> {
        Uuid::parse_str(row.get::<_, &str>(i)).map_err(|_| bad_row("an id that is not a UUID"))
    };
    let state = state_from(row.get::<_, &str>(5)).ok_or_else(|| bad_row("an unknown state"))?;
    let count = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
    let steps = |i: usize| u32::try_from(row.get::<_, i64>(i)).unwrap_or(0);
    Ok(Task {
        id: get_uuid(0)?,
        session_id: get_uuid(1)?,
        owner: row.get(2),
        request: row.get(3),
        temperature: row.get(4),
        images: Vec::new(),
        state,
        steps_done: steps(6),
        steps_total: steps(7),
        current_task: row.get(8),
        tokens: TokenUsage {
            input: count(9),
            output: count(10),
        },
        critical_path_tokens: count(11),
        result: row.get(12),
        created_at: from_ns(row.get(13)),
        updated_at: from_ns(row.get(14)),
        trace: trace_from_column(row.get::<_, Option<&str>>(15)),
        input: input_from_column(row.get::<_, Option<&str>>(16)),
    })
}

/// Unlinks the images of `ids` and deletes those no other task refers to.
pub(super) async fn release_images(
    tx: &deadpool_postgres::Transaction<'_>,
    ids: &[String],
) -> Result<(), tokio_postgres::Error> {
    if ids.is_empty() {
        return Ok(());
    }
    let hashes: Vec<Vec<u8>> = tx
        .query(
            "DELETE FROM task_images WHERE task_id = ANY($1) RETURNING sha256",
            &[&ids],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !hashes.is_empty() {
        tx.execute(
            "DELETE FROM images i WHERE i.sha256 = ANY($1) \
             AND NOT EXISTS (SELECT 1 FROM task_images t WHERE t.sha256 = i.sha256)",
            &[&hashes],
        )
        .await?;
    }
    Ok(())
}

pub(super) async fn notify(
    tx: &deadpool_postgres::Transaction<'_>,
    payload: &str,
) -> Result<(), tokio_postgres::Error> {
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
        .await
        .map(|_| ())
}
