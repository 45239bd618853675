//! Per-caller rate limits (`docs/contract.md` §7: over a budget, `429` with `Retry-After`).
//!
//! The limit stops abuse, never a polite client. The server's default
//! ([`RateLimits`] from `rate_limit` in `agent.yaml`) keeps two budgets per caller, split by cost:
//!
//! | budget | spent by | default |
//! |---|---|---|
//! | tasks (`rate_limit.per_minute`, `burst`) | `tools/call agent_run`: each call may queue minutes of model work | 60/min, burst 60 |
//! | reads (`rate_limit.reads`) | everything else: `agent_status`, `tasks/*`, `tools/list`, `server/discover`, … | 1200/min, burst 300 |
//!
//! and leaves stdio unlimited (`rate_limit.stdio: false`): over stdio there is exactly one
//! client, and it started the server. A client that polls each of its tasks at the advertised
//! `pollIntervalMs` (which grows with the task's place in the queue) stays far inside the read
//! budget however many tasks it has queued. [`RateLimits::one_budget`] is one budget for
//! every request on every transport, for embedders who want that.
//!
//! A `governor` keyed GCRA limiter counts each request against its caller:
//!
//! - the caller's identity when one is known (the token name set by the auth layer, or `stdio`),
//! - else the peer address of an anonymous HTTP caller: an IPv4 address, or the /64 of an IPv6
//!   one (a host usually holds a whole /64, so per address it could take a fresh budget for
//!   every one of its 2^64 addresses),
//! - else the local caller `stdio` (stdio, in-process calls, HTTP without a peer address).
//!
//! A request over the limit never reaches the inner service: it gets
//! [`Refusal::RateLimited`](crate::plugin::Refusal::RateLimited) with `n`, the whole seconds
//! to wait (rounded up, at least 1). Every transport sends it as the JSON-RPC error `-32000`
//! whose message says when to retry and whose `data` is `{"retryAfterSeconds": n}`; the HTTP
//! edge adds `429 Too Many Requests` and `Retry-After: n`. `poll_ready` never waits, unlike
//! `tower::limit::RateLimit`, which parks callers
//! in `poll_ready` and so cannot answer 429.
//!
//! With `store.backend: postgres`, [`SharedRateLimitLayer`] keeps the same budgets in the
//! database ([`SharedBuckets`]), so they hold across every instance; when the database cannot
//! answer, each instance counts against its own in-process budget until it can.
//!
//! Edge cases:
//! - Notifications are not counted and never refused: they get no answer that could carry a
//!   refusal, and they cost nothing (the service only accepts them).
//! - `per_minute` is the sustained rate (one request back every `60 / per_minute` seconds);
//!   `burst` is how many a rested caller may send at once.
//! - Keys whose bucket is full again are pruned every 4096 requests (off the request path, on
//!   tokio's blocking pool), so memory follows the callers of the last minute, not all callers
//!   ever seen.
//!
//! ```
//! use std::num::NonZeroU32;
//! use agent_mcp_layers::rate_limit::{RateLimitLayer, RateLimits};
//! use agent_mcp_layers::plugin::*;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let two = NonZeroU32::new(2).unwrap();
//! let mut svc = ServiceBuilder::new()
//!     .layer(RateLimitLayer::new(RateLimits::one_budget(NonZeroU32::new(60).unwrap(), two)))
//!     .service_fn(|req: McpRequest| async move {
//!         Ok::<_, std::convert::Infallible>(req.result(McpResult::empty()))
//!     });
//! let call = |id| McpRequest::new(
//!     Some(RequestId::Number(id)),
//!     "tools/list",
//!     Default::default(),
//!     RequestContext::new(ProtocolVersion::V2026_07_28, Transport::Stdio),
//! );
//! for id in 1..=2 {
//!     let ok = svc.ready().await.unwrap().call(call(id)).await.unwrap();
//!     assert!(matches!(ok.payload, Payload::Result(_)));
//! }
//! let refused = svc.ready().await.unwrap().call(call(3)).await.unwrap();
//! assert_eq!(refused.refusal().and_then(Refusal::retry_after_seconds), Some(1));
//! assert_eq!(refused.outcome(), Outcome::RateLimited);
//! assert_eq!(refused.error_code(), Some(-32000));
//! # }
//! ```

mod limiter;
mod service;
mod shared;

pub use limiter::{CallerKey, CallerLimiter, peer_key};
pub use service::{
    Budgets, RATE_LIMITED, RateLimit, RateLimitLayer, RateLimits, retry_after_seconds,
};
pub use shared::{SharedBuckets, SharedRateLimit, SharedRateLimitLayer, Verdict};
