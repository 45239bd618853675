//! Writes of a task's life (progress, its outcome, the turns its answer adds to its session),
//! fenced: a task this process holds is written only while its claim is still this process's,
//! checked in the same transaction as the write.
//!
//! The check is the claim's attempt number, its owner and its lease (`lease_until` still ahead
//! on the database clock). So a write held up by a partition and delivered after another
//! instance ended the task, or merely after the lease lapsed, changes nothing; nor does any
//! write once this process gave the lease up ([`crate::store::LeaseLoss`]), which is refused
//! before it is sent.

use tokio_postgres::types::ToSql;

use super::CHANNEL;
use super::PostgresStore;
use super::rows::{TaskValues, notify, release_images};
use crate::store::StoreError;
use crate::task::{Task, Turn, TurnRole};

/// What changes over a task's life. A terminal write ends the claim.
const SET: &str = "session_id = $2, owner = $3, request = $4, temperature = $5, state = $6, \
     steps_done = $7, steps_total = $8, current_task = $9, input_tokens = $10, \
     output_tokens = $11, critical_path_tokens = $12, result = $13, created_at_ns = $14, \
     updated_at_ns = $15, \
     finished_at_ns = CASE WHEN $16::bigint IS NULL THEN NULL \
                           ELSE COALESCE(finished_at_ns, $16::bigint) END, \
     lease_owner = CASE WHEN $16::bigint IS NULL THEN lease_owner END, \
     lease_until = CASE WHEN $16::bigint IS NULL THEN lease_until END, \
     cancel_requested = CASE WHEN $16::bigint IS NULL THEN cancel_requested ELSE false END, \
     input = $17";

/// Writes `task` and appends `turns` to its session, in one transaction: both or neither.
pub(super) async fn write(
    store: &PostgresStore,
    task: &Task,
    turns: &[Turn],
) -> Result<(), StoreError> {
    let claim = match store.held(task.id) {
        Some(lease) if lease.loss().is_some() => return Err(StoreError::Fenced(task.id)),
        Some(lease) => Some(lease.attempt()),
        None => None,
    };
    let values = TaskValues::of(task);
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(|e| store.err(e))?;
    let changed = match claim {
        Some(attempt) => {
            // clock_timestamp(): the lease must still run when the row is written, not only
            // when the transaction began.
            let sql = format!(
                "WITH u AS (UPDATE tasks SET {SET} WHERE id = $1 AND attempt = $18 \
                 AND lease_owner = $19 AND lease_until > clock_timestamp() RETURNING id) \
                 SELECT pg_notify('{CHANNEL}', 'changed:' || id) FROM u"
            );
            let stmt = tx.prepare_cached(&sql).await.map_err(|e| store.err(e))?;
            let mut params: Vec<&(dyn ToSql + Sync)> = values.params().to_vec();
            params.push(&attempt);
            params.push(&store.instance);
            tx.query(&stmt, &params)
                .await
                .map_err(|e| store.err(e))?
                .len()
        }
        // Not held here: written only while nobody holds it and it is not active, and an
        // ended task keeps its end (a late write of a process that lost it cannot revive it).
        None => {
            let sql = format!(
                "WITH u AS (UPDATE tasks SET {SET} WHERE id = $1 AND lease_owner IS NULL \
                 AND state NOT IN ('planning', 'running') \
                 AND (state NOT IN ('completed', 'failed', 'cancelled') OR state = $6) \
                 RETURNING id) \
                 SELECT pg_notify('{CHANNEL}', 'changed:' || id) FROM u"
            );
            let stmt = tx.prepare_cached(&sql).await.map_err(|e| store.err(e))?;
            tx.query(&stmt, &values.params())
                .await
                .map_err(|e| store.err(e))?
                .len()
        }
    };
    if changed == 0 {
        let row = tx
            .query_opt(
                "SELECT state, result, attempt FROM tasks WHERE id = $1",
                &[&values.id],
            )
            .await
            .map_err(|e| store.err(e))?;
        return match row {
            None => Err(StoreError::UnknownTask(task.id)),
            // A retry of this very outcome, whose first try committed but whose answer was
            // lost with the connection: it is there already (with its turns).
            Some(row)
                if task.state.is_terminal()
                    && claim == Some(row.get::<_, i32>(2))
                    && row.get::<_, &str>(0) == values.state
                    && row.get::<_, &str>(1) == values.result =>
            {
                Ok(())
            }
            Some(_) => Err(StoreError::Fenced(task.id)),
        };
    }
    if !turns.is_empty() {
        append(store, &tx, task, turns).await?;
    }
    if task.state.is_terminal() {
        release_images(&tx, std::slice::from_ref(&values.id))
            .await
            .map_err(|e| store.err(e))?;
        // The slot is free: the next task can be claimed.
        notify(&tx, "freed").await.map_err(|e| store.err(e))?;
    }
    tx.commit().await.map_err(|e| store.err(e))
}

/// Appends `turns` to `task`'s session within `tx`.
async fn append(
    store: &PostgresStore,
    tx: &deadpool_postgres::Transaction<'_>,
    task: &Task,
    turns: &[Turn],
) -> Result<(), StoreError> {
    append_turns(tx, &task.session_id.to_string(), turns)
        .await
        .map_err(|e| store.err(e))?
        .then_some(())
        .ok_or(StoreError::UnknownSession(task.session_id))
}

/// Appends `turns` to session `id` within `tx`; `false` (nothing written) when the session is
/// unknown.
pub(super) async fn append_turns(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    turns: &[Turn],
) -> Result<bool, tokio_postgres::Error> {
    let known = tx
        .query_opt("SELECT 1 FROM sessions WHERE id = $1 FOR SHARE", &[&id])
        .await?
        .is_some();
    if !known {
        return Ok(false);
    }
    let roles: Vec<&str> = turns
        .iter()
        .map(|t| match t.role {
            TurnRole::User => "user",
            TurnRole::Assistant => "assistant",
        })
        .collect();
    let contents: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
    // One statement for all turns; WITH ORDINALITY keeps their order in `seq`.
    tx.execute(
        "INSERT INTO turns (session_id, role, content) \
         SELECT $1, r, c FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS x(r, c, n) \
         ORDER BY n",
        &[&id, &roles, &contents],
    )
    .await?;
    Ok(true)
}
