//! Following a task by push: 2026-07-28 `subscriptions/listen` over real HTTP on 127.0.0.1
//! (an SSE response) and over a real `agent-mcp stdio` child, and the 2025-11-25
//! `notifications/tasks/status` over stdio, all against the fake Ollama on loopback.

mod support;

use std::future::Future;
use std::time::Duration;

use agent_mcp::config::Config;
use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{
    HttpClient, HttpServer, MODERN, StdioServer, bearer, modern_meta, test_config,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const EXT: &str = "io.modelcontextprotocol/tasks";
const SUB: &str = "io.modelcontextprotocol/subscriptionId";
const BUDGET: Duration = Duration::from_secs(60);

async fn within<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(BUDGET, fut)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {BUDGET:?}"))
}

fn declared() -> Value {
    json!({"extensions": {EXT: {}}})
}

/// The agent state a `statusMessage` names (it starts with the state's own message).
fn state_of(task: &Value) -> &'static str {
    let message = task["statusMessage"].as_str().unwrap_or_default();
    for (prefix, state) in [
        ("タスクは実行待ち", "queued"),
        ("タスクを計画", "planning"),
        ("タスクを実行して", "running"),
        ("タスクが完了", "completed"),
        ("タスクが失敗", "failed"),
        ("タスクは取り消", "cancelled"),
    ] {
        if message.starts_with(prefix) {
            return state;
        }
    }
    panic!("unknown statusMessage in {task}")
}

/// Removes consecutive repeats: [a, a, b, a] → [a, b, a].
fn runs(states: &[&'static str]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for s in states {
        if out.last() != Some(s) {
            out.push(s);
        }
    }
    out
}

fn with_tokens(mut config: Config) -> Config {
    config.auth.tokens = vec![
        bearer("alice", "alice-token-0123456789abcdef"),
        bearer("bob", "bob-token-0123456789abcdef01"),
    ];
    config
}

/// Creates a task (declaring the extension) as `token`'s caller; its taskId.
async fn create(url: &str, token: Option<&str>, request: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "agent_run", "arguments": {"request": request}, "_meta": modern_meta(declared())}});
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "agent_run");
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let v: Value = req
        .body(body.to_string())
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(v["result"]["resultType"], "task", "{v}");
    id_in(&v["result"])
}

/// The `taskId` in `task`.
fn id_in(task: &Value) -> String {
    task["taskId"].as_str().expect("taskId").to_owned()
}

/// An open `subscriptions/listen` SSE response.
struct Listen {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

async fn listen(
    url: &str,
    token: Option<&str>,
    id: i64,
    notifications: Value,
    caps: Value,
) -> Listen {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "notifications": notifications, "_meta": modern_meta(caps)}});
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "subscriptions/listen");
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let resp = req.body(body.to_string()).send().await.expect("send");
    Listen {
        resp,
        buf: Vec::new(),
    }
}

impl Listen {
    /// The next SSE event's JSON, or `None` at the end of the stream.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = String::from_utf8(event).expect("utf-8");
                let data: String = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect();
                if data.is_empty() {
                    // A comment (`: keep-alive`) carries no message.
                    assert!(text.starts_with(':'), "an event without data: {text:?}");
                    continue;
                }
                return Some(serde_json::from_str(&data).expect("an event's data is JSON"));
            }
            match self.resp.chunk().await.expect("read") {
                Some(chunk) => self.buf.extend_from_slice(&chunk),
                None => {
                    assert!(self.buf.is_empty(), "a partial event at the end");
                    return None;
                }
            }
        }
    }

    /// Every message until the stream ends.
    async fn all(mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = self.next().await {
            out.push(v);
        }
        out
    }
}

