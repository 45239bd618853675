//! Durable state with the real binary and a SQLite file: SIGKILL while a task runs, restart,
//! and find every accepted task; a bounded crash loop; a read-only store answering with a tool
//! error instead of crashing.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use agent_mcp::store::{INTERRUPTED_BY_RESTART, SqliteStore, TaskStore};
use agent_mcp::task::TaskState;
use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{
    HttpClient, MODERN, agent_mcp_command, field, listening_url, modern_meta, result_of,
    test_config_sqlite, tool_text, wait_terminal, write_config,
};
use tokio::process::Child;

/// The SQLite configuration every test here uses, with limits that would get in the way off.
fn sqlite_config(fake: &FakeOllama, db: &Path) -> Config {
    let mut config = test_config_sqlite(&fake.url(), db);
    config.rate_limit.enabled = false;
    config.audit.enabled = false;
    config
}

/// `agent-mcp serve` as a child process, its stderr drained so it never blocks.
struct Served {
    child: Child,
    client: HttpClient,
}

impl Served {
    async fn start(config_path: &Path, cwd: &Path) -> Served {
        let args = ["serve", "--bind", "127.0.0.1:0"];
        let mut child = agent_mcp_command(&[], &args, config_path, cwd, "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent-mcp serve");
        let url = listening_url(&mut child).await;
        Served {
            child,
            client: HttpClient::new(&url),
        }
    }

    /// SIGKILL, then wait for the process to be gone.
    async fn kill(mut self) {
        self.child.start_kill().expect("SIGKILL");
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("dead within 10 s of SIGKILL")
            .expect("wait");
    }
}

/// `agent_run` with these arguments, which must be accepted: the answer's text.
async fn run(client: &HttpClient, args: Value) -> String {
    let result = client.call_tool("agent_run", args).await;
    assert_eq!(result["isError"], json!(false), "{result}");
    tool_text(&result)
}

/// [`run`] of `request` in `session`: the task_id.
async fn queue(client: &HttpClient, request: &str, session: &str) -> String {
    let args = json!({"request": request, "session_id": session});
    field(&run(client, args).await, "task_id")
}

/// The agent_status text of `task_id`, whatever it says.
async fn status(client: &HttpClient, task_id: &str) -> String {
    let args = json!({"task_id": task_id});
    tool_text(&client.call_tool("agent_status", args).await)
}

async fn wait_status(client: &HttpClient, task_id: &str, wanted: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = status(client, task_id).await;
        if field(&text, "status") == wanted {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task never reached {wanted}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// (role, content) of a chat request's messages, the system prompt left out.
fn conversation(chat: &Value) -> Vec<(String, String)> {
    chat["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn turn(role: &str, content: &str) -> (String, String) {
    (role.to_owned(), content.to_owned())
}

#[tokio::test]
async fn sigkill_while_running_then_restart_loses_nothing() {
    let fake =
        FakeOllama::start_with(FakeConfig::default().with_chunk_delay(Duration::from_millis(30)))
            .await;
    for reply in [
        Reply::text("Answer one.", 5, 2),
        Reply::Hang,
        Reply::text("Answer three.", 6, 3),
        Reply::text("Answer four.", 7, 4),
        Reply::text("Answer other.", 8, 5),
        Reply::text("Answer six.", 9, 6),
    ] {
        fake.push_reply(reply);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("state/agent-mcp.db");
    let config_path = write_config(&dir, &sqlite_config(&fake, &db));

    let first = Served::start(&config_path, dir.path()).await;
    let c = &first.client;
    let one = run(c, json!({"request": "first request"})).await;
    let session = field(&one, "session_id");
    let one = field(&one, "task_id");
    wait_status(c, &one, "completed").await;
    let two = queue(c, "second request", &session).await;
    wait_status(c, &two, "running").await;
    let three = queue(c, "third request", &session).await;
    let four = queue(c, "fourth request", &session).await;
    let other = field(
        &run(c, json!({"request": "other session"})).await,
        "task_id",
    );
    assert_eq!(field(&status(c, &four).await, "status"), "queued");
    // `running` is saved before the step's first chat is sent (the task's workspace snapshot
    // comes between): killed only once that chat holds the scripted hang.
    fake.until_chat_started(
        Duration::from_secs(10),
        "the second task's chat never started",
    )
    .await;
    assert_eq!(fake.chat_count(), 2);
    first.kill().await;
    assert!(db.is_file());

    let second = Served::start(&config_path, dir.path()).await;
    let c = &second.client;
    // The completed task is intact, the running one failed with the restart message.
    let done = status(c, &one).await;
    assert_eq!(field(&done, "status"), "completed");
    assert_eq!(result_of(&done), "Answer one.");
    assert_eq!(field(&done, "token_usage"), "input=5 output=2 total=7");
    let interrupted = status(c, &two).await;
    assert_eq!(field(&interrupted, "status"), "failed", "{interrupted}");
    assert_eq!(result_of(&interrupted), INTERRUPTED_BY_RESTART);
    // The queued ones run, in their original order.
    for (id, answer) in [
        (&three, "Answer three."),
        (&four, "Answer four."),
        (&other, "Answer other."),
    ] {
        let done = wait_terminal(|| status(c, id)).await;
        assert_eq!(field(&done, "status"), "completed", "{done}");
        assert_eq!(result_of(&done), answer);
    }
    let chats = fake.chat_requests();
    let last_user = |chat: &Value| conversation(chat).last().cloned().unwrap_or_default().1;
    let order: Vec<String> = chats[2..].iter().map(last_user).collect();
    assert_eq!(order, ["third request", "fourth request", "other session"]);
    // The session continues with its history from before the crash.
    assert_eq!(
        conversation(&chats[2]),
        [
            turn("user", "first request"),
            turn("assistant", "Answer one."),
            turn("user", "third request"),
        ]
    );
    let six = queue(c, "sixth request", &session).await;
    wait_status(c, &six, "completed").await;
    let chats = fake.chat_requests();
    assert_eq!(
        conversation(&chats[5]),
        [
            turn("user", "first request"),
            turn("assistant", "Answer one."),
            turn("user", "third request"),
            turn("assistant", "Answer three."),
            turn("user", "fourth request"),
            turn("assistant", "Answer four."),
            turn("user", "sixth request"),
        ]
    );
    second.kill().await;
}

/// A tiny xorshift generator: random kill moments without a dependency. The seed is printed
/// so a failing run can be repeated.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }
}

/// One `agent_run` over plain reqwest; `None` unless the server acknowledged the task (a
/// request cut off by the kill is not acknowledged).
async fn try_run(http: &reqwest::Client, url: &str, request: &str) -> Option<String> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "agent_run",
            "arguments": {"request": request},
            "_meta": modern_meta(json!({}))
        }
    });
    let resp = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "agent_run")
        .body(body.to_string())
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let value: Value = serde_json::from_str(&resp.text().await.ok()?).ok()?;
    if value["result"]["isError"] != json!(false) {
        return None;
    }
    let text = value["result"]["content"][0]["text"].as_str()?;
    text.lines()
        .find_map(|l| l.strip_prefix("task_id: "))
        .map(str::to_owned)
}

