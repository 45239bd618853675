//! Strict validation of `tools/call` arguments against the published tool schemas.
//!
//! [`ValidateLayer`] checks the `arguments` of every `tools/call` of `agent_run` and
//! `agent_status` before the inner service sees them:
//!
//! - against the tool's published input schema ([`crate::plugin::input_schema`], the very value
//!   `tools/list` returns), compiled once per process with `format` assertions on, so a
//!   `session_id` or `task_id` that is not a hyphenated UUID is refused;
//! - then against the contract's runtime rules (`docs/contract.md` §2.4): `request` is not
//!   empty or whitespace-only, and `temperature` lies within 0.0 through 2.0;
//! - and, first of all, `agent_run`'s `request` is at most `mcp.max_request_bytes` long
//!   ([`ToolSchemas::with_max_request_bytes`], 256 KiB by default), so a huge text is neither
//!   walked by the schema nor stored.
//!
//! A failure is a finished response, never a `Service::Error`: a `CallToolResult` with
//! `isError: true` whose text is `Invalid arguments for tool "<tool>":` followed by one line per
//! violation, `<field path>: <what is wrong>; <what to do>`, ordered by field path
//! (`docs/contract.md` §6.2). Every violation is listed, not only the first, up to 20 lines;
//! past that a last `arguments:` line says there are more (a huge malformed array must not make
//! a huge answer).
//!
//! Passed through untouched: notifications, methods other than `tools/call`, unknown tools (the
//! service answers those with `-32602`), and `arguments` that are neither an object nor absent
//! (also a protocol error from the service). Absent or `null` arguments are validated as `{}`,
//! as the service reads them.
//!
//! Image *content* (MIME type allow-list, base64, sizes, magic bytes) is the business of the
//! [`images`](crate::images) layer, which sits inside this one; the schema only fixes the
//! images' shape. So a request whose schema is broken is answered with the schema violations
//! only; image content is checked once the shape is right.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), std::convert::Infallible> {
//! use agent_mcp_layers::validate::ValidateLayer;
//! use agent_mcp_layers::plugin::{McpRequest, McpResponse, McpResult, Payload, ProtocolVersion,
//!     RequestContext, RequestId, Transport};
//! use serde_json::json;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let mut svc = ServiceBuilder::new()
//!     .layer(ValidateLayer::default())
//!     .service_fn(|req: McpRequest| async move {
//!         Ok::<_, std::convert::Infallible>(req.result(McpResult::tool_text("queued", false)))
//!     });
//!
//! let params = json!({"name": "agent_run",
//!                     "arguments": {"request": "  ", "temperature": 2.5, "colour": "red"}});
//! let req = McpRequest::new(
//!     Some(RequestId::Number(1)),
//!     "tools/call",
//!     params.as_object().cloned().unwrap_or_default(),
//!     RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
//! );
//! let resp: McpResponse = svc.ready().await?.call(req).await?;
//! let Payload::Result(result) = &resp.payload else { panic!("a tool result") };
//! assert!(result.is_tool_error());
//! assert_eq!(
//!     result.first_text(),
//!     Some("Invalid arguments for tool \"agent_run\":\n\
//!           colour: unknown property; allowed: images, request, session_id, temperature\n\
//!           request: must not be empty or whitespace-only\n\
//!           temperature: 2.5 is out of range; use a number from 0.0 through 2.0, or null for the server default")
//! );
//! # Ok(()) }
//! ```

mod rules;
mod service;

pub use service::{DEFAULT_MAX_REQUEST_BYTES, ToolSchemas, Validate, ValidateLayer};
