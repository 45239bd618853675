//! Load and abuse over loopback HTTP (and stdio where it applies): every hostile input gets a
//! clear answer, the server never panics, slow clients are cut off without starving others,
//! and memory stays bounded under 10 000 requests at concurrency 256.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use agent_mcp::transport::server::{ServerOptions, serve_with_options};
use futures_util::StreamExt;
use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{HttpClient, ServeProcess, listening_url, test_config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The server in-process with the connection timeouts of `config.http`.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(config: Config) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = AgentMcp::start(&config).await.expect("start");
        let timeouts = ServerOptions::from_config(&config.http);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = serve_with_options(listener, server.http_service(), None, timeouts, async {
                let _ = stopped.await;
            })
            .await;
            server.shutdown().await;
        });
        Server {
            addr,
            stop: Some(stop),
            task,
        }
    }

    fn client(&self) -> HttpClient {
        HttpClient::new(&format!("http://{}/mcp", self.addr))
    }

    /// The server still answers a plain request.
    async fn assert_alive(&self) {
        let r = self
            .client()
            .legacy("tools/list", json!({}), Some("2025-06-18"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.body["result"]["tools"].is_array(), "{}", r.text);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

fn abuse_config(ollama: &str) -> Config {
    let mut config = test_config(ollama);
    config.rate_limit.enabled = false;
    config.http.header_timeout = Duration::from_millis(800);
    config.http.body_timeout = Duration::from_millis(800);
    config.http.max_body_bytes = Some(bytesize::ByteSize::kib(256));
    config
}

/// Sends raw bytes on a new connection and reads until the server closes it (bounded).
async fn raw_exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn post(body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

fn error_of(text: &str) -> Value {
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str::<Value>(body).unwrap_or(Value::Null)["error"].clone()
}

#[tokio::test]
async fn hostile_bodies_each_get_a_clear_error() {
    let fake = FakeOllama::start().await;
    let server = Server::start(abuse_config(&fake.url())).await;
    let client = server.client();

    // Oversized: refused from Content-Length alone, and a chunked body that grows past it.
    let big = vec![b' '; 300 * 1024];
    let r = client.post_raw(&[], big.clone()).await;
    assert_eq!(r.status, 413, "{}", r.text);
    assert!(r.text.contains("Payload Too Large"), "{}", r.text);
    let chunks = futures_util::stream::iter(
        (0..40).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 16 * 1024]))),
    );
    let r = client
        .post_raw(&[], reqwest::Body::wrap_stream(chunks))
        .await;
    assert_eq!(r.status, 413, "{}", r.text);

    // Deeply nested JSON: serde_json's recursion limit (128) ends parsing; a parse error.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let r = client.post_raw(&[], deep).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.body["error"]["code"], -32700, "{}", r.text);
    assert!(r.text.contains("recursion limit"), "{}", r.text);
    // Nesting just under the limit inside the arguments reaches validation and is refused there.
    let nested = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"agent_run","arguments":{{"request":"x","deep":{nested}}}}}}}"#
    );
    let r = client
        .post_raw(&[("mcp-protocol-version", "2025-06-18")], body)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["result"]["isError"], true, "{}", r.text);
    let text = r.body["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.starts_with("Invalid arguments for tool \"agent_run\":\ndeep: unknown property"),
        "{text}"
    );

    // A huge string (200 KiB of request text) is a normal request: accepted and queued.
    let huge = "y".repeat(200 * 1024);
    let r = client
        .legacy(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": huge}}),
            Some("2025-06-18"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", &r.text[..r.text.len().min(300)]);
    assert_eq!(r.body["result"]["isError"], false);
    // A huge *method name* is just an unknown method.
    let r = client.legacy(&"m".repeat(100_000), json!({}), None).await;
    assert_eq!(r.body["error"]["code"], -32601);

    // Invalid UTF-8 inside a JSON string.
    let r = client
        .post_raw(
            &[],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}".to_vec(),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.body["error"]["code"], -32700);

    // A JSON-RPC batch.
    let r = client
        .post_raw(
            &[],
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.body["error"]["code"], -32600);
    assert!(r.text.contains("batches are not supported"), "{}", r.text);

    // A response object sent as a request: acknowledged with 202 and no body, as the
    // Streamable HTTP transport says for responses and notifications; nothing is dispatched.
    let r = client
        .post_raw(&[], r#"{"jsonrpc":"2.0","id":5,"result":{"tools":[]}}"#)
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    assert_eq!(r.text, "");
    let r = client
        .post_raw(
            &[],
            r#"{"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"x"}}"#,
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);

    // Not JSON-RPC at all, scalars, wrong types.
    for (body, code) in [
        (&b"null"[..], -32600),
        (b"42", -32600),
        (b"\"str\"", -32600),
        (br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":1,"method":7}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":1e400,"method":"x"}"#, -32700),
        (b"", -32700),
    ] {
        let r = client.post_raw(&[], body.to_vec()).await;
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(body));
        assert_eq!(r.body["error"]["code"], code, "{}", r.text);
    }

    // Raw socket: a request line hyper cannot parse is closed with 400, no panic.
    let text = raw_exchange(server.addr, b"GARBAGE\r\n\r\n").await;
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 400"),
        "{text}"
    );
    let text = raw_exchange(
        server.addr,
        &post(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\""),
    )
    .await;
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert_eq!(error_of(&text)["code"], -32700);

    server.assert_alive().await;
}

