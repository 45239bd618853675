//! Test harness: the server in-process on real loopback HTTP, the real binary over stdio, and
//! small MCP clients for both eras.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::fake_ollama::{FakeOllama, Reply as FakeReply, tool_results};

pub const MODERN: &str = "2026-07-28";

/// A configuration pointing at a fake Ollama, with its default model.
pub fn test_config(ollama_url: &str) -> Config {
    let mut config = Config::default();
    config.ollama.url = ollama_url.to_owned();
    config.ollama.model = "test-model".into();
    config.ollama.request_timeout = Duration::from_secs(20);
    // Audit lines would go to this process's stderr; tests of the audit log enable it with a
    // file of their own.
    config.audit.enabled = false;
    // SQLite is the default store; tests that do not ask for it must not leave a
    // `.agent-mcp/` folder in the crate directory.
    config.store.backend = agent_mcp::config::StoreBackend::Memory;
    config
}

/// [`test_config`] for an agent working in `workspace`, without the rate limit (the tests
/// poll agent_status quickly; limits are other tests' concern).
pub fn workspace_config(ollama_url: &str, workspace: &std::path::Path) -> Config {
    let mut config = test_config(ollama_url);
    config.agent.workspace = Some(workspace.to_path_buf());
    config.rate_limit.enabled = false;
    config
}

/// [`test_config`] with the SQLite store at `db_path`.
pub fn test_config_sqlite(ollama_url: &str, db_path: &std::path::Path) -> Config {
    let mut config = test_config(ollama_url);
    config.store = agent_mcp::config::StoreConfig::sqlite_at(db_path);
    config
}

/// A static bearer token for the caller `name`: the configuration holds its SHA-256 only.
pub fn bearer(name: &str, secret: &str) -> agent_mcp::config::TokenConfig {
    agent_mcp::config::TokenConfig {
        name: name.into(),
        sha256: agent_mcp::layers::auth::sha256_hex(secret),
    }
}

/// The same configuration as YAML, for the real binary.
pub fn write_config(dir: &tempfile::TempDir, config: &Config) -> PathBuf {
    let path = dir.path().join("agent.yaml");
    std::fs::write(&path, serde_yaml_ng::to_string(config).expect("yaml")).expect("write config");
    path
}

/// The server on 127.0.0.1:0, in this process.
pub struct HttpServer {
    pub url: String,
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    pub async fn start(config: Config) -> HttpServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = AgentMcp::start(&config).await.expect("start");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = agent_mcp::transport::server::serve(listener, server.http_service(), async {
                let _ = stopped.await;
            })
            .await;
            server.shutdown().await;
        });
        HttpServer {
            url: format!("http://{addr}/mcp"),
            addr,
            stop: Some(stop),
            task,
        }
    }

    pub fn client(&self) -> HttpClient {
        HttpClient::new(&self.url)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

/// Starts the in-process server with `config`, runs `request` to its end and stops the
/// server: the final agent_status text.
pub async fn run_task(config: Config, request: &str) -> String {
    HttpServer::start(config)
        .await
        .client()
        .run_to_end(request)
        .await
}

/// `_meta` of a modern request.
pub fn modern_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "harness", "version": "1"}
    })
}

