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
pub mod client;
pub mod config;
pub mod logging;
pub mod metrics;
pub mod oauth;
pub mod ollama;
pub mod ops;
pub mod oversight;
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
pub use agent_mcp_plugin::{protocol, redact, task, tools};

use std::convert::Infallible;
use std::sync::Arc;

use tower::util::BoxCloneSyncService;

use crate::agent::{Agent, AgentError};
use crate::config::{Config, StoreBackend};
use crate::layers::audit::AuditLayer;
use crate::protocol::{McpRequest, McpResponse};
use crate::service::AgentService;
use crate::store::{MemoryStore, PostgresStore, SqliteStore, TaskStore};
use crate::transport::http::{Admission, BodyBudget, HttpRules, McpHttpService};

/// Opens the store `config` names (`store.backend`), migrated, without starting an agent.
pub async fn open_store(config: &Config) -> Result<Arc<dyn TaskStore>, crate::store::StoreError> {
    Ok(match config.store.backend {
        StoreBackend::Memory => Arc::new(MemoryStore::new()),
        StoreBackend::Postgres => Arc::new(PostgresStore::open(&config.store).await?),
        StoreBackend::Sqlite => {
            // The default file is per workspace, outside it (Config::store_path).
            let mut store = config.store.clone();
            store.path = Some(
                config
                    .store_path()
                    .map_err(|e| crate::store::StoreError::Unavailable(e.to_string()))?,
            );
            Arc::new(SqliteStore::open(&store).await?)
        }
    })
}

/// The whole MCP stack as one cloneable service.
pub type Stack = BoxCloneSyncService<McpRequest, McpResponse, Infallible>;

/// A running server: the agent (queue and worker) and the stack in front of it.
#[derive(Debug)]
pub struct AgentMcp {
    agent: Agent,
    config: Config,
    /// One audit writer for every stack this server builds, flushed at shutdown.
    audit: Option<AuditLayer>,
    /// One budget of buffered request bodies (`http.max_buffered_bytes`) for every HTTP edge
    /// this server builds.
    body_budget: BodyBudget,
    /// `auth.oauth`'s access-token validator (one key cache for every edge), when it is on.
    oauth: Option<crate::oauth::TokenValidator>,
}

impl AgentMcp {
    /// Opens the configured store, starts the agent's worker and builds the stack.
    pub async fn start(config: &Config) -> Result<AgentMcp, AgentError> {
        Self::start_protecting(config, Vec::new()).await
    }

    /// [`AgentMcp::start`], keeping `protect` (e.g. the configuration file it was loaded from)
    /// out of the agent's tools as well as the store and audit files, which always are.
    pub async fn start_protecting(
        config: &Config,
        protect: Vec<std::path::PathBuf>,
    ) -> Result<AgentMcp, AgentError> {
        let store = open_store(config).await?;
        Self::start_inner(config, store, protect).await
    }

    /// Like [`AgentMcp::start`] with a store of your own.
    pub async fn start_with_store(
        config: &Config,
        store: Arc<dyn TaskStore>,
    ) -> Result<AgentMcp, AgentError> {
        Self::start_inner(config, store, Vec::new()).await
    }

    async fn start_inner(
        config: &Config,
        store: Arc<dyn TaskStore>,
        protect: Vec<std::path::PathBuf>,
    ) -> Result<AgentMcp, AgentError> {
        // Before the worker starts, so a bad audit.file stops nothing half-started. Also
        // before the agent records the identity of the server's files: they exist by now.
        let audit = stack::audit_layer(&config.audit).map_err(AgentError::Audit)?;
        let oauth = stack::oauth_validator(&config.auth.oauth).map_err(AgentError::OAuth)?;
        // Approval decisions go to the audit log as their own lines.
        let decisions = audit.as_ref().map(|audit| {
            Arc::new(audit.around_ref().sink().clone()) as Arc<dyn crate::task::input::DecisionLog>
        });
        let agent = Agent::start_logging(config, store, protect, decisions).await?;
        Ok(AgentMcp {
            agent,
            config: config.clone(),
            audit,
            body_budget: BodyBudget::new(config.http.buffered_limit()),
            oauth,
        })
    }

    /// The core service without any layer.
    pub fn service(&self) -> AgentService {
        AgentService::new(self.agent.core().clone())
            .with_queue_limits(service::QueueLimits::from_config(&self.config.mcp))
    }

    /// The full stack: the configured layers around the [`AgentService`].
    pub fn stack(&self) -> Stack {
        self.stack_builder().build()
    }

    /// The full stack's builder, to insert layers of your own at its named places
    /// ([`stack::Place`]: before auth, after auth, before the service), sharing this server's
    /// audit writer and rate-limit buckets.
    pub fn stack_builder(&self) -> stack::StackBuilder {
        stack::StackBuilder::new(&self.config, self.service(), self.audit.clone())
    }

    /// The HTTP edge (`POST /mcp`) around the full stack, ready to mount: with `auth.tokens`,
    /// a request without a valid bearer token is refused from its headers, before its body is
    /// read; every edge of this server shares one body budget (`http.max_buffered_bytes`).
    pub fn http_service(&self) -> McpHttpService<Stack> {
        self.http_service_for(self.stack())
    }

