//! Approvals (issue 29): `agent.approvals` decides per tool call whether it runs, waits for a
//! person's decision, or is refused. Through real HTTP with a scripted fake Ollama: a task
//! whose call asks goes `input_required` on the Tasks extension, with a form
//! `elicitation/create` under `inputRequests`; `tasks/update` answers it; accept runs the
//! action, decline / cancel / the timeout do not and the model is told why; a cancel while
//! waiting cancels the task; a restart while waiting never runs the action; only the task's
//! owner can answer; `allow` never pauses; the policy is per tool and per command pattern;
//! a client that cannot be asked gets the action refused at once.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_mcp::config::{
    Approval, ApprovalsConfig, CommandApproval, CommandPatterns, Config, TokenConfig,
};
use serde_json::{Value, json};
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{
    HttpClient, HttpServer, ServeProcess, StdioServer, field, result_of, test_config,
    test_config_sqlite, tool_text,
};
use tempfile::TempDir;

const EXT: &str = "io.modelcontextprotocol/tasks";
const BUDGET: Duration = Duration::from_secs(30);

/// What a client that can answer declares: the Tasks extension and form elicitation.
fn answering() -> Value {
    json!({"extensions": {EXT: {}}, "elicitation": {"form": {}}})
}

fn config(fake: &FakeOllama, ws: &Path, approvals: ApprovalsConfig) -> Config {
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.to_path_buf());
    config.agent.commands.allow = vec!["touch".into()];
    config.agent.approvals = approvals;
    config.rate_limit.enabled = false;
    config
}

/// run_command asks for every command.
fn ask_commands() -> ApprovalsConfig {
    ApprovalsConfig {
        run_command: CommandApproval::Every(Approval::Ask),
        ..ApprovalsConfig::default()
    }
}

/// The model runs `touch <file>`, then answers.
fn script(fake: &FakeOllama, file: &str) {
    fake.push_reply(Reply::tool_call(
        "run_command",
        json!({"argv": ["touch", file]}),
        10,
        1,
    ));
    fake.push_reply(Reply::text("Done.", 10, 1));
}

/// Audit logging on, into the workspace: the log's path.
fn audited(config: &mut Config, ws: &Path) -> PathBuf {
    let audit = ws.join("audit.log");
    config.audit.enabled = true;
    config.audit.file = Some(audit.clone());
    audit
}

/// Whether `touch made.txt` ran.
fn made(ws: &TempDir) -> bool {
    ws.path().join("made.txt").exists()
}

/// A workspace, a fake whose model runs `touch made.txt`, and a server asking for every
/// command.
async fn asking_server() -> (TempDir, FakeOllama, HttpServer) {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    script(&fake, "made.txt");
    let server = HttpServer::start(config(&fake, ws.path(), ask_commands())).await;
    (ws, fake, server)
}

/// `asking_server` with the task started by an answering client: also that client and the
/// task's id.
async fn asking_task() -> (TempDir, FakeOllama, HttpServer, HttpClient, String) {
    let (ws, fake, server) = asking_server().await;
    let c = server.client();
    let id = create(&c, answering(), "Run the touch program on made.txt.").await;
    (ws, fake, server, c, id)
}

/// The checks of a form `elicitation/create` for `touch made.txt`, in `request`.
fn assert_asks_for_touch(request: &Value) {
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["mode"], "form", "{request}");
    assert_eq!(
        request["params"]["requestedSchema"],
        json!({"type": "object", "properties": {}})
    );
    let message = request["params"]["message"].as_str().unwrap();
    assert!(message.contains("run_command: touch made.txt"), "{message}");
}

async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    support::harness::eventually(BUDGET, what, check).await
}

