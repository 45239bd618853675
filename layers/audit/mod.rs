//! The audit log: one JSON line per `tools/call`, per `tasks/*` request, and per refused or
//! failed request.
//!
//! Audit is the outermost layer, so it also sees what auth and the rate limiter refuse. A
//! request is recorded when its method is `tools/call` or `tasks/*`, or when its outcome is not
//! `ok` (any JSON-RPC error, any tool error). Each line holds:
//!
//! | key | value |
//! |---|---|
//! | `time` | arrival, RFC 3339 UTC with microseconds |
//! | `id` | the JSON-RPC id (`null` for a notification) |
//! | `era`, `version` | `modern`/`legacy` and the protocol version |
//! | `transport`, `peer` | `http`/`stdio`/`in-process`; the HTTP peer address |
//! | `identity` | the token name, `stdio`, or `null` (anonymous, or refused) |
//! | `client` | `{name, version}` of the request's `clientInfo`, or `null` |
//! | `method`, `tool` | the JSON-RPC method; `params.name` of a `tools/call` |
//! | `task_id`, `session_id` | from the arguments, or the ids the service reports on the response ([`ResponseIds`](crate::plugin::ResponseIds)); UUIDs only |
//! | `outcome` | `ok`, `tool_error`, `protocol_error`, `unauthorized`, `rate_limited` ([`Outcome`](crate::plugin::Outcome)) |
//! | `error_code`, `error_message` | the JSON-RPC error, or the tool error's text |
//! | `duration_us` | time spent inside the stack |
//! | `args` | `request_bytes`, `request_sha256`, `temperature`, `image_count`, `image_bytes` (decoded size computed from the base64 length; nothing is decoded) and, only with `audit.include_request`, `request` |
//! | `suppressed` | on a refusal line only, when some were: refusals of this peer counted but not written since its previous line |
//! | `answers` | on a `tasks/update` line, and a `tools/call` retry carrying `inputResponses` (MRTR): each input request key answered and its action (`accept`, `decline`, `cancel`, `invalid`); with `identity`, who decided an approval |
//!
//! Approval decisions (issue 29) are lines of their own, sent by the agent's runner through
//! [`DecisionLog`](crate::plugin::task::input::DecisionLog) (the sink implements it):
//! `{"time","event":"approval","task_id","key","tool","decision","by"}`, with `decision` one of
//! `accept`, `decline`, `cancel`, `timeout`, `deny` (the policy) or `refused` (the client can be
//! asked by no path; `key` is `null` then), and `by` the identity whose answer counted (`null`
//! for an anonymous caller, the timeout or a refusal).
//!
//! What is never written: a token (auth never puts one in a message), image data, a URL's
//! password, or the request text unless `audit.include_request` is on. Every field a client
//! chooses is capped ([`MAX_ID_BYTES`], [`MAX_NAME_BYTES`]): a string id longer than 128 bytes
//! is written as its first 64 and its length, method and tool names, the identity and
//! `client` at 128 bytes, error messages at 1000, an included request text at 256 KiB; runs
//! of 40 or more base64-alphabet characters in messages and names are replaced by
//! `[N chars redacted]`.
//!
//! Refusals (`unauthorized`, `rate_limited`) are recorded within a budget per peer
//! ([`RefusalThrottle`]: 20 at once, 10 a minute; an IPv6 peer counts by its /64), so a flood
//! of them is a few lines and a count, never a full disk. A request the HTTP edge refuses from
//! its headers ([`Auditor::record_refusal`]) has `method` [`BODY_NOT_READ`].
//!
//! Lines go to a file (`audit.file`: appended, created with mode 0600, parent directories
//! created; one that cannot be opened stops the server at start) or to stderr, written by a
//! background thread: the request path only queues a record (see [`AuditSink`]), into a
//! bounded queue, so a stderr nobody reads or a stuck disk costs lines (counted in
//! `agent_mcp_log_lines_dropped_total{log="audit"}` and said once), never a request. A file is
//! reopened on [`AuditSink::reopen`] (SIGHUP in the server, for logrotate) and rotated by size
//! with `audit.max_bytes`/`audit.keep` ([`Rotation`]; the server's default is 100 MiB); lines
//! are never split across files. A failing write is reported on the application log and never
//! touches the response. The identity is the one an inner auth layer reports on the response
//! ([`McpResponse::identity`](crate::plugin::McpResponse::identity)), or else the one the
//! request arrived with. A `debug` event under the target `mcp::audit` repeats method, tool,
//! identity, outcome and duration (no arguments).
//!
//! ```
//! use agent_mcp_layers::audit::{AuditLayer, AuditSink};
//! use agent_mcp_layers::plugin::*;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("logs/audit.jsonl");
//! let mut svc = ServiceBuilder::new()
//!     .layer(AuditLayer::new(AuditSink::file(&path).unwrap()))
//!     .service_fn(|req: McpRequest| async move {
//!         Ok::<_, std::convert::Infallible>(req.result(McpResult::tool_text("done", false)))
//!     });
//! let mut params = serde_json::Map::new();
//! params.insert("name".into(), "agent_run".into());
//! params.insert("arguments".into(), serde_json::json!({"request": "list the files"}));
//! let req = McpRequest::new(
//!     Some(RequestId::Number(1)),
//!     "tools/call",
//!     params,
//!     RequestContext::new(ProtocolVersion::V2026_07_28, Transport::Stdio),
//! );
//! svc.ready().await.unwrap().call(req).await.unwrap();
//!
//! // The line is written in the background.
//! let mut text = String::new();
//! for _ in 0..500 {
//!     text = std::fs::read_to_string(&path).unwrap_or_default();
//!     if text.ends_with('\n') { break; }
//!     std::thread::sleep(std::time::Duration::from_millis(10));
//! }
//! let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
//! assert_eq!(line["outcome"], "ok");
//! assert_eq!(line["tool"], "agent_run");
//! assert_eq!(line["args"]["request_bytes"], 14);
//! assert!(line["args"].get("request").is_none());
//! # }
//! ```

mod record;
mod service;
mod sink;
#[cfg(all(test, unix))]
mod test_files;
mod throttle;

pub use record::{
    ArgsSummary, AuditRecord, ClientSummary, MAX_ID_BYTES, MAX_NAME_BYTES, base64_decoded_len,
    scrub_message,
};
pub use service::{Audit, AuditLayer, AuditOptions, Auditor, BODY_NOT_READ, Pending};
pub use sink::{AuditSink, LINES_DROPPED, Rotation};
pub use throttle::{
    BURST, PER_MINUTE, PeerKey, REFUSALS_SUPPRESSED, RefusalThrottle, SWEEP_EVERY, Verdict,
};
