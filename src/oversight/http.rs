//! The oversight routes of `agent-mcp serve`, beside `/mcp`:
//!
//! | route | answer |
//! |---|---|
//! | `GET /` | the page (HTML; its script and style at `/assets/…`, built into the binary) |
//! | `GET /api/tasks` | the caller's newest tasks (JSON), queue positions and ages |
//! | `GET /api/tasks/{id}` | one task: progress, its journal (steps, model calls, tool calls, approvals: the agent's journal), result, approvals waiting, changed files |
//! | `GET /api/tasks/{id}/diff` | its unified diff (`text/x-diff`) |
//! | `POST /api/tasks/{id}/undo` | puts its files back (JSON `{ok, message, files}`) |
//! | `POST /api/tasks/{id}/cancel` | cancels it |
//! | `POST /api/tasks/{id}/approvals/{key}?action=accept\|decline` | answers an approval |
//! | `GET /api/events` | `text/event-stream`: an event whenever one of the caller's tasks changes |
//!
//! Every route passes the same Host/Origin guard as `/mcp` (a page elsewhere that rebinds a
//! name to 127.0.0.1, or posts across sites, is refused 403). Every `/api/` route needs the
//! same bearer token or OAuth access token as `/mcp` when those are configured (401 otherwise)
//! and shows the caller only their own tasks: another's task is "not found", as in
//! `agent_status`. The page itself and its assets hold no data; a browser's navigation cannot
//! carry a bearer header, so they pass the guard alone, and the page sends the token the
//! person gives it with every request it makes (never in a URL the server sees).
//!
//! The page's script builds every element with `textContent`: nothing a task's text holds
//! becomes markup. The Content-Security-Policy allows scripts and styles from the server
//! itself only, no inline script, no frames, no other origin.

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{Either, Full};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{Oversight, OversightError, UndoRefusal, page};
use crate::protocol::{Credential, Refusal};
use crate::task::input::Action;
use crate::task::{Task, TaskState};
use crate::transport::http::HttpRules;
use crate::transport::http::guard::check_host_and_origin;

/// Most tasks `GET /api/tasks` lists (the newest).
pub const LIST_LIMIT: usize = 100;
/// Shortest pause between two events on one stream: a task that saves its progress often
/// wakes the page a few times a second, not per save.
const EVENT_PAUSE: Duration = Duration::from_millis(100);
/// A comment goes out when a stream has been silent this long, so idle timeouts keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(25);

/// The Content-Security-Policy of every answer: the server's own script and style, nothing
/// inline, no frames, no other origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Who a request's credential names: `Ok(None)` for the anonymous caller of a server without
/// tokens, the refusal (401) `/mcp` would answer otherwise. The composition root supplies it
/// (`src/stack/caller.rs`), from the same tokens and OAuth validator as `/mcp`.
pub trait Identify: Send + Sync + Debug {
    /// The caller `credential` names, or the refusal.
    fn identify(&self, credential: Option<Credential>) -> IdentifyFuture;
}

/// The future of [`Identify::identify`].
pub type IdentifyFuture = Pin<Box<dyn Future<Output = Result<Option<String>, Refusal>> + Send>>;

/// The body of an oversight answer: whole, or the event stream.
pub type PageBody = Either<Full<Bytes>, EventsBody>;
type PageResponse = Response<PageBody>;

/// The oversight routes. Cheap to clone.
#[derive(Clone, Debug)]
pub struct OversightEndpoints {
    oversight: Oversight,
    rules: Arc<HttpRules>,
    identify: Arc<dyn Identify>,
}

impl OversightEndpoints {
    /// The routes over `oversight`, behind `rules` (Host/Origin), callers told by `identify`.
    pub fn new(oversight: Oversight, rules: HttpRules, identify: Arc<dyn Identify>) -> Self {
        Self {
            oversight,
            rules: Arc::new(rules),
            identify,
        }
    }

    /// Whether `path` is one of these routes.
    pub fn serves(path: &str) -> bool {
        path == "/" || path.starts_with("/assets/") || path.starts_with("/api/")
    }

    /// Answers `req` if its path is one of these routes.
    pub async fn handle<B>(&self, req: &Request<B>) -> Option<PageResponse> {
        let path = req.uri().path();
        if !Self::serves(path) {
            return None;
        }
        if let Err(forbidden) = check_host_and_origin(&self.rules, req) {
            return Some(secured(forbidden.map(Either::Left)));
        }
        let resp = match (req.method(), path) {
            (&Method::GET, "/") => asset(page::INDEX_HTML, "text/html; charset=utf-8"),
            (&Method::GET, page::SCRIPT_PATH) => {
                asset(page::SCRIPT, "text/javascript; charset=utf-8")
            }
            (&Method::GET, page::STYLE_PATH) => asset(page::STYLE, "text/css; charset=utf-8"),
            (_, p) if p.starts_with("/api/") => self.api(req).await,
            _ => text(StatusCode::NOT_FOUND, "Not Found\n".into()),
        };
        Some(secured(resp))
    }