#[tokio::test]
async fn slow_header_and_slow_body_clients_are_cut_off_without_starving_others() {
    let fake = FakeOllama::start().await;
    let server = Server::start(abuse_config(&fake.url())).await;
    let addr = server.addr;

    // 40 clients that send half a header block, and 40 that send a body one byte at a time.
    let mut slow = Vec::new();
    for _ in 0..40 {
        slow.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let started = Instant::now();
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
                .await
                .expect("write");
            let mut out = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
            (
                "header",
                started.elapsed(),
                String::from_utf8_lossy(&out).into_owned(),
            )
        }));
    }
    for _ in 0..40 {
        slow.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let started = Instant::now();
            s.write_all(
                b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                  Content-Length: 1000\r\n\r\n{",
            )
            .await
            .expect("write");
            let mut out = vec![0u8; 4096];
            let read = async {
                loop {
                    tokio::select! {
                        n = s.read(&mut out) => return n.unwrap_or(0),
                        () = tokio::time::sleep(Duration::from_millis(100)) => {
                            if s.write_all(b" ").await.is_err() { return 0; }
                        }
                    }
                }
            };
            let n = tokio::time::timeout(Duration::from_secs(10), read)
                .await
                .unwrap_or(0);
            (
                "body",
                started.elapsed(),
                String::from_utf8_lossy(&out[..n]).into_owned(),
            )
        }));
    }
    // Meanwhile ordinary clients are served promptly.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let client = server.client();
    for _ in 0..20 {
        let started = Instant::now();
        let r = client
            .legacy("tools/list", json!({}), Some("2025-06-18"))
            .await;
        assert_eq!(r.status, 200);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }
    for handle in slow {
        let (kind, took, text) = handle.await.expect("slow client task");
        assert!(
            took < Duration::from_secs(5),
            "{kind} client held for {took:?}"
        );
        if kind == "body" {
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
            assert!(text.contains("http.body_timeout"), "{text}");
        } else {
            // hyper answers a header timeout by closing the connection (possibly after a 408).
            assert!(
                text.is_empty() || text.starts_with("HTTP/1.1 408"),
                "{text}"
            );
        }
    }
    server.assert_alive().await;
}

