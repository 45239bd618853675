//! The composition root: [`AgentMcp`] opens the configured store, starts the agent and builds
//! the stack and the edges in front of it from one [`Config`]. Everything below it (the agent,
//! the store, the transports, the layers) is composed here and imports nothing from here.

use std::sync::Arc;

use uuid::Uuid;

use crate::agent::{Agent, AgentCore, AgentError};
use crate::config::{Config, StoreBackend};
use crate::layers::audit::AuditLayer;
use crate::service::AgentService;
use crate::stack::Stack;
use crate::stack::token_admission::TokenAdmission;
use crate::store::{MemoryStore, PostgresStore, SqliteStore, StoreError, TaskStore};
use crate::task::Task;
use crate::task::events::Follower;
use crate::task::input::Answer;
use crate::transport::http::{Admission, BodyBudget, HttpRules, McpHttpService};
use crate::transport::stdio::TaskApprovals;

/// Why a server could not start: its store, its model client, or a part the composition root
/// builds around the agent (the audit writer, the OAuth validator).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The model client could not be set up from `ollama`.
    #[error(transparent)]
    Model(ModelError),
    /// The configured store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The audit log cannot be written where `audit.file` says.
    #[error(transparent)]
    Audit(std::io::Error),
    /// `auth.oauth` cannot be used as written.
    #[error("auth.oauth: {0}")]
    OAuth(OAuthError),
}

impl StartError {
    /// The agent's own start-up errors, each where it belongs.
    fn of_agent(e: AgentError) -> Self {
        match e {
            AgentError::Ollama(e) => StartError::Model(ModelError(e)),
            AgentError::Store(e) => StartError::Store(e),
        }
    }
}

/// Why the Ollama client could not be set up from `ollama` (its message says what to fix).
/// Opaque: the model client is the crate's own.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ModelError(crate::ollama::OllamaError);

