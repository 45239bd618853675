//! The OpenTelemetry names this server emits: span names, attribute keys and their well-known
//! values, from the semantic conventions for MCP (`gen-ai/mcp.md`) and GenAI client and agent
//! spans (`gen-ai/gen-ai-spans.md`, `gen-ai/gen-ai-agent-spans.md`), all at their
//! Development status. Kept as constants in one place so a rename in a later convention is a
//! one-line change, and so tests can assert on the same strings the code writes.
//!
//! ```
//! use agent_mcp::telemetry::semconv::{self, attr};
//!
//! assert_eq!(semconv::mcp_span_name("tools/call", Some("agent_run")), "tools/call agent_run");
//! assert_eq!(semconv::mcp_span_name("tools/list", None), "tools/list");
//! assert_eq!(semconv::chat_span_name("qwen3:8b"), "chat qwen3:8b");
//! assert_eq!(attr::MCP_METHOD_NAME, "mcp.method.name");
//! ```

/// The `tracing` target of every span meant for OpenTelemetry. The export layer passes only
/// this target (so no other span's fields reach a collector), and the log output leaves it out
/// (so the spans cost nothing when export is off).
pub const TARGET: &str = "agent_mcp::otel";

/// The instrumentation scope of the spans and the metric.
pub const SCOPE: &str = "agent-mcp";

/// `service.name` when neither `OTEL_SERVICE_NAME` nor `telemetry.service_name` says otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "agent-mcp";

/// Attribute keys.
pub mod attr {
    /// The JSON-RPC method of an MCP request or notification (required on MCP spans).
    pub const MCP_METHOD_NAME: &str = "mcp.method.name";
    /// The MCP protocol version the request was served under (`2026-07-28`).
    pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
    /// The JSON-RPC `id`, as a string; absent for notifications.
    pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
    /// The JSON-RPC error code of the response, as a string, when it carries one.
    pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
    /// `tcp` over HTTP, `pipe` over stdio.
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    /// `http` when the transport is HTTP.
    pub const NETWORK_PROTOCOL_NAME: &str = "network.protocol.name";
    /// The low-cardinality class of the error an operation ended with.
    pub const ERROR_TYPE: &str = "error.type";

    /// What kind of GenAI operation a span is (`execute_tool`, `chat`, `invoke_agent`).
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    /// Who serves the model (`ollama`).
    pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// The model a request asked for.
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    /// The model that answered, when the reply names it.
    pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// Why the model stopped (`stop`, `length`, …), one per choice.
    pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// Prompt tokens of one model call (Ollama's `prompt_eval_count`).
    pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Generated tokens of one model call (Ollama's `eval_count`).
    pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// The conversation a call belongs to: the agent's session id.
    pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// The agent's name on `invoke_agent`.
    pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
    /// The agent invocation's id on `invoke_agent`: the task id.
    pub const GEN_AI_AGENT_ID: &str = "gen_ai.agent.id";
    /// A tool's name: the MCP tool on a server span, the agent's tool on `execute_tool`.
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    /// The model's id for one tool call, when it gives one.
    pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// `function` for the agent's own tools (the agent runs them itself).
    pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
    /// Opt-in content (see `telemetry.capture_content`): a tool call's arguments.
    pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
    /// Opt-in content: a tool call's result.
    pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
    /// Opt-in content: the messages sent to the model.
    pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// Opt-in content: the model's reply.
    pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    /// The model server's host, on `chat` spans.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// The model server's port, on `chat` spans.
    pub const SERVER_PORT: &str = "server.port";
    /// The caller's address, on HTTP server spans.
    pub const CLIENT_ADDRESS: &str = "client.address";
    /// The caller's port, on HTTP server spans.
    pub const CLIENT_PORT: &str = "client.port";
}

/// Well-known attribute values.
pub mod value {
    /// `gen_ai.operation.name` of a tool call (also on the MCP server span of `tools/call`).
    pub const EXECUTE_TOOL: &str = "execute_tool";
    /// `gen_ai.operation.name` of a model call.
    pub const CHAT: &str = "chat";
    /// `gen_ai.operation.name` of one agent run (one task).
    pub const INVOKE_AGENT: &str = "invoke_agent";
    /// `gen_ai.provider.name` of Ollama. Not in the conventions' list, which allows a custom
    /// value for a provider it does not name.
    pub const PROVIDER_OLLAMA: &str = "ollama";
    /// `gen_ai.tool.type` of a tool the agent runs itself.
    pub const TOOL_TYPE_FUNCTION: &str = "function";
    /// `gen_ai.agent.name` of this server's agent.
    pub const AGENT_NAME: &str = "agent-mcp";
    /// `network.transport` over HTTP.
    pub const TRANSPORT_TCP: &str = "tcp";
    /// `network.transport` over stdio.
    pub const TRANSPORT_PIPE: &str = "pipe";
    /// `network.protocol.name` over HTTP.
    pub const PROTOCOL_HTTP: &str = "http";
    /// `error.type` of a `CallToolResult` with `isError: true` (mcp.md).
    pub const TOOL_ERROR: &str = "tool_error";
    /// `error.type` when nothing more specific applies, and the stand-in for any name that is
    /// not one of ours (an unknown method or tool a client or model sent): such names are the
    /// sender's text, of any length, so they never become an attribute or a span name.
    pub const OTHER: &str = "_OTHER";
}

/// Metric names.
pub mod metric {
    /// Seconds from an MCP request's arrival to its answer, a histogram (mcp.md).
    pub const MCP_SERVER_OPERATION_DURATION: &str = "mcp.server.operation.duration";
    /// The histogram's unit (UCUM).
    pub const UNIT_SECONDS: &str = "s";
    /// The bucket boundaries mcp.md asks for, in seconds.
    pub const DURATION_BUCKETS: &[f64] = &[
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ];
}

/// The MCP span name `{mcp.method.name} {target}`, where the target is the tool's name when
/// the request concerns one; `{mcp.method.name}` alone otherwise.
pub fn mcp_span_name(method: &str, target: Option<&str>) -> String {
    match target {
        Some(target) => format!("{method} {target}"),
        None => method.to_owned(),
    }
}

/// The model call span name `chat {gen_ai.request.model}`.
pub fn chat_span_name(model: &str) -> String {
    format!("{} {model}", value::CHAT)
}

/// The tool call span name `execute_tool {gen_ai.tool.name}`.
pub fn execute_tool_span_name(tool: &str) -> String {
    format!("{} {tool}", value::EXECUTE_TOOL)
}

/// The agent span name: `invoke_agent {gen_ai.agent.name}`.
pub fn invoke_agent_span_name() -> String {
    format!("{} {}", value::INVOKE_AGENT, value::AGENT_NAME)
}
