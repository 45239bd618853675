//! [`Outcome`]: how a request ended, as the audit log and the metrics name it.

use serde::Serialize;

use super::message::{McpResponse, Payload};

/// How a request ended. The audit log's `outcome` key and the `outcome` label of
/// `agent_mcp_requests_total` both use [`Outcome::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// A `CallToolResult` with `isError: true` (invalid arguments, unknown session, …).
    ToolError,
    /// A JSON-RPC error other than the two below.
    ProtocolError,
    /// Refused by the auth layer (HTTP 401).
    Unauthorized,
    /// Refused by the rate limiter (HTTP 429).
    RateLimited,
}

impl Outcome {
    /// How many outcomes there are; [`Outcome::index`] is below it.
    pub const COUNT: usize = 5;

    /// A dense index, for tables of per-outcome values.
    pub const fn index(self) -> usize {
        match self {
            Outcome::Ok => 0,
            Outcome::ToolError => 1,
            Outcome::ProtocolError => 2,
            Outcome::Unauthorized => 3,
            Outcome::RateLimited => 4,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::ProtocolError => "protocol_error",
            Outcome::Unauthorized => "unauthorized",
            Outcome::RateLimited => "rate_limited",
        }
    }

    /// Classifies a response; the same as [`McpResponse::outcome`].
    pub fn of(response: &McpResponse) -> Outcome {
        response.outcome()
    }
}

impl McpResponse {
    /// How this response ends its request. The refusals are told apart by the HTTP status
    /// their layers set (which the hints carry on every transport), not by error codes other
    /// layers may share.
    pub fn outcome(&self) -> Outcome {
        match self.http.status.map(|s| s.as_u16()) {
            Some(401) => return Outcome::Unauthorized,
            Some(429) => return Outcome::RateLimited,
            _ => {}
        }
        match &self.payload {
            Payload::Error(_) => Outcome::ProtocolError,
            Payload::Result(r) if r.is_tool_error() => Outcome::ToolError,
            Payload::Result(_) | Payload::Accepted => Outcome::Ok,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outcome_names() {
        let all = [
            Outcome::Ok,
            Outcome::ToolError,
            Outcome::ProtocolError,
            Outcome::Unauthorized,
            Outcome::RateLimited,
        ];
        let indexes: Vec<usize> = all.iter().map(|o| o.index()).collect();
        assert_eq!(indexes, (0..Outcome::COUNT).collect::<Vec<_>>());
        let names: Vec<_> = all
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect();
        assert_eq!(
            names,
            vec![
                json!("ok"),
                json!("tool_error"),
                json!("protocol_error"),
                json!("unauthorized"),
                json!("rate_limited")
            ]
        );
    }
}
