//! [`ChatStreamDecoder`]: the bytes of a streamed `/api/chat` body in, one [`ChatResponse`] out.
//!
//! It joins the [`NdjsonSplitter`] (lines from arbitrary chunk boundaries) and the
//! [`ReplyAccumulator`] (chunks folded into one reply, the `{"error"}` line, the size cap), and
//! bounds a line that never ends. The client feeds it network chunks; tests and fuzzers feed it
//! any bytes, cut anywhere: the outcome does not depend on where the cuts fall.
//!
//! ```
//! use agent_mcp::ollama::ChatStreamDecoder;
//! let mut decoder = ChatStreamDecoder::new(1024);
//! let body = b"{\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"}}\n{\"done\":true,\"eval_count\":2}\n";
//! let (a, b) = body.split_at(20);
//! assert!(decoder.push(a, &mut |_| {}).unwrap().is_none());
//! let reply = decoder.push(b, &mut |_| {}).unwrap().expect("done");
//! assert_eq!(reply.message.content, "Hi");
//! assert_eq!(reply.eval_count, 2);
//! ```

use super::error::OllamaError;
use super::ndjson::NdjsonSplitter;
use super::reply::ReplyAccumulator;
use super::types::{ChatChunk, ChatResponse};

/// Room for a chunk's JSON framing around its text when bounding an unterminated line.
const LINE_OVERHEAD_BYTES: usize = 64 * 1024;

/// Incremental decoder of one streamed chat reply.
pub struct ChatStreamDecoder {
    lines: NdjsonSplitter,
    reply: ReplyAccumulator,
    max_reply_bytes: usize,
}

impl ChatStreamDecoder {
    /// `max_reply_bytes` caps the reply's content plus thinking text.
    pub fn new(max_reply_bytes: usize) -> Self {
        Self {
            lines: NdjsonSplitter::new(),
            reply: ReplyAccumulator::new(max_reply_bytes),
            max_reply_bytes,
        }
    }

    /// Takes the next bytes of the body; the whole reply once its `done` chunk is in.
    /// Bytes after the `done` line are ignored, as the client stops reading there.
    pub fn push(
        &mut self,
        bytes: &[u8],
        on_chunk: &mut (dyn FnMut(&ChatChunk) + Send),
    ) -> Result<Option<ChatResponse>, OllamaError> {
        self.lines.push(bytes);
        while let Some(line) = self.lines.next_line() {
            if let Some(done) = self.reply.accept(&line, on_chunk)? {
                return Ok(Some(done));
            }
        }
        // An endless line without a newline must not grow memory without bound.
        if self.lines.pending_len() > self.max_reply_bytes.saturating_add(LINE_OVERHEAD_BYTES) {
            return Err(OllamaError::ReplyTooLarge {
                limit: self.max_reply_bytes,
            });
        }
        Ok(None)
    }

    /// The body has ended: the reply if its last line (without a newline) was the `done`
    /// chunk, else [`OllamaError::Stream`].
    pub fn finish(
        mut self,
        on_chunk: &mut (dyn FnMut(&ChatChunk) + Send),
    ) -> Result<ChatResponse, OllamaError> {
        if let Some(line) = self.lines.finish()
            && let Some(done) = self.reply.accept(&line, on_chunk)?
        {
            return Ok(done);
        }
        Err(OllamaError::Stream("stream ended before done".to_owned()))
    }
}