/// A plain HTTP client that speaks either era and shows the raw status.
#[derive(Clone)]
pub struct HttpClient {
    pub url: String,
    http: reqwest::Client,
    next_id: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// Sent as `Authorization: Bearer …` with every request, when set.
    token: Option<String>,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl HttpClient {
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            http: reqwest::Client::new(),
            next_id: Default::default(),
            token: None,
        }
    }

    /// Sends `token` as a bearer token from now on.
    pub fn set_token(&mut self, token: &str) {
        self.token = Some(token.to_owned());
    }

    fn id(&self) -> i64 {
        self.next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    /// POSTs a raw body with the given headers (plus Content-Type: application/json unless given).
    pub async fn post_raw(
        &self,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Reply {
        let mut req = self.http.post(&self.url);
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("content-type", "application/json");
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.body(body).send().await.expect("send");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    /// A modern `tools/call` of `name`: the reply as it came, whatever its status.
    pub async fn tool_call(&self, name: &str, arguments: Value) -> Reply {
        self.modern("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// A modern request with correct headers and `_meta`.
    pub async fn modern(&self, method: &str, params: Value) -> Reply {
        self.modern_with_caps(method, params, json!({})).await
    }

    pub async fn modern_with_caps(&self, method: &str, mut params: Value, caps: Value) -> Reply {
        params["_meta"] = modern_meta(caps);
        let name = match method {
            "tools/call" => params["name"].as_str().map(str::to_owned),
            "tasks/get" | "tasks/cancel" | "tasks/update" => {
                params["taskId"].as_str().map(str::to_owned)
            }
            _ => None,
        };
        let body = json!({"jsonrpc": "2.0", "id": self.id(), "method": method, "params": params});
        let mut headers = vec![
            ("mcp-protocol-version", MODERN.to_owned()),
            ("mcp-method", method.to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
        ];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.post_raw(&headers, body.to_string()).await
    }

    /// A modern `tools/call` that must answer 200; its `result`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Value {
        let r = self.tool_call(name, arguments).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.body["result"].clone()
    }

    /// `agent_run` with just a request (modern era); the task_id it answers.
    pub async fn agent_run(&self, request: &str) -> String {
        let result = self
            .call_tool("agent_run", json!({"request": request}))
            .await;
        field(&tool_text(&result), "task_id")
    }

    /// `agent_run` of `request`, then `agent_status` until the task is terminal: the final
    /// agent_status text.
    pub async fn run_to_end(&self, request: &str) -> String {
        let id = self.agent_run(request).await;
        wait_terminal(|| self.agent_status(&id)).await
    }

    /// `agent_status` of `task_id` (modern era): its text, which must not be a tool error.
    pub async fn agent_status(&self, task_id: &str) -> String {
        let result = self
            .call_tool("agent_status", json!({"task_id": task_id}))
            .await;
        assert_eq!(result["isError"], json!(false), "{result}");
        tool_text(&result)
    }

    /// A legacy `initialize` asking for `version`, with no capabilities.
    pub async fn initialize(&self, version: &str) -> Reply {
        self.legacy("initialize", initialize_params(version), None)
            .await
    }

    /// A legacy request; `version` is the MCP-Protocol-Version header, if any.
    pub async fn legacy(&self, method: &str, params: Value, version: Option<&str>) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": self.id(), "method": method, "params": params});
        let mut headers = vec![("accept", "application/json, text/event-stream")];
        if let Some(v) = version {
            headers.push(("mcp-protocol-version", v));
        }
        self.post_raw(&headers, body.to_string()).await
    }
}

/// The params of a legacy `initialize` asking for `version`, with no capabilities.
pub fn initialize_params(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
}

/// The text of a `CallToolResult`'s first block.
pub fn tool_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
        .to_owned()
}

/// A `key: value` line of a status text.
pub fn field(text: &str, key: &str) -> String {
    let prefix = format!("{key}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim_start().to_owned())
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

/// Everything after `result:` (it may span lines).
pub fn result_of(text: &str) -> String {
    match text.split_once("\nresult:") {
        Some((_, rest)) => rest.strip_prefix(' ').unwrap_or(rest).to_owned(),
        None => panic!("no result in {text}"),
    }
}

pub fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// Polls `status` (which returns the agent_status text) until the task is terminal.
pub async fn wait_terminal<F, Fut>(status: F) -> String
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = String>,
{
    wait_terminal_within(Duration::from_secs(30), status).await
}

/// [`wait_terminal`] for a task given `budget` to end in (a task still running then fails
/// the test, showing its last status).
pub async fn wait_terminal_within<F, Fut>(budget: Duration, mut status: F) -> String
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = String>,
{
    let deadline = tokio::time::Instant::now() + budget;
    loop {
        let text = status().await;
        if is_terminal(&field(&text, "status")) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task did not finish within {budget:?} (a wedged worker?); last status:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A task whose model makes rounds of tool calls (one reply each), then answers "done".
pub struct Rounds<'r, R> {
    rounds: &'r [R],
    /// The model calls made before this task's.
    before: usize,
}

impl<'r, 'a: 'r, R: AsRef<[(&'a str, Value)]>> Rounds<'r, R> {
    /// Queues the replies of `rounds` on `fake`, and lets the agent make just those calls.
    pub fn queue(fake: &FakeOllama, config: &mut Config, rounds: &'r [R]) -> Self {
        config.agent.max_iterations = rounds.len() + 1;
        fake.push_replies(
            rounds
                .iter()
                .map(|r| FakeReply::tool_calls(r.as_ref(), 1, 1)),
        );
        fake.push_reply(FakeReply::text("done", 1, 1));
        Rounds {
            rounds,
            before: fake.chat_count(),
        }
    }

    /// Runs `request` through `client` to its end within `budget`. Asserts that it completed
    /// after exactly the queued model calls and that every call reached its tool, in order;
    /// returns the text of each tool result.
    pub async fn run(
        self,
        fake: &FakeOllama,
        client: &HttpClient,
        request: &str,
        budget: Duration,
    ) -> Vec<String> {
        let id = client.agent_run(request).await;
        let done = wait_terminal_within(budget, || client.agent_status(&id)).await;
        assert_eq!(field(&done, "status"), "completed", "{done}");
        let sent = fake.chat_requests();
        let rounds = self.rounds.len();
        assert_eq!(
            sent.len(),
            self.before + rounds + 1,
            "{rounds} tool rounds, then the answer"
        );
        // The last request carries the whole conversation, every tool result in order.
        let results = tool_results(&sent[self.before + rounds]);
        let calls = self.rounds.iter().flat_map(|r| r.as_ref());
        assert_eq!(results.len(), calls.clone().count());
        for ((tool, _), (name, _)) in results.iter().zip(calls) {
            assert_eq!(tool, name);
        }
        results.into_iter().map(|(_, text)| text).collect()
    }
}

/// [`Rounds`] on the in-process server started with `config`.
pub async fn run_rounds<'a, R: AsRef<[(&'a str, Value)]>>(
    fake: &FakeOllama,
    mut config: Config,
    request: &str,
    rounds: &[R],
    budget: Duration,
) -> Vec<String> {
    let script = Rounds::queue(fake, &mut config, rounds);
    let server = HttpServer::start(config).await;
    script.run(fake, &server.client(), request, budget).await
}

