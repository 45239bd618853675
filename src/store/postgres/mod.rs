//! PostgreSQL: one database that several agent-mcp processes share.
//!
//! Everything the SQLite store keeps, in the same shape (tables, images once per content
//! hash, nanosecond timestamps), plus the shared queue ([`SharedQueue`], `queue.rs`):
//!
//! - **One active task** in the whole application: the partial unique index `one_active_task`
//!   admits at most one row that is claimed, planning or running, whoever writes it.
//! - **FIFO**: a claim takes the queued task with the lowest `seq` (acceptance order), under a
//!   transaction advisory lock so claims never race each other.
//! - **Leases**: a claim sets `lease_owner` (this process) and `lease_until` (the database
//!   clock plus `store.lease`); the heartbeat (`heartbeat.rs`, a thread of its own) renews it
//!   every sixth of the lease, and the process stops the task's work when it cannot
//!   ([`crate::store::lease`]). Every claim bumps `attempt`, and every write of a claimed task
//!   checks the attempt, the owner and the lease in its own transaction (`fenced.rs`), so a
//!   process whose lease lapsed cannot change anything ([`StoreError::Fenced`]).
//! - **Lapsed leases**: the next claim by any process ends a planning/running task whose
//!   lease lapsed `failed` ([`super::INTERRUPTED_INSTANCE_LOST`]); a task claimed but not yet
//!   started goes back to the queue (nothing of it ran). Nothing that ran is run again.
//! - **Deadlines**: every call is bounded by `store.timeout` (waiting for a connection,
//!   connecting, the statements), and the server cancels a statement past it; it ends a
//!   session left idle in a transaction for `store.lease`, so a process cut off or frozen
//!   mid-transaction does not hold locks the others wait for.
//! - **Announcements** on the channel `agent_mcp` (LISTEN/NOTIFY): `queued` (a task was
//!   queued), `freed` (a task ended: the slot is free), `cancel:<id>`, `changed:<id>`. See
//!   `listen.rs`.
//! - **Health** ([`StoreHealth`]): every call, the heartbeat's renewals, the LISTEN connection
//!   and a probe of the heartbeat thread's own (`probe.rs`, every [`super::PROBE_EVERY`]) say
//!   whether the database answers, so readiness shows an outage at once, calls or not.

mod fenced;
#[cfg(test)]
mod health_tests;
mod heartbeat;
mod listen;
mod probe;
mod queue;
mod rows;
mod schema;
#[cfg(test)]
mod test_server;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::{Notify, broadcast};
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::lease::{Lease, LeaseTiming};
use super::sqlite::queries::{from_ns, prepare_images, to_ns};
use super::{SharedEvent, SharedQueue, StoreError, StoreHealth, TaskChanges, TaskStore};
use crate::config::StoreConfig;
use crate::task::input::Answer;
use crate::task::{Session, Task, TaskImage, TaskState, Turn, TurnRole};
use rows::{
    TASK_COLUMNS, TASK_READ_COLUMNS, TaskValues, bad_row, notify, release_images, task_from,
};

/// The LISTEN/NOTIFY channel of every announcement.
pub(crate) const CHANNEL: &str = "agent_mcp";
/// Advisory lock keys: claims (transaction-scoped) and the retention purge (one instance).
const CLAIM_LOCK: i64 = 0x6167_656e_7401;
const PURGE_LOCK: i64 = 0x6167_656e_7402;
/// Connections per process: the hot paths (agent_status, agent_run) are one or a few round
/// trips each, so a small pool serves many concurrent requests.
const POOL_SIZE: usize = 16;
/// How long a start waits for another instance's schema migration.
const MIGRATION_DEADLINE: Duration = Duration::from_secs(60);
/// Finished tasks deleted per purge transaction, so each stays well inside `store.timeout`.
const PURGE_BATCH: i64 = 500;

