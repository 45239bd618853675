//! PostgreSQL: one database that several agent-mcp processes share.
//!
//! Everything the SQLite store keeps, in the same shape (tables, images once per content
//! hash, nanosecond timestamps), plus the shared queue ([`SharedQueue`]):
//!
//! - **One active task** in the whole application: the partial unique index `one_active_task`
//!   admits at most one row that is claimed, planning or running, whoever writes it.
//! - **FIFO**: a claim takes the queued task with the lowest `seq` (acceptance order), under a
//!   transaction advisory lock so claims never race each other.
//! - **Leases**: a claim sets `lease_owner` (this process) and `lease_until` (the database
//!   clock plus `store.lease`); the worker's heartbeat renews it every second. Every claim
//!   bumps `attempt`, and every write of a claimed task names the attempt it holds, so a
//!   process whose lease lapsed cannot overwrite anything ([`StoreError::Fenced`]).
//! - **Lapsed leases**: the next claim by any process ends a planning/running task whose
//!   lease lapsed `failed` ([`super::INTERRUPTED_INSTANCE_LOST`]); a task claimed but not yet
//!   started goes back to the queue (nothing of it ran). Nothing that ran is run again.
//! - **Announcements** on the channel `agent_mcp` (LISTEN/NOTIFY): `queued` (a task was
//!   queued), `freed` (a task ended: the slot is free), `cancel:<id>`, `changed:<id>`. See
//!   `listen.rs`.

mod listen;
mod schema;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::sqlite::queries::{from_ns, prepare_images, state_from, to_i64, to_ns};
use super::{
    Claim, Heartbeat, INTERRUPTED_INSTANCE_LOST, SharedEvent, SharedQueue, StoreError, TaskStore,
};
use crate::config::StoreConfig;
use crate::task::{Session, Task, TaskImage, TaskState, TokenUsage, Turn, TurnRole};

/// The LISTEN/NOTIFY channel of every announcement.
pub(crate) const CHANNEL: &str = "agent_mcp";
/// Advisory lock keys: claims (transaction-scoped) and the retention purge (one instance).
const CLAIM_LOCK: i64 = 0x6167_656e_7401;
const PURGE_LOCK: i64 = 0x6167_656e_7402;
/// Connections per process: the hot paths (agent_status, agent_run) are one or a few round
/// trips each, so a small pool serves many concurrent requests.
const POOL_SIZE: usize = 16;
/// How long a request waits for a connection, or for a new one to open.
const POOL_TIMEOUT: Duration = Duration::from_secs(5);

const TASK_COLUMNS: &str = "id, session_id, owner, request, temperature, state, steps_done, \
    steps_total, current_task, input_tokens, output_tokens, critical_path_tokens, result, \
    created_at_ns, updated_at_ns";

