//! Thin edges that turn bytes into [`McpRequest`](crate::protocol::McpRequest)s and back.

pub(crate) mod connections;
pub mod http;
pub mod server;
pub mod stdio;
mod stdio_ask;
mod telemetry;
