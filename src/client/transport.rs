//! One MCP 2026-07-28 connection for the terminal client: stateless HTTP (`POST /mcp`) or an
//! `agent-mcp stdio` child process of this same binary.
//!
//! There is no `initialize`: every request carries `params._meta` with the protocol version,
//! the client capabilities of *that* request and the client's `Implementation`. Over HTTP the
//! routing headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) repeat what the body says,
//! and a bearer token from `AGENT_MCP_TOKEN` goes into `Authorization` (it is never printed).
//!
//! Outcomes are judged by the JSON-RPC error alone here; `isError` is the caller's business
//! (it is a successful response). HTTP 401 and 429 become one-line messages a person can act on.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::error::ClientError;
use crate::protocol::code::UNAUTHORIZED;
// -32000 is also used for other transport errors, so a rate-limit refusal is recognised by
// its `data.retryAfterSeconds` as well.
use crate::layers::tasks::SUBSCRIPTION_ID;
use crate::protocol::ProtocolVersion;
use crate::protocol::code::RATE_LIMITED;
use crate::protocol::era::{META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION};
use crate::transport::http::{HEADER_METHOD, HEADER_NAME, HEADER_PROTOCOL_VERSION};

/// `clientInfo.name` on every request.
pub const CLIENT_NAME: &str = "agent-mcp-cli";
/// Where `agent-mcp run` looks for a server when given neither `--url` nor `--stdio`.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080/mcp";
/// The environment variable holding the bearer token.
pub const TOKEN_ENV: &str = "AGENT_MCP_TOKEN";
/// Longest wait for one answer (an `agent_run` with 20 MiB of images included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stdio child may take to exit after its stdin closes.
const STDIO_EXIT_WAIT: Duration = Duration::from_secs(10);
/// Most characters of an unexpected HTTP body quoted in an error.
const MAX_QUOTED_BODY: usize = 200;

/// Where the server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A stateless Streamable HTTP endpoint, e.g. `http://127.0.0.1:8080/mcp`.
    Http { url: String },
    /// `agent-mcp stdio [--config FILE]`, started from this same executable.
    Stdio { config: Option<PathBuf> },
}

/// An open connection; requests are sent one at a time.
#[derive(Debug)]
pub struct Connection {
    link: Link,
    next_id: i64,
}

#[derive(Debug)]
enum Link {
    Http(HttpLink),
    // Boxed: the child process and its pipes dwarf the HTTP client handle.
    Stdio(Box<StdioLink>),
}

impl Connection {
    /// Prepares the HTTP client, or starts the stdio child.
    pub fn open(endpoint: &Endpoint) -> Result<Connection, ClientError> {
        let link = match endpoint {
            Endpoint::Http { url } => Link::Http(HttpLink::new(url)?),
            Endpoint::Stdio { config } => Link::Stdio(Box::new(StdioLink::spawn(config.as_ref())?)),
        };
        Ok(Connection { link, next_id: 0 })
    }