/// The task store in PostgreSQL.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    /// `store.url` with its password redacted, for messages.
    shown: Arc<str>,
    /// This process, as `lease_owner` of the task it claims.
    instance: String,
    lease: Duration,
    /// The attempt number of each task this process holds.
    claims: Mutex<HashMap<Uuid, i32>>,
    events: broadcast::Sender<SharedEvent>,
    listener: JoinHandle<()>,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PostgresStore {
    /// Connects to `config.url`, migrates the schema (one instance at a time) and starts
    /// listening for other instances' announcements. Needs a Tokio runtime.
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
        pg.connect_timeout(POOL_TIMEOUT);
        if pg.get_application_name().is_none() {
            pg.application_name("agent-mcp");
        }
        {
            let (mut client, conn) = pg.connect(NoTls).await.map_err(|e| describe(&shown, &e))?;
            let driver = tokio::spawn(conn);
            let migrated = schema::migrate(&mut client).await;
            drop(client);
            let _ = driver.await;
            migrated.map_err(|e| StoreError::Unavailable(format!("PostgreSQL at {shown}: {e}")))?;
        }
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Unavailable(format!("PostgreSQL pool: {e}")))?;
        let (events, _) = broadcast::channel(1024);
        let listener = tokio::spawn(listen::run(pg, shown.clone(), events.clone()));
        Ok(PostgresStore {
            pool,
            shown,
            instance: format!("{}-{}", std::process::id(), Uuid::new_v4().simple()),
            lease: config.lease,
            claims: Mutex::new(HashMap::new()),
            events,
            listener,
        })
    }

    /// This process's name as the owner of the leases it takes.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| {
            StoreError::Unavailable(format!(
                "PostgreSQL at {} is unreachable ({e}); check that it runs and that store.url \
                 is right",
                self.shown
            ))
        })
    }

    fn err(&self, e: tokio_postgres::Error) -> StoreError {
        describe(&self.shown, &e)
    }

    fn claims(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, i32>> {
        // Every critical section is one map operation, so a poisoned lock holds a consistent map.
        self.claims.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn attempt(&self, id: Uuid) -> Option<i32> {
        self.claims().get(&id).copied()
    }

    fn lease_secs(&self) -> f64 {
        self.lease.as_secs_f64()
    }
}

fn describe(shown: &str, e: &tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(match e.as_db_error() {
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
    })
}

/// A task's columns as SQL values: `$1`..`$16` of both the INSERT and the UPDATE.
struct TaskValues {
    id: String,
    session_id: String,
    owner: Option<String>,
    request: String,
    temperature: Option<f64>,
    state: &'static str,
    steps_done: i64,
    steps_total: i64,
    current_task: String,
    input: i64,
    output: i64,
    critical_path: i64,
    result: String,
    created: i64,
    updated: i64,
    finished: Option<i64>,
}

impl TaskValues {
    fn of(task: &Task) -> Self {
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
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 16] {
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
        ]
    }
}

fn bad_row(what: &str) -> StoreError {
    StoreError::Unavailable(format!("the tasks table holds {what}"))
}

fn task_from(row: &tokio_postgres::Row) -> Result<Task, StoreError> {
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
    })
}

