use serde_json::{Map, Value};

use super::rules;
use crate::plugin::{
    AGENT_RUN, Check, Gate, GateLayer, McpRequest, McpResponse, ParsedCall, invalid_args,
};

/// The [`Check`] of the validate layer: the longest request text, the published tool
/// schemas, then the typed parse. The compiled schemas are shared by every instance.
#[derive(Clone, Copy, Debug)]
pub struct ToolSchemas {
    max_request_bytes: usize,
}

/// The default longest `agent_run` request text (`mcp.max_request_bytes`): room for any
/// request a person writes, pasted logs included, far below the body cap (which is there for
/// images).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 256 * 1024;

impl Default for ToolSchemas {
    fn default() -> Self {
        Self {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }
}

/// Checks `tools/call` arguments of `agent_run` and `agent_status` before `inner` sees them;
/// see the [module docs](super).
pub type Validate<S> = Gate<S, ToolSchemas>;

/// Applies [`Validate`] to a service: strict schema and runtime checks of tool arguments.
pub type ValidateLayer = GateLayer<ToolSchemas>;

impl ToolSchemas {
    /// Refuses `agent_run` request texts longer than `bytes` (UTF-8); otherwise the published
    /// schemas, as [`ToolSchemas::default`] (`ValidateLayer::new(ToolSchemas::with_max_request_bytes(n))`).
    pub const fn with_max_request_bytes(bytes: usize) -> Self {
        ToolSchemas {
            max_request_bytes: bytes,
        }
    }
}

impl Check for ToolSchemas {
    fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
        // Before the schema: a huge text is refused without being walked.
        if let Some(line) = self.request_too_long(req) {
            return Err(req.result(invalid_args(AGENT_RUN, &[line])));
        }
        if let Some((tool, problems)) = violations(req) {
            return Err(req.result(invalid_args(tool, &problems)));
        }
        // The shape is the schema's: parse into the typed values every later layer and the
        // service read, applying the rules the schema cannot say.
        if let ParsedCall::Invalid(answer) = req.parse_tool_call() {
            return Err(req.result(answer));
        }
        Ok(())
    }
}

impl ToolSchemas {
    /// The line refusing an `agent_run` request text over the cap, if it is.
    fn request_too_long(&self, req: &McpRequest) -> Option<String> {
        if req.is_notification() || req.call.is_some() || req.tool_name() != Some(AGENT_RUN) {
            return None;
        }
        let arguments = req.params.tools_call()?.arguments.as_ref()?;
        let bytes = arguments.get("request")?.as_str()?.len();
        (bytes > self.max_request_bytes).then(|| {
            format!(
                "request: is {bytes} bytes, more than the {} this server takes \
                 (mcp.max_request_bytes); put long material in a file in the workspace and name \
                 it in the request",
                self.max_request_bytes
            )
        })
    }
}

