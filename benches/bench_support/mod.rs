//! What the two model benchmarks share (`bench_llm.rs`, `bench_coding.rs`): a recording proxy
//! between the agent and the model server, the KV-cache figures of the model server's log, and
//! running one task through the real agent to its end.
//!
//! The proxy forwards every byte unchanged and keeps, per model call, the request's messages
//! and the reply's text and tool calls, so a benchmark can count calls and tool results, print
//! a trace, and tell whether each call's prompt extended the previous one (what lets the
//! server reuse its KV cache).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_mcp::agent::Agent;
use agent_mcp::config::Config;
use agent_mcp::store::{MemoryStore, TaskStore};
use agent_mcp::task::{Session, Task};
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use serde_json::Value;
use uuid::Uuid;

/// One model call as the proxy saw it.
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// The request's `messages`.
    pub messages: Vec<Value>,
    /// Whether the request offered tools.
    pub tools: bool,
    /// The reply's text, all chunks joined.
    pub text: String,
    /// The reply's tool calls (each `function` as JSON text).
    pub calls: Vec<String>,
}

/// What the proxy saw since the last [`Proxy::take`].
#[derive(Default)]
struct Seen {
    calls: Vec<Call>,
}

/// The recording proxy; cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    upstream: String,
    client: reqwest::Client,
    seen: Arc<Mutex<Seen>>,
}

impl Proxy {
    /// Starts the proxy on 127.0.0.1 in front of `upstream`; returns it and its base URL.
    pub async fn start(upstream: &str) -> Result<(Proxy, String), Box<dyn std::error::Error>> {
        let proxy = Proxy {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(900))
                .build()?,
            seen: Arc::new(Mutex::new(Seen::default())),
        };
        let serving = proxy.clone();
        let app =
            axum::Router::new().fallback(move |req: Request<Body>| forward(serving.clone(), req));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok((proxy, url))
    }

    /// The calls seen since the last take.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut self.seen.lock().unwrap_or_else(|e| e.into_inner()).calls)
    }
}

async fn forward(proxy: Proxy, req: Request<Body>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return status(StatusCode::BAD_REQUEST, "unreadable body");
    };
    let chat = parts.uri.path() == "/api/chat";
    let mut call = Call::default();
    if chat && let Ok(request) = serde_json::from_slice::<Value>(&body) {
        call.messages = request["messages"].as_array().cloned().unwrap_or_default();
        call.tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    }
    let url = format!("{}{}", proxy.upstream, parts.uri);
    let mut upstream = proxy.client.request(parts.method, url).body(body.to_vec());
    for (name, value) in &parts.headers {
        if name == "content-type" || name == "authorization" {
            upstream = upstream.header(name, value);
        }
    }
    let reply = match upstream.send().await {
        Ok(reply) => reply,
        Err(e) => return status(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    let code = reply.status();
    let bytes = match reply.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return status(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    if chat {
        for line in bytes.split(|&b| b == b'\n') {
            if let Ok(chunk) = serde_json::from_slice::<Value>(line) {
                call.text
                    .push_str(chunk["message"]["content"].as_str().unwrap_or_default());
                if let Some(list) = chunk["message"]["tool_calls"].as_array() {
                    call.calls
                        .extend(list.iter().map(|c| c["function"].to_string()));
                }
            }
        }
        proxy
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .calls
            .push(call);
    }
    Response::builder()
        .status(code)
        .body(Body::from(bytes))
        .unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY, "bad reply"))
}

fn status(code: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = code;
    response
}

/// Most `role: tool` messages in one request of `calls`: the tool results sent back.
pub fn tool_results(calls: &[Call]) -> usize {
    calls
        .iter()
        .map(|c| c.messages.iter().filter(|m| m["role"] == "tool").count())
        .max()
        .unwrap_or(0)
}

/// Calls after the first whose messages begin with every message of the call before them
/// (the engine appended to the conversation without rewriting it), of the calls after the first.
pub fn prompts_extended(calls: &[Call]) -> (usize, usize) {
    let pairs = calls.windows(2);
    let total = pairs.len();
    let kept = calls
        .windows(2)
        .filter(|w| w[1].messages.starts_with(&w[0].messages))
        .count();
    (kept, total)
}

/// The model server's log (`BENCH_SHIM_LOG`), read from where the last task stopped: its
/// `prompt N tok (M from KV cache)` lines are the KV-cache reuse per call.
pub struct ShimLog {
    path: Option<PathBuf>,
    offset: u64,
}