    /// Sends one request with `capabilities` as this request's client capabilities, and
    /// returns its `result` object, or the JSON-RPC error as a [`ClientError`].
    pub async fn request(
        &mut self,
        method: &str,
        mut params: Map<String, Value>,
        capabilities: Value,
    ) -> Result<Map<String, Value>, ClientError> {
        self.next_id += 1;
        let id = self.next_id;
        params.insert("_meta".into(), request_meta(capabilities));
        let name = match method {
            "tools/call" => params.get("name"),
            m if m.starts_with("tasks/") => params.get("taskId"),
            _ => None,
        }
        .and_then(Value::as_str)
        .map(str::to_owned);
        let mut message = Map::new();
        message.insert("jsonrpc".into(), Value::from("2.0"));
        message.insert("id".into(), Value::from(id));
        message.insert("method".into(), Value::from(method));
        message.insert("params".into(), Value::Object(params));
        let message = Value::Object(message);

        let exchange = async {
            match &mut self.link {
                Link::Http(http) => http.exchange(method, name.as_deref(), id, &message).await,
                Link::Stdio(stdio) => stdio.exchange(id, &message).await,
            }
        };
        let response = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                method: method.to_owned(),
                seconds: REQUEST_TIMEOUT.as_secs(),
            })??;
        outcome(method, response, self.has_token())
    }

    /// Opens a `subscriptions/listen` for `task_id` (declaring `capabilities`, which must hold
    /// the Tasks extension). An HTTP refusal is an error here; on stdio it comes as the first
    /// message of [`Subscription::next`].
    pub async fn listen(
        &mut self,
        task_id: &str,
        capabilities: Value,
    ) -> Result<Subscription, ClientError> {
        self.next_id += 1;
        let id = self.next_id;
        let mut params = Map::new();
        params.insert(
            "notifications".into(),
            serde_json::json!({ "taskIds": [task_id] }),
        );
        params.insert("_meta".into(), request_meta(capabilities));
        let message = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": LISTEN, "params": params,
        });
        let has_token = self.has_token();
        let via = match &mut self.link {
            Link::Http(http) => {
                let opened = tokio::time::timeout(REQUEST_TIMEOUT, http.open_stream(id, &message));
                let response = opened.await.map_err(|_| ClientError::Timeout {
                    method: LISTEN.to_owned(),
                    seconds: REQUEST_TIMEOUT.as_secs(),
                })??;
                Via::Http {
                    response,
                    buf: Vec::new(),
                }
            }
            Link::Stdio(stdio) => {
                stdio.send(&message).await?;
                Via::Stdio
            }
        };
        Ok(Subscription {
            id,
            task_id: task_id.to_owned(),
            has_token,
            via,
            acknowledged: false,
        })
    }

    fn has_token(&self) -> bool {
        match &self.link {
            Link::Http(http) => http.token.is_some(),
            Link::Stdio(_) => token_from_env().is_some(),
        }
    }

    /// Ends the connection; a stdio child sees EOF and shuts down.
    pub async fn close(self) {
        if let Link::Stdio(stdio) = self.link {
            stdio.close().await;
        }
    }
}

const LISTEN: &str = "subscriptions/listen";

/// An open `subscriptions/listen` for one task ([`Connection::listen`]).
#[derive(Debug)]
pub struct Subscription {
    id: i64,
    task_id: String,
    has_token: bool,
    via: Via,
    acknowledged: bool,
}

#[derive(Debug)]
enum Via {
    /// The SSE response and the bytes of an event not complete yet.
    Http {
        response: reqwest::Response,
        buf: Vec<u8>,
    },
    /// Messages come on the connection's stdout, tagged with the subscription id.
    Stdio,
}

impl Subscription {
    /// The next `notifications/tasks` params (the task now), or `None` once the stream has
    /// ended (the task is terminal, or the server ended it). An acknowledgement that leaves the
    /// task out, or an error answer, is an error: the caller falls back to polling.
    pub async fn next(
        &mut self,
        conn: &mut Connection,
    ) -> Result<Option<Map<String, Value>>, ClientError> {
        loop {
            let message = match (&mut self.via, &mut conn.link) {
                (Via::Http { response, buf }, _) => next_sse_event(response, buf).await?,
                (Via::Stdio, Link::Stdio(stdio)) => Some(stdio.next_tagged(self.id).await?),
                (Via::Stdio, Link::Http(_)) => None,
            };
            let Some(message) = message else {
                return Ok(None);
            };
            if message.get("id") == Some(&Value::from(self.id)) {
                // The listen's own answer: an error, or its end.
                return outcome(LISTEN, message, self.has_token).map(|_| None);
            }
            match message.get("method").and_then(Value::as_str) {
                Some("notifications/subscriptions/acknowledged") => {
                    let accepted = message
                        .pointer("/params/notifications/taskIds")
                        .and_then(Value::as_array)
                        .is_some_and(|ids| ids.iter().any(|id| id == self.task_id.as_str()));
                    if !accepted {
                        return Err(ClientError::Protocol {
                            method: LISTEN.to_owned(),
                            detail: format!("task {} was not acknowledged", self.task_id),
                        });
                    }
                    self.acknowledged = true;
                }
                Some("notifications/tasks") if self.acknowledged => {
                    if let Some(Value::Object(task)) = message.get("params")
                        && task.get("taskId").and_then(Value::as_str) == Some(&self.task_id)
                    {
                        return Ok(Some(task.clone()));
                    }
                }
                _ => {}
            }
        }
    }
}

