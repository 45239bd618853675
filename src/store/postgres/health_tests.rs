//! The store's health against a real server (`AGENT_MCP_TEST_PG_URL`): which errors are an
//! outage and which the database answered, and an outage seen, with no call made, within a
//! probe interval, ended by the first answer after it.

use std::time::{Duration, Instant};

use tokio_postgres::NoTls;

use super::test_server::{connect, fresh_database, server_url};
use super::{PostgresStore, is_outage};
use crate::config::{StoreBackend, StoreConfig};
use crate::store::{PROBE_EVERY, StoreError, StoreHealth, TaskStore};

/// What the issue allows between an outage (or its end) and readiness saying so.
const WITHIN: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread")]
async fn only_errors_that_say_the_database_is_out_of_reach_are_outages() {
    let Some(url) = server_url() else {
        return;
    };
    let db = connect(&url).await;
    let syntax = db
        .batch_execute("SELEC 1")
        .await
        .expect_err("a syntax error");
    let no_row = db
        .query_one("SELECT 1 WHERE false", &[])
        .await
        .expect_err("no row for query_one");
    let division = db
        .query_one("SELECT 1 / 0", &[])
        .await
        .expect_err("a division by zero");
    let refused = tokio_postgres::connect("host=127.0.0.1 port=1 user=nobody", NoTls)
        .await
        .err()
        .expect("nothing listens on port 1");
    let victim = connect(&url).await;
    let pid: i32 = victim
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("the victim's pid")
        .get(0);
    // Waits (up to 5 s) until the backend is gone.
    db.execute("SELECT pg_terminate_backend($1, 5000)", &[&pid])
        .await
        .expect("terminate the victim");
    let terminated = victim
        .query_one("SELECT 1", &[])
        .await
        .expect_err("a terminated session");
    for (what, e, outage) in [
        ("a syntax error", &syntax, false),
        ("no row where one was expected", &no_row, false),
        ("a division by zero", &division, false),
        ("a refused connection", &refused, true),
        ("a terminated session", &terminated, true),
    ] {
        assert_eq!(is_outage(e), outage, "{what}: {e:?}");
    }
}

/// Polls `health` until `done` holds for its status, failing after [`WITHIN`]: how long it
/// took.
async fn until(
    health: &StoreHealth,
    what: &str,
    done: impl Fn(&Result<(), String>) -> bool,
) -> Duration {
    let from = Instant::now();
    loop {
        let status = health.status();
        if done(&status) {
            return from.elapsed();
        }
        assert!(
            from.elapsed() < WITHIN,
            "{what} not within {WITHIN:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outage_shows_with_no_call_made_and_ends_with_the_first_answer() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let Some(server) = server_url() else {
        return;
    };
    let name = url.rsplit('/').next().unwrap_or_default().to_owned();
    let store = PostgresStore::open(&StoreConfig {
        backend: StoreBackend::Postgres,
        url: Some(url.clone()),
        ..StoreConfig::default()
    })
    .await
    .expect("open the store");
    let health = store
        .health()
        .expect("a PostgreSQL store has health")
        .clone();
    assert_eq!(health.status(), Ok(()));

    // The database takes no new connection and loses the ones it had; nothing calls the store.
    let admin = connect(&server).await;
    let allow = |yes: bool| format!("ALTER DATABASE {name} ALLOW_CONNECTIONS {yes}");
    admin.batch_execute(&allow(false)).await.expect("refuse");
    admin
        .execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1",
            &[&name],
        )
        .await
        .expect("end the store's sessions");
    let seen = until(&health, "the outage", Result::is_err).await;
    let why = health.status().expect_err("failing");
    let shown = crate::config::redact_url(&url);
    assert!(why.starts_with(&format!("PostgreSQL at {shown}")), "{why}");
    // It stays seen for several probes (no stale answer clears it), and a call fails too.
    tokio::time::sleep(3 * PROBE_EVERY).await;
    assert!(health.status().is_err());
    let call = store.task(uuid::Uuid::new_v4()).await;
    assert!(matches!(call, Err(StoreError::Unavailable(_))), "{call:?}");

    admin.batch_execute(&allow(true)).await.expect("allow");
    let back = until(&health, "the end of the outage", Result::is_ok).await;
    eprintln!(
        "FIGURE store health: outage seen {} ms after the sessions ended (no call made), \
         answering again {} ms after connections were allowed",
        seen.as_millis(),
        back.as_millis()
    );
    assert_eq!(store.task(uuid::Uuid::new_v4()).await.ok(), Some(None));
}