    /// [`AgentMcp::http_service`] around a stack of your own (e.g. one from
    /// [`AgentMcp::stack_builder`]), with this server's HTTP rules and body budget.
    pub fn http_service_for(&self, stack: Stack) -> McpHttpService<Stack> {
        McpHttpService::new(stack, self.http_rules())
    }

    /// The HTTP rules [`AgentMcp::http_service`] applies.
    pub fn http_rules(&self) -> HttpRules {
        let admission =
            stack::admission::TokenAdmission::new((&self.config.auth).into(), self.audit.clone())
                .with_oauth(self.oauth.clone());
        HttpRules::from_config(&self.config)
            .with_body_budget(self.body_budget.clone())
            .with_admission(Arc::new(admission))
    }

    /// The operator endpoints (`/healthz`, `/readyz`, `/metrics`, and with `auth.oauth` the
    /// protected resource metadata) for this server, behind the same Host/Origin guard as
    /// `/mcp`; `/metrics` needs `http.metrics_token_sha256`'s token when it is set, else one of
    /// `auth.tokens` or a valid OAuth access token when those are configured.
    pub fn ops_endpoints(
        &self,
        metrics: Option<crate::metrics::MetricsHandle>,
    ) -> ops::OpsEndpoints {
        let mut ops = ops::OpsEndpoints::new(self.agent.core().clone(), metrics)
            .with_rules(HttpRules::from_config(&self.config));
        if let Some(oauth) = &self.oauth {
            ops = ops.with_resource_metadata(oauth.metadata().clone());
        }
        ops = ops.with_oversight(self.oversight_endpoints());
        let admission = match &self.config.http.metrics_token_sha256 {
            Some(hash) => stack::admission::TokenAdmission::new(
                crate::layers::auth::Tokens::default().with_hex_hash("metrics", hash),
                None,
            ),
            None => stack::admission::TokenAdmission::new((&self.config.auth).into(), None)
                .with_oauth(self.oauth.clone()),
        };
        let open = self.config.http.metrics_token_sha256.is_none()
            && self.config.auth.tokens.is_empty()
            && self.oauth.is_none();
        if !open {
            let admission: Arc<dyn Admission> = Arc::new(admission);
            ops = ops.with_metrics_admission(admission);
        }
        ops
    }

    /// Diff, undo, cancel and approval answers on this server's tasks, for the caller who
    /// owns each ([`oversight`]).
    pub fn oversight(&self) -> oversight::Oversight {
        oversight::Oversight::new(self.agent.core().clone())
    }

    /// The oversight page and its routes (`/`, `/assets/…`, `/api/…`), behind the same
    /// Host/Origin guard as `/mcp` and, for `/api/`, the same bearer tokens or OAuth.
    pub fn oversight_endpoints(&self) -> oversight::http::OversightEndpoints {
        let admission =
            stack::admission::TokenAdmission::new((&self.config.auth).into(), self.audit.clone())
                .with_oauth(self.oauth.clone());
        let identify = stack::caller::TokenIdentity::new(admission, (&self.config.auth).into());
        oversight::http::OversightEndpoints::new(
            self.oversight(),
            HttpRules::from_config(&self.config),
            Arc::new(identify),
        )
    }

    /// What [`transport::stdio::serve_with`] needs to ask a 2025 stdio session for
    /// approvals (server→client `elicitation/create`).
    pub fn stdio_asker(&self) -> transport::stdio::StdioAsker {
        transport::stdio::StdioAsker::new(self.agent.core().clone())
    }

    /// The audit writer, when `audit.enabled`: [`AuditSink::reopen`](crate::layers::audit::AuditSink::reopen)
    /// it after rotating `audit.file` (the server does on SIGHUP).
    pub fn audit_sink(&self) -> Option<&crate::layers::audit::AuditSink> {
        self.audit.as_ref().map(|audit| audit.around_ref().sink())
    }

    /// Ends every push stream (`subscriptions/listen`, 2025 stdio task notifications)
    /// gracefully: a listen gets its final result. Call it when shutdown begins, before
    /// waiting for in-flight requests, so open streams do not hold the shutdown until their
    /// tasks finish. [`AgentMcp::shutdown`] calls it too.
    pub fn end_streams(&self) {
        self.agent.core().events.close();
    }

    /// Checks that the store takes writes and Ollama answers.
    pub async fn readiness(&self) -> ops::Readiness {
        ops::readiness(self.agent.core()).await
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Stops the worker (a running task is cancelled), then waits up to two seconds for the
    /// audit lines of every answered request to be written.
    pub async fn shutdown(self) {
        self.end_streams();
        self.agent.shutdown().await;
        if let Some(audit) = self.audit {
            // Refusals counted but not yet written go out before the last flush.
            audit.around_ref().write_open_counts(true);
            let sink = audit.around_ref().sink().clone();
            let flushed =
                tokio::task::spawn_blocking(move || sink.flush(std::time::Duration::from_secs(2)))
                    .await
                    .unwrap_or(false);
            if !flushed {
                tracing::error!(
                    target: "agent_mcp::audit",
                    "the audit writer did not finish within 2 s of shutdown; its last lines may be missing"
                );
            }
        }
    }
}
