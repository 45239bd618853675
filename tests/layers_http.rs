//! The audit, auth and rate-limit layers over real HTTP: 401s, per-identity isolation, 429 with
//! `Retry-After`, one audit line per call and refusal, and no secret in any log or audit line.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_mcp::config::{Config, TokenConfig};
use agent_mcp::layers::auth::sha256_hex;
use base64::Engine;
use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{
    HttpClient, HttpServer, MODERN, Reply, field, modern_meta, test_config, tool_text, write_config,
};

const TOKEN_A: &str = "alpha-token-7f3c2e91d4b8a6";
const TOKEN_B: &str = "bravo-token-0a9b8c7d6e5f41";

/// A real 1×1 PNG followed by 3000 bytes of trailing data (ignored by PNG readers), so its
/// base64 is long and distinctive.
fn image_base64() -> String {
    let png = base64::engine::general_purpose::STANDARD
        .decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
        .expect("png");
    let mut bytes = png;
    bytes.extend((0..3000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn with_tokens(mut config: Config) -> Config {
    config.auth.tokens = vec![
        TokenConfig {
            name: "alice".into(),
            sha256: sha256_hex(TOKEN_A),
        },
        TokenConfig {
            name: "bob".into(),
            sha256: sha256_hex(TOKEN_B),
        },
    ];
    config
}

static NEXT_ID: AtomicI64 = AtomicI64::new(1000);

/// A modern request with correct routing headers and the given `Authorization` value.
async fn call(
    client: &HttpClient,
    authorization: Option<&str>,
    method: &str,
    mut params: Value,
) -> Reply {
    params["_meta"] = modern_meta(json!({}));
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut headers: Vec<(&str, String)> = vec![
        ("mcp-protocol-version", MODERN.to_owned()),
        ("mcp-method", method.to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
    ];
    if let Some(name) = params["name"].as_str() {
        headers.push(("mcp-name", name.to_owned()));
    }
    if let Some(value) = authorization {
        headers.push(("authorization", value.to_owned()));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let reply = client.post_raw(&headers, body.to_string()).await;
    // A request without a valid token is refused from its headers, before its body (and its
    // id) is read: its answer's id is null.
    let expected = if reply.status == 401 {
        Value::Null
    } else {
        json!(id)
    };
    assert_eq!(
        reply.body["id"], expected,
        "answer to another request: {}",
        reply.text
    );
    reply
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn run_args(request: &str) -> Value {
    json!({"name": "agent_run", "arguments": {"request": request}})
}

fn status_args(task_id: &str) -> Value {
    json!({"name": "agent_status", "arguments": {"task_id": task_id}})
}

/// Waits until `path` holds at least `n` complete lines and returns them parsed.
async fn audit_lines(path: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let complete: Vec<&str> = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .collect();
        if complete.len() >= n {
            return complete
                .iter()
                .map(|l| {
                    serde_json::from_str(l.trim_end())
                        .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {l}"))
                })
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} audit lines, have {}:\n{text}",
            complete.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn missing_wrong_and_non_bearer_credentials_are_401() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(with_tokens(test_config(&fake.url()))).await;
    let c = server.client();
    let cases = [
        (
            None,
            "Unauthorized: this server needs a bearer token. Send the header Authorization: Bearer <token> with every request; ask the server's operator for a token.",
        ),
        (
            Some(bearer("alpha-token-wrong")),
            "Unauthorized: the bearer token is not accepted. Check that you send the whole token, or ask the server's operator for a new one.",
        ),
        (
            Some(format!("Basic {TOKEN_A}")),
            "Unauthorized: the Authorization header must use the Bearer scheme. Send Authorization: Bearer <token>.",
        ),
        (
            Some(format!("Token {TOKEN_A}")),
            "Unauthorized: the Authorization header must use the Bearer scheme. Send Authorization: Bearer <token>.",
        ),
    ];
    for (authorization, message) in cases {
        let r = call(&c, authorization.as_deref(), "tools/list", json!({})).await;
        assert_eq!(r.status, 401, "{authorization:?}: {}", r.text);
        assert_eq!(r.headers["www-authenticate"], "Bearer");
        assert_eq!(r.body["error"]["code"], -32001);
        assert_eq!(r.body["error"]["message"], message);
        assert!(!r.text.contains("alpha-token"), "{}", r.text);
    }
    // A notification without a token is refused too (nothing unauthenticated gets in).
    let mut params = json!({"requestId": 1});
    params["_meta"] = modern_meta(json!({}));
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params});
    let r = c
        .post_raw(&[("mcp-protocol-version", MODERN)], note.to_string())
        .await;
    assert_eq!(r.status, 401);
    // The right token gets in.
    let r = call(&c, Some(&bearer(TOKEN_A)), "tools/list", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["result"]["tools"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn tasks_and_sessions_belong_to_the_token_that_created_them() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(with_tokens(test_config(&fake.url()))).await;
    let c = server.client();
    let (alice, bob) = (bearer(TOKEN_A), bearer(TOKEN_B));

    let run = call(&c, Some(&alice), "tools/call", run_args("list the files")).await;
    assert_eq!(run.status, 200, "{}", run.text);
    assert_eq!(run.body["result"]["isError"], false);
    let text = tool_text(&run.body["result"]);
    let task_id = field(&text, "task_id");
    let session_id = field(&text, "session_id");

    let mine = call(&c, Some(&alice), "tools/call", status_args(&task_id)).await;
    let mine = tool_text(&mine.body["result"]);
    assert_eq!(field(&mine, "session_id"), session_id);

    let theirs = call(&c, Some(&bob), "tools/call", status_args(&task_id)).await;
    assert_eq!(theirs.body["result"]["isError"], false);
    assert_eq!(
        tool_text(&theirs.body["result"]),
        format!("task_id: {task_id}\nstatus: failed\nmessage: タスク {task_id} が見つかりません。")
    );

    let continue_session = json!({"name": "agent_run",
                                  "arguments": {"request": "continue", "session_id": session_id}});
    let hijack = call(&c, Some(&bob), "tools/call", continue_session.clone()).await;
    assert_eq!(hijack.body["result"]["isError"], true, "{}", hijack.text);
    assert_eq!(
        tool_text(&hijack.body["result"]),
        format!(
            "Unknown session_id {session_id}: no such session. Omit session_id to start a new \
             session, or pass a session_id returned by agent_run."
        )
    );

    // The owner can continue the session.
    let again = call(&c, Some(&alice), "tools/call", continue_session).await;
    assert_eq!(again.body["result"]["isError"], false, "{}", again.text);
    assert_eq!(
        field(&tool_text(&again.body["result"]), "session_id"),
        session_id
    );
}

#[tokio::test]
async fn the_61st_agent_run_in_a_minute_is_429_and_other_callers_are_unaffected() {
    let fake = FakeOllama::start().await;
    let config = with_tokens(test_config(&fake.url()));
    assert_eq!(
        (config.rate_limit.per_minute, config.rate_limit.burst),
        (60, 60),
        "the default task budget (docs/contract.md §7: 60 per minute, burst 60)"
    );
    let server = HttpServer::start(config).await;
    let c = server.client();
    let alice = bearer(TOKEN_A);
    let run = json!({"name": "agent_run", "arguments": {"request": "count me"}});
    let started = Instant::now();
    for i in 1..=60 {
        let r = call(&c, Some(&alice), "tools/call", run.clone()).await;
        assert_eq!(r.status, 200, "agent_run {i}: {}", r.text);
        assert_eq!(
            r.body["result"]["isError"], false,
            "agent_run {i}: {}",
            r.text
        );
    }
    let r = call(&c, Some(&alice), "tools/call", run.clone()).await;
    assert_eq!(
        r.status,
        429,
        "61st agent_run after {:?} (a refill comes every second): {}",
        started.elapsed(),
        r.text
    );
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(r.body["error"]["code"], -32000);
    assert_eq!(r.body["error"]["data"], json!({"retryAfterSeconds": 1}));
    assert_eq!(
        r.body["error"]["message"],
        "Rate limit exceeded: at most 60 new tasks (agent_run calls) per minute per caller. \
         Retry after 1 s."
    );
    // Alice can still read: reads have their own budget.
    let r = call(&c, Some(&alice), "tools/list", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Bob, from the same address, has his own buckets.
    let r = call(&c, Some(&bearer(TOKEN_B)), "tools/call", run.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // A refill arrives within the advertised delay.
    tokio::time::sleep(Duration::from_millis(1050)).await;
    let r = call(&c, Some(&alice), "tools/call", run).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn the_audit_file_has_one_line_per_call_and_refusal() {
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested/logs/audit.jsonl");
    let mut config = audited(&fake, &path);
    // Reads (agent_status, tools/list, an unknown tool) spend a budget small enough that the
    // fourth read of alice is refused; agent_run spends the default task budget.
    config.rate_limit.reads.per_minute = 1;
    config.rate_limit.reads.burst = 3;
    let server = HttpServer::start(config).await;
    let c = server.client();
    let alice = bearer(TOKEN_A);
    let image = image_base64();
    let request = "Describe the picture";

    // 1: ok agent_run (audited with its argument summary).
    let run = call(
        &c,
        Some(&alice),
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": request, "temperature": 0.25,
               "images": [{"mime_type": "image/png", "data_base64": image}]}}),
    )
    .await;
    assert_eq!(run.body["result"]["isError"], false, "{}", run.text);
    let text = tool_text(&run.body["result"]);
    let (task_id, session_id) = (field(&text, "task_id"), field(&text, "session_id"));
    // 2: ok agent_status.
    let status = call(&c, Some(&alice), "tools/call", status_args(&task_id)).await;
    assert_eq!(status.status, 200);
    // 3: tools/list is not audited when it succeeds.
    let list = call(&c, Some(&alice), "tools/list", json!({})).await;
    assert_eq!(list.status, 200);
    // 4: unauthorized.
    let denied = call(&c, Some(&bearer("nope")), "tools/list", json!({})).await;
    assert_eq!(denied.status, 401);
    // 5: an invalid argument comes back as a tool error.
    let invalid = call(
        &c,
        Some(&alice),
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "x", "temperature": 3.0}}),
    )
    .await;
    assert_eq!(invalid.body["result"]["isError"], true, "{}", invalid.text);
    // 6: a JSON-RPC error.
    let unknown = call(
        &c,
        Some(&alice),
        "tools/call",
        json!({"name": "agent_walk", "arguments": {}}),
    )
    .await;
    let unknown_code = unknown.body["error"]["code"]
        .as_i64()
        .expect("a JSON-RPC error");
    // 7: the fourth read of alice exceeds the read burst of 3.
    let limited = call(&c, Some(&alice), "tools/list", json!({})).await;
    assert_eq!(limited.status, 429, "{}", limited.text);

    let lines = audit_lines(&path, 6).await;
    let summary: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["method"].as_str().unwrap_or("").to_owned(),
                l["tool"].as_str().unwrap_or("-").to_owned(),
                l["outcome"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let expect = |m: &str, t: &str, o: &str| (m.to_owned(), t.to_owned(), o.to_owned());
    assert_eq!(
        summary,
        vec![
            expect("tools/call", "agent_run", "ok"),
            expect("tools/call", "agent_status", "ok"),
            // Refused from its headers: the body, and with it the method, was never read.
            expect("(body not read)", "-", "unauthorized"),
            expect("tools/call", "agent_run", "tool_error"),
            expect("tools/call", "agent_walk", "protocol_error"),
            expect("tools/list", "-", "rate_limited"),
        ]
    );
    let keys = [
        "time",
        "id",
        "era",
        "version",
        "transport",
        "peer",
        "identity",
        "client",
        "method",
        "tool",
        "task_id",
        "session_id",
        "outcome",
        "error_code",
        "error_message",
        "duration_us",
        "args",
    ];
    for line in &lines {
        let object = line.as_object().expect("object");
        let mut names: Vec<&str> = object.keys().map(String::as_str).collect();
        names.sort_unstable();
        let mut want = keys.to_vec();
        want.sort_unstable();
        assert_eq!(names, want, "{line}");
        let time = line["time"].as_str().expect("time");
        // The arrival time, not a placeholder: within minutes of now.
        let at = humantime::parse_rfc3339(time).expect("RFC 3339 time");
        let off = std::time::SystemTime::now()
            .duration_since(at)
            .unwrap_or_else(|e| e.duration());
        assert!(off < std::time::Duration::from_secs(600), "{time}");
        assert_eq!(line["era"], "modern");
        assert_eq!(line["version"], MODERN);
        assert_eq!(line["transport"], "http");
        assert!(
            line["peer"]
                .as_str()
                .is_some_and(|p| p.starts_with("127.0.0.1:")),
            "{line}"
        );
        assert!(line["duration_us"].is_u64(), "{line}");
        if line["outcome"] == "unauthorized" {
            assert!(line["id"].is_null(), "{line}");
        } else {
            assert!(line["id"].is_i64(), "{line}");
        }
    }
    let run_line = &lines[0];
    assert_eq!(run_line["identity"], "alice");
    assert_eq!(run_line["task_id"], task_id.as_str());
    assert_eq!(run_line["session_id"], session_id.as_str());
    assert_eq!(run_line["error_code"], Value::Null);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&image)
        .expect("b64")
        .len();
    assert_eq!(
        run_line["args"],
        json!({
            "request_bytes": request.len(),
            "request_sha256": sha256_hex(request),
            "temperature": 0.25,
            "image_count": 1,
            "image_bytes": decoded,
        })
    );
    assert_eq!(lines[1]["task_id"], task_id.as_str());
    assert_eq!(lines[1]["session_id"], session_id.as_str());
    assert_eq!(lines[1]["args"], Value::Null);
    assert_eq!(lines[2]["identity"], Value::Null);
    assert_eq!(lines[2]["error_code"], -32001);
    assert_eq!(
        lines[2]["error_message"],
        "Unauthorized: the bearer token is not accepted. Check that you send the whole token, or ask the server's operator for a new one."
    );
    assert_eq!(lines[3]["identity"], "alice");
    assert_eq!(lines[3]["error_code"], Value::Null);
    assert_eq!(
        lines[3]["error_message"],
        tool_text(&invalid.body["result"]).as_str()
    );
    assert_eq!(lines[4]["error_code"], unknown_code);
    assert_eq!(lines[4]["error_message"], unknown.body["error"]["message"]);
    assert_eq!(lines[5]["identity"], "alice");
    assert_eq!(lines[5]["error_code"], -32000);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .expect("audit file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Nothing else arrives: exactly one line per audited request.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(audit_lines(&path, 6).await.len(), 6);
}

/// The two tokens' configuration, auditing to `path`.
fn audited(fake: &FakeOllama, path: &std::path::Path) -> agent_mcp::config::Config {
    let mut config = with_tokens(test_config(&fake.url()));
    config.audit.enabled = true;
    config.audit.file = Some(path.to_owned());
    config
}

/// Collects a child's stderr lines on a thread.
fn collect_lines(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            sink.lock().expect("lines").push(line);
        }
    });
    lines
}

#[tokio::test]
async fn no_log_or_audit_line_carries_the_token_or_image_bytes() {
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let audit_path = dir.path().join("audit.jsonl");
    let config = audited(&fake, &audit_path);
    let config_path = write_config(&dir, &config);
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-mcp"))
        .arg("serve")
        .arg("--config")
        .arg(&config_path)
        .arg("--bind")
        .arg("127.0.0.1:0")
        .current_dir(dir.path())
        .env("RUST_LOG", "debug")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-mcp serve");
    let stderr = collect_lines(child.stderr.take().expect("stderr"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let url = loop {
        let found = stderr.lock().expect("lines").iter().find_map(|l| {
            l.split("serving MCP at ")
                .nth(1)
                .map(|rest| rest.split_whitespace().next().unwrap_or("").to_owned())
        });
        if let Some(url) = found {
            break url;
        }
        assert!(
            Instant::now() < deadline,
            "server did not start: {:?}",
            stderr.lock()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let c = HttpClient::new(&url);
    let image = image_base64();
    let alice = bearer(TOKEN_A);
    let run = call(
        &c,
        Some(&alice),
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "What is in this image?",
               "images": [{"mime_type": "image/png", "data_base64": image}]}}),
    )
    .await;
    assert_eq!(run.status, 200, "{}", run.text);
    let task_id = field(&tool_text(&run.body["result"]), "task_id");
    // The image where the schema wants an array: serde-style messages would quote it.
    let misplaced = call(
        &c,
        Some(&alice),
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "x", "images": image}}),
    )
    .await;
    assert_eq!(
        misplaced.body["result"]["isError"], true,
        "{}",
        misplaced.text
    );
    // A wrong token and a token in the wrong scheme: both refused (and neither logged).
    for authorization in [format!("Bearer {TOKEN_A}x"), format!("Basic {TOKEN_B}")] {
        let refused = call(&c, Some(&authorization), "tools/list", json!({})).await;
        assert_eq!(refused.status, 401, "{authorization}");
    }
    // Let the task run to its end (it fails: the fake model has no vision), so its logs exist.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = call(&c, Some(&alice), "tools/call", status_args(&task_id)).await;
        let status = field(&tool_text(&r.body["result"]), "status");
        if matches!(status.as_str(), "completed" | "failed" | "cancelled") {
            break;
        }
        assert!(Instant::now() < deadline, "task did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let audit = audit_lines(&audit_path, 5).await;
    let _ = child.kill();
    let _ = child.wait();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let logs = stderr.lock().expect("lines").clone();
    assert!(
        logs.iter().any(|l| l.contains("DEBUG")),
        "RUST_LOG=debug produced no debug line: {logs:?}"
    );
    let audit_text = std::fs::read_to_string(&audit_path).expect("audit file");
    assert_eq!(audit_text.lines().count(), audit.len());
    let needles: Vec<(&str, String)> = vec![
        ("token A", TOKEN_A.to_owned()),
        ("token B", TOKEN_B.to_owned()),
        ("token A's tail", TOKEN_A[6..].to_owned()),
        ("image base64", image.clone()),
        ("image base64 (middle)", image[400..440].to_owned()),
        ("image base64 (end)", image[image.len() - 40..].to_owned()),
    ];
    for line in logs.iter().map(String::as_str).chain(audit_text.lines()) {
        for (what, needle) in &needles {
            assert!(
                !line.contains(needle.as_str()),
                "{what} leaked into: {line}"
            );
        }
    }
}
