//! [`SharedRateLimitLayer`]: the same two budgets as [`RateLimitLayer`], with the buckets in a
//! place several server processes share ([`SharedBuckets`], e.g. the PostgreSQL store), so a
//! caller's budget is the same whichever instance answers.
//!
//! When the shared buckets cannot answer (the database is unreachable), the request is counted
//! against this process's own in-process budget instead ([`RateLimitLayer`]), and a warning is
//! logged: limits still hold per instance (a caller spreading requests over N instances may
//! get up to N budgets) until the buckets answer again.

use std::convert::Infallible;
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use super::limiter::CallerKey;
use super::service::{Budgets, RateLimits, retry_after_seconds};
use crate::plugin::{AGENT_RUN, McpRequest, McpResponse, Refusal, Transport};

/// What a shared bucket said.
pub type Verdict = Result<(), Duration>;

/// Buckets shared by several processes (GCRA per key).
pub trait SharedBuckets: Send + Sync + std::fmt::Debug + 'static {
    /// Takes one cell from bucket `key`, which allows `per_minute` sustained and `burst` at
    /// once: `Ok(Ok(()))` taken, `Ok(Err(wait))` refused until `wait` has passed, `Err(why)`
    /// the buckets cannot answer now.
    fn take(
        &self,
        key: String,
        per_minute: NonZeroU32,
        burst: NonZeroU32,
    ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'static>>;
}

#[derive(Clone, Copy, Debug)]
struct Quota {
    per_minute: NonZeroU32,
    burst: NonZeroU32,
    counts: &'static str,
    name: &'static str,
}

/// Applies [`SharedRateLimit`].
#[derive(Clone, Debug)]
pub struct SharedRateLimitLayer {
    buckets: Arc<dyn SharedBuckets>,
    main: Quota,
    reads: Option<Quota>,
    limit_stdio: bool,
    /// Counts when the buckets cannot answer.
    fallback: Budgets,
}

impl SharedRateLimitLayer {
    /// The budgets `limits` asks for, kept in `buckets`.
    pub fn new(limits: RateLimits, buckets: Arc<dyn SharedBuckets>) -> Self {
        let reads = limits.reads.map(|(per_minute, burst)| Quota {
            per_minute,
            burst,
            counts: "requests",
            name: "reads",
        });
        let main = match reads {
            Some(_) => Quota {
                per_minute: limits.per_minute,
                burst: limits.burst,
                counts: "new tasks (agent_run calls)",
                name: "tasks",
            },
            None => Quota {
                per_minute: limits.per_minute,
                burst: limits.burst,
                counts: "requests",
                name: "all",
            },
        };
        Self {
            buckets,
            main,
            reads,
            limit_stdio: limits.stdio,
            fallback: Budgets::from(limits),
        }
    }
}

impl<S> Layer<S> for SharedRateLimitLayer {
    type Service = SharedRateLimit<S>;

    fn layer(&self, inner: S) -> SharedRateLimit<S> {
        SharedRateLimit {
            inner,
            config: self.clone(),
        }
    }
}

/// Refuses a caller's request over its shared budget (`-32000`, HTTP 429 with `Retry-After`);
/// passes everything else to `inner`.
#[derive(Clone, Debug)]
pub struct SharedRateLimit<S> {
    inner: S,
    config: SharedRateLimitLayer,
}

impl<S> SharedRateLimit<S> {
    fn quota_of(&self, req: &McpRequest) -> Option<Quota> {
        if req.is_notification()
            || (!self.config.limit_stdio && matches!(req.ctx.transport, Transport::Stdio))
        {
            return None;
        }
        match self.config.reads {
            Some(reads) if req.tool_name() != Some(AGENT_RUN) => Some(reads),
            _ => Some(self.config.main),
        }
    }
}

/// The bucket of `caller` in budget `name`.
fn bucket_key(name: &str, caller: &CallerKey) -> String {
    match caller {
        CallerKey::Identity(id) => format!("{name}:id:{id}"),
        CallerKey::Peer(ip) => format!("{name}:ip:{ip}"),
    }
}