/// `agent_run` as a task (the Tasks extension declared with `caps`): its taskId.
async fn create(c: &HttpClient, caps: Value, request: &str) -> String {
    let r = c
        .modern_with_caps(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": request}}),
            caps,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["result"]["resultType"], "task", "{}", r.text);
    r.body["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned()
}

async fn get(c: &HttpClient, id: &str) -> Value {
    let r = c
        .modern_with_caps("tasks/get", json!({"taskId": id}), answering())
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["result"].clone()
}

/// The task once it is `input_required`: its body and the one outstanding key.
async fn waiting(c: &HttpClient, id: &str) -> (Value, String) {
    eventually("input_required", || async {
        let body = get(c, id).await;
        if body["status"] == "input_required" {
            let key = body["inputRequests"]
                .as_object()
                .and_then(|m| m.keys().next().cloned())?;
            Some((body, key))
        } else {
            assert_ne!(body["status"], "completed", "{body}");
            None
        }
    })
    .await
}

async fn update(c: &HttpClient, id: &str, key: &str, action: &str) -> Value {
    let r = c
        .modern_with_caps(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {key: {"action": action}}}),
            answering(),
        )
        .await;
    // A refusal is a JSON-RPC error, which the modern HTTP edge answers with 400.
    assert_eq!(
        r.status,
        if r.body["error"].is_null() { 200 } else { 400 },
        "{}",
        r.text
    );
    r.body.clone()
}

/// The task once terminal: its `agent_status` text.
async fn finished(c: &HttpClient, id: &str) -> String {
    eventually("the end of the task", || async {
        let text = c.agent_status(id).await;
        matches!(
            field(&text, "status").as_str(),
            "completed" | "failed" | "cancelled"
        )
        .then_some(text)
    })
    .await
}

/// What the model was sent as the result of its tool call (the last `tool` message).
fn tool_result_seen(fake: &FakeOllama) -> String {
    fake.chat_requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .next_back()
        .unwrap_or_default()
}

#[tokio::test]
async fn accept_runs_the_action_after_the_task_waited_in_input_required() {
    let (ws, fake, _server, c, id) = asking_task().await;

    let (body, key) = waiting(&c, &id).await;
    assert_eq!(key, "approval-1");
    assert_asks_for_touch(&body["inputRequests"][&key]);
    assert!(
        body["statusMessage"]
            .as_str()
            .unwrap()
            .contains("waiting for approval: run_command: touch made.txt"),
        "{body}"
    );
    // agent_status keeps the six states: waiting is `running`, and it says what for.
    let status = c.agent_status(&id).await;
    assert_eq!(field(&status, "status"), "running", "{status}");
    assert_eq!(field(&status, "message"), "タスクは承認を待っています。");
    assert_eq!(
        field(&status, "current_task"),
        "ollama chat (waiting for approval: run_command: touch made.txt)"
    );
    // Nothing ran yet, and the model was not called again.
    assert!(!made(&ws));
    assert_eq!(fake.chat_count(), 1);

    let ack = update(&c, &id, &key, "accept").await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(
        ack["result"].get("status").is_none(),
        "an ack carries no task: {ack}"
    );
    // A second answer to the same key is acknowledged and ignored: the first one decided.
    let ack = update(&c, &id, &key, "decline").await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = finished(&c, &id).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert!(made(&ws));
    assert!(
        result_of(&done).ends_with(
            "approvals:\n- approval-1 run_command (touch made.txt): accept by an anonymous caller"
        ),
        "{done}"
    );
    let body = get(&c, &id).await;
    assert_eq!(body["status"], "completed");
    assert!(body.get("inputRequests").is_none(), "{body}");
}

#[tokio::test]
async fn decline_cancel_and_the_timeout_refuse_and_the_model_hears_why() {
    for (answer, heard) in [
        (Some("decline"), "declined run_command (touch made.txt)"),
        (Some("cancel"), "dismissed without a decision"),
        (
            None,
            "no decision on run_command (touch made.txt) came within 300ms",
        ),
    ] {
        let ws = tempfile::tempdir().unwrap();
        let fake = FakeOllama::start().await;
        script(&fake, "made.txt");
        let mut approvals = ask_commands();
        approvals.timeout = Duration::from_millis(300);
        if answer.is_some() {
            approvals.timeout = Duration::from_secs(60);
        }
        let mut config = config(&fake, ws.path(), approvals);
        let audit = audited(&mut config, ws.path());
        let server = HttpServer::start(config).await;
        let c = server.client();
        let id = create(&c, answering(), "Run the touch program on made.txt.").await;
        if let Some(action) = answer {
            let (_, key) = waiting(&c, &id).await;
            update(&c, &id, &key, action).await;
        }
        let done = finished(&c, &id).await;
        assert_eq!(field(&done, "status"), "completed", "{answer:?}: {done}");
        assert!(!made(&ws), "{answer:?}");
        let seen = tool_result_seen(&fake);
        assert!(
            seen.starts_with("error: not run: ") && seen.contains(heard),
            "{answer:?}: {seen}"
        );
        let action = answer.unwrap_or("timeout");
        assert!(
            result_of(&done).contains(&format!(
                "- approval-1 run_command (touch made.txt): {action}"
            )),
            "{done}"
        );
        // The decision is an audit line of its own, the timeout's too (by nobody).
        let line = approval_line(&audit).await;
        assert_eq!(
            line,
            json!({"event": "approval", "task_id": id, "key": "approval-1",
                   "tool": "run_command", "decision": action, "by": null}),
            "{answer:?}"
        );
    }
}

