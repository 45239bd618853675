//! The one error type of the Ollama client.
//!
//! Each variant carries what a caller needs to explain the failure to a person: the URL that
//! could not be reached, the model that is missing, the HTTP status and the server's own error
//! text. Display strings say what to do next.

/// Errors from [`OllamaClient`](super::OllamaClient).
#[derive(Debug, thiserror::Error)]
pub enum OllamaError {
    /// The base URL given to [`OllamaClient::new`](super::OllamaClient::new) is not an
    /// `http://` or `https://` URL.
    #[error(
        "invalid Ollama URL '{url}': {reason}; set ollama.url / OLLAMA_HOST to e.g. http://127.0.0.1:11434"
    )]
    InvalidUrl { url: String, reason: String },

    /// Connection refused, DNS failure, connect timeout: nothing answered at `url`.
    #[error(
        "cannot reach Ollama at {url}: {source}. Start Ollama (`ollama serve`) or set ollama.url / OLLAMA_HOST."
    )]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },

    /// 404 from `/api/chat` or `/api/show`.
    #[error(
        "model '{model}' not found on the Ollama server; pull it with `ollama pull {model}` or set ollama.model"
    )]
    ModelNotFound { model: String, body: String },

    /// 503: the server's request queue (`OLLAMA_MAX_QUEUE`) is full.
    #[error("Ollama is busy (its request queue is full): {body}; try again later")]
    Busy { body: String },

    /// 503 on every attempt: the first one and each retry of `ollama.retries`.
    #[error(
        "Ollama is busy (its request queue is full) after {attempts} attempts: {body}; try again later, or raise ollama.retries"
    )]
    BusyAfterRetries { attempts: u32, body: String },

    /// 429: the server (Ollama's cloud, a proxy) turned the request away as one too many, on
    /// every attempt of `ollama.retries` (each waited for its `Retry-After`).
    #[error(
        "Ollama refused the request as one too many (HTTP 429) after {attempts} attempts: {body}; \
         try again later, or raise ollama.retries"
    )]
    RateLimited { attempts: u32, body: String },

    /// 401: the server wants credentials (Ollama's cloud without an API key, or a wrong one).
    #[error(
        "Ollama refused the request as unauthorized (HTTP 401): {body}; for Ollama's cloud \
         (https://ollama.com) set OLLAMA_API_KEY to an API key from ollama.com/settings/keys"
    )]
    Unauthorized { body: String },

    /// Any other non-2xx answer. `body` is the `error` text of `{"error": "…"}` when present,
    /// otherwise the (truncated) raw body.
    #[error("Ollama answered HTTP {status}: {body}")]
    Status { status: u16, body: String },

    /// The stream carried an `{"error": "…"}` line, or ended before its `done` chunk.
    #[error("Ollama stream failed: {0}")]
    Stream(String),

    /// A response line (or body) that is not the JSON we expect; `line` is truncated.
    #[error("cannot decode Ollama response `{line}`: {source}")]
    Decode {
        line: String,
        #[source]
        source: serde_json::Error,
    },

    /// The reply grew past the client's `max_reply_bytes`.
    #[error("Ollama reply exceeded the {limit}-byte limit")]
    ReplyTooLarge { limit: usize },

    /// The whole call took longer than the client's request timeout.
    #[error(
        "Ollama at {url} did not finish within the request timeout; the model may be slow or still loading"
    )]
    Timeout { url: String },

    /// The caller's cancellation token fired; the HTTP request was dropped.
    #[error("the Ollama request was cancelled")]
    Cancelled,

    /// Any other HTTP-level failure (connection reset mid-body, protocol error, …).
    #[error("HTTP error talking to Ollama: {0}")]
    Transport(#[source] reqwest::Error),
}

/// How much of a bad line or error body to keep in an error.
const EXCERPT_CHARS: usize = 200;
/// Error bodies are short; keep more of them than of a bad stream line.
const ERROR_BODY_CHARS: usize = 2000;

