//! The JSON-RPC error object and the error codes this server puts on the wire; its own
//! module so that the envelope ([`super::jsonrpc`]) and the era rules ([`super::era`]), which
//! both answer with errors, need not import each other.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Standard and MCP error codes used on the wire.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Transport-level refusals (body too large, wrong content type, forbidden origin, …).
    pub const TRANSPORT: i64 = -32000;
    /// A caller over its rate limit (the error's `data` holds `retryAfterSeconds`). It shares
    /// its number with [`TRANSPORT`]: tell them apart by that `data`.
    pub const RATE_LIMITED: i64 = -32000;
    /// A caller without a valid credential.
    pub const UNAUTHORIZED: i64 = -32001;
    /// 2026-07-28: an HTTP header disagrees with the body, or a required header is missing.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: the request needs a client capability it did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// 2026-07-28: the requested protocol version is not supported.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(
            code::PARSE_ERROR,
            format!(
                "Parse error: the body is not valid JSON ({detail}). Send one JSON-RPC 2.0 object."
            ),
        )
    }

    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(
            code::INVALID_REQUEST,
            format!("Invalid request: {}", detail.into()),
        )
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL_ERROR, message)
    }
}
