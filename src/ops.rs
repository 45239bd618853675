//! Operator endpoints of the standalone server: `GET /healthz`, `GET /readyz`, `GET /metrics`.
//!
//! - `/healthz`: the process is up and serving HTTP (always 200).
//! - `/readyz`: the task store takes writes and Ollama answers; 200 when both hold, else 503,
//!   with a JSON body saying which check failed and why. The store's part is what the store
//!   last saw of itself ([`crate::store::StoreHealth`]): a failure seen by any call, the lease
//!   heartbeat or the store's own probe (every [`crate::store::PROBE_EVERY`]) answers 503 at
//!   once, and the first answer after it 200 again; only when nothing confirmed the store for
//!   [`STORE_FRESH`] is it asked (one question at a time, whatever the number of hits).
//!   Ollama is asked at most once every [`READY_TTL`]: hits in between get the last result,
//!   so polling `/readyz` never turns into one Ollama call per hit.
//! - `/metrics`: Prometheus text (see [`crate::metrics`] for the series; the store's health is
//!   [`crate::metrics::STORE_UP`], read like `/readyz`'s without asking the store), behind a
//!   bearer token when one is configured (`http.metrics_token_sha256`, else any of `auth.tokens` or
//!   a valid `auth.oauth` access token).
//!
//! - `/.well-known/oauth-protected-resource/mcp` (RFC 9728 §3.1's form for the resource's
//!   path) and the root form `/.well-known/oauth-protected-resource`, when `auth.oauth` is on:
//!   the protected resource metadata, which tells an OAuth client where to get a token
//!   (`authorization_servers`) and what to ask for (`scopes_supported`). No token is needed
//!   to read it; it is how a client learns to get one.
//!
//! All of them answer only requests that pass the same Host/Origin guard as `/mcp`
//! (`check_host_and_origin`): a page that rebinds a name to 127.0.0.1 reads none of them.
//! Error texts have any URL password redacted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::agent::AgentCore;
use crate::metrics::MetricsHandle;
use crate::oauth::ProtectedResourceMetadata;
use crate::protocol::{Credential, Refusal};
use crate::redact::redact_urls_in;
use crate::store::{PROBE_EVERY, StoreError};
use crate::task::TaskState;
use crate::transport::http::guard::check_host_and_origin;
use crate::transport::http::{Admission, HttpRules};

/// How long `/readyz` waits for Ollama's `/api/version`.
const OLLAMA_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long Ollama's readiness result is reused before `/readyz` asks it again. The store's
/// is never reused this way: see [`STORE_FRESH`].
pub const READY_TTL: Duration = Duration::from_secs(5);

/// How recently the store must have answered for `/readyz` to say so without asking it: a
/// little over one [`PROBE_EVERY`], so a store whose probe runs is never asked by `/readyz`.
pub const STORE_FRESH: Duration = PROBE_EVERY.saturating_add(Duration::from_millis(250));

/// What `/readyz` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// The store takes writes, or why not.
    pub store: Result<(), String>,
    /// Ollama answers, or why not.
    pub ollama: Result<(), String>,
}

impl Readiness {
    /// Both the store and Ollama are ready.
    pub fn is_ready(&self) -> bool {
        self.store.is_ok() && self.ollama.is_ok()
    }
}

/// Checks the store and Ollama, at once (Ollama at every call; `/readyz` reuses a recent
/// result): the answer takes as long as the slower check (each has a deadline: the store's
/// own, `store.timeout` for PostgreSQL, and 2 s for Ollama). The store is asked only when its
/// health ([`crate::store::TaskStore::health`]) has no fresh word on it.
pub(crate) async fn readiness(core: &AgentCore) -> Readiness {
    let store = async {
        match known_store_state(core) {
            Some(known) => known,
            None => check_store(core).await,
        }
    };
    let ollama = ollama_readiness(core);
    let (store, ollama) = tokio::join!(store, ollama);
    Readiness { store, ollama }
}

/// What the store's health says without asking it: a failure at once; an answer only if it
/// is recent ([`STORE_FRESH`]). `None`: the store must be asked.
fn known_store_state(core: &AgentCore) -> Option<Result<(), String>> {
    let health = core.store.health()?;
    match health.status() {
        Err(why) => Some(Err(redact_urls_in(&why).into_owned())),
        Ok(()) => health.confirmed_within(STORE_FRESH).then_some(Ok(())),
    }
}

/// Asks the store whether it takes writes (a store with health records the outcome there).
/// An unavailable store's error is said as its health says it, without the type's prefix.
async fn check_store(core: &AgentCore) -> Result<(), String> {
    core.store.check_writable().await.map_err(|e| {
        let why = match e {
            StoreError::Unavailable(why) => why,
            other => other.to_string(),
        };
        redact_urls_in(&why).into_owned()
    })
}