impl OllamaError {
    /// A short, stable class of the error for a span's `error.type` (`timeout`, `http_503`,
    /// `model_not_found`, …): never the message, which may quote a reply.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. } => "invalid_url",
            Self::Unreachable { .. } => "unreachable",
            Self::ModelNotFound { .. } => "model_not_found",
            Self::Busy { .. } | Self::BusyAfterRetries { .. } => "busy",
            Self::RateLimited { .. } => "rate_limited",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Status { .. } => "http_status",
            Self::Stream(_) => "stream",
            Self::Decode { .. } => "decode",
            Self::ReplyTooLarge { .. } => "reply_too_large",
            Self::Timeout { .. } => "timeout",
            Self::Cancelled => "cancelled",
            Self::Transport(_) => "transport",
        }
    }

    /// Ollama refused the prompt as longer than the model's context window (HTTP 400, since
    /// mid-2026, instead of cutting the prompt's start): "the prompt is longer than the
    /// context length", "the input length exceeds the context length".
    pub fn exceeds_context(&self) -> bool {
        match self {
            Self::Status { status: 400, body } => {
                let body = body.to_lowercase();
                body.contains("context length") || body.contains("context window")
            }
            _ => false,
        }
    }

    /// Maps a non-2xx status to an error. `model` is the model named in the request, if any:
    /// a 404 then means that model is missing.
    pub(crate) fn from_status(status: u16, raw_body: &[u8], model: Option<&str>) -> Self {
        let body = error_text(raw_body);
        match (status, model) {
            (404, Some(model)) => Self::ModelNotFound {
                model: model.to_owned(),
                body,
            },
            (503, _) => Self::Busy { body },
            (429, _) => Self::RateLimited { attempts: 1, body },
            (401, _) => Self::Unauthorized { body },
            _ => Self::Status { status, body },
        }
    }

    /// Classifies a reqwest failure: nothing listening → `Unreachable`, otherwise `Transport`.
    pub(crate) fn from_reqwest(err: reqwest::Error, base_url: &str) -> Self {
        if err.is_connect() {
            Self::Unreachable {
                url: base_url.to_owned(),
                source: err,
            }
        } else if err.is_timeout() {
            Self::Timeout {
                url: base_url.to_owned(),
            }
        } else {
            Self::Transport(err)
        }
    }

    pub(crate) fn decode(line: &[u8], source: serde_json::Error) -> Self {
        Self::Decode {
            line: excerpt(line, EXCERPT_CHARS),
            source,
        }
    }
}

/// The `error` string of an `{"error": "…"}` body, or the raw body as text.
fn error_text(raw: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: String,
    }
    match serde_json::from_slice::<ErrorBody>(raw) {
        Ok(parsed) => parsed.error,
        Err(_) => excerpt(raw, ERROR_BODY_CHARS).trim().to_owned(),
    }
}

/// At most `max_chars` characters of `bytes` (lossy UTF-8), with `…` when cut.
pub(crate) fn excerpt(bytes: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_keeps_the_error_text() {
        let err = OllamaError::from_status(500, br#"{"error":"llama runner crashed"}"#, Some("m"));
        assert!(
            matches!(&err, OllamaError::Status { status: 500, body } if body == "llama runner crashed")
        );
        assert_eq!(
            err.to_string(),
            "Ollama answered HTTP 500: llama runner crashed"
        );
    }

    #[test]
    fn a_prompt_longer_than_the_window_is_told_apart() {
        for (status, body, exceeds) in [
            (400, "the prompt is longer than the context length", true),
            (400, "the input length exceeds the context length", true),
            (400, "invalid model name", false),
            (500, "the prompt is longer than the context length", false),
        ] {
            let raw = serde_json::json!({ "error": body }).to_string();
            let err = OllamaError::from_status(status, raw.as_bytes(), Some("m"));
            assert_eq!(err.exceeds_context(), exceeds, "{status} {body}");
        }
    }

    #[test]
    fn status_without_json_keeps_raw_text() {
        let err = OllamaError::from_status(502, b"  Bad Gateway\n", None);
        assert!(matches!(err, OllamaError::Status { status: 502, body } if body == "Bad Gateway"));
    }

    #[test]
    fn not_found_names_the_model() {
        let err = OllamaError::from_status(
            404,
            br#"{"error":"model 'qwen3' not found"}"#,
            Some("qwen3"),
        );
        assert_eq!(
            err.to_string(),
            "model 'qwen3' not found on the Ollama server; pull it with `ollama pull qwen3` or set ollama.model"
        );
        // Without a model in the request, a 404 is just a status.
        let err = OllamaError::from_status(404, b"404 page not found", None);
        assert!(matches!(err, OllamaError::Status { status: 404, .. }));
    }

    #[test]
    fn queue_full_is_busy() {
        let err = OllamaError::from_status(
            503,
            br#"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#,
            Some("m"),
        );
        assert!(matches!(err, OllamaError::Busy { body } if body.starts_with("server busy")));
    }

    #[test]
    fn excerpt_cuts_on_char_boundaries() {
        assert_eq!(excerpt("ééé".as_bytes(), 2), "éé…");
        assert_eq!(excerpt(b"abc", 3), "abc");
        assert_eq!(excerpt(&[b'x'; 500], 200).chars().count(), 201);
    }
}
