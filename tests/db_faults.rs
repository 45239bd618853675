//! Database faults with several `agent-mcp serve` processes on one PostgreSQL (real child
//! processes, real HTTP on loopback, the fake Ollama): a network partition between one instance
//! and the database (silent and hard, through a TCP proxy of our own), a database restart, and
//! an instance frozen by SIGSTOP for longer and for less than its lease.
//!
//! Each test prints its timings as `FIGURE` lines. Needs `AGENT_MCP_TEST_PG_URL` and
//! `AGENT_MCP_TEST_PG_BIN` (`bash scripts/postgres.sh cargo test --locked`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply, SeenChat, first_request};
use support::harness::{HttpClient, ServeProcess, field, result_of, tool_text, wait_terminal};
use support::instances::{
    LEASE, instances, lease_until, session_turns, shared_config, signal, stored, wait_state,
};
use support::pg;
use support::proxy::Proxy;

/// The request of the task that keeps calling the model (a tool round after another).
const WORKER: &str = "keep working";
/// How long the fake Ollama takes for each of its tool rounds.
const ROUND: Duration = Duration::from_millis(200);
/// What a client waits for an answer before calling it no answer at all.
const PATIENCE: Duration = Duration::from_secs(10);

/// A `list_dir` call whose path differs in every round, so the agent's memory of identical
/// calls never answers it instead of the tool.
fn tool_round(body: &Value) -> Reply {
    let rounds = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let path = std::iter::once(".")
        .chain(std::iter::repeat_n("/.", rounds))
        .collect::<String>();
    Reply::delayed(
        ROUND,
        Reply::tool_call("list_dir", json!({"path": path}), 5, 2),
    )
}

/// The chats of the task whose request is `request`.
fn chats_of(fake: &FakeOllama, request: &str) -> Vec<SeenChat> {
    fake.chats_seen()
        .into_iter()
        .filter(|c| c.request() == request)
        .collect()
}