#[tokio::test]
async fn crash_loop_loses_no_acknowledged_task() {
    const CYCLES: usize = 20;
    const CLIENTS: usize = 4;
    let fake =
        FakeOllama::start_with(FakeConfig::default().with_chunk_delay(Duration::from_millis(10)))
            .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("state/agent-mcp.db");
    let config_path = write_config(&dir, &sqlite_config(&fake, &db));
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    println!("crash loop seed: {seed}");
    let mut rng = Rng(seed);
    let acknowledged: Arc<Mutex<Vec<String>>> = Arc::default();

    for cycle in 0..CYCLES {
        let served = Served::start(&config_path, dir.path()).await;
        let url = served.client.url.clone();
        let mut senders = Vec::new();
        for client in 0..CLIENTS {
            let url = url.clone();
            let acknowledged = acknowledged.clone();
            senders.push(tokio::spawn(async move {
                let http = reqwest::Client::new();
                for n in 0.. {
                    let request = format!("cycle {cycle} client {client} request {n}");
                    if let Some(id) = try_run(&http, &url, &request).await {
                        acknowledged
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(id);
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(rng.between(20, 400))).await;
        served.kill().await;
        for sender in senders {
            sender.abort();
            let _ = sender.await;
        }
    }

    let ids = acknowledged
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert!(!ids.is_empty(), "no agent_run was acknowledged at all");
    let last = Served::start(&config_path, dir.path()).await;
    let mut missing = Vec::new();
    let mut interrupted = 0;
    for id in &ids {
        let text = status(&last.client, id).await;
        if text.contains("が見つかりません") {
            missing.push(id.clone());
        } else if text.contains(INTERRUPTED_BY_RESTART) {
            interrupted += 1;
        }
    }
    println!(
        "crash loop: {CYCLES} SIGKILL cycles, {} acknowledged tasks, {} missing after restart, \
         {interrupted} ended failed as interrupted",
        ids.len(),
        missing.len()
    );
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    last.kill().await;
}

/// An in-process server over a store the test holds, so it can turn the store read-only.
async fn in_process(config: &Config, store: Arc<SqliteStore>) -> (HttpClient, impl Drop) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = AgentMcp::start_with_store(config, store)
        .await
        .expect("start");
    let task = tokio::spawn(async move {
        let _ = agent_mcp::transport::server::serve(
            listener,
            server.http_service(),
            std::future::pending(),
        )
        .await;
    });
    struct Abort(tokio::task::JoinHandle<()>);
    impl Drop for Abort {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    (HttpClient::new(&format!("http://{addr}/mcp")), Abort(task))
}

#[tokio::test]
async fn a_read_only_store_gives_a_tool_error_and_queues_nothing() {
    let fake = FakeOllama::hanging().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db: PathBuf = dir.path().join("agent-mcp.db");
    let config = sqlite_config(&fake, &db);
    let store = Arc::new(SqliteStore::open(&config.store).await.expect("open"));
    let (client, _server) = in_process(&config, store.clone()).await;

    let first = run(&client, json!({"request": "accepted while writable"})).await;
    let session = field(&first, "session_id");
    let first = field(&first, "task_id");
    // SQLite's query_only fails every write with SQLITE_READONLY, exactly as a read-only file
    // does; chmod cannot produce that here because the tests run as root.
    store.set_read_only(true).await.expect("read-only");
    for args in [
        json!({"request": "refused", "session_id": session}),
        json!({"request": "refused, new session"}),
    ] {
        let result = client.call_tool("agent_run", args).await;
        assert_eq!(result["isError"], json!(true), "{result}");
        let text = tool_text(&result);
        assert!(text.contains("nothing was queued"), "{text}");
        assert!(text.contains("agent-mcp.db is read-only"), "{text}");
    }
    // Nothing half-written, and the server still answers.
    let tasks = store
        .tasks_in_state(TaskState::Queued)
        .await
        .expect("read")
        .len()
        + store
            .tasks_in_state(TaskState::Running)
            .await
            .expect("read")
            .len();
    assert_eq!(tasks, 1);
    assert_eq!(field(&status(&client, &first).await, "task_id"), first);
    store.set_read_only(false).await.expect("writable");
    queue(&client, "accepted again", &session).await;
}
