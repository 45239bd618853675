//! stdio: one JSON-RPC message per line in, one per line out.
//!
//! Requests are handled concurrently (a slow `tools/call` does not hold up a `tools/list`);
//! responses are written by one writer in the order they finish. Only MCP messages go to the
//! output; logs belong on stderr. A `notifications/cancelled` fires the named request's
//! cancellation token and suppresses its response. Returns on end of input once every request
//! in flight has been answered.
//!
//! A request a layer refuses ([`Refusal`](crate::protocol::Refusal)) is answered with the
//! refusal's JSON-RPC error alone (e.g. `-32000` with `data.retryAfterSeconds` when rate
//! limited); stdio has no status codes or headers to add. Its caller presents no credential:
//! the auth layer names it `stdio`.
//!
//! A response that is a stream ([`Payload::Stream`]: `subscriptions/listen`, or the 2025-11-25
//! `notifications/tasks/status` after a task-augmented `tools/call`) is written message by
//! message as it comes; `notifications/cancelled` naming the request ends it, as does end of
//! input. It does not hold a handler slot while it lasts.
//!
//! Memory is bounded when the client stops reading: at most [`MAX_IN_FLIGHT`] requests are
//! handled at once and at most [`OUTPUT_QUEUE`] answers wait for the output. Past either,
//! input is not read until the client catches up (backpressure, nothing dropped).
//!
//! ```no_run
//! # async fn run(stack: agent_mcp::Stack) -> std::io::Result<()> {
//! agent_mcp::transport::stdio::serve(stack, tokio::io::stdin(), tokio::io::stdout()).await
//! # }
//! ```

use crate::plugin::McpService;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::protocol::jsonrpc::{EnvelopeError, response_json};
use crate::protocol::{
    ErrorObject, Incoming, McpRequest, Method, Payload, ProtocolVersion, RequestContext, RequestId,
    Transport, VersionHints, classify,
};
pub use crate::transport::stdio_ask::{SessionElicits, StdioAsker, TaskApprovals};
use crate::transport::telemetry::ServerOperation;

/// The longest line accepted; longer ones are answered with an error and skipped.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Requests handled at once; the next line is read when one of them has been answered.
pub const MAX_IN_FLIGHT: usize = 1024;

/// Answers waiting for the output writer; handlers wait when it is full.
pub const OUTPUT_QUEUE: usize = 256;

type InFlight = Arc<Mutex<HashMap<RequestId, CancellationToken>>>;

/// Serves `service` over a line-delimited byte stream until end of input.
pub async fn serve<S, R, W>(service: S, input: R, output: W) -> std::io::Result<()>
where
    S: McpService,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_with(service, input, output, StdioOptions::default()).await
}

/// How [`serve_with`] serves: the line-length cap, and whether a 2025 session that declared
/// `elicitation` is asked for approvals.
#[derive(Clone, Debug)]
pub struct StdioOptions {
    /// The longest line accepted; longer ones are answered with an error and skipped.
    pub max_line_bytes: usize,
    /// Asks for approvals with server→client `elicitation/create` requests (see
    /// [`StdioAsker`]); `None`: no asking.
    pub asker: Option<StdioAsker>,
}

impl Default for StdioOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            asker: None,
        }
    }
}

/// [`serve`] with the given [`StdioOptions`] (a line-length cap, an approval asker).
pub async fn serve_with<S, R, W>(
    service: S,
    input: R,
    output: W,
    options: StdioOptions,
) -> std::io::Result<()>
where
    S: McpService,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_inner(
        service,
        input,
        output,
        options.max_line_bytes,
        options.asker,
    )
    .await
}

