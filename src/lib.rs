//! agent-mcp: hand natural-language work requests to a local Ollama-backed agent over MCP.
//!
//! ```text
//!  POST /mcp (hyper / axum / any tower host)        stdin / stdout (one JSON message per line)
//!         transport::http                                  transport::stdio
//!                  \                                        /
//!         parse one JSON-RPC message, classify its era, check transport rules
//!                                    |
//!    layers/   metrics → audit → [1] → auth → [2] → rate_limit → tasks → validate → images → [3]
//!              (outermost first; [1] before auth, [2] after auth, [3] before the service: where
//!              stack::StackBuilder puts layers of your own)
//!                                    |
//!    service::AgentService   server/discover, initialize (legacy), tools/list, tools/call
//!                                    |
//!    agent       queue (one task running, FIFO for the rest) → runner → ollama, store
//! ```
//!
//! The protocol types, tool arguments, task model and the `Check`/`Around`/`Wrap` machinery are
//! the `agent-mcp-plugin` crate ([`plugin`]); the built-in layers the `agent-mcp-layers` crate
//! ([`layers`]), which depends on the plugin crate alone; this crate is the core and composes
//! them.
//!
//! Three ways to use it: the `agent-mcp` binary (`serve` for HTTP, `stdio`), mounting
//! [`AgentMcp::http_service`] into an axum or hyper app, or driving [`AgentMcp::stack`] (a
//! `tower::Service<McpRequest>`) from your own transport.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = agent_mcp::config::Config::default();
//! let server = agent_mcp::AgentMcp::start(&config).await?;
//! let app = axum::Router::new().route_service("/mcp", server.http_service());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

// One audited exception: `pre_exec` in src/agent/tools/command.rs (`set_up_child`).
#![deny(unsafe_code)]

pub mod agent;
mod app;
pub mod client;
pub mod config;
pub mod logging;
pub mod metrics;
pub mod oauth;
pub mod ollama;
pub mod ops;
pub mod service;
pub mod stack;
pub mod store;
pub mod telemetry;
pub mod transport;

/// The built-in layers (the `agent-mcp-layers` crate, written against [`plugin`] alone).
pub use agent_mcp_layers as layers;
/// The plugin surface (the `agent-mcp-plugin` crate): what a layer of the stack needs.
pub use agent_mcp_plugin as plugin;
use agent_mcp_plugin::serde_with;
/// The MCP tools this server publishes (`agent_run`, `agent_status`): their definitions and
/// typed arguments, from the plugin crate. Not the agent's own sandboxed tools.
pub use agent_mcp_plugin::tools as mcp_tools;
pub use agent_mcp_plugin::{protocol, redact, task};

pub use app::{AgentMcp, StartError};
pub use stack::Stack;
