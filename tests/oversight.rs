//! A task's changes kept with the task, and taken back: the real server on loopback HTTP with
//! its oversight routes, a fake Ollama whose model edits and creates files in a real
//! workspace, and the real `agent-mcp diff` / `agent-mcp undo` binary over HTTP and `--stdio`.
//! On SQLite across a restart, and on PostgreSQL (`scripts/postgres.sh`).

mod support;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use agent_mcp::config::{Config, StoreConfig};
use serde_json::json;
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{bearer, field, wait_terminal_within, workspace_config, write_config};
use support::served::Served;

const BUDGET: Duration = Duration::from_secs(60);
const ALICE: &str = "alice-secret";
const BOB: &str = "bob-secret";

const BEFORE: &str = "def add(a, b):\n    return a - b\n";
const AFTER: &str = "def add(a, b):\n    return a + b\n";
const NOTES: &str = "remember the milk\n";

/// The diff `agent-mcp diff` prints for the scripted task.
const DIFF: &str = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n\
    @@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n\
    diff --git a/notes/todo.md b/notes/todo.md\nnew file\n--- /dev/null\n+++ b/notes/todo.md\n\
    @@ -0,0 +1 @@\n+check add()\n";

/// The model reads calc.py, fixes it and writes a note, then answers.
fn script(fake: &FakeOllama) {
    fake.push_replies([
        Reply::tool_call("read_file", json!({"path": "calc.py"}), 10, 1),
        Reply::tool_calls(
            &[
                (
                    "edit_file",
                    json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
                ),
                (
                    "write_file",
                    json!({"path": "notes/todo.md", "content": "check add()\n"}),
                ),
            ],
            10,
            1,
        ),
        Reply::text("Fixed add.", 10, 1),
    ]);
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.py"), BEFORE).unwrap();
    std::fs::write(ws.path().join("notes.txt"), NOTES).unwrap();
    ws
}

fn configured(fake: &FakeOllama, ws: &Path, store: StoreConfig) -> Config {
    let mut config = workspace_config(&fake.url(), ws);
    config.store = store;
    config.auth.tokens = vec![bearer("alice", ALICE), bearer("bob", BOB)];
    config
}

/// Runs the scripted task as alice to its end: its id.
async fn run_scripted(served: &Served, fake: &FakeOllama) -> String {
    script(fake);
    let alice = served.client(ALICE);
    let id = alice
        .agent_run("Fix add in calc.py and leave a note.")
        .await;
    let done = wait_terminal_within(BUDGET, || alice.agent_status(&id)).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    id
}

/// `agent-mcp <args>` to its end, with `token` in AGENT_MCP_TOKEN.
async fn cli(args: &[&str], token: Option<&str>) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-mcp"));
    cmd.args(args)
        .env_remove("AGENT_MCP_TOKEN")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(token) = token {
        cmd.env("AGENT_MCP_TOKEN", token);
    }
    tokio::time::timeout(BUDGET, cmd.output())
        .await
        .expect("the client finished in time")
        .expect("the client ran")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read(ws: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(ws.join(file)).ok()
}

/// The files as the task left them.
fn assert_as_the_task_left(ws: &Path) {
    assert_eq!(read(ws, "calc.py").as_deref(), Some(AFTER));
    assert_eq!(read(ws, "notes/todo.md").as_deref(), Some("check add()\n"));
    assert_eq!(read(ws, "notes.txt").as_deref(), Some(NOTES));
}