/// The `{"event":"approval"}` line of the audit file, without its `time`.
async fn approval_line(audit: &Path) -> Value {
    eventually("the approval's audit line", || async {
        let text = std::fs::read_to_string(audit).unwrap_or_default();
        let mut line = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["event"] == "approval")?;
        assert!(
            line["time"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{line}"
        );
        line.as_object_mut()?.remove("time");
        Some(line)
    })
    .await
}

#[tokio::test]
async fn a_cancel_while_waiting_cancels_the_task() {
    let (ws, fake, _server, c, id) = asking_task().await;
    let (_, key) = waiting(&c, &id).await;
    let r = c
        .modern_with_caps("tasks/cancel", json!({"taskId": id}), answering())
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let done = finished(&c, &id).await;
    assert_eq!(field(&done, "status"), "cancelled", "{done}");
    // A late answer changes nothing.
    late_accept_runs_nothing(&c, &id, &key, &ws, &fake).await;
    assert_eq!(get(&c, &id).await["status"], "cancelled");
}

#[tokio::test]
async fn only_the_tasks_owner_can_answer() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    script(&fake, "made.txt");
    let mut config = config(&fake, ws.path(), ask_commands());
    let audit = audited(&mut config, ws.path());
    for name in ["alice", "mallory"] {
        config.auth.tokens.push(TokenConfig {
            name: name.into(),
            sha256: agent_mcp::layers::auth::sha256_hex(&format!("{name}-token")),
        });
    }
    let server = HttpServer::start(config).await;
    let mut alice = server.client();
    alice.set_token("alice-token");
    let mut mallory = server.client();
    mallory.set_token("mallory-token");
    let id = create(&alice, answering(), "Run the touch program on made.txt.").await;
    let (_, key) = waiting(&alice, &id).await;

    let r = mallory
        .modern_with_caps(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {&key: {"action": "accept"}}}),
            answering(),
        )
        .await;
    assert_eq!(r.body["error"]["code"], -32602, "{}", r.text);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&alice, &id).await["status"], "input_required");
    assert!(!made(&ws));

    update(&alice, &id, &key, "accept").await;
    let done = finished(&alice, &id).await;
    assert!(
        result_of(&done).ends_with("approval-1 run_command (touch made.txt): accept by alice"),
        "{done}"
    );
    assert!(made(&ws));
    // The audit log says who answered what, the refused attempt included.
    let updates: Vec<Value> = eventually("the audit lines", || async {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["method"] == "tasks/update")
            .collect();
        (lines.len() == 2).then_some(lines)
    })
    .await;
    assert_eq!(updates[0]["identity"], "mallory");
    assert_eq!(updates[0]["outcome"], "protocol_error", "{}", updates[0]);
    assert_eq!(updates[0]["answers"], json!({"approval-1": "accept"}));
    assert_eq!(updates[1]["identity"], "alice");
    assert_eq!(updates[1]["answers"], json!({"approval-1": "accept"}));
    assert_eq!(updates[1]["task_id"], id);
    // And the runner's decision names the identity whose answer counted.
    let line = approval_line(&audit).await;
    assert_eq!(line["decision"], "accept", "{line}");
    assert_eq!(line["by"], "alice", "{line}");
    assert_eq!(line["task_id"], id);
}

/// An accept after the task ended: after a while, still nothing ran and the model was called
/// once.
async fn late_accept_runs_nothing(
    c: &HttpClient,
    id: &str,
    key: &str,
    ws: &TempDir,
    fake: &FakeOllama,
) {
    update(c, id, key, "accept").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!made(ws));
    assert_eq!(fake.chat_count(), 1);
}

