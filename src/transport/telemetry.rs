//! The MCP server span and the `mcp.server.operation.duration` measurement of one request,
//! shared by both edges: started where the message arrives (the only place that still sees
//! `params._meta` and the HTTP headers), ended when its answer is ready.
//!
//! The span follows mcp.md "Server": `{mcp.method.name} {target}`, kind SERVER, parented on
//! the caller's `traceparent` / `tracestate` from `params._meta` (SEP-414) or, without one
//! there, the HTTP `traceparent` header. The context of an `agent_run`'s span travels down
//! the stack as a [`TraceCarrier`] in the request's extensions, so the service can store it
//! with the task it queues and the runner continue the trace (`invoke_agent` below this span).
//!
//! With export off the span is disabled where it is built and the metric is not aggregated,
//! so [`ServerOperation::start`] returns `None` after two atomic loads (in a process that never
//! started export): no string is formatted, nothing is parsed, no clock is read.

use std::time::Instant;

use serde_json::{Map, Value};

use crate::mcp_tools::{AGENT_RUN, AGENT_STATUS};
use crate::protocol::{
    McpResponse, Method, Payload, ProtocolVersion, RequestContext, RequestId, Transport,
};
use crate::telemetry::context::{TraceCarrier, TraceCarrierExt};
use crate::telemetry::duration::{self, OperationAttributes};
use crate::telemetry::semconv::value;
use crate::telemetry::spans::{McpServerSpan, Network, ServerSpan, SpanExport};

/// One request being traced and timed.
pub(crate) struct ServerOperation {
    span: ServerSpan,
    started: Instant,
    method: &'static str,
    tool: Option<&'static str>,
    version: ProtocolVersion,
    network: Network,
}

fn network(transport: Transport) -> Network {
    match transport {
        Transport::Http { peer } => Network::Http { peer },
        Transport::Stdio => Network::Stdio,
        Transport::InProcess => Network::InProcess,
    }
}

/// The method's name when it is one of ours; a client's own text is [`value::OTHER`].
fn method_name(method: &Method) -> &'static str {
    method.static_name().unwrap_or(value::OTHER)
}

/// The tool of a `tools/call` named `name`: ours by name, anything else [`value::OTHER`].
fn tool_name(method: &Method, name: Option<&str>) -> Option<&'static str> {
    if *method != Method::ToolsCall {
        return None;
    }
    Some(match name {
        Some(AGENT_RUN) => AGENT_RUN,
        Some(AGENT_STATUS) => AGENT_STATUS,
        _ => value::OTHER,
    })
}

impl ServerOperation {
    /// Starts the span of the request `method`/`id` whose params hold the string
    /// `tool_called` as `name` (a `tools/call`'s tool) and the `_meta` object `meta` (read for the caller's context),
    /// with these `headers` (HTTP only), and puts its [`TraceCarrier`] into `ctx.extensions`.
    /// `None` when export is off.
    pub(crate) fn start(
        method: &Method,
        id: Option<&RequestId>,
        tool_called: Option<&str>,
        meta: Option<&Map<String, Value>>,
        headers: Option<&http::HeaderMap>,
        ctx: &mut RequestContext,
    ) -> Option<Self> {
        // One lookup for "is export on" and where the span goes.
        let export = SpanExport::current();
        if export.is_none() && !duration::is_recording() {
            return None;
        }
        let name = method_name(method);
        let tool = tool_name(method, tool_called);
        let network = network(ctx.transport);
        let mut builder = McpServerSpan::new(name)
            .with_protocol_version(ctx.version.as_str())
            .with_network(network);
        if let Some(tool) = tool {
            builder = builder.with_tool(tool);
        }
        builder = match id {
            None => builder,
            Some(RequestId::Number(n)) => builder.with_request_number(*n),
            Some(RequestId::String(text)) => builder.with_request_id(text),
        };
        let span = match export {
            Some(export) => builder.start_for_request(export, meta, headers),
            None => ServerSpan::disabled(),
        };
        // Only a task carries the trace further (the other requests end here).
        if tool == Some(AGENT_RUN)
            && let Some(carrier) = span.context().as_ref().and_then(TraceCarrier::from_context)
        {
            ctx.extensions.insert(carrier);
        }
        Some(Self {
            span,
            started: Instant::now(),
            method: name,
            tool,
            version: ctx.version,
            network,
        })
    }

    /// Ends the span with the response's outcome and records the duration.
    pub(crate) fn finish(mut self, response: &McpResponse) {
        let error_type = match &response.payload {
            Payload::Error(e) | Payload::ToolCallError(e) => {
                self.span.record_rpc_error(e.code, None);
                Some(e.code.to_string())
            }
            Payload::Refused(refusal) => {
                self.span.record_rpc_error(refusal.code(), None);
                Some(refusal.code().to_string())
            }
            Payload::Result(result) if result.is_tool_error() => {
                self.span.record_tool_error();
                Some(value::TOOL_ERROR.to_owned())
            }
            _ => None,
        };
        let mut attributes = OperationAttributes::new(self.method)
            .with_error_type(error_type.as_deref())
            .with_protocol_version(self.version.as_str())
            .with_network(self.network);
        if let Some(tool) = self.tool {
            attributes = attributes.with_tool(tool);
        }
        duration::record_server_operation(self.started.elapsed(), &attributes);
        drop(self.span);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::fmt::writer::BoxMakeWriter;

    use super::*;
    use crate::telemetry::subscriber::{LogFormat, dispatch};

    #[test]
    fn nothing_is_built_or_carried_when_export_is_off() {
        // The process's subscriber without export, logging everything.
        let logs = dispatch(
            LogFormat::Text,
            false,
            EnvFilter::new("trace"),
            None,
            BoxMakeWriter::new(std::io::sink),
        );
        let Value::Object(params) = json!({
            "name": "agent_run",
            "_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        }) else {
            unreachable!()
        };
        tracing::dispatcher::with_default(&logs, || {
            let mut ctx =
                RequestContext::new(ProtocolVersion::V2026_07_28, Transport::Http { peer: None });
            let started = ServerOperation::start(
                &Method::ToolsCall,
                Some(&RequestId::Number(1)),
                params.get("name").and_then(Value::as_str),
                params.get("_meta").and_then(Value::as_object),
                None,
                &mut ctx,
            );
            assert!(started.is_none());
            assert!(ctx.extensions.get::<TraceCarrier>().is_none());
        });
    }

    #[test]
    fn only_our_names_become_the_target() {
        let (ours, theirs) = (Some("agent_status"), Some("secret project plan"));
        assert_eq!(tool_name(&Method::ToolsCall, ours), Some(AGENT_STATUS));
        assert_eq!(tool_name(&Method::ToolsCall, theirs), Some(value::OTHER));
        assert_eq!(tool_name(&Method::ToolsCall, None), Some(value::OTHER));
        assert_eq!(tool_name(&Method::ToolsList, ours), None);
        assert_eq!(method_name(&Method::parse("vendor/secret")), value::OTHER);
        assert_eq!(method_name(&Method::TasksGet), "tasks/get");
    }
}