async fn serve_inner<S, R, W>(
    service: S,
    input: R,
    output: W,
    max_line_bytes: usize,
    asker: Option<StdioAsker>,
) -> std::io::Result<()>
where
    S: McpService,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Vec<u8>>(OUTPUT_QUEUE);
    let writer = tokio::spawn(write_lines(output, rx));
    let handlers = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let in_flight: InFlight = Arc::default();
    // Fired at end of input: the client is gone, so open streams end.
    let input_ended = CancellationToken::new();
    let mut negotiated: Option<ProtocolVersion> = None;
    // The 2025 session's initialize declared `elicitation` (and this transport can ask).
    let mut session_elicits = false;
    let mut tasks = JoinSet::new();
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, max_line_bytes).await? {
            LineRead::Eof => break,
            LineRead::TooLong => {
                let error = ErrorObject::invalid_request(format!(
                    "the message is longer than {max_line_bytes} bytes"
                ));
                send(&tx, &response_json(None, Err(&error))).await;
                continue;
            }
            LineRead::Line => {}
        }
        let text = trim_ascii(&line);
        if text.is_empty() {
            continue;
        }
        let (id, method, params) = match Incoming::from_slice(text) {
            Ok(Incoming::Request { id, method, params }) => (Some(id), method, params),
            Ok(Incoming::Notification { method, params }) => (None, method, params),
            Ok(Incoming::Response { .. }) => {
                if let Some(asker) = &asker {
                    asker.answered(text).await;
                }
                continue;
            }
            Err(EnvelopeError { id, error }) => {
                send(&tx, &response_json(id.as_ref(), Err(&error))).await;
                continue;
            }
        };
        if id.is_none() && method == Method::Cancelled {
            cancel_request(&in_flight, &params);
            continue;
        }
        let hints = VersionHints {
            header: None,
            negotiated,
            default_legacy: false,
        };
        let classified = match classify(&method, &params, hints) {
            Ok(c) => c,
            Err(error) => {
                if id.is_some() {
                    send(&tx, &response_json(id.as_ref(), Err(&error))).await;
                }
                continue;
            }
        };
        let declares_elicitation = method == Method::Initialize
            && params
                .get("capabilities")
                .and_then(|c| c.get("elicitation"))
                .is_some_and(Value::is_object);
        let mut ctx = RequestContext::new(classified.version, Transport::Stdio);
        if session_elicits && ctx.era() == crate::protocol::Era::Legacy {
            ctx.extensions.insert(SessionElicits);
        }
        ctx.client_capabilities = classified.client_capabilities;
        ctx.client_info = classified.client_info;
        let is_initialize = method == Method::Initialize;
        let operation = ServerOperation::start(
            &method,
            id.as_ref(),
            params.get("name").and_then(Value::as_str),
            params.get("_meta").and_then(Value::as_object),
            None,
            &mut ctx,
        );
        let request = McpRequest::new(id.clone(), method, params, ctx);
        if is_initialize {
            // Handled inline: later lines of this process are classified with its outcome.
            let Ok(response) = service.clone().oneshot(request).await;
            if let Some(operation) = operation {
                operation.finish(&response);
            }
            // The service answers in the version it negotiated.
            if matches!(response.payload, Payload::Result(_)) {
                negotiated = Some(response.version);
                session_elicits = declares_elicitation && asker.is_some();
            }
            send_line(&tx, response.to_bytes()).await;
            continue;
        }
        // Wait for a free handler slot (never closed, so this only waits).
        let Ok(slot) = handlers.clone().acquire_owned().await else {
            continue;
        };
        if let Some(id) = &id {
            lock(&in_flight).insert(id.clone(), request.ctx.cancel.clone());
        }
        let service = service.clone();
        let tx = tx.clone();
        let in_flight = in_flight.clone();
        let ended = input_ended.clone();
        let asker = asker.clone().filter(|_| session_elicits);
        tasks.spawn(async move {
            let cancel = request.ctx.cancel.clone();
            let Ok(response) = service.oneshot(request).await;
            if let (Some(asker), Some(task)) = (&asker, response.ids.task_id) {
                // A task of this session: its approvals are asked here while it waits.
                asker.follow(task, tx.clone(), ended.clone());
            }
            if let Some(operation) = operation {
                operation.finish(&response);
            }
            if let Payload::Stream(stream) = &response.payload
                && let Some(mut stream) = stream.take()
            {
                // A stream (subscriptions/listen, 2025 task notifications) may last as long as
                // its tasks: it gives back its handler slot and runs until it ends, the client
                // cancels it (notifications/cancelled with its id) or input ends. Each message
                // is pulled only once the previous one is queued for the output.
                drop(slot);
                loop {
                    let next = tokio::select! {
                        next = stream.next() => next,
                        () = cancel.cancelled() => None,
                        () = ended.cancelled() => None,
                    };
                    let Some(message) = next else { break };
                    send(&tx, &message).await;
                }
                if let Some(id) = &id {
                    lock(&in_flight).remove(id);
                }
                return;
            }
            if let Some(id) = &id {
                lock(&in_flight).remove(id);
            }
            // A cancelled request gets no response (the protocol says so).
            if cancel.is_cancelled() {
                return;
            }
            send_line(&tx, response.to_bytes()).await;
            drop(slot);
        });
        // Reap finished handlers so the set does not grow with the session.
        while tasks.try_join_next().is_some() {}
    }
    input_ended.cancel();
    while tasks.join_next().await.is_some() {}
    drop(tx);
    writer
        .await
        .map_err(|e| std::io::Error::other(format!("stdout writer failed: {e}")))?
}

