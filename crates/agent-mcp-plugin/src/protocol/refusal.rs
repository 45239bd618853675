//! [`Refusal`]: a request a layer turns away before it reaches the service, typed so that each
//! edge can map it the way its transport expects.
//!
//! A layer (built in, or a plugin outside this crate) refuses with
//! [`McpRequest::refuse`](super::McpRequest::refuse); the response carries
//! [`Payload::Refused`](super::Payload::Refused). The layer says *why* and nothing about the
//! transport:
//!
//! | refusal | JSON-RPC error (every transport) | HTTP edge adds |
//! |---|---|---|
//! | [`Refusal::Unauthorized`] | `-32001` ([`code::UNAUTHORIZED`]) | `401`, `WWW-Authenticate: Bearer` (or its challenge) |
//! | [`Refusal::InsufficientScope`] | `-32001` ([`code::UNAUTHORIZED`]) | `403`, `WWW-Authenticate: <its challenge>` (both eras) |
//! | [`Refusal::Unavailable`] | `-32000` ([`code::TRANSPORT`]) | `503`, `Retry-After: n` |
//! | [`Refusal::RateLimited`] | `-32000` ([`code::RATE_LIMITED`]), `data: {"retryAfterSeconds": n}` | `429`, `Retry-After: n` |
//! | [`Refusal::PayloadTooLarge`] | `-32000` ([`code::TRANSPORT`]) | `413` |
//!
//! stdio sends the JSON-RPC error alone. The audit log and the metrics classify a refused
//! request by its refusal ([`Refusal::outcome`]), not by any status code.
//!
//! ```
//! use agent_mcp_plugin::protocol::*;
//!
//! let req = McpRequest::new(
//!     Some(RequestId::Number(7)),
//!     "tools/list",
//!     Default::default(),
//!     RequestContext::new(ProtocolVersion::V2026_07_28, Transport::Stdio),
//! );
//! let refused = req.refuse(Refusal::rate_limited(3, "Slow down. Retry after 3 s."));
//! assert_eq!(refused.outcome(), Outcome::RateLimited);
//! let json = refused.to_json().unwrap();
//! assert_eq!(json["error"]["code"], -32000);
//! assert_eq!(json["error"]["data"]["retryAfterSeconds"], 3);
//! ```

use std::borrow::Cow;

use serde_json::json;

use super::jsonrpc::{ErrorObject, code};
use super::outcome::Outcome;

/// Why a layer turned a request away. Edges map it: HTTP to a status and headers, stdio to the
/// JSON-RPC error alone (see the module docs). New kinds may be added, so match with a
/// wildcard arm outside this crate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The caller did not prove who it is (no credential, or one that is not accepted).
    Unauthorized {
        /// What was wrong and what to send instead; never echoes the credential.
        message: Cow<'static, str>,
        /// The `WWW-Authenticate` value an HTTP edge sends (`None`: plain `Bearer`), e.g. an
        /// OAuth resource server's `Bearer resource_metadata="…", scope="…"`.
        challenge: Option<Cow<'static, str>>,
    },
    /// The caller proved who it is, but its credential does not allow this operation (an
    /// OAuth access token without the scope it needs).
    InsufficientScope {
        /// Which operation needs which scope; never echoes the credential.
        message: Cow<'static, str>,
        /// The `WWW-Authenticate` value: `Bearer error="insufficient_scope", scope="…", …`.
        challenge: Cow<'static, str>,
    },
    /// The server cannot check the credential now (the authorization server's keys are out of
    /// reach); the caller may retry after `retry_after_seconds`.
    Unavailable {
        /// Whole seconds to wait, at least 1.
        retry_after_seconds: u64,
        /// What is out of reach and when to retry.
        message: Cow<'static, str>,
    },
    /// The caller is over a budget and may try again after `retry_after_seconds`.
    RateLimited {
        /// Whole seconds to wait, at least 1.
        retry_after_seconds: u64,
        /// What budget was exceeded and when to retry.
        message: Cow<'static, str>,
    },
    /// The request is larger than this server takes.
    PayloadTooLarge {
        /// How large it may be and how to get under the limit.
        message: Cow<'static, str>,
    },
}