impl<S> Service<McpRequest> for SharedRateLimit<S>
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = McpResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<McpResponse, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        let Some(quota) = self.quota_of(&req) else {
            return Box::pin(self.inner.call(req));
        };
        // The ready inner service goes into the future; the clone stays for the next call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let caller = CallerKey::of(&req.ctx);
        let take = self.config.buckets.take(
            bucket_key(quota.name, &caller),
            quota.per_minute,
            quota.burst,
        );
        let fallback = self.config.fallback.clone();
        Box::pin(async move {
            let verdict = match take.await {
                Ok(verdict) => verdict,
                Err(why) => {
                    tracing::warn!(
                        error = %why,
                        "shared rate limit unavailable; counting against this instance's budget"
                    );
                    let local = match (quota.name, fallback.read_limiter()) {
                        ("reads", Some(reads)) => reads.clone(),
                        _ => fallback.limiter().clone(),
                    };
                    local.check(&caller)
                }
            };
            match verdict {
                Ok(()) => inner.call(req).await,
                Err(wait) => Ok(limited(&req, wait, quota)),
            }
        })
    }
}

fn limited(req: &McpRequest, wait: Duration, quota: Quota) -> McpResponse {
    let secs = retry_after_seconds(wait);
    req.refuse(Refusal::rate_limited(
        secs,
        format!(
            "Rate limit exceeded: at most {} {} per minute per caller. Retry after {secs} s.",
            quota.per_minute, quota.counts
        ),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::plugin::{McpResult, ProtocolVersion, RequestContext, RequestId};
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    /// Buckets that answer from a script, recording the keys they were asked for.
    #[derive(Debug, Default)]
    struct Scripted {
        down: bool,
        asked: Mutex<Vec<String>>,
    }

    impl SharedBuckets for Scripted {
        fn take(
            &self,
            key: String,
            _: NonZeroU32,
            _: NonZeroU32,
        ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'static>> {
            let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
            asked.push(key);
            let answer = if self.down {
                Err("connection refused".to_owned())
            } else if asked.len() > 2 {
                Ok(Err(Duration::from_millis(1500)))
            } else {
                Ok(Ok(()))
            };
            Box::pin(std::future::ready(answer))
        }
    }

    fn agent_run(id: i64) -> McpRequest {
        let mut ctx = RequestContext::new(
            ProtocolVersion::V2026_07_28,
            Transport::Http {
                peer: Some(([127, 0, 0, 1], 4000).into()),
            },
        );
        ctx.identity = Some("alice".into());
        McpRequest::new(
            Some(RequestId::Number(id)),
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "x"}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ctx,
        )
    }

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
    }

    /// The server's default budgets, with the task budget's burst set.
    fn limits(burst: u32) -> RateLimits {
        RateLimits {
            per_minute: nz(60),
            burst: nz(burst),
            reads: Some((nz(1200), nz(300))),
            stdio: false,
        }
    }

    /// Seconds to wait for each of `n` calls (0: passed).
    async fn retry_afters(buckets: Arc<Scripted>, limits: RateLimits, n: i64) -> Vec<u64> {
        let layer = SharedRateLimitLayer::new(limits, buckets);
        let svc =
            ServiceBuilder::new()
                .layer(layer)
                .service(service_fn(|req: McpRequest| async move {
                    Ok::<_, Infallible>(req.result(McpResult::empty()))
                }));
        let mut out = Vec::new();
        for id in 0..n {
            let r = svc
                .clone()
                .oneshot(agent_run(id))
                .await
                .expect("infallible");
            out.push(
                r.refusal()
                    .and_then(Refusal::retry_after_seconds)
                    .unwrap_or(0),
            );
        }
        out
    }

    #[tokio::test]
    async fn the_shared_bucket_decides_and_a_refusal_says_when_to_retry() {
        let buckets = Arc::new(Scripted::default());
        let got = retry_afters(buckets.clone(), limits(60), 3).await;
        assert_eq!(got, [0, 0, 2]);
        let asked = buckets.asked.lock().unwrap().clone();
        assert_eq!(asked, ["tasks:id:alice"; 3]);
    }

    /// The database is down: this process's own budget counts instead of letting all through.
    #[tokio::test]
    async fn unreachable_buckets_fall_back_to_the_local_budget() {
        let buckets = Arc::new(Scripted {
            down: true,
            ..Scripted::default()
        });
        // A burst of 2 in this process: two pass, the third waits for a refill (1 s at 60/min).
        let got = retry_afters(buckets, limits(2), 3).await;
        assert_eq!(got, [0, 0, 1]);
    }
}
