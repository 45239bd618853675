//! The PostgreSQL store against a real server: `AGENT_MCP_TEST_PG_URL` (set by
//! `scripts/postgres.sh`). Each test works in a database of its own.

use std::time::Duration;

use tokio_postgres::NoTls;
use uuid::Uuid;

use super::PostgresStore;
use crate::config::{StoreBackend, StoreConfig};
use crate::store::{Claim, Heartbeat, SharedEvent, StoreError, TaskStore};
use crate::task::{Session, Task, TaskState};

/// The server the tests use. Without one the test is skipped with a loud note, except under
/// CI (`CI` set), where a missing server fails it.
pub(crate) fn server_url() -> Option<String> {
    match std::env::var("AGENT_MCP_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "AGENT_MCP_TEST_PG_URL is not set, and CI must run the PostgreSQL tests: run them \
             as `bash scripts/postgres.sh cargo test --locked`"
        ),
        _ => {
            eprintln!(
                "SKIPPED: no PostgreSQL for this test (AGENT_MCP_TEST_PG_URL is not set); run \
                 `bash scripts/postgres.sh cargo test --locked` to include it"
            );
            None
        }
    }
}

/// A new empty database on the test server; its URL.
pub(crate) async fn fresh_database() -> Option<String> {
    let url = server_url()?;
    let (client, conn) = tokio_postgres::connect(&url, NoTls)
        .await
        .expect("connect to AGENT_MCP_TEST_PG_URL");
    tokio::spawn(conn);
    let name = format!("agent_mcp_test_{}", Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a test database");
    let base = url.split('?').next().unwrap_or(&url);
    let (server, _) = base.rsplit_once('/').expect("the URL names a database");
    Some(format!("{server}/{name}"))
}

fn config(url: &str, lease: Duration) -> StoreConfig {
    StoreConfig {
        backend: StoreBackend::Postgres,
        url: Some(url.to_owned()),
        lease,
        ..StoreConfig::default()
    }
}

async fn open(url: &str) -> PostgresStore {
    PostgresStore::open(&config(url, Duration::from_secs(10)))
        .await
        .expect("open the PostgreSQL store")
}

async fn queued(store: &dyn TaskStore) -> Task {
    let session = Session::new(None);
    store.create_session(&session).await.unwrap();
    let t = Task::new(session.id, None, "r".into(), None);
    store.insert_task(&t).await.unwrap();
    t
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shared_store_contract() {
    let Some(url) = fresh_database().await else {
        return;
    };
    crate::store::conformance::all(&open(&url).await).await;
}

/// Two instances starting at once: one migrates, the other waits and finds the schema ready;
/// a schema newer than this build is refused with advice.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_starts_migrate_once_and_newer_schemas_are_refused() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (a, b) = tokio::join!(open(&url), open(&url));
    queued(&a).await;
    let version: i32 = a
        .client()
        .await
        .unwrap()
        .query_one("SELECT version FROM agent_mcp_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version as usize, super::schema::MIGRATIONS.len());
    assert_eq!(b.tasks_in_state(TaskState::Queued).await.unwrap().len(), 1);
    a.client()
        .await
        .unwrap()
        .execute("UPDATE agent_mcp_schema SET version = 999", &[])
        .await
        .unwrap();
    let err = PostgresStore::open(&config(&url, Duration::from_secs(10)))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("newer than this agent-mcp knows"), "{err}");
}

/// The database itself refuses a second active task, whoever writes it.
#[tokio::test(flavor = "multi_thread")]
async fn the_database_admits_one_active_task() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let store = open(&url).await;
    let (a, b) = (queued(&store).await, queued(&store).await);
    let client = store.client().await.unwrap();
    let run = "UPDATE tasks SET state = 'running' WHERE id = $1";
    client.execute(run, &[&a.id.to_string()]).await.unwrap();
    let err = client.execute(run, &[&b.id.to_string()]).await.unwrap_err();
    assert_eq!(
        err.as_db_error().map(|e| e.constraint()),
        Some(Some("one_active_task")),
        "{err}"
    );
}

/// Claims go oldest first, one at a time across instances; a finished task frees the slot.
#[tokio::test(flavor = "multi_thread")]
async fn claims_are_fifo_and_one_at_a_time_across_instances() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (one, two) = (open(&url).await, open(&url).await);
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(queued(&one).await.id);
    }
    assert_eq!(two.claim_next_for_test().await, Claim::Claimed(ids[0]));
    assert!(
        matches!(one.claim_next_for_test().await, Claim::Busy(left) if left <= Duration::from_secs(10))
    );
    assert_eq!(one.shared_queue_position(ids[2]).await, Some(3));
    assert_eq!(two.shared().unwrap().queued_count().await.unwrap(), 3);
    let mut t = two.task(ids[0]).await.unwrap().unwrap();
    t.transition(TaskState::Running);
    two.update_task(&t).await.unwrap();
    // Not this instance's task: its writes are refused.
    assert!(matches!(
        one.update_task(&t).await,
        Err(StoreError::Fenced(_))
    ));
    t.transition(TaskState::Completed);
    two.update_task(&t).await.unwrap();
    two.shared().unwrap().release(ids[0]);
    assert_eq!(one.claim_next_for_test().await, Claim::Claimed(ids[1]));
    assert_eq!(one.shared_queue_position(ids[2]).await, Some(2));
}