    async fn api<B>(&self, req: &Request<B>) -> PageResponse {
        let credential = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(Credential::from_authorization);
        let identity = match self.identify.identify(credential).await {
            Ok(identity) => identity,
            Err(refusal) => return refused(&refusal),
        };
        let who = identity.as_deref();
        let path = req.uri().path().trim_start_matches("/api/");
        let parts: Vec<&str> = path.split('/').collect();
        let method = req.method();
        match (method, parts.as_slice()) {
            (&Method::GET, ["tasks"]) => self.list(who).await,
            (&Method::GET, ["events"]) => self.events(),
            (_, ["tasks", id, rest @ ..]) => {
                let Some(id) = Uuid::try_parse(id).ok() else {
                    return json_response(
                        StatusCode::NOT_FOUND,
                        &json!({"ok": false, "message": format!("no task {id} of yours")}),
                    );
                };
                match (method, rest) {
                    (&Method::GET, []) => self.detail(id, who).await,
                    (&Method::GET, ["diff"]) => match self.oversight.diff(id, who).await {
                        Ok(diff) => {
                            text_typed(StatusCode::OK, diff.text, "text/x-diff; charset=utf-8")
                        }
                        Err(e) => failure(&e),
                    },
                    (&Method::POST, ["undo"]) => match self.oversight.undo(id, who).await {
                        Ok(undone) => json_response(
                            StatusCode::OK,
                            &json!({"ok": true, "message": undone.line(), "files": match &undone {
                                super::Undone::Restored(files) => files.clone(),
                                _ => Vec::new(),
                            }}),
                        ),
                        Err(e) => failure(&e),
                    },
                    (&Method::POST, ["cancel"]) => match self.oversight.cancel(id, who).await {
                        Ok(task) => json_response(
                            StatusCode::OK,
                            &json!({"ok": true, "message": format!("task is {}", task.state)}),
                        ),
                        Err(e) => failure(&e),
                    },
                    (&Method::POST, ["approvals", key]) => {
                        let action = req.uri().query().and_then(|q| {
                            q.split('&')
                                .find_map(|kv| kv.strip_prefix("action="))
                                .and_then(|a| match a {
                                    "accept" => Some(Action::Accept),
                                    "decline" => Some(Action::Decline),
                                    _ => None,
                                })
                        });
                        let Some(action) = action else {
                            return json_response(
                                StatusCode::BAD_REQUEST,
                                &json!({"ok": false, "message": "add ?action=accept or ?action=decline"}),
                            );
                        };
                        match self.oversight.answer(id, key, action, who).await {
                            Ok(()) => json_response(
                                StatusCode::OK,
                                &json!({"ok": true, "message": format!("{key}: {}", action.as_str())}),
                            ),
                            Err(e) => failure(&e),
                        }
                    }
                    (_, [] | ["diff"]) | (_, ["undo" | "cancel" | "approvals", ..]) => text(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "Method Not Allowed\n".into(),
                    ),
                    _ => text(StatusCode::NOT_FOUND, "Not Found\n".into()),
                }
            }
            _ => text(StatusCode::NOT_FOUND, "Not Found\n".into()),
        }
    }

    /// `GET /api/tasks`.
    async fn list(&self, who: Option<&str>) -> PageResponse {
        let tasks = match self.oversight.recent(who, LIST_LIMIT).await {
            Ok(tasks) => tasks,
            Err(e) => return failure(&e),
        };
        let mut rows = Vec::with_capacity(tasks.len());
        for task in &tasks {
            rows.push(self.summary(task).await);
        }
        json_response(
            StatusCode::OK,
            &json!({"now_ms": millis(SystemTime::now()), "tasks": rows}),
        )
    }

    /// `GET /api/tasks/{id}`.
    async fn detail(&self, id: Uuid, who: Option<&str>) -> PageResponse {
        let diff = match self.oversight.diff(id, who).await {
            Ok(diff) => diff,
            Err(e) => return failure(&e),
        };
        let mut body = self.summary(&diff.task).await;
        let task = &diff.task;
        body["result"] = Value::from(task.result.as_str());
        body["critical_path_tokens"] = Value::from(task.critical_path_tokens);
        body["pending"] = task
            .input
            .pending
            .iter()
            .map(
                |p| json!({"key": p.key, "tool": p.tool, "summary": p.summary, "detail": p.detail}),
            )
            .collect();
        body["decisions"] = task.input.decisions.iter().map(|d| d.line()).collect();
        body["files"] = diff
            .changes
            .as_ref()
            .map(|c| {
                c.files
                    .iter()
                    .map(|f| Value::from(f.path.as_str()))
                    .collect()
            })
            .unwrap_or_else(|| Value::Array(Vec::new()));
        body["undone"] = Value::from(diff.changes.as_ref().is_some_and(|c| c.undone));
        body["diff"] = Value::from(diff.text);
        body["journal"] = match self.oversight.core() {
            Some(core) => serde_json::to_value(core.journal.entries(id)).unwrap_or_default(),
            None => Value::Array(Vec::new()),
        };
        body["now_ms"] = Value::from(millis(SystemTime::now()));
        json_response(StatusCode::OK, &body)
    }

