//! A fake Ollama server speaking the real wire format over real HTTP on `127.0.0.1:0`.
//!
//! It runs on its own thread with its own Tokio runtime, so it keeps answering even while a
//! test blocks (e.g. waiting on a spawned `agent-mcp` process), and works under any test
//! runtime flavour. Dropping the [`FakeOllama`] stops it and cuts every open stream.
//!
//! ```ignore
//! let fake = FakeOllama::start().await;
//! fake.push_reply(Reply::text("Hi there", 10, 2));
//! // point the client at fake.url() …
//! assert_eq!(fake.chat_count(), 1);
//! ```
//!
//! `/api/chat` always streams NDJSON (agent-mcp's client forces `stream: true`).

// Several test binaries include this module and each uses only part of it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use http_body::Frame;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

mod script;

use super::background::serve_in_background;

use script::{CREATED_AT, details, stream_lines};
pub use script::{FakeConfig, Reply};

/// One `/api/chat` request as it arrived.
#[derive(Clone, Debug)]
pub struct SeenChat {
    /// When it arrived, on the wall clock (comparable with the database's `now()` on this
    /// machine).
    pub at: std::time::SystemTime,
    pub body: Value,
}

impl SeenChat {
    /// The content of the first user message: the task's request (later user messages are
    /// the agent loop's own).
    pub fn request(&self) -> &str {
        first_request(&self.body)
    }
}

/// The content of a chat body's first user message.
pub fn first_request(body: &Value) -> &str {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
}

/// The content of a chat body's last user message (the request, or what the agent loop told
/// the model last).
pub fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The content of a chat body's last `role: tool` message: the last tool result the model got.
pub fn last_tool_result(body: &Value) -> String {
    tool_results(body)
        .pop()
        .map(|(_, content)| content)
        .unwrap_or_default()
}

/// `(tool_name, content)` of every `role: tool` message of a chat body, in order.
pub fn tool_results(body: &Value) -> Vec<(String, String)> {
    let Some(messages) = body["messages"].as_array() else {
        return Vec::new();
    };
    let text = |m: &Value, key: &str| m[key].as_str().unwrap_or_default().to_owned();
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (text(m, "tool_name"), text(m, "content")))
        .collect()
}

