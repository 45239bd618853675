//! The PostgreSQL store against a real server: `AGENT_MCP_TEST_PG_URL` (set by
//! `scripts/postgres.sh`). Each test works in a database of its own.

use std::time::Duration;

use uuid::Uuid;

use super::PostgresStore;
use super::test_server::{fresh_database, server_url};
use crate::config::{StoreBackend, StoreConfig};
use crate::store::{Claim, SharedEvent, StoreError, TaskStore};
use crate::task::{Session, Task, TaskState, Turn, TurnRole};

/// A fresh database's URL, or return from the test: without `AGENT_MCP_TEST_PG_URL` there is
/// no server to test against (`fresh_database` says so).
macro_rules! database_or_skip {
    () => {
        match fresh_database().await {
            Some(url) => url,
            None => return,
        }
    };
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
    open_leased(url, Duration::from_secs(10)).await
}

async fn open_leased(url: &str, lease: Duration) -> PostgresStore {
    PostgresStore::open(&config(url, lease))
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

/// A queued task of `store`, claimed by it and saved `running`: the task as saved.
async fn running(store: &PostgresStore) -> Task {
    let a = queued(store).await;
    assert_eq!(store.claim_next_for_test().await, Claim::Claimed(a.id));
    let mut t = store.task(a.id).await.unwrap().unwrap();
    t.transition(TaskState::Running);
    store.update_task(&t).await.unwrap();
    t
}

/// A write refused because this instance no longer holds the task's lease.
fn assert_fenced(result: Result<(), StoreError>) {
    assert!(matches!(result, Err(StoreError::Fenced(_))), "{result:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shared_store_contract() {
    let url = database_or_skip!();
    crate::store::conformance::all(&open(&url).await).await;
}

/// Two instances starting at once: one migrates, the other waits and finds the schema ready;
/// a schema newer than this build is refused with advice.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_starts_migrate_once_and_newer_schemas_are_refused() {
    let url = database_or_skip!();
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
    let url = database_or_skip!();
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
    let url = database_or_skip!();
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
    assert_fenced(one.update_task(&t).await);
    t.transition(TaskState::Completed);
    two.update_task(&t).await.unwrap();
    two.shared().unwrap().release(ids[0]);
    assert_eq!(one.claim_next_for_test().await, Claim::Claimed(ids[1]));
    assert_eq!(one.shared_queue_position(ids[2]).await, Some(2));
}

/// A lapsed lease: the task ends failed (interrupted) at the next claim by anyone; its old
/// holder's renewal is refused, so it loses the lease, and its writes (progress, and the outcome
/// with its turns) change nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_lapsed_lease_fails_the_task_and_fences_its_old_holder() {
    let url = database_or_skip!();
    let holder = open_leased(&url, Duration::from_secs(3)).await;
    let survivor = open(&url).await;
    let (a, b) = (queued(&holder).await, queued(&holder).await);
    assert_eq!(holder.claim_next_for_test().await, Claim::Claimed(a.id));
    let lease = holder.shared().unwrap().lease(a.id).expect("a lease");
    let mut t = holder.task(a.id).await.unwrap().unwrap();
    t.transition(TaskState::Running);
    holder.update_task(&t).await.unwrap();
    // The lease lapses, as it does for a holder that stopped renewing.
    lapse(&holder, a.id).await;
    assert_eq!(survivor.claim_next_for_test().await, Claim::Claimed(b.id));
    let failed = survivor.task(a.id).await.unwrap().unwrap();
    assert_eq!(failed.state, TaskState::Failed);
    assert_eq!(failed.result, crate::store::INTERRUPTED_INSTANCE_LOST);
    // The holder's next renewal (every half second with this lease) is refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while lease.loss().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease was not lost"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lease.loss(), Some(crate::store::LeaseLoss::TakenOver));
    t.transition(TaskState::Completed);
    t.result = "the late answer".into();
    assert_fenced(holder.finish_task(&t, &turns("the late answer")).await);
    assert_fenced(holder.update_task(&t).await);
    assert!(holder.session_turns(a.session_id).await.unwrap().is_empty());
    // Released, the claim is forgotten; a progress write arriving after that (the runner's
    // background writer) cannot bring the ended task back either.
    holder.shared().unwrap().release(a.id);
    let mut stale = t.clone();
    stale.state = TaskState::Running;
    stale.result.clear();
    assert_fenced(holder.update_task(&stale).await);
    assert_eq!(survivor.task(a.id).await.unwrap().unwrap(), failed);
}