/// Polls `check` every 10 ms until it returns `Some`, failing after `budget` saying `what`
/// did not happen.
pub async fn eventually<T, F, Fut>(budget: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + budget;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {budget:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether process `pid` is gone (Linux: no `/proc/PID`, or a zombie: killed, only not yet
/// reaped by its parent).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// The MCP URL a line of `agent-mcp serve`'s stderr announces (`… serving MCP at URL …`).
pub fn served_url(line: &str) -> Option<&str> {
    line.split("serving MCP at ")
        .nth(1)?
        .split_whitespace()
        .next()
}

/// Reads the stderr of `agent-mcp serve` (piped) until it says where it listens, within 20 s,
/// then keeps draining it so the server never blocks on a full pipe: the MCP URL.
pub async fn listening_url(child: &mut Child) -> String {
    let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = served_url(&line) {
                return url.to_owned();
            }
        }
        panic!("agent-mcp serve exited before listening");
    })
    .await
    .expect("listening within 20 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    url
}

/// The agent-mcp binary (run under `prefix`, a program and its arguments, if any) with `args`
/// then `--config <config>`, in `dir`: its default SQLite store under `dir/state`, none of the
/// test's own OTEL_* variables (only a test that asks for OpenTelemetry export exports),
/// logging at `log`, killed when dropped. Its standard I/O is the caller's to connect.
pub fn agent_mcp_command(
    prefix: &[String],
    args: &[&str],
    config: &Path,
    dir: &Path,
    log: &str,
) -> Command {
    let bin = env!("CARGO_BIN_EXE_agent-mcp");
    let mut command = match prefix.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    for (name, _) in agent_mcp::config::OTEL_VARIABLES {
        command.env_remove(name);
    }
    command
        .args(args)
        .arg("--config")
        .arg(config)
        .current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("RUST_LOG", log)
        .kill_on_drop(true);
    command
}

/// `agent-mcp stdio` with the configuration file `config`, in `dir` (see
/// [`agent_mcp_command`]): the child, its stdin, and its stdout line by line; its stderr as
/// `stderr` says.
pub fn spawn_stdio(
    config: &Path,
    dir: &Path,
    log: &str,
    stderr: Stdio,
) -> (Child, ChildStdin, Lines<BufReader<ChildStdout>>) {
    let mut command = agent_mcp_command(&[], &["stdio"], config, dir, log);
    spawn_piped(&mut command, stderr, "agent-mcp stdio")
}

/// Starts `command` (`what` it is, for the panic if it cannot) with its stdin and stdout
/// piped: the child, its stdin, and its stdout line by line; its stderr as `stderr` says.
pub fn spawn_piped(
    command: &mut Command,
    stderr: Stdio,
    what: &str,
) -> (Child, ChildStdin, Lines<BufReader<ChildStdout>>) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    (child, stdin, stdout)
}