/// Checks a whole listen stream for `task_id`: the acknowledgement first, then its states in
/// order ending completed with the result inlined, then the listen's own empty result; every
/// message tagged with the subscription id. Returns the states seen.
fn check_followed(messages: &[Value], sub: Value, task_id: &str) -> Vec<&'static str> {
    let first = &messages[0];
    assert_eq!(
        first["method"], "notifications/subscriptions/acknowledged",
        "{first}"
    );
    assert_eq!(
        first["params"]["notifications"]["taskIds"],
        json!([task_id])
    );
    assert_eq!(first["params"]["_meta"][SUB], sub);
    let last = messages.last().expect("messages");
    assert_eq!(
        *last,
        json!({"jsonrpc": "2.0", "id": sub, "result": {"resultType": "complete", "_meta": {SUB: sub}}})
    );
    let updates = &messages[1..messages.len() - 1];
    assert!(!updates.is_empty());
    let mut states = Vec::new();
    for n in updates {
        assert_eq!(n["method"], "notifications/tasks", "{n}");
        assert_eq!(n["params"]["taskId"], task_id);
        assert_eq!(n["params"]["_meta"][SUB], sub);
        states.push(state_of(&n["params"]));
    }
    let done = &updates.last().expect("an update")["params"];
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("All done.")),
        "{done}"
    );
    for n in &updates[..updates.len() - 1] {
        assert!(
            n["params"].get("result").is_none(),
            "only the end inlines: {n}"
        );
    }
    states
}

fn slow_fake() -> FakeConfig {
    FakeConfig::default().with_default_reply(Reply::delayed(
        Duration::from_millis(400),
        Reply::text("All done.", 10, 3),
    ))
}

#[tokio::test]
async fn http_listen_follows_a_task_from_queued_to_completed_without_polling() {
    within(async {
        let fake = FakeOllama::start_with(slow_fake()).await;
        let server = HttpServer::start(test_config(&fake.url())).await;
        // The first task holds the worker, so the second one is queued when the listen opens.
        let ahead = create(&server.url, None, "First.").await;
        let id = create(&server.url, None, "Second.").await;
        let stream = listen(&server.url, None, 7, json!({"taskIds": [id]}), declared()).await;
        assert_eq!(stream.resp.status(), 200);
        assert_eq!(stream.resp.headers()["content-type"], "text/event-stream");
        let messages = stream.all().await;
        let states = check_followed(&messages, json!(7), &id);
        assert_eq!(
            runs(&states),
            ["queued", "running", "completed"],
            "{messages:#?}"
        );
        // The first task was never followed and is done too (the worker took it first).
        let _ = ahead;
    })
    .await;
}

#[tokio::test]
async fn http_listen_acknowledges_only_the_callers_own_tasks() {
    within(async {
        let fake = FakeOllama::start_with(slow_fake()).await;
        let server = HttpServer::start(with_tokens(test_config(&fake.url()))).await;
        let alice = Some("alice-token-0123456789abcdef");
        let bob = Some("bob-token-0123456789abcdef01");
        let alices = create(&server.url, alice, "Alice's.").await;
        let bobs = create(&server.url, bob, "Bob's.").await;
        let unknown = uuid::Uuid::new_v4().to_string();
        let ids = json!([alices, "not-a-task", unknown, bobs]);
        let mut stream = listen(&server.url, bob, 9, json!({"taskIds": ids}), declared()).await;
        let ack = stream.next().await.expect("ack");
        assert_eq!(
            ack["params"]["notifications"]["taskIds"],
            json!([bobs]),
            "only bob's own task: {ack}"
        );
        let messages = stream.all().await;
        for m in &messages {
            if m["method"] == "notifications/tasks" {
                assert_eq!(m["params"]["taskId"], bobs, "nothing about alice's: {m}");
            }
        }
        assert_eq!(messages.last().expect("end")["id"], 9);
    })
    .await;
}

