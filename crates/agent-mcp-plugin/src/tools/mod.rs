//! The two published tools: `agent_run` and `agent_status`.
//!
//! Input schemas are exactly those of the contract (`docs/contract.md` §2.2 and §3.2) and are
//! pinned by an exact-JSON test below. The same values are what the validation layer compiles, so
//! the published schema and the enforced schema cannot drift apart.

use std::sync::OnceLock;

pub mod args;
mod limits;

pub use args::{CheckedImage, ImageArg, ImageType, RunArgs, StatusArgs, ToolCall};
pub use limits::ImageLimits;

use serde_json::{Value, json};

pub const AGENT_RUN: &str = "agent_run";
pub const AGENT_STATUS: &str = "agent_status";

/// The input schema of `agent_run` (`docs/contract.md` §2.2).
pub fn agent_run_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
          "type": "object",
          "properties": {
            "request": {
              "description": "Non-empty natural-language work request.",
              "type": "string"
            },
            "session_id": {
              "description": "Existing session UUID, or omit to create a session.",
              "type": ["string", "null"],
              "format": "uuid",
              "default": null
            },
            "temperature": {
              "description": "Task-scoped temperature from 0.0 through 2.0.",
              "type": ["number", "null"],
              "default": null
            },
            "images": {
              "description": "Optional PNG, JPEG, or WebP images.",
              "type": ["array", "null"],
              "items": {
                "type": ["object", "null"],
                "properties": {
                  "mime_type": { "type": ["string", "null"] },
                  "data_base64": { "type": ["string", "null"] }
                },
                "required": ["mime_type", "data_base64"],
                "additionalProperties": false
              },
              "default": null
            }
          },
          "required": ["request"],
          "additionalProperties": false
        })
    })
}

/// The input schema of `agent_status` (`docs/contract.md` §3.2).
pub fn agent_status_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
          "type": "object",
          "properties": {
            "task_id": {
              "description": "Task UUID returned by agent_run.",
              "type": "string",
              "format": "uuid"
            },
            "session_id": {
              "description": "Optional session UUID used to verify task ownership.",
              "type": ["string", "null"],
              "format": "uuid",
              "default": null
            }
          },
          "required": ["task_id"],
          "additionalProperties": false
        })
    })
}

/// The input schema of a tool by name.
pub fn input_schema(name: &str) -> Option<&'static Value> {
    match name {
        AGENT_RUN => Some(agent_run_schema()),
        AGENT_STATUS => Some(agent_status_schema()),
        _ => None,
    }
}

/// The `Tool` objects `tools/list` returns, in a fixed order. Era-independent; the legacy
/// `execution.taskSupport` field is added by whoever serves legacy tasks.
pub fn tool_definitions() -> &'static [Value] {
    static TOOLS: OnceLock<Vec<Value>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        vec![
            json!({
                "name": AGENT_RUN,
                "description": "Queue a natural-language work request for the local Ollama-backed agent, \
                    which may read and edit files and run commands in its workspace. Returns a task_id at once; \
                    poll agent_status with it until status is completed, failed or cancelled. \
                    Pass session_id to continue an earlier conversation.",
                "inputSchema": agent_run_schema(),
                "annotations": {
                    "readOnlyHint": false,
                    "destructiveHint": true,
                    "openWorldHint": false
                }
            }),
            json!({
                "name": AGENT_STATUS,
                "description": "Report an agent task's state (queued, planning, running, completed, failed, \
                    cancelled), progress, token usage and, once finished, its result. Use the task_id \
                    returned by agent_run.",
                "inputSchema": agent_status_schema(),
                "annotations": {
                    "readOnlyHint": true,
                    "destructiveHint": false,
                    "openWorldHint": false
                }
            }),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the published tools: names, schemas (byte-equal as JSON values to docs/contract.md),
    /// annotations. A change here is a change to the public contract.
    #[test]
    fn published_tools_are_pinned() {
        let expected = json!([
          {
            "name": "agent_run",
            "description": "Queue a natural-language work request for the local Ollama-backed agent, which may read and edit files and run commands in its workspace. Returns a task_id at once; poll agent_status with it until status is completed, failed or cancelled. Pass session_id to continue an earlier conversation.",
            "inputSchema": {
              "type": "object",
              "properties": {
                "request": {"description": "Non-empty natural-language work request.", "type": "string"},
                "session_id": {"description": "Existing session UUID, or omit to create a session.",
                               "type": ["string", "null"], "format": "uuid", "default": null},
                "temperature": {"description": "Task-scoped temperature from 0.0 through 2.0.",
                                "type": ["number", "null"], "default": null},
                "images": {
                  "description": "Optional PNG, JPEG, or WebP images.",
                  "type": ["array", "null"],
                  "items": {
                    "type": ["object", "null"],
                    "properties": {"mime_type": {"type": ["string", "null"]},
                                   "data_base64": {"type": ["string", "null"]}},
                    "required": ["mime_type", "data_base64"],
                    "additionalProperties": false
                  },
                  "default": null
                }
              },
              "required": ["request"],
              "additionalProperties": false
            },
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}
          },
          {
            "name": "agent_status",
            "description": "Report an agent task's state (queued, planning, running, completed, failed, cancelled), progress, token usage and, once finished, its result. Use the task_id returned by agent_run.",
            "inputSchema": {
              "type": "object",
              "properties": {
                "task_id": {"description": "Task UUID returned by agent_run.", "type": "string", "format": "uuid"},
                "session_id": {"description": "Optional session UUID used to verify task ownership.",
                               "type": ["string", "null"], "format": "uuid", "default": null}
              },
              "required": ["task_id"],
              "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}
          }
        ]);
        assert_eq!(Value::Array(tool_definitions().to_vec()), expected);
    }
}