/// A write delivered after the lease lapsed, before anyone else noticed (a partition that
/// healed late): the claim's attempt and owner still match, but the lease does not run any
/// more, so nothing is written.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_after_the_lease_lapsed_is_refused_even_before_anyone_takes_over() {
    let url = database_or_skip!();
    let store = open(&url).await;
    let mut t = running(&store).await;
    lapse(&store, t.id).await;
    t.transition(TaskState::Completed);
    assert_fenced(store.finish_task(&t, &turns("late")).await);
    assert_eq!(
        store.task(t.id).await.unwrap().unwrap().state,
        TaskState::Running
    );
    assert!(store.session_turns(t.session_id).await.unwrap().is_empty());
}

/// Once this process gave a lease up, its writes are refused before they are sent, although
/// the database would still take them.
#[tokio::test(flavor = "multi_thread")]
async fn writes_stop_the_moment_the_lease_is_given_up() {
    let url = database_or_skip!();
    let store = open(&url).await;
    let mut t = running(&store).await;
    let lease = store.shared().unwrap().lease(t.id).unwrap();
    lease.lose(crate::store::LeaseLoss::Unconfirmed(Duration::from_secs(9)));
    t.steps_done = 1;
    assert_fenced(store.update_task(&t).await);
    assert_eq!(store.task(t.id).await.unwrap().unwrap().steps_done, 0);
}

/// The outcome and its turns are written together; a retry of an outcome that was written
/// (its answer lost with the connection) succeeds and stores nothing twice.
#[tokio::test(flavor = "multi_thread")]
async fn an_outcome_is_written_with_its_turns_once() {
    let url = database_or_skip!();
    let store = open(&url).await;
    let mut t = running(&store).await;
    t.transition(TaskState::Completed);
    t.result = "the answer".into();
    let answer = turns("the answer");
    store.finish_task(&t, &answer).await.unwrap();
    store.finish_task(&t, &answer).await.unwrap();
    assert_eq!(store.session_turns(t.session_id).await.unwrap(), answer);
    assert_eq!(store.task(t.id).await.unwrap().unwrap(), t);
    // Another outcome is not a retry.
    t.result = "another answer".into();
    assert_fenced(store.finish_task(&t, &turns("another answer")).await);
    store.shared().unwrap().release(t.id);
    assert_eq!(store.claim_next_for_test().await, Claim::Empty);
}

/// The heartbeat has a thread and a connection of its own: a runtime blocked for longer than
/// the lease does not keep it from renewing.
#[tokio::test(flavor = "current_thread")]
async fn the_heartbeat_renews_while_the_runtime_is_blocked() {
    let url = database_or_skip!();
    let store = open_leased(&url, Duration::from_secs(3)).await;
    let a = queued(&store).await;
    assert_eq!(store.claim_next_for_test().await, Claim::Claimed(a.id));
    let before = lease_end(&store, a.id).await;
    // The only thread of this runtime, blocked: no task of it runs meanwhile.
    std::thread::sleep(Duration::from_secs(4));
    let after = lease_end(&store, a.id).await;
    let lease = store.shared().unwrap().lease(a.id).unwrap();
    assert_eq!(lease.loss(), None);
    assert!(
        after - before >= 3.0,
        "renewed by {:.2} s only",
        after - before
    );
}

/// A server that accepts connections but never answers (a silent partition): opening the
/// store fails within `store.timeout`, saying so.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_answers_fails_the_open_within_the_timeout() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let mut c = config(
        &format!("postgres://agent:secret@127.0.0.1:{port}/agent_mcp"),
        Duration::from_secs(3),
    );
    c.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let err = PostgresStore::open(&c).await.unwrap_err().to_string();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(err.contains("did not answer within 300ms"), "{err}");
    assert!(!err.contains("secret"), "{err}");
    held.abort();
}

/// Cancel: a queued task ends at once; a running one is marked, its instance is told by
/// notification, and its heartbeat reads the mark.
#[tokio::test(flavor = "multi_thread")]
async fn cancel_reaches_the_instance_that_holds_the_task() {
    let url = database_or_skip!();
    let (runner, other) = (open(&url).await, open(&url).await);
    let mut events = runner.shared().unwrap().events();
    let (a, b) = (queued(&other).await, queued(&other).await);
    assert_eq!(runner.claim_next_for_test().await, Claim::Claimed(a.id));
    let shared = other.shared().unwrap();
    let cancel = |id| async move { shared.request_cancel(id, "before").await.unwrap().unwrap() };
    let cancelled = cancel(b.id).await;
    assert_eq!(
        (cancelled.state, cancelled.result.as_str()),
        (TaskState::Cancelled, "before")
    );
    let marked = cancel(a.id).await;
    assert_eq!(
        marked.state,
        TaskState::Queued,
        "claimed: marked, not ended"
    );
    let heard = next_cancel(&mut events, Duration::from_secs(2)).await;
    assert_eq!(heard, Some(a.id), "the cancel notification within 2 s");
}

