//! Composes the configured layers around the [`AgentService`], outermost first:
//! metrics → audit → auth → rate_limit → tasks → validate → images → `AgentService`.

mod shared_limit;
mod task_backend;

use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

use crate::Stack;
use crate::config::Config;
use crate::layers::audit::AuditLayer;
use crate::service::AgentService;

/// Builds the full stack from the configuration (with an audit writer of its own). Fails
/// only when `audit.file` cannot be opened.
pub fn build(config: &Config, service: AgentService) -> std::io::Result<Stack> {
    Ok(build_with_audit(
        config,
        service,
        AuditLayer::from_config(&config.audit)?,
    ))
}

/// [`build`] with the audit layer given (`None`: no audit), so several stacks can share one
/// audit writer and their owner can flush it.
pub fn build_with_audit(
    config: &Config,
    service: AgentService,
    audit: Option<AuditLayer>,
) -> Stack {
    let svc = ServiceBuilder::new()
        // Counts every request by method and outcome, refusals included.
        .layer(crate::layers::metrics::MetricsLayer::new())
        // layer: audit
        .option_layer(audit)
        // layer: auth
        .layer(crate::layers::auth::AuthLayer::from_config(&config.auth))
        // layer: rate_limit
        .option_layer(rate_limit(config, &service))
        // layer: tasks
        // Tasks stay readable for `store.retention` (the advertised `ttlMs`); the store
        // purges them only after that.
        .layer(crate::layers::tasks::TasksLayer::new(
            service.core().clone(),
            config.store.retention,
        ))
        // layer: validate
        .layer(crate::layers::validate::ValidateLayer::new())
        // layer: images
        .layer(crate::layers::images::ImagesLayer::new(config.mcp.images))
        .service(service);
    BoxCloneSyncService::new(svc)
}

/// The rate limit `rate_limit` asks for: in this process, or in the shared store's buckets
/// when the store is shared (`store.backend: postgres`), so it holds across instances.
fn rate_limit(
    config: &Config,
    service: &AgentService,
) -> Option<
    tower::util::Either<
        crate::layers::rate_limit::RateLimitLayer,
        crate::layers::rate_limit::SharedRateLimitLayer,
    >,
> {
    use tower::util::Either;
    let store = service.core().store.clone();
    if store.shared().is_some() {
        let buckets = std::sync::Arc::new(shared_limit::StoreBuckets(store));
        crate::layers::rate_limit::SharedRateLimitLayer::from_config(&config.rate_limit, buckets)
            .map(Either::Right)
    } else {
        crate::layers::rate_limit::RateLimitLayer::from_config(&config.rate_limit).map(Either::Left)
    }
}