/// Whether Ollama answers `/api/version` within [`OLLAMA_PROBE_TIMEOUT`].
async fn ollama_readiness(core: &AgentCore) -> Result<(), String> {
    match tokio::time::timeout(OLLAMA_PROBE_TIMEOUT, core.ollama.version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(redact_urls_in(&e.to_string()).into_owned()),
        Err(_) => Err(format!(
            "Ollama at {} did not answer /api/version within {OLLAMA_PROBE_TIMEOUT:?}",
            core.ollama.shown_url()
        )),
    }
}

/// The operator endpoints, cheap to clone.
#[derive(Clone, Debug)]
pub struct OpsEndpoints {
    core: Arc<AgentCore>,
    metrics: Option<MetricsHandle>,
    rules: Arc<HttpRules>,
    metrics_admission: Option<Arc<dyn Admission>>,
    /// The RFC 9728 document and the path it is served at besides the root form.
    resource_metadata: Option<Arc<(String, Bytes)>>,
    /// Ollama's last readiness result and when it was found.
    ollama_ready: Arc<tokio::sync::Mutex<Option<Found>>>,
    /// Held while `/readyz` asks the store itself, so a flood of hits asks it once.
    store_check: Arc<tokio::sync::Mutex<()>>,
    /// The oversight page and its routes, when served.
    oversight: Option<crate::oversight::http::OversightEndpoints>,
}

type OpsResponse = Response<Full<Bytes>>;

/// A readiness check's result and when it was found.
type Found = (Instant, Result<(), String>);

/// How the HTTP server asks these endpoints: [`OpsEndpoints::handle`].
impl crate::transport::server::OpsRoutes for OpsEndpoints {
    fn answer<'a>(
        &'a self,
        req: &'a Request<hyper::body::Incoming>,
    ) -> crate::transport::server::OpsAnswer<'a> {
        Box::pin(self.handle(req))
    }

    fn page<'a>(
        &'a self,
        req: &'a Request<hyper::body::Incoming>,
    ) -> crate::transport::server::PageAnswer<'a> {
        use http_body_util::BodyExt as _;
        Box::pin(async move {
            let oversight = self.oversight()?;
            let resp = oversight.handle(req).await?;
            // Each side boxed on its own: both are infallible, which their `Either` is not.
            Some(resp.map(|body| match body {
                http_body_util::Either::Left(whole) => whole.boxed(),
                http_body_util::Either::Right(events) => events.boxed(),
            }))
        })
    }
}

impl OpsEndpoints {
    /// The endpoints behind the default Host/Origin guard (loopback only) and an open
    /// `/metrics`; see [`OpsEndpoints::with_rules`] and [`OpsEndpoints::with_metrics_admission`].
    pub(crate) fn new(core: Arc<AgentCore>, metrics: Option<MetricsHandle>) -> Self {
        Self {
            core,
            metrics,
            rules: Arc::new(HttpRules::default()),
            metrics_admission: None,
            resource_metadata: None,
            ollama_ready: Arc::default(),
            store_check: Arc::default(),
            oversight: None,
        }
    }

    /// Also serves the oversight page and its routes (see [`crate::oversight::http`]).
    pub fn with_oversight(mut self, oversight: crate::oversight::http::OversightEndpoints) -> Self {
        self.oversight = Some(oversight);
        self
    }

    /// The oversight routes, when served.
    pub fn oversight(&self) -> Option<&crate::oversight::http::OversightEndpoints> {
        self.oversight.as_ref()
    }

    /// Guards the endpoints with `rules`' Host and Origin lists (the same as `/mcp`'s).
    pub fn with_rules(mut self, rules: HttpRules) -> Self {
        self.rules = Arc::new(rules);
        self
    }

    /// `/metrics` answers only requests `admission` lets in (a bearer token).
    pub fn with_metrics_admission(mut self, admission: Arc<dyn Admission>) -> Self {
        self.metrics_admission = Some(admission);
        self
    }

    /// Serves `metadata` (OAuth protected resource metadata) at its well-known path and the
    /// root form, without a token.
    pub(crate) fn with_resource_metadata(mut self, metadata: ProtectedResourceMetadata) -> Self {
        self.resource_metadata = Some(Arc::new((
            metadata.well_known_path().to_owned(),
            Bytes::from(metadata.to_json()),
        )));
        self
    }

    fn is_metadata_path(&self, path: &str) -> bool {
        self.resource_metadata
            .as_deref()
            .is_some_and(|(at, _)| path == at || path == ProtectedResourceMetadata::ROOT_PATH)
    }

