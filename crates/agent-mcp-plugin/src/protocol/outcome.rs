//! [`Outcome`]: how a request ended, as the audit log and the metrics name it.

use serde::Serialize;

/// How a request ended. The audit log's `outcome` key and the `outcome` label of
/// `agent_mcp_requests_total` both use [`Outcome::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// A `CallToolResult` with `isError: true` (invalid arguments, unknown session, …).
    ToolError,
    /// A JSON-RPC error, or a refusal other than the two below.
    ProtocolError,
    /// Refused as [`Refusal::Unauthorized`](super::Refusal::Unauthorized) (the auth layer).
    Unauthorized,
    /// Refused as [`Refusal::RateLimited`](super::Refusal::RateLimited) (the rate limiter).
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_typed_refusal_classifies_as_one() {
        use crate::protocol::{
            ErrorObject, McpRequest, ProtocolVersion, Refusal, RequestContext, Transport,
        };
        let req = McpRequest::from(crate::protocol::RequestParts {
            id: None,
            method: "tools/list".into(),
            params: Default::default(),
            ctx: RequestContext::new(ProtocolVersion::V2026_07_28, Transport::Stdio),
            call: None,
        });
        // Error codes are shared (-32000 is also a transport error), so they classify nothing.
        let lookalike = req.error(ErrorObject::new(-32001, "Unauthorized"));
        assert_eq!(lookalike.outcome(), Outcome::ProtocolError);
        let lookalike = req.error(ErrorObject::new(-32000, "Rate limit exceeded"));
        assert_eq!(lookalike.outcome(), Outcome::ProtocolError);
        let refused = req.refuse(Refusal::unauthorized("Unauthorized"));
        assert_eq!(refused.outcome(), Outcome::Unauthorized);
        let refused = req.refuse(Refusal::rate_limited(2, "Retry after 2 s."));
        assert_eq!(refused.outcome(), Outcome::RateLimited);
    }

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
