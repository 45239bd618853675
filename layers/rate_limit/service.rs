//! [`RateLimitLayer`], the [`RateLimit`] service and its [`ResponseFuture`].

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

pub use crate::layers::reject::ResponseFuture;

use super::limiter::{CallerKey, CallerLimiter};
use crate::config::RateLimitConfig;
use crate::protocol::{McpRequest, McpResponse, Refusal, Transport};
use crate::tools::AGENT_RUN;

/// JSON-RPC error code of a refused (rate-limited) request ([`Refusal::RateLimited`]).
pub const RATE_LIMITED: i64 = crate::protocol::code::RATE_LIMITED;

/// One budget: a keyed limiter and what it counts, for the refusal message.
#[derive(Clone, Debug)]
struct Budget {
    limiter: Arc<CallerLimiter>,
    /// What `per_minute` counts, e.g. "requests" or "new tasks (agent_run calls)".
    counts: &'static str,
}

impl Budget {
    fn new(per_minute: NonZeroU32, burst: NonZeroU32, counts: &'static str) -> Self {
        Self {
            limiter: Arc::new(CallerLimiter::new(per_minute, burst)),
            counts,
        }
    }
}

/// What the task budget counts (see [`RateLimitLayer::with_read_budget`]).
const TASKS: &str = "new tasks (agent_run calls)";
/// What a single budget, or the read budget, counts.
const REQUESTS: &str = "requests";

/// Applies [`RateLimit`]: per caller, `per_minute` sustained and `burst` at once.
///
/// [`RateLimitLayer::new`] is one budget for every request on every transport. The server's
/// default ([`RateLimitLayer::from_config`]) splits it the way its costs fall: creating a task
/// (`tools/call agent_run`) spends the main budget, everything else (status reads, `tasks/*`,
/// `tools/list`, discovery) spends a much larger read budget, and stdio is not limited, since
/// its one client started the server.
///
/// Clones share their limiters, so every clone of the stack counts against the same buckets.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    main: Budget,
    reads: Option<Budget>,
    limit_stdio: bool,
}

impl RateLimitLayer {
    /// One budget for every request, on every transport.
    pub fn new(per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        Self {
            main: Budget::new(per_minute, burst, REQUESTS),
            reads: None,
            limit_stdio: true,
        }
    }

    /// Gives everything but `tools/call agent_run` a budget of its own, so that reads (a
    /// client polling its tasks, listing tools) never spend the budget for creating tasks,
    /// and creating tasks never starves reads.
    pub fn with_read_budget(mut self, per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        self.main.counts = TASKS;
        self.reads = Some(Budget::new(per_minute, burst, REQUESTS));
        self
    }

    /// Whether requests that arrive over stdio are counted (by default they are; the server's
    /// configuration turns this off unless `rate_limit.stdio` is set).
    pub fn limit_stdio(mut self, limit: bool) -> Self {
        self.limit_stdio = limit;
        self
    }

    /// The layer `rate_limit` asks for, or `None` when it is off.
    pub fn from_config(config: &RateLimitConfig) -> Option<Self> {
        if !config.enabled {
            return None;
        }
        let per_minute = NonZeroU32::new(config.per_minute)?;
        let burst = NonZeroU32::new(config.burst)?;
        let layer = Self::new(per_minute, burst).limit_stdio(config.stdio);
        match (
            NonZeroU32::new(config.reads.per_minute),
            NonZeroU32::new(config.reads.burst),
        ) {
            (Some(per_minute), Some(burst)) => Some(layer.with_read_budget(per_minute, burst)),
            _ => Some(layer),
        }
    }

    /// Shares an existing limiter (e.g. one built with a custom clock or prune interval) as
    /// the single budget for every request.
    pub fn with_limiter(limiter: Arc<CallerLimiter>) -> Self {
        Self {
            main: Budget {
                limiter,
                counts: REQUESTS,
            },
            reads: None,
            limit_stdio: true,
        }
    }

    /// The main limiter: every request's, or with a read budget, `agent_run`'s.
    pub fn limiter(&self) -> &Arc<CallerLimiter> {
        &self.main.limiter
    }

    /// The read budget's limiter, if there is one.
    pub fn read_limiter(&self) -> Option<&Arc<CallerLimiter>> {
        self.reads.as_ref().map(|b| &b.limiter)
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            config: self.clone(),
        }
    }
}

/// Refuses a caller's request over its limit with [`Refusal::RateLimited`] (the JSON-RPC
/// error `-32000`; the HTTP edge adds 429 and `Retry-After`); passes everything else to
/// `inner`.
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    config: RateLimitLayer,
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

    /// The budget `req` spends, or `None` when it is not counted.
    fn budget_of(&self, req: &McpRequest) -> Option<&Budget> {
        // Notifications get no answer to carry a refusal, so they are not counted.
        if req.is_notification()
            || (!self.config.limit_stdio && matches!(req.ctx.transport, Transport::Stdio))
        {
            return None;
        }
        match &self.config.reads {
            Some(reads) if req.tool_name() != Some(AGENT_RUN) => Some(reads),
            _ => Some(&self.config.main),
        }
    }
}

