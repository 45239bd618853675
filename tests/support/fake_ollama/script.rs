//! What the fake Ollama says: its configuration, the scripted replies, and the exact NDJSON
//! lines a reply becomes on the wire.

use std::time::Duration;

use serde_json::{Value, json};

/// Fixed timestamp: tests compare output, so nothing here depends on the clock.
pub(super) const CREATED_AT: &str = "2026-08-21T12:00:00.000000000Z";

/// A scripted answer to one `/api/chat` request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Each string is one chunk's `content`, then a `done` chunk (`done_reason: "stop"`) with
    /// durations and the counts (a count of 0 is omitted, as Ollama's `omitempty` does).
    Text {
        chunks: Vec<String>,
        prompt_eval_count: u64,
        eval_count: u64,
    },
    /// One non-final chunk carrying all `tool_calls`, then a `done` chunk without them.
    ToolCalls {
        calls: Vec<(String, Value)>,
        prompt_eval_count: u64,
        eval_count: u64,
    },
    /// Status 200, these content chunks, then an `{"error": …}` line, then the stream ends.
    ErrorLine {
        after_chunks: Vec<String>,
        error: String,
    },
    /// A non-2xx status with body `{"error": …}`.
    HttpError { status: u16, error: String },
    /// 429 with body `{"error": …}` and, if given, `Retry-After: <seconds>`.
    RateLimited {
        retry_after: Option<u64>,
        error: String,
    },
    /// These content chunks, then a line that is not JSON, then the stream ends.
    Malformed { after_chunks: Vec<String> },
    /// Headers are sent, then nothing, ever (until the client hangs up).
    Hang,
    /// These content chunks, then the connection is cut mid-body (no `done`, no clean end of
    /// the chunked body), as when Ollama's runner dies.
    Cut { after_chunks: Vec<String> },
    /// Waits, then answers with the inner reply (headers included).
    Delay(Duration, Box<Reply>),
    /// These exact NDJSON lines (a `\n` is appended to each), then the stream ends.
    Raw(Vec<String>),
}

impl Reply {
    /// A text reply split into word-sized chunks whose concatenation is exactly `text`.
    pub fn text(text: &str, prompt_eval_count: u64, eval_count: u64) -> Reply {
        Reply::Text {
            chunks: text.split_inclusive(' ').map(str::to_owned).collect(),
            prompt_eval_count,
            eval_count,
        }
    }

    /// A reply calling one tool.
    pub fn tool_call(
        name: &str,
        arguments: Value,
        prompt_eval_count: u64,
        eval_count: u64,
    ) -> Reply {
        Reply::ToolCalls {
            calls: vec![(name.to_owned(), arguments)],
            prompt_eval_count,
            eval_count,
        }
    }

    /// A reply calling every tool of `calls`, in order.
    pub fn tool_calls(calls: &[(&str, Value)], prompt_eval_count: u64, eval_count: u64) -> Reply {
        Reply::ToolCalls {
            calls: calls
                .iter()
                .map(|(name, args)| ((*name).to_owned(), args.clone()))
                .collect(),
            prompt_eval_count,
            eval_count,
        }
    }

    pub fn http_error(status: u16, error: &str) -> Reply {
        Reply::HttpError {
            status,
            error: error.to_owned(),
        }
    }

    pub fn delayed(delay: Duration, reply: Reply) -> Reply {
        Reply::Delay(delay, Box::new(reply))
    }
}

#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// The one model the server has; `x` and `x:latest` both match it.
    pub model: String,
    pub capabilities: Vec<String>,
    /// Used when no scripted reply is queued.
    pub default_reply: Reply,
    /// Pause between streamed lines.
    pub chunk_delay: Duration,
    /// Reported by `/api/show` as `<arch>.context_length`.
    pub context_length: u64,
    /// Reported by `/api/show` as `details.parameter_size` and
    /// `model_info["general.parameter_count"]`.
    pub parameter_size: String,
    pub parameter_count: u64,
    /// Reported by `/api/version`.
    pub version: String,
    /// Asked first for every valid `/api/chat` request: a reply of its own for the requests it
    /// knows (e.g. by the task's request text), `None` for the queue and the default.
    pub responder: Option<Responder>,
}

/// Chooses a reply from a request body, or `None`.
type Choose = dyn Fn(&Value) -> Option<Reply> + Send + Sync;

/// A reply chosen from the request body (see [`FakeConfig::with_responder`]).
#[derive(Clone)]
pub struct Responder(pub std::sync::Arc<Choose>);

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder(..)")
    }
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            model: "test-model".to_owned(),
            capabilities: vec!["completion".to_owned(), "tools".to_owned()],
            default_reply: Reply::text("Hello from the fake model.", 12, 7),
            chunk_delay: Duration::ZERO,
            context_length: 131_072,
            parameter_size: "8.0B".to_owned(),
            parameter_count: 8_030_261_248,
            version: "0.12.0".to_owned(),
            responder: None,
        }
    }
}