/// A lapsed lease: the task ends failed (interrupted) at the next claim by anyone, the late
/// instance's writes and heartbeats are refused, and the queue moves on.
#[tokio::test(flavor = "multi_thread")]
async fn a_lapsed_lease_fails_the_task_and_fences_its_old_holder() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let short = PostgresStore::open(&config(&url, Duration::from_secs(1)))
        .await
        .unwrap();
    let survivor = open(&url).await;
    let (a, b) = (queued(&short).await, queued(&short).await);
    assert_eq!(short.claim_next_for_test().await, Claim::Claimed(a.id));
    let mut t = short.task(a.id).await.unwrap().unwrap();
    t.transition(TaskState::Running);
    short.update_task(&t).await.unwrap();
    assert_eq!(
        short.shared().unwrap().heartbeat(a.id).await.unwrap(),
        Heartbeat::Held
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(survivor.claim_next_for_test().await, Claim::Claimed(b.id));
    let failed = survivor.task(a.id).await.unwrap().unwrap();
    assert_eq!(failed.state, TaskState::Failed);
    assert_eq!(failed.result, crate::store::INTERRUPTED_INSTANCE_LOST);
    t.transition(TaskState::Completed);
    assert!(matches!(
        short.update_task(&t).await,
        Err(StoreError::Fenced(_))
    ));
    assert_eq!(
        short.shared().unwrap().heartbeat(a.id).await.unwrap(),
        Heartbeat::Lost
    );
}

/// Cancel: a queued task ends at once; a running one is marked, its instance is told by
/// notification, and its heartbeat reads the mark.
#[tokio::test(flavor = "multi_thread")]
async fn cancel_reaches_the_instance_that_holds_the_task() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (runner, other) = (open(&url).await, open(&url).await);
    let mut events = runner.shared().unwrap().events();
    let (a, b) = (queued(&other).await, queued(&other).await);
    assert_eq!(runner.claim_next_for_test().await, Claim::Claimed(a.id));
    let shared = other.shared().unwrap();
    let cancelled = shared
        .request_cancel(b.id, "before")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (cancelled.state, cancelled.result.as_str()),
        (TaskState::Cancelled, "before")
    );
    let marked = shared
        .request_cancel(a.id, "before")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        marked.state,
        TaskState::Queued,
        "claimed: marked, not ended"
    );
    let heard = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            if let Ok(SharedEvent::Cancel(id)) = events.recv().await {
                return id;
            }
        }
    })
    .await
    .expect("the cancel notification within 2 s");
    assert_eq!(heard, a.id);
    assert_eq!(
        runner.shared().unwrap().heartbeat(a.id).await.unwrap(),
        Heartbeat::CancelRequested
    );
}

/// The shared GCRA bucket: `burst` at once, then one per emission interval, with the wait
/// said; buckets are per key.
#[tokio::test(flavor = "multi_thread")]
async fn rate_buckets_allow_the_burst_then_say_how_long_to_wait() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (a, b) = (open(&url).await, open(&url).await);
    for store in [&a, &b, &a] {
        assert_eq!(
            store.shared().unwrap().take_cell("k", 60, 3).await.unwrap(),
            None
        );
    }
    let wait = b
        .shared()
        .unwrap()
        .take_cell("k", 60, 3)
        .await
        .unwrap()
        .expect("over the burst");
    // At most one emission interval (less by however long the four calls took).
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(1),
        "{wait:?}"
    );
    assert_eq!(
        a.shared().unwrap().take_cell("other", 60, 3).await.unwrap(),
        None
    );
    tokio::time::sleep(wait).await;
    assert_eq!(
        a.shared().unwrap().take_cell("k", 60, 3).await.unwrap(),
        None
    );
}

/// The password is not in any message, even when the server refuses it.
#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_password_is_reported_without_it() {
    let Some(url) = server_url() else {
        return;
    };
    let Some((scheme_user, rest)) = url.split_once('@') else {
        return;
    };
    let user = scheme_user.rsplit_once(':').map_or(scheme_user, |(u, _)| u);
    let bad = format!("{user}:not-the-password-42@{rest}");
    let err = PostgresStore::open(&config(&bad, Duration::from_secs(10)))
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains("not-the-password-42"), "{err}");
    assert!(err.contains("<redacted>"), "{err}");
}

impl PostgresStore {
    async fn claim_next_for_test(&self) -> Claim {
        self.shared().unwrap().claim_next().await.unwrap()
    }

    async fn shared_queue_position(&self, id: Uuid) -> Option<usize> {
        self.shared().unwrap().queue_position(id).await.unwrap()
    }
}
