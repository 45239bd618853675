//! [`RateLimitLayer`], the [`RateLimit`] service, and their configuration [`RateLimits`].

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use super::limiter::{CallerKey, CallerLimiter};
use crate::plugin::{
    AGENT_RUN, Check, Gate, GateLayer, Gated, McpRequest, McpResponse, Refusal, Transport,
};

/// JSON-RPC error code of a refused (rate-limited) request ([`Refusal::RateLimited`]).
pub const RATE_LIMITED: i64 = crate::plugin::code::RATE_LIMITED;

/// The rate limit layer's configuration (`rate_limit` in `agent.yaml`, converted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits {
    /// The main budget, per caller: sustained requests per minute. With [`RateLimits::reads`]
    /// it is spent by `tools/call agent_run` alone; without, by every request.
    pub per_minute: NonZeroU32,
    /// How many a rested caller may send at once.
    pub burst: NonZeroU32,
    /// A budget of its own, `(per_minute, burst)`, for everything but `tools/call agent_run`,
    /// so that reads (a client polling its tasks) never spend the budget for creating tasks,
    /// and creating tasks never starves reads.
    pub reads: Option<(NonZeroU32, NonZeroU32)>,
    /// Whether requests that arrive over stdio are counted.
    pub stdio: bool,
}

impl RateLimits {
    /// One budget for every request, on every transport.
    pub const fn one_budget(per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        Self {
            per_minute,
            burst,
            reads: None,
            stdio: true,
        }
    }
}

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

/// What the task budget counts (with a read budget beside it).
const TASKS: &str = "new tasks (agent_run calls)";
/// What a single budget, or the read budget, counts.
const REQUESTS: &str = "requests";

/// The [`Check`] of the rate limit layer: the budgets' limiters, shared by every clone, so
/// every clone of the stack counts against the same buckets.
#[derive(Clone, Debug)]
pub struct Budgets {
    main: Budget,
    reads: Option<Budget>,
    limit_stdio: bool,
}

impl From<RateLimits> for Budgets {
    fn from(limits: RateLimits) -> Self {
        let reads = limits
            .reads
            .map(|(per_minute, burst)| Budget::new(per_minute, burst, REQUESTS));
        let counts = if reads.is_some() { TASKS } else { REQUESTS };
        Self {
            main: Budget::new(limits.per_minute, limits.burst, counts),
            reads,
            limit_stdio: limits.stdio,
        }
    }
}