/// The real `agent-mcp stdio` binary as a child process.
pub struct StdioServer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: i64,
    /// Notifications read while waiting for a response.
    pub notifications: Vec<Value>,
    _dir: tempfile::TempDir,
}

impl StdioServer {
    pub async fn spawn(config: &Config) -> StdioServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_config(&dir, config);
        let (child, stdin, stdout) = spawn_stdio(&path, dir.path(), "warn", Stdio::inherit());
        StdioServer {
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 0,
            notifications: Vec::new(),
            _dir: dir,
        }
    }

    pub async fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
        stdin.flush().await.expect("flush");
    }

    pub async fn read_message(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.stdout.next_line())
            .await
            .expect("a message within 20 s")
            .expect("read")
            .expect("stdout open");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// Sends a request and returns the response with its id. Notifications that come first
    /// (a 2025-11-25 task's `notifications/tasks/status`) are kept in `notifications`.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&msg.to_string()).await;
        let resp = loop {
            let m = self.read_message().await;
            if m.get("id").is_none() && m.get("method").is_some() {
                self.notifications.push(m);
                continue;
            }
            break m;
        };
        assert_eq!(resp["id"], json!(id), "response to another request: {resp}");
        resp
    }

    /// A 2025 `initialize` with `params` followed by `notifications/initialized`: the
    /// `initialize` response.
    pub async fn initialize_2025(&mut self, params: Value) -> Value {
        let init = self.request("initialize", params).await;
        self.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        init
    }

    pub async fn modern(&mut self, method: &str, mut params: Value) -> Value {
        params["_meta"] = modern_meta(json!({}));
        self.request(method, params).await
    }

    /// Closes stdin and waits for the process to exit.
    pub async fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("exit within 20 s after EOF")
            .expect("wait")
    }
}

/// The real `agent-mcp serve` binary on 127.0.0.1:0.
pub struct ServeProcess {
    pub child: Child,
    /// `http://127.0.0.1:PORT` (the MCP endpoint is `{base}/mcp`).
    pub base: String,
    pub stderr: tokio::sync::mpsc::UnboundedReceiver<String>,
    /// The stderr lines up to the one that says where it listens (with [`Stderr::Read`]).
    pub startup: Vec<String>,
    _dir: tempfile::TempDir,
}

/// What `agent-mcp serve`'s stderr is connected to, in [`ServeProcess::spawn_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stderr {
    /// A pipe the test reads (lines in [`ServeProcess::stderr`]).
    Read,
    /// A pipe nobody reads: it fills up and every write to it blocks.
    Unread,
    /// A pipe whose reading end is closed at once: every write to it fails (`EPIPE`).
    Closed,
}

/// How [`ServeProcess::spawn_with`] starts the server.
#[derive(Clone, Debug)]
pub struct Spawn {
    /// A program and its arguments to run the server under (e.g. `prlimit --nofile=…`).
    pub prefix: Vec<String>,
    pub stderr: Stderr,
    pub env: Vec<(String, String)>,
    /// The port to listen on (0: any; the server says which).
    pub port: u16,
}

impl Default for Spawn {
    fn default() -> Self {
        Self {
            prefix: Vec::new(),
            stderr: Stderr::Read,
            env: Vec::new(),
            port: 0,
        }
    }
}

