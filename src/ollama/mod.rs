//! A small, hand-written client for the Ollama REST API.
//!
//! agent-mcp needs three endpoints: `/api/chat` (streamed NDJSON, with tool calls),
//! `/api/show` (does the model support `tools` / `vision`? how large is it, how long its
//! context?) and `/api/version` (is anything listening?), on a local Ollama over http or on
//! Ollama's cloud (`https://ollama.com`, with an [`ApiKey`]). The client keeps what general-purpose crates lose: the HTTP status and the
//! server's error text ([`OllamaError`]), `{"error": …}` lines inside a 200 stream, token counts
//! that Ollama omits when zero, and tool calls that arrive before the final chunk.
//!
//! ```no_run
//! use std::time::Duration;
//! use agent_mcp::ollama::{ChatRequest, Message, OllamaClient, OllamaError};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), OllamaError> {
//! let client = OllamaClient::new("http://127.0.0.1:11434", Duration::from_secs(300), Duration::from_secs(5))?;
//! if !client.show("qwen3:8b").await?.has("tools") {
//!     println!("plain chat only");
//! }
//! let request = ChatRequest::new("qwen3:8b", vec![Message::user("Say hi")]);
//! let cancel = CancellationToken::new();
//! let reply = client.chat(&request, &cancel, &mut |chunk| {
//!     if let Some(m) = &chunk.message { print!("{}", m.content) }
//! }).await?;
//! println!("\n{} prompt + {} generated tokens", reply.prompt_eval_count, reply.eval_count);
//! # Ok(()) }
//! ```

mod client;
mod error;
mod ndjson;
mod reply;
mod stream;
mod types;

pub use client::{ApiKey, DEFAULT_MAX_REPLY_BYTES, OllamaClient, RetryPolicy};
pub use error::OllamaError;
pub use stream::ChatStreamDecoder;
pub use types::{
    ChatChunk, ChatOptions, ChatRequest, ChatResponse, ChunkMessage, Message, ModelDetails, Role,
    ShowResponse, Think, ToolCall, ToolCallFunction,
};