/// The policy per tool and per command: `allow` runs at once (never `input_required`),
/// `deny` is refused at once, patterns decide by the argv, and a client that cannot be asked
/// gets an `ask` refused at once with the key that would let it run.
#[tokio::test]
async fn the_policy_decides_per_tool_and_per_command_without_pausing() {
    let approvals = ApprovalsConfig {
        write_file: Approval::Deny,
        edit_file: Approval::Allow,
        run_command: CommandApproval::Patterns(CommandPatterns {
            deny: vec![],
            allow: vec!["touch allowed.txt".into()],
            ask: vec!["touch asked*".into()],
            default: Approval::Deny,
        }),
        ..ApprovalsConfig::default()
    };
    for (caps, call, args, heard, made, decision) in [
        (
            answering(),
            "run_command",
            json!({"argv": ["touch", "allowed.txt"]}),
            "",
            Some("allowed.txt"),
            None,
        ),
        (
            answering(),
            "run_command",
            json!({"argv": ["touch", "other.txt"]}),
            "is denied by the server's policy (agent.approvals.run_command)",
            None,
            Some("deny"),
        ),
        (
            answering(),
            "write_file",
            json!({"path": "new.txt", "content": "x"}),
            "write_file (new.txt) is denied by the server's policy (agent.approvals.write_file)",
            None,
            Some("deny"),
        ),
        (
            // The Tasks extension without elicitation: nobody can be asked.
            json!({"extensions": {EXT: {}}}),
            "run_command",
            json!({"argv": ["touch", "asked.txt"]}),
            "cannot be asked (it did not declare the Tasks extension \
             io.modelcontextprotocol/tasks with form elicitation, nor form elicitation for \
             agent_status, nor elicitation at a 2025 initialize over stdio); the server's operator can \
             let it run without asking by setting agent.approvals.run_command (or a pattern \
             under agent.approvals.run_command.allow) to allow",
            None,
            Some("refused"),
        ),
    ] {
        let ws = tempfile::tempdir().unwrap();
        let fake = FakeOllama::start().await;
        fake.push_reply(Reply::tool_call(call, args.clone(), 10, 1));
        fake.push_reply(Reply::text("Done.", 10, 1));
        let mut config = config(&fake, ws.path(), approvals.clone());
        let audit = audited(&mut config, ws.path());
        let server = HttpServer::start(config).await;
        let c = server.client();
        let id = create(&c, caps, "Run the touch program.").await;
        let mut statuses = Vec::new();
        let deadline = tokio::time::Instant::now() + BUDGET;
        let done = loop {
            let body = get(&c, &id).await;
            statuses.push(body["status"].as_str().unwrap_or_default().to_owned());
            if body["status"] == "completed" {
                break body;
            }
            assert!(tokio::time::Instant::now() < deadline, "{statuses:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert!(
            !statuses.iter().any(|s| s == "input_required"),
            "{call} {args}: {statuses:?}"
        );
        let seen = tool_result_seen(&fake);
        if heard.is_empty() {
            assert!(!seen.starts_with("error:"), "{seen}");
        } else {
            assert!(seen.contains(heard), "{call} {args}: {seen}");
        }
        if let Some(made) = made {
            assert!(ws.path().join(made).exists(), "{done}");
        } else {
            for f in ["other.txt", "new.txt", "asked.txt"] {
                assert!(!ws.path().join(f).exists(), "{f}");
            }
        }
        // A refusal nobody was asked for is a decision in the audit log too (no key, no one).
        if let Some(decision) = decision {
            let line = approval_line(&audit).await;
            assert_eq!(
                line,
                json!({"event": "approval", "task_id": id, "key": null, "tool": call,
                       "decision": decision, "by": null}),
                "{call} {args}"
            );
        }
    }
}

/// A restart while a task waits never runs the action: the task ends `failed`, saying what
/// it waited for, and the command never ran.
#[tokio::test]
async fn a_restart_while_waiting_ends_the_task_and_runs_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    script(&fake, "made.txt");
    let mut config = test_config_sqlite(&fake.url(), &db.path().join("agent.db"));
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.commands.allow = vec!["touch".into()];
    config.agent.approvals = ask_commands();
    config.rate_limit.enabled = false;
    let mut first = ServeProcess::spawn(&config).await;
    let c = first.client();
    let id = create(&c, answering(), "Run the touch program on made.txt.").await;
    let (_, key) = waiting(&c, &id).await;
    first.child.start_kill().expect("SIGKILL");
    let _ = tokio::time::timeout(Duration::from_secs(10), first.child.wait()).await;
    drop(first);

    let second = ServeProcess::spawn(&config).await;
    let c = second.client();
    let done = finished(&c, &id).await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert!(
        result_of(&done).ends_with(
            "It was waiting for approval of run_command (touch made.txt), which was not run."
        ),
        "{done}"
    );
    late_accept_runs_nothing(&c, &id, &key, &ws, &fake).await;
    let body = get(&c, &id).await;
    assert_eq!(body["status"], "completed", "{body}");
    assert!(body.get("inputRequests").is_none());
}

