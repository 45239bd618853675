//! JSON-RPC 2.0 framing: ids, incoming messages and error objects.
//!
//! Parsing is deliberately strict about the envelope (one object, `"jsonrpc": "2.0"`, a string
//! or number id) and lenient about nothing else: a batch array or a malformed envelope becomes
//! a JSON-RPC error the caller can read, never a panic.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::method::Method;

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

/// A JSON-RPC request id: a string or a number, echoed back unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s}"),
        }
    }
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

/// One incoming JSON-RPC message, as far as the envelope goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: Method,
        params: Map<String, Value>,
    },
    Notification {
        method: Method,
        params: Map<String, Value>,
    },
    /// A response or error object sent by the peer (legacy clients may POST these).
    Response { id: Option<RequestId> },
}

/// Why an incoming message could not be read; carries the id when one was readable so the
/// error response can echo it.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvelopeError {
    pub id: Option<RequestId>,
    pub error: ErrorObject,
}

impl Incoming {
    /// Parses one message from raw bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Incoming, EnvelopeError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| EnvelopeError {
            id: None,
            error: ErrorObject::parse_error(e),
        })?;
        Incoming::from_value(value)
    }

    /// Classifies an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<Incoming, EnvelopeError> {
        let mut obj = match value {
            Value::Object(obj) => obj,
            Value::Array(_) => {
                return Err(EnvelopeError {
                    id: None,
                    error: ErrorObject::invalid_request(
                        "JSON-RPC batches are not supported; send one message per request",
                    ),
                });
            }
            _ => {
                return Err(EnvelopeError {
                    id: None,
                    error: ErrorObject::invalid_request("a JSON-RPC message must be a JSON object"),
                });
            }
        };
        let id = match obj.remove("id") {
            None => None,
            Some(Value::Null) => None,
            Some(Value::String(s)) => Some(RequestId::String(s)),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(i) => Some(RequestId::Number(i)),
                None => {
                    return Err(EnvelopeError {
                        id: None,
                        error: ErrorObject::invalid_request("`id` must be a string or an integer"),
                    });
                }
            },
            Some(_) => {
                return Err(EnvelopeError {
                    id: None,
                    error: ErrorObject::invalid_request("`id` must be a string or an integer"),
                });
            }
        };
        let fail = |id: Option<RequestId>, msg: &str| EnvelopeError {
            id,
            error: ErrorObject::invalid_request(msg.to_owned()),
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(fail(id, "`jsonrpc` must be \"2.0\""));
        }
        let Some(method) = obj.remove("method") else {
            if obj.contains_key("result") || obj.contains_key("error") {
                return Ok(Incoming::Response { id });
            }
            return Err(fail(id, "a request needs a `method`"));
        };
        let Value::String(method) = method else {
            return Err(fail(id, "`method` must be a string"));
        };
        let method = Method::from(method);
        let params = match obj.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(EnvelopeError {
                    id,
                    error: ErrorObject::invalid_params("`params` must be an object"),
                });
            }
        };
        Ok(match id {
            Some(id) => Incoming::Request { id, method, params },
            None => Incoming::Notification { method, params },
        })
    }
}

/// Serialises a response envelope (result or error) with the given id.
pub fn response_json(id: Option<&RequestId>, outcome: Result<Value, &ErrorObject>) -> Value {
    let mut obj = Map::with_capacity(3);
    obj.insert("jsonrpc".into(), Value::from("2.0"));
    obj.insert(
        "id".into(),
        match id {
            Some(id) => serde_json::to_value(id).unwrap_or(Value::Null),
            None => Value::Null,
        },
    );
    match outcome {
        Ok(result) => obj.insert("result".into(), result),
        Err(error) => obj.insert(
            "error".into(),
            serde_json::to_value(error).unwrap_or(Value::Null),
        ),
    };
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_notification_and_response_are_told_apart() {
        let req =
            Incoming::from_slice(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).unwrap();
        assert_eq!(
            req,
            Incoming::Request {
                id: RequestId::Number(7),
                method: "tools/list".into(),
                params: Map::new()
            }
        );
        let note =
            Incoming::from_slice(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
        let resp = Incoming::from_slice(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(
            resp,
            Incoming::Response {
                id: Some(RequestId::String("a".into()))
            }
        );
    }

    #[test]
    fn bad_envelopes_are_errors_with_the_id_when_readable() {
        let e = Incoming::from_slice(b"{nope").unwrap_err();
        assert_eq!(e.error.code, code::PARSE_ERROR);
        let e = Incoming::from_slice(b"[]").unwrap_err();
        assert_eq!(e.error.code, code::INVALID_REQUEST);
        assert!(e.error.message.contains("batches"));
        let e = Incoming::from_slice(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
        assert_eq!(e.id, Some(RequestId::Number(3)));
        let e = Incoming::from_slice(br#"{"jsonrpc":"2.0","id":3,"method":"x","params":[1]}"#)
            .unwrap_err();
        assert_eq!(e.error.code, code::INVALID_PARAMS);
        let e = Incoming::from_slice(br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#).unwrap_err();
        assert_eq!(e.error.code, code::INVALID_REQUEST);
    }

    #[test]
    fn response_envelope_echoes_the_id() {
        let v = response_json(Some(&RequestId::String("x".into())), Ok(json!({})));
        assert_eq!(v, json!({"jsonrpc":"2.0","id":"x","result":{}}));
        let err = ErrorObject::method_not_found("ping");
        let v = response_json(None, Err(&err));
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["code"], -32601);
    }
}