impl ShimLog {
    pub fn from_env() -> ShimLog {
        let path = std::env::var_os("BENCH_SHIM_LOG").map(PathBuf::from);
        let offset = path
            .as_deref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        ShimLog { path, offset }
    }

    /// (prompt tokens, of them from the KV cache) over the lines logged since the last call;
    /// `None` without a log.
    pub fn since_last(&mut self) -> Option<(u64, u64)> {
        let path = self.path.as_deref()?;
        let text = std::fs::read(path).ok()?;
        let start = usize::try_from(self.offset)
            .unwrap_or(usize::MAX)
            .min(text.len());
        self.offset = text.len() as u64;
        let new = String::from_utf8_lossy(&text[start..]);
        let mut sums = (0, 0);
        for line in new.lines() {
            if let Some((prompt, cached)) = kv_line(line) {
                sums.0 += prompt;
                sums.1 += cached;
            }
        }
        Some(sums)
    }
}

/// `… prompt 812 tok (790 from KV cache) in …` → (812, 790).
fn kv_line(line: &str) -> Option<(u64, u64)> {
    let (_, rest) = line.split_once("prompt ")?;
    let (prompt, rest) = rest.split_once(" tok (")?;
    let (cached, _) = rest.split_once(" from KV cache)")?;
    Some((prompt.trim().parse().ok()?, cached.trim().parse().ok()?))
}

/// The text files under `root` that are new or differ from `before` (relative path,
/// content), sorted; folders named `__pycache__` are skipped.
pub fn changed_files(root: &Path, before: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if entry.file_name() != "__pycache__" {
                    folders.push(path);
                }
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let shown = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            if before.iter().all(|(p, t)| *p != shown || *t != text) {
                out.push((shown, text));
            }
        }
    }
    out.sort();
    out
}

/// Writes `files` (path relative to `root`, content) into `root`.
/// The configuration of a benchmark task: the model `model` through the proxy at `proxy_url`,
/// greedy (temperature 0) with an 8192-token window, a memory store, no audit log, working in
/// `workspace` and allowed to run `commands`.
pub fn task_config(proxy_url: &str, model: &str, workspace: &Path, commands: &[&str]) -> Config {
    let mut config = Config::default();
    config.ollama.url = proxy_url.to_owned();
    config.ollama.model = model.to_owned();
    config.ollama.temperature = Some(0.0);
    config.ollama.num_ctx = 8192;
    config.store.backend = agent_mcp::config::StoreBackend::Memory;
    config.audit.enabled = false;
    config.agent.workspace = Some(workspace.to_path_buf());
    config.agent.commands.allow = commands.iter().map(|c| (*c).to_owned()).collect();
    config
}

pub fn write_files(root: &Path, files: &[(&str, &str)]) -> std::io::Result<()> {
    for (path, content) in files {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    Ok(())
}

/// Runs `requests` one after another in one session (a follow-up continues the conversation)
/// through a fresh agent on `config`; returns each task as it ended.
pub async fn run_session(
    config: &Config,
    requests: &[&str],
    limit: Duration,
) -> Result<Vec<Task>, Box<dyn std::error::Error>> {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let agent = Agent::start(config, store.clone()).await?;
    let core = agent.core().clone();
    let session = Session::new(None);
    store.create_session(&session).await?;
    let mut done = Vec::new();
    for request in requests {
        let queued = Task::new(session.id, None, (*request).to_owned(), None);
        let id: Uuid = queued.id;
        let mut changes = core.subscribe_task_changes();
        store.insert_task(&queued).await?;
        core.enqueue(id);
        let task = loop {
            let now = store.task(id).await?.ok_or("the task vanished")?;
            if now.state.is_terminal() {
                break now;
            }
            if tokio::time::timeout(limit, changes.changed())
                .await
                .is_err()
            {
                return Err(format!("a task did not end within {limit:?}").into());
            }
        };
        done.push(task);
    }
    agent.shutdown().await;
    Ok(done)
}

/// `text` on one line, cut to `max` characters: the agent's own.
pub use agent_mcp::agent::runner::one_line;

// Run by `cargo test` through tests/bench_coding_judges.rs. No `use`: `cargo clippy
// --all-targets` also checks the benches with `cfg(test)` but without a test harness, where the
// test below is left out and an import would be unused.
#[cfg(test)]
mod tests {
    #[test]
    fn kv_lines_are_read() {
        assert_eq!(
            super::kv_line(
                "[ollama_shim] prompt 812 tok (790 from KV cache) in 1.2s; 9 tok generated"
            ),
            Some((812, 790))
        );
        assert_eq!(super::kv_line("[ollama_shim] listening"), None);
    }
}