/// Diff, a refused undo after someone else's edit, an undo, and a second undo, through the
/// real binary against `served`; the owner only.
async fn diff_refuse_undo_twice(served: &Served, ws: &Path, id: &str) {
    let url = format!("{}/mcp", served.base);
    let diff = cli(&["diff", id, "--url", &url], Some(ALICE)).await;
    assert_eq!(diff.status.code(), Some(0), "{}", err(&diff));
    assert_eq!(out(&diff), DIFF);

    // Another caller's token, and none: the task is not theirs to see or undo.
    let bobs = cli(&["diff", id, "--url", &url], Some(BOB)).await;
    assert_eq!(bobs.status.code(), Some(3), "{}", out(&bobs));
    assert!(
        err(&bobs).contains(&format!("no task {id} of yours")),
        "{}",
        err(&bobs)
    );
    let bobs = cli(&["undo", id, "--url", &url], Some(BOB)).await;
    assert_eq!(bobs.status.code(), Some(3));
    let anonymous = cli(&["undo", id, "--url", &url], None).await;
    assert_eq!(anonymous.status.code(), Some(3));
    assert!(
        err(&anonymous).contains("needs a token"),
        "{}",
        err(&anonymous)
    );
    assert_as_the_task_left(ws);

    // Someone edits calc.py after the task: undo refuses, naming it, and changes nothing.
    let theirs = "def add(a, b):\n    return b + a  # mine\n";
    std::fs::write(ws.join("calc.py"), theirs).unwrap();
    let refused = cli(&["undo", id, "--url", &url], Some(ALICE)).await;
    assert_eq!(refused.status.code(), Some(1), "{}", out(&refused));
    assert!(
        err(&refused).contains("these files changed since the task ended")
            && err(&refused).contains("calc.py")
            && !err(&refused).contains("todo.md"),
        "{}",
        err(&refused)
    );
    assert_eq!(read(ws, "calc.py").as_deref(), Some(theirs));
    assert_eq!(read(ws, "notes/todo.md").as_deref(), Some("check add()\n"));

    // Put back as the task left it: undone, every file as before the task.
    std::fs::write(ws.join("calc.py"), AFTER).unwrap();
    let undone = cli(&["undo", id, "--url", &url], Some(ALICE)).await;
    assert_eq!(undone.status.code(), Some(0), "{}", err(&undone));
    assert_eq!(out(&undone), "restored: calc.py, notes/todo.md\n");
    assert_eq!(read(ws, "calc.py").as_deref(), Some(BEFORE));
    assert_eq!(read(ws, "notes/todo.md"), None);
    assert_eq!(read(ws, "notes.txt").as_deref(), Some(NOTES));

    // A second undo changes nothing, even with the files edited again.
    std::fs::write(ws.join("calc.py"), "x = 1\n").unwrap();
    let again = cli(&["undo", id, "--url", &url], Some(ALICE)).await;
    assert_eq!(again.status.code(), Some(0), "{}", err(&again));
    assert_eq!(out(&again), "already undone; nothing changed\n");
    assert_eq!(read(ws, "calc.py").as_deref(), Some("x = 1\n"));
    // The diff stays readable.
    let diff = cli(&["diff", id, "--url", &url], Some(ALICE)).await;
    assert_eq!(out(&diff), DIFF);
}

/// SQLite: the task runs on one server; diff and undo work on the next one (a restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_and_undo_across_a_restart_on_sqlite() {
    let fake = FakeOllama::start().await;
    let ws = workspace();
    let db = tempfile::tempdir().unwrap();
    let config = configured(
        &fake,
        ws.path(),
        StoreConfig::sqlite_at(db.path().join("tasks.db")),
    );
    let first = Served::start(&config).await;
    let id = run_scripted(&first, &fake).await;
    assert_as_the_task_left(ws.path());
    first.stop().await;

    let second = Served::start(&config).await;
    diff_refuse_undo_twice(&second, ws.path(), &id).await;
    second.stop().await;
}

/// PostgreSQL: the same, the record in the shared database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_and_undo_across_a_restart_on_postgres() {
    let Some(url) = support::pg::fresh_database().await else {
        return;
    };
    let fake = FakeOllama::start().await;
    let ws = workspace();
    let store = StoreConfig {
        backend: agent_mcp::config::StoreBackend::Postgres,
        url: Some(url),
        ..StoreConfig::default()
    };
    let config = configured(&fake, ws.path(), store);
    let first = Served::start(&config).await;
    let id = run_scripted(&first, &fake).await;
    first.stop().await;

    let second = Served::start(&config).await;
    diff_refuse_undo_twice(&second, ws.path(), &id).await;
    second.stop().await;
}

