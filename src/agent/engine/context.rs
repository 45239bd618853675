//! The context window of one step: how much of `num_ctx` the conversation fills, and
//! compaction of older tool results when it nears the window.
//!
//! Every call's prompt extends the previous one unchanged, so Ollama reuses its KV cache for
//! all of it but the new messages. Compaction is the one exception, and it is rare: when the
//! estimated prompt passes three quarters of `num_ctx`, the oldest tool results (never those
//! of the last round) are replaced by a short note saying what they were, until the estimate
//! is under half of it. A conversation that still does not fit fails the step saying so,
//! rather than letting Ollama cut the prompt's start without a word.
//!
//! The estimate is Ollama's own count of the last prompt and reply, plus a third of the bytes
//! added since (a token is about 3–4 bytes of English or code, and one character of Japanese,
//! which UTF-8 writes in 3); before the first reply, or after a compaction, a third of every
//! byte of the messages and tool definitions. When Ollama refuses a prompt as longer than the
//! window anyway (HTTP 400, since mid-2026, instead of cutting it), the estimate learns: it
//! counts fewer bytes per token from then on, so that prompt would have been estimated at the
//! window at least; the step compacts every older result and makes the call once more.

use crate::ollama::{ChatResponse, Message, Role};

/// Share of the window past which older results are compacted.
const COMPACT_ABOVE: f64 = 0.75;
/// Share of the window compaction aims under.
const COMPACT_TO: f64 = 0.5;
/// Share of the window past which the step cannot go on.
const FULL_ABOVE: f64 = 0.95;

/// The step's use of the context window.
#[derive(Debug)]
pub(crate) struct Window {
    num_ctx: u32,
    /// Ollama's token counts of the last call, and the bytes that call's prompt had.
    last_tokens: u64,
    last_bytes: usize,
    /// Tool results compacted so far in this step.
    pub compacted: usize,
    /// Bytes of prompt per token the estimate assumes: 3, less once Ollama refused a prompt
    /// the estimate said would fit.
    bytes_per_token: f64,
}

/// The conversation does not fit even with every older tool result compacted.
#[derive(Debug)]
pub(crate) struct ContextFull {
    pub num_ctx: u32,
    pub estimate: u64,
}

impl Window {
    pub fn new(num_ctx: u32) -> Window {
        Window {
            num_ctx,
            last_tokens: 0,
            last_bytes: 0,
            compacted: 0,
            bytes_per_token: 3.0,
        }
    }

    /// The estimated prompt tokens of `messages` with `fixed` bytes of tool definitions.
    pub fn estimate(&self, messages: &[Message], fixed: usize) -> u64 {
        let (known, new) = self.split(bytes_of(messages) + fixed);
        known + (new as f64 / self.bytes_per_token) as u64
    }

    /// A prompt of `bytes` as the tokens Ollama counted for its start and the bytes after it.
    fn split(&self, bytes: usize) -> (u64, usize) {
        if self.last_tokens > 0 && bytes >= self.last_bytes {
            (self.last_tokens, bytes - self.last_bytes)
        } else {
            (0, bytes)
        }
    }

    /// Ollama refused `messages` (with `fixed` bytes of tool definitions) as longer than the
    /// window: from now on the estimate counts fewer bytes per token, so that this prompt would
    /// have been estimated at the window at least (never under one byte per token).
    pub fn refused(&mut self, messages: &[Message], fixed: usize) {
        let (known, new) = self.split(bytes_of(messages) + fixed);
        let room = u64::from(self.num_ctx).saturating_sub(known).max(1);
        let fits = new as f64 / room as f64;
        self.bytes_per_token = fits.max(1.0).min(self.bytes_per_token);
    }

    /// A call with `messages` (and `fixed` bytes of tool definitions) was answered.
    pub fn observed(&mut self, messages: &[Message], fixed: usize, reply: &ChatResponse) {
        self.last_tokens = reply.prompt_eval_count.saturating_add(reply.eval_count);
        // The reply goes into the next prompt as the assistant message: counted in its tokens.
        self.last_bytes = bytes_of(messages) + fixed + reply.message.content.len();
    }

    /// Compacts the oldest tool results before `keep_from` (the first message of the last
    /// round) when the conversation nears the window; returns how many were compacted now.
    pub fn fit(
        &mut self,
        messages: &mut [Message],
        keep_from: usize,
        fixed: usize,
    ) -> Result<usize, ContextFull> {
        let window = f64::from(self.num_ctx);
        let mut estimate = self.estimate(messages, fixed);
        if (estimate as f64) <= window * COMPACT_ABOVE {
            return Ok(0);
        }
        let mut now = 0;
        for i in 0..keep_from.min(messages.len()) {
            if (estimate as f64) <= window * COMPACT_TO {
                break;
            }
            let message = &mut messages[i];
            if message.role != Role::Tool || message.content.len() <= STUB_BYTES {
                continue;
            }
            compact(message);
            now += 1;
            // The prompt changed before its end: the last counts no longer describe it.
            self.last_tokens = 0;
            estimate = self.estimate(messages, fixed);
        }
        self.compacted += now;
        if (estimate as f64) > window * FULL_ABOVE {
            return Err(ContextFull {
                num_ctx: self.num_ctx,
                estimate,
            });
        }
        Ok(now)
    }

