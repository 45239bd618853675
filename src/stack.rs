//! Composes the configured layers around the [`AgentService`], outermost first:
//! metrics → audit → auth → rate_limit → tasks → validate → images → `AgentService`.
//!
//! [`StackBuilder`] builds that stack with layers of your own at three named places
//! ([`Place`]): before auth (sees every request, anonymous ones too), after auth (sees the
//! caller's identity, `req.ctx.identity`), and before the service (sees only what every
//! built-in passed, with typed, checked arguments). Each built-in is there too, configured, for
//! a stack composed by hand: [`StackBuilder::auth`], [`StackBuilder::rate_limit`] (the shared
//! PostgreSQL buckets when the store is shared), and so on.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use agent_mcp::plugin::{McpRequest, McpResult, WrapLayer, around_fn, finish_fn};
//!
//! let server = agent_mcp::AgentMcp::start(&agent_mcp::config::Config::default()).await?;
//! // Logs who asked what, after auth so the caller is known.
//! let who = WrapLayer::with(around_fn(|req: &mut McpRequest| {
//!     let caller = req.ctx.identity.clone();
//!     Ok(finish_fn(move |_response: &mut agent_mcp::plugin::McpResponse| {
//!         eprintln!("answered {caller:?}");
//!     }))
//! }));
//! let stack = server.stack_builder().after_auth(who).build();
//! let edge = server.http_service_for(stack);
//! # let _ = (edge, McpResult::empty());
//! # Ok(()) }
//! ```
//!
//! The tasks layer around the agent core (its [`TaskBackend`](crate::layers::tasks::TaskBackend)
//! here), on its own:
//!
//! ```
//! use std::sync::Arc;
//!
//! use agent_mcp::AgentMcp;
//! use agent_mcp::config::Config;
//! use agent_mcp::protocol::{McpRequest, ProtocolVersion, RequestContext, RequestId, Transport};
//! use agent_mcp::store::MemoryStore;
//! use serde_json::{Map, json};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = AgentMcp::start_with_store(&Config::default(), Arc::new(MemoryStore::new())).await?;
//! let built_in = server.stack_builder();
//! let mut svc = ServiceBuilder::new()
//!     .layer(built_in.tasks())
//!     .service(built_in.service().clone());
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

pub(crate) mod caller;
mod layer_config;
mod shared_limit;
pub(crate) mod token_admission;

pub(crate) use layer_config::{audit_layer, oauth_validator};
pub(crate) use shared_limit::StoreBuckets;
mod task_backend;

pub use task_backend::AgentTasks;

use std::convert::Infallible;
use std::sync::Arc;

use tower::ServiceBuilder;
use tower::util::{BoxCloneSyncService, Either};
use tower_layer::Layer;
use tower_service::Service;

use crate::config::Config;
use crate::layers::audit::AuditLayer;
use crate::layers::auth::{AuthLayer, Tokens};
use crate::layers::images::{ImageRules, ImagesLayer};
use crate::layers::metrics::MetricsLayer;
use crate::layers::rate_limit::{RateLimitLayer, SharedRateLimitLayer};
use crate::layers::tasks::{TasksConfig, TasksLayer};
use crate::layers::validate::{ToolSchemas, ValidateLayer};
use crate::protocol::{McpRequest, McpResponse};
use crate::service::AgentService;

/// The whole MCP stack as one cloneable service.
pub type Stack = BoxCloneSyncService<McpRequest, McpResponse, Infallible>;

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
    StackBuilder::new(config, service, audit).build()
}

/// Where [`StackBuilder`] puts a layer of your own in the default order:
/// metrics → audit → **before auth** → auth → **after auth** → rate_limit → tasks → validate →
/// images → **before the service** → `AgentService`. Layers at one place run in the order they
/// were added, the first outermost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Outside auth: every request, the anonymous and the refused ones too.
    BeforeAuth,
    /// Inside auth, outside the rate limit: the caller is known (`req.ctx.identity`).
    AfterAuth,
    /// Innermost: what every built-in passed, the tool arguments typed and checked.
    BeforeService,
}

/// A layer [`StackBuilder`] takes: any `tower::Layer` over the [`Stack`] whose service is a
/// cloneable, thread-safe MCP service (every layer of the plugin surface is).
pub trait StackLayer: Send + Sync + 'static {
    /// The layer around `inner`, boxed so layers of any type line up at one place.
    fn wrap(&self, inner: Stack) -> Stack;
}

impl<L> StackLayer for L
where
    L: Layer<Stack> + Send + Sync + 'static,
    L::Service: Service<McpRequest, Response = McpResponse, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as Service<McpRequest>>::Future: Send + 'static,
{
    fn wrap(&self, inner: Stack) -> Stack {
        BoxCloneSyncService::new(self.layer(inner))
    }
}

/// A layer of your own at one place.
type Inserted = Arc<dyn StackLayer>;