#[tokio::test]
async fn http_listen_refusals_say_what_to_do() {
    within(async {
        let fake = FakeOllama::hanging().await;
        let server = HttpServer::start(test_config(&fake.url())).await;
        let c = HttpClient::new(&server.url);
        let id = create(&server.url, None, "Hangs.").await;
        let listen_with = |notifications: Value, caps: Value| {
            let params = json!({ "notifications": notifications });
            c.modern_with_caps("subscriptions/listen", params, caps)
        };
        for (notifications, caps, status, code) in [
            // Without the extension declared: -32021.
            (json!({"taskIds": [id]}), json!({}), 400, -32021),
            // Nothing this server sends asked for: -32601 (404), as before.
            (json!({"toolsListChanged": true}), declared(), 404, -32601),
        ] {
            let r = listen_with(notifications, caps).await;
            assert_eq!(
                (r.status.as_u16(), &r.body["error"]["code"]),
                (status, &json!(code)),
                "{}",
                r.text
            );
        }
        // Malformed taskIds: -32602 naming the field.
        let r = listen_with(json!({"taskIds": [1]}), declared()).await;
        assert_eq!(r.body["error"]["code"], -32602, "{}", r.text);
        assert!(r.text.contains("taskIds[0]"), "{}", r.text);
        // The cap on open streams per caller: 16 open, the 17th is refused, and closing one
        // makes room again.
        let mut open = Vec::new();
        for n in 0..16 {
            let mut s = listen(
                &server.url,
                None,
                100 + n,
                json!({"taskIds": [id]}),
                declared(),
            )
            .await;
            assert_eq!(s.resp.status(), 200);
            assert_eq!(
                s.next().await.expect("ack")["method"],
                "notifications/subscriptions/acknowledged"
            );
            open.push(s);
        }
        let refused = listen_with(json!({"taskIds": [id]}), declared()).await;
        assert_eq!(refused.body["error"]["code"], -32600, "{}", refused.text);
        assert!(
            refused.text.contains("Too many open subscriptions"),
            "{}",
            refused.text
        );
        drop(open.pop());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let mut s = listen(&server.url, None, 200, json!({"taskIds": [id]}), declared()).await;
            if s.resp.status() == 200 {
                assert_eq!(
                    s.next().await.expect("ack")["method"],
                    "notifications/subscriptions/acknowledged"
                );
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "a closed stream frees its place"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// A stalled subscriber: it sends its listen on a raw socket and reads nothing while its task
/// goes through many progress changes (a step calling a tool round after round). Meanwhile a
/// second subscriber and plain requests are served as usual; when the stalled one reads again
/// it gets the task's latest state and the end of the stream.
///
/// At this size (about 200 updates, some 150 KB) hyper's connection write buffer and the
/// socket buffers still hold every update, so this test checks "nobody waits" and "latest
/// state on resume", not coalescing: that is `an_unread_stream_skips_to_the_latest_state`
/// below (and the broadcast's unit test in `src/task/events.rs`); the 30 s, 1,000-round stall
/// with the server's memory measured is `scripts/bench-push.sh`.
/// The configuration of a task of `rounds` tool rounds in `workspace`, queued on `fake`: each
/// round lists the workspace by another spelling of its path (the engine answers an identical
/// read-only call from memory, and these rounds must each run); the fake's default reply ends it.
fn many_rounds(fake: &FakeOllama, rounds: usize, workspace: &std::path::Path) -> Config {
    for round in 0..rounds {
        let path = format!("{}.", "./".repeat(round));
        fake.push_reply(Reply::tool_call("list_dir", json!({"path": path}), 5, 2));
    }
    let mut config = test_config(&fake.url());
    config.agent.max_iterations = rounds + 5;
    config.agent.workspace = Some(workspace.to_path_buf());
    config
}

#[tokio::test]
async fn a_stalled_subscriber_holds_up_no_one_and_resumes_at_the_latest_state() {
    within(async {
        const ROUNDS: usize = 150;
        let fake = FakeOllama::start_with(
            FakeConfig::default()
                .with_capabilities(&["completion", "tools"])
                .with_default_reply(Reply::text("All done.", 10, 3)),
        )
        .await;
        let dir = tempfile::tempdir().expect("tempdir");
        let config = many_rounds(&fake, ROUNDS, dir.path());
        let server = HttpServer::start(config).await;
        // Hold the worker until both subscribers are in place.
        let id = create(&server.url, None, "Look around a lot.").await;

        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
            "notifications": {"taskIds": [id]}, "_meta": modern_meta(declared())}})
        .to_string();
        // A small receive buffer, so the server soon finds the connection full, as with a
        // client far away or asleep.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        let mut stalled = socket.connect(server.addr).await.expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n\
             Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stalled.write_all(head.as_bytes()).await.expect("write");

        let follower = listen(&server.url, None, 2, json!({"taskIds": [id]}), declared()).await;
        let messages = follower.all().await;
        let updates = messages
            .iter()
            .filter(|m| m["method"] == "notifications/tasks")
            .count();
        assert!(
            updates > ROUNDS,
            "the reading subscriber saw {updates} updates"
        );
        assert_eq!(
            messages[messages.len() - 2]["params"]["status"],
            "completed"
        );
        // Plain requests are answered while the stalled stream stays open.
        let c = HttpClient::new(&server.url);
        assert_eq!(c.modern("tools/list", json!({})).await.status, 200);

        // The stalled subscriber reads now: whatever its socket buffered, then the latest
        // state (completed, with the result) and the end of its stream.
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), async {
            let mut buf = [0u8; 65536];
            loop {
                let n = stalled.read(&mut buf).await.expect("read");
                if n == 0 {
                    break;
                }
                raw.extend_from_slice(&buf[..n]);
                // The chunked body's last chunk.
                if raw.ends_with(b"\r\n0\r\n\r\n") {
                    break;
                }
            }
        })
        .await
        .expect("the stalled stream ends once read");
        let text = String::from_utf8_lossy(&raw);
        let datas: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).expect("json"))
            .collect();
        assert_eq!(
            datas[0]["method"],
            "notifications/subscriptions/acknowledged"
        );
        let last_update = datas
            .iter()
            .rev()
            .find(|m| m["method"] == "notifications/tasks")
            .expect("an update");
        assert_eq!(
            last_update["params"]["status"], "completed",
            "latest state on resume"
        );
        assert_eq!(
            datas.last().expect("end")["result"]["resultType"],
            "complete"
        );
        let seen = datas.len() - 2;
        println!("stalled subscriber: {seen} updates delivered for {updates} seen by the reader");
    })
    .await;
}

