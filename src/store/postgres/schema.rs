//! The PostgreSQL schema and its migrations.
//!
//! Migrations are numbered by their place in [`MIGRATIONS`]; the one row of
//! `agent_mcp_schema` records how many have run. They run under a session advisory lock, so of
//! several instances starting at once one migrates and the others wait, then find nothing to
//! do. Each runs in its own transaction with its version bump. Never edit a published
//! migration: append a new one.

use tokio_postgres::Client;

/// The advisory lock key of migrations (any constant unlikely to clash: "agentmcp" in ASCII).
const MIGRATION_LOCK: i64 = 0x6167_656e_746d_6370;

/// Schema migrations, oldest first; entry `i` takes the version from `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: tasks, sessions with their turns, images stored once per content hash, and the
    // columns of the shared queue: the claim (lease_owner, lease_until on the database clock),
    // the attempt number that fences writes, and cancel requests.
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        owner TEXT,
        created_at_ns BIGINT NOT NULL
    );
    CREATE TABLE turns (
        seq BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL
    );
    CREATE INDEX turns_by_session ON turns (session_id, seq);
    CREATE TABLE tasks (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        owner TEXT,
        request TEXT NOT NULL,
        temperature DOUBLE PRECISION,
        state TEXT NOT NULL CHECK (state IN
            ('queued', 'planning', 'running', 'completed', 'failed', 'cancelled')),
        steps_done BIGINT NOT NULL,
        steps_total BIGINT NOT NULL,
        current_task TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        critical_path_tokens BIGINT NOT NULL,
        result TEXT NOT NULL,
        created_at_ns BIGINT NOT NULL,
        updated_at_ns BIGINT NOT NULL,
        finished_at_ns BIGINT,
        attempt INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_until TIMESTAMPTZ,
        cancel_requested BOOLEAN NOT NULL DEFAULT false
    );
    CREATE INDEX tasks_by_state ON tasks (state, seq);
    CREATE INDEX tasks_by_finish ON tasks (finished_at_ns) WHERE finished_at_ns IS NOT NULL;
    CREATE INDEX tasks_by_session ON tasks (session_id);
    -- One active task in the whole application: at most one row is claimed or planning or
    -- running, whichever instance wrote it.
    CREATE UNIQUE INDEX one_active_task ON tasks ((true))
        WHERE lease_owner IS NOT NULL OR state IN ('planning', 'running');
    -- data: the image as the standard base64 text the client sent (what Ollama takes).
    CREATE TABLE images (
        sha256 BYTEA PRIMARY KEY,
        data BYTEA NOT NULL
    );
    CREATE TABLE task_images (
        task_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        mime_type TEXT NOT NULL,
        sha256 BYTEA NOT NULL,
        PRIMARY KEY (task_id, position)
    );
    CREATE INDEX task_images_by_hash ON task_images (sha256);",
    // 2: rate limits shared by every instance: GCRA, one row per bucket holding its
    // theoretical arrival time (seconds on the database clock). UNLOGGED: no WAL for this
    // hot, disposable state; a database crash empties it, which only gives callers a fresh
    // budget. agent_mcp_take is one round trip: 0 when a cell was taken, else the seconds to
    // wait.
    "CREATE UNLOGGED TABLE rate_limits (
        key TEXT PRIMARY KEY,
        tat DOUBLE PRECISION NOT NULL
    );
    CREATE FUNCTION agent_mcp_take(bucket TEXT, emission DOUBLE PRECISION,
                                   capacity DOUBLE PRECISION)
    RETURNS DOUBLE PRECISION LANGUAGE plpgsql AS $$
    DECLARE
        now_s DOUBLE PRECISION := extract(epoch FROM clock_timestamp());
        next_tat DOUBLE PRECISION;
    BEGIN
        INSERT INTO rate_limits AS r (key, tat) VALUES (bucket, now_s + emission)
            ON CONFLICT (key) DO UPDATE SET tat = greatest(r.tat, now_s) + emission
            WHERE greatest(r.tat, now_s) + emission - now_s <= capacity
            RETURNING tat INTO next_tat;
        IF FOUND THEN
            RETURN 0;
        END IF;
        SELECT greatest(tat, now_s) + emission - now_s - capacity INTO next_tat
            FROM rate_limits WHERE key = bucket;
        RETURN greatest(next_tat, 0.001);
    END $$;",
    // 3: the trace context of the request that queued a task (the W3C strings as JSON), so
    // whichever instance runs it continues the caller's trace; NULL when export was off.
    "ALTER TABLE tasks ADD COLUMN trace_context TEXT;",
    // 4: approvals. `input` is the task's questions and decisions (JSON; NULL when it has
    // none), written by its runner under its claim; the answers are rows of their own,
    // written by whichever instance a client sends them to, and read by the runner.
    "ALTER TABLE tasks ADD COLUMN input TEXT;
    CREATE TABLE input_answers (
        task_id TEXT NOT NULL,
        key TEXT NOT NULL,
        answer TEXT NOT NULL,
        PRIMARY KEY (task_id, key)
    );",
    // 5: what each task changed in the workspace (`store::TaskChanges`, JSON), deleted with
    // the task; and a caller's own tasks, newest first, for the oversight page.
    "CREATE TABLE task_changes (
        task_id TEXT PRIMARY KEY,
        files TEXT NOT NULL,
        undone BOOLEAN NOT NULL DEFAULT false
    );
    CREATE INDEX tasks_by_owner ON tasks (owner, seq);",
];

/// Brings the schema up to [`MIGRATIONS`]' version. Fails, changing nothing, on a database
/// that a newer agent-mcp migrated further.
pub(super) async fn migrate(client: &mut Client) -> Result<(), String> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| format!("cannot take the migration lock: {e}"))?;
    let outcome = migrate_locked(client).await;
    // Also released when the connection closes, which follows at once on error.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    outcome
}

async fn migrate_locked(client: &mut Client) -> Result<(), String> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS agent_mcp_schema (version INTEGER NOT NULL);
             INSERT INTO agent_mcp_schema (version)
                 SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM agent_mcp_schema);",
        )
        .await
        .map_err(|e| format!("cannot create the schema version table: {e}"))?;
    let version: i32 = client
        .query_one("SELECT version FROM agent_mcp_schema", &[])
        .await
        .map_err(|e| format!("cannot read the schema version: {e}"))?
        .get(0);
    let known = MIGRATIONS.len();
    let current = usize::try_from(version).unwrap_or(usize::MAX);
    if current > known {
        return Err(format!(
            "the database's schema is version {version}, newer than this agent-mcp knows \
             ({known}); upgrade agent-mcp, or point store.url at another database"
        ));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let next = i32::try_from(index + 1).unwrap_or(i32::MAX);
        let tx = client
            .transaction()
            .await
            .map_err(|e| format!("migration {next}: {e}"))?;
        tx.batch_execute(sql)
            .await
            .map_err(|e| format!("migration {next}: {e}"))?;
        tx.execute("UPDATE agent_mcp_schema SET version = $1", &[&next])
            .await
            .map_err(|e| format!("migration {next}: {e}"))?;
        tx.commit()
            .await
            .map_err(|e| format!("migration {next}: {e}"))?;
        tracing::info!(version = next, "PostgreSQL schema migrated");
    }
    Ok(())
}