/// The next SSE event's JSON-RPC message; `None` at the end of the body.
async fn next_sse_event(
    response: &mut reqwest::Response,
    buf: &mut Vec<u8>,
) -> Result<Option<Value>, ClientError> {
    loop {
        if let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if let Ok(message) = serde_json::from_str::<Value>(&data.join("\n")) {
                return Ok(Some(message));
            }
            continue;
        }
        match response.chunk().await {
            Ok(Some(chunk)) => {
                buf.extend(chunk.iter().filter(|b| **b != b'\r'));
            }
            Ok(None) => return Ok(None),
            Err(e) => {
                return Err(ClientError::Protocol {
                    method: LISTEN.to_owned(),
                    detail: format!("the stream broke off: {}", root_cause(&e)),
                });
            }
        }
    }
}

/// `params._meta` of a 2026-07-28 request.
pub fn request_meta(capabilities: Value) -> Value {
    let mut info = Map::new();
    info.insert("name".into(), Value::from(CLIENT_NAME));
    info.insert("version".into(), Value::from(env!("CARGO_PKG_VERSION")));
    let mut meta = Map::new();
    meta.insert(
        META_PROTOCOL_VERSION.into(),
        Value::from(ProtocolVersion::V2026_07_28.as_str()),
    );
    meta.insert(META_CLIENT_CAPABILITIES.into(), capabilities);
    meta.insert(META_CLIENT_INFO.into(), Value::Object(info));
    Value::Object(meta)
}

pub(crate) fn token_from_env() -> Option<String> {
    std::env::var(TOKEN_ENV)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// The `result` of a response, or its error.
fn outcome(
    method: &str,
    response: Value,
    has_token: bool,
) -> Result<Map<String, Value>, ClientError> {
    let protocol = |detail: &str| ClientError::Protocol {
        method: method.to_owned(),
        detail: detail.to_owned(),
    };
    let Value::Object(mut response) = response else {
        return Err(protocol("the response is not a JSON object"));
    };
    if let Some(error) = response.get("error") {
        return Err(rpc_error(error, has_token));
    }
    match response.remove("result") {
        Some(Value::Object(result)) => Ok(result),
        _ => Err(protocol("the response has neither `result` nor `error`")),
    }
}

/// A JSON-RPC error object as a [`ClientError`]; auth and rate-limit refusals get their own.
fn rpc_error(error: &Value, has_token: bool) -> ClientError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)")
        .to_owned();
    let retry_after = error
        .get("data")
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_u64);
    match (code, retry_after) {
        (UNAUTHORIZED, _) if has_token => ClientError::TokenRefused(message),
        (UNAUTHORIZED, _) => ClientError::TokenMissing,
        (RATE_LIMITED, Some(seconds)) => ClientError::RateLimited(seconds),
        _ => ClientError::Rpc { code, message },
    }
}

#[derive(Debug)]
struct HttpLink {
    url: String,
    http: reqwest::Client,
    /// For `subscriptions/listen` streams: no overall timeout.
    streams: reqwest::Client,
    token: Option<String>,
}