/// Unlinks the images of `ids` and deletes those no other task refers to.
async fn release_images(
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

async fn notify(
    tx: &deadpool_postgres::Transaction<'_>,
    payload: &str,
) -> Result<(), tokio_postgres::Error> {
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
        .await
        .map(|_| ())
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("INSERT INTO sessions (id, owner, created_at_ns) VALUES ($1, $2, $3)")
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
    }

    async fn session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT owner, created_at_ns FROM sessions WHERE id = $1")
            .await
            .map_err(|e| self.err(e))?;
        let row = client
            .query_opt(&stmt, &[&id.to_string()])
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.map(|row| Session {
            id,
            owner: row.get(0),
            created_at: from_ns(row.get(1)),
        }))
    }

    async fn session_turns(&self, id: Uuid) -> Result<Vec<Turn>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT t.role, t.content FROM sessions s \
                 LEFT JOIN turns t ON t.session_id = s.id \
                 WHERE s.id = $1 ORDER BY t.seq",
                &[&id.to_string()],
            )
            .await
            .map_err(|e| self.err(e))?;
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
    }

    async fn append_turns(&self, id: Uuid, turns: &[Turn]) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        let known = tx
            .query_opt(
                "SELECT 1 FROM sessions WHERE id = $1 FOR SHARE",
                &[&id.to_string()],
            )
            .await
            .map_err(|e| self.err(e))?
            .is_some();
        if !known {
            return Err(StoreError::UnknownSession(id));
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
            &[&id.to_string(), &roles, &contents],
        )
        .await
        .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))
    }

    async fn insert_task(&self, task: &Task) -> Result<(), StoreError> {
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
                "INSERT INTO tasks ({TASK_COLUMNS}, finished_at_ns) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
            ))
            .await
            .map_err(|e| self.err(e))?;
        tx.execute(&insert, &values.params())
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
    }

    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1"))
            .await
            .map_err(|e| self.err(e))?;
        let row = client
            .query_opt(&stmt, &[&id.to_string()])
            .await
            .map_err(|e| self.err(e))?;
        row.as_ref().map(task_from).transpose()
    }

    async fn task_images(&self, id: Uuid) -> Result<Vec<TaskImage>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT ti.mime_type, i.data FROM tasks t \
                 LEFT JOIN task_images ti ON ti.task_id = t.id \
                 LEFT JOIN images i ON i.sha256 = ti.sha256 \
                 WHERE t.id = $1 ORDER BY ti.position",
                &[&id.to_string()],
            )
            .await
            .map_err(|e| self.err(e))?;
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
                    data_base64: String::from_utf8_lossy(data?).into_owned(),
                    sha256: None,
                })
            })
            .collect())
    }

    async fn check_writable(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        let standby: bool = client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        if standby {
            return Err(StoreError::Unavailable(format!(
                "PostgreSQL at {} is a read-only standby; point store.url at the primary",
                self.shown
            )));
        }
        Ok(())
    }

    async fn update_task(&self, task: &Task) -> Result<(), StoreError> {
        let values = TaskValues::of(task);
        let attempt = self.attempt(task.id);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        // A terminal write ends the claim. A task this process holds is written only while
        // its attempt and lease are still this process's; any other only while nobody holds
        // it and it is not active.
        let set = "session_id = $2, owner = $3, request = $4, temperature = $5, state = $6, \
             steps_done = $7, steps_total = $8, current_task = $9, input_tokens = $10, \
             output_tokens = $11, critical_path_tokens = $12, result = $13, created_at_ns = $14, \
             updated_at_ns = $15, \
             finished_at_ns = CASE WHEN $16::bigint IS NULL THEN NULL \
                                   ELSE COALESCE(finished_at_ns, $16::bigint) END, \
             lease_owner = CASE WHEN $16::bigint IS NULL THEN lease_owner END, \
             lease_until = CASE WHEN $16::bigint IS NULL THEN lease_until END, \
             cancel_requested = CASE WHEN $16::bigint IS NULL THEN cancel_requested \
                                     ELSE false END";
        let changed = match attempt {
            Some(attempt) => {
                let sql = format!(
                    "WITH u AS (UPDATE tasks SET {set} WHERE id = $1 AND attempt = $17 \
                     AND lease_owner = $18 RETURNING id) \
                     SELECT pg_notify('{CHANNEL}', 'changed:' || id) FROM u"
                );
                let stmt = tx.prepare_cached(&sql).await.map_err(|e| self.err(e))?;
                let mut params: Vec<&(dyn ToSql + Sync)> = values.params().to_vec();
                params.push(&attempt);
                params.push(&self.instance);
                tx.query(&stmt, &params)
                    .await
                    .map_err(|e| self.err(e))?
                    .len()
            }
            None => {
                let sql = format!(
                    "WITH u AS (UPDATE tasks SET {set} WHERE id = $1 AND lease_owner IS NULL \
                     AND state NOT IN ('planning', 'running') RETURNING id) \
                     SELECT pg_notify('{CHANNEL}', 'changed:' || id) FROM u"
                );
                let stmt = tx.prepare_cached(&sql).await.map_err(|e| self.err(e))?;
                tx.query(&stmt, &values.params())
                    .await
                    .map_err(|e| self.err(e))?
                    .len()
            }
        };
        if changed == 0 {
            let exists = tx
                .query_opt("SELECT 1 FROM tasks WHERE id = $1", &[&values.id])
                .await
                .map_err(|e| self.err(e))?
                .is_some();
            return Err(if exists {
                StoreError::Fenced(task.id)
            } else {
                StoreError::UnknownTask(task.id)
            });
        }
        if task.state.is_terminal() {
            release_images(&tx, std::slice::from_ref(&values.id))
                .await
                .map_err(|e| self.err(e))?;
            // The slot is free: the next task can be claimed.
            notify(&tx, "freed").await.map_err(|e| self.err(e))?;
        }
        tx.commit().await.map_err(|e| self.err(e))
    }

    async fn tasks_in_state(&self, state: TaskState) -> Result<Vec<Task>, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE state = $1 ORDER BY seq"
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
    }

    async fn purge_finished(&self, finished_before: SystemTime) -> Result<u64, StoreError> {
        let cutoff = to_ns(finished_before);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        // One instance purges at a time; the others find the lock taken and skip this round.
        let ours: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&PURGE_LOCK])
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        if !ours {
            return Ok(0);
        }
        let gone = tx
            .query(
                "DELETE FROM tasks WHERE finished_at_ns < $1 \
                 AND state IN ('completed', 'failed', 'cancelled') RETURNING id, session_id",
                &[&cutoff],
            )
            .await
            .map_err(|e| self.err(e))?;
        let ids: Vec<String> = gone.iter().map(|r| r.get(0)).collect();
        let mut sessions: Vec<String> = gone.iter().map(|r| r.get(1)).collect();
        sessions.sort_unstable();
        sessions.dedup();
        release_images(&tx, &ids).await.map_err(|e| self.err(e))?;
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
        Ok(ids.len() as u64)
    }

    fn shared(&self) -> Option<&dyn SharedQueue> {
        Some(self)
    }
}

