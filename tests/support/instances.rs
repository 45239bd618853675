//! Several `agent-mcp serve` processes on one PostgreSQL database: their configuration, and
//! what the tests ask the database and the instances about a task.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use agent_mcp::config::{Config, StoreBackend};

use super::harness::{HttpClient, ServeProcess, field, test_config};

/// The shortest lease the configuration allows: failover tests wait for it to lapse.
pub const LEASE: Duration = Duration::from_secs(3);

/// A configuration for an instance on the shared database `url`, with lease [`LEASE`].
pub fn shared_config(ollama: &str, url: &str) -> Config {
    let mut config = test_config(ollama);
    config.store.backend = StoreBackend::Postgres;
    config.store.url = Some(url.to_owned());
    config.store.lease = LEASE;
    // The tests poll statuses fast; the read budget (global across instances) must not
    // refuse them. The rate-limit test sets its own budgets.
    config.rate_limit.reads.per_minute = 600_000;
    config.rate_limit.reads.burst = 100_000;
    config
}

pub async fn instances(config: &Config, n: usize) -> Vec<ServeProcess> {
    let mut servers = Vec::new();
    for _ in 0..n {
        servers.push(ServeProcess::spawn(config).await);
    }
    servers
}

pub async fn status(client: &HttpClient, id: &str) -> String {
    field(&client.agent_status(id).await, "status")
}

/// Polls `client` until task `id` has `state`, failing after `budget`.
pub async fn wait_state(client: &HttpClient, id: &str, state: &str, budget: Duration) {
    let deadline = Instant::now() + budget;
    loop {
        let text = client.agent_status(id).await;
        let now = field(&text, "status");
        if now == state {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "task {id} is {now}, not {state}, after {budget:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The pid of the instance that holds task `id` (its lease owner is `<pid>-<uuid>`).
pub async fn holder_pid(db: &tokio_postgres::Client, id: &str) -> Option<u32> {
    let row = db
        .query_opt("SELECT lease_owner FROM tasks WHERE id = $1", &[&id])
        .await
        .expect("read the lease owner")?;
    let owner: Option<String> = row.get(0);
    owner?.split('-').next()?.parse().ok()
}

pub async fn wait_holder(db: &tokio_postgres::Client, id: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = holder_pid(db, id).await {
            return pid;
        }
        assert!(Instant::now() < deadline, "nobody claimed {id}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many turns the session of task `id` holds.
pub async fn session_turns(db: &tokio_postgres::Client, id: &str) -> i64 {
    db.query_one(
        "SELECT count(*) FROM turns WHERE session_id = \
         (SELECT session_id FROM tasks WHERE id = $1)",
        &[&id],
    )
    .await
    .expect("count the session's turns")
    .get(0)
}

/// The row of task `id` as the database holds it: state, result, `updated_at_ns`.
pub async fn stored(db: &tokio_postgres::Client, id: &str) -> (String, String, i64) {
    let row = db
        .query_one(
            "SELECT state, result, updated_at_ns FROM tasks WHERE id = $1",
            &[&id],
        )
        .await
        .expect("read the task's row");
    (row.get(0), row.get(1), row.get(2))
}

/// When task `id`'s lease ends, on the database clock (`None` when nobody holds it).
pub async fn lease_until(db: &tokio_postgres::Client, id: &str) -> Option<std::time::SystemTime> {
    let row = db
        .query_one(
            "SELECT extract(epoch FROM lease_until)::float8 FROM tasks WHERE id = $1",
            &[&id],
        )
        .await
        .expect("read the lease");
    let secs: Option<f64> = row.get(0);
    secs.map(|s| std::time::UNIX_EPOCH + Duration::from_secs_f64(s))
}

/// Sends `signal` (`STOP`, `CONT`, …) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{signal} {pid}");
}
