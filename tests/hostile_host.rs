//! A host and an operator's configuration that do not play along, against the real binary
//! (issue 27, points 3, 4, 6, 7 and 9): an audit log under a token-less flood and huge ids, a
//! stderr nobody reads or that is closed, a password in the Ollama URL, and configurations
//! that are unsafe to start.

#![cfg(target_os = "linux")]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_mcp::config::Config;
use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{
    HttpClient, ServeProcess, Spawn, Stderr, bearer, field, modern_meta, spawn_stdio, test_config,
    wait_terminal, write_config,
};
use tokio::io::{AsyncWriteExt, BufReader};

const TOKEN: &str = "host-test-token";

fn with_token(mut config: Config) -> Config {
    config.auth.tokens.push(bearer("ci", TOKEN));
    config
}

fn audit_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Waits until the audit file stops growing (its writer batches every few ms).
async fn settled(path: &Path) -> u64 {
    let mut last = audit_len(path);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = audit_len(path);
        if now == last {
            return now;
        }
        last = now;
    }
}

/// A modern `tools/call` with a string id of `id_bytes` bytes, sent raw; the status line.
fn huge_id_call(port: u16, id_bytes: usize, token: Option<&str>) -> String {
    let body = json!({
        "jsonrpc": "2.0",
        "id": "i".repeat(id_bytes),
        "method": "tools/call",
        "params": {"name": "nope", "arguments": {}, "_meta": modern_meta(json!({}))},
    })
    .to_string();
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: nope\r\n{auth}\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("head");
    // A server that refuses from the headers answers now; the body is then not sent at all.
    let mut answer = Vec::new();
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    let mut buf = [0u8; 4096];
    if let Ok(n) = stream.read(&mut buf) {
        answer.extend_from_slice(&buf[..n]);
    }
    if answer.is_empty() {
        stream.write_all(body.as_bytes()).expect("body");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let _ = stream.read_to_end(&mut answer);
    }
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Point 3: a token-less flood is recorded, but one peer's refusals are capped per minute and
/// counted; a request with a 25 MiB id leaves a line of normal size (with or without a
/// token); the audit file rotates by size by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_grows_boundedly_under_a_tokenless_flood_and_huge_ids() {
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let mut config = with_token(test_config(&fake.url()));
    config.audit.enabled = true;
    config.audit.file = Some(audit.clone());
    let defaults = Config::default().audit;
    assert!(
        defaults.max_bytes.is_some(),
        "audit.file rotates by size by default"
    );
    let server = ServeProcess::spawn(&config).await;
    let client = server.client();
    let started = Instant::now();
    for _ in 0..5000 {
        let r = client.modern("tools/list", json!({})).await;
        assert_eq!(r.status, 401, "{}", r.text);
    }
    let took = started.elapsed();
    let flood = settled(&audit).await;
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let refusals = lines
        .iter()
        .filter(|l| l["outcome"] == "unauthorized")
        .count();
    eprintln!(
        "5,000 token-less calls in {took:?}: the audit file grew {flood} bytes, {refusals} \
         refusal lines"
    );
    // The throttle allows a burst, then PER_MINUTE lines a minute: on a loaded machine the
    // flood can take a minute or more, and what it refills in that time is allowed too (the
    // bound is the throttle's, not a guess at the machine's speed).
    let refilled = (took.as_secs_f64() * f64::from(agent_mcp::layers::audit::PER_MINUTE) / 60.0)
        .ceil() as usize;
    let most = agent_mcp::layers::audit::BURST as usize + 2 + refilled;
    assert!(
        (1..=most).contains(&refusals),
        "{refusals} refusal lines in {took:?} (at most {most})"
    );
    assert!(
        flood < 32 * 1024 + refilled as u64 * 1024,
        "{flood} bytes after 5,000 refusals in {took:?}"
    );
    assert_eq!(lines[0]["method"], "(body not read)", "{}", lines[0]);

    let port = server.port();
    // Without a token the body is never read; with one it is parsed (slowly in a debug
    // build), so 4 of those show the per-line cap as well as 16 would.
    for (token, calls) in [(None, 16), (Some(TOKEN), 4)] {
        let before = settled(&audit).await;
        let statuses = tokio::task::spawn_blocking(move || {
            (0..calls)
                .map(|_| huge_id_call(port, 25 * 1024 * 1024, token))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        let grown = settled(&audit).await - before;
        eprintln!(
            "{calls} requests with a 25 MiB id (token {token:?}): the audit file grew {grown} bytes"
        );
        // With the token the call reaches the service: an unknown tool, -32602 in a 200.
        let expected = if token.is_some() { " 200 " } else { " 401 " };
        assert!(
            statuses.iter().all(|s| s.contains(expected)),
            "{statuses:?}"
        );
        assert!(grown < calls * 2048, "{grown} bytes for {calls} huge ids");
    }
    let text = std::fs::read_to_string(&audit).unwrap();
    let last = text
        .lines()
        .rev()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["outcome"] == "protocol_error")
        .expect("the requests with the token are recorded");
    assert!(
        last["id"]
            .as_str()
            .is_some_and(|id| id.ends_with("[26214400 bytes]")),
        "{last}"
    );
}

/// An `agent-mcp stdio` child whose stderr is a pipe nobody reads, and its pipes.
struct StdioChild {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
    _dir: tempfile::TempDir,
}

impl StdioChild {
    /// With audit logging on (to stderr, by default), against `fake`.
    async fn audited(fake: &FakeOllama) -> StdioChild {
        let mut config = test_config(&fake.url());
        config.audit.enabled = true;
        let dir = tempfile::tempdir().unwrap();
        let path = write_config(&dir, &config);
        let (child, stdin, stdout) = spawn_stdio(&path, dir.path(), "info", Stdio::piped());
        StdioChild {
            child,
            stdin,
            stdout,
            next_id: 0,
            _dir: dir,
        }
    }

    /// A modern `tools/call`, answered within 20 s: the tool's text.
    async fn ask(&mut self, name: &str, arguments: Value) -> String {
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments, "_meta": modern_meta(json!({}))}});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(20), self.stdout.next_line())
            .await
            .expect("an answer within 20 s")
            .unwrap()
            .expect("stdout open");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// `agent_status` of an unknown task, `n` times (each an audited call).
    async fn flood(&mut self, n: usize) {
        for _ in 0..n {
            let unknown = json!({"task_id": "00000000-0000-4000-8000-000000000000"});
            self.ask("agent_status", unknown).await;
        }
    }

    /// Runs `request` as a task, which must complete within 20 s.
    async fn run_to_completion(&mut self, request: &str) {
        let answer = self.ask("agent_run", json!({"request": request})).await;
        let task = field(&answer, "task_id");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.ask("agent_status", json!({"task_id": task})).await;
            if field(&text, "status") == "completed" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the task did not complete: {text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Point 4 over stdio: with stderr a pipe nobody reads (audit lines go there by default), a
/// task submitted after 2,000 audited calls still runs to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_an_unread_stderr_never_stalls_the_agent() {
    let fake = FakeOllama::start().await;
    let mut stdio = StdioChild::audited(&fake).await;
    // One at a time: stdout is read as the answers come (stdio waits for a reader of its
    // answers, by design; only stderr is left unread here).
    stdio.flood(2000).await;
    stdio.run_to_completion("after the flood").await;
    drop(stdio.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(20), stdio.child.wait()).await;
}

/// `agent-mcp serve` with its stderr connected as `stderr` says.
async fn serve_with_stderr(config: &Config, stderr: Stderr) -> ServeProcess {
    let how = Spawn {
        stderr,
        ..Spawn::default()
    };
    ServeProcess::spawn_with(config, how).await
}

/// Runs `request` as a task, which must complete within 30 s.
async fn completes_within_30_s(client: &HttpClient, request: &str) {
    let task = client.agent_run(request).await;
    let done = tokio::time::timeout(
        Duration::from_secs(30),
        wait_terminal(|| client.agent_status(&task)),
    )
    .await
    .expect("the task ran to the end within 30 s");
    assert_eq!(field(&done, "status"), "completed", "{done}");
}

/// Calls a tool that does not exist: -32602 in a 200 (a tool-level error).
async fn call_an_unknown_tool(client: &HttpClient) {
    let r = client.tool_call("nope", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["error"]["code"], -32602, "{}", r.text);
}

/// Point 4 over HTTP: the same with `agent-mcp serve`; and past the audit writer's queue,
/// the lines it had to drop are counted in `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_an_unread_stderr_never_stalls_the_agent_and_drops_are_counted() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.audit.enabled = true;
    // 2,000 reads at once would meet the read budget; that is not what this is about.
    config.rate_limit.enabled = false;
    let server = serve_with_stderr(&config, Stderr::Unread).await;
    let client = server.client();
    for _ in 0..2000 {
        let result = client
            .call_tool(
                "agent_status",
                json!({"task_id": "00000000-0000-4000-8000-000000000000"}),
            )
            .await;
        assert_eq!(result["isError"], json!(false));
    }
    completes_within_30_s(&client, "after the flood").await;
    // More audited calls than the audit writer's queue holds (16,384), from 8 clients at
    // once: the ones it cannot take are dropped and counted, and every call is answered.
    let flood: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                for _ in 0..2200 {
                    call_an_unknown_tool(&client).await;
                }
            })
        })
        .collect();
    for client in flood {
        client.await.unwrap();
    }
    let metrics = server.get_text("/metrics").await;
    let dropped: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("agent_mcp_log_lines_dropped_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(dropped > 0.0, "no dropped lines counted:\n{metrics}");
}