/// tasks/update with answers that are not the task's outstanding ones changes nothing and is
/// still acknowledged; a malformed answer to an outstanding key says what to send.
#[tokio::test]
async fn unknown_keys_are_ignored_and_a_bad_answer_says_what_to_send() {
    let (ws, _fake, _server, c, id) = asking_task().await;
    let (_, key) = waiting(&c, &id).await;
    let ack = update(&c, &id, "approval-9", "accept").await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let bad = update(&c, &id, &key, "maybe").await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("inputResponses.approval-1 must be an ElicitResult whose action is accept, decline or cancel"),
        "{bad}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&c, &id).await["status"], "input_required");
    update(&c, &id, &key, "decline").await;
    let done = finished(&c, &id).await;
    assert!(!made(&ws), "{done}");
}

/// Push: a `subscriptions/listen` stream on the task shows it go `input_required` (with its
/// `inputRequests`) and back to `working` once answered, then `completed`.
#[tokio::test]
async fn push_shows_input_required_and_back() {
    let (ws, _fake, _server, c, id) = asking_task().await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
        "notifications": {"taskIds": [id]},
        "_meta": support::harness::modern_meta(answering())}});
    let resp = reqwest::Client::new()
        .post(&c.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", support::harness::MODERN)
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .expect("listen");
    assert_eq!(resp.status(), 200);
    let stream = tokio::spawn(async move {
        tokio::time::timeout(BUDGET, resp.text())
            .await
            .expect("the stream ends with the task")
            .expect("body")
    });
    let (_, key) = waiting(&c, &id).await;
    update(&c, &id, &key, "accept").await;
    let text = stream.await.expect("reader");
    let tasks: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|m| m["method"] == "notifications/tasks")
        .map(|m| m["params"].clone())
        .collect();
    let mut statuses: Vec<&str> = Vec::new();
    for t in &tasks {
        let s = t["status"].as_str().unwrap_or_default();
        if statuses.last() != Some(&s) {
            statuses.push(s);
        }
    }
    let from = statuses
        .iter()
        .position(|s| *s == "input_required")
        .unwrap_or_else(|| panic!("{statuses:?}"));
    assert_eq!(
        statuses[from..],
        ["input_required", "working", "completed"],
        "{statuses:?}"
    );
    let asked = tasks
        .iter()
        .find(|t| t["status"] == "input_required")
        .expect("an input_required notification");
    assert_eq!(
        asked["inputRequests"][&key]["method"], "elicitation/create",
        "{asked}"
    );
    assert!(made(&ws));
}

/// A file change that asks shows the file and a short diff of the change.
#[tokio::test]
async fn a_file_change_asks_with_its_diff() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_replies([
        Reply::tool_call("read_file", json!({"path": "notes.txt"}), 10, 1),
        Reply::tool_call(
            "edit_file",
            json!({"path": "notes.txt", "old_text": "two\n", "new_text": "2\n"}),
            10,
            1,
        ),
        Reply::text("Done.", 10, 1),
    ]);
    let approvals = ApprovalsConfig {
        edit_file: Approval::Ask,
        ..ApprovalsConfig::default()
    };
    let server = HttpServer::start(config(&fake, ws.path(), approvals)).await;
    let c = server.client();
    let id = create(&c, answering(), "Look at notes.txt.").await;
    let (body, key) = waiting(&c, &id).await;
    let message = body["inputRequests"][&key]["params"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("edit_file: notes.txt"), "{message}");
    assert!(
        message.contains("--- a/notes.txt\n+++ b/notes.txt\n") && message.contains("-two\n+2\n"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    update(&c, &id, &key, "accept").await;
    let done = finished(&c, &id).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "one\n2\nthree\n"
    );
}