impl Budgets {
    /// Shares an existing limiter (e.g. one built with a custom clock or prune interval) as
    /// the single budget for every request, on every transport
    /// (`RateLimitLayer::new(Budgets::with_limiter(limiter))`).
    pub fn with_limiter(limiter: Arc<CallerLimiter>) -> Self {
        Budgets {
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

    /// The budget `req` spends, or `None` when it is not counted.
    fn budget_of(&self, req: &McpRequest) -> Option<&Budget> {
        // Notifications get no answer to carry a refusal, so they are not counted.
        if req.is_notification()
            || (!self.limit_stdio && matches!(req.ctx.transport, Transport::Stdio))
        {
            return None;
        }
        match &self.reads {
            Some(reads) if req.tool_name() != Some(AGENT_RUN) => Some(reads),
            _ => Some(&self.main),
        }
    }
}

/// Applies [`RateLimit`]: per caller, `per_minute` sustained and `burst` at once; see the
/// [module docs](super).
pub type RateLimitLayer = GateLayer<Budgets>;

/// Refuses a caller's request over its limit with [`Refusal::RateLimited`] (the JSON-RPC
/// error `-32000`; the HTTP edge adds 429 and `Retry-After`); passes everything else to
/// `inner`.
pub type RateLimit<S> = Gate<S, Budgets>;

/// `RateLimitLayer::new(limits)`.
impl From<RateLimits> for Gated<Budgets> {
    fn from(limits: RateLimits) -> Self {
        Gated(Budgets::from(limits))
    }
}

impl Check for Budgets {
    fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
        let Some(budget) = self.budget_of(req) else {
            return Ok(());
        };
        let verdict = budget.limiter.check(&CallerKey::of(&req.ctx));
        prune_if_due(&budget.limiter);
        match verdict {
            Ok(()) => Ok(()),
            Err(wait) => Err(limited(req, wait, budget)),
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
    use std::convert::Infallible;

    use tower_service::Service;

    use super::*;
    use crate::plugin::{
        McpResult, Params, Payload, ProtocolVersion, RequestContext, RequestId, ToolsCallParams,
        Transport,
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

    /// `r` is a rate-limit refusal: retry after `secs`, saying `message`.
    fn assert_refused(r: &McpResponse, secs: u64, message: &str) {
        assert_eq!(retry_after(r), Some(secs), "{message}");
        let Some(e) = r.refusal() else {
            panic!("expected a refusal, got {:?}", r.payload);
        };
        assert_eq!(e.message(), message);
    }

    fn request(id: i64, identity: Option<&str>, peer: [u8; 4]) -> McpRequest {
        let mut ctx = RequestContext::new(
            ProtocolVersion::V2026_07_28,
            Transport::Http {
                peer: Some((peer, 4000).into()),
            },
        );
        ctx.identity = identity.map(str::to_owned);
        McpRequest::from(agent_mcp_plugin::protocol::RequestParts {
            id: Some(RequestId::Number(id)),
            method: "tools/list".into(),
            params: Default::default(),
            ctx,
            call: None,
        })
    }

    fn ok_handler()
    -> impl Service<McpRequest, Response = McpResponse, Error = Infallible, Future: Send> + Clone
    {
        service_fn(|req: McpRequest| async move { Ok(req.result(McpResult::empty())) })
    }

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
    }

    /// [`ok_handler`] behind the server's shape of limits: `tasks` and `reads` as (per minute,
    /// burst), stdio counted or not.
    fn limited(
        (per_minute, burst): (u32, u32),
        (reads_per_minute, reads_burst): (u32, u32),
        stdio: bool,
    ) -> impl Service<McpRequest, Response = McpResponse, Error = Infallible> + Clone {
        let layer = RateLimitLayer::new(RateLimits {
            per_minute: nz(per_minute),
            burst: nz(burst),
            reads: Some((nz(reads_per_minute), nz(reads_burst))),
            stdio,
        });
        ServiceBuilder::new().layer(layer).service(ok_handler())
    }

    #[tokio::test]
    async fn over_the_burst_is_refused_with_retry_after() {
        let svc = ServiceBuilder::new()
            .layer(RateLimitLayer::new(RateLimits::one_budget(nz(60), nz(2))))
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
        let e: crate::plugin::ErrorObject = serde_json::from_value(e).unwrap();
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
            .layer(RateLimitLayer::new(RateLimits::one_budget(nz(1), nz(1))))
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
        req.params = Params::ToolsCall(ToolsCallParams {
            name: Some("agent_run".into()),
            arguments: Some(json!({"request": "x"})),
            ..Default::default()
        });
        req
    }

    #[tokio::test]
    async fn the_default_splits_tasks_from_reads_and_leaves_stdio_alone() {
        // The server's shape: a task budget, a read budget, stdio not counted.
        let svc = limited((2, 2), (60, 3), false);
        let call = |req| svc.clone().oneshot(req);

        // Two new tasks, then the third is refused, with a message about tasks.
        for id in 1..=2 {
            let Ok(r) = call(agent_run(id)).await;
            assert_eq!(retry_after(&r), None);
        }
        let Ok(r) = call(agent_run(3)).await;
        assert_refused(
            &r,
            30,
            "Rate limit exceeded: at most 2 new tasks (agent_run calls) per minute per caller. \
             Retry after 30 s.",
        );
        // The same caller's reads have their own budget: three pass, the fourth does not.
        for id in 4..=6 {
            let Ok(r) = call(request(id, Some("alice"), [127, 0, 0, 1])).await;
            assert_eq!(retry_after(&r), None, "read {id}");
        }
        let Ok(r) = call(request(7, Some("alice"), [127, 0, 0, 1])).await;
        assert_refused(
            &r,
            1,
            "Rate limit exceeded: at most 60 requests per minute per caller. Retry after 1 s.",
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
        let svc = limited((1, 1), (1200, 300), true);
        let stdio = |id| with_transport(agent_run(id), Transport::Stdio);
        let Ok(r) = svc.clone().oneshot(stdio(1)).await;
        assert_eq!(retry_after(&r), None);
        let Ok(r) = svc.clone().oneshot(stdio(2)).await;
        assert_eq!(retry_after(&r), Some(60));
    }
}