impl Refusal {
    /// The caller did not prove who it is; `message` says what to send instead.
    pub fn unauthorized(message: impl Into<Cow<'static, str>>) -> Self {
        Refusal::Unauthorized {
            message: message.into(),
            challenge: None,
        }
    }

    /// [`Refusal::unauthorized`] with the `WWW-Authenticate` value an HTTP edge sends.
    pub fn unauthorized_with_challenge(
        message: impl Into<Cow<'static, str>>,
        challenge: impl Into<Cow<'static, str>>,
    ) -> Self {
        Refusal::Unauthorized {
            message: message.into(),
            challenge: Some(challenge.into()),
        }
    }

    /// A valid credential without the scope an operation needs; `challenge` is the
    /// `WWW-Authenticate` value naming that scope.
    pub fn insufficient_scope(
        message: impl Into<Cow<'static, str>>,
        challenge: impl Into<Cow<'static, str>>,
    ) -> Self {
        Refusal::InsufficientScope {
            message: message.into(),
            challenge: challenge.into(),
        }
    }

    /// The credential cannot be checked now: retry after `retry_after_seconds` (at least 1).
    pub fn unavailable(retry_after_seconds: u64, message: impl Into<Cow<'static, str>>) -> Self {
        Refusal::Unavailable {
            retry_after_seconds: retry_after_seconds.max(1),
            message: message.into(),
        }
    }

    /// The `WWW-Authenticate` value an HTTP edge sends with this refusal, if any.
    pub fn challenge(&self) -> Option<&str> {
        match self {
            Refusal::Unauthorized { challenge, .. } => {
                Some(challenge.as_deref().unwrap_or("Bearer"))
            }
            Refusal::InsufficientScope { challenge, .. } => Some(challenge),
            _ => None,
        }
    }

    /// Over a budget: retry after `retry_after_seconds` (raised to at least 1).
    pub fn rate_limited(retry_after_seconds: u64, message: impl Into<Cow<'static, str>>) -> Self {
        Refusal::RateLimited {
            retry_after_seconds: retry_after_seconds.max(1),
            message: message.into(),
        }
    }

    /// The request is too large; `message` says the limit and how to stay under it.
    pub fn payload_too_large(message: impl Into<Cow<'static, str>>) -> Self {
        Refusal::PayloadTooLarge {
            message: message.into(),
        }
    }

    /// The JSON-RPC error code every transport sends.
    pub fn code(&self) -> i64 {
        match self {
            Refusal::Unauthorized { .. } | Refusal::InsufficientScope { .. } => code::UNAUTHORIZED,
            Refusal::RateLimited { .. } => code::RATE_LIMITED,
            Refusal::PayloadTooLarge { .. } | Refusal::Unavailable { .. } => code::TRANSPORT,
        }
    }

    /// The error message every transport sends.
    pub fn message(&self) -> &str {
        match self {
            Refusal::Unauthorized { message, .. }
            | Refusal::InsufficientScope { message, .. }
            | Refusal::RateLimited { message, .. }
            | Refusal::Unavailable { message, .. }
            | Refusal::PayloadTooLarge { message } => message,
        }
    }