/// The configured stack with layers of your own at the named [`Place`]s; with none it is the
/// stack [`build_with_audit`] makes, with no box added.
#[derive(Clone)]
pub struct StackBuilder {
    config: Config,
    service: AgentService,
    audit: Option<AuditLayer>,
    inserted: [Vec<Inserted>; 3],
}

impl std::fmt::Debug for StackBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackBuilder")
            .field("inserted", &self.inserted.each_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

impl StackBuilder {
    /// The default stack around `service`, configured by `config`, with `audit` as its audit
    /// layer (`None`: no audit).
    pub fn new(config: &Config, service: AgentService, audit: Option<AuditLayer>) -> Self {
        Self {
            config: config.clone(),
            service,
            audit,
            inserted: Default::default(),
        }
    }

    /// Puts `layer` at `place` (after the layers already there).
    pub fn insert(mut self, place: Place, layer: impl StackLayer) -> Self {
        self.inserted[place as usize].push(Arc::new(layer));
        self
    }

    /// [`insert`](Self::insert) at [`Place::BeforeAuth`].
    pub fn before_auth(self, layer: impl StackLayer) -> Self {
        self.insert(Place::BeforeAuth, layer)
    }

    /// [`insert`](Self::insert) at [`Place::AfterAuth`]: the layer sees the caller's identity.
    pub fn after_auth(self, layer: impl StackLayer) -> Self {
        self.insert(Place::AfterAuth, layer)
    }

    /// [`insert`](Self::insert) at [`Place::BeforeService`].
    pub fn before_service(self, layer: impl StackLayer) -> Self {
        self.insert(Place::BeforeService, layer)
    }

    /// The metrics layer (counts every request by method and outcome, refusals included).
    pub fn metrics(&self) -> MetricsLayer {
        MetricsLayer::default()
    }

    /// The audit layer, when `audit.enabled`.
    pub fn audit(&self) -> Option<AuditLayer> {
        self.audit.clone()
    }

    /// The auth layer with `auth.tokens`.
    pub fn auth(&self) -> AuthLayer {
        AuthLayer::new(Tokens::from(&self.config.auth))
    }

    /// The rate limit `rate_limit` asks for: in this process, or in the shared store's buckets
    /// when the store is shared (`store.backend: postgres`), so it holds across instances.
    pub fn rate_limit(&self) -> Option<Either<RateLimitLayer, SharedRateLimitLayer>> {
        let limits = layer_config::rate_limits(&self.config.rate_limit)?;
        let store = self.service.core().store.clone();
        Some(if store.shared().is_some() {
            Either::Right(SharedRateLimitLayer::new(
                limits,
                Arc::new(StoreBuckets(store)),
            ))
        } else {
            Either::Left(RateLimitLayer::new(limits))
        })
    }

    /// The tasks layer over the agent core. Tasks stay readable for `store.retention` (the
    /// advertised `ttlMs`); the store purges them only after that.
    pub fn tasks(&self) -> TasksLayer<AgentTasks> {
        TasksLayer::new(
            Arc::new(AgentTasks(self.service.core().clone())),
            TasksConfig {
                ttl: self.config.store.retention,
                ..Default::default()
            },
        )
    }

    /// The validate layer, with `mcp.max_request_bytes`.
    pub fn validate(&self) -> ValidateLayer {
        ValidateLayer::new(ToolSchemas::with_max_request_bytes(
            usize::try_from(self.config.mcp.max_request_bytes.as_u64()).unwrap_or(usize::MAX),
        ))
    }

    /// The images layer, with `mcp.images`.
    pub fn images(&self) -> ImagesLayer {
        ImagesLayer::new(ImageRules(self.config.mcp.images))
    }

    /// The service at the centre.
    pub fn service(&self) -> &AgentService {
        &self.service
    }

    /// The stack, outermost first (see [`Place`]).
    pub fn build(self) -> Stack {
        let [before_auth, after_auth, before_service] = self.inserted.clone().map(boxed);
        let svc = ServiceBuilder::new()
            .layer(self.metrics())
            .option_layer(self.audit())
            .option_layer(before_auth)
            .layer(self.auth())
            .option_layer(after_auth)
            .option_layer(self.rate_limit())
            .layer(self.tasks())
            .layer(self.validate())
            .layer(self.images())
            .option_layer(before_service)
            .service(self.service);
        BoxCloneSyncService::new(svc)
    }
}

/// The layers inserted at one place as one layer, or `None` when there are none (no box).
fn boxed(layers: Vec<Inserted>) -> Option<InsertedLayers> {
    (!layers.is_empty()).then(|| InsertedLayers(layers.into()))
}

/// Layers of your own at one [`Place`], the first outermost.
#[derive(Clone)]
struct InsertedLayers(Arc<[Inserted]>);

impl<S> Layer<S> for InsertedLayers
where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    type Service = Stack;

    fn layer(&self, inner: S) -> Stack {
        self.0
            .iter()
            .rev()
            .fold(BoxCloneSyncService::new(inner), |svc, layer| {
                layer.wrap(svc)
            })
    }
}