/// PostgreSQL: the answer sent to an instance that does not run the task reaches the one
/// that does (the answer row and its `changed:` announcement), and the action runs there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgres_an_answer_sent_to_another_instance_reaches_the_runner() {
    let Some(url) = support::pg::fresh_database().await else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    script(&fake, "made.txt");
    let mut config = support::instances::shared_config(&fake.url(), &url);
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.commands.allow = vec!["touch".into()];
    config.agent.approvals = ask_commands();
    let servers = support::instances::instances(&config, 2).await;
    let db = support::pg::connect(&url).await;
    let id = create(&servers[0].client(), answering(), "Run the touch program.").await;
    let holder = support::instances::wait_holder(&db, &id).await;
    let other = servers
        .iter()
        .find(|s| s.child.id() != Some(holder))
        .expect("an instance that does not run the task")
        .client();
    let (_, key) = waiting(&other, &id).await;
    assert!(!made(&ws));
    let answered = std::time::Instant::now();
    update(&other, &id, &key, "accept").await;
    let done = finished(&other, &id).await;
    println!(
        "answer on the other instance → task completed: {:?}",
        answered.elapsed()
    );
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert!(made(&ws));
    let stored: Option<String> = db
        .query_one(
            "SELECT answer FROM input_answers WHERE task_id = $1 AND key = $2",
            &[&id, &key],
        )
        .await
        .expect("the answer row")
        .get(0);
    assert!(stored.is_some_and(|a| a.contains("\"accept\"")));
}

/// The terminal client asks on the terminal: `agent-mcp run` prints the question and
/// `allow it? [y/N]` on stderr and reads the answer from stdin; `y` runs the action, anything
/// else (the end of input too) refuses it.
#[tokio::test]
async fn the_terminal_client_asks_y_or_n() {
    for (typed, runs) in [("y\n", true), ("n\n", false), ("", false)] {
        let (ws, _fake, server) = asking_server().await;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-mcp"))
            .args([
                "run",
                "Run the touch program on made.txt.",
                "--url",
                &server.url,
            ])
            .env_remove("AGENT_MCP_TOKEN")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("agent-mcp run");
        let mut stdin = child.stdin.take().expect("stdin");
        tokio::io::AsyncWriteExt::write_all(&mut stdin, typed.as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let out = tokio::time::timeout(BUDGET, child.wait_with_output())
            .await
            .expect("the client finished in time")
            .expect("the client ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{typed:?}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("The agent asks to run run_command: touch made.txt")
                && stderr.contains("agent-mcp: allow it? [y/N] "),
            "{typed:?}: {stderr}"
        );
        assert_eq!(made(&ws), runs, "{typed:?}: {stdout}");
        let action = if runs { "accept" } else { "decline" };
        assert!(
            stdout.contains(&format!(
                "- approval-1 run_command (touch made.txt): {action} by an anonymous caller"
            )),
            "{typed:?}: {stdout}"
        );
    }
}

/// MRTR (2026-07-28 multi-round-trip requests) for a client with form elicitation but without
/// the Tasks extension: `agent_status` on the waiting task answers with an
/// `InputRequiredResult` (`inputRequests`, `requestState`); the retry carrying
/// `inputResponses` records the answer and gets the status.
#[tokio::test]
async fn mrtr_on_agent_status_asks_and_the_retry_answers() {
    for (action, runs) in [("accept", true), ("decline", false)] {
        let (ws, _fake, server) = asking_server().await;
        let c = server.client();
        let caps = json!({"elicitation": {}});
        let run = c
            .modern_with_caps(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "Run the touch program."}}),
                caps.clone(),
            )
            .await;
        let id = field(
            run.body["result"]["content"][0]["text"].as_str().unwrap(),
            "task_id",
        );
        let status = |extra: Value| {
            let (c, id, caps) = (c.clone(), id.clone(), caps.clone());
            async move {
                let mut params = json!({"name": "agent_status", "arguments": {"task_id": id}});
                if let Value::Object(extra) = extra {
                    params.as_object_mut().unwrap().extend(extra);
                }
                let r = c.modern_with_caps("tools/call", params, caps).await;
                assert_eq!(r.status, 200, "{}", r.text);
                r.body["result"].clone()
            }
        };
        let asked = eventually("an InputRequiredResult", || async {
            let result = status(json!({})).await;
            (result["resultType"] == "input_required").then_some(result)
        })
        .await;
        let request = &asked["inputRequests"]["approval-1"];
        assert_eq!(request["method"], "elicitation/create", "{asked}");
        assert_eq!(request["params"]["mode"], "form");
        assert!(asked["requestState"].is_string(), "{asked}");
        assert!(asked.get("content").is_none(), "{asked}");
        let retried = status(json!({
            "inputResponses": {"approval-1": {"action": action}},
            "requestState": asked["requestState"]
        }))
        .await;
        assert_eq!(retried["resultType"], "complete", "{retried}");
        let done = finished(&c, &id).await;
        assert_eq!(field(&done, "status"), "completed", "{done}");
        assert_eq!(made(&ws), runs, "{action}");
        assert!(
            result_of(&done).contains(&format!(
                "approval-1 run_command (touch made.txt): {action}"
            )),
            "{done}"
        );
        // A client without elicitation is never asked: it just sees the status.
        let plain = c
            .modern(
                "tools/call",
                json!({"name": "agent_status", "arguments": {"task_id": id}}),
            )
            .await;
        assert_eq!(plain.body["result"]["resultType"], "complete");
    }
}