/// The task store in PostgreSQL.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    /// `store.url` with its password redacted, for messages.
    shown: Arc<str>,
    /// This process, as `lease_owner` of the task it claims.
    instance: String,
    timing: LeaseTiming,
    /// `store.timeout`: the deadline of every call.
    timeout: Duration,
    /// The leases this process holds, shared with the heartbeat thread.
    claims: heartbeat::Claims,
    /// Asks the heartbeat for a renewal now.
    renew_now: Arc<Notify>,
    events: broadcast::Sender<SharedEvent>,
    listener: JoinHandle<()>,
    /// Ends the heartbeat thread.
    heartbeat: CancellationToken,
    /// Whether the database answers, as every call, the heartbeat, the LISTEN connection and
    /// the probe last saw it.
    health: StoreHealth,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
        self.heartbeat.cancel();
    }
}

/// `config` with the server-side deadlines of our sessions added to its `options`: a statement
/// is cancelled past `statement`, and a session left idle in a transaction past `idle` is
/// ended (with its locks), which is what frees the others when a process is cut off or frozen
/// mid-transaction. `idle` is the lease: such a process's lease lapses about then anyway, and
/// a shorter one would end the transactions of a process that is merely starved of CPU.
fn with_server_deadlines(
    mut config: tokio_postgres::Config,
    statement: Duration,
    idle: Duration,
) -> tokio_postgres::Config {
    let ours = format!(
        "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
        statement.as_millis().max(1),
        idle.as_millis().max(1)
    );
    let options = match config.get_options() {
        Some(theirs) if !theirs.trim().is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    config.options(options);
    config
}

impl PostgresStore {
    /// Connects to `config.url`, migrates the schema (one instance at a time), starts
    /// listening for other instances' announcements and starts the heartbeat thread. Needs a
    /// Tokio runtime.
    pub async fn open(config: &StoreConfig) -> Result<PostgresStore, StoreError> {
        let url = config.url.as_deref().ok_or_else(|| {
            StoreError::Unavailable(
                "store.backend is postgres but store.url is not set; set it to \
                 postgres://user:password@host:port/dbname"
                    .into(),
            )
        })?;
        let shown: Arc<str> = crate::config::redact_url(url).into();
        let mut pg: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::Unavailable(format!("store.url \"{shown}\" is not usable: {e}"))
        })?;
        let timeout = config.timeout;
        let timing = LeaseTiming::of(config.lease);
        pg.connect_timeout(timeout);
        if pg.get_application_name().is_none() {
            pg.application_name("agent-mcp");
        }
        migrate(&pg, &shown, timeout).await?;
        let manager = Manager::from_config(
            with_server_deadlines(pg.clone(), timeout, config.lease),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .recycle_timeout(Some(timeout))
            .build()
            .map_err(|e| StoreError::Unavailable(format!("PostgreSQL pool: {e}")))?;
        let (events, _) = broadcast::channel(1024);
        let health = StoreHealth::default();
        let listener = tokio::spawn(listen::run(
            with_server_deadlines(pg.clone(), timeout, config.lease),
            shown.clone(),
            events.clone(),
            timeout,
            health.clone(),
        ));
        let instance = format!("{}-{}", std::process::id(), Uuid::new_v4().simple());
        let claims: heartbeat::Claims = Arc::new(Mutex::new(HashMap::new()));
        let renew_now = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let mut probe = with_server_deadlines(pg.clone(), timeout, config.lease);
        probe.connect_timeout(timeout);
        let mut beat = with_server_deadlines(pg, timing.fresh_for, config.lease);
        beat.connect_timeout(timing.fresh_for);
        heartbeat::spawn(heartbeat::Setup {
            config: beat,
            probe: probe::Setup {
                config: probe,
                shown: shown.clone(),
                timeout,
                health: health.clone(),
            },
            shown: shown.clone(),
            instance: instance.clone(),
            timing,
            claims: claims.clone(),
            events: events.clone(),
            wake: renew_now.clone(),
            stop: stop.clone(),
            health: health.clone(),
        })
        .map_err(|e| StoreError::Unavailable(format!("cannot start the heartbeat thread: {e}")))?;
        Ok(PostgresStore {
            pool,
            shown,
            instance,
            timing,
            timeout,
            claims,
            renew_now,
            events,
            listener,
            heartbeat: stop,
            health,
        })
    }

    /// This process's name as the owner of the leases it takes.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| {
            let why = format!(
                "PostgreSQL at {} is unreachable ({e}); check that it runs and that store.url \
                 is right",
                self.shown
            );
            self.health.failed(why.clone());
            StoreError::Unavailable(why)
        })
    }

    /// `work` within `store.timeout`; past it, a store error that says so. `what` names the
    /// work in the message.
    async fn bounded<T>(
        &self,
        what: &str,
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.bounded_for(self.timeout, what, work).await
    }

    /// Also what [`StoreHealth`] learns from the request path: an answer (a result, or an
    /// error the database itself gave about the data) or a failure to reach it (recorded
    /// where it is seen: [`Self::client`], [`Self::err`], or the deadline here).
    async fn bounded_for<T>(
        &self,
        deadline: Duration,
        what: &str,
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let sent = Instant::now();
        let outcome = match tokio::time::timeout(deadline, work).await {
            Ok(outcome) => outcome,
            Err(_) => {
                let why = format!(
                    "PostgreSQL at {} did not answer within {} (to {what}); check that it runs \
                     and that the network to it is up (store.timeout bounds each call)",
                    self.shown,
                    humantime::format_duration(deadline)
                );
                self.health.failed(why.clone());
                return Err(StoreError::Unavailable(why));
            }
        };
        if !matches!(outcome, Err(StoreError::Unavailable(_))) {
            self.health.answered(sent);
        }
        outcome
    }

    fn err(&self, e: tokio_postgres::Error) -> StoreError {
        let why = describe_text(&self.shown, &e);
        if is_outage(&e) {
            self.health.failed(why.clone());
        }
        StoreError::Unavailable(why)
    }

    /// The first column of the one row `sql` answers, `params` as `$1`….
    async fn value<T>(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<T, StoreError>
    where
        T: for<'a> FromSql<'a>,
    {
        let client = self.client().await?;
        let row = client
            .query_one(sql, params)
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.get(0))
    }

    /// [`Self::value`] of a statement prepared once and kept for the next call.
    async fn cached_value<T>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<T, StoreError>
    where
        T: for<'a> FromSql<'a>,
    {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(|e| self.err(e))?;
        let row = client
            .query_one(&stmt, params)
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.get(0))
    }

    /// Every row of `sql` (a cached statement) with `id` as `$1`.
    async fn rows_by_id(
        &self,
        sql: &str,
        id: Uuid,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(|e| self.err(e))?;
        client
            .query(&stmt, &[&id.to_string()])
            .await
            .map_err(|e| self.err(e))
    }

    fn claims(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Lease>> {
        // Every critical section is one map operation, so a poisoned lock holds a consistent map.
        self.claims.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn hold(&self, lease: Lease) {
        self.claims().insert(lease.task(), lease);
    }

    /// The lease of a task this process holds.
    fn held(&self, id: Uuid) -> Option<Lease> {
        self.claims().get(&id).cloned()
    }

    fn lease_secs(&self) -> f64 {
        self.timing.lease.as_secs_f64()
    }

    /// One purge transaction: `None` when another instance is purging.
    async fn purge_batch(&self, cutoff: i64) -> Result<Option<i64>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        // One instance purges at a time; the others find the lock taken and skip this round.
        let ours: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&PURGE_LOCK])
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        if !ours {
            return Ok(None);
        }
        let gone = tx
            .query(
                "DELETE FROM tasks WHERE seq IN (SELECT seq FROM tasks \
                     WHERE finished_at_ns < $1 AND state IN ('completed', 'failed', 'cancelled') \
                     ORDER BY finished_at_ns LIMIT $2) \
                 RETURNING id, session_id",
                &[&cutoff, &PURGE_BATCH],
            )
            .await
            .map_err(|e| self.err(e))?;
        let ids: Vec<String> = gone.iter().map(|r| r.get(0)).collect();
        let mut sessions: Vec<String> = gone.iter().map(|r| r.get(1)).collect();
        sessions.sort_unstable();
        sessions.dedup();
        release_images(&tx, &ids).await.map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM input_answers WHERE task_id = ANY($1)", &[&ids])
            .await
            .map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM task_changes WHERE task_id = ANY($1)", &[&ids])
            .await
            .map_err(|e| self.err(e))?;
        tx.execute(
            "WITH s AS (DELETE FROM sessions s WHERE s.id = ANY($1) \
                 AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.session_id = s.id) RETURNING id) \
             DELETE FROM turns WHERE session_id IN (SELECT id FROM s)",
            &[&sessions],
        )
        .await
        .map_err(|e| self.err(e))?;
        // A bucket that is full again is no different from a missing one.
        tx.execute(
            "DELETE FROM rate_limits WHERE tat < extract(epoch FROM clock_timestamp())",
            &[],
        )
        .await
        .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(Some(i64::try_from(ids.len()).unwrap_or(i64::MAX)))
    }
}