/// The tool and its violations, if this is a `tools/call` of one of our tools with bad
/// arguments.
fn violations(req: &McpRequest) -> Option<(&'static str, Vec<String>)> {
    if req.is_notification() || req.call.is_some() {
        return None;
    }
    let name = req.tool_name()?;
    let tool = rules::ToolRules::of(name)?;
    let empty;
    let args = match req.params.tools_call().and_then(|c| c.arguments.as_ref()) {
        None | Some(Value::Null) => {
            empty = Value::Object(Map::new());
            &empty
        }
        Some(args @ Value::Object(_)) => args,
        // Not an object: a malformed call, which the service answers with -32602.
        Some(_) => return None,
    };
    let problems = tool.check(args);
    (!problems.is_empty()).then_some((tool.name(), problems))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    use std::convert::Infallible;

    use super::*;
    use crate::plugin::{
        McpResult, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
    };

    fn request(method: &str, params: Value) -> McpRequest {
        McpRequest::new(
            Some(RequestId::Number(7)),
            method,
            params.as_object().cloned().unwrap_or_default(),
            RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
        )
    }

    /// Runs `req` through the layer around a handler that answers "passed".
    async fn run(req: McpRequest) -> McpResponse {
        let svc = ServiceBuilder::new()
            .layer(ValidateLayer::default())
            .service(service_fn(|req: McpRequest| async move {
                Ok::<_, Infallible>(req.result(McpResult::tool_text("passed", false)))
            }));
        match svc.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }

    fn text(resp: &McpResponse) -> (&str, bool) {
        match &resp.payload {
            Payload::Result(r) => (r.first_text().unwrap_or(""), r.is_tool_error()),
            other => panic!("expected a result, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn valid_arguments_reach_the_inner_service() {
        let resp = run(request(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "fix it", "temperature": 2.0,
                   "session_id": null, "images": null}}),
        ))
        .await;
        assert_eq!(text(&resp), ("passed", false));
        assert_eq!(resp.id, Some(RequestId::Number(7)));
    }

    #[tokio::test]
    async fn bad_arguments_are_a_tool_error_listing_every_violation() {
        let resp = run(request(
            "tools/call",
            json!({"name": "agent_status", "arguments": {"task_id": "nope", "extra": 1,
                   "session_id": 5}}),
        ))
        .await;
        assert_eq!(
            text(&resp),
            (
                "Invalid arguments for tool \"agent_status\":\n\
                 extra: unknown property; allowed: session_id, task_id\n\
                 session_id: must be a string or null, got a number; pass the session_id that agent_run returned, or omit it\n\
                 task_id: \"nope\" is not a UUID; pass the task_id that agent_run returned",
                true
            )
        );
        assert_eq!(resp.id, Some(RequestId::Number(7)));
    }

    #[tokio::test]
    async fn absent_arguments_are_checked_as_an_empty_object() {
        let resp = run(request("tools/call", json!({"name": "agent_run"}))).await;
        assert_eq!(
            text(&resp),
            (
                "Invalid arguments for tool \"agent_run\":\n\
                 request: missing; describe the work to do as a non-empty string",
                true
            )
        );
    }

    #[tokio::test]
    async fn other_methods_unknown_tools_and_odd_arguments_pass_through() {
        for (method, params) in [
            ("tools/list", json!({})),
            (
                "tools/call",
                json!({"name": "other_tool", "arguments": {"x": 1}}),
            ),
            (
                "tools/call",
                json!({"name": "agent_run", "arguments": [1, 2]}),
            ),
            ("tools/call", json!({"arguments": {"x": 1}})),
        ] {
            let resp = run(request(method, params.clone())).await;
            assert_eq!(text(&resp), ("passed", false), "{method} {params}");
        }
    }

    #[tokio::test]
    async fn a_request_text_over_the_cap_is_refused_naming_the_key() {
        let svc = ServiceBuilder::new()
            .layer(ValidateLayer::new(ToolSchemas::with_max_request_bytes(10)))
            .service(service_fn(|req: McpRequest| async move {
                Ok::<_, Infallible>(req.result(McpResult::tool_text("queued", false)))
            }));
        let call = |text: &str| {
            request(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": text}}),
            )
        };
        let Ok(resp) = svc.clone().oneshot(call("0123456789")).await;
        assert_eq!(text(&resp), ("queued", false));
        let Ok(resp) = svc.oneshot(call("0123456789é")).await;
        assert_eq!(
            text(&resp),
            (
                "Invalid arguments for tool \"agent_run\":\nrequest: is 12 bytes, more than the \
                 10 this server takes (mcp.max_request_bytes); put long material in a file in the \
                 workspace and name it in the request",
                true
            )
        );
    }

    #[tokio::test]
    async fn notifications_pass_through() {
        let mut req = request("tools/call", json!({"name": "agent_run", "arguments": {}}));
        req.id = None;
        assert_eq!(text(&run(req).await), ("passed", false));
    }
}