/// A cancel whose notification is lost: the holder's heartbeat reads the mark and announces
/// it all the same, within about one renewal.
#[tokio::test(flavor = "multi_thread")]
async fn the_heartbeat_announces_a_cancel_whose_notification_was_lost() {
    let url = database_or_skip!();
    let runner = open(&url).await;
    let mut events = runner.shared().unwrap().events();
    let a = queued(&runner).await;
    assert_eq!(runner.claim_next_for_test().await, Claim::Claimed(a.id));
    // Marked without a NOTIFY, as if the notification never arrived.
    let mark = "UPDATE tasks SET cancel_requested = true WHERE id = $1";
    update_task(&runner, mark, a.id).await;
    let heard = next_cancel(&mut events, Duration::from_secs(3)).await;
    assert_eq!(heard, Some(a.id), "the heartbeat's cancel within 3 s");
}

/// The shared GCRA bucket: `burst` at once, then one per emission interval, with the wait
/// said; buckets are per key.
#[tokio::test(flavor = "multi_thread")]
async fn rate_buckets_allow_the_burst_then_say_how_long_to_wait() {
    let url = database_or_skip!();
    let (a, b) = (open(&url).await, open(&url).await);
    for store in [&a, &b, &a] {
        assert_eq!(take_cell(store, "k").await, None);
    }
    let wait = take_cell(&b, "k").await.expect("over the burst");
    // At most one emission interval (less by however long the four calls took).
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(1),
        "{wait:?}"
    );
    assert_eq!(take_cell(&a, "other").await, None);
    tokio::time::sleep(wait).await;
    assert_eq!(take_cell(&a, "k").await, None);
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

/// A request and its answer, as a completed task adds them to its session.
fn turns(answer: &str) -> Vec<Turn> {
    vec![
        Turn {
            role: TurnRole::User,
            content: "r".into(),
        },
        Turn {
            role: TurnRole::Assistant,
            content: answer.into(),
        },
    ]
}

/// Ends task `id`'s lease now, on the database: what a holder that stopped renewing leaves.
async fn lapse(store: &PostgresStore, id: Uuid) {
    let sql = "UPDATE tasks SET lease_until = now() - interval '1 second' WHERE id = $1";
    update_task(store, sql, id).await;
}

/// Runs the statement `sql` with task `id` as `$1` on the store's database.
async fn update_task(store: &PostgresStore, sql: &str, id: Uuid) {
    let client = store.client().await.unwrap();
    client.execute(sql, &[&id.to_string()]).await.unwrap();
}

/// The next cancel announced on `events` within `budget`, if one is.
async fn next_cancel(
    events: &mut tokio::sync::broadcast::Receiver<SharedEvent>,
    budget: Duration,
) -> Option<Uuid> {
    let cancel = async {
        loop {
            if let Ok(SharedEvent::Cancel(id)) = events.recv().await {
                return id;
            }
        }
    };
    tokio::time::timeout(budget, cancel).await.ok()
}

/// One cell of the shared bucket `key` (60 a minute, a burst of 3): `None` when taken, else
/// how long to wait.
async fn take_cell(store: &PostgresStore, key: &str) -> Option<Duration> {
    store.shared().unwrap().take_cell(key, 60, 3).await.unwrap()
}

/// When task `id`'s lease ends, in seconds on the database clock.
async fn lease_end(store: &PostgresStore, id: Uuid) -> f64 {
    store
        .client()
        .await
        .unwrap()
        .query_one(
            "SELECT extract(epoch FROM lease_until)::float8 FROM tasks WHERE id = $1",
            &[&id.to_string()],
        )
        .await
        .unwrap()
        .get(0)
}

impl PostgresStore {
    async fn claim_next_for_test(&self) -> Claim {
        self.shared().unwrap().claim_next().await.unwrap()
    }

    async fn shared_queue_position(&self, id: Uuid) -> Option<usize> {
        self.shared().unwrap().queue_position(id).await.unwrap()
    }
}