#[async_trait]
impl SharedQueue for PostgresStore {
    async fn claim_next(&self) -> Result<Claim, StoreError> {
        let now = to_ns(SystemTime::now());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CLAIM_LOCK])
            .await
            .map_err(|e| self.err(e))?;
        // Active tasks whose lease lapsed (their instance died or lost the database) end
        // failed: they may have had side effects, so they are never run again.
        let lapsed: Vec<String> = tx
            .query(
                "UPDATE tasks SET state = 'failed', result = $1, current_task = '', \
                     updated_at_ns = $2, finished_at_ns = $2, lease_owner = NULL, \
                     lease_until = NULL, cancel_requested = false \
                 WHERE state IN ('planning', 'running') \
                   AND (lease_until IS NULL OR lease_until < now()) RETURNING id",
                &[&INTERRUPTED_INSTANCE_LOST, &now],
            )
            .await
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for id in &lapsed {
            tracing::warn!(task_id = %id, "the task's lease lapsed; it ends failed (interrupted)");
            notify(&tx, &format!("changed:{id}"))
                .await
                .map_err(|e| self.err(e))?;
        }
        release_images(&tx, &lapsed)
            .await
            .map_err(|e| self.err(e))?;
        // Claimed but never started: nothing of it ran, so it goes back where it was.
        tx.execute(
            "UPDATE tasks SET lease_owner = NULL, lease_until = NULL \
             WHERE state = 'queued' AND lease_owner IS NOT NULL AND lease_until < now()",
            &[],
        )
        .await
        .map_err(|e| self.err(e))?;
        let active = tx
            .query_opt(
                "SELECT COALESCE(EXTRACT(EPOCH FROM (lease_until - now())), 0)::float8 \
                 FROM tasks WHERE lease_owner IS NOT NULL OR state IN ('planning', 'running') \
                 LIMIT 1",
                &[],
            )
            .await
            .map_err(|e| self.err(e))?;
        let claim = if let Some(row) = active {
            let left: f64 = row.get(0);
            Claim::Busy(Duration::try_from_secs_f64(left.max(0.0)).unwrap_or(Duration::ZERO))
        } else {
            let claimed = tx
                .query_opt(
                    "UPDATE tasks SET lease_owner = $1, attempt = attempt + 1, \
                         lease_until = now() + make_interval(secs => $2) \
                     WHERE seq = (SELECT seq FROM tasks WHERE state = 'queued' \
                                  AND lease_owner IS NULL ORDER BY seq LIMIT 1) \
                     RETURNING id, attempt",
                    &[&self.instance, &self.lease_secs()],
                )
                .await
                .map_err(|e| self.err(e))?;
            match claimed {
                Some(row) => {
                    let id = Uuid::parse_str(row.get::<_, &str>(0))
                        .map_err(|_| bad_row("an id that is not a UUID"))?;
                    self.claims().insert(id, row.get(1));
                    Claim::Claimed(id)
                }
                None => Claim::Empty,
            }
        };
        if let Err(e) = tx.commit().await {
            if let Claim::Claimed(id) = claim {
                self.release(id);
            }
            return Err(self.err(e));
        }
        Ok(claim)
    }

    async fn heartbeat(&self, id: Uuid) -> Result<Heartbeat, StoreError> {
        let Some(attempt) = self.attempt(id) else {
            return Ok(Heartbeat::Lost);
        };
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "UPDATE tasks SET lease_until = now() + make_interval(secs => $3) \
                 WHERE id = $1 AND attempt = $2 AND lease_owner = $4 RETURNING cancel_requested",
            )
            .await
            .map_err(|e| self.err(e))?;
        let row = client
            .query_opt(
                &stmt,
                &[
                    &id.to_string(),
                    &attempt,
                    &self.lease_secs(),
                    &self.instance,
                ],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(match row {
            None => Heartbeat::Lost,
            Some(row) if row.get::<_, bool>(0) => Heartbeat::CancelRequested,
            Some(_) => Heartbeat::Held,
        })
    }

    fn release(&self, id: Uuid) {
        self.claims().remove(&id);
    }

    async fn request_cancel(
        &self,
        id: Uuid,
        result_if_queued: &str,
    ) -> Result<Option<Task>, StoreError> {
        let now = to_ns(SystemTime::now());
        let key = id.to_string();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        // Queued and unclaimed: cancelled here and now.
        let cancelled = tx
            .query_opt(
                &format!(
                    "UPDATE tasks SET state = 'cancelled', result = $2, current_task = '', \
                         updated_at_ns = $3, finished_at_ns = $3 \
                     WHERE id = $1 AND state = 'queued' AND lease_owner IS NULL \
                     RETURNING {TASK_COLUMNS}"
                ),
                &[&key, &result_if_queued, &now],
            )
            .await
            .map_err(|e| self.err(e))?;
        let task = match cancelled {
            Some(row) => {
                release_images(&tx, std::slice::from_ref(&key))
                    .await
                    .map_err(|e| self.err(e))?;
                notify(&tx, &format!("changed:{key}"))
                    .await
                    .map_err(|e| self.err(e))?;
                Some(task_from(&row)?)
            }
            None => {
                // Claimed or running somewhere: mark it, and tell the instance that holds it
                // (its heartbeat reads the mark if the notification is missed).
                let marked = tx
                    .query_opt(
                        &format!(
                            "UPDATE tasks SET cancel_requested = true \
                             WHERE id = $1 AND state IN ('queued', 'planning', 'running') \
                             RETURNING {TASK_COLUMNS}"
                        ),
                        &[&key],
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                match marked {
                    Some(row) => {
                        notify(&tx, &format!("cancel:{key}"))
                            .await
                            .map_err(|e| self.err(e))?;
                        Some(task_from(&row)?)
                    }
                    None => tx
                        .query_opt(
                            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1"),
                            &[&key],
                        )
                        .await
                        .map_err(|e| self.err(e))?
                        .as_ref()
                        .map(task_from)
                        .transpose()?,
                }
            }
        };
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(task)
    }

    async fn queued_count(&self) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let n: i64 = client
            .query_one("SELECT count(*) FROM tasks WHERE state = 'queued'", &[])
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        Ok(usize::try_from(n).unwrap_or(0))
    }

    async fn queued_count_of(&self, owner: Option<&str>) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM tasks WHERE state = 'queued' AND owner IS NOT DISTINCT FROM $1",
                &[&owner],
            )
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        Ok(usize::try_from(n).unwrap_or(0))
    }

    async fn queue_position(&self, id: Uuid) -> Result<Option<usize>, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT count(*) FROM tasks WHERE state = 'queued' \
                 AND seq <= (SELECT seq FROM tasks WHERE id = $1 AND state = 'queued')",
            )
            .await
            .map_err(|e| self.err(e))?;
        let n: i64 = client
            .query_one(&stmt, &[&id.to_string()])
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        Ok(usize::try_from(n).ok().filter(|n| *n > 0))
    }

    fn events(&self) -> broadcast::Receiver<SharedEvent> {
        self.events.subscribe()
    }

    async fn take_cell(
        &self,
        key: &str,
        per_minute: u32,
        burst: u32,
    ) -> Result<Option<Duration>, StoreError> {
        let emission = 60.0 / f64::from(per_minute.max(1));
        let capacity = emission * f64::from(burst.max(1));
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT agent_mcp_take($1, $2, $3)")
            .await
            .map_err(|e| self.err(e))?;
        let wait: f64 = client
            .query_one(&stmt, &[&key, &emission, &capacity])
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        Ok((wait > 0.0).then(|| Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX)))
    }
}
