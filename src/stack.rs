//! Composes the configured layers around the [`AgentService`], outermost first:
//! metrics → audit → auth → rate_limit → tasks → validate → images → `AgentService`.
//!
//! The tasks layer around the agent core (its [`TaskBackend`](crate::layers::tasks::TaskBackend)
//! here), on its own:
//!
//! ```
//! use std::sync::Arc;
//!
//! use agent_mcp::agent::Agent;
//! use agent_mcp::config::Config;
//! use agent_mcp::layers::tasks::{TasksConfig, TasksLayer};
//! use agent_mcp::protocol::{McpRequest, ProtocolVersion, RequestContext, RequestId, Transport};
//! use agent_mcp::service::AgentService;
//! use agent_mcp::store::MemoryStore;
//! use serde_json::{Map, json};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::start(&Config::default(), Arc::new(MemoryStore::new())).await?;
//! let mut svc = ServiceBuilder::new()
//!     .layer(TasksLayer::new(agent.core().clone(), TasksConfig::default()))
//!     .service(AgentService::new(agent.core().clone()));
//!
//! let request = |method: &str| McpRequest::new(
//!     Some(RequestId::Number(1)),
//!     method,
//!     Map::new(),
//!     RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
//! );
//!
//! // Discovery advertises the extension.
//! let discover = svc.ready().await?.call(request("server/discover")).await?;
//! let body = discover.to_json().unwrap_or_default();
//! assert_eq!(
//!     body["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
//!     json!({})
//! );
//!
//! // tasks/* from a request that did not declare the extension: -32021.
//! let get = svc.ready().await?.call(request("tasks/get")).await?;
//! assert_eq!(get.error_code(), Some(-32021));
//! # Ok(()) }
//! ```

pub mod admission;
mod layer_config;
mod shared_limit;

pub use layer_config::{audit_layer, rate_limits};
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
        layer_config::audit_layer(&config.audit)?,
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
        .layer(crate::layers::metrics::MetricsLayer::default())
        // layer: audit
        .option_layer(audit)
        // layer: auth
        .layer(crate::layers::auth::AuthLayer::new(
            crate::layers::auth::Tokens::from(&config.auth),
        ))
        // layer: rate_limit
        .option_layer(rate_limit(config, &service))
        // layer: tasks
        // Tasks stay readable for `store.retention` (the advertised `ttlMs`); the store
        // purges them only after that.
        .layer(crate::layers::tasks::TasksLayer::new(
            service.core().clone(),
            crate::layers::tasks::TasksConfig {
                ttl: config.store.retention,
                ..Default::default()
            },
        ))
        // layer: validate
        .layer(crate::layers::validate::ValidateLayer::new(
            crate::layers::validate::ToolSchemas::with_max_request_bytes(
                usize::try_from(config.mcp.max_request_bytes.as_u64()).unwrap_or(usize::MAX),
            ),
        ))
        // layer: images
        .layer(crate::layers::images::ImagesLayer::new(
            crate::layers::images::ImageRules(config.mcp.images),
        ))
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
    let limits = layer_config::rate_limits(&config.rate_limit)?;
    let store = service.core().store.clone();
    Some(if store.shared().is_some() {
        let buckets = std::sync::Arc::new(shared_limit::StoreBuckets(store));
        Either::Right(crate::layers::rate_limit::SharedRateLimitLayer::new(
            limits, buckets,
        ))
    } else {
        Either::Left(crate::layers::rate_limit::RateLimitLayer::new(limits))
    })
}
