//! [`RateLimitLayer`], the [`RateLimit`] service and its [`ResponseFuture`].

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderValue, StatusCode};
use serde_json::json;
use tower_layer::Layer;
use tower_service::Service;

pub use crate::layers::reject::ResponseFuture;

use super::limiter::{CallerKey, CallerLimiter};
use crate::config::RateLimitConfig;
use crate::protocol::{ErrorObject, McpRequest, McpResponse};

/// JSON-RPC error code of a refused (rate-limited) request.
pub const RATE_LIMITED: i64 = -32000;

/// Applies [`RateLimit`]: `per_minute` requests per caller, `burst` at once.
///
/// Clones share one limiter, so every clone of the stack counts against the same buckets.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    limiter: Arc<CallerLimiter>,
}

impl RateLimitLayer {
    pub fn new(per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        Self {
            limiter: Arc::new(CallerLimiter::new(per_minute, burst)),
        }
    }

    /// The layer `rate_limit` asks for, or `None` when it is off.
    pub fn from_config(config: &RateLimitConfig) -> Option<Self> {
        if !config.enabled {
            return None;
        }
        let per_minute = NonZeroU32::new(config.per_minute)?;
        let burst = NonZeroU32::new(config.burst)?;
        Some(Self::new(per_minute, burst))
    }

    /// Shares an existing limiter (e.g. one built with a custom clock or prune interval).
    pub fn with_limiter(limiter: Arc<CallerLimiter>) -> Self {
        Self { limiter }
    }

    pub fn limiter(&self) -> &Arc<CallerLimiter> {
        &self.limiter
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            limiter: self.limiter.clone(),
        }
    }
}

/// Refuses a caller's request over its limit with a JSON-RPC error (`-32000`, HTTP 429 with
/// `Retry-After`); passes everything else to `inner`.
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    limiter: Arc<CallerLimiter>,
}

impl<S> RateLimit<S> {
    pub fn new(inner: S, per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        RateLimitLayer::new(per_minute, burst).layer(inner)
    }

    pub fn layer(per_minute: NonZeroU32, burst: NonZeroU32) -> RateLimitLayer {
        RateLimitLayer::new(per_minute, burst)
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }

    fn prune_if_due(&self) {
        if !self.limiter.prune_due() {
            return;
        }
        let limiter = self.limiter.clone();
        let prune = move || {
            limiter.prune();
            limiter.prune_done();
        };
        // Pruning walks every key; keep it off the request path when a runtime is there.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(prune);
            }
            Err(_) => prune(),
        }
    }
}

impl<S> Service<McpRequest> for RateLimit<S>
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    type Response = McpResponse;
    type Error = Infallible;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        // Notifications get no answer to carry a refusal, so they are not counted.
        if req.is_notification() {
            return ResponseFuture::inner(self.inner.call(req));
        }
        let verdict = self.limiter.check(&CallerKey::of(&req.ctx));
        self.prune_if_due();
        match verdict {
            Ok(()) => ResponseFuture::inner(self.inner.call(req)),
            Err(wait) => ResponseFuture::rejected(limited(&req, wait, self.limiter.per_minute())),
        }
    }
}

/// Whole seconds to wait, rounded up, at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

fn limited(req: &McpRequest, wait: Duration, per_minute: u32) -> McpResponse {
    let secs = retry_after_seconds(wait);
    let error = ErrorObject::new(
        RATE_LIMITED,
        format!(
            "Rate limit exceeded: at most {per_minute} requests per minute per caller. \
             Retry after {secs} s."
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
    use super::*;
    use crate::protocol::{
        McpResult, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
    };
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    fn request(id: i64, identity: Option<&str>, peer: [u8; 4]) -> McpRequest {
        let mut ctx = RequestContext::new(
            ProtocolVersion::V2026_07_28,
            Transport::Http {
                peer: Some((peer, 4000).into()),
            },
        );
        ctx.identity = identity.map(str::to_owned);
        McpRequest {
            id: Some(RequestId::Number(id)),
            method: "tools/list".into(),
            params: Default::default(),
            ctx,
        }
    }

    fn ok_handler()
    -> impl Service<McpRequest, Response = McpResponse, Error = Infallible, Future: Send> + Clone
    {
        service_fn(|req: McpRequest| async move { Ok(req.result(McpResult::empty())) })
    }

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
    }

    #[tokio::test]
    async fn over_the_burst_is_429_with_retry_after() {
        let svc = ServiceBuilder::new()
            .layer(RateLimitLayer::new(nz(60), nz(2)))
            .service(ok_handler());
        for id in 1..=2 {
            let r = svc
                .clone()
                .oneshot(request(id, Some("alice"), [127, 0, 0, 1]))
                .await;
            assert!(matches!(r.map(|r| r.payload), Ok(Payload::Result(_))));
        }
        let Ok(r) = svc
            .clone()
            .oneshot(request(3, Some("alice"), [127, 0, 0, 1]))
            .await;
        assert_eq!(r.http.status, Some(StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(r.http.headers[RETRY_AFTER], "1");
        assert_eq!(r.id, Some(RequestId::Number(3)));
        let Payload::Error(e) = r.payload else {
            panic!("expected an error, got {:?}", r.payload);
        };
        assert_eq!(e.code, RATE_LIMITED);
        assert_eq!(e.data, Some(json!({"retryAfterSeconds": 1})));
        assert_eq!(
            e.message,
            "Rate limit exceeded: at most 60 requests per minute per caller. Retry after 1 s."
        );
        // Another identity from the same address has its own bucket.
        let Ok(r) = svc
            .clone()
            .oneshot(request(4, Some("bob"), [127, 0, 0, 1]))
            .await;
        assert_eq!(r.http.status, None);
    }

    #[tokio::test]
    async fn anonymous_callers_are_keyed_by_peer_ip_and_notifications_pass() {
        let svc = ServiceBuilder::new()
            .layer(RateLimitLayer::new(nz(1), nz(1)))
            .service(ok_handler());
        let Ok(r) = svc.clone().oneshot(request(1, None, [10, 0, 0, 1])).await;
        assert_eq!(r.http.status, None);
        let Ok(r) = svc.clone().oneshot(request(2, None, [10, 0, 0, 1])).await;
        assert_eq!(r.http.status, Some(StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(r.http.headers[RETRY_AFTER], "60");
        let Ok(r) = svc.clone().oneshot(request(3, None, [10, 0, 0, 2])).await;
        assert_eq!(r.http.status, None);
        let mut note = request(0, None, [10, 0, 0, 1]);
        note.id = None;
        let Ok(r) = svc.clone().oneshot(note).await;
        assert_eq!(r.http.status, None);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_seconds(Duration::from_millis(2001)), 3);
    }

    #[test]
    fn config_off_means_no_layer() {
        let mut config = RateLimitConfig::default();
        assert!(RateLimitLayer::from_config(&config).is_some());
        config.enabled = false;
        assert!(RateLimitLayer::from_config(&config).is_none());
    }
}
