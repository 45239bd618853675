//! The exporter's HTTP client: the async `reqwest` client this server already builds on, run on
//! the server's tokio runtime.
//!
//! The SDK's batch processor and metric reader export from threads of their own, outside any
//! runtime, by blocking on the export future. An async `reqwest` future there would find no
//! reactor; the blocking `reqwest` client would bring a second runtime and thread of its own.
//! So each request is spawned onto the server's runtime, and the export thread waits for its
//! `JoinHandle`, which needs no runtime to be awaited. Every request is bounded by the export
//! timeout (connect included), so an unreachable or silent collector holds an export thread
//! for at most that long, and never a request's thread.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError};

use super::TelemetryError;

/// The longest a connection to the collector may take to open, within the export timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// `reqwest` on a given runtime (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct RuntimeHttpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl RuntimeHttpClient {
    pub(super) fn new(
        runtime: tokio::runtime::Handle,
        timeout: Duration,
    ) -> Result<Self, TelemetryError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(CONNECT_TIMEOUT.min(timeout))
            // A collector answers, it does not redirect; an exporter header must not follow a
            // redirect to another host.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TelemetryError::HttpClient(e.to_string()))?;
        Ok(Self { client, runtime })
    }
}

#[async_trait]
impl HttpClient for RuntimeHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        // A runtime already shut down cancels the task at once: an error, not a hang.
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await
            .map_err(|e| -> HttpError { format!("the export task did not finish: {e}").into() })?
    }
}