/// A port free on 127.0.0.1 now (for a server whose stderr cannot be read for its address).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl ServeProcess {
    pub async fn spawn(config: &Config) -> ServeProcess {
        Self::spawn_with(config, Spawn::default()).await
    }

    /// [`Self::spawn`] with these environment variables set.
    pub async fn spawn_with_env(config: &Config, env: &[(&str, &str)]) -> ServeProcess {
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Self::spawn_with(
            config,
            Spawn {
                env,
                ..Spawn::default()
            },
        )
        .await
    }

    /// The server as `how` says; with stderr not read, on a port chosen here and waited for.
    pub async fn spawn_with(config: &Config, how: Spawn) -> ServeProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_config(&dir, config);
        let port = match how.stderr {
            Stderr::Read => how.port,
            Stderr::Unread | Stderr::Closed if how.port != 0 => how.port,
            Stderr::Unread | Stderr::Closed => free_port(),
        };
        let bind = format!("127.0.0.1:{port}");
        let args = ["serve", "--bind", &bind];
        let mut child = agent_mcp_command(&how.prefix, &args, &path, dir.path(), "info")
            .envs(how.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent-mcp serve");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        if how.stderr != Stderr::Read {
            let pipe = child.stderr.take().expect("stderr");
            match how.stderr {
                // Kept open and never read, for as long as the process lives.
                Stderr::Unread => {
                    tokio::spawn(async move {
                        let _held = pipe;
                        std::future::pending::<()>().await;
                    });
                }
                _ => drop(pipe),
            }
            let base = format!("http://127.0.0.1:{port}");
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "agent-mcp serve did not listen on {port} within 20 s"
                );
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("agent-mcp serve exited with {status} before listening");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return ServeProcess {
                child,
                base,
                stderr: rx,
                startup: Vec::new(),
                _dir: dir,
            };
        }
        let mut rx = rx;
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut startup = Vec::new();
        let base = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = rx.recv().await {
                startup.push(line.clone());
                if let Some(url) = served_url(&line) {
                    return url.trim_end_matches("/mcp").to_owned();
                }
            }
            panic!(
                "agent-mcp serve exited before listening:\n{}",
                startup.join("\n")
            );
        })
        .await
        .expect("listening within 20 s");
        ServeProcess {
            child,
            base,
            stderr: rx,
            startup,
            _dir: dir,
        }
    }

    pub fn client(&self) -> HttpClient {
        HttpClient::new(&format!("{}/mcp", self.base))
    }

    /// The server's resident memory now and at its peak, in MiB (Linux `/proc`).
    pub fn rss_mib(&self) -> (u64, u64) {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
        };
        (kib("VmRSS:") / 1024, kib("VmHWM:") / 1024)
    }

    /// The port it serves on.
    pub fn port(&self) -> u16 {
        self.base
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port in the base URL")
    }

    /// Stderr lines read so far, waiting up to `wait` for one containing `needle`.
    pub async fn stderr_until(&mut self, needle: &str, wait: Duration) -> Vec<String> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.stderr.recv()).await {
                Ok(Some(line)) => {
                    let found = line.contains(needle);
                    seen.push(line);
                    if found {
                        return seen;
                    }
                }
                Ok(None) | Err(_) => return seen,
            }
        }
    }

    /// The body of `GET {base}{path}` (an operator endpoint: `/metrics`, `/readyz`, …).
    pub async fn get_text(&self, path: &str) -> String {
        reqwest::get(format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .text()
            .await
            .expect("body")
    }

    /// The stderr lines read so far and not yet taken (with [`Stderr::Read`]).
    pub fn stderr_so_far(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Ok(line) = self.stderr.try_recv() {
            lines.push(line);
        }
        lines
    }

    /// Sends SIGTERM and waits for the exit.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        self.sigterm_within(Duration::from_secs(40)).await
    }

    /// Sends SIGTERM and waits for the exit, failing unless it comes within `budget`; the
    /// process's stderr stays readable.
    pub async fn sigterm_within(&mut self, budget: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        tokio::time::timeout(budget, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("no exit within {budget:?} of SIGTERM"))
            .expect("wait")
    }
}