/// Point 4: with stderr closed the server keeps serving (logs and audit lines go nowhere,
/// nothing panics) and exits 0 on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_stderr_closed_the_server_keeps_serving_and_exits_0_on_sigterm() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.audit.enabled = true;
    let server = serve_with_stderr(&config, Stderr::Closed).await;
    let client = server.client();
    for _ in 0..200 {
        call_an_unknown_tool(&client).await;
    }
    completes_within_30_s(&client, "with stderr closed").await;
    let status = server.terminate().await;
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// Point 4 over stdio: the same with `agent-mcp stdio` (audit lines go to that closed
/// stderr by default): it answers, runs a task, and exits 0 on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_with_stderr_closed_it_keeps_serving_and_exits_0_on_sigterm() {
    let fake = FakeOllama::start().await;
    let mut stdio = StdioChild::audited(&fake).await;
    drop(stdio.child.stderr.take());
    stdio.flood(200).await;
    stdio.run_to_completion("stderr is closed").await;
    let mut child = stdio.child;
    let pid = child.id().expect("running").to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(40), child.wait())
        .await
        .expect("exit within 40 s of SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

const PASSWORD: &str = "PW-s3cret-27";

/// Point 7: a password in the Ollama URL appears nowhere: not in the log, `check-config`,
/// `/readyz`, a task's result or the audit log, whether Ollama answers or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ollama_password_appears_nowhere() {
    let fake = FakeOllama::start().await;
    let port = fake.url().rsplit(':').next().unwrap().to_owned();
    for (label, url) in [
        (
            "reachable",
            format!("http://user:{PASSWORD}@127.0.0.1:{port}"),
        ),
        ("unreachable", format!("http://user:{PASSWORD}@127.0.0.1:1")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.jsonl");
        let mut config = test_config(&url);
        config.audit.enabled = true;
        config.audit.file = Some(audit.clone());
        let mut server = ServeProcess::spawn(&config).await;
        let ready = server.get_text("/readyz").await;
        let client = server.client();
        let task = client.agent_run("say hello").await;
        let done = wait_terminal(|| client.agent_status(&task)).await;
        let expected = if label == "reachable" {
            "completed"
        } else {
            "failed"
        };
        assert_eq!(field(&done, "status"), expected, "{done}");
        if label == "unreachable" {
            assert!(
                done.contains("cannot reach Ollama at http://user:<redacted>@"),
                "{done}"
            );
            assert!(ready.contains("<redacted>"), "{ready}");
        }
        settled(&audit).await;
        let log = server
            .stderr_until("never printed", Duration::from_millis(500))
            .await;
        let config_path = write_config(&dir, &config);
        let checked = std::process::Command::new(env!("CARGO_BIN_EXE_agent-mcp"))
            .args(["check-config", "--config"])
            .arg(&config_path)
            .env("OLLAMA_HOST", &url)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .output()
            .unwrap();
        let places = [
            (
                "start-up and log",
                server.startup.join("\n") + &log.join("\n"),
            ),
            (
                "check-config",
                String::from_utf8_lossy(&checked.stdout).into_owned(),
            ),
            (
                "check-config stderr",
                String::from_utf8_lossy(&checked.stderr).into_owned(),
            ),
            ("/readyz", ready),
            ("task result", done),
            ("audit", std::fs::read_to_string(&audit).unwrap_or_default()),
        ];
        for (place, text) in places {
            assert!(
                !text.contains(PASSWORD),
                "{label}: the password is in the {place}:\n{text}"
            );
        }
    }
}

fn check_config(yaml: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent-mcp"))
        .args(["check-config", "--config"])
        .arg(&path)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Points 6 and 9: a non-loopback bind without tokens does not start (the error names the key
/// that would allow it) and `check-config` warns and exits non-zero; a token named `stdio`
/// and two tokens with one name are refused at load, naming the key.
#[tokio::test]
async fn unsafe_binds_and_identity_clashes_are_refused_naming_the_key() {
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(&fake.url());
    let path = write_config(&dir, &config);
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-mcp"))
            .args(["serve", "--bind", "0.0.0.0:0", "--config"])
            .arg(&path)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("serve exits at once")
    .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("http.allow_unauthenticated_remote") && said.contains("auth.tokens"),
        "{said}"
    );
    let (code, said) = check_config("http:\n  bind: 0.0.0.0:8080\n");
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("warning") && said.contains("not a loopback address"),
        "{said}"
    );
    // Said so explicitly, or with tokens, it is fine.
    let (code, said) =
        check_config("http:\n  bind: 0.0.0.0:8080\n  allow_unauthenticated_remote: true\n");
    assert_eq!(code, Some(0), "{said}");
    let hash = agent_mcp::layers::auth::sha256_hex(TOKEN);
    let (code, said) = check_config(&format!(
        "http:\n  bind: '[::]:8080'\nauth:\n  tokens: [{{name: ci, sha256: {hash}}}]\n"
    ));
    assert_eq!(code, Some(0), "{said}");
    for (tokens, words) in [
        (
            format!("[{{name: stdio, sha256: {hash}}}]"),
            "named \"stdio\"",
        ),
        (
            format!("[{{name: STDIO, sha256: {hash}}}]"),
            "named \"STDIO\"",
        ),
        (
            format!(
                "[{{name: ci, sha256: {hash}}}, {{name: ci, sha256: {}}}]",
                "0".repeat(64)
            ),
            "both named \"ci\"",
        ),
        (
            format!("[{{name: a, sha256: {hash}}}, {{name: b, sha256: {hash}}}]"),
            "same sha256",
        ),
    ] {
        let (code, said) = check_config(&format!("auth:\n  tokens: {tokens}\n"));
        assert_eq!(code, Some(2), "{said}");
        assert!(
            said.contains("auth.tokens") && said.contains(words),
            "{said}"
        );
    }
}