fn prune_if_due(limiter: &Arc<CallerLimiter>) {
    if !limiter.prune_due() {
        return;
    }
    let limiter = limiter.clone();
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
        let Some(budget) = self.budget_of(&req) else {
            return ResponseFuture::inner(self.inner.call(req));
        };
        let verdict = budget.limiter.check(&CallerKey::of(&req.ctx));
        prune_if_due(&budget.limiter);
        match verdict {
            Ok(()) => ResponseFuture::inner(self.inner.call(req)),
            Err(wait) => ResponseFuture::rejected(limited(&req, wait, budget)),
        }
    }
}

/// Whole seconds to wait, rounded up, at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

fn limited(req: &McpRequest, wait: Duration, budget: &Budget) -> McpResponse {
    let secs = retry_after_seconds(wait);
    let (per_minute, counts) = (budget.limiter.per_minute(), budget.counts);
    req.refuse(Refusal::rate_limited(
        secs,
        format!(
            "Rate limit exceeded: at most {per_minute} {counts} per minute per caller. \
             Retry after {secs} s."
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        McpResult, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
    };
    use serde_json::json;
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    /// Seconds to wait, when `r` is a rate-limit refusal.
    fn retry_after(r: &McpResponse) -> Option<u64> {
        match r.refusal() {
            Some(refusal @ Refusal::RateLimited { .. }) => refusal.retry_after_seconds(),
            Some(other) => panic!("refused, but not rate-limited: {other:?}"),
            None => None,
        }
    }

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
            call: None,
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
    async fn over_the_burst_is_refused_with_retry_after() {
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
        assert_eq!(retry_after(&r), Some(1));
        assert_eq!(r.id, Some(RequestId::Number(3)));
        let Some(e) = r.to_json().map(|v| v["error"].clone()) else {
            panic!("expected an error, got {:?}", r.payload);
        };
        let e: crate::protocol::ErrorObject = serde_json::from_value(e).unwrap();
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
        assert_eq!(retry_after(&r), None);
    }

    #[tokio::test]
    async fn anonymous_callers_are_keyed_by_peer_ip_and_notifications_pass() {
        let svc = ServiceBuilder::new()
            .layer(RateLimitLayer::new(nz(1), nz(1)))
            .service(ok_handler());
        let Ok(r) = svc.clone().oneshot(request(1, None, [10, 0, 0, 1])).await;
        assert_eq!(retry_after(&r), None);
        let Ok(r) = svc.clone().oneshot(request(2, None, [10, 0, 0, 1])).await;
        assert_eq!(retry_after(&r), Some(60));
        let Ok(r) = svc.clone().oneshot(request(3, None, [10, 0, 0, 2])).await;
        assert_eq!(retry_after(&r), None);
        let mut note = request(0, None, [10, 0, 0, 1]);
        note.id = None;
        let Ok(r) = svc.clone().oneshot(note).await;
        assert_eq!(retry_after(&r), None);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_seconds(Duration::from_millis(2001)), 3);
    }

    fn with_transport(mut req: McpRequest, transport: Transport) -> McpRequest {
        req.ctx.transport = transport;
        req
    }

    fn agent_run(id: i64) -> McpRequest {
        let mut req = request(id, Some("alice"), [127, 0, 0, 1]);
        req.method = "tools/call".into();
        req.params = json!({"name": "agent_run", "arguments": {"request": "x"}})
            .as_object()
            .cloned()
            .unwrap_or_default();
        req
    }

    #[tokio::test]
    async fn the_default_splits_tasks_from_reads_and_leaves_stdio_alone() {
        let layer = RateLimitLayer::from_config(&RateLimitConfig {
            per_minute: 2,
            burst: 2,
            reads: crate::config::ReadBudget {
                per_minute: 60,
                burst: 3,
            },
            ..RateLimitConfig::default()
        })
        .expect("enabled");
        let svc = ServiceBuilder::new().layer(layer).service(ok_handler());
        let call = |req| svc.clone().oneshot(req);

        // Two new tasks, then the third is refused, with a message about tasks.
        for id in 1..=2 {
            let Ok(r) = call(agent_run(id)).await;
            assert_eq!(retry_after(&r), None);
        }
        let Ok(r) = call(agent_run(3)).await;
        assert_eq!(retry_after(&r), Some(30));
        let Some(e) = r.refusal() else {
            panic!("expected a refusal, got {:?}", r.payload);
        };
        assert_eq!(
            e.message(),
            "Rate limit exceeded: at most 2 new tasks (agent_run calls) per minute per caller. \
             Retry after 30 s."
        );
        // The same caller's reads have their own budget: three pass, the fourth does not.
        for id in 4..=6 {
            let Ok(r) = call(request(id, Some("alice"), [127, 0, 0, 1])).await;
            assert_eq!(retry_after(&r), None, "read {id}");
        }
        let Ok(r) = call(request(7, Some("alice"), [127, 0, 0, 1])).await;
        assert_eq!(retry_after(&r), Some(1));
        let Some(e) = r.refusal() else {
            panic!("expected a refusal, got {:?}", r.payload);
        };
        assert_eq!(
            e.message(),
            "Rate limit exceeded: at most 60 requests per minute per caller. Retry after 1 s."
        );
        // stdio is not counted at all: 500 calls of each kind pass.
        for id in 0..500 {
            let Ok(r) = call(with_transport(agent_run(id), Transport::Stdio)).await;
            assert_eq!(retry_after(&r), None, "stdio agent_run {id}");
            let read = request(id, Some("stdio"), [127, 0, 0, 1]);
            let Ok(r) = call(with_transport(read, Transport::Stdio)).await;
            assert_eq!(retry_after(&r), None, "stdio read {id}");
        }
    }

    #[tokio::test]
    async fn stdio_is_limited_when_asked() {
        let layer = RateLimitLayer::from_config(&RateLimitConfig {
            per_minute: 1,
            burst: 1,
            stdio: true,
            ..RateLimitConfig::default()
        })
        .expect("enabled");
        let svc = ServiceBuilder::new().layer(layer).service(ok_handler());
        let stdio = |id| with_transport(agent_run(id), Transport::Stdio);
        let Ok(r) = svc.clone().oneshot(stdio(1)).await;
        assert_eq!(retry_after(&r), None);
        let Ok(r) = svc.clone().oneshot(stdio(2)).await;
        assert_eq!(retry_after(&r), Some(60));
    }

    /// Polls `tasks` (each a queue position, `None` = running) at the interval the Tasks layer
    /// suggests for it, for `minutes` of a fake clock, through the default read budget, with
    /// the phases of the polls spread as tasks created one after another spread them.
    /// Returns (polls, refusals).
    fn poll_at_the_advertised_pace(tasks: &[Option<usize>], minutes: u64) -> (u64, u64) {
        use crate::layers::tasks::{DEFAULT_POLL_INTERVAL, TaskTiming};
        use governor::clock::FakeRelativeClock;

        let reads = RateLimitConfig::default().reads;
        let clock = FakeRelativeClock::default();
        let limiter =
            CallerLimiter::with_clock(nz(reads.per_minute), nz(reads.burst), clock.clone());
        let key = CallerKey::Peer([127, 0, 0, 1].into());
        let timing = TaskTiming {
            ttl_ms: 1,
            poll_interval_ms: u64::try_from(DEFAULT_POLL_INTERVAL.as_millis()).unwrap_or(1000),
        };
        let intervals: Vec<u64> = tasks.iter().map(|p| timing.poll_interval_ms(*p)).collect();
        // Tasks created one after another are polled out of phase: spread the first polls
        // over each task's interval (a multiplicative hash of its index).
        let mut next: Vec<u64> = intervals
            .iter()
            .enumerate()
            .map(|(k, every)| (k as u64).wrapping_mul(2_654_435_761) % every)
            .collect();
        let (mut polls, mut refused) = (0, 0);
        let end = minutes * 60_000;
        let mut now = 0;
        while now < end {
            for (due, every) in next.iter_mut().zip(&intervals) {
                if *due <= now {
                    polls += 1;
                    refused += u64::from(limiter.check(&key).is_err());
                    *due += every;
                }
            }
            clock.advance(Duration::from_millis(10));
            now += 10;
        }
        (polls, refused)
    }

    #[test]
    fn polling_at_the_advertised_interval_never_meets_the_default_read_budget() {
        // Three tasks of one caller (one running, two queued), five minutes.
        let (polls, refused) = poll_at_the_advertised_pace(&[None, Some(1), Some(2)], 5);
        assert!(polls >= 750, "{polls} polls");
        assert_eq!(refused, 0, "{refused} of {polls} polls refused");
        // The worst case the base interval allows: three tasks all polled every second.
        let (polls, refused) = poll_at_the_advertised_pace(&[None, None, None], 5);
        assert_eq!((polls, refused), (900, 0));
        // A caller with one running task and 1,000 queued behind it.
        let many: Vec<Option<usize>> = std::iter::once(None).chain((1..=1000).map(Some)).collect();
        let (polls, refused) = poll_at_the_advertised_pace(&many, 5);
        assert_eq!(refused, 0, "{refused} of {polls} polls refused");
        // Without the growing interval, the same caller would be refused (so the check bites).
        let (polls, refused) = poll_at_the_advertised_pace(&vec![None; 1001], 1);
        assert!(refused > polls / 2, "{refused} of {polls} polls refused");
    }

    #[test]
    fn config_off_means_no_layer() {
        let mut config = RateLimitConfig::default();
        assert!(RateLimitLayer::from_config(&config).is_some());
        config.enabled = false;
        assert!(RateLimitLayer::from_config(&config).is_none());
    }
}
