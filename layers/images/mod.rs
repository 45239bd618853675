//! The image rules of `agent_run` (`docs/contract.md` §2.5), under the `mcp.images` limits.
//!
//! [`ImagesLayer`] checks the `images` of every `tools/call` of `agent_run`. Each element's
//! shape (an object whose `mime_type` and `data_base64` are strings, not `null`, as the published
//! schema would allow) and MIME type (`image/png`, `image/jpeg` or `image/webp`) are checked when
//! the arguments are parsed into [`ToolCall`](crate::plugin::ToolCall); this layer adds the rules
//! that need its limits:
//!
//! - `data_base64` is standard base64: the `A-Z a-z 0-9 + /` alphabet, `=` padding to a multiple
//!   of 4, no spaces or line breaks;
//! - at most `max_count` images, each at most `max_bytes` and all together at most
//!   `max_total_bytes` once decoded (defaults 4, 10 MiB, 20 MiB);
//! - the data's magic bytes agree with `mime_type` (PNG `\x89PNG\r\n\x1a\n`, JPEG `FF D8 FF`,
//!   WebP `RIFF....WEBP`); data that is none of the three is refused too.
//!
//! The count is checked first and every size is computed from the base64 length, so a request
//! over a limit is refused without decoding anything. Passing images are decoded exactly once,
//! in 64 KiB steps straight into SHA-256 (the images of a request of over 1 MiB several at a time,
//! one per core); the decoded bytes are not kept. What passes is handed
//! downstream on the typed arguments ([`RequestParts::call`](crate::plugin::RequestParts::call)):
//! each [`ImageArg`](crate::plugin::ImageArg) carries its decoded size and SHA-256 as
//! [`CheckedImage`](crate::plugin::CheckedImage).
//!
//! A failure is a finished response, never a `Service::Error`: a `CallToolResult` with
//! `isError: true`, `Invalid arguments for tool "agent_run":` and one
//! `<field path>: <what is wrong>; <what to do>` line per problem: the count, then each bad
//! element in order (at most 20 lines of them, then one line saying how many more), then the
//! total size.
//! Everything else (other tools, other methods, notifications, non-object `arguments`) passes
//! through untouched.
//!
//! The layer stands on its own and never panics on odd input, but in the full stack it sits
//! inside [`validate`](crate::validate), so it sees schema-valid arguments.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), std::convert::Infallible> {
//! use agent_mcp_layers::images::{ImageLimits, ImageRules, ImagesLayer};
//! use agent_mcp_layers::plugin::ToolCall;
//! use agent_mcp_layers::plugin::{McpRequest, McpResult, Payload, ProtocolVersion, RequestContext,
//!     RequestId, Transport};
//! use serde_json::json;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let mut svc = ServiceBuilder::new()
//!     .layer(ImagesLayer::new(ImageRules(ImageLimits::default())))
//!     .service_fn(|req: McpRequest| async move {
//!         let Some(ToolCall::Run(args)) = &req.call else { panic!("typed agent_run arguments") };
//!         let bytes: usize = args.images.iter().filter_map(|i| i.checked).map(|c| c.decoded_len).sum();
//!         let text = format!("{} image(s), {bytes} bytes", args.images.len());
//!         Ok::<_, std::convert::Infallible>(req.result(McpResult::tool_text(text, false)))
//!     });
//!
//! let call = |images| McpRequest::new(
//!     Some(RequestId::Number(1)),
//!     "tools/call",
//!     json!({"name": "agent_run", "arguments": {"request": "look", "images": images}})
//!         .as_object().cloned().unwrap_or_default(),
//!     RequestContext::new(ProtocolVersion::V2026_07_28, Transport::InProcess),
//! );
//! let text = |resp: agent_mcp_layers::plugin::McpResponse| match resp.payload {
//!     Payload::Result(r) => (r.first_text().unwrap_or_default().to_owned(), r.is_tool_error()),
//!     _ => panic!("a tool result"),
//! };
//!
//! // A 1×1 PNG passes; the handler sees its decoded size.
//! let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
//! let ok = svc.ready().await?.call(call(json!([{"mime_type": "image/png", "data_base64": png}]))).await?;
//! assert_eq!(text(ok), ("1 image(s), 70 bytes".to_owned(), false));
//!
//! // The same bytes declared as JPEG do not.
//! let bad = svc.ready().await?.call(call(json!([{"mime_type": "image/jpeg", "data_base64": png}]))).await?;
//! assert_eq!(text(bad), ("Invalid arguments for tool \"agent_run\":\n\
//!     images[0].data_base64: the data is a PNG image but mime_type says image/jpeg; \
//!     set mime_type to image/png or send a JPEG image".to_owned(), true));
//! # Ok(()) }
//! ```

mod check;
mod service;

/// The layer's configuration: the tools' own [`ImageLimits`].
pub use crate::plugin::ImageLimits;
pub use service::{ImageRules, Images, ImagesLayer};
