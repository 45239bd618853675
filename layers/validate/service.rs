use serde_json::{Map, Value};

use super::rules;
use crate::plugin::{
    Check, Gate, GateLayer, Gated, McpRequest, McpResponse, ParsedCall, invalid_args,
};

/// The [`Check`] of the validate layer: the published tool schemas, then the typed parse.
/// It carries no configuration; the compiled schemas are shared by every instance.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToolSchemas;

/// Checks `tools/call` arguments of `agent_run` and `agent_status` before `inner` sees them;
/// see the [module docs](super).
pub type Validate<S> = Gate<S, ToolSchemas>;

/// Applies [`Validate`] to a service: strict schema and runtime checks of tool arguments.
pub type ValidateLayer = GateLayer<ToolSchemas>;

impl GateLayer<ToolSchemas> {
    pub const fn new() -> Self {
        GateLayer::with(Gated(ToolSchemas))
    }
}

impl Check for ToolSchemas {
    fn check(&self, req: &mut McpRequest) -> Result<(), McpResponse> {
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

/// The tool and its violations, if this is a `tools/call` of one of our tools with bad
/// arguments.
fn violations(req: &McpRequest) -> Option<(&'static str, Vec<String>)> {
    if req.is_notification() || req.call.is_some() {
        return None;
    }
    let name = req.tool_name()?;
    let tool = rules::ToolRules::of(name)?;
    let empty;
    let args = match req.params.get("arguments") {
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
    use crate::protocol::{
        McpResult, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
    };

    fn request(method: &str, params: Value) -> McpRequest {
        McpRequest {
            id: Some(RequestId::Number(7)),
            method: method.into(),
            params: params.as_object().cloned().unwrap_or_default(),
            ctx: RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
            call: None,
        }
    }

    /// Runs `req` through the layer around a handler that answers "passed".
    async fn run(req: McpRequest) -> McpResponse {
        let svc = ServiceBuilder::new()
            .layer(ValidateLayer::new())
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
    async fn notifications_pass_through() {
        let mut req = request("tools/call", json!({"name": "agent_run", "arguments": {}}));
        req.id = None;
        assert_eq!(text(&run(req).await), ("passed", false));
    }
}
