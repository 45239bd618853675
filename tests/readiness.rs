//! Readiness tells the truth during a database outage (issue 56): three `agent-mcp serve`
//! processes on one PostgreSQL cluster of the test's own, nothing running, `/readyz` sampled
//! on each every [`SAMPLE`] while the database is stopped for 3 s and started again. Each
//! instance answers 503 within 1 s of the stop, and keeps answering 503 until the restart;
//! 200 within 1 s of the restart; `agent_mcp_store_up` on `/metrics` says the same.
//!
//! Prints its timings as a `FIGURE` line. Needs `AGENT_MCP_TEST_PG_BIN`
//! (`bash scripts/postgres.sh cargo test --locked --test readiness`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::ServeProcess;
use support::instances::{instances, shared_config};
use support::pg;

/// How often each instance's `/readyz` is sampled.
const SAMPLE: Duration = Duration::from_millis(50);
/// What the issue allows between the stop (or the restart) and `/readyz` saying so.
const WITHIN: Duration = Duration::from_secs(1);
/// How long the database stays down.
const DOWN: Duration = Duration::from_secs(3);
/// A sample that takes longer than this counts as no answer.
const PATIENCE: Duration = Duration::from_secs(2);

/// One `/readyz` hit: when it was sent and answered, and its status (`None`: no answer in
/// time).
#[derive(Clone, Copy, Debug)]
struct Sample {
    sent: Instant,
    answered: Instant,
    status: Option<u16>,
}

async fn get(url: &str) -> Option<(u16, String)> {
    tokio::time::timeout(PATIENCE, async {
        let r = reqwest::get(url).await.ok()?;
        let status = r.status().as_u16();
        Some((status, r.text().await.ok()?))
    })
    .await
    .ok()
    .flatten()
}

/// Samples `{base}/readyz` every [`SAMPLE`] until `stop` is set.
fn sample(base: &str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Sample>> {
    let url = format!("{base}/readyz");
    tokio::spawn(async move {
        let mut samples = Vec::new();
        let mut tick = tokio::time::interval(SAMPLE);
        while !stop.load(Ordering::SeqCst) {
            tick.tick().await;
            let sent = Instant::now();
            let status = get(&url).await.map(|(status, _)| status);
            samples.push(Sample {
                sent,
                answered: Instant::now(),
                status,
            });
        }
        samples
    })
}

/// Polls every instance's `/readyz` until each answers `want`, within `budget`.
async fn until_all(servers: &[ServeProcess], want: u16, budget: Duration) {
    let deadline = Instant::now() + budget;
    for server in servers {
        loop {
            let got = get(&format!("{}/readyz", server.base)).await;
            if got.as_ref().is_some_and(|(status, _)| *status == want) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} is not {want} after {budget:?}: {got:?}",
                server.base
            );
            tokio::time::sleep(SAMPLE).await;
        }
    }
}

/// The value of the `agent_mcp_store_up` gauge on `base`'s `/metrics`.
async fn store_up(base: &str) -> String {
    let (status, metrics) = get(&format!("{base}/metrics"))
        .await
        .unwrap_or_else(|| panic!("{base}/metrics gave no answer"));
    assert_eq!(status, 200, "{metrics}");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("agent_mcp_store_up "))
        .unwrap_or_else(|| panic!("no agent_mcp_store_up on {base}/metrics:\n{metrics}"))
        .to_owned()
}

/// How long after `from` the first sample answered after it with status `want` was answered.
fn first_after(samples: &[Sample], from: Instant, want: u16) -> Option<Duration> {
    samples
        .iter()
        .find(|s| s.answered >= from && s.status == Some(want))
        .map(|s| s.answered.duration_since(from))
}

/// The samples sent at or after `from` and answered before `to`.
fn within(samples: &[Sample], from: Instant, to: Instant) -> impl Iterator<Item = &Sample> {
    samples
        .iter()
        .filter(move |s| s.sent >= from && s.answered < to)
}

