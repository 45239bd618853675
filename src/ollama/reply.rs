//! Folds the chunks of a streamed `/api/chat` reply into one [`ChatResponse`].
//!
//! Content and thinking arrive as fragments spread over many chunks; tool calls may arrive in any
//! chunk, and the final `done` chunk carries the token counts. The accumulator also enforces the
//! client's reply-size cap and turns an `{"error": …}` line into [`OllamaError::Stream`].

use super::error::OllamaError;
use super::types::{ChatChunk, ChatResponse, Message, ToolCall};

/// Folds streamed chunks into one [`ChatResponse`].
pub(crate) struct ReplyAccumulator {
    content: String,
    thinking: String,
    tool_calls: Vec<ToolCall>,
    limit: usize,
}

impl ReplyAccumulator {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            content: String::new(),
            thinking: String::new(),
            tool_calls: Vec::new(),
            limit,
        }
    }

    /// Takes one NDJSON line; returns the whole reply once the `done` chunk arrives.
    pub(crate) fn accept(
        &mut self,
        line: &[u8],
        on_chunk: &mut (dyn FnMut(&ChatChunk) + Send),
    ) -> Result<Option<ChatResponse>, OllamaError> {
        let chunk: ChatChunk =
            serde_json::from_slice(line).map_err(|e| OllamaError::decode(line, e))?;
        if let Some(error) = chunk.error {
            return Err(OllamaError::Stream(error));
        }
        on_chunk(&chunk);
        if let Some(message) = chunk.message {
            self.content.push_str(&message.content);
            if let Some(thinking) = message.thinking {
                self.thinking.push_str(&thinking);
            }
            for call in message.tool_calls {
                // Some servers repeat earlier calls in the done chunk; keep each call once.
                if chunk.done && self.tool_calls.contains(&call) {
                    continue;
                }
                self.tool_calls.push(call);
            }
        }
        if self.content.len() + self.thinking.len() > self.limit {
            return Err(OllamaError::ReplyTooLarge { limit: self.limit });
        }
        if !chunk.done {
            return Ok(None);
        }
        let mut message = Message::assistant(std::mem::take(&mut self.content));
        message.thinking = Some(std::mem::take(&mut self.thinking)).filter(|t| !t.is_empty());
        message.tool_calls = std::mem::take(&mut self.tool_calls);
        Ok(Some(ChatResponse {
            message,
            done_reason: chunk.done_reason,
            prompt_eval_count: chunk.prompt_eval_count.unwrap_or(0),
            eval_count: chunk.eval_count.unwrap_or(0),
            total_duration: chunk.total_duration.unwrap_or(0),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulator_collects_across_chunks_and_dedupes_repeats_in_done() {
        let mut acc = ReplyAccumulator::new(1024);
        let mut seen = 0;
        let mut on_chunk = |_: &ChatChunk| seen += 1;
        let call = r#"{"function":{"index":0,"name":"ls","arguments":{}}}"#;
        let lines = [
            r#"{"message":{"role":"assistant","thinking":"hm"}}"#.to_owned(),
            format!(r#"{{"message":{{"role":"assistant","content":"a","tool_calls":[{call}]}}}}"#),
            format!(
                r#"{{"message":{{"role":"assistant","content":"b","tool_calls":[{call}]}},"done":true,"done_reason":"stop","eval_count":3}}"#
            ),
        ];
        let mut done = None;
        for line in &lines {
            done = acc
                .accept(line.as_bytes(), &mut on_chunk)
                .expect("valid line");
        }
        let done = done.expect("done chunk ends the reply");
        assert_eq!(seen, 3);
        assert_eq!(done.message.content, "ab");
        assert_eq!(done.message.thinking.as_deref(), Some("hm"));
        assert_eq!(done.message.tool_calls.len(), 1);
        assert_eq!(done.eval_count, 3);
        assert_eq!(done.prompt_eval_count, 0);
    }

    #[test]
    fn decode_error_truncates_the_line() {
        let mut acc = ReplyAccumulator::new(1024);
        let line = format!("not json {}", "x".repeat(1000));
        let err = acc
            .accept(line.as_bytes(), &mut |_| {})
            .expect_err("not JSON");
        assert!(
            matches!(&err, OllamaError::Decode { line, .. } if line.starts_with("not json x") && line.chars().count() == 201)
        );
    }
}
