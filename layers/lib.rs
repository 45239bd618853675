//! The plugin layers of the stack, one concern each, outermost first:
//! metrics → audit → auth → rate_limit → tasks → validate → images → `AgentService`.
//!
//! Each layer is a `tower::Layer` over `Service<McpRequest, Response = McpResponse,
//! Error = Infallible>` and is usable on its own. This crate depends on the plugin surface
//! (the `agent-mcp-plugin` crate, re-exported here as [`plugin`]) and on nothing else of
//! agent-mcp, so each layer is written the way a layer of your own would be, and the compiler
//! keeps it so. The composition root (the `agent-mcp` package's `src/stack.rs`) converts
//! `agent.yaml`'s sections into the layers' small config types and builds the stack.

pub use agent_mcp_plugin as plugin;

pub mod audit;
pub mod auth;
pub mod images;
pub mod metrics;
pub mod rate_limit;
pub mod tasks;
pub mod validate;