#[tokio::test]
async fn stdio_listen_follows_a_task_and_legacy_clients_get_status_notifications() {
    within(async {
        let fake = FakeOllama::start_with(slow_fake()).await;
        let config = test_config(&fake.url());

        // 2026-07-28: create, then listen; every message on stdout is tagged.
        let mut stdio = StdioServer::spawn(&config).await;
        let mut params = json!({"name": "agent_run", "arguments": {"request": "Go."}});
        params["_meta"] = modern_meta(declared());
        let created = stdio.request("tools/call", params).await;
        let id = id_in(&created["result"]);
        let listen = json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [id]}, "_meta": modern_meta(declared())}});
        stdio.send_line(&listen.to_string()).await;
        let mut messages = Vec::new();
        loop {
            let m = stdio.read_message().await;
            let end = m.get("id").is_some();
            messages.push(m);
            if end {
                break;
            }
        }
        let states = check_followed(&messages, json!("sub-1"), &id);
        assert_eq!(runs(&states).last(), Some(&"completed"));
        assert!(stdio.close().await.success());

        // 2025-11-25: a task-augmented tools/call answers with the task, then its changes
        // follow as notifications/tasks/status until it is terminal.
        let mut stdio = StdioServer::spawn(&config).await;
        let init = stdio
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}),
            )
            .await;
        assert!(
            init["result"]["capabilities"]["tasks"].is_object(),
            "{init}"
        );
        stdio
            .send_line(
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            )
            .await;
        let created = stdio
            .request(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "Go."},
                "task": {"ttl": 60000}}),
            )
            .await;
        let id = id_in(&created["result"]["task"]);
        let mut statuses = Vec::new();
        loop {
            let m = stdio.read_message().await;
            assert_eq!(m["method"], "notifications/tasks/status", "{m}");
            assert_eq!(m["params"]["taskId"], id);
            assert!(m["params"].get("ttl").is_some(), "2025 shape: {m}");
            let status = m["params"]["status"].as_str().expect("status").to_owned();
            statuses.push(status.clone());
            if status == "completed" {
                break;
            }
        }
        assert_eq!(statuses.first().map(String::as_str), Some("working"));
        // After the terminal one nothing more comes for it: the next line answers a ping.
        let pong = stdio.request("ping", json!({})).await;
        assert_eq!(pong["result"], json!({}));
        assert!(stdio.notifications.is_empty(), "{:?}", stdio.notifications);
        assert!(stdio.close().await.success());
    })
    .await;
}