#[tokio::test]
async fn stdio_over_long_and_invalid_utf8_lines_are_answered_and_skipped() {
    let fake = FakeOllama::start().await;
    let server = AgentMcp::start(&test_config(&fake.url()))
        .await
        .expect("start");
    let (mut client_end, server_end) = tokio::io::duplex(1 << 20);
    let (read_half, write_half) = tokio::io::split(server_end);
    let serving = tokio::spawn(agent_mcp::transport::stdio::serve_with(
        server.stack(),
        read_half,
        write_half,
        agent_mcp::transport::stdio::StdioOptions {
            max_line_bytes: 1024,
            ..Default::default()
        },
    ));
    let mut input = Vec::new();
    input.extend_from_slice(&vec![b'x'; 5000]);
    input.push(b'\n');
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}\n");
    input.extend_from_slice(b"[1,2]\n");
    input.extend_from_slice(format!("{}\n", "[".repeat(1000)).as_bytes());
    input.extend_from_slice(
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n",
    );
    client_end.write_all(&input).await.expect("write");
    client_end.shutdown().await.expect("close input");
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(20), client_end.read_to_string(&mut out))
        .await
        .expect("output within 20 s")
        .expect("read");
    tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("serve returns at end of input")
        .expect("join")
        .expect("serve ok");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("every output line is JSON"))
        .collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(
        lines[0]["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("longer than 1024 bytes")
    );
    assert_eq!(lines[1]["error"]["code"], -32700);
    assert_eq!(lines[2]["error"]["code"], -32600);
    assert_eq!(lines[3]["error"]["code"], -32700);
    assert_eq!(lines[4]["id"], 2);
    assert!(lines[4]["result"]["protocolVersion"].is_string(), "{out}");
    server.shutdown().await;
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// 10 000 requests at concurrency 256 against the real binary: every answer is a 200 or an
/// intended 429, and the server's RSS stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_requests_at_concurrency_256() {
    const TOTAL: usize = 10_000;
    const CONCURRENCY: usize = 256;
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    // The limiter is on: reads (tools/list, agent_status: 98 % of the load) get a burst of
    // 2 000, then 600 a minute; everything past that is a 429. The 200 agent_run calls fit the
    // default task budget's burst of 60 only in part, so some of those are 429s too.
    config.rate_limit.reads.burst = 2000;
    config.rate_limit.reads.per_minute = 600;
    let server = ServeProcess::spawn(&config).await;
    let pid = server.child.id().expect("running");
    let before = rss_kib(pid);
    let client = server.client();
    let started = Instant::now();
    let statuses: Vec<(u16, Option<i64>)> = futures_util::stream::iter(0..TOTAL)
        .map(|i| {
            let client = client.clone();
            async move {
                let r = match i % 50 {
                    0 => {
                        client
                            .tool_call("agent_run", json!({"request": format!("task {i}")}))
                            .await
                    }
                    1..=24 => client.modern("tools/list", json!({})).await,
                    _ => {
                        client
                            .tool_call("agent_status", json!({"task_id": uuid_like(i)}))
                            .await
                    }
                };
                (r.status.as_u16(), r.body["error"]["code"].as_i64())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let after = rss_kib(pid);
    let ok = statuses.iter().filter(|(s, _)| *s == 200).count();
    let limited = statuses.iter().filter(|(s, _)| *s == 429).count();
    let other: Vec<_> = statuses
        .iter()
        .filter(|(s, _)| *s != 200 && *s != 429)
        .take(5)
        .collect();
    println!(
        "load: {TOTAL} requests at concurrency {CONCURRENCY} in {elapsed:?} ({:.0} req/s): \
         {ok} x 200, {limited} x 429, {} other; server RSS {before} KiB before, {after} KiB after",
        TOTAL as f64 / elapsed.as_secs_f64(),
        TOTAL - ok - limited
    );
    assert!(other.is_empty(), "unexpected answers: {other:?}");
    assert_eq!(ok + limited, TOTAL);
    assert!(ok >= 2000, "the burst was served: {ok}");
    assert!(limited > 0, "the limiter refused past the burst");
    assert!(after < 256 * 1024, "RSS {after} KiB after the load");
    server.terminate().await;
}

fn uuid_like(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

/// The real `agent-mcp serve` with a secret in its own environment: a command the model runs
/// sees only the minimal environment (PATH, HOME, TMPDIR, LANG and agent.commands.env).
#[tokio::test]
async fn commands_do_not_see_the_servers_environment() {
    use support::fake_ollama::Reply;
    use support::harness::{field, tool_text, wait_terminal, write_config};

    let fake = FakeOllama::start().await;
    let ws = tempfile::tempdir().expect("workspace");
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.agent.commands.allow = vec!["env".into()];
    config.rate_limit.enabled = false;
    fake.push_reply(Reply::tool_call(
        "run_command",
        json!({"argv": ["env"]}),
        5,
        1,
    ));
    fake.push_reply(Reply::text("Printed the environment.", 5, 1));

    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, &config);
    let args = ["serve", "--bind", "127.0.0.1:0"];
    let mut child = support::harness::agent_mcp_command(&[], &args, &path, dir.path(), "info")
        .env("AGENT_MCP_TEST_SECRET", "hunter2-do-not-leak")
        .env("AWS_SECRET_ACCESS_KEY", "hunter3-do-not-leak")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn agent-mcp serve");
    let url = listening_url(&mut child).await;
    let client = HttpClient::new(&url);
    let r = client
        .tool_call("agent_run", json!({"request": "Show the environment."}))
        .await;
    let task_id = field(&tool_text(&r.body["result"]), "task_id");
    let done = wait_terminal(|| {
        let client = client.clone();
        let task_id = task_id.clone();
        async move {
            let r = client
                .tool_call("agent_status", json!({"task_id": task_id}))
                .await;
            tool_text(&r.body["result"])
        }
    })
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 2);
    let tool_result = sent[1]["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(tool_result.contains("PATH="), "{tool_result}");
    assert!(!tool_result.contains("do-not-leak"), "{tool_result}");
    let mut names: Vec<&str> = tool_result
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort_unstable();
    // Besides these, the toolchains' own variables where this machine has them (RUSTUP_HOME,
    // PYENV_ROOT…): a command's HOME is its task's folder, so they say where the toolchains are.
    let mut expected = vec!["HOME", "LANG", "PATH", "PYTHONDONTWRITEBYTECODE", "TMPDIR"];
    expected.extend(
        agent_mcp::agent::tools::sandbox::toolchain_homes()
            .iter()
            .map(|(name, _)| *name),
    );
    if agent_mcp::agent::tools::sandbox::server_cargo_home().is_some() {
        expected.push("CARGO_HOME");
    }
    expected.sort_unstable();
    assert_eq!(names, expected, "{tool_result}");
    let _ = child.kill().await;
}

/// Over HTTP with bearer tokens: task ids are random v4 UUIDs, and another caller asking
/// for one gets exactly the answer an unknown id gets (ids cannot be probed).
#[tokio::test]
async fn task_ids_are_random_and_bound_to_their_owner_over_http() {
    use sha2::Digest;
    use support::harness::{field, tool_text};

    let fake = FakeOllama::start().await;
    let mut config = abuse_config(&fake.url());
    for name in ["alice", "bob"] {
        config.auth.tokens.push(agent_mcp::config::TokenConfig {
            name: name.into(),
            sha256: sha2::Sha256::digest(format!("{name}-token"))
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        });
    }
    let server = Server::start(config).await;
    let url = format!("http://{}/mcp", server.addr);
    let http = reqwest::Client::new();
    let call = |who: &'static str, tool: &'static str, arguments: Value| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": tool, "arguments": arguments}});
            let resp = http
                .post(&url)
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-06-18")
                .header("authorization", format!("Bearer {who}-token"))
                .body(body.to_string())
                .send()
                .await
                .expect("send");
            assert_eq!(resp.status(), 200);
            let v: Value = resp.json().await.expect("json");
            tool_text(&v["result"])
        }
    };
    let mut ids = std::collections::HashSet::new();
    for i in 0..20 {
        let text = call(
            "alice",
            "agent_run",
            json!({"request": format!("task {i}")}),
        )
        .await;
        let id = field(&text, "task_id");
        let parsed = uuid::Uuid::parse_str(&id).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 4, "{id}");
        assert!(ids.insert(id), "ids repeat");
    }
    let unknown = uuid::Uuid::new_v4().to_string();
    let probe_unknown = call("bob", "agent_status", json!({"task_id": unknown})).await;
    for id in ids.iter().take(5) {
        let probe = call("bob", "agent_status", json!({"task_id": id})).await;
        assert_eq!(
            probe.replace(id.as_str(), "ID"),
            probe_unknown.replace(&unknown, "ID")
        );
        let own = call("alice", "agent_status", json!({"task_id": id})).await;
        assert_eq!(field(&own, "task_id"), *id);
    }
    // Without a token: 401, nothing about the task.
    let resp = http
        .post(&url)
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 401);
}