impl HttpLink {
    fn new(url: &str) -> Result<HttpLink, ClientError> {
        let unreachable = |e: reqwest::Error| ClientError::Unreachable {
            url: url.to_owned(),
            reason: e.to_string(),
        };
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(unreachable)?;
        // Connecting is bounded; a stream then lasts as long as its task.
        let streams = reqwest::Client::builder()
            .connect_timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(unreachable)?;
        Ok(HttpLink {
            url: url.to_owned(),
            http,
            streams,
            token: token_from_env(),
        })
    }

    /// A POST of `method` to the endpoint with the modern-era headers and the bearer token.
    fn post(&self, client: &reqwest::Client, method: &str) -> reqwest::RequestBuilder {
        let request = client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .header(
                HEADER_PROTOCOL_VERSION,
                ProtocolVersion::V2026_07_28.as_str(),
            )
            .header(HEADER_METHOD, method);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn exchange(
        &self,
        method: &str,
        name: Option<&str>,
        id: i64,
        message: &Value,
    ) -> Result<Value, ClientError> {
        let mut request = self.post(&self.http, method);
        if let Some(name) = name {
            request = request.header(HEADER_NAME, name);
        }
        let response = request
            .body(message.to_string())
            .send()
            .await
            .map_err(|e| self.send_error(method, &e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let text = response
            .text()
            .await
            .map_err(|e| self.send_error(method, &e))?;
        let body = if is_sse {
            sse_response(&text, id)
        } else {
            serde_json::from_str::<Value>(&text).ok()
        };
        match status.as_u16() {
            401 if self.token.is_some() => {
                let message = body
                    .as_ref()
                    .and_then(|b| b.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or("401 Unauthorized");
                Err(ClientError::TokenRefused(message.to_owned()))
            }
            401 => Err(ClientError::TokenMissing),
            429 => Err(retry_after
                .or_else(|| {
                    body.as_ref()
                        .and_then(|b| b.pointer("/error/data/retryAfterSeconds"))
                        .and_then(Value::as_u64)
                })
                .map_or(ClientError::RateLimitedNoHint, ClientError::RateLimited)),
            _ => match body {
                // A JSON-RPC answer says more than its HTTP status (400/404 carry errors).
                Some(body) if body.get("result").is_some() || body.get("error").is_some() => {
                    Ok(body)
                }
                _ => Err(ClientError::Http {
                    status: status.as_u16(),
                    body: quote(&text),
                }),
            },
        }
    }

    /// POSTs a `subscriptions/listen`: an SSE answer is returned still open (it lasts as long
    /// as the task, so it has no overall timeout); any other answer is read as an error.
    async fn open_stream(
        &self,
        id: i64,
        message: &Value,
    ) -> Result<reqwest::Response, ClientError> {
        let response = self
            .post(&self.streams, LISTEN)
            .body(message.to_string())
            .send()
            .await
            .map_err(|e| self.send_error(LISTEN, &e))?;
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if response.status().is_success() && is_sse {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        match serde_json::from_str::<Value>(&text) {
            Ok(body) if body.get("error").is_some() => {
                Err(outcome(LISTEN, body, self.token.is_some()).err().unwrap_or(
                    ClientError::Http {
                        status,
                        body: quote(&text),
                    },
                ))
            }
            _ => {
                let _ = id;
                Err(ClientError::Http {
                    status,
                    body: quote(&text),
                })
            }
        }
    }

    fn send_error(&self, method: &str, e: &reqwest::Error) -> ClientError {
        if e.is_timeout() {
            ClientError::Timeout {
                method: method.to_owned(),
                seconds: REQUEST_TIMEOUT.as_secs(),
            }
        } else {
            ClientError::Unreachable {
                url: self.url.clone(),
                reason: root_cause(e),
            }
        }
    }
}

/// The innermost cause of an error, e.g. "Connection refused (os error 111)": the outer
/// layers only repeat the URL and say "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The JSON-RPC response with `id` among the events of a `text/event-stream` body.
fn sse_response(text: &str, id: i64) -> Option<Value> {
    let normalized = text.replace("\r\n", "\n");
    normalized.split("\n\n").find_map(|event| {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let message: Value = serde_json::from_str(&data.join("\n")).ok()?;
        (message.get("id") == Some(&Value::from(id))).then_some(message)
    })
}

fn quote(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    let mut quoted: String = text
        .chars()
        .take(MAX_QUOTED_BODY)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > MAX_QUOTED_BODY {
        quoted.push('…');
    }
    quoted
}

#[derive(Debug)]
struct StdioLink {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Copies the child's stderr to ours; finishes when the child closes it.
    stderr: Option<tokio::task::JoinHandle<()>>,
    /// Messages of an open subscription read while waiting for another answer.
    tagged: std::collections::VecDeque<Value>,
}

impl StdioLink {
    fn spawn(config: Option<&PathBuf>) -> Result<StdioLink, ClientError> {
        let exe = std::env::current_exe().map_err(|e| {
            ClientError::Stdio(format!(
                "cannot find this program to start `agent-mcp stdio`: {e}"
            ))
        })?;
        let mut command = Command::new(exe);
        command.arg("stdio");
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        // The server's info and warning logs would bury the progress (a failed task is
        // reported by the client itself); its errors still show.
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "error");
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Its own process group: a Ctrl-C in the terminal reaches only this client, which
        // then cancels the task through the server instead of the server dying under it.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| ClientError::Stdio(format!("cannot start `agent-mcp stdio`: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ClientError::Stdio(
                "cannot talk to `agent-mcp stdio`: its stdin/stdout are not piped".into(),
            ));
        };
        let stderr = child.stderr.take().map(|stderr| {
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if !is_audit_record(&line) {
                        eprintln!("{line}");
                    }
                }
            })
        });
        Ok(StdioLink {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout).lines(),
            stderr,
            tagged: std::collections::VecDeque::new(),
        })
    }

    async fn send(&mut self, message: &Value) -> Result<(), ClientError> {
        let mut line = message.to_string();
        line.push('\n');
        let written = match self.stdin.as_mut() {
            Some(stdin) => match stdin.write_all(line.as_bytes()).await {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            },
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if written.is_err() {
            return Err(self.exited().await);
        }
        Ok(())
    }

    async fn exchange(&mut self, id: i64, message: &Value) -> Result<Value, ClientError> {
        self.send(message).await?;
        loop {
            let message = self.read().await?;
            if message.get("id") == Some(&Value::from(id)) {
                return Ok(message);
            }
            // A subscription's messages wait for it; other notifications, and answers to
            // requests given up on, are skipped.
            if subscription_of(&message).is_some() {
                self.tagged.push_back(message);
            }
        }
    }

    /// The next message of subscription `id`: its notifications, or the listen's answer.
    async fn next_tagged(&mut self, id: i64) -> Result<Value, ClientError> {
        let ours = |m: &Value| {
            m.get("id") == Some(&Value::from(id)) || subscription_of(m) == Some(&Value::from(id))
        };
        if let Some(i) = self.tagged.iter().position(ours)
            && let Some(message) = self.tagged.remove(i)
        {
            return Ok(message);
        }
        loop {
            let message = self.read().await?;
            if ours(&message) {
                return Ok(message);
            }
        }
    }

    /// The next JSON message on the child's stdout.
    async fn read(&mut self) -> Result<Value, ClientError> {
        loop {
            match self.stdout.next_line().await {
                Ok(Some(line)) => {
                    if let Ok(message) = serde_json::from_str::<Value>(&line) {
                        return Ok(message);
                    }
                }
                Ok(None) | Err(_) => return Err(self.exited().await),
            }
        }
    }

    /// The error for a child that stopped answering, with its exit status if it has one.
    async fn exited(&mut self) -> ClientError {
        let status = match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => format!(" ({status})"),
            _ => String::new(),
        };
        // Its last words come first.
        if let Some(stderr) = self.stderr.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), stderr).await;
        }
        ClientError::Stdio(format!(
            "`agent-mcp stdio` stopped before answering{status}; see its message above"
        ))
    }

    async fn close(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(STDIO_EXIT_WAIT, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        if let Some(stderr) = self.stderr.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), stderr).await;
        }
    }
}

