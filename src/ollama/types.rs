//! Wire types for the parts of the Ollama REST API that agent-mcp uses.
//!
//! Modelled on ollama/ollama `api/types.go`. Ollama marks most response fields `omitempty`, so
//! every field we read is optional or defaulted: a missing `eval_count` means zero, not an error.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who wrote a [`Message`]. Serialized lowercase, as Ollama expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One chat message, sent in [`ChatRequest::messages`] and returned in [`ChatResponse::message`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Plain standard base64, without a `data:` prefix; shared with the task (a request
    /// repeats the user's message with its images on every model call, without copying them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Arc<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a `tool` message: the name of the tool whose result this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            thinking: None,
            images: Vec::new(),
            tool_calls: Vec::new(),
            tool_name: None,
            tool_call_id: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A tool result, sent back as `{"role":"tool","tool_name":…,"content":…}`.
    pub fn tool(name: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_name: Some(name.into()),
            ..Self::new(Role::Tool, content)
        }
    }

    /// Attaches base64 images (only models with the `vision` capability accept them).
    pub fn with_images(mut self, images: Vec<Arc<String>>) -> Self {
        self.images = images;
        self
    }
}

/// A tool call requested by the model. Unlike OpenAI, `arguments` is a JSON object, not a string.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub function: ToolCallFunction,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallFunction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// Body of `POST /api/chat`. [`OllamaClient::chat`](super::OllamaClient::chat) always adds
/// `"stream": true`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    /// Tool definitions (`{"type":"function","function":{…}}`), passed through as JSON.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    /// `"json"` or a JSON schema object constraining the reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Value>,
    #[serde(skip_serializing_if = "ChatOptions::is_empty")]
    pub options: ChatOptions,
    /// A duration such as `"10m"`; `"0"` unloads the model after the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<String>,
    /// Thinking models think by default when this is absent; `true` (or a level) on a model
    /// without the `thinking` capability is a 400.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think: Option<Think>,
}

/// `think`: on or off, or a level (`low`, `medium`, `high`) for the models that take one
/// (gpt-oss; others treat a level as on).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Think {
    On(bool),
    Level(String),
}

impl crate::config::ThinkSetting {
    /// The `think` value sent to Ollama.
    pub(crate) fn to_wire(self) -> Think {
        use crate::config::ThinkSetting;
        match self {
            ThinkSetting::Off => Think::On(false),
            ThinkSetting::On => Think::On(true),
            ThinkSetting::Low => Think::Level("low".into()),
            ThinkSetting::Medium => Think::Level("medium".into()),
            ThinkSetting::High => Think::Level("high".into()),
        }
    }
}

impl std::fmt::Display for Think {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Think::On(on) => write!(f, "{on}"),
            Think::Level(level) => f.write_str(level),
        }
    }
}

impl ChatRequest {
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            ..Self::default()
        }
    }
}

/// The `options` map of a chat request (Modelfile parameters). `None` fields are not sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_predict: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
}

impl ChatOptions {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// The message part of one streamed chunk. Every field may be missing.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ChunkMessage {
    #[serde(default)]
    pub role: Option<Role>,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub thinking: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// One NDJSON line of a streamed `/api/chat` response. Metrics appear on the `done` chunk;
/// times are nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ChatChunk {
    pub model: Option<String>,
    pub created_at: Option<String>,
    pub message: Option<ChunkMessage>,
    pub done: bool,
    pub done_reason: Option<String>,
    pub total_duration: Option<u64>,
    pub load_duration: Option<u64>,
    pub prompt_eval_count: Option<u64>,
    pub prompt_eval_duration: Option<u64>,
    pub eval_count: Option<u64>,
    pub eval_duration: Option<u64>,
    /// Set when the server failed mid-stream (the HTTP status stays 200).
    pub error: Option<String>,
}

/// A whole chat reply, aggregated over every chunk of the stream.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatResponse {
    /// Role `assistant`; `content`, `thinking` and `tool_calls` collected from all chunks.
    pub message: Message,
    /// `stop` or `length` (the reply hit `num_predict` or the context limit).
    pub done_reason: Option<String>,
    /// Prompt tokens evaluated; 0 when Ollama omitted the field.
    pub prompt_eval_count: u64,
    /// Tokens generated; 0 when Ollama omitted the field.
    pub eval_count: u64,
    /// Wall time of the call on the server, in nanoseconds; 0 when omitted.
    pub total_duration: u64,
}

impl Default for ChatResponse {
    fn default() -> Self {
        Self {
            message: Message::assistant(""),
            done_reason: None,
            prompt_eval_count: 0,
            eval_count: 0,
            total_duration: 0,
        }
    }
}

/// Body of `POST /api/show`, reduced to what agent-mcp needs.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ShowResponse {
    /// A subset of `completion`, `tools`, `insert`, `vision`, `embedding`, `thinking`, …
    pub capabilities: Vec<String>,
    pub details: ModelDetails,
    /// Architecture metadata such as `llama.context_length`.
    pub model_info: Map<String, Value>,
}