    /// Seconds the caller should wait before retrying, for a rate-limit refusal.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            Refusal::RateLimited {
                retry_after_seconds,
                ..
            }
            | Refusal::Unavailable {
                retry_after_seconds,
                ..
            } => Some(*retry_after_seconds),
            Refusal::Unauthorized { .. }
            | Refusal::InsufficientScope { .. }
            | Refusal::PayloadTooLarge { .. } => None,
        }
    }

    /// The JSON-RPC error object every transport sends for this refusal.
    pub fn error_object(&self) -> ErrorObject {
        let error = ErrorObject::new(self.code(), self.message());
        match self.retry_after_seconds() {
            Some(secs) => error.with_data(json!({ "retryAfterSeconds": secs })),
            None => error,
        }
    }

    /// How a request refused this way ended, for the audit log and the metrics.
    pub fn outcome(&self) -> Outcome {
        match self {
            Refusal::Unauthorized { .. } | Refusal::InsufficientScope { .. } => {
                Outcome::Unauthorized
            }
            Refusal::RateLimited { .. } => Outcome::RateLimited,
            Refusal::PayloadTooLarge { .. } | Refusal::Unavailable { .. } => Outcome::ProtocolError,
        }
    }

    /// The HTTP status an edge answers this refusal with (see the module docs).
    pub fn http_status(&self) -> http::StatusCode {
        match self {
            Refusal::Unauthorized { .. } => http::StatusCode::UNAUTHORIZED,
            Refusal::InsufficientScope { .. } => http::StatusCode::FORBIDDEN,
            Refusal::RateLimited { .. } => http::StatusCode::TOO_MANY_REQUESTS,
            Refusal::Unavailable { .. } => http::StatusCode::SERVICE_UNAVAILABLE,
            Refusal::PayloadTooLarge { .. } => http::StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    /// A short label of the kind (`unauthorized`, `insufficient_scope`, `rate_limited`,
    /// `auth_unavailable`, `payload_too_large`), e.g. for a metric's `reason`.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Unauthorized { .. } => "unauthorized",
            Refusal::InsufficientScope { .. } => "insufficient_scope",
            Refusal::RateLimited { .. } => "rate_limited",
            Refusal::Unavailable { .. } => "auth_unavailable",
            Refusal::PayloadTooLarge { .. } => "payload_too_large",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        McpRequest, McpResponse, ProtocolVersion, RequestContext, RequestId, Transport,
    };
    use serde_json::json;

    fn refused(refusal: Refusal) -> McpResponse {
        McpRequest::from(crate::protocol::RequestParts {
            id: Some(RequestId::Number(4)),
            method: "tools/list".into(),
            params: Default::default(),
            ctx: RequestContext::new(ProtocolVersion::V2025_11_25, Transport::Stdio),
            call: None,
        })
        .refuse(refusal)
    }

    #[test]
    fn each_refusal_is_one_json_rpc_error_and_one_outcome() {
        let cases = [
            (
                Refusal::unauthorized("Unauthorized: send a token."),
                json!({"code": -32001, "message": "Unauthorized: send a token."}),
                Outcome::Unauthorized,
            ),
            (
                Refusal::rate_limited(7, "Rate limit exceeded. Retry after 7 s."),
                json!({"code": -32000, "message": "Rate limit exceeded. Retry after 7 s.",
                       "data": {"retryAfterSeconds": 7}}),
                Outcome::RateLimited,
            ),
            (
                Refusal::payload_too_large("Payload Too Large: at most 10 bytes."),
                json!({"code": -32000, "message": "Payload Too Large: at most 10 bytes."}),
                Outcome::ProtocolError,
            ),
        ];
        for (refusal, error, outcome) in cases {
            let response = refused(refusal.clone());
            assert_eq!(response.refusal(), Some(&refusal));
            assert_eq!(response.outcome(), outcome, "{refusal:?}");
            assert_eq!(response.error_code(), Some(refusal.code()));
            assert_eq!(
                response.to_json(),
                Some(json!({"jsonrpc": "2.0", "id": 4, "error": error}))
            );
            assert_eq!(response.to_json().map(|v| v["error"].clone()), Some(error));
        }
    }

    #[test]
    fn retry_after_is_at_least_one_second() {
        assert_eq!(Refusal::rate_limited(0, "x").retry_after_seconds(), Some(1));
        assert_eq!(Refusal::unauthorized("x").retry_after_seconds(), None);
    }
}