    /// Compacts every older tool result before `keep_from`, whatever the estimate says: Ollama
    /// refused the prompt as longer than the window, so the estimate fell short. Returns how
    /// many were compacted (0: nothing was left to compact).
    pub fn compact_all(&mut self, messages: &mut [Message], keep_from: usize) -> usize {
        let mut now = 0;
        for message in messages.iter_mut().take(keep_from) {
            if message.role != Role::Tool || message.content.len() <= STUB_BYTES {
                continue;
            }
            compact(message);
            now += 1;
        }
        if now > 0 {
            self.last_tokens = 0;
        }
        self.compacted += now;
        now
    }
}

/// Replaces a tool result by a note saying what it was.
fn compact(message: &mut Message) {
    let tool = message.tool_name.clone().unwrap_or_else(|| "a tool".into());
    let chars = message.content.chars().count();
    message.content = format!(
        "[compacted to fit the context window: {chars} characters of {tool} output; call it \
         again if you need them]"
    );
}

/// Tool results shorter than this are not worth compacting.
const STUB_BYTES: usize = 200;

fn bytes_of(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.function.name.len() + c.function.arguments.to_string().len())
                    .sum::<usize>()
                + 16
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(results: usize, each: usize) -> Vec<Message> {
        let mut messages = vec![Message::system("be brief"), Message::user("read them")];
        for n in 0..results {
            messages.push(Message::tool("read_file", format!("{n}").repeat(each)));
        }
        messages
    }

    #[test]
    fn a_conversation_that_fits_is_left_as_it_is() {
        let mut window = Window::new(100_000);
        let mut messages = conversation(3, 1000);
        let before = messages.clone();
        assert_eq!(window.fit(&mut messages, 4, 0).ok(), Some(0));
        assert_eq!(messages, before);
    }

    #[test]
    fn older_results_are_compacted_first_and_the_last_round_is_kept() {
        let mut window = Window::new(4000);
        let mut messages = conversation(6, 3000);
        // The last round is the last message.
        let compacted = window.fit(&mut messages, 7, 0).ok();
        assert_eq!(compacted, Some(5), "every older result, to get under half");
        assert!(messages[2].content.starts_with(
            "[compacted to fit the context window: 3000 characters of read_file output"
        ));
        assert_eq!(messages[7].content, "5".repeat(3000));
        assert_eq!(window.compacted, 5);
    }

    #[test]
    fn a_conversation_too_large_even_compacted_fails() {
        let mut window = Window::new(1000);
        let mut messages = conversation(1, 9000);
        let full = window.fit(&mut messages, 2, 0);
        assert!(
            matches!(full, Err(ContextFull { num_ctx: 1000, .. })),
            "{full:?}"
        );
    }

    #[test]
    fn a_refused_prompt_compacts_every_older_result() {
        let mut window = Window::new(100_000);
        let mut messages = conversation(3, 1000);
        // The last round is the last result: kept.
        assert_eq!(window.compact_all(&mut messages, 4), 2);
        assert!(messages[2].content.starts_with("[compacted"));
        assert!(messages[3].content.starts_with("[compacted"));
        assert_eq!(messages[4].content, "2".repeat(1000));
        assert_eq!(window.compact_all(&mut messages, 4), 0, "nothing left");
    }

    /// A prompt whose text the model's tokenizer cuts finer than three bytes a token: once
    /// Ollama refuses it, the estimate counts it as the window at least, and later ones alike.
    #[test]
    fn a_refused_prompt_makes_the_estimate_count_more_tokens() {
        let mut window = Window::new(6000);
        let japanese = vec![Message::user("日本語".repeat(1500))];
        let before = window.estimate(&japanese, 0);
        assert!(before < 6000, "{before}");
        window.refused(&japanese, 0);
        assert!(window.estimate(&japanese, 0) >= 6000);
        let longer = vec![Message::user("日本語".repeat(2000))];
        // A third longer: about a third over the window.
        assert!(window.estimate(&longer, 0) > 7900);
        // Never under a byte per token.
        let mut tiny = Window::new(1_000_000);
        tiny.refused(&[Message::user("x")], 0);
        assert_eq!(tiny.estimate(&[Message::user("x".repeat(300))], 0), 316);
    }

    #[test]
    fn ollamas_counts_are_used_once_known() {
        let mut window = Window::new(100_000);
        let messages = conversation(1, 30);
        let reply = ChatResponse {
            prompt_eval_count: 900,
            eval_count: 20,
            ..ChatResponse::default()
        };
        window.observed(&messages, 0, &reply);
        let mut more = messages.clone();
        more.push(Message::user("x".repeat(300)));
        assert_eq!(window.estimate(&more, 0), 920 + (300 + 16) / 3);
    }
}
