//! A hostile model and hostile callers against the workspace and the queue (issue 27, points
//! 5, 10 and the contract's `openWorldHint: false`): version-control metadata is read-only to
//! every tool, allowed commands have no network, and what callers may queue is bounded.
//! Real server on 127.0.0.1, the fake Ollama answering with the attacker's tool calls.

#![cfg(target_os = "linux")]

mod support;

use std::time::Duration;

use agent_mcp::config::TokenConfig;
use serde_json::json;
use support::fake_ollama::FakeOllama;
use support::harness::{HttpServer, bearer, field, run_rounds, test_config, tool_text};

/// The request of every task here, and the time it has to end.
const REQUEST: &str = "Set up the repository.";
const BUDGET: Duration = Duration::from_secs(60);

fn git_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(ws.join("evil"), "[core]\n\tfsmonitor = touch PWNED\n").unwrap();
    dir
}

/// Point 5: `.git/config` and `.git/hooks/pre-commit` cannot be written by `write_file`,
/// `edit_file` or a command whose arguments name them (the model reads them fine), and
/// files elsewhere are written as before.
#[tokio::test]
async fn vcs_metadata_writes_are_refused_by_write_file_edit_file_and_the_argument_check() {
    let fake = FakeOllama::start().await;
    let ws = git_workspace();
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.commands.allow = vec!["cp".into(), "tee".into()];
    let fsmonitor =
        json!({"path": ".git/config", "content": "[core]\n\tfsmonitor = touch PWNED\n"});
    let hook = json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch PWNED\n"});
    let rounds = vec![
        vec![("read_file", json!({"path": ".git/config"}))],
        vec![
            ("write_file", fsmonitor),
            ("write_file", hook),
            (
                "edit_file",
                json!({"path": ".git/config", "old_text": "bare = false", "new_text": "fsmonitor = touch PWNED"}),
            ),
            (
                "run_command",
                json!({"argv": ["cp", "evil", ".git/config"]}),
            ),
            (
                "run_command",
                json!({"argv": ["cp", "evil", ".git/hooks/pre-commit"]}),
            ),
            (
                "run_command",
                json!({"argv": ["tee", ".git/hooks/pre-commit"]}),
            ),
            (
                "run_command",
                json!({"argv": ["cp", "evil", "x"], "cwd": ".git/hooks"}),
            ),
            (
                "write_file",
                json!({"path": "notes.txt", "content": "fine\n"}),
            ),
        ],
    ];
    let results = run_rounds(&fake, config, REQUEST, &rounds, BUDGET).await;
    assert_eq!(results.len(), 9, "{results:#?}");
    assert!(
        results[0].contains("bare = false"),
        "reading .git/config: {}",
        results[0]
    );
    for result in &results[1..4] {
        assert!(
            result.starts_with("error: ") && result.contains("read but not change"),
            "{result}"
        );
    }
    for result in &results[4..7] {
        assert!(
            result.starts_with("error: ") && result.contains("inside .git"),
            "{result}"
        );
    }
    assert!(
        results[7].starts_with("error: ") && results[7].contains(".git"),
        "{}",
        results[7]
    );
    assert!(results[8].contains("created 'notes.txt'"), "{}", results[8]);
    let root = ws.path();
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    assert!(!root.join(".git/hooks/pre-commit").exists());
    assert!(!root.join(".git/hooks/x").exists());
    assert!(root.join("notes.txt").exists());
}

/// `python3` here and a network namespace for commands: under CI both must be there;
/// elsewhere their absence skips, loudly.
fn python_and_isolation_or_skip(test: &str) -> bool {
    let python = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let isolation = agent_mcp::agent::tools::describe_network_isolation(false);
    let why = match (python, &isolation) {
        (true, Ok(_)) => return true,
        (false, _) => "python3 is not installed".to_owned(),
        (true, Err(why)) => why.clone(),
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs {why} under CI"
    );
    eprintln!("\n!!! SKIPPED {test}: {why}\n");
    false
}

/// The contract's `openWorldHint: false`: an allowed `python3` cannot connect to a listener
/// on 127.0.0.1 of the server's network namespace (nor anywhere else), while its own
/// loopback works; with `agent.commands.network: true` it connects.
#[tokio::test]
async fn an_allowed_python3_cannot_connect_to_a_listener_on_127_0_0_1() {
    if !python_and_isolation_or_skip("network") {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 3)\n    \
         print('CONNECTED')\nexcept OSError as e:\n    print('REFUSED', type(e).__name__)"
    );
    let own_loopback = "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n\
                        c = socket.create_connection(s.getsockname(), 3); print('LOOPBACK UP')";
    let accepted =
        |listener: &std::net::TcpListener| std::iter::from_fn(|| listener.accept().ok()).count();
    for network in [false, true] {
        let fake = FakeOllama::start().await;
        let ws = tempfile::tempdir().unwrap();
        let mut config = test_config(&fake.url());
        config.agent.workspace = Some(ws.path().to_path_buf());
        config.agent.commands.allow = vec!["python3".into()];
        config.agent.commands.network = network;
        let rounds = vec![vec![
            ("run_command", json!({"argv": ["python3", "-c", connect]})),
            (
                "run_command",
                json!({"argv": ["python3", "-c", own_loopback]}),
            ),
        ]];
        let results = run_rounds(&fake, config, REQUEST, &rounds, BUDGET).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let reached = accepted(&listener);
        if network {
            assert!(results[0].contains("CONNECTED"), "{}", results[0]);
            assert_eq!(reached, 1, "with network: true the listener is reached");
        } else {
            assert!(results[0].contains("REFUSED"), "{}", results[0]);
            assert_eq!(reached, 0, "the command reached the server's 127.0.0.1");
        }
        assert!(results[1].contains("LOOPBACK UP"), "{}", results[1]);
    }
}

