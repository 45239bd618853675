//! [`OllamaClient`]: `/api/chat` (streamed), `/api/show` and `/api/version` over reqwest.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::error::OllamaError;
use super::stream::ChatStreamDecoder;
use super::types::{ChatChunk, ChatRequest, ChatResponse, ShowResponse};
pub use crate::config::ApiKey;
use crate::telemetry::semconv::attr;
use crate::telemetry::spans::{self, ChatSpan};

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
    /// The base URL is `https://`: an API key may be sent there.
    https: bool,
    api_key: Option<ApiKey>,
    /// `base_url` with its password redacted: what every message names (the real one carries
    /// the credentials for reqwest, which sends them as basic auth and strips them itself).
    shown_url: String,
    request_timeout: Duration,
    max_reply_bytes: usize,
    retry: RetryPolicy,
}

/// Longest `Retry-After` waited for before a retry; a server asking for more is treated as
/// asking for this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How a 503 (Ollama's request queue is full) or a 429 (too many requests) is retried:
/// `retries` extra attempts, waiting `backoff`, then twice that, and so on, each wait scaled
/// by a random factor in [0.5, 1.0) so that callers turned away together do not come back
/// together; a 429's `Retry-After` (seconds, at most a minute) is waited for instead when it
/// is longer.
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
        let https = base_url.starts_with("https://");
        Ok(Self {
            http,
            shown_url: crate::redact::redact_url(&base_url),
            base_url,
            https,
            api_key: None,
            request_timeout,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            retry: RetryPolicy::NONE,
        })
    }

    /// Sends `key` with every request when the base URL is `https://` (Ollama's cloud); over
    /// plain http it is never sent, so a key set for the cloud does not travel in the clear to
    /// another server.
    pub fn with_api_key(mut self, key: Option<ApiKey>) -> Self {
        self.api_key = key;
        self
    }

    /// Whether an API key goes with the requests.
    pub fn sends_api_key(&self) -> bool {
        self.https && self.api_key.is_some()
    }

    /// Retries requests Ollama turns away with 503 or 429 (default [`RetryPolicy::NONE`]).
    /// The backoff counts against the whole-call request timeout.
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
        let span = self.chat_span(req);
        let call = self.bounded(&url, self.stream_chat(&url, req, on_chunk));
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(OllamaError::Cancelled),
            outcome = call => outcome,
        };
        let label = match &outcome {
            Ok(reply) => {
                crate::metrics::record_tokens(reply.prompt_eval_count, reply.eval_count);
                spans::record_usage(&span, reply.prompt_eval_count, reply.eval_count);
                spans::record_content(&span, attr::GEN_AI_OUTPUT_MESSAGES, &reply.message.content);
                "ok"
            }
            Err(e) => {
                spans::record_error(&span, e.kind(), None);
                if matches!(e, OllamaError::Cancelled) {
                    "cancelled"
                } else {
                    "error"
                }
            }
        };
        crate::metrics::record_ollama_call("chat", label, started.elapsed());
        outcome
    }

    /// The `chat {model}` span of one call (disabled, and nothing prepared, when export is
    /// off). Its input is recorded only with content capture on, and never the images.
    fn chat_span(&self, req: &ChatRequest) -> tracing::Span {
        if !spans::export_enabled() {
            return tracing::Span::none();
        }
        let parsed = reqwest::Url::parse(&self.base_url).ok();
        let server = parsed
            .as_ref()
            .and_then(|u| Some((u.host_str()?, u.port_or_known_default()?)));
        let mut builder = ChatSpan::new(&req.model);
        if let Some((host, port)) = server {
            builder = builder.with_server(host, port);
        }
        let span = builder.start();
        if spans::content_capture_enabled() {
            let messages: Vec<serde_json::Value> = req
                .messages
                .iter()
                .map(|m| serde_json::json!({"role": m.role, "content": m.content}))
                .collect();
            let text = serde_json::Value::Array(messages).to_string();
            spans::record_content(&span, attr::GEN_AI_INPUT_MESSAGES, &text);
        }
        span
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

    /// Sends `request`; a non-2xx answer becomes the matching error. A 503 or a 429 is retried
    /// per the [`RetryPolicy`]: nothing was streamed yet, so a retry cannot duplicate output.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        model: Option<&str>,
    ) -> Result<reqwest::Response, OllamaError> {
        let mut request = self.authorized(request);
        let mut attempt = 0u32;
        loop {
            // Bodies here are JSON bytes, so the builder always clones; if it could not, the
            // request is sent once.
            let retry_copy = request.try_clone();
            let (outcome, retry_after) = self.send_once(request, model).await;
            let retryable = matches!(
                outcome,
                Err(OllamaError::Busy { .. } | OllamaError::RateLimited { .. })
            );
            let request_again = match (outcome, retry_copy) {
                (Err(e), Some(copy)) if retryable && attempt < self.retry.retries => {
                    attempt += 1;
                    tracing::warn!(attempt, retries = self.retry.retries, error = %e, "Ollama turned the request away; retrying");
                    copy
                }
                (Err(OllamaError::Busy { body }), _) if attempt > 0 => {
                    return Err(OllamaError::BusyAfterRetries {
                        attempts: attempt + 1,
                        body,
                    });
                }
                (Err(OllamaError::RateLimited { body, .. }), _) => {
                    return Err(OllamaError::RateLimited {
                        attempts: attempt + 1,
                        body,
                    });
                }
                (outcome, _) => return outcome,
            };
            let backoff = self.retry.delay(attempt);
            let wait = retry_after.map_or(backoff, |asked| asked.min(MAX_RETRY_AFTER).max(backoff));
            tokio::time::sleep(wait).await;
            request = request_again;
        }
    }

    /// `request` with the API key, when there is one and the URL is https.
    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match (&self.api_key, self.https) {
            (Some(key), true) => request.bearer_auth(key.secret()),
            _ => request,
        }
    }

    /// One attempt; with a non-2xx answer, the `Retry-After` it asked for.
    async fn send_once(
        &self,
        request: reqwest::RequestBuilder,
        model: Option<&str>,
    ) -> (Result<reqwest::Response, OllamaError>, Option<Duration>) {
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return (Err(self.classify(e)), None),
        };
        let status = response.status();
        if status.is_success() {
            return (Ok(response), None);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // The status alone still says what happened if the body cannot be read.
        let (body, _truncated) = read_capped(response, MAX_ERROR_BODY_BYTES)
            .await
            .unwrap_or_default();
        (
            Err(OllamaError::from_status(status.as_u16(), &body, model)),
            retry_after,
        )
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
        "http" | "https" => {}
        other => return Err(invalid(format!("scheme '{other}' is not http or https"))),
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
    fn the_api_key_goes_only_over_https_and_is_never_shown() {
        let key = ApiKey::new(" secret-key-123 ");
        assert_eq!(format!("{key:?}"), "Some(ApiKey(<redacted>))");
        assert_eq!(ApiKey::new("  "), None);
        let timeout = Duration::from_secs(5);
        let cloud = OllamaClient::new("https://ollama.com", timeout, timeout)
            .expect("client")
            .with_api_key(key.clone());
        assert!(cloud.sends_api_key());
        let sent = cloud
            .authorized(cloud.http.post("https://ollama.com/api/chat"))
            .build()
            .expect("request");
        let header = sent.headers().get("authorization").expect("authorization");
        assert_eq!(header.to_str().ok(), Some("Bearer secret-key-123"));
        assert!(header.is_sensitive());
        assert!(!format!("{cloud:?}").contains("secret-key-123"));
        let local = OllamaClient::new("http://127.0.0.1:11434", timeout, timeout)
            .expect("client")
            .with_api_key(key);
        assert!(!local.sends_api_key());
        let sent = local
            .authorized(local.http.post("http://127.0.0.1:11434/api/chat"))
            .build()
            .expect("request");
        assert!(sent.headers().get("authorization").is_none());
    }

    #[test]
    fn bad_base_urls_are_rejected() {
        assert_eq!(
            normalized("https://ollama.com"),
            Ok(("https://ollama.com".into(), false))
        );
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