#[tokio::test]
async fn stdio_listen_ends_on_its_cancel_and_at_end_of_input_without_touching_the_task() {
    within(async {
        let fake = FakeOllama::hanging().await;
        let mut stdio = StdioServer::spawn(&test_config(&fake.url())).await;
        let create = |request: &str| {
            let mut params = json!({"name": "agent_run", "arguments": {"request": request}});
            params["_meta"] = modern_meta(declared());
            params
        };
        let listen = |sub: &str, id: &str| {
            json!({"jsonrpc": "2.0", "id": sub, "method": "subscriptions/listen",
                "params": {"notifications": {"taskIds": [id]}, "_meta": modern_meta(declared())}})
            .to_string()
        };
        let with_meta = |mut params: Value| {
            params["_meta"] = modern_meta(declared());
            params
        };
        let created = stdio.request("tools/call", create("Hang.")).await;
        let id = id_in(&created["result"]);
        // Listen "a"; once the model call hangs nothing changes, and once a request has been
        // answered after that every notification of "a" so far has been read.
        stdio.send_line(&listen("a", &id)).await;
        fake.until_chat_started(Duration::from_secs(20), "the task never ran")
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let listed = stdio.request("tools/list", with_meta(json!({}))).await;
        assert!(listed["result"]["tools"].is_array(), "{listed}");
        let before = std::mem::take(&mut stdio.notifications);
        assert!(
            before.iter().any(|m| m["method"] == "notifications/tasks"
                && m["params"]["_meta"][SUB] == "a"
                && state_of(&m["params"]) == "running"),
            "{before:#?}"
        );
        // Cancelling the listen is not cancelling the task.
        stdio
            .send_line(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "a"}})
                .to_string(),
            )
            .await;
        let got = stdio
            .request("tasks/get", with_meta(json!({"taskId": id})))
            .await;
        assert_eq!(got["result"]["status"], "working", "{got}");
        // Now the task changes (cancelled): a listen still open would be told; "a" is not.
        let ack = stdio
            .request("tasks/cancel", with_meta(json!({"taskId": id})))
            .await;
        assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
        stdio.send_line(&listen("b", &id)).await;
        let mut seen = std::mem::take(&mut stdio.notifications);
        loop {
            let m = stdio.read_message().await;
            let end = m["id"] == "b";
            seen.push(m);
            if end {
                break;
            }
        }
        let b_updates: Vec<&Value> = seen
            .iter()
            .filter(|m| m["params"]["_meta"][SUB] == "b" && m["method"] == "notifications/tasks")
            .collect();
        assert_eq!(
            b_updates.last().expect("b's update")["params"]["status"],
            "cancelled"
        );
        for m in &seen {
            assert_ne!(m["params"]["_meta"][SUB], "a", "after its cancel: {m}");
        }
        // A listen still open at end of input ends with it: the process exits promptly.
        let created = stdio.request("tools/call", create("Hang too.")).await;
        let id = id_in(&created["result"]);
        stdio.send_line(&listen("c", &id)).await;
        assert_eq!(stdio.read_message().await["params"]["_meta"][SUB], "c");
        let exited = stdio.close().await;
        assert!(exited.success(), "{exited:?}");
    })
    .await;
}