fn token(name: &str) -> TokenConfig {
    bearer(name, &format!("{name}-token"))
}

/// Point 10: a request text over `mcp.max_request_bytes` is refused naming the key; the queue
/// holds at most `mcp.max_queued_per_caller` tasks of one caller and `mcp.max_queued_tasks`
/// in all, and past either `agent_run` is a tool error saying the queue is full and what to
/// do, with nothing queued.
#[tokio::test]
async fn what_callers_may_queue_is_bounded_with_a_clear_error() {
    let fake = FakeOllama::hanging().await;
    let mut config = test_config(&fake.url());
    config.rate_limit.enabled = false;
    config.mcp.max_queued_tasks = 5;
    config.mcp.max_queued_per_caller = 3;
    config.auth.tokens = vec![token("alice"), token("bob"), token("carol")];
    let server = HttpServer::start(config).await;
    let caller = |name: &str| {
        let mut c = server.client();
        c.set_token(&format!("{name}-token"));
        c
    };
    let (alice, bob, carol) = (caller("alice"), caller("bob"), caller("carol"));
    let run = |client: &support::harness::HttpClient, request: String| {
        let client = client.clone();
        async move {
            let result = client
                .call_tool("agent_run", json!({"request": request}))
                .await;
            (result["isError"] == json!(true), tool_text(&result))
        }
    };
    // Too long a text.
    let (refused, text) = run(&alice, "x".repeat(256 * 1024 + 1)).await;
    assert!(refused, "{text}");
    assert!(
        text.contains("request: is 262145 bytes") && text.contains("mcp.max_request_bytes"),
        "{text}"
    );
    // The first task runs (the fake hangs), then alice may queue 3.
    let (refused, text) = run(&alice, "runs".into()).await;
    assert!(!refused, "{text}");
    let id = field(&text, "task_id");
    wait_until_running(&alice, &id).await;
    for n in 0..3 {
        let (refused, text) = run(&alice, format!("queued {n}")).await;
        assert!(!refused, "{text}");
    }
    let (refused, text) = run(&alice, "one too many".into()).await;
    assert!(refused, "{text}");
    assert!(
        text.starts_with("Your share of the task queue is full: 3 of your tasks are waiting")
            && text.contains("mcp.max_queued_per_caller")
            && text.contains("nothing was queued"),
        "{text}"
    );
    // Others still may, up to the total.
    let mut last = String::new();
    for n in 0..2 {
        let (refused, text) = run(&bob, format!("bob {n}")).await;
        assert!(!refused, "{text}");
        last = field(&text, "task_id");
    }
    let (refused, text) = run(&carol, "no room".into()).await;
    assert!(refused, "{text}");
    assert!(
        text.starts_with("The task queue is full: 5 tasks are waiting")
            && text.contains("mcp.max_queued_tasks"),
        "{text}"
    );
    assert!(!text.contains("task_id:"), "{text}");
    // Nothing the refused calls sent was queued: bob's last task is fifth in line.
    let status = bob.agent_status(&last).await;
    assert!(status.contains("（待ち順: 5）"), "{status}");
}

async fn wait_until_running(client: &support::harness::HttpClient, id: &str) {
    for _ in 0..500 {
        if field(&client.agent_status(id).await, "status") == "running" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the first task did not start");
}

/// Point 10, at once: 100 `agent_run`s of one caller arriving together take exactly the
/// places its share has left, none more (each holds its place before its task is stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_caps_hold_for_calls_that_arrive_together() {
    let fake = FakeOllama::hanging().await;
    let mut config = test_config(&fake.url());
    config.rate_limit.enabled = false;
    config.mcp.max_queued_per_caller = 10;
    let server = HttpServer::start(config).await;
    let client = server.client();
    let first = client.agent_run("runs").await;
    wait_until_running(&client, &first).await;
    let calls: Vec<_> = (0..100)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                let result = client
                    .call_tool("agent_run", json!({"request": format!("at once {n}")}))
                    .await;
                result["isError"] == json!(false)
            })
        })
        .collect();
    let mut accepted = 0;
    for call in calls {
        accepted += usize::from(call.await.unwrap());
    }
    assert_eq!(accepted, 10, "the anonymous caller's share is 10");
}