/// The subscription a message belongs to: `_meta["io.modelcontextprotocol/subscriptionId"]`
/// of its params, or of its result (a listen's final answer).
fn subscription_of(message: &Value) -> Option<&Value> {
    let meta = message
        .get("params")
        .or_else(|| message.get("result"))
        .and_then(|p| p.get("_meta"))?;
    meta.get(SUBSCRIPTION_ID)
}

/// The server's audit layer writes one JSON record per call to stderr unless `audit.file` is
/// set; they are for operators, not for the person following one task, so they are dropped.
fn is_audit_record(line: &str) -> bool {
    line.starts_with('{')
        && serde_json::from_str::<Value>(line).is_ok_and(|record| {
            ["time", "era", "transport", "method", "outcome"]
                .iter()
                .all(|key| record.get(key).is_some())
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn meta_names_version_capabilities_and_client() {
        assert_eq!(
            request_meta(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})),
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                "io.modelcontextprotocol/clientInfo":
                    {"name": "agent-mcp-cli", "version": env!("CARGO_PKG_VERSION")}
            })
        );
    }

    #[test]
    fn errors_become_messages_a_person_can_act_on() {
        let refused = json!({"code": -32001, "message": "Missing bearer token"});
        assert!(matches!(
            rpc_error(&refused, false),
            ClientError::TokenMissing
        ));
        assert_eq!(
            rpc_error(&refused, true).to_string(),
            "the server refused the token in AGENT_MCP_TOKEN: Missing bearer token"
        );
        let limited = json!({"code": -32000, "message": "Rate limit exceeded",
                             "data": {"retryAfterSeconds": 7}});
        assert_eq!(
            rpc_error(&limited, false).to_string(),
            "rate limited: retry in 7 s"
        );
        let other = json!({"code": -32000, "message": "Request body too large"});
        assert_eq!(
            rpc_error(&other, false).to_string(),
            "Request body too large (JSON-RPC error -32000)"
        );
        assert_eq!(
            outcome("tools/call", json!({"jsonrpc": "2.0", "id": 1}), false)
                .unwrap_err()
                .to_string(),
            "unexpected answer to tools/call: the response has neither `result` nor `error`"
        );
    }

    #[test]
    fn sse_bodies_are_searched_for_the_answer() {
        let body = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n\
                    data: {\"jsonrpc\":\"2.0\",\"id\":3,\n\
                    data: \"result\":{}}\n\n";
        assert_eq!(
            sse_response(body, 3),
            Some(json!({"jsonrpc": "2.0", "id": 3, "result": {}}))
        );
        assert_eq!(sse_response(body, 4), None);
    }

    #[test]
    fn only_audit_records_are_dropped_from_the_servers_stderr() {
        assert!(is_audit_record(
            r#"{"time":"t","id":2,"era":"modern","version":"2026-07-28","transport":"stdio","method":"tools/call","outcome":"ok"}"#
        ));
        assert!(!is_audit_record(
            "2026-11-30T07:37:25Z ERROR agent_mcp: cannot open the store"
        ));
        assert!(!is_audit_record(r#"{"error":"x"}"#));
    }

    #[test]
    fn quoted_bodies_are_short_and_single_line() {
        assert_eq!(quote("  \n"), "(empty body)");
        assert_eq!(quote("bad\ngateway"), "bad gateway");
        assert_eq!(quote(&"x".repeat(300)).chars().count(), MAX_QUOTED_BODY + 1);
    }
}
