//! Input requests only of the kinds the current request declared (issue 56; 2026-07-28 MRTR:
//! a server MUST NOT send input requests of a kind the request did not declare), on every
//! surface that carries them: `tasks/get`, `agent_status` (MRTR) and the `notifications/tasks`
//! of a `subscriptions/listen`. Through real HTTP with a fake Ollama whose model runs
//! `touch made.txt`, which waits for approval. A request that declared form elicitation gets
//! the `elicitation/create`; one that did not sees the task wait (`input_required`, the
//! waiting text) without it; the task keeps waiting, and a later request that declares
//! elicitation answers it.

mod support;

use std::path::Path;
use std::time::Duration;

use agent_mcp::config::{Approval, ApprovalsConfig, CommandApproval};
use serde_json::{Map, Value, json};
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{HttpClient, HttpServer, MODERN, field, modern_meta, test_config};
use tempfile::TempDir;

const EXT: &str = "io.modelcontextprotocol/tasks";
const BUDGET: Duration = Duration::from_secs(30);
/// `agent_status`'s `message` while the task waits for a decision.
const WAITING: &str = "タスクは承認を待っています。";

/// The Tasks extension and form elicitation.
fn answering() -> Value {
    json!({"extensions": {EXT: {}}, "elicitation": {"form": {}}})
}

/// What requests that may not be sent an elicitation declare: the extension alone, or with
/// URL-mode elicitation only.
fn not_answering() -> [Value; 2] {
    [
        json!({"extensions": {EXT: {}}}),
        json!({"extensions": {EXT: {}}, "elicitation": {"url": {}}}),
    ]
}

/// A server whose model runs `touch made.txt` (then answers), asking for every command.
async fn asking_server() -> (TempDir, FakeOllama, HttpServer) {
    let ws = tempfile::tempdir().expect("a workspace");
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::tool_call(
        "run_command",
        json!({"argv": ["touch", "made.txt"]}),
        10,
        1,
    ));
    fake.push_reply(Reply::text("Done.", 10, 1));
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.commands.allow = vec!["touch".into()];
    config.agent.approvals = ApprovalsConfig {
        run_command: CommandApproval::Every(Approval::Ask),
        ..ApprovalsConfig::default()
    };
    config.rate_limit.enabled = false;
    let server = HttpServer::start(config).await;
    (ws, fake, server)
}

fn made(ws: &Path) -> bool {
    ws.join("made.txt").exists()
}

async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    support::harness::eventually(BUDGET, what, check).await
}

/// The `result` of a 2026-07-28 request declaring `caps`, which must answer 200.
async fn call(c: &HttpClient, method: &str, params: Value, caps: Value) -> Value {
    let r = c.modern_with_caps(method, params, caps).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["result"].clone()
}

/// `agent_run` as a task (Tasks extension and form elicitation): its taskId.
async fn create_task(c: &HttpClient) -> String {
    let params = json!({"name": "agent_run", "arguments": {"request": "Run touch made.txt."}});
    let created = call(c, "tools/call", params, answering()).await;
    assert_eq!(created["resultType"], "task", "{created}");
    created["taskId"].as_str().expect("taskId").to_owned()
}

async fn tasks_get(c: &HttpClient, id: &str, caps: Value) -> Map<String, Value> {
    let got = call(c, "tasks/get", json!({"taskId": id}), caps).await;
    got.as_object().cloned().expect("a task object")
}

/// The task, read by a request declaring form elicitation, once it waits: its body.
async fn waiting_task(c: &HttpClient, id: &str) -> Map<String, Value> {
    eventually("input_required", || async {
        let body = tasks_get(c, id, answering()).await;
        assert_ne!(body["status"], "completed", "{body:?}");
        (body["status"] == "input_required").then_some(body)
    })
    .await
}

/// The one `elicitation/create` a body asks, by its key.
fn asked(body: &Map<String, Value>) -> (String, Value) {
    let requests = body["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{body:?}");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{body:?}");
    assert_eq!(request["params"]["mode"], "form", "{body:?}");
    (key.clone(), request.clone())
}

/// `agent_status` of `id` once it is terminal: its text.
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

#[tokio::test]
async fn tasks_get_carries_the_elicitation_only_to_a_request_that_declared_it() {
    let (ws, _fake, server) = asking_server().await;
    let c = server.client();
    let id = create_task(&c).await;
    let declared = waiting_task(&c, &id).await;
    let (key, _) = asked(&declared);
    let mut without = declared.clone();
    without.remove("inputRequests");
    for caps in not_answering() {
        // The same task, waiting with the same message, and no input request at all.
        let body = tasks_get(&c, &id, caps.clone()).await;
        assert_eq!(body, without, "{caps}");
    }
    // It still waits, and a request that declares elicitation is asked again and answers.
    assert_eq!(tasks_get(&c, &id, answering()).await, declared);
    assert!(!made(ws.path()));
    let params = json!({"taskId": id, "inputResponses": {&key: {"action": "accept"}}});
    call(&c, "tasks/update", params, answering()).await;
    let done = finished(&c, &id).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert!(made(ws.path()), "{done}");
}

