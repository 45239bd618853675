//! The plugin layers of the stack, one concern each, outermost first:
//! metrics → audit → auth → rate_limit → tasks → validate → images → `AgentService`.
//!
//! Each layer is a `tower::Layer` over `Service<McpRequest, Response = McpResponse,
//! Error = Infallible>` and is usable on its own. Each uses only the plugin surface
//! ([`crate::plugin`]) and its own small config type, as a layer written outside this crate
//! would (`tests/module_boundaries.rs` keeps it so); the composition root (`src/stack.rs`)
//! converts `agent.yaml`'s sections into those types and builds the stack.

pub mod audit;
pub mod auth;
pub mod images;
pub mod metrics;
pub mod rate_limit;
pub mod tasks;
pub mod validate;