    /// Answers `req` if its path is an operator endpoint.
    pub async fn handle<B>(&self, req: &Request<B>) -> Option<OpsResponse> {
        let path = req.uri().path();
        let metadata = self.is_metadata_path(path);
        if !metadata && !matches!(path, "/healthz" | "/readyz" | "/metrics") {
            return None;
        }
        if let Err(forbidden) = check_host_and_origin(&self.rules, req) {
            return Some(forbidden);
        }
        Some(match path {
            _ if metadata => self.resource_metadata(),
            "/healthz" => json_response(StatusCode::OK, &json!({"status": "ok"})),
            "/readyz" => self.readyz().await,
            _ => {
                if let Some(refused) = self.refuse_metrics(req).await {
                    return Some(refused);
                }
                self.metrics().await
            }
        })
    }

    fn resource_metadata(&self) -> OpsResponse {
        let body = self
            .resource_metadata
            .as_deref()
            .map(|(_, body)| body.clone())
            .unwrap_or_default();
        let mut resp = Response::new(Full::new(body));
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // The document changes only with the configuration; clients may keep it a while.
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
        resp
    }

    /// The store's part of `/readyz`: see [`known_store_state`]; when the store must be asked,
    /// one hit asks and the others wait for its answer.
    async fn store_readiness(&self) -> Result<(), String> {
        if let Some(known) = known_store_state(&self.core) {
            return known;
        }
        let _asking = self.store_check.lock().await;
        // The hit that held the lock before may have just found out.
        if let Some(known) = known_store_state(&self.core) {
            return known;
        }
        let Some(health) = self.core.store.health() else {
            return check_store(&self.core).await;
        };
        // A failure the heartbeat, the probe or a call sees meanwhile answers at once: a
        // silent database is not waited for twice.
        tokio::select! {
            checked = check_store(&self.core) => checked,
            why = health.next_failure() => Err(redact_urls_in(&why).into_owned()),
        }
    }

    /// Ollama's part of `/readyz`, reused for [`READY_TTL`]; one check at a time, hits during
    /// it wait for its result instead of starting more.
    async fn ollama_readiness(&self) -> Result<(), String> {
        let mut last = self.ollama_ready.lock().await;
        match &*last {
            Some((at, r)) if at.elapsed() < READY_TTL => r.clone(),
            _ => {
                let r = ollama_readiness(&self.core).await;
                *last = Some((Instant::now(), r.clone()));
                r
            }
        }
    }

    async fn readyz(&self) -> OpsResponse {
        let (store, ollama) = tokio::join!(self.store_readiness(), self.ollama_readiness());
        let r = Readiness { store, ollama };
        let check = |c: &Result<(), String>| match c {
            Ok(()) => json!({"ok": true}),
            Err(e) => json!({"ok": false, "error": e}),
        };
        let status = if r.is_ready() {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        json_response(
            status,
            &json!({"ready": r.is_ready(), "store": check(&r.store), "ollama": check(&r.ollama)}),
        )
    }

    /// 401 for a `/metrics` request without the token it needs.
    async fn refuse_metrics<B>(&self, req: &Request<B>) -> Option<OpsResponse> {
        let admission = self.metrics_admission.as_ref()?;
        let credential = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(Credential::from_authorization);
        let arrival = crate::transport::http::Arrival {
            credential: credential.as_ref(),
            ..Default::default()
        };
        let verdict = admission.admit(&arrival);
        let refusal = verdict.decide().await.err()?;
        let status = match refusal {
            Refusal::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::UNAUTHORIZED,
        };
        let mut resp = text_response(
            status,
            format!("{}\n", refusal.message()),
            "text/plain; charset=utf-8",
        );
        if let Some(challenge) = refusal.challenge() {
            let value = HeaderValue::from_str(challenge)
                .unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
            resp.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        Some(resp)
    }

    async fn metrics(&self) -> OpsResponse {
        let Some(handle) = &self.metrics else {
            return text_response(
                StatusCode::NOT_FOUND,
                "metrics are not enabled in this process\n".to_owned(),
                "text/plain; charset=utf-8",
            );
        };
        // Gauges of the live queue, read at scrape time.
        let running = match self.core.running_task() {
            Some(id) => self
                .core
                .store
                .task(id)
                .await
                .ok()
                .flatten()
                .map(|t| t.state),
            None => None,
        };
        let queued = self.core.queue_len().await;
        for state in [TaskState::Queued, TaskState::Planning, TaskState::Running] {
            let value = match state {
                TaskState::Queued => queued,
                s => usize::from(running == Some(s)),
            };
            metrics::gauge!(crate::metrics::TASKS, "state" => state.as_str()).set(value as f64);
        }
        crate::metrics::set_queue_depth(queued);
        // What `/readyz` would say of the store, without asking it: its health as last seen.
        let store_up = self.core.store.health().is_none_or(|h| h.status().is_ok());
        crate::metrics::set_store_up(store_up);
        text_response(
            StatusCode::OK,
            handle.render(),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    }
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> OpsResponse {
    text_response(status, body.to_string(), "application/json")
}

fn text_response(status: StatusCode, body: String, content_type: &'static str) -> OpsResponse {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}