/// Seconds from `from` to `to` on the wall clock (negative when `to` is earlier).
fn secs(from: SystemTime, to: SystemTime) -> f64 {
    match to.duration_since(from) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// When the `WORKER` task's chats that started after `since` started, in seconds from `from`.
fn worker_chats_after(fake: &FakeOllama, since: SystemTime, from: SystemTime) -> Vec<f64> {
    chats_of(fake, WORKER)
        .iter()
        .filter(|c| c.at > since)
        .map(|c| secs(from, c.at))
        .collect()
}

/// What the instance has logged so far (for failure messages).
fn log_of(server: &mut ServeProcess) -> String {
    server.stderr_so_far().join("\n")
}

/// `GET path` with a deadline: the status and body, or `None` for no answer within
/// [`PATIENCE`]; and how long it took.
async fn get(base: &str, path: &str) -> (Option<(u16, String)>, Duration) {
    let started = Instant::now();
    let url = format!("{base}{path}");
    let answer = tokio::time::timeout(PATIENCE, async {
        let r = reqwest::get(&url).await.ok()?;
        let status = r.status().as_u16();
        Some((status, r.text().await.ok()?))
    })
    .await
    .ok()
    .flatten();
    (answer, started.elapsed())
}

/// `agent_run` with a deadline: the tool result, or `None` for no answer within [`PATIENCE`];
/// and how long it took.
async fn try_agent_run(client: &HttpClient, request: &str) -> (Option<Value>, Duration) {
    let started = Instant::now();
    let answer = tokio::time::timeout(
        PATIENCE,
        client.tool_call("agent_run", json!({"request": request})),
    )
    .await
    .ok()
    .map(|r| r.body["result"].clone());
    (answer, started.elapsed())
}

/// Waits (polling every `poll`, failing with `failure` once `deadline` passes) until `ready`
/// holds for the number of chats of the `WORKER` task.
async fn until_worker_chats(
    fake: &FakeOllama,
    deadline: Instant,
    poll: Duration,
    failure: &str,
    ready: impl Fn(usize) -> bool,
) {
    while !ready(chats_of(fake, WORKER).len()) {
        assert!(Instant::now() < deadline, "{failure}");
        tokio::time::sleep(poll).await;
    }
}

/// Waits up to 10 s until the `WORKER` task made `n` chats.
async fn until_worker_made(fake: &FakeOllama, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    until_worker_chats(
        fake,
        deadline,
        Duration::from_millis(20),
        "the task is not calling the model",
        |seen| seen >= n,
    )
    .await;
}

/// Starts the `WORKER` task on `server` and waits until it runs: its id.
async fn start_worker(server: &ServeProcess) -> String {
    let client = server.client();
    let worker = client.agent_run(WORKER).await;
    wait_state(&client, &worker, "running", Duration::from_secs(10)).await;
    worker
}

/// A fake Ollama that answers the `WORKER` task with `reply` and no other request.
async fn worker_fake(reply: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> FakeOllama {
    FakeOllama::start_with(
        FakeConfig::default()
            .with_responder(move |body| (first_request(body) == WORKER).then(|| reply(body))),
    )
    .await
}

/// Waits up to 20 s until task `id` is `completed`, asking `server`.
async fn completes_on(server: &ServeProcess, id: &str) {
    wait_state(&server.client(), id, "completed", Duration::from_secs(20)).await;
}

/// `agent_run`'s answer is the store's failure, naming PostgreSQL.
fn assert_store_failed(run: &Value) {
    let text = tool_text(run);
    assert!(
        text.starts_with("The task store failed (") && text.contains("PostgreSQL at"),
        "{text}"
    );
}

/// Task `worker` failed for its lapsed lease as `failed_row` says, and stayed so: the row did
/// not change (it did not fail twice) and no late write landed in its session.
async fn assert_failed_once_and_untouched(
    db: &tokio_postgres::Client,
    worker: &str,
    failed_row: &(String, String, i64),
    log: &str,
) {
    assert!(failed_row.1.contains("lease lapsed"), "{}", failed_row.1);
    assert_eq!(
        &stored(db, worker).await,
        failed_row,
        "the failed task changed (failed twice?):\n{log}"
    );
    assert_eq!(
        session_turns(db, worker).await,
        0,
        "a late write landed:\n{log}"
    );
}

/// `/readyz` says the store is not ready, with the database's error.
fn assert_store_not_ready(status: u16, body: &str) {
    let ready: Value = serde_json::from_str(body).unwrap_or_default();
    assert_eq!(status, 503, "{body}");
    assert_eq!(ready["store"]["ok"], json!(false), "{body}");
    let error = ready["store"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("PostgreSQL at"), "{body}");
}

/// Polls `/readyz` until it answers 200; how long that took.
async fn wait_ready(base: &str, budget: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if let (Some((200, _)), _) = get(base, "/readyz").await {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < budget,
            "{base} not ready after {budget:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Follows task `id`'s lease on the database until nobody holds it: the last end it had, and
/// when it was found released.
fn follow_lease(
    db: Arc<tokio_postgres::Client>,
    id: String,
) -> tokio::task::JoinHandle<(SystemTime, Instant)> {
    tokio::spawn(async move {
        let mut last = None;
        loop {
            match (lease_until(&db, &id).await, last) {
                (Some(until), _) => last = Some(until),
                (None, Some(last)) => return (last, Instant::now()),
                (None, None) => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// Packets dropped.
    Silent,
    /// Connections reset.
    Hard,
}

/// When the model answers the cut instance's task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// Right after the cut: the instance has the answer but cannot save it.
    WithinLease,
    /// Once the task failed: only an instance that kept working would get it.
    AfterLapse,
}

/// The instance running a task is cut from the database: it stops calling the model before its
/// lease lapses, so no two chats ever overlap; an answer it could not save is never written;
/// while cut it answers `/readyz` and `agent_run` within 5 s with a store error; healed, it
/// rejoins.
async fn partition_of_the_running_instance(cut: Cut, answer_at: Answer) {
    let Some(url) = pg::fresh_database().await else {
        return;
    };
    let answer = Arc::new(AtomicBool::new(false));
    let fake = worker_fake({
        let answer = answer.clone();
        move |body| {
            if answer.load(Ordering::SeqCst) {
                Reply::text("the late answer", 5, 3)
            } else {
                tool_round(body)
            }
        }
    })
    .await;
    let proxy = Proxy::start(pg::server_addr(&url));
    let mut config = shared_config(&fake.url(), &url);
    config.agent.max_iterations = 10_000;
    let mut cut_config = config.clone();
    cut_config.store.url = Some(pg::via_port(&url, proxy.port()));
    let db = Arc::new(pg::connect(&url).await);

    // The instance to cut starts alone, so the task is its own.
    let mut cut_off = ServeProcess::spawn(&cut_config).await;
    let worker = start_worker(&cut_off).await;
    let mut survivors = instances(&config, 2).await;
    let survivor = survivors[0].client();
    let next = survivor.agent_run("after the cut").await;
    until_worker_made(&fake, 3).await;
    let lease = follow_lease(db.clone(), worker.clone());

    let cut_at = SystemTime::now();
    let cut_clock = Instant::now();
    match cut {
        Cut::Silent => proxy.cut_silently(),
        Cut::Hard => proxy.cut_hard(),
    }
    if answer_at == Answer::WithinLease {
        answer.store(true, Ordering::SeqCst);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cut_client = cut_off.client();
    let ((ready, ready_took), (run, run_took)) = tokio::join!(
        get(&cut_off.base, "/readyz"),
        try_agent_run(&cut_client, "sent to the cut instance"),
    );
    let (lapse, ended) = lease.await.expect("the lease follower");
    let failover = ended.duration_since(cut_clock);
    wait_state(&survivor, &worker, "failed", Duration::from_secs(5)).await;
    let failed_row = stored(&db, &worker).await;
    answer.store(true, Ordering::SeqCst);
    wait_state(&survivor, &next, "completed", Duration::from_secs(20)).await;
    let turns_while_cut = session_turns(&db, &worker).await;

    proxy.heal();
    let rejoined = wait_ready(&cut_off.base, Duration::from_secs(20)).await;
    // Time for anything the cut instance held back to land.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let last_chat = chats_of(&fake, WORKER)
        .last()
        .map(|c| c.at)
        .unwrap_or(cut_at);
    let late = worker_chats_after(&fake, lapse, cut_at);
    let log = log_of(&mut cut_off);

    eprintln!(
        "FIGURE partition ({cut:?}, answer {answer_at:?}): worker failed {:.2} s after the cut \
         (lease {} s, last renewed {:.2} s before the cut, lapsed {:.2} s after it); the cut \
         instance's last model call started {:.2} s after the cut ({} after the lapse); \
         /readyz answered in {:.2} s, agent_run in {:.2} s; ready again {:.2} s after healing; \
         session turns {turns_while_cut} while cut, {} after",
        failover.as_secs_f64(),
        LEASE.as_secs(),
        LEASE.as_secs_f64() - secs(cut_at, lapse),
        secs(cut_at, lapse),
        secs(cut_at, last_chat),
        late.len(),
        ready_took.as_secs_f64(),
        run_took.as_secs_f64(),
        rejoined.as_secs_f64(),
        session_turns(&db, &worker).await,
    );
    assert!(
        late.is_empty(),
        "the cut instance started model calls after its lease lapsed, at {late:?} s after the \
         cut:\n{log}"
    );
    assert_eq!(
        fake.max_concurrent_chats(),
        1,
        "two chats overlapped:\n{log}"
    );
    assert_failed_once_and_untouched(&db, &worker, &failed_row, &log).await;

    let (status, body) = ready.unwrap_or_else(|| panic!("/readyz gave no answer:\n{log}"));
    assert!(
        ready_took < Duration::from_secs(5),
        "/readyz took {ready_took:?}"
    );
    assert_store_not_ready(status, &body);
    let run = run.unwrap_or_else(|| panic!("agent_run gave no answer:\n{log}"));
    assert!(
        run_took < Duration::from_secs(5),
        "agent_run took {run_took:?}"
    );
    assert_eq!(run["isError"], json!(true), "{run}");
    assert_store_failed(&run);

    // Healed, it works again: alone, it runs the next task itself.
    survivors.clear();
    let again = cut_off.client().agent_run("after healing").await;
    completes_on(&cut_off, &again).await;
}

/// One test per kind of cut and time of the answer (separate tests, so they run in parallel).
macro_rules! partition_tests {
    ($($name:ident: $cut:expr, $answer:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            partition_of_the_running_instance($cut, $answer).await;
        }
    )*};
}

partition_tests! {
    a_silent_partition_stops_the_cut_instance_before_its_lease_lapses: Cut::Silent, Answer::AfterLapse;
    a_silent_partition_writes_nothing_of_an_answer_it_could_not_save: Cut::Silent, Answer::WithinLease;
    a_hard_partition_stops_the_cut_instance_before_its_lease_lapses: Cut::Hard, Answer::AfterLapse;
    a_hard_partition_writes_nothing_of_an_answer_it_could_not_save: Cut::Hard, Answer::WithinLease;
}

/// The database restarts (stop, 3 s down, start) while a task's model answers: the task ends
/// `completed` with that answer, and the queued tasks complete in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_restart_while_the_model_answers_loses_nothing() {
    let Some(cluster) = pg::Cluster::start() else {
        return;
    };
    const SLOW: &str = "answer during the restart";
    const ANSWER: &str = "the answer that outlived the restart";
    let fake = FakeOllama::start_with(FakeConfig::default().with_responder(|body| {
        (first_request(body) == SLOW)
            .then(|| Reply::delayed(Duration::from_millis(2500), Reply::text(ANSWER, 5, 3)))
    }))
    .await;
    let mut config = shared_config(&fake.url(), &cluster.url());
    config.store.lease = Duration::from_secs(10);
    let mut servers = instances(&config, 2).await;
    let clients: Vec<HttpClient> = servers.iter().map(ServeProcess::client).collect();
    let slow = clients[0].agent_run(SLOW).await;
    fake.until_chat_started(Duration::from_secs(10), "the chat never started")
        .await;
    let mut queued = Vec::new();
    for i in 0..10 {
        queued.push(clients[i % 2].agent_run(&format!("queued {i:02}")).await);
    }

    let stopping = Instant::now();
    cluster.stop_server();
    let stopped = Instant::now();
    let ((ready, ready_took), (run, run_took)) = tokio::join!(
        get(&servers[1].base, "/readyz"),
        try_agent_run(&clients[1], "sent while the database is down"),
    );
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(stopped.elapsed())).await;
    cluster.start_server();
    let started = Instant::now();
    let (ready_again, (text, slow_done)) = tokio::join!(
        wait_ready(&servers[1].base, Duration::from_secs(20)),
        async {
            let text = wait_terminal(|| clients[1].agent_status(&slow)).await;
            (text, started.elapsed())
        },
    );
    let db = pg::connect(&cluster.url()).await;
    let log = log_of(&mut servers[0]);
    eprintln!(
        "FIGURE database restart: down {:.2} s (stop took {:.2} s); while down /readyz answered \
         in {:.2} s, agent_run in {:.2} s; after the start, ready in {:.2} s, the task that \
         answered meanwhile {} {:.2} s later",
        started.duration_since(stopped).as_secs_f64(),
        stopped.duration_since(stopping).as_secs_f64(),
        ready_took.as_secs_f64(),
        run_took.as_secs_f64(),
        ready_again.as_secs_f64(),
        field(&text, "status"),
        slow_done.as_secs_f64(),
    );
    assert_eq!(result_of(&text), ANSWER, "{text}\n{log}");
    assert_eq!(session_turns(&db, &slow).await, 2);
    for id in &queued {
        wait_state(&clients[0], id, "completed", Duration::from_secs(30)).await;
    }
    let order: Vec<String> = fake
        .chats_seen()
        .iter()
        .map(|c| c.request().to_owned())
        .collect();
    let mut want = vec![SLOW.to_owned()];
    want.extend((0..10).map(|i| format!("queued {i:02}")));
    assert_eq!(order, want, "tasks ran out of order, or one ran twice");
    assert_eq!(fake.max_concurrent_chats(), 1);

    let (status, body) = ready.expect("/readyz answered while the database was down");
    assert_store_not_ready(status, &body);
    let run = run.expect("agent_run answered while the database was down");
    assert!(ready_took < Duration::from_secs(5) && run_took < Duration::from_secs(5));
    assert_store_failed(&run);
}

/// An instance frozen (SIGSTOP) for twice its lease: a survivor fails its task once; resumed,
/// it makes no further model call for it, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_freeze_longer_than_the_lease_costs_the_task_and_nothing_more() {
    let Some(url) = pg::fresh_database().await else {
        return;
    };
    let fake = worker_fake(tool_round).await;
    let mut config = shared_config(&fake.url(), &url);
    config.agent.max_iterations = 10_000;
    let db = pg::connect(&url).await;
    let mut frozen = ServeProcess::spawn(&config).await;
    let worker = start_worker(&frozen).await;
    let survivors = instances(&config, 2).await;
    let survivor = survivors[0].client();
    let next = survivor.agent_run("after the freeze").await;
    // Frozen just after a chat reached the model: its reply comes while the instance is
    // stopped, so the next call is due the moment it resumes.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (poll, failure) = (
        Duration::from_millis(20),
        "the task is not calling the model",
    );
    until_worker_chats(&fake, deadline, poll, failure, |n| n >= 2).await;
    let seen = chats_of(&fake, WORKER).len();
    let (poll, failure) = (
        Duration::from_millis(1),
        "the task stopped calling the model",
    );
    until_worker_chats(&fake, deadline, poll, failure, |n| n != seen).await;
    let pid = frozen.child.id().expect("running");
    let stopped = Instant::now();
    signal(pid, "STOP");
    wait_state(&survivor, &worker, "failed", LEASE + Duration::from_secs(6)).await;
    let failover = stopped.elapsed();
    let failed_row = stored(&db, &worker).await;
    tokio::time::sleep((2 * LEASE).saturating_sub(stopped.elapsed())).await;
    let resumed = SystemTime::now();
    signal(pid, "CONT");
    wait_state(&survivor, &next, "completed", Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = worker_chats_after(&fake, resumed, resumed);
    let log = log_of(&mut frozen);
    eprintln!(
        "FIGURE freeze of {} s under a {} s lease: the task failed {:.2} s after SIGSTOP; model \
         calls after SIGCONT: {}",
        (2 * LEASE).as_secs(),
        LEASE.as_secs(),
        failover.as_secs_f64(),
        after.len()
    );
    assert!(
        after.is_empty(),
        "the resumed instance called the model at {after:?} s after SIGCONT:\n{log}"
    );
    assert_failed_once_and_untouched(&db, &worker, &failed_row, &log).await;
    // Resumed, it serves again.
    wait_ready(&frozen.base, Duration::from_secs(10)).await;
}

/// An instance frozen for less than its lease carries on: its task completes with its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_freeze_shorter_than_the_lease_does_not_cost_the_task() {
    let Some(url) = pg::fresh_database().await else {
        return;
    };
    const ANSWER: &str = "done despite the freeze";
    let fake = worker_fake(|body| {
        let rounds = body["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
        if rounds < 6 {
            tool_round(body)
        } else {
            Reply::text(ANSWER, 5, 3)
        }
    })
    .await;
    let lease = Duration::from_secs(5);
    let freeze = Duration::from_secs(2);
    let mut config = shared_config(&fake.url(), &url);
    config.store.lease = lease;
    let db = pg::connect(&url).await;
    let mut frozen = ServeProcess::spawn(&config).await;
    let worker = frozen.client().agent_run(WORKER).await;
    let _other = instances(&config, 1).await;
    until_worker_made(&fake, 2).await;
    let pid = frozen.child.id().expect("running");
    signal(pid, "STOP");
    tokio::time::sleep(freeze).await;
    signal(pid, "CONT");
    completes_on(&frozen, &worker).await;
    let text = frozen.client().agent_status(&worker).await;
    let log = log_of(&mut frozen);
    eprintln!(
        "FIGURE freeze of {} s under a {} s lease: {}",
        freeze.as_secs(),
        lease.as_secs(),
        field(&text, "status")
    );
    assert_eq!(result_of(&text), ANSWER, "{text}\n{log}");
    assert_eq!(session_turns(&db, &worker).await, 2);
    assert_eq!(chats_of(&fake, WORKER).len(), 7, "a call was made twice");
}
