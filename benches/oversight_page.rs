//! The oversight page with 10,000 finished tasks in the store (SQLite), on loopback: the
//! page's first load (`GET /`, its script and style, then `GET /api/tasks`, one after the
//! other as an upper bound on a browser that fetches them at once) and one task's page
//! (`GET /api/tasks/{id}`: progress, result and its diff). Prints p50/p95/max of each against
//! the 100 ms target.
//!
//! ```text
//! cargo bench --bench oversight_page
//! AGENT_MCP_BENCH_TASKS=50000 cargo bench --bench oversight_page
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use agent_mcp::config::{StoreConfig, Synchronous};
use agent_mcp::store::{ChangedFile, FileState, SqliteStore, TaskChanges, TaskStore};
use agent_mcp::task::{Task, TaskState};
use support::harness::{bearer, test_config};
use support::served::Served;

const TOKEN: &str = "alice-secret";
const ROUNDS: usize = 200;
const TARGET: Duration = Duration::from_millis(100);

fn main() {
    let tasks: usize = std::env::var("AGENT_MCP_BENCH_TASKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(tasks));
}

/// A Python file of `lines` lines, and the same with every tenth line changed.
fn file_pair(lines: usize) -> (String, String) {
    let before: String = (0..lines).map(|i| format!("x{i} = {i}\n")).collect();
    let after: String = (0..lines)
        .map(|i| {
            if i % 10 == 0 {
                format!("x{i} = {}\n", i * 2)
            } else {
                format!("x{i} = {i}\n")
            }
        })
        .collect();
    (before, after)
}

async fn run(n: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("tasks.db");
    let mut store_config = StoreConfig::sqlite_at(&db);
    let started = Instant::now();
    let mut probe = None;
    {
        // Filling is not what is measured: no fsync per commit.
        store_config.synchronous = Synchronous::Off;
        let store = SqliteStore::open(&store_config).await.expect("open");
        let (before, after) = file_pair(200);
        let changes = TaskChanges::bounded(vec![ChangedFile {
            path: "calc.py".into(),
            before: FileState::of_bytes(Some(before.as_bytes())),
            after: FileState::of_bytes(Some(after.as_bytes())),
        }]);
        for i in 0..n {
            let mut task = Task::new(
                uuid::Uuid::new_v4(),
                Some("alice".into()),
                format!("Task {i}: change every tenth value in calc.py"),
                None,
            );
            store.insert_task(&task).await.expect("insert");
            task.transition(TaskState::Completed);
            task.result = format!("Done {i}.\n\nchanged: calc.py (+20 -20)");
            store.update_task(&task).await.expect("finish");
            if i % 10 == 0 {
                store
                    .save_changes(task.id, &changes)
                    .await
                    .expect("changes");
            }
            if i == n / 2 {
                probe = Some(task.id);
            }
        }
    }
    println!(
        "store: {n} finished tasks (1 in 10 with a 200-line diff) written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let probe = probe.expect("a task to open");
    let mut config = test_config("http://127.0.0.1:9");
    store_config.synchronous = Synchronous::Full;
    config.store = store_config;
    config.auth.tokens = vec![bearer("alice", TOKEN)];
    config.rate_limit.enabled = false;
    let served = Served::start(&config).await;
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        let url = format!("{}{path}", served.base);
        async move {
            let resp = http.get(url).bearer_auth(TOKEN).send().await.expect("GET");
            assert!(resp.status().is_success(), "{}", resp.status());
            resp.bytes().await.expect("body").len()
        }
    };
    let first_load = || async {
        let mut bytes = 0;
        for path in ["/", "/assets/page.js", "/assets/page.css", "/api/tasks"] {
            bytes += get(path.to_owned()).await;
        }
        bytes
    };
    let task_page = || get(format!("/api/tasks/{probe}"));
    // Warm-up: connections, the store's caches.
    for _ in 0..5 {
        first_load().await;
        task_page().await;
    }
    let mut loads = Vec::with_capacity(ROUNDS);
    let mut pages = Vec::with_capacity(ROUNDS);
    let (mut load_bytes, mut page_bytes) = (0, 0);
    for _ in 0..ROUNDS {
        let at = Instant::now();
        load_bytes = first_load().await;
        loads.push(at.elapsed());
        let at = Instant::now();
        page_bytes = task_page().await;
        pages.push(at.elapsed());
    }
    report(
        "first load (/, page.js, page.css, /api/tasks)",
        load_bytes,
        loads,
    );
    report(
        "task page (/api/tasks/{id} with its diff)",
        page_bytes,
        pages,
    );
    served.stop().await;
}

fn report(what: &str, bytes: usize, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let max = *times.last().expect("samples");
    println!(
        "{what}: {bytes} bytes; p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms over {} rounds; \
         target < {} ms: {}",
        ms(at(0.5)),
        ms(at(0.95)),
        ms(max),
        times.len(),
        TARGET.as_millis(),
        if at(0.95) < TARGET { "met" } else { "MISSED" }
    );
}