impl ShowResponse {
    /// Whether the model lists capability `cap` (e.g. `"tools"`, `"vision"`).
    pub fn has(&self, cap: &str) -> bool {
        self.capabilities.iter().any(|c| c == cap)
    }

    /// The model's trained context length (`<arch>.context_length` in `model_info`).
    pub fn context_length(&self) -> Option<u64> {
        self.model_info
            .iter()
            .find(|(key, _)| key.ends_with(".context_length"))
            .and_then(|(_, value)| value.as_u64())
    }

    /// How many parameters the model has: `general.parameter_count` in `model_info`, else
    /// `details.parameter_size` (`"8.0B"`, `"270M"`); `None` when neither says.
    pub fn parameter_count(&self) -> Option<u64> {
        if let Some(count) = self
            .model_info
            .get("general.parameter_count")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
        {
            return Some(count);
        }
        let size = self.details.parameter_size.as_deref()?.trim();
        let unit = size.chars().next_back()?.to_ascii_uppercase();
        let scale = match unit {
            'B' => 1e9,
            'M' => 1e6,
            'K' => 1e3,
            'T' => 1e12,
            _ => return None,
        };
        let number: f64 = size[..size.len() - 1].trim().parse().ok()?;
        (number.is_finite() && number > 0.0).then_some((number * scale) as u64)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ModelDetails {
    pub parent_model: Option<String>,
    pub format: Option<String>,
    pub family: Option<String>,
    pub families: Option<Vec<String>>,
    pub parameter_size: Option<String>,
    pub quantization_level: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_wire_json_skips_empty_fields() {
        let mut req = ChatRequest::new(
            "m",
            vec![
                Message::system("be brief"),
                Message::tool("read_file", "42"),
            ],
        );
        req.options.num_ctx = Some(65536);
        let wire = serde_json::to_value(&req).expect("serializes");
        assert_eq!(
            wire,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "tool", "content": "42", "tool_name": "read_file"}
                ],
                "options": {"num_ctx": 65536}
            })
        );
    }

    #[test]
    fn the_parameter_count_comes_from_model_info_else_the_size_text() {
        let with = |info: Value, size: Value| -> ShowResponse {
            serde_json::from_value(json!({"model_info": info, "details": {"parameter_size": size}}))
                .expect("show decodes")
        };
        assert_eq!(
            with(
                json!({"general.parameter_count": 8_030_261_248u64}),
                json!("8.0B")
            )
            .parameter_count(),
            Some(8_030_261_248)
        );
        assert_eq!(
            with(json!({}), json!("1.5B")).parameter_count(),
            Some(1_500_000_000)
        );
        assert_eq!(
            with(json!({}), json!("270M")).parameter_count(),
            Some(270_000_000)
        );
        assert_eq!(
            with(json!({}), json!("120b")).parameter_count(),
            Some(120_000_000_000)
        );
        assert_eq!(with(json!({}), json!("big")).parameter_count(), None);
        assert_eq!(with(json!({}), json!("é")).parameter_count(), None);
        assert_eq!(with(json!({}), Value::Null).parameter_count(), None);
        let think = serde_json::to_value(Think::Level("high".into())).expect("serializes");
        assert_eq!(think, json!("high"));
        assert_eq!(
            serde_json::to_value(Think::On(false)).expect("serializes"),
            json!(false)
        );
    }

    #[test]
    fn chunk_with_everything_omitted_decodes() {
        let chunk: ChatChunk = serde_json::from_str("{}").expect("empty chunk decodes");
        assert_eq!(chunk, ChatChunk::default());
    }

    #[test]
    fn tool_call_round_trips() {
        let wire = json!({"id": "call_1", "function": {"index": 0, "name": "ls", "arguments": {"path": "."}}});
        let call: ToolCall = serde_json::from_value(wire.clone()).expect("tool call decodes");
        assert_eq!(
            call,
            ToolCall {
                id: Some("call_1".into()),
                function: ToolCallFunction {
                    index: Some(0),
                    name: "ls".into(),
                    arguments: json!({"path": "."}),
                },
            }
        );
        assert_eq!(serde_json::to_value(call).expect("serializes"), wire);
    }

    #[test]
    fn show_reports_capabilities_and_context_length() {
        let show: ShowResponse = serde_json::from_value(json!({
            "capabilities": ["completion", "tools"],
            "details": {"family": "llama"},
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072}
        }))
        .expect("show decodes");
        assert!(show.has("tools"));
        assert!(!show.has("vision"));
        assert_eq!(show.context_length(), Some(131072));
        assert_eq!(show.parameter_count(), None);
        assert_eq!(show.details.family.as_deref(), Some("llama"));
    }
}
