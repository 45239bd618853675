//! [`OllamaClient`]: `/api/chat` (streamed), `/api/show` and `/api/version` over reqwest.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::error::OllamaError;
use super::stream::ChatStreamDecoder;
use super::types::{ChatChunk, ChatRequest, ChatResponse, ShowResponse};

/// Default cap on a chat reply's content plus thinking text.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;
/// Ollama's port when `OLLAMA_HOST` names only a host.
const DEFAULT_PORT: u16 = 11434;
/// Cap on a non-2xx body we read for its error text.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Cap on a JSON (non-streamed) body such as `/api/show`, which carries the model's template
/// and license.
const MAX_JSON_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A client for one Ollama server. Cheap to clone: clones share the connection pool.
#[derive(Clone, Debug)]
pub struct OllamaClient {
    http: reqwest::Client,
    base_url: String,
    /// `base_url` with its password redacted: what every message names (the real one carries
    /// the credentials for reqwest, which sends them as basic auth and strips them itself).
    shown_url: String,
    request_timeout: Duration,
    max_reply_bytes: usize,
    retry: RetryPolicy,
}

/// How a 503 (Ollama's request queue is full) is retried: `retries` extra attempts, waiting
/// `backoff`, then twice that, and so on, each wait scaled by a random factor in [0.5, 1.0)
/// so that callers turned away together do not come back together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub retries: u32,
    pub backoff: Duration,
}

impl RetryPolicy {
    /// No retries: a 503 is [`OllamaError::Busy`] at once.
    pub const NONE: RetryPolicy = RetryPolicy {
        retries: 0,
        backoff: Duration::ZERO,
    };

    /// The wait before retry number `attempt` (1-based), jittered.
    fn delay(&self, attempt: u32) -> Duration {
        let full = self
            .backoff
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        // uuid's v4 generator is the random source already in the tree.
        let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as f64 / 2000.0;
        full.mul_f64(0.5 + jitter)
    }
}

