//! The terminal client (`agent-mcp run`, `agent-mcp status`) as a user runs it: the real
//! binary with stdout piped (so progress is printed as plain lines, one per change), against
//! the real server in-process over HTTP and against `--stdio`, with a fake Ollama.

mod support;

use std::process::{Output, Stdio};
use std::time::Duration;

use agent_mcp::config::Config;
use base64::Engine;
use serde_json::json;
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{
    HttpServer, bearer, field, result_of, test_config, tool_text, write_config,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// A real 1×1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
/// No test may take longer than this.
const DEADLINE: Duration = Duration::from_secs(60);

fn client(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-mcp"));
    cmd.args(args)
        .env_remove("AGENT_MCP_TOKEN")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs the client to its end, within [`DEADLINE`].
async fn run_client(mut cmd: Command) -> Output {
    tokio::time::timeout(DEADLINE, cmd.output())
        .await
        .expect("the client finished in time")
        .expect("the client ran")
}

/// The client exited 0 (else its stderr is shown).
fn assert_exited_0(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec())
        .expect("UTF-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The task and session ids from the first line, `task <id> (session <id>)`.
fn ids(first_line: &str) -> (String, String) {
    let rest = first_line
        .strip_prefix("task ")
        .unwrap_or_else(|| panic!("first line: {first_line}"));
    let (task, session) = rest
        .split_once(" (session ")
        .unwrap_or_else(|| panic!("first line: {first_line}"));
    let session = session.strip_suffix(')').expect("closing paren");
    assert!(uuid::Uuid::parse_str(task).is_ok(), "{first_line}");
    assert!(uuid::Uuid::parse_str(session).is_ok(), "{first_line}");
    (task.to_owned(), session.to_owned())
}

/// Asserts `stdout` line by line: the ids line, then `expected`, where a first `queued` line
/// is allowed but not required when `queued_optional` (the task may start before the first
/// poll). No line carries a control character.
/// The line of a task waiting on its first model call.
const RUNNING: &str = "running 0/1 ollama chat tokens=0";

/// [`assert_output`] on the client's stdout.
fn assert_stdout(
    out: &std::process::Output,
    queued_optional: bool,
    expected: &[&str],
) -> (String, String) {
    assert_output(&lines(&out.stdout), queued_optional, expected)
}

fn assert_output(stdout: &[String], queued_optional: bool, expected: &[&str]) -> (String, String) {
    for line in stdout {
        assert!(
            !line.chars().any(char::is_control),
            "control character in {line:?}"
        );
    }
    let (task, session) = ids(&stdout[0]);
    let mut rest: Vec<&str> = stdout[1..].iter().map(String::as_str).collect();
    if queued_optional && rest.first() == Some(&"queued") && expected.first() != Some(&"queued") {
        rest.remove(0);
    }
    assert_eq!(rest, expected, "whole output: {stdout:#?}");
    (task, session)
}

/// Queues a task straight through MCP whose chat takes `delay`, so the next one waits.
/// A server on a slow fake where the next task waits behind another for `blocked` (so the
/// client sees it `queued`), then runs for 2.5 s (`running`) and gets `reply`.
async fn behind_a_blocker(blocked: Duration, reply: Reply) -> (FakeOllama, HttpServer) {
    let fake = FakeOllama::start_with(slow_fake()).await;
    let server = HttpServer::start(test_config(&fake.url())).await;
    fake.push_reply(Reply::delayed(blocked, Reply::text("Blocker done.", 5, 1)));
    let r = server
        .client()
        .tool_call("agent_run", json!({"request": "Block the queue."}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["result"]["isError"], json!(false), "{}", r.text);
    fake.push_reply(Reply::delayed(Duration::from_millis(2500), reply));
    (fake, server)
}

/// The tool of every audit record in the file at `path`, in order.
fn audited_tools(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("audit file")
        .lines()
        .map(|l| {
            let record: serde_json::Value = serde_json::from_str(l).expect("an audit record");
            record["tool"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

async fn status_text(server: &HttpServer, task_id: &str) -> String {
    let r = server
        .client()
        .tool_call("agent_status", json!({"task_id": task_id}))
        .await;
    tool_text(&r.body["result"])
}

fn slow_fake() -> FakeConfig {
    FakeConfig::default().with_chunk_delay(Duration::from_millis(50))
}

#[tokio::test]
async fn run_over_http_shows_each_change_then_the_result_and_status_prints_the_text() {
    let reply = Reply::text("The tests pass now.", 1536, 284);
    let (fake, server) = behind_a_blocker(Duration::from_millis(1500), reply).await;

    let out = run_client(client(&[
        "run",
        "Check whether the tests pass.",
        "--url",
        &server.url,
        "--temperature",
        "0.2",
    ]))
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(stderr, "");
    let (task_id, session_id) = assert_stdout(
        &out,
        false,
        &[
            "queued",
            RUNNING,
            "completed 1/1 tokens=1820",
            "The tests pass now.",
        ],
    );
    // The request and its temperature reached the model.
    let sent = fake.chat_requests();
    let last = sent.last().expect("a chat");
    assert_eq!(last["options"]["temperature"], json!(0.2));
    assert_eq!(
        last["messages"].as_array().and_then(|m| m.last()),
        Some(&json!({"role": "user", "content": "Check whether the tests pass."}))
    );

    // `status` prints the agent_status text as it is, once.
    let out = run_client(client(&["status", &task_id, "--url", &server.url])).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "task_id: {task_id}\nsession_id: {session_id}\nstatus: completed\ncompleted_tasks: 1/1\n\
             current_task:\ntoken_usage: input=1536 output=284 total=1820\ncritical_path_tokens: 0\n\
             message: タスクが完了しました。\nresult: The tests pass now.\n"
        )
    );
    // With the owning session, and with a session it does not belong to (the
    // not-found text of docs/contract.md §3.5, which is not a tool error).
    let status_in = |session: &str| {
        run_client(client(&[
            "status",
            &task_id,
            "--url",
            &server.url,
            "--session",
            session,
        ]))
    };
    let out = status_in(&session_id).await;
    assert_eq!(out.status.code(), Some(0));
    let other = "00000000-0000-4000-8000-000000000000";
    let out = status_in(other).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "task_id: {task_id}\nstatus: failed\nmessage: タスク {task_id} が見つかりません。\n"
        )
    );
}

#[tokio::test]
async fn run_over_stdio_sends_an_image_to_a_vision_model() {
    let fake =
        FakeOllama::start_with(slow_fake().with_capabilities(&["completion", "vision"])).await;
    fake.push_reply(Reply::delayed(
        Duration::from_millis(1500),
        Reply::text("A single red pixel.", 30, 4),
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    // Audited to a file: the client's requests are counted below.
    let audit = dir.path().join("audit.jsonl");
    let mut server_config = test_config(&fake.url());
    server_config.audit.enabled = true;
    server_config.audit.file = Some(audit.clone());
    let config = write_config(&dir, &server_config);
    let image = dir.path().join("pixel.png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG_BASE64)
        .expect("PNG");
    std::fs::write(&image, png).expect("write PNG");

    let mut cmd = client(&["run", "What is in this picture?", "--stdio", "--image"]);
    cmd.arg(&image)
        .arg("--config")
        .arg(&config)
        .current_dir(dir.path());
    let out = run_client(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    // The server's audit records and info logs stay out of the way.
    assert_eq!(stderr, "");
    assert_stdout(
        &out,
        true,
        &[RUNNING, "completed 1/1 tokens=34", "A single red pixel."],
    );
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 1);
    let last = sent[0]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .expect("a message");
    assert_eq!(last["content"], "What is in this picture?");
    assert_eq!(last["images"], json!([PNG_BASE64]));
    // Followed by push over stdio too: one tool call (agent_run), no agent_status poll. The
    // child has exited, so its audit lines are all written.
    assert_eq!(audited_tools(&audit), ["agent_run"], "no agent_status poll");
}

#[tokio::test]
async fn a_failed_task_exits_1_with_its_reason_on_stderr() {
    let reply = Reply::http_error(500, "model exploded");
    let (_fake, server) = behind_a_blocker(Duration::from_millis(1200), reply).await;

    let out = run_client(client(&["run", "Break something.", "--url", &server.url])).await;
    assert_eq!(out.status.code(), Some(1));
    let (task_id, _) = assert_stdout(&out, false, &["queued", RUNNING, "failed 0/1 tokens=0"]);
    let reason = result_of(&status_text(&server, &task_id).await);
    assert!(reason.contains("model exploded"), "{reason}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("agent-mcp: the task failed: {reason}\n")
    );
}

#[tokio::test]
async fn ctrl_c_cancels_the_task_through_the_tasks_extension() {
    let fake = FakeOllama::start_with(slow_fake().with_default_reply(Reply::Hang)).await;
    let server = HttpServer::start(test_config(&fake.url())).await;
    // The server has the extension, so the client can cancel.
    let discover = server.client().modern("server/discover", json!({})).await;
    assert_eq!(
        discover.body["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{}",
        discover.text
    );

    let running = run_until_running(&server.url).await;
    // `running` is saved just before the chat starts; Ctrl-C once the model is busy.
    fake.until_chat_started(Duration::from_secs(10), "no chat started")
        .await;

    let (out, seen) = interrupt(running).await;
    assert_eq!(out.status.code(), Some(4));
    let (task_id, _) = assert_output(&seen, true, &[RUNNING, "cancelled 0/1 tokens=0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "agent-mcp: cancelling task {task_id}; press Ctrl-C again to stop waiting"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("\nagent-mcp: the task was cancelled: "),
        "{stderr}"
    );
    assert_eq!(
        field(&status_text(&server, &task_id).await, "status"),
        "cancelled"
    );
    // The hanging Ollama request was dropped.
    fake.until_chats_closed(Duration::from_secs(10), "chat still open")
        .await;
}

#[tokio::test]
async fn tokens_come_from_agent_mcp_token_and_refusals_are_one_line() {
    let fake = FakeOllama::start().await;
    let mut config: Config = test_config(&fake.url());
    config.auth.tokens = vec![bearer("alice", "s3cret-token")];
    let server = HttpServer::start(config).await;

    let out = run_client(client(&["run", "Hi.", "--url", &server.url])).await;
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout, b"");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "agent-mcp: the server needs a token: set AGENT_MCP_TOKEN\n"
    );

    let mut wrong = client(&["run", "Hi.", "--url", &server.url]);
    wrong.env("AGENT_MCP_TOKEN", "not-the-token");
    let out = run_client(wrong).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("agent-mcp: the server refused the token in AGENT_MCP_TOKEN"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-token"), "{stderr}");

    let mut right = client(&["run", "Hi.", "--url", &server.url]);
    right.env("AGENT_MCP_TOKEN", "s3cret-token");
    let out = run_client(right).await;
    assert_exited_0(&out);
    let stdout = lines(&out.stdout);
    assert_eq!(
        stdout.last().map(String::as_str),
        Some("Hello from the fake model.")
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cret-token"));
}

#[tokio::test]
async fn rate_limits_say_when_to_retry() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.rate_limit.enabled = true;
    // One new task a minute: the first run spends it, the second run's agent_run is refused.
    config.rate_limit.per_minute = 1;
    config.rate_limit.burst = 1;
    let server = HttpServer::start(config).await;
    let first = run_client(client(&["run", "Hi.", "--url", &server.url])).await;
    assert_exited_0(&first);
    let out = run_client(client(&["run", "Hi again.", "--url", &server.url])).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("agent-mcp: rate limited: retry in ") && stderr.ends_with(" s\n"),
        "{stderr}"
    );
    assert_eq!(fake.chat_count(), 1, "only the first run reached the model");
}

#[tokio::test]
async fn bad_arguments_and_unreachable_servers_exit_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gif = dir.path().join("anim.gif");
    std::fs::write(&gif, b"GIF89a\x01\x00\x01\x00").expect("write");
    let mut cmd = client(&["run", "Look.", "--url", "http://127.0.0.1:1/mcp", "--image"]);
    cmd.arg(&gif);
    let out = run_client(cmd).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "agent-mcp: {} is not a PNG, JPEG or WebP image; allowed types: image/png, image/jpeg, image/webp\n",
            gif.display()
        )
    );

    let out = run_client(client(&["status", "42", "--url", "http://127.0.0.1:1/mcp"])).await;
    assert_eq!(out.status.code(), Some(2));

    // Port 1 on loopback: nothing listens there.
    let out = run_client(client(&["run", "Hi.", "--url", "http://127.0.0.1:1/mcp"])).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("agent-mcp: cannot reach the server at http://127.0.0.1:1/mcp: "),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// The real server without its Tasks layer, as it was before the extension landed: `agent_run`
/// answers with the acknowledgement text and nothing can be cancelled through MCP.
/// A client running `agent-mcp run "Never finishes."`, read up to the line saying it runs.
struct RunningClient {
    child: tokio::process::Child,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    seen: Vec<String>,
}

async fn run_until_running(url: &str) -> RunningClient {
    let mut child = client(&["run", "Never finishes.", "--url", url])
        .spawn()
        .expect("spawn the client");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(line) = stdout.next_line().await.expect("read") {
            let running = line == RUNNING;
            seen.push(line);
            if running {
                return;
            }
        }
        panic!("the client ended before the task ran: {seen:?}");
    })
    .await
    .expect("the task runs");
    RunningClient {
        child,
        stdout,
        seen,
    }
}

/// Ctrl-C (SIGINT) to the client: how it exited, and every line it printed.
async fn interrupt(running: RunningClient) -> (Output, Vec<String>) {
    let RunningClient {
        child,
        mut stdout,
        mut seen,
    } = running;
    let pid = child.id().expect("pid");
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill -INT");
    assert!(kill.success());
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("the client ends after Ctrl-C")
        .expect("wait");
    while let Some(line) = stdout.next_line().await.expect("read") {
        seen.push(line);
    }
    (out, seen)
}

async fn start_without_tasks(config: Config) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = agent_mcp::AgentMcp::start(&config).await.expect("start");
    let svc = agent_mcp::transport::http::McpHttpService::new(
        server.service(),
        agent_mcp::transport::http::HttpRules::default(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = agent_mcp::transport::server::serve(listener, svc, async {
            let _ = stopped.await;
        })
        .await;
        server.shutdown().await;
    });
    (format!("http://{addr}/mcp"), stop)
}

#[tokio::test]
async fn without_the_tasks_extension_ctrl_c_leaves_the_task_running() {
    let fake = FakeOllama::start_with(slow_fake().with_default_reply(Reply::Hang)).await;
    let (url, _stop) = start_without_tasks(test_config(&fake.url())).await;

    let running = run_until_running(&url).await;

    let (out, seen) = interrupt(running).await;
    assert_eq!(out.status.code(), Some(130));
    let (task_id, _) = assert_output(&seen, true, &[RUNNING]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "agent-mcp: the server cannot cancel tasks; the task continues on the server \
             (task_id {task_id})\n"
        )
    );
    // It does continue: the model gets (and keeps) the request.
    fake.until_chat_started(Duration::from_secs(10), "the task stopped")
        .await;
}

/// With the Tasks extension the client follows by push: one `subscriptions/listen`, no
/// `agent_status` poll, and the same output as polling (the tests above check it line by line).
#[tokio::test]
async fn run_follows_the_task_by_push_without_a_single_poll() {
    let fake = FakeOllama::start_with(slow_fake()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let mut config = test_config(&fake.url());
    config.audit.enabled = true;
    config.audit.file = Some(audit.clone());
    let server = HttpServer::start(config).await;
    fake.push_reply(Reply::delayed(
        Duration::from_millis(1500),
        Reply::text("Pushed.", 10, 5),
    ));
    let out = run_client(client(&["run", "Follow me.", "--url", &server.url])).await;
    assert_exited_0(&out);
    assert_stdout(&out, true, &[RUNNING, "completed 1/1 tokens=15", "Pushed."]);
    // The audit log has one line per tool call: the client made exactly one, agent_run (it
    // has exited by now; the writer gets a moment to catch up).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(audited_tools(&audit), ["agent_run"], "no agent_status poll");
}