/// SIGTERM with a listen open on a task that never ends: the listen gets its graceful end (the
/// listen's result) and the server exits without waiting for the task.
#[tokio::test]
async fn shutdown_ends_open_listens_gracefully() {
    within(async {
        let fake = FakeOllama::hanging().await;
        let server = support::harness::ServeProcess::spawn(&test_config(&fake.url())).await;
        let url = format!("{}/mcp", server.base);
        let id = create(&url, None, "Hang.").await;
        let mut stream = listen(&url, None, 5, json!({"taskIds": [id]}), declared()).await;
        assert_eq!(stream.next().await.expect("ack")["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(stream.next().await.expect("state")["params"]["status"], "working");
        let started = std::time::Instant::now();
        let reader = tokio::spawn(stream.all());
        let status = server.terminate().await;
        assert!(status.success(), "{status:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "shutdown waited {:?}", started.elapsed());
        let rest = reader.await.expect("reader");
        assert_eq!(
            rest.last().expect("the end"),
            &json!({"jsonrpc": "2.0", "id": 5, "result": {"resultType": "complete", "_meta": {SUB: 5}}})
        );
    })
    .await;
}

/// The coalescing itself, end to end through the stack but without socket buffers in between:
/// a listen stream that is not pulled while its task makes hundreds of progress changes yields,
/// when pulled again, the task's latest state, not the backlog.
#[tokio::test]
async fn an_unread_stream_skips_to_the_latest_state() {
    use agent_mcp::protocol::{
        McpRequest, McpResponse, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
    };
    use tower::ServiceExt;
    within(async {
        const ROUNDS: usize = 150;
        let fake = FakeOllama::start_with(FakeConfig::default().with_default_reply(Reply::text(
            "All done.",
            10,
            3,
        )))
        .await;
        let dir = tempfile::tempdir().expect("tempdir");
        let config = many_rounds(&fake, ROUNDS, dir.path());
        let server = agent_mcp::AgentMcp::start(&config).await.expect("start");
        let request = |method: &str, params: Value| {
            let Value::Object(mut params) = params else {
                unreachable!()
            };
            params.insert("_meta".into(), modern_meta(declared()));
            let mut ctx = RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess);
            ctx.client_capabilities = declared();
            McpRequest::new(Some(RequestId::Number(1)), method, params, ctx)
        };
        let created: McpResponse = server
            .stack()
            .oneshot(request(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "Look around."}}),
            ))
            .await
            .expect("infallible");
        let id = created.ids.task_id.expect("a task").to_string();
        let listened: McpResponse = server
            .stack()
            .oneshot(request(
                "subscriptions/listen",
                json!({"notifications": {"taskIds": [id]}}),
            ))
            .await
            .expect("infallible");
        let Payload::Stream(slot) = &listened.payload else {
            panic!("not a stream: {:?}", listened.payload)
        };
        let mut stream = slot.take().expect("the stream");
        let ack = stream.next().await.expect("ack");
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        let first = stream.next().await.expect("first state");
        assert_ne!(first["params"]["status"], "completed", "{first}");
        // Not pulled while the task runs all its rounds.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
        while fake.chat_count() <= ROUNDS {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the task did not finish its rounds"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Pulled again: the latest state at once, then the end.
        let next = stream.next().await.expect("the latest state");
        assert_eq!(next["params"]["status"], "completed", "{next}");
        assert_eq!(next["params"]["result"]["isError"], false, "{next}");
        let end = stream.next().await.expect("the end");
        assert_eq!(end["result"]["resultType"], "complete", "{end}");
        assert!(stream.next().await.is_none());
        server.shutdown().await;
    })
    .await;
}