    /// What the queue shows of one task.
    async fn summary(&self, task: &Task) -> Value {
        let position = match (task.state, self.oversight.core()) {
            (TaskState::Queued, Some(core)) => core.queue_position(task.id).await,
            _ => None,
        };
        json!({
            "id": task.id,
            "session_id": task.session_id,
            "state": task.state.as_str(),
            "request": task.request,
            "current_task": task.current_task,
            "steps_done": task.steps_done,
            "steps_total": task.steps_total,
            "tokens_in": task.tokens.input,
            "tokens_out": task.tokens.output,
            "position": position,
            "waiting": task.input.is_waiting(),
            "created_ms": millis(task.created_at),
            "updated_ms": millis(task.updated_at),
        })
    }

    /// `GET /api/events`: one `changed` event when the stream opens and after every change of
    /// a task. The event carries nothing (not even which task): the page then reads what it
    /// shows, which holds only the caller's own.
    fn events(&self) -> PageResponse {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        if let Some(core) = self.oversight.core() {
            let mut changes = core.subscribe_task_changes();
            tokio::spawn(async move {
                loop {
                    // A full channel holds an event the page has not read: this one joins it.
                    let event = Bytes::from_static(b"event: changed\ndata: {}\n\n");
                    if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) =
                        tx.try_send(event)
                    {
                        return;
                    }
                    tokio::select! {
                        () = tx.closed() => return,
                        changed = changes.changed() => if changed.is_err() { return },
                    }
                    tokio::time::sleep(EVENT_PAUSE).await;
                    // Changes during the pause are in this event.
                    changes.borrow_and_update();
                }
            });
        }
        let mut resp = Response::new(Either::Right(EventsBody::new(rx)));
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        resp
    }
}

/// The event stream's body: the events the watcher sends, a keep-alive comment in silences;
/// dropped (ending the watcher) when the page closes it.
pub struct EventsBody {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    keep_alive: tokio::time::Interval,
}

impl EventsBody {
    fn new(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Self {
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { rx, keep_alive }
    }
}

impl Debug for EventsBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventsBody").finish_non_exhaustive()
    }
}

impl Body for EventsBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(event)) => Poll::Ready(Some(Ok(Frame::data(event)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.keep_alive.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                    b": keep-alive\n\n",
                ))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The headers every oversight answer carries.
fn secured(mut resp: PageResponse) -> PageResponse {
    let headers = resp.headers_mut();
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    resp
}

fn asset(body: &'static str, content_type: &'static str) -> PageResponse {
    let mut resp = Response::new(Either::Left(Full::new(Bytes::from_static(body.as_bytes()))));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn text(status: StatusCode, body: String) -> PageResponse {
    text_typed(status, body, "text/plain; charset=utf-8")
}

fn text_typed(status: StatusCode, body: String, content_type: &'static str) -> PageResponse {
    let mut resp = Response::new(Either::Left(Full::new(Bytes::from(body))));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn json_response(status: StatusCode, body: &Value) -> PageResponse {
    text_typed(status, body.to_string(), "application/json")
}

/// 401 (or 503 while the OAuth issuer's keys are out of reach) with the challenge `/mcp` gives.
fn refused(refusal: &Refusal) -> PageResponse {
    let status = match refusal {
        Refusal::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        Refusal::InsufficientScope { .. } => StatusCode::FORBIDDEN,
        _ => StatusCode::UNAUTHORIZED,
    };
    let mut resp = json_response(status, &json!({"ok": false, "message": refusal.message()}));
    if let Some(challenge) = refusal.challenge()
        && let Ok(value) = HeaderValue::from_str(challenge)
    {
        resp.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    resp
}

/// The status and JSON `{ok: false, message}` of an oversight error.
fn failure(error: &OversightError) -> PageResponse {
    let status = match error {
        OversightError::NotFound(_) => StatusCode::NOT_FOUND,
        OversightError::Undo(UndoRefusal::Io { .. }) => StatusCode::INTERNAL_SERVER_ERROR,
        OversightError::Undo(_) | OversightError::NoSuchQuestion { .. } => StatusCode::CONFLICT,
        OversightError::Workspace(_) => StatusCode::INTERNAL_SERVER_ERROR,
        OversightError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let files = match error {
        OversightError::Undo(
            UndoRefusal::ChangedSince(files) | UndoRefusal::NotRestorable(files),
        ) => files.clone(),
        _ => Vec::new(),
    };
    json_response(
        status,
        &json!({"ok": false, "message": error.to_string(), "files": files}),
    )
}
