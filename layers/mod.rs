//! The plugin layers of the stack, one concern each, outermost first:
//! metrics → audit → auth → rate_limit → tasks → validate → images → `AgentService`.
//!
//! Each layer is a `tower::Layer` over `Service<McpRequest, Response = McpResponse,
//! Error = Infallible>` and is usable on its own.

pub mod audit;
pub mod auth;
pub mod images;
pub mod metrics;
pub mod rate_limit;
pub mod tasks;
pub mod validate;
