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

use http::header::RETRY_AFTER;
use http::{HeaderValue, StatusCode};
use serde_json::json;
use tower_layer::Layer;
use tower_service::Service;

use super::limiter::CallerKey;
use super::service::{RATE_LIMITED, RateLimitLayer, retry_after_seconds};
use crate::config::RateLimitConfig;
use crate::protocol::{ErrorObject, McpRequest, McpResponse, Transport};
use crate::tools::AGENT_RUN;

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
    fallback: RateLimitLayer,
}

impl SharedRateLimitLayer {
    /// The budgets `rate_limit` asks for, kept in `buckets`; `None` when it is off.
    pub fn from_config(config: &RateLimitConfig, buckets: Arc<dyn SharedBuckets>) -> Option<Self> {
        let fallback = RateLimitLayer::from_config(config)?;
        let main = Quota {
            per_minute: NonZeroU32::new(config.per_minute)?,
            burst: NonZeroU32::new(config.burst)?,
            counts: "requests",
            name: "all",
        };
        let reads = match (
            NonZeroU32::new(config.reads.per_minute),
            NonZeroU32::new(config.reads.burst),
        ) {
            (Some(per_minute), Some(burst)) => Some(Quota {
                per_minute,
                burst,
                counts: "requests",
                name: "reads",
            }),
            _ => None,
        };
        let main = match reads {
            Some(_) => Quota {
                counts: "new tasks (agent_run calls)",
                name: "tasks",
                ..main
            },
            None => main,
        };
        Some(Self {
            buckets,
            main,
            reads,
            limit_stdio: config.stdio,
            fallback,
        })
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
    let error = ErrorObject::new(
        RATE_LIMITED,
        format!(
            "Rate limit exceeded: at most {} {} per minute per caller. Retry after {secs} s.",
            quota.per_minute, quota.counts
        ),
    )
    .with_data(json!({ "retryAfterSeconds": secs }));
    let mut response = req.error(error);
    response.http.status = Some(StatusCode::TOO_MANY_REQUESTS);
    response
        .http
        .headers
        .insert(RETRY_AFTER, HeaderValue::from(secs));
    response
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::protocol::{McpResult, ProtocolVersion, RequestContext, RequestId};
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
        McpRequest {
            id: Some(RequestId::Number(id)),
            method: "tools/call".into(),
            params: json!({"name": "agent_run", "arguments": {"request": "x"}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ctx,
        }
    }

    async fn statuses(buckets: Arc<Scripted>, config: &RateLimitConfig, n: i64) -> Vec<u16> {
        let layer = SharedRateLimitLayer::from_config(config, buckets).expect("enabled");
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
            out.push(r.http.status.map_or(200, |s| s.as_u16()));
        }
        out
    }

    #[tokio::test]
    async fn the_shared_bucket_decides_and_a_refusal_says_when_to_retry() {
        let buckets = Arc::new(Scripted::default());
        let got = statuses(buckets.clone(), &RateLimitConfig::default(), 3).await;
        assert_eq!(got, [200, 200, 429]);
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
        let config = RateLimitConfig {
            burst: 2,
            ..RateLimitConfig::default()
        };
        assert_eq!(statuses(buckets, &config, 3).await, [200, 200, 429]);
    }
}