fn lock(map: &InFlight) -> std::sync::MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
    map.lock().unwrap_or_else(|e| e.into_inner())
}

fn cancel_request(in_flight: &InFlight, params: &serde_json::Map<String, Value>) {
    let id = match params.get("requestId") {
        Some(Value::String(s)) => RequestId::String(s.clone()),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) => RequestId::Number(n),
            None => return,
        },
        _ => return,
    };
    if let Some(token) = lock(in_flight).get(&id) {
        token.cancel();
    }
}

/// Queues one answer for the writer, waiting while [`OUTPUT_QUEUE`] answers are queued.
/// Sends a message built as a `Value` (the edge's own errors, a stream's messages).
async fn send(tx: &mpsc::Sender<Vec<u8>>, json: &Value) {
    send_line(tx, serde_json::to_vec(json).ok()).await;
}

/// Sends one encoded message as a line (JSON escapes every newline inside it); `None` is a
/// response with nothing to send.
async fn send_line(tx: &mpsc::Sender<Vec<u8>>, bytes: Option<Vec<u8>>) {
    if let Some(mut bytes) = bytes {
        bytes.push(b'\n');
        // The writer only stops when output is gone; then there is no one to answer.
        let _ = tx.send(bytes).await;
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut output: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
) -> std::io::Result<()> {
    while let Some(line) = rx.recv().await {
        output.write_all(&line).await?;
        output.flush().await?;
    }
    output.flush().await
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line into `buf`, never holding more than `max` bytes: an
/// over-long line is consumed and reported as `TooLong`.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if too_long {
                LineRead::TooLong
            } else if read_any {
                LineRead::Line
            } else {
                LineRead::Eof
            });
        }
        read_any = true;
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let consumed = done.unwrap_or(available.len());
        reader.consume(consumed);
        if done.is_some() {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    bytes.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::McpResult;
    use std::collections::BTreeSet;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    /// A client that writes many requests and does not read: the server stops reading input
    /// instead of piling up answers; once the client reads, every request is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_gets_backpressure_not_unbounded_buffering() {
        const LINES: usize = 20_000;
        let handled = Arc::new(AtomicUsize::new(0));
        let counter = handled.clone();
        let service = tower::service_fn(move |req: McpRequest| {
            counter.fetch_add(1, Ordering::Relaxed);
            async move { Ok::<_, Infallible>(req.result(McpResult::empty())) }
        });
        let (mut client_in, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, client_out) = tokio::io::duplex(1024);
        let serving = tokio::spawn(serve(service, server_in, server_out));
        let written = Arc::new(AtomicUsize::new(0));
        let writing = {
            let written = written.clone();
            tokio::spawn(async move {
                for id in 0..LINES {
                    let line = format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2025-11-25\"}}}}}}\n"
                    );
                    client_in.write_all(line.as_bytes()).await.unwrap();
                    written.fetch_add(1, Ordering::Relaxed);
                }
                client_in.shutdown().await.unwrap();
            })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (stalled_at, handled_then) = (
            written.load(Ordering::Relaxed),
            handled.load(Ordering::Relaxed),
        );
        assert!(
            handled_then <= MAX_IN_FLIGHT + OUTPUT_QUEUE + 64,
            "{handled_then} requests handled with nobody reading the answers"
        );
        assert!(
            stalled_at < LINES,
            "all input was read while nothing was written out"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            written.load(Ordering::Relaxed),
            stalled_at,
            "input is still being read"
        );
        // The client reads now: everything is answered, nothing was dropped.
        let mut ids = BTreeSet::new();
        let mut lines = tokio::io::BufReader::new(client_out).lines();
        while let Some(line) = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("answers keep coming")
            .unwrap()
        {
            let answer: Value = serde_json::from_str(&line).unwrap();
            assert!(answer["result"].is_object(), "{line}");
            ids.insert(answer["id"].as_u64().unwrap());
        }
        writing.await.unwrap();
        serving.await.unwrap().unwrap();
        assert_eq!(ids.len(), LINES);
        assert_eq!(handled.load(Ordering::Relaxed), LINES);
    }
}