/// Why `auth.oauth` cannot be used as written (its message says which key and why). Opaque:
/// the OAuth resource server is the crate's own.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct OAuthError(crate::oauth::SettingsError);

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
    pub async fn start(config: &Config) -> Result<AgentMcp, StartError> {
        Self::start_protecting(config, Vec::new()).await
    }

    /// [`AgentMcp::start`], keeping `protect` (e.g. the configuration file it was loaded from)
    /// out of the agent's tools as well as the store and audit files, which always are.
    pub async fn start_protecting(
        config: &Config,
        protect: Vec<std::path::PathBuf>,
    ) -> Result<AgentMcp, StartError> {
        let store = open_store(config).await?;
        Self::start_inner(config, store, protect).await
    }

    /// Like [`AgentMcp::start`] with a store of your own.
    pub async fn start_with_store(
        config: &Config,
        store: Arc<dyn TaskStore>,
    ) -> Result<AgentMcp, StartError> {
        Self::start_inner(config, store, Vec::new()).await
    }

    async fn start_inner(
        config: &Config,
        store: Arc<dyn TaskStore>,
        protect: Vec<std::path::PathBuf>,
    ) -> Result<AgentMcp, StartError> {
        // Before the worker starts, so a bad audit.file stops nothing half-started. Also
        // before the agent records the identity of the server's files: they exist by now.
        let audit = crate::stack::audit_layer(&config.audit).map_err(StartError::Audit)?;
        let oauth = crate::stack::oauth_validator(&config.auth.oauth)
            .map_err(|e| StartError::OAuth(OAuthError(e)))?;
        // Approval decisions go to the audit log as their own lines.
        let decisions = audit.as_ref().map(|audit| {
            Arc::new(audit.around_ref().sink().clone()) as Arc<dyn crate::task::input::DecisionLog>
        });
        let agent = Agent::start_logging(config, store, protect, decisions)
            .await
            .map_err(StartError::of_agent)?;
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
            .with_queue_limits(crate::service::QueueLimits::from_config(&self.config.mcp))
    }

    /// The full stack: the configured layers around the [`AgentService`].
    pub fn stack(&self) -> Stack {
        self.stack_builder().build()
    }

    /// The full stack's builder, to insert layers of your own at its named places
    /// ([`crate::stack::Place`]: before auth, after auth, before the service), sharing this server's
    /// audit writer and rate-limit buckets.
    pub fn stack_builder(&self) -> crate::stack::StackBuilder {
        crate::stack::StackBuilder::new(&self.config, self.service(), self.audit.clone())
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
        let admission = TokenAdmission::new((&self.config.auth).into(), self.audit.clone())
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
    ) -> crate::ops::OpsEndpoints {
        let mut ops = crate::ops::OpsEndpoints::new(self.agent.core().clone(), metrics)
            .with_rules(HttpRules::from_config(&self.config));
        if let Some(oauth) = &self.oauth {
            ops = ops.with_resource_metadata(oauth.metadata().clone());
        }
        ops = ops.with_oversight(self.oversight_endpoints());
        let admission = match &self.config.http.metrics_token_sha256 {
            Some(hash) => TokenAdmission::new(
                crate::layers::auth::Tokens::default().with_hex_hash("metrics", hash),
                None,
            ),
            None => {
                TokenAdmission::new((&self.config.auth).into(), None).with_oauth(self.oauth.clone())
            }
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
    /// owns each ([`crate::oversight`]).
    pub fn oversight(&self) -> crate::oversight::Oversight {
        crate::oversight::Oversight::new(self.agent.core().clone())
    }

    /// The oversight page and its routes (`/`, `/assets/…`, `/api/…`), behind the same
    /// Host/Origin guard as `/mcp` and, for `/api/`, the same bearer tokens or OAuth.
    pub fn oversight_endpoints(&self) -> crate::oversight::http::OversightEndpoints {
        let admission = TokenAdmission::new((&self.config.auth).into(), self.audit.clone())
            .with_oauth(self.oauth.clone());
        let identify =
            crate::stack::caller::TokenIdentity::new(admission, (&self.config.auth).into());
        crate::oversight::http::OversightEndpoints::new(
            self.oversight(),
            HttpRules::from_config(&self.config),
            Arc::new(identify),
        )
    }

    /// What [`crate::transport::stdio::serve_with`] needs to ask a 2025 stdio session for
    /// approvals (server→client `elicitation/create`).
    pub fn stdio_asker(&self) -> crate::transport::stdio::StdioAsker {
        crate::transport::stdio::StdioAsker::new(self.agent.core().clone())
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
    pub async fn readiness(&self) -> crate::ops::Readiness {
        crate::ops::readiness(self.agent.core()).await
    }

    /// The configuration this server was started with.
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

/// The agent core as what the stdio transport asks approvals through: the composition root is
/// the one place that knows both.
#[async_trait::async_trait]
impl TaskApprovals for AgentCore {
    fn follow(&self, id: Uuid) -> Follower {
        self.events.follow(&[id])
    }

    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        self.store.task(id).await
    }

    async fn answer(&self, id: Uuid, key: &str, answer: &Answer) -> Result<bool, StoreError> {
        let recorded = self.store.answer_input(id, key, answer).await?;
        if recorded {
            self.notify_task_changed(id);
        }
        Ok(recorded)
    }
}

/// Opens the store `config` names (`store.backend`), migrated, without starting an agent (what
/// `agent-mcp diff` and `undo` over `--stdio` read).
pub async fn open_store(config: &Config) -> Result<Arc<dyn TaskStore>, StoreError> {
    Ok(match config.store.backend {
        StoreBackend::Memory => Arc::new(MemoryStore::new()),
        StoreBackend::Postgres => Arc::new(PostgresStore::open(&config.store).await?),
        StoreBackend::Sqlite => {
            // The default file is per workspace, outside it (Config::store_path).
            let mut store = config.store.clone();
            store.path = Some(
                config
                    .store_path()
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?,
            );
            Arc::new(SqliteStore::open(&store).await?)
        }
    })
}