impl OllamaClient {
    /// `base_url` is like `http://127.0.0.1:11434`; a trailing slash is fine. As with
    /// `OLLAMA_HOST`, a bare `host[:port]` means `http://host:port` (port 11434 by default).
    ///
    /// `request_timeout` bounds each whole call, streaming included; `connect_timeout` bounds
    /// opening the TCP connection.
    pub fn new(
        base_url: &str,
        request_timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self, OllamaError> {
        let (base_url, loopback) = normalize_base_url(base_url)?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .user_agent(concat!("agent-mcp/", env!("CARGO_PKG_VERSION")));
        // Like Go's ProxyFromEnvironment (which Ollama's own CLI uses), never send loopback
        // traffic through an HTTP_PROXY.
        if loopback {
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(OllamaError::Transport)?;
        Ok(Self {
            http,
            shown_url: crate::redact::redact_url(&base_url),
            base_url,
            request_timeout,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            retry: RetryPolicy::NONE,
        })
    }

    /// Retries requests Ollama turns away with 503 (default [`RetryPolicy::NONE`]). The
    /// backoff counts against the whole-call request timeout.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// Caps a chat reply's content plus thinking text (default [`DEFAULT_MAX_REPLY_BYTES`]).
    pub fn with_max_reply_bytes(mut self, limit: usize) -> Self {
        self.max_reply_bytes = limit;
        self
    }

    /// The normalized base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// [`Self::base_url`] as it may be printed: a password in it redacted.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    pub fn max_reply_bytes(&self) -> usize {
        self.max_reply_bytes
    }

    /// `POST /api/chat` with `stream: true`.
    ///
    /// Calls `on_chunk` for every chunk as it arrives and returns the reply aggregated over all
    /// chunks once the `done` chunk arrives. Tool calls are collected from every chunk, since
    /// Ollama may send them before the `done` chunk without repeating them. When `cancel` fires
    /// the response is dropped, which aborts the HTTP request, and the result is
    /// [`OllamaError::Cancelled`].
    pub async fn chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_chunk: &mut (dyn FnMut(&ChatChunk) + Send),
    ) -> Result<ChatResponse, OllamaError> {
        let url = self.endpoint("/api/chat");
        let started = std::time::Instant::now();
        let call = self.bounded(&url, self.stream_chat(&url, req, on_chunk));
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(OllamaError::Cancelled),
            outcome = call => outcome,
        };
        let label = match &outcome {
            Ok(reply) => {
                crate::metrics::record_tokens(reply.prompt_eval_count, reply.eval_count);
                "ok"
            }
            Err(OllamaError::Cancelled) => "cancelled",
            Err(_) => "error",
        };
        crate::metrics::record_ollama_call("chat", label, started.elapsed());
        outcome
    }

    /// `POST /api/show`: the model's capabilities, details and metadata.
    pub async fn show(&self, model: &str) -> Result<ShowResponse, OllamaError> {
        #[derive(Serialize)]
        struct ShowRequest<'a> {
            model: &'a str,
        }
        let url = self.endpoint("/api/show");
        self.bounded(&url, async {
            let request = self.http.post(&url).json(&ShowRequest { model });
            let response = self.send(request, Some(model)).await?;
            self.read_json(response).await
        })
        .await
    }

    /// `GET /api/version`: the server's version string, e.g. `0.12.0`.
    pub async fn version(&self) -> Result<String, OllamaError> {
        #[derive(Deserialize)]
        struct Version {
            version: String,
        }
        let url = self.endpoint("/api/version");
        self.bounded(&url, async {
            let response = self.send(self.http.get(&url), None).await?;
            let parsed: Version = self.read_json(response).await?;
            Ok(parsed.version)
        })
        .await
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Runs `call` under the whole-call request timeout.
    async fn bounded<T>(
        &self,
        url: &str,
        call: impl Future<Output = Result<T, OllamaError>>,
    ) -> Result<T, OllamaError> {
        tokio::time::timeout(self.request_timeout, call)
            .await
            .unwrap_or_else(|_elapsed| {
                Err(OllamaError::Timeout {
                    url: crate::redact::redact_url(url),
                })
            })
    }

    async fn stream_chat(
        &self,
        url: &str,
        req: &ChatRequest,
        on_chunk: &mut (dyn FnMut(&ChatChunk) + Send),
    ) -> Result<ChatResponse, OllamaError> {
        #[derive(Serialize)]
        struct StreamingChat<'a> {
            #[serde(flatten)]
            request: &'a ChatRequest,
            stream: bool,
        }
        let body = StreamingChat {
            request: req,
            stream: true,
        };
        let mut response = self
            .send(self.http.post(url).json(&body), Some(&req.model))
            .await?;
        let mut decoder = ChatStreamDecoder::new(self.max_reply_bytes);
        while let Some(bytes) = response.chunk().await.map_err(|e| self.classify(e))? {
            if let Some(done) = decoder.push(&bytes, on_chunk)? {
                return Ok(done);
            }
        }
        decoder.finish(on_chunk)
    }

    /// Sends `request`; a non-2xx answer becomes the matching error. A 503 is retried per
    /// the [`RetryPolicy`]: nothing was streamed yet, so a retry cannot duplicate output.
    async fn send(
        &self,
        mut request: reqwest::RequestBuilder,
        model: Option<&str>,
    ) -> Result<reqwest::Response, OllamaError> {
        let mut attempt = 0u32;
        loop {
            // Bodies here are JSON bytes, so the builder always clones; if it could not, the
            // request is sent once.
            let retry_copy = request.try_clone();
            let outcome = self.send_once(request, model).await;
            let request_again = match (outcome, retry_copy) {
                (Err(OllamaError::Busy { body }), Some(copy)) if attempt < self.retry.retries => {
                    attempt += 1;
                    tracing::warn!(attempt, retries = self.retry.retries, %body, "Ollama is busy (503); retrying");
                    copy
                }
                (Err(OllamaError::Busy { body }), _) if attempt > 0 => {
                    return Err(OllamaError::BusyAfterRetries {
                        attempts: attempt + 1,
                        body,
                    });
                }
                (outcome, _) => return outcome,
            };
            tokio::time::sleep(self.retry.delay(attempt)).await;
            request = request_again;
        }
    }

    async fn send_once(
        &self,
        request: reqwest::RequestBuilder,
        model: Option<&str>,
    ) -> Result<reqwest::Response, OllamaError> {
        let response = request.send().await.map_err(|e| self.classify(e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        // The status alone still says what happened if the body cannot be read.
        let (body, _truncated) = read_capped(response, MAX_ERROR_BODY_BYTES)
            .await
            .unwrap_or_default();
        Err(OllamaError::from_status(status.as_u16(), &body, model))
    }

    async fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        response: reqwest::Response,
    ) -> Result<T, OllamaError> {
        let (body, truncated) = read_capped(response, MAX_JSON_BODY_BYTES)
            .await
            .map_err(|e| self.classify(e))?;
        if truncated {
            return Err(OllamaError::ReplyTooLarge {
                limit: MAX_JSON_BODY_BYTES,
            });
        }
        serde_json::from_slice(&body).map_err(|e| OllamaError::decode(&body, e))
    }

    fn classify(&self, err: reqwest::Error) -> OllamaError {
        OllamaError::from_reqwest(err, &self.shown_url)
    }
}