/// `--stdio`: a task `agent-mcp run --stdio` queued is the `stdio` caller's; `diff` and
/// `undo --stdio` open the same store and take it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_and_undo_over_stdio() {
    let fake = FakeOllama::start().await;
    script(&fake);
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let mut config = workspace_config(&fake.url(), ws.path());
    config.store = StoreConfig::sqlite_at(dir.path().join("tasks.db"));
    let file = write_config(&dir, &config);
    let file = file.to_str().unwrap();
    let run = cli(
        &[
            "run",
            "Fix add in calc.py and leave a note.",
            "--stdio",
            "--config",
            file,
        ],
        None,
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", err(&run));
    let first = out(&run);
    let id = first
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("task "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the task line")
        .to_owned();
    assert_as_the_task_left(ws.path());
    let diff = cli(&["diff", &id, "--stdio", "--config", file], None).await;
    assert_eq!(diff.status.code(), Some(0), "{}", err(&diff));
    assert_eq!(out(&diff), DIFF);
    let undone = cli(&["undo", &id, "--stdio", "--config", file], None).await;
    assert_eq!(undone.status.code(), Some(0), "{}", err(&undone));
    assert_eq!(out(&undone), "restored: calc.py, notes/todo.md\n");
    assert_eq!(read(ws.path(), "calc.py").as_deref(), Some(BEFORE));
    let again = cli(&["undo", &id, "--stdio", "--config", file], None).await;
    assert_eq!(out(&again), "already undone; nothing changed\n");
}

/// The routes answer only what `/mcp` would: a foreign Origin is refused, the page carries a
/// strict Content-Security-Policy, and each caller lists only their own tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_are_guarded_like_mcp() {
    let fake = FakeOllama::start().await;
    let ws = workspace();
    let memory = StoreConfig {
        backend: agent_mcp::config::StoreBackend::Memory,
        ..StoreConfig::default()
    };
    let config = configured(&fake, ws.path(), memory);
    let served = Served::start(&config).await;
    let id = run_scripted(&served, &fake).await;
    let http = reqwest::Client::new();

    let page = http.get(format!("{}/", served.base)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(page.text().await.unwrap().contains("/assets/page.js"));

    let foreign = http
        .get(format!("{}/api/tasks", served.base))
        .header("origin", "https://evil.example")
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    let posted = http
        .post(format!("{}/api/tasks/{id}/undo", served.base))
        .header("origin", "https://evil.example")
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 403);
    assert_as_the_task_left(ws.path());

    let anonymous = http
        .get(format!("{}/api/tasks", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    let list = |token: &'static str| {
        let http = http.clone();
        let base = served.base.clone();
        async move {
            let body: serde_json::Value = http
                .get(format!("{base}/api/tasks"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            body["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(ALICE).await, std::slice::from_ref(&id));
    assert!(list(BOB).await.is_empty());
    let detail = http
        .get(format!("{}/api/tasks/{id}", served.base))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert_eq!(detail.status(), 404);
    served.stop().await;
}

/// The API the page uses: a queued task has its place and is cancelled; a waiting approval is
/// answered (by its owner only, with a known key and action); a running task is not undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_shows_places_cancels_and_answers_approvals() {
    let fake = FakeOllama::start().await;
    fake.push_replies([
        Reply::tool_call("read_file", json!({"path": "calc.py"}), 10, 1),
        Reply::tool_call(
            "edit_file",
            json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
            10,
            1,
        ),
        Reply::text("Fixed add.", 10, 1),
    ]);
    let ws = workspace();
    let mut config = configured(
        &fake,
        ws.path(),
        StoreConfig {
            backend: agent_mcp::config::StoreBackend::Memory,
            ..StoreConfig::default()
        },
    );
    config.agent.approvals = agent_mcp::config::ApprovalsConfig {
        edit_file: agent_mcp::config::Approval::Ask,
        ..Default::default()
    };
    let served = Served::start(&config).await;
    let alice = served.client(ALICE);
    let created = alice
        .modern_with_caps(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "Fix add."}}),
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}}}),
        )
        .await;
    let first = created.body["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.text))
        .to_owned();
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: String, token: &'static str| {
        let http = http.clone();
        let url = format!("{}{path}", served.base);
        async move {
            let resp = http
                .request(method, url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (
                status,
                resp.json::<serde_json::Value>().await.unwrap_or_default(),
            )
        }
    };
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;
    let key = support::harness::eventually(BUDGET, "the approval waits", || {
        let call = &call;
        let path = format!("/api/tasks/{first}");
        async move {
            let (_, task) = call(reqwest::Method::GET, path, ALICE).await;
            task["pending"][0]["key"].as_str().map(str::to_owned)
        }
    })
    .await;

    // A second task waits behind it, first in the queue; cancelled from the API.
    let second = alice.agent_run("Something else.").await;
    let (status, list) = call(get.clone(), "/api/tasks".into(), ALICE).await;
    assert_eq!(status, 200);
    let rows = list["tasks"].as_array().unwrap();
    assert_eq!(rows[0]["id"], second.as_str());
    assert_eq!(
        (rows[0]["state"].as_str(), rows[0]["position"].as_u64()),
        (Some("queued"), Some(1))
    );
    assert_eq!(rows[1]["id"], first.as_str());
    assert_eq!(
        (rows[1]["state"].as_str(), rows[1]["waiting"].as_bool()),
        (Some("running"), Some(true))
    );
    assert_eq!(
        call(post.clone(), format!("/api/tasks/{second}/cancel"), BOB)
            .await
            .0,
        404
    );
    let (status, cancelled) =
        call(post.clone(), format!("/api/tasks/{second}/cancel"), ALICE).await;
    assert_eq!(
        (status, cancelled["message"].as_str()),
        (200, Some("task is cancelled"))
    );

    // A running task is not undone.
    let (status, refused) = call(post.clone(), format!("/api/tasks/{first}/undo"), ALICE).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("still running"),
        "{refused}"
    );

    // The approval: a bad action, an unknown key, another caller, then its owner.
    let answer =
        |action: &str, key: &str| format!("/api/tasks/{first}/approvals/{key}?action={action}");
    assert_eq!(
        call(post.clone(), answer("maybe", &key), ALICE).await.0,
        400
    );
    assert_eq!(
        call(post.clone(), answer("accept", "approval-9"), ALICE)
            .await
            .0,
        409
    );
    assert_eq!(call(post.clone(), answer("accept", &key), BOB).await.0, 404);
    assert_eq!(read(ws.path(), "calc.py").as_deref(), Some(BEFORE));
    let (status, answered) = call(post.clone(), answer("accept", &key), ALICE).await;
    assert_eq!(
        (status, answered["message"].as_str()),
        (200, Some("approval-1: accept"))
    );
    let done = wait_terminal_within(BUDGET, || alice.agent_status(&first)).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(read(ws.path(), "calc.py").as_deref(), Some(AFTER));
    let (_, task) = call(get, format!("/api/tasks/{first}"), ALICE).await;
    assert_eq!(
        task["decisions"][0],
        "approval-1 edit_file (calc.py): accept by alice"
    );
    assert_eq!(task["files"], json!(["calc.py"]));
    // The journal shows what each tool call gave back: the file the model read, the edit.
    let results: Vec<&str> = task["journal"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "tool result")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(results.len(), 2, "{}", task["journal"]);
    assert!(results[0].contains("a - b"), "{results:?}");
    served.stop().await;
}