/// Brings the schema up to date on a connection of its own. The connection is bounded by
/// `timeout`; waiting for another instance's migration by [`MIGRATION_DEADLINE`].
async fn migrate(
    pg: &tokio_postgres::Config,
    shown: &str,
    timeout: Duration,
) -> Result<(), StoreError> {
    let unanswered = |what: &str, after: Duration| {
        StoreError::Unavailable(format!(
            "PostgreSQL at {shown} did not answer within {} ({what}); check that it runs and \
             that store.url is right",
            humantime::format_duration(after)
        ))
    };
    let (mut client, conn) = tokio::time::timeout(timeout, pg.connect(NoTls))
        .await
        .map_err(|_| unanswered("connecting", timeout))?
        .map_err(|e| describe(shown, &e))?;
    let driver = tokio::spawn(conn);
    let migrated = tokio::time::timeout(MIGRATION_DEADLINE, schema::migrate(&mut client)).await;
    drop(client);
    match migrated {
        Ok(migrated) => {
            let _ = driver.await;
            migrated.map_err(|e| StoreError::Unavailable(format!("PostgreSQL at {shown}: {e}")))
        }
        Err(_) => {
            driver.abort();
            Err(unanswered("migrating the schema", MIGRATION_DEADLINE))
        }
    }
}