/// Reads at most `limit` bytes of the body; the flag says whether more was left unread.
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(bytes) = response.chunk().await? {
        let room = limit - body.len();
        if bytes.len() > room {
            body.extend_from_slice(&bytes[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&bytes);
    }
    Ok((body, false))
}

/// Normalizes a base URL the way Ollama reads `OLLAMA_HOST`; also reports whether the host is
/// a loopback address.
fn normalize_base_url(raw: &str) -> Result<(String, bool), OllamaError> {
    let invalid = |reason: String| OllamaError::InvalidUrl {
        url: crate::redact::redact_url(raw),
        reason,
    };
    let trimmed = raw.trim();
    let has_scheme = trimmed.contains("://");
    let candidate = if has_scheme {
        trimmed.to_owned()
    } else {
        format!("http://{trimmed}")
    };
    let mut url = reqwest::Url::parse(&candidate).map_err(|e| invalid(e.to_string()))?;
    match url.scheme() {
        "http" => {}
        "https" => {
            return Err(invalid(
                "https is not supported; agent-mcp talks plain HTTP to a local Ollama".to_owned(),
            ));
        }
        other => return Err(invalid(format!("scheme '{other}' is not http"))),
    }
    let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
        return Err(invalid("no host".to_owned()));
    };
    if !has_scheme && url.port().is_none() {
        url.set_port(Some(DEFAULT_PORT))
            .map_err(|()| invalid("cannot set the default port".to_owned()))?;
    }
    let loopback = host == "localhost"
        || host.ends_with(".localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let base = url.as_str().trim_end_matches('/').to_owned();
    Ok((base, loopback))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(raw: &str) -> Result<(String, bool), String> {
        normalize_base_url(raw).map_err(|e| e.to_string())
    }

    #[test]
    fn base_urls_are_normalized() {
        let ok = |s: &str, loopback| Ok((s.to_owned(), loopback));
        assert_eq!(
            normalized("http://127.0.0.1:11434"),
            ok("http://127.0.0.1:11434", true)
        );
        assert_eq!(
            normalized("http://127.0.0.1:11434/"),
            ok("http://127.0.0.1:11434", true)
        );
        assert_eq!(
            normalized(" localhost "),
            ok("http://localhost:11434", true)
        );
        assert_eq!(normalized("[::1]:8080"), ok("http://[::1]:8080", true));
        assert_eq!(normalized("http://gpu-box"), ok("http://gpu-box", false));
        assert_eq!(
            normalized("http://gpu-box:11434/ollama/"),
            ok("http://gpu-box:11434/ollama", false)
        );
    }

    #[test]
    fn bad_base_urls_are_rejected() {
        assert!(matches!(
            normalize_base_url("https://x"),
            Err(OllamaError::InvalidUrl { .. })
        ));
        assert!(matches!(
            normalize_base_url("ftp://x"),
            Err(OllamaError::InvalidUrl { .. })
        ));
        assert!(matches!(
            normalize_base_url("http://"),
            Err(OllamaError::InvalidUrl { .. })
        ));
        assert!(matches!(
            normalize_base_url(""),
            Err(OllamaError::InvalidUrl { .. })
        ));
    }
}