/// The samples of [`within`] whose status is not `want`, sent when (in ms from `origin`).
fn off(samples: &[Sample], from: Instant, to: Instant, want: u16, origin: Instant) -> Vec<String> {
    within(samples, from, to)
        .filter(|s| s.status != Some(want))
        .map(|s| {
            let at = s.sent.duration_since(origin).as_millis();
            format!("{at} ms: {:?}", s.status)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readyz_answers_503_within_a_second_of_a_database_stop_and_200_within_a_second_of_its_start()
 {
    let Some(cluster) = pg::Cluster::start() else {
        return;
    };
    let fake = FakeOllama::start().await;
    let config = shared_config(&fake.url(), &cluster.url());
    let servers = instances(&config, 3).await;
    until_all(&servers, 200, Duration::from_secs(20)).await;
    for server in &servers {
        assert_eq!(store_up(&server.base).await, "1");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let samplers: Vec<_> = servers
        .iter()
        .map(|s| sample(&s.base, stop.clone()))
        .collect();
    // Samples of the running database first.
    tokio::time::sleep(WITHIN).await;
    let stopping = Instant::now();
    tokio::task::block_in_place(|| cluster.stop_server());
    let stopped = Instant::now();
    tokio::time::sleep(DOWN.saturating_sub(stopping.elapsed())).await;
    // The gauge says what /readyz says, before the start.
    let mut gauges_down = Vec::new();
    for server in &servers {
        gauges_down.push(store_up(&server.base).await);
    }
    let body_down = get(&format!("{}/readyz", servers[0].base)).await;
    let starting = Instant::now();
    tokio::task::block_in_place(|| cluster.start_server());
    let started = Instant::now();
    tokio::time::sleep(2 * WITHIN).await;
    stop.store(true, Ordering::SeqCst);
    let mut all = Vec::new();
    for sampler in samplers {
        all.push(sampler.await.expect("the sampler"));
    }
    let mut gauges_up = Vec::new();
    for server in &servers {
        gauges_up.push(store_up(&server.base).await);
    }
    let end = Instant::now();

    let ms =
        |d: Option<Duration>| d.map_or("never".to_owned(), |d| format!("{} ms", d.as_millis()));
    for (i, samples) in all.iter().enumerate() {
        eprintln!(
            "FIGURE readiness during a database outage, instance {i}: 503 {} after the stop \
             began (pg_ctl stop took {} ms), 200 {} after the start returned (pg_ctl start took \
             {} ms); {} samples",
            ms(first_after(samples, stopping, 503)),
            stopped.duration_since(stopping).as_millis(),
            ms(first_after(samples, started, 200)),
            started.duration_since(starting).as_millis(),
            samples.len(),
        );
    }
    for (i, samples) in all.iter().enumerate() {
        // Every window holds samples, so "no sample was off" says something. A sample counts
        // in a window only if it was sent and answered inside it.
        for (from, to) in [
            (stopping - WITHIN, stopping),
            (stopping + WITHIN, starting),
            (started + WITHIN, end),
        ] {
            assert!(
                within(samples, from, to).count() >= 5,
                "instance {i}: too few samples in a window: {samples:?}"
            );
        }
        let windows = [
            ("before the stop", stopping - WITHIN, stopping, 200),
            (
                "from 1 s after the stop to the start",
                stopping + WITHIN,
                starting,
                503,
            ),
            ("from 1 s after the start on", started + WITHIN, end, 200),
        ];
        for (what, from, to, want) in windows {
            let wrong = off(samples, from, to, want, stopping);
            assert!(
                wrong.is_empty(),
                "instance {i}: /readyz was not {want} {what} (ms from the stop): {wrong:?}"
            );
        }
    }
    assert_eq!(
        gauges_down,
        ["0", "0", "0"],
        "agent_mcp_store_up while down"
    );
    assert_eq!(
        gauges_up,
        ["1", "1", "1"],
        "agent_mcp_store_up once started"
    );
    let (status, body) = body_down.expect("/readyz answered while the database was down");
    assert_eq!(status, 503, "{body}");
    let ready: Value = serde_json::from_str(&body).unwrap_or_default();
    assert_eq!(ready["ready"], json!(false), "{body}");
    assert_eq!(ready["ollama"], json!({"ok": true}), "{body}");
    assert_eq!(ready["store"]["ok"], json!(false), "{body}");
    let error = ready["store"]["error"].as_str().unwrap_or_default();
    let at = format!("PostgreSQL at {}", cluster.url());
    assert!(error.contains(&at), "{body}");
}
