//! agent-mcp: hand natural-language work requests to a local Ollama-backed agent over MCP.
//!
//! # Where to start
//!
//! [`AgentMcp`] is the server: [`AgentMcp::start`] opens the configured store, starts the
//! agent and builds the stack from one [`config::Config`] (every key has a default; the
//! binary reads it from `agent.yaml`). From there, three ways to serve it:
//!
//! - mount [`AgentMcp::http_service`] (`POST /mcp`) in an axum or hyper app;
//! - drive [`AgentMcp::stack`] (a `tower::Service<McpRequest>`) from your own transport, e.g.
//!   [`transport::stdio::serve`] over any pair of byte streams;
//! - insert layers of your own at the named places of [`AgentMcp::stack_builder`].
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
//!
//! The repository's `examples/` are runnable programs for each: `axum_mount.rs`,
//! `hyper_server.rs`, `stdio_adapter.rs`, `compose_stack.rs` (your service behind our layers,
//! your layer in our stack) and `caller-allowlist/` (a layer in a crate of its own, on the
//! plugin API alone). `docs/embedding.md` walks through them.
//!
//! # The request path
//!
//! ```text
//!  POST /mcp (hyper / axum / any tower host)        stdin / stdout (one JSON message per line)
//!         transport::http                                  transport::stdio
//!                  \                                        /
//!         parse one JSON-RPC message, classify its era, check transport rules
//!                                    |
//!    layers    metrics → audit → [1] → auth → [2] → rate_limit → tasks → validate → images → [3]
//!              (outermost first; [1] before auth, [2] after auth, [3] before the service: where
//!              stack::StackBuilder puts layers of your own)
//!                                    |
//!    service::AgentService   server/discover, initialize (legacy), tools/list, tools/call
//!                                    |
//!    the agent   queue (one task running, FIFO for the rest) → runner → Ollama, store
//! ```
//!
//! # The map
//!
//! | module | what it is for |
//! |---|---|
//! | [`AgentMcp`], [`StartError`] ([`ModelError`], [`OAuthError`]) | the composition root: one server from one configuration |
//! | [`config`] | `agent.yaml`: every section's type, defaults, validation, `AGENT_MCP_*` overrides |
//! | [`stack`] | the layers around the service, in order; [`stack::StackBuilder`] and its [`stack::Place`]s |
//! | [`service`] | [`service::AgentService`], the core `tower::Service<McpRequest>` the layers wrap |
//! | [`transport`] | the edges: [`transport::http`] (`POST /mcp` as a tower service), [`transport::server`] (a hyper server for it), [`transport::stdio`] |
//! | [`store`] | where tasks and sessions live: the [`store::TaskStore`] trait and its SQLite, PostgreSQL and memory stores ([`AgentMcp::start_with_store`] takes your own) |
//! | [`ops`] | `/healthz`, `/readyz`, `/metrics` for an operator ([`AgentMcp::ops_endpoints`]) |
//! | [`metrics`] | the Prometheus series and recorder |
//! | [`oversight`] | a task's diff, undo, cancel and approval answers for its owner, and the page at `/` ([`AgentMcp::oversight`]) |
//! | [`cli`] | the `agent-mcp` command line: [`cli::main`] is the whole binary |
//! | [`plugin`], [`protocol`], [`task`], [`mcp_tools`], [`redact`] | the `agent-mcp-plugin` crate: protocol types, the task model, the published tools' arguments, secrets kept out of logs, and what a layer is written with |
//! | [`layers`] | the `agent-mcp-layers` crate: the built-in layers, on the plugin crate alone |
//!
//! The agent itself (queue, runner, steering, its sandboxed tools), the Ollama client, the
//! OAuth resource server, telemetry, the log writer and the terminal client are the crate's
//! own (`pub(crate)`): [`cli`] wires them for the binary, and the public types above hold
//! them opaquely ([`stack::AgentTasks`], [`ModelError`]). The crate's integration tests and
//! benchmarks reach four of them through a feature of their own (`internals`, see Cargo.toml)
//! that is no part of this API.

// One audited exception: `pre_exec` in src/agent/tools/command.rs (`set_up_child`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod config;
pub mod metrics;
pub mod ops;
pub mod oversight;
pub mod service;
pub mod stack;
pub mod store;
pub mod transport;

mod app;

// The crate's own parts: the terminal client and the log writer are reached from `cli` alone.
pub(crate) mod client;
pub(crate) mod logging;

// The agent, the Ollama client, the OAuth resource server and telemetry are the crate's own
// too. The crate's integration tests, benchmarks and fuzz targets (crates of their own) reach
// into them through the `internals` feature: the crate's dev-dependency on itself turns it on
// for its tests and benchmarks alone, `fuzz/Cargo.toml` for the fuzz targets. Without it, as
// every dependent builds the crate, they are crate-private and no part of the API, and what
// the crate itself does not use of them (the tests' helpers, re-exports for them) is allowed
// to go unused.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod agent;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod agent;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod oauth;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod oauth;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod ollama;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod ollama;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod telemetry;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod telemetry;

/// The built-in layers (the `agent-mcp-layers` crate, written against [`plugin`] alone).
pub use agent_mcp_layers as layers;
/// The plugin surface (the `agent-mcp-plugin` crate): what a layer of the stack needs.
pub use agent_mcp_plugin as plugin;
/// Secrets kept out of logs and answers (URLs with passwords, tokens), from the plugin crate.
pub use agent_mcp_plugin::redact;
use agent_mcp_plugin::serde_with;
/// The MCP tools this server publishes (`agent_run`, `agent_status`): their definitions and
/// typed arguments, from the plugin crate. Not the agent's own sandboxed tools.
pub use agent_mcp_plugin::tools as mcp_tools;
pub use agent_mcp_plugin::{protocol, task};

pub use app::{AgentMcp, ModelError, OAuthError, StartError, open_store};
pub use stack::Stack;