/// A 2025 client over stdio that declared `elicitation` at `initialize` is asked by a
/// server→client `elicitation/create` request (form mode, the Tasks path's message and flat
/// schema) while the task waits, and its response decides; one that did not declare it has
/// the action refused at once, with nothing sent to it. Through the real binary.
#[tokio::test]
async fn a_2025_stdio_client_with_elicitation_is_asked_by_elicitation_create() {
    // (declared capabilities, the response's action or none sent, the audit's decision)
    for (caps, action, decision) in [
        (json!({"elicitation": {}}), Some("accept"), "accept"),
        (json!({"elicitation": {}}), Some("decline"), "decline"),
        (json!({"elicitation": {}}), None, "timeout"),
        (json!({}), None, "refused"),
    ] {
        let asked = caps != json!({});
        let ws = tempfile::tempdir().unwrap();
        let fake = FakeOllama::start().await;
        script(&fake, "made.txt");
        let mut approvals = ask_commands();
        approvals.timeout = Duration::from_millis(if action.is_some() { 60_000 } else { 300 });
        let mut config = config(&fake, ws.path(), approvals);
        let audit = audited(&mut config, ws.path());
        let mut server = StdioServer::spawn(&config).await;
        let init = server
            .initialize_2025(
                json!({"protocolVersion": "2025-11-25", "capabilities": caps,
                                    "clientInfo": {"name": "t", "version": "1"}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        let run = server
            .request(
                "tools/call",
                json!({"name": "agent_run",
                       "arguments": {"request": "Run the touch program on made.txt."}}),
            )
            .await;
        let id = field(&tool_text(&run["result"]), "task_id");
        if asked {
            let ask = server.read_message().await;
            assert_asks_for_touch(&ask);
            assert!(!made(&ws), "ran before the answer");
            if let Some(action) = action {
                let answer =
                    json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": action}});
                server.send_line(&answer.to_string()).await;
            }
        }
        let deadline = tokio::time::Instant::now() + BUDGET;
        let done = loop {
            let r = server
                .request(
                    "tools/call",
                    json!({"name": "agent_status", "arguments": {"task_id": id}}),
                )
                .await;
            let text = tool_text(&r["result"]);
            if field(&text, "status") == "completed" {
                break text;
            }
            assert!(tokio::time::Instant::now() < deadline, "{text}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let seen = tool_result_seen(&fake);
        match action {
            Some("accept") => {
                assert!(made(&ws), "{done}");
                assert!(
                    result_of(&done)
                        .ends_with("approval-1 run_command (touch made.txt): accept by stdio"),
                    "{done}"
                );
            }
            Some(_) => {
                assert!(!made(&ws), "{done}");
                assert!(
                    seen.contains("declined run_command (touch made.txt)"),
                    "{seen}"
                );
            }
            None if asked => {
                assert!(!made(&ws), "{done}");
                assert!(seen.contains("no decision on run_command"), "{seen}");
            }
            None => {
                assert!(!made(&ws), "{done}");
                assert!(seen.contains("cannot be asked"), "{seen}");
            }
        }
        let line = approval_line(&audit).await;
        assert_eq!(line["decision"], decision, "{line}");
        assert_eq!(line["task_id"], id, "{line}");
        let by = if action.is_some() {
            json!("stdio")
        } else {
            Value::Null
        };
        assert_eq!(line["by"], by, "{line}");
        assert!(server.close().await.success());
    }
}