impl FakeConfig {
    pub fn with_model(mut self, model: &str) -> Self {
        self.model = model.to_owned();
        self
    }

    pub fn with_capabilities(mut self, capabilities: &[&str]) -> Self {
        self.capabilities = capabilities.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    pub fn with_default_reply(mut self, reply: Reply) -> Self {
        self.default_reply = reply;
        self
    }

    /// A model of this size (`"1.5B"`, `1_500_000_000`), as `/api/show` reports it.
    pub fn with_parameters(mut self, size: &str, count: u64) -> Self {
        self.parameter_size = size.to_owned();
        self.parameter_count = count;
        self
    }

    pub fn with_context_length(mut self, length: u64) -> Self {
        self.context_length = length;
        self
    }

    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Replies chosen from the request body; several instances share one fake, so a test
    /// scripts each task by its request text rather than by arrival order.
    pub fn with_responder(
        mut self,
        responder: impl Fn(&Value) -> Option<Reply> + Send + Sync + 'static,
    ) -> Self {
        self.responder = Some(Responder(std::sync::Arc::new(responder)));
        self
    }

    pub(super) fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    pub(super) fn knows(&self, model: &str) -> bool {
        let base = |name: &str| name.strip_suffix(":latest").unwrap_or(name).to_owned();
        !model.is_empty() && base(model) == base(&self.model)
    }
}

/// The NDJSON lines (each ending in `\n`) for a streamed reply.
pub(super) fn stream_lines(model: &str, request_no: usize, reply: Reply) -> Vec<String> {
    let content = |text: &str| {
        json!({"model": model, "created_at": CREATED_AT,
               "message": {"role": "assistant", "content": text}, "done": false})
    };
    let lines: Vec<Value> = match reply {
        Reply::Text {
            chunks,
            prompt_eval_count,
            eval_count,
        } => {
            let mut lines: Vec<Value> = chunks.iter().map(|c| content(c)).collect();
            lines.push(done_chunk(model, prompt_eval_count, eval_count));
            lines
        }
        Reply::ToolCalls {
            calls,
            prompt_eval_count,
            eval_count,
        } => {
            let tool_calls: Vec<Value> = calls
                .into_iter()
                .enumerate()
                .map(|(index, (name, arguments))| {
                    json!({"id": format!("call_{request_no}_{index}"),
                           "function": {"index": index, "name": name, "arguments": arguments}})
                })
                .collect();
            let mut with_calls = content("");
            with_calls["message"]["tool_calls"] = Value::Array(tool_calls);
            vec![with_calls, done_chunk(model, prompt_eval_count, eval_count)]
        }
        Reply::ErrorLine {
            after_chunks,
            error,
        } => {
            let mut lines: Vec<Value> = after_chunks.iter().map(|c| content(c)).collect();
            lines.push(json!({ "error": error }));
            lines
        }
        Reply::Malformed { after_chunks } => {
            let mut lines: Vec<String> = after_chunks
                .iter()
                .map(|c| format!("{}\n", content(c)))
                .collect();
            lines.push("{\"model\": this is not json\n".to_owned());
            return lines;
        }
        Reply::Raw(lines) => return lines.into_iter().map(|l| l + "\n").collect(),
        Reply::Cut { after_chunks } => after_chunks.iter().map(|c| content(c)).collect(),
        Reply::HttpError { .. } | Reply::RateLimited { .. } | Reply::Hang | Reply::Delay(..) => {
            Vec::new()
        }
    };
    lines.into_iter().map(|l| format!("{l}\n")).collect()
}

fn done_chunk(model: &str, prompt_eval_count: u64, eval_count: u64) -> Value {
    let mut done = json!({
        "model": model, "created_at": CREATED_AT,
        "message": {"role": "assistant", "content": ""},
        "done": true, "done_reason": "stop",
        "total_duration": 1_500_000_000u64 + eval_count * 20_000_000,
        "load_duration": 50_000_000u64,
        "prompt_eval_duration": 100_000_000u64,
        "eval_duration": eval_count * 20_000_000,
    });
    // Ollama's Metrics fields are `omitempty`.
    if prompt_eval_count > 0 {
        done["prompt_eval_count"] = json!(prompt_eval_count);
    }
    if eval_count > 0 {
        done["eval_count"] = json!(eval_count);
    } else {
        done.as_object_mut().map(|d| d.remove("eval_duration"));
    }
    done
}

pub(super) fn details(parameter_size: &str) -> Value {
    json!({"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
           "parameter_size": parameter_size, "quantization_level": "Q4_K_M"})
}