/// Whether `e` says the database cannot be reached or cannot do its work now (as opposed to
/// an error about the statement or the data, which it answered): the connection is gone or
/// failed (an I/O error underneath), or the server says it is shutting down, starting, out of
/// resources, read-only or broken.
pub(super) fn is_outage(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return ["08", "53", "58", "XX"].iter().any(|c| code.starts_with(c))
            || matches!(code, "57P01" | "57P02" | "57P03" | "25006");
    }
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

fn describe(shown: &str, e: &tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(describe_text(shown, e))
}

/// What [`describe`] says, as text (what [`StoreHealth`] shows).
pub(super) fn describe_text(shown: &str, e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "PostgreSQL at {shown}: {} (SQLSTATE {})",
            db.message(),
            db.code().code()
        ),
        None => {
            let mut message = format!("PostgreSQL at {shown}: {e}");
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            if e.is_closed() || message.contains("connecting") {
                message.push_str("; check that PostgreSQL runs there and that store.url is right");
            }
            message
        }
    }
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        self.bounded("store the session", async {
            let client = self.client().await?;
            let stmt = client
                .prepare_cached(
                    "INSERT INTO sessions (id, owner, created_at_ns) VALUES ($1, $2, $3)",
                )
                .await
                .map_err(|e| self.err(e))?;
            client
                .execute(
                    &stmt,
                    &[
                        &session.id.to_string(),
                        &session.owner,
                        &to_ns(session.created_at),
                    ],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(())
        })
        .await
    }

    async fn session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        self.bounded("read the session", async {
            let sql = "SELECT owner, created_at_ns FROM sessions WHERE id = $1";
            let row = self.rows_by_id(sql, id).await?.into_iter().next();
            Ok(row.map(|row| Session {
                id,
                owner: row.get(0),
                created_at: from_ns(row.get(1)),
            }))
        })
        .await
    }

    async fn session_turns(&self, id: Uuid) -> Result<Vec<Turn>, StoreError> {
        self.bounded("read the session history", async {
            let sql = "SELECT t.role, t.content FROM sessions s \
                       LEFT JOIN turns t ON t.session_id = s.id \
                       WHERE s.id = $1 ORDER BY t.seq";
            let rows = self.rows_by_id(sql, id).await?;
            if rows.is_empty() {
                return Err(StoreError::UnknownSession(id));
            }
            let mut turns = Vec::with_capacity(rows.len());
            for row in rows {
                let Some(role) = row.get::<_, Option<&str>>(0) else {
                    continue; // the session's row without any turn
                };
                let role = match role {
                    "user" => TurnRole::User,
                    "assistant" => TurnRole::Assistant,
                    _ => return Err(bad_row("a turn role that is not user or assistant")),
                };
                turns.push(Turn {
                    role,
                    content: row.get(1),
                });
            }
            Ok(turns)
        })
        .await
    }

    /// Not fenced: the turns of a task this process holds go with its outcome
    /// ([`TaskStore::finish_task`]).
    async fn append_turns(&self, id: Uuid, turns: &[Turn]) -> Result<(), StoreError> {
        self.bounded("append to the session history", async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            let known = fenced::append_turns(&tx, &id.to_string(), turns)
                .await
                .map_err(|e| self.err(e))?;
            if !known {
                return Err(StoreError::UnknownSession(id));
            }
            tx.commit().await.map_err(|e| self.err(e))
        })
        .await
    }

    async fn insert_task(&self, task: &Task) -> Result<(), StoreError> {
        self.bounded("store the task", async {
            let images = prepare_images(&task.images)?;
            let values = TaskValues::of(task);
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            // Locks the session row if it is there, so a purge cannot take it from under this
            // task; brings it back empty if a purge removed it since it was looked up.
            let session = tx
                .prepare_cached(
                    "INSERT INTO sessions (id, owner, created_at_ns) VALUES ($1, $2, $3) \
                     ON CONFLICT (id) DO UPDATE SET owner = sessions.owner",
                )
                .await
                .map_err(|e| self.err(e))?;
            tx.execute(
                &session,
                &[&values.session_id, &values.owner, &values.created],
            )
            .await
            .map_err(|e| self.err(e))?;
            let insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO tasks ({TASK_COLUMNS}, finished_at_ns, input, trace_context) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
                ))
                .await
                .map_err(|e| self.err(e))?;
            let mut params = values.params().to_vec();
            params.push(&values.trace);
            tx.execute(&insert, &params)
                .await
                .map_err(|e| self.err(e))?;
            // A task that is already terminal holds no images (they would never be released).
            if !task.state.is_terminal() && !images.is_empty() {
                let hashes: Vec<&[u8]> = images.iter().map(|i| &i.sha256[..]).collect();
                let data: Vec<&[u8]> = images.iter().map(|i| i.data).collect();
                let mimes: Vec<&str> = images.iter().map(|i| i.mime_type).collect();
                tx.execute(
                    "INSERT INTO images (sha256, data) \
                     SELECT DISTINCT ON (h) h, d FROM unnest($1::bytea[], $2::bytea[]) AS x(h, d) \
                     ON CONFLICT (sha256) DO NOTHING",
                    &[&hashes, &data],
                )
                .await
                .map_err(|e| self.err(e))?;
                tx.execute(
                    "INSERT INTO task_images (task_id, position, mime_type, sha256) \
                     SELECT $1, (n - 1)::int, m, h \
                     FROM unnest($2::text[], $3::bytea[]) WITH ORDINALITY AS x(m, h, n)",
                    &[&values.id, &mimes, &hashes],
                )
                .await
                .map_err(|e| self.err(e))?;
            }
            if task.state == TaskState::Queued {
                // Delivered at commit: idle instances wake and claim.
                notify(&tx, "queued").await.map_err(|e| self.err(e))?;
            }
            tx.commit().await.map_err(|e| self.err(e))
        })
        .await
    }

    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        self.bounded("read the task", async {
            let sql = format!("SELECT {TASK_READ_COLUMNS} FROM tasks WHERE id = $1");
            let row = self.rows_by_id(&sql, id).await?.into_iter().next();
            row.as_ref().map(task_from).transpose()
        })
        .await
    }

    async fn task_images(&self, id: Uuid) -> Result<Vec<TaskImage>, StoreError> {
        self.bounded("read the task's images", async {
            let sql = "SELECT ti.mime_type, i.data FROM tasks t \
                       LEFT JOIN task_images ti ON ti.task_id = t.id \
                       LEFT JOIN images i ON i.sha256 = ti.sha256 \
                       WHERE t.id = $1 ORDER BY ti.position";
            let rows = self.rows_by_id(sql, id).await?;
            if rows.is_empty() {
                return Err(StoreError::UnknownTask(id));
            }
            Ok(rows
                .iter()
                .filter_map(|row| {
                    let mime_type: Option<String> = row.get(0);
                    let data: Option<&[u8]> = row.get(1);
                    Some(TaskImage {
                        mime_type: mime_type?,
                        data_base64: Arc::new(String::from_utf8_lossy(data?).into_owned()),
                        sha256: None,
                    })
                })
                .collect())
        })
        .await
    }

    async fn check_writable(&self) -> Result<(), StoreError> {
        self.bounded("check that it takes writes", async {
            let standby: bool = self.value("SELECT pg_is_in_recovery()", &[]).await?;
            if standby {
                let why = standby_message(&self.shown);
                self.health.failed(why.clone());
                return Err(StoreError::Unavailable(why));
            }
            Ok(())
        })
        .await
    }

    async fn update_task(&self, task: &Task) -> Result<(), StoreError> {
        self.bounded("save the task", fenced::write(self, task, &[]))
            .await
    }

    async fn finish_task(&self, task: &Task, turns: &[Turn]) -> Result<(), StoreError> {
        self.bounded("save the task's outcome", fenced::write(self, task, turns))
            .await
    }

    /// The answer is announced (`changed:<id>`) in its own commit, so the instance that runs
    /// the task wakes at once, as it does for a cancel; its poll is the backstop.
    async fn answer_input(&self, id: Uuid, key: &str, answer: &Answer) -> Result<bool, StoreError> {
        let text = serde_json::to_string(answer)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode the answer: {e}")))?;
        self.bounded("store the answer", async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            let id_text = id.to_string();
            let known = tx
                .query_opt("SELECT 1 FROM tasks WHERE id = $1 FOR SHARE", &[&id_text])
                .await
                .map_err(|e| self.err(e))?
                .is_some();
            if !known {
                return Err(StoreError::UnknownTask(id));
            }
            let added = tx
                .execute(
                    "INSERT INTO input_answers (task_id, key, answer) VALUES ($1, $2, $3) \
                     ON CONFLICT (task_id, key) DO NOTHING",
                    &[&id_text, &key, &text],
                )
                .await
                .map_err(|e| self.err(e))?;
            if added > 0 {
                notify(&tx, &format!("changed:{id}"))
                    .await
                    .map_err(|e| self.err(e))?;
            }
            tx.commit().await.map_err(|e| self.err(e))?;
            Ok(added > 0)
        })
        .await
    }

    async fn input_answer(&self, id: Uuid, key: &str) -> Result<Option<Answer>, StoreError> {
        self.bounded("read the answer", async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT answer FROM input_answers WHERE task_id = $1 AND key = $2",
                    &[&id.to_string(), &key],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(row.and_then(|r| serde_json::from_str(r.get::<_, &str>(0)).ok()))
        })
        .await
    }

    async fn tasks_in_state(&self, state: TaskState) -> Result<Vec<Task>, StoreError> {
        self.bounded("list the tasks", async {
            let client = self.client().await?;
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {TASK_READ_COLUMNS} FROM tasks WHERE state = $1 ORDER BY seq"
                ))
                .await
                .map_err(|e| self.err(e))?;
            client
                .query(&stmt, &[&state.as_str()])
                .await
                .map_err(|e| self.err(e))?
                .iter()
                .map(task_from)
                .collect()
        })
        .await
    }

    async fn save_changes(&self, id: Uuid, changes: &TaskChanges) -> Result<(), StoreError> {
        let files = changes.to_json();
        self.bounded("store the task's changes", async {
            let client = self.client().await?;
            let saved = client
                .execute(
                    "INSERT INTO task_changes (task_id, files, undone) \
                     SELECT $1, $2, false WHERE EXISTS (SELECT 1 FROM tasks WHERE id = $1) \
                     ON CONFLICT (task_id) DO UPDATE SET files = excluded.files, undone = false",
                    &[&id.to_string(), &files],
                )
                .await
                .map_err(|e| self.err(e))?;
            if saved == 0 {
                return Err(StoreError::UnknownTask(id));
            }
            Ok(())
        })
        .await
    }

    async fn task_changes(&self, id: Uuid) -> Result<Option<TaskChanges>, StoreError> {
        self.bounded("read the task's changes", async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT files, undone FROM task_changes WHERE task_id = $1",
                    &[&id.to_string()],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(row.map(|r| TaskChanges::from_json(r.get::<_, &str>(0), r.get(1))))
        })
        .await
    }

    async fn mark_undone(&self, id: Uuid) -> Result<bool, StoreError> {
        self.bounded("mark the task's changes undone", async {
            let client = self.client().await?;
            let marked = client
                .execute(
                    "UPDATE task_changes SET undone = true WHERE task_id = $1 AND NOT undone",
                    &[&id.to_string()],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(marked > 0)
        })
        .await
    }

    async fn recent_tasks(
        &self,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Task>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.bounded("list the caller's tasks", async {
            let client = self.client().await?;
            // `owner = $1` and `owner IS NULL` each walk the (owner, seq) index backwards;
            // `IS NOT DISTINCT FROM` would not use it.
            let rows = match owner {
                Some(owner) => {
                    let stmt = client
                        .prepare_cached(&format!(
                            "SELECT {TASK_READ_COLUMNS} FROM tasks WHERE owner = $1 \
                             ORDER BY seq DESC LIMIT $2"
                        ))
                        .await
                        .map_err(|e| self.err(e))?;
                    client.query(&stmt, &[&owner, &limit]).await
                }
                None => {
                    let stmt = client
                        .prepare_cached(&format!(
                            "SELECT {TASK_READ_COLUMNS} FROM tasks WHERE owner IS NULL \
                             ORDER BY seq DESC LIMIT $1"
                        ))
                        .await
                        .map_err(|e| self.err(e))?;
                    client.query(&stmt, &[&limit]).await
                }
            };
            rows.map_err(|e| self.err(e))?
                .iter()
                .map(task_from)
                .collect()
        })
        .await
    }

    async fn purge_finished(&self, finished_before: SystemTime) -> Result<u64, StoreError> {
        let cutoff = to_ns(finished_before);
        let mut purged: u64 = 0;
        loop {
            let batch = self
                .bounded("purge finished tasks", self.purge_batch(cutoff))
                .await?;
            let Some(n) = batch else {
                return Ok(purged);
            };
            purged += u64::try_from(n).unwrap_or(0);
            if n < PURGE_BATCH {
                return Ok(purged);
            }
        }
    }

    fn shared(&self) -> Option<&dyn SharedQueue> {
        Some(self)
    }

    fn health(&self) -> Option<&StoreHealth> {
        Some(&self.health)
    }
}

/// Why a standby cannot be this store.
pub(super) fn standby_message(shown: &str) -> String {
    format!("PostgreSQL at {shown} is a read-only standby; point store.url at the primary")
}