/// A running fake server; stops on drop.
pub struct FakeOllama {
    url: String,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl FakeOllama {
    /// Model `test-model` with capabilities `completion` and `tools`.
    pub async fn start() -> FakeOllama {
        Self::spawn(FakeConfig::default())
    }

    /// A fake whose every chat hangs after its headers (unless a reply is queued): a task
    /// that stays running until it is cancelled or the server stops.
    pub async fn hanging() -> FakeOllama {
        Self::start_with(FakeConfig::default().with_default_reply(Reply::Hang)).await
    }

    pub async fn start_with(cfg: FakeConfig) -> FakeOllama {
        Self::spawn(cfg)
    }

    /// Starts the server without needing an async context (for plain `#[test]`s).
    pub fn spawn(cfg: FakeConfig) -> FakeOllama {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("listener address");
        let shared = Arc::new(Shared {
            cfg,
            replies: Mutex::default(),
            chat_requests: Mutex::default(),
            seen: Mutex::default(),
            chats: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            shows: AtomicUsize::new(0),
            versions: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/", get(|| async { "Ollama is running" }))
            .route("/api/chat", post(chat))
            .route("/api/show", post(show))
            .route("/api/version", get(version))
            .route("/api/tags", get(tags))
            .with_state(Arc::clone(&shared));
        let name = format!("fake-ollama-{}", addr.port());
        let shutdown = serve_in_background(name, 2, listener, |listener| async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeOllama {
            url: format!("http://{addr}"),
            shared,
            shutdown: Some(shutdown),
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Queues a reply for the next `/api/chat` call that passes validation.
    pub fn push_reply(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Queues `replies`, in order.
    pub fn push_replies(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.shared.replies).extend(replies);
    }

    /// Drops the scripted replies not used yet.
    pub fn clear_replies(&self) {
        lock(&self.shared.replies).clear();
    }

    /// Forgets the `/api/chat` bodies received so far.
    pub fn clear_requests(&self) {
        lock(&self.shared.chat_requests).clear();
    }

    /// Every `/api/chat` body received that was valid JSON, in arrival order.
    pub fn chat_requests(&self) -> Vec<Value> {
        lock(&self.shared.chat_requests).clone()
    }

    /// Every `/api/chat` body received that was valid JSON, with its arrival time.
    pub fn chats_seen(&self) -> Vec<SeenChat> {
        lock(&self.shared.seen).clone()
    }

    /// Every `/api/chat` request received, valid or not.
    pub fn chat_count(&self) -> usize {
        self.shared.chats.load(Ordering::SeqCst)
    }

    /// Waits until a chat is in flight (a task reached the model), failing after `budget` with
    /// `failure` (what went wrong).
    pub async fn until_chat_started(&self, budget: Duration, failure: &str) {
        self.until(budget, failure, |n| n > 0).await;
    }

    /// Waits until no chat is in flight (every stream finished or was dropped), failing after
    /// `budget` with `failure`.
    pub async fn until_chats_closed(&self, budget: Duration, failure: &str) {
        self.until(budget, failure, |n| n == 0).await;
    }

    async fn until(&self, budget: Duration, failure: &str, ready: impl Fn(usize) -> bool) {
        let deadline = tokio::time::Instant::now() + budget;
        while !ready(self.in_flight_chats()) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{failure} (after {budget:?})"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `/api/chat` requests whose response has not yet finished or been dropped.
    pub fn in_flight_chats(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// The most `/api/chat` requests ever in flight at once.
    pub fn max_concurrent_chats(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// `/api/version` requests received (readiness probes).
    pub fn version_count(&self) -> usize {
        self.shared.versions.load(Ordering::SeqCst)
    }

    pub fn show_count(&self) -> usize {
        self.shared.shows.load(Ordering::SeqCst)
    }
}

impl Drop for FakeOllama {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

struct Shared {
    cfg: FakeConfig,
    replies: Mutex<VecDeque<Reply>>,
    chat_requests: Mutex<Vec<Value>>,
    seen: Mutex<Vec<SeenChat>>,
    chats: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    shows: AtomicUsize,
    versions: AtomicUsize,
}

/// A panicking test thread must not hide the fake's state from the others.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Counts one `/api/chat` request as in flight until dropped.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(Arc::clone(shared))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A streamed response body fed by a channel. It holds the in-flight guard, so the request
/// stops counting when the stream ends or hyper drops the body (client hung up).
struct ChatBody {
    lines: mpsc::Receiver<Bytes>,
    in_flight: Option<InFlight>,
    /// End with a body error (hyper then aborts the connection) instead of a clean end.
    cut: bool,
}

impl http_body::Body for ChatBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.lines.poll_recv(cx) {
            Poll::Ready(Some(line)) => Poll::Ready(Some(Ok(Frame::data(line)))),
            Poll::Ready(None) => {
                self.in_flight = None;
                if std::mem::take(&mut self.cut) {
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "fake Ollama cut the connection",
                    ))));
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

async fn chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let in_flight = InFlight::enter(&shared);
    let request_no = shared.chats.fetch_add(1, Ordering::SeqCst) + 1;
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error_response(400, "invalid JSON body");
    };
    lock(&shared.chat_requests).push(request.clone());
    lock(&shared.seen).push(SeenChat {
        at: std::time::SystemTime::now(),
        body: request.clone(),
    });
    let cfg = &shared.cfg;
    let model = request["model"].as_str().unwrap_or_default();
    if model.is_empty() {
        return error_response(400, "model is required");
    }
    if !cfg.knows(model) {
        return error_response(404, &format!("model '{model}' not found"));
    }
    let wants_tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    if wants_tools && !cfg.has("tools") {
        return error_response(400, &format!("\"{model}\" does not support tools"));
    }
    let has_images = request["messages"].as_array().is_some_and(|messages| {
        messages
            .iter()
            .any(|m| m["images"].as_array().is_some_and(|i| !i.is_empty()))
    });
    if has_images && !cfg.has("vision") {
        return error_response(400, &format!("\"{model}\" does not support vision"));
    }
    if request["think"] == json!(true) && !cfg.has("thinking") {
        return error_response(400, &format!("\"{model}\" does not support thinking"));
    }

    let scripted = cfg.responder.as_ref().and_then(|r| (r.0)(&request));
    let mut reply = match scripted {
        Some(reply) => reply,
        None => lock(&shared.replies)
            .pop_front()
            .unwrap_or_else(|| cfg.default_reply.clone()),
    };
    while let Reply::Delay(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    let cut = matches!(reply, Reply::Cut { .. });
    let (lines, hang) = match reply {
        Reply::HttpError { status, error } => return error_response(status, &error),
        Reply::RateLimited { retry_after, error } => {
            let mut response = error_response(429, &error);
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", axum::http::HeaderValue::from(seconds));
            }
            return response;
        }
        Reply::Hang => (Vec::new(), true),
        other => (stream_lines(model, request_no, other), false),
    };

    let (tx, rx) = mpsc::channel(16);
    let delay = cfg.chunk_delay;
    tokio::spawn(async move {
        for (i, line) in lines.into_iter().enumerate() {
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if tx.send(Bytes::from(line)).await.is_err() {
                return;
            }
        }
        if hang {
            tx.closed().await;
        }
    });
    let body = ChatBody {
        lines: rx,
        in_flight: Some(in_flight),
        cut,
    };
    Response::builder()
        .status(200)
        .header("content-type", "application/x-ndjson")
        .body(Body::new(body))
        .expect("static response parts")
}

async fn show(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    shared.shows.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    // Older clients send `name` instead of `model`.
    let model = request["model"]
        .as_str()
        .or_else(|| request["name"].as_str())
        .unwrap_or_default();
    let cfg = &shared.cfg;
    if !cfg.knows(model) {
        return error_response(404, &format!("model '{model}' not found"));
    }
    json_response(
        200,
        &json!({
            "modelfile": format!("FROM {}\n", cfg.model),
            "parameters": "temperature 0.7",
            "template": "{{ .Prompt }}",
            "details": details(&cfg.parameter_size),
            "model_info": {
                "general.architecture": "llama",
                "general.parameter_count": cfg.parameter_count,
                "llama.context_length": cfg.context_length,
            },
            "capabilities": cfg.capabilities,
            "modified_at": CREATED_AT,
        }),
    )
}

async fn version(State(shared): State<Arc<Shared>>) -> Response {
    shared.versions.fetch_add(1, Ordering::SeqCst);
    json_response(200, &json!({ "version": shared.cfg.version }))
}

async fn tags(State(shared): State<Arc<Shared>>) -> Response {
    let name = &shared.cfg.model;
    let name = if name.contains(':') {
        name.clone()
    } else {
        format!("{name}:latest")
    };
    json_response(
        200,
        &json!({"models": [{
            "name": name, "model": name, "modified_at": CREATED_AT,
            "size": 4_920_753_328u64,
            "digest": "365c0bd3c000a25d28ddbf732fe1c6add414de7275464c4e4d1c3b5fcb5d8ad1",
            "details": details(&shared.cfg.parameter_size),
        }]}),
    )
}

fn error_response(status: u16, error: &str) -> Response {
    json_response(status, &json!({ "error": error }))
}

fn json_response(status: u16, body: &Value) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(body.to_string()))
        .expect("static response parts")
}
