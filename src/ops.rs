//! Operator endpoints of the standalone server: `GET /healthz`, `GET /readyz`, `GET /metrics`.
//!
//! - `/healthz`: the process is up and serving HTTP (always 200).
//! - `/readyz`: the task store takes writes and Ollama answers; 200 when both hold, else 503,
//!   with a JSON body saying which check failed and why.
//! - `/metrics`: Prometheus text (see [`crate::metrics`] for the series).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::agent::AgentCore;
use crate::metrics::MetricsHandle;
use crate::task::TaskState;

/// How long `/readyz` waits for Ollama's `/api/version`.
const OLLAMA_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What `/readyz` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub store: Result<(), String>,
    pub ollama: Result<(), String>,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.store.is_ok() && self.ollama.is_ok()
    }
}

/// Checks the store and Ollama, at once: the answer takes as long as the slower check (each
/// has a deadline: the store's own, `store.timeout` for PostgreSQL, and 2 s for Ollama).
pub async fn readiness(core: &AgentCore) -> Readiness {
    let store = async { core.store.check_writable().await.map_err(|e| e.to_string()) };
    let ollama = async {
        match tokio::time::timeout(OLLAMA_PROBE_TIMEOUT, core.ollama.version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "Ollama at {} did not answer /api/version within {OLLAMA_PROBE_TIMEOUT:?}",
                core.ollama.base_url()
            )),
        }
    };
    let (store, ollama) = tokio::join!(store, ollama);
    Readiness { store, ollama }
}

/// The operator endpoints, cheap to clone.
#[derive(Clone, Debug)]
pub struct OpsEndpoints {
    core: Arc<AgentCore>,
    metrics: Option<MetricsHandle>,
}

type OpsResponse = Response<Full<Bytes>>;

impl OpsEndpoints {
    pub fn new(core: Arc<AgentCore>, metrics: Option<MetricsHandle>) -> Self {
        Self { core, metrics }
    }

    /// Answers `path` if it is an operator endpoint.
    pub async fn handle(&self, path: &str) -> Option<OpsResponse> {
        Some(match path {
            "/healthz" => json_response(StatusCode::OK, &json!({"status": "ok"})),
            "/readyz" => {
                let r = readiness(&self.core).await;
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
            "/metrics" => self.metrics().await,
            _ => return None,
        })
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
