//! Several `agent-mcp serve` processes sharing one PostgreSQL database (real child processes,
//! real HTTP on loopback, the fake Ollama): one task at a time in the whole application, in
//! acceptance order; failover after kill -9; cancel through any instance; one rate limit
//! across instances.
//!
//! Needs `AGENT_MCP_TEST_PG_URL` (`bash scripts/postgres.sh cargo test --locked`).

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::fake_ollama::{FakeConfig, FakeOllama, Reply, last_user};
use support::harness::{HttpClient, ServeProcess};
use support::instances::{LEASE, instances, shared_config, status, wait_holder, wait_state};
use support::pg;

const EXT: &str = "io.modelcontextprotocol/tasks";

/// Three instances on a fresh database, a fake whose first chat never ends, their configuration
/// and a connection to the database; `None` without PostgreSQL.
async fn three_with_a_hang() -> Option<(
    FakeOllama,
    agent_mcp::config::Config,
    Vec<ServeProcess>,
    tokio_postgres::Client,
)> {
    let url = pg::fresh_database().await?;
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::Hang);
    let config = shared_config(&fake.url(), &url);
    let servers = instances(&config, 3).await;
    let db = pg::connect(&url).await;
    Some((fake, config, servers, db))
}

/// Queues `request` on the first of `servers` and waits until its task runs and its chat is
/// in flight (holding the fake's scripted hang): the task id and the pid of the instance that
/// holds it.
async fn hold_running(
    servers: &[ServeProcess],
    db: &tokio_postgres::Client,
    fake: &FakeOllama,
    request: &str,
) -> (String, u32) {
    let client = servers[0].client();
    let id = client.agent_run(request).await;
    let pid = wait_holder(db, &id).await;
    wait_state(&client, &id, "running", Duration::from_secs(10)).await;
    fake.until_chat_started(Duration::from_secs(10), "the chat never started")
        .await;
    (id, pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_run_sixty_tasks_one_at_a_time_in_acceptance_order() {
    let Some(url) = pg::fresh_database().await else {
        return;
    };
    // Each chat takes a while, so overlaps would show.
    let fake = FakeOllama::start_with(
        FakeConfig::default()
            .with_default_reply(Reply::delayed(
                Duration::from_millis(30),
                Reply::text("done", 3, 1),
            ))
            .with_chunk_delay(Duration::from_millis(5)),
    )
    .await;
    let servers = instances(&shared_config(&fake.url(), &url), 3).await;
    let clients: Vec<HttpClient> = servers.iter().map(ServeProcess::client).collect();
    let mut ids = Vec::new();
    for i in 0..60 {
        ids.push(clients[i % 3].agent_run(&format!("task {i:02}")).await);
    }
    for (i, id) in ids.iter().enumerate() {
        wait_state(
            &clients[(i + 1) % 3],
            id,
            "completed",
            Duration::from_secs(60),
        )
        .await;
    }
    assert_eq!(fake.max_concurrent_chats(), 1, "two chats overlapped");
    let order: Vec<String> = fake.chat_requests().iter().map(last_user).collect();
    let want: Vec<String> = (0..60).map(|i| format!("task {i:02}")).collect();
    assert_eq!(order, want, "tasks started out of acceptance order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_the_running_instance_fails_its_task_and_the_queue_moves_on() {
    // The first task's chat never ends: its instance is killed while it runs.
    let Some((fake, config, mut servers, db)) = three_with_a_hang().await else {
        return;
    };
    // Killed only once its chat holds the scripted hang: killed before that, the hang would
    // go to the next task's chat instead, which then waits out the request timeout.
    let (first, pid) = hold_running(&servers, &db, &fake, "hangs").await;
    let next: Vec<String> = vec![
        servers[1].client().agent_run("after one").await,
        servers[2].client().agent_run("after two").await,
    ];
    let victim = servers
        .iter()
        .position(|s| s.child.id() == Some(pid))
        .expect("the holder is one of ours");
    let mut killed = servers.remove(victim);
    let killed_at = Instant::now();
    killed.child.start_kill().expect("kill -9");
    killed.child.wait().await.expect("reaped");
    let survivor = servers[0].client();
    wait_state(&survivor, &first, "failed", LEASE + Duration::from_secs(6)).await;
    let failover = killed_at.elapsed();
    let text = survivor.agent_status(&first).await;
    assert!(text.contains("lease lapsed"), "{text}");
    for id in &next {
        wait_state(&survivor, id, "completed", Duration::from_secs(20)).await;
    }
    eprintln!(
        "FIGURE failover: task failed {:.2} s after kill -9 (lease {} s, renewed every {:.1} s)",
        failover.as_secs_f64(),
        LEASE.as_secs(),
        agent_mcp::store::LeaseTiming::of(LEASE)
            .renew_every
            .as_secs_f64()
    );
    assert!(
        failover <= LEASE + Duration::from_secs(2),
        "failover took {failover:?}"
    );
    // The killed instance comes back and joins without harm.
    let back = ServeProcess::spawn(&config).await;
    let again = back.client().agent_run("after the restart").await;
    wait_state(&back.client(), &again, "completed", Duration::from_secs(20)).await;
    assert_eq!(status(&survivor, &first).await, "failed");
    assert_eq!(fake.max_concurrent_chats(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_through_another_instance_stops_the_running_task_within_two_seconds() {
    let Some((fake, _config, servers, db)) = three_with_a_hang().await else {
        return;
    };
    let (id, pid) = hold_running(&servers, &db, &fake, "hangs until cancelled").await;
    let other_server = servers
        .iter()
        .find(|s| s.child.id() != Some(pid))
        .expect("an instance that does not run it");
    let other = other_server.client();
    // Operations on an instance that runs nothing: ready (the database answers), and the
    // queue it reports is the application's.
    for (i, server) in servers.iter().take(2).enumerate() {
        server.client().agent_run(&format!("queued {i}")).await;
    }
    let get = |path: &str| {
        let url = format!("{}{path}", other_server.base);
        async move {
            let r = reqwest::get(&url).await.expect("GET");
            (r.status().as_u16(), r.text().await.expect("body"))
        }
    };
    let (status, ready) = get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert!(ready.contains(r#""store":{"ok":true}"#), "{ready}");
    let (_, metrics) = get("/metrics").await;
    assert!(
        metrics.lines().any(|l| l == "agent_mcp_queue_depth 2"),
        "{metrics}"
    );
    let asked = Instant::now();
    let r = other
        .modern_with_caps(
            "tasks/cancel",
            json!({"taskId": id}),
            json!({"extensions": {EXT: {}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    wait_state(&other, &id, "cancelled", Duration::from_secs(2)).await;
    fake.until_chats_closed(
        Duration::from_secs(2),
        "the fake Ollama's connection stayed open",
    )
    .await;
    eprintln!(
        "FIGURE cross-instance cancel: cancelled and connection closed {:.3} s after tasks/cancel",
        asked.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_caller_spreading_61_agent_runs_over_three_instances_gets_one_429() {
    let Some(url) = pg::fresh_database().await else {
        return;
    };
    let fake = FakeOllama::start().await;
    let mut config = shared_config(&fake.url(), &url);
    // 60 agent_run at once, and the next cell a minute later: so 61 in a minute are one too
    // many however fast this machine sends them. Per instance, each would allow all 61.
    config.rate_limit = Default::default();
    config.rate_limit.per_minute = 1;
    config.rate_limit.burst = 60;
    let servers = instances(&config, 3).await;
    let clients: Vec<HttpClient> = servers.iter().map(ServeProcess::client).collect();
    let started = Instant::now();
    let mut refused = Vec::new();
    for i in 0..61 {
        let r = clients[i % 3]
            .tool_call("agent_run", json!({"request": format!("r{i}")}))
            .await;
        match r.status.as_u16() {
            200 => {}
            429 => refused.push((i, r.text)),
            other => panic!("agent_run {i}: {other} {}", r.text),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "too slow to test a minute's budget"
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, 60, "the 61st is the one refused");
    assert!(refused[0].1.contains("Retry after"), "{}", refused[0].1);
}