#[tokio::test]
async fn agent_status_asks_by_mrtr_only_a_request_that_declared_elicitation() {
    let (ws, _fake, server) = asking_server().await;
    let c = server.client();
    // Form elicitation without the extension: the task is answered through agent_status.
    let mrtr = json!({"elicitation": {}});
    let run = call(
        &c,
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "Run touch made.txt."}}),
        mrtr.clone(),
    )
    .await;
    let text = run["content"][0]["text"]
        .as_str()
        .expect("the acknowledgement");
    let id = field(text, "task_id");
    let status = |caps: Value, extra: Value| {
        let (c, id) = (c.clone(), id.clone());
        async move {
            let mut params = json!({"name": "agent_status", "arguments": {"task_id": id}});
            if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
                params.extend(extra);
            }
            call(&c, "tools/call", params, caps).await
        }
    };
    let first = eventually("an InputRequiredResult", || async {
        let result = status(mrtr.clone(), json!({})).await;
        (result["resultType"] == "input_required").then_some(result)
    })
    .await;
    for caps in [json!({}), json!({"elicitation": {"url": {}}})] {
        // The status, saying the task waits, and no input request.
        let plain = status(caps.clone(), json!({})).await;
        assert_eq!(plain["resultType"], "complete", "{caps}: {plain}");
        assert!(plain.get("inputRequests").is_none(), "{caps}: {plain}");
        let text = plain["content"][0]["text"].as_str().expect("the status");
        assert_eq!(field(text, "status"), "running", "{text}");
        assert_eq!(field(text, "message"), WAITING, "{text}");
    }
    // Still waiting: a request that declares elicitation is asked the same, and answers.
    let again = status(mrtr.clone(), json!({})).await;
    assert_eq!(again, first);
    assert!(!made(ws.path()));
    let retried = status(
        mrtr,
        json!({
            "inputResponses": {"approval-1": {"action": "accept"}},
            "requestState": first["requestState"],
        }),
    )
    .await;
    assert_eq!(retried["resultType"], "complete", "{retried}");
    let done = finished(&c, &id).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert!(made(ws.path()), "{done}");
}

/// A listen on one task: its `notifications/tasks` params as they arrive.
struct Listen {
    notified: tokio::sync::mpsc::UnboundedReceiver<Value>,
    seen: Vec<Value>,
}

impl Listen {
    /// Opens a `subscriptions/listen` on task `id` declaring `caps`; returns once the server
    /// answered (from then on every change of the task is followed).
    async fn open(c: &HttpClient, id: &str, caps: Value) -> Listen {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
            "notifications": {"taskIds": [id]},
            "_meta": modern_meta(caps)}});
        let mut resp = reqwest::Client::new()
            .post(&c.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "subscriptions/listen")
            .body(body.to_string())
            .send()
            .await
            .expect("listen");
        assert_eq!(resp.status(), 200);
        let (tx, notified) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut text = String::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                text.push_str(&String::from_utf8_lossy(&chunk));
                while let Some((line, rest)) = text.split_once('\n') {
                    let message = line
                        .strip_prefix("data: ")
                        .and_then(|d| serde_json::from_str::<Value>(d).ok());
                    text = rest.to_owned();
                    if let Some(m) = message.filter(|m| m["method"] == "notifications/tasks") {
                        let _ = tx.send(m["params"].clone());
                    }
                }
            }
        });
        Listen {
            notified,
            seen: Vec::new(),
        }
    }

    /// Waits for a notification with `status`; returns it.
    async fn until(&mut self, status: &str) -> Value {
        tokio::time::timeout(BUDGET, async {
            loop {
                let t = self.notified.recv().await.expect("the stream ended early");
                self.seen.push(t.clone());
                if t["status"] == status {
                    return t;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {status} notification: {:?}", self.seen))
    }
}

#[tokio::test]
async fn a_listen_carries_the_elicitation_only_if_it_declared_it() {
    let (ws, _fake, server) = asking_server().await;
    let c = server.client();
    let id = create_task(&c).await;
    let mut declared = Listen::open(&c, &id, answering()).await;
    let mut others = Vec::new();
    for caps in not_answering() {
        others.push((caps.clone(), Listen::open(&c, &id, caps).await));
    }
    let asked_there = declared.until("input_required").await;
    let (key, request) = asked(asked_there.as_object().expect("a task"));
    let mut without = asked_there.clone();
    if let Some(t) = without.as_object_mut() {
        t.remove("inputRequests");
    }
    for (caps, listen) in &mut others {
        // The same notification (the task, its waiting message, the agent_status text), with
        // no input request.
        let notified = listen.until("input_required").await;
        assert_eq!(notified, without, "{caps}");
    }
    // The task waited for all of them, and is answered through a request that declares it.
    assert_eq!(asked_there["inputRequests"], json!({&key: request}));
    assert!(!made(ws.path()));
    let params = json!({"taskId": id, "inputResponses": {&key: {"action": "accept"}}});
    call(&c, "tasks/update", params, answering()).await;
    let everyone = others.iter_mut().map(|(_, listen)| listen);
    for listen in everyone.chain(std::iter::once(&mut declared)) {
        let done = listen.until("completed").await;
        assert!(done.get("inputRequests").is_none(), "{done}");
    }
    for (caps, listen) in &others {
        assert!(
            listen.seen.iter().all(|t| t.get("inputRequests").is_none()),
            "{caps}: {:?}",
            listen.seen
        );
    }
    assert!(made(ws.path()));
}