/// What commands change is recorded too (against the snapshot taken when the task started):
/// a copy made and a file removed by `cp` and `rm` show in the diff and are undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_commands_change_is_recorded_and_undone() {
    let fake = FakeOllama::start().await;
    fake.push_replies([
        Reply::tool_call(
            "run_command",
            json!({"argv": ["cp", "calc.py", "calc_copy.py"]}),
            10,
            1,
        ),
        Reply::tool_call("run_command", json!({"argv": ["rm", "notes.txt"]}), 10, 1),
        Reply::text("Copied and removed.", 10, 1),
    ]);
    let ws = workspace();
    let mut config = configured(
        &fake,
        ws.path(),
        StoreConfig {
            backend: agent_mcp::config::StoreBackend::Memory,
            ..StoreConfig::default()
        },
    );
    config.agent.commands.allow = vec!["cp".into(), "rm".into()];
    let served = Served::start(&config).await;
    let alice = served.client(ALICE);
    let id = alice
        .agent_run("Copy calc.py, then remove notes.txt.")
        .await;
    let done = wait_terminal_within(BUDGET, || alice.agent_status(&id)).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(read(ws.path(), "calc_copy.py").as_deref(), Some(BEFORE));
    assert_eq!(read(ws.path(), "notes.txt"), None);

    let url = format!("{}/mcp", served.base);
    let diff = cli(&["diff", &id, "--url", &url], Some(ALICE)).await;
    assert_eq!(diff.status.code(), Some(0), "{}", err(&diff));
    assert_eq!(
        out(&diff),
        "diff --git a/calc_copy.py b/calc_copy.py\nnew file\n--- /dev/null\n\
         +++ b/calc_copy.py\n@@ -0,0 +1,2 @@\n+def add(a, b):\n+    return a - b\n\
         diff --git a/notes.txt b/notes.txt\ndeleted file\n--- a/notes.txt\n+++ /dev/null\n\
         @@ -1 +0,0 @@\n-remember the milk\n"
    );
    let undone = cli(&["undo", &id, "--url", &url], Some(ALICE)).await;
    assert_eq!(undone.status.code(), Some(0), "{}", err(&undone));
    assert_eq!(out(&undone), "restored: calc_copy.py, notes.txt\n");
    assert_eq!(read(ws.path(), "calc_copy.py"), None);
    assert_eq!(read(ws.path(), "notes.txt").as_deref(), Some(NOTES));
    served.stop().await;
}
