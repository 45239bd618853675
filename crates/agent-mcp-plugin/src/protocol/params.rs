//! [`Params`]: the `params` of the methods this server serves, typed once where a message
//! arrives ([`Params::parse`]), so the layers and the service read fields instead of looking
//! keys up in a JSON map.
//!
//! Each field is what the wire held, as far as the method's rules go without a context: a
//! name or id that is not a string is `None` (the handlers answer "missing" for it, as they
//! did for a missing key), and the values a handler checks itself with its own messages
//! (`arguments`, `task`, `notifications`, `inputResponses`) are kept as sent. The envelope's
//! `_meta` was read by the edge's era classification and is not kept.
//!
//! ```
//! use agent_mcp_plugin::protocol::{Method, Params};
//! use serde_json::json;
//!
//! let serde_json::Value::Object(map) = json!({"taskId": "t-1", "inputResponses": {"a": {}}})
//! else {
//!     unreachable!()
//! };
//! let params = Params::parse(&Method::TasksUpdate, map);
//! assert_eq!(params.task_id(), Some("t-1"));
//! let Params::TaskUpdate(update) = params else { panic!("tasks/update") };
//! assert_eq!(update.input_responses, Some(json!({"a": {}})));
//! ```

use serde_json::{Map, Value};

use super::method::Method;

/// The typed `params` of one request or notification.
#[derive(Clone, Debug, PartialEq)]
pub enum Params {
    /// `tools/call`.
    ToolsCall(ToolsCallParams),
    /// `tasks/get`, `tasks/cancel`, `tasks/result`: one task by id.
    Task(TaskParams),
    /// `tasks/update`.
    TaskUpdate(TaskUpdateParams),
    /// `subscriptions/listen`.
    Listen(ListenParams),
    /// `initialize` (2025 era).
    Initialize(InitializeParams),
    /// `logging/setLevel` (2025 era).
    SetLevel(SetLevelParams),
    /// Every other method: nothing of ours reads its params; kept whole for a layer that
    /// serves a method of its own.
    Other(Map<String, Value>),
}

/// `tools/call` params.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolsCallParams {
    /// `name`, the tool to call (`None` when absent or not a string).
    pub name: Option<String>,
    /// `arguments` as sent; moved into the typed call once it is parsed
    /// ([`McpRequest::parse_tool_call`](super::McpRequest::parse_tool_call)).
    pub arguments: Option<Value>,
    /// `task` (2025-11-25 task augmentation) as sent: the Tasks layer checks its shape.
    pub task: Option<Value>,
    /// `inputResponses` (2026-07-28 multi-round-trip requests): the answers to the
    /// `inputRequests` of an earlier `InputRequiredResult`, as sent.
    pub input_responses: Option<Value>,
    /// `requestState`, echoed from that `InputRequiredResult` (untrusted client text).
    pub request_state: Option<Value>,
}

/// The params of a method about one task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskParams {
    /// `taskId` (`None` when absent or not a string).
    pub task_id: Option<String>,
}

/// `tasks/update` params.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskUpdateParams {
    /// `taskId` (`None` when absent or not a string).
    pub task_id: Option<String>,
    /// `inputResponses` as sent: the answers to an `input_required` task's requests.
    pub input_responses: Option<Value>,
}

/// `subscriptions/listen` params.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListenParams {
    /// `notifications` as sent: the listen handler checks its shape with its own messages.
    pub notifications: Option<Value>,
}

/// `initialize` params.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitializeParams {
    /// `protocolVersion`, the version the client asks for (`None` when not a string).
    pub protocol_version: Option<String>,
}

/// `logging/setLevel` params.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetLevelParams {
    /// `level` (`None` when absent or not a string).
    pub level: Option<String>,
}

impl Default for Params {
    /// No params.
    fn default() -> Self {
        Params::Other(Map::new())
    }
}

/// `map[key]` moved out when it is a string.
fn take_string(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.remove(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

impl Params {
    /// Types the `params` of `method`, moving the values out of `map` (nothing is copied:
    /// `arguments` may hold 20 MiB of images).
    pub fn parse(method: &Method, mut map: Map<String, Value>) -> Params {
        match method {
            Method::ToolsCall => Params::ToolsCall(ToolsCallParams {
                name: take_string(&mut map, "name"),
                arguments: map.remove("arguments"),
                task: map.remove("task"),
                input_responses: map.remove("inputResponses"),
                request_state: map.remove("requestState"),
            }),
            Method::TasksGet | Method::TasksCancel | Method::TasksResult => {
                Params::Task(TaskParams {
                    task_id: take_string(&mut map, "taskId"),
                })
            }
            Method::TasksUpdate => Params::TaskUpdate(TaskUpdateParams {
                task_id: take_string(&mut map, "taskId"),
                input_responses: map.remove("inputResponses"),
            }),
            Method::SubscriptionsListen => Params::Listen(ListenParams {
                notifications: map.remove("notifications"),
            }),
            Method::Initialize => Params::Initialize(InitializeParams {
                protocol_version: take_string(&mut map, "protocolVersion"),
            }),
            Method::LoggingSetLevel => Params::SetLevel(SetLevelParams {
                level: take_string(&mut map, "level"),
            }),
            _ => Params::Other(map),
        }
    }

    /// The `taskId` of a method about one task.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Params::Task(TaskParams { task_id })
            | Params::TaskUpdate(TaskUpdateParams { task_id, .. }) => task_id.as_deref(),
            _ => None,
        }
    }

    /// The params of a method nothing of ours serves, whole (for a layer serving its own).
    pub fn other(&self) -> Option<&Map<String, Value>> {
        match self {
            Params::Other(map) => Some(map),
            _ => None,
        }
    }

    /// The `tools/call` params, if these are.
    pub fn tools_call(&self) -> Option<&ToolsCallParams> {
        match self {
            Params::ToolsCall(call) => Some(call),
            _ => None,
        }
    }

    /// [`Self::tools_call`], mutable.
    pub fn tools_call_mut(&mut self) -> Option<&mut ToolsCallParams> {
        match self {
            Params::ToolsCall(call) => Some(call),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(method: &str, params: Value) -> Params {
        let Value::Object(map) = params else {
            unreachable!("test params are objects")
        };
        Params::parse(&Method::from(method), map)
    }

    #[test]
    fn each_served_method_is_typed_and_non_strings_are_absent() {
        let cases = [
            (
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": "x"}, "task": {}, "_meta": {}}),
                Params::ToolsCall(ToolsCallParams {
                    name: Some("agent_run".into()),
                    arguments: Some(json!({"request": "x"})),
                    task: Some(json!({})),
                    ..Default::default()
                }),
            ),
            (
                "tools/call",
                json!({"name": 7}),
                Params::ToolsCall(ToolsCallParams::default()),
            ),
            (
                "tasks/get",
                json!({"taskId": "t"}),
                Params::Task(TaskParams {
                    task_id: Some("t".into()),
                }),
            ),
            (
                "tasks/cancel",
                json!({"taskId": 1}),
                Params::Task(TaskParams::default()),
            ),
            (
                "tasks/update",
                json!({"taskId": "t", "inputResponses": [1]}),
                Params::TaskUpdate(TaskUpdateParams {
                    task_id: Some("t".into()),
                    input_responses: Some(json!([1])),
                }),
            ),
            (
                "subscriptions/listen",
                json!({"notifications": {"taskIds": []}}),
                Params::Listen(ListenParams {
                    notifications: Some(json!({"taskIds": []})),
                }),
            ),
            (
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
                Params::Initialize(InitializeParams {
                    protocol_version: Some("2025-11-25".into()),
                }),
            ),
            (
                "logging/setLevel",
                json!({"level": "info"}),
                Params::SetLevel(SetLevelParams {
                    level: Some("info".into()),
                }),
            ),
            (
                "tools/list",
                json!({"cursor": "c"}),
                Params::Other(match json!({"cursor": "c"}) {
                    Value::Object(m) => m,
                    _ => unreachable!(),
                }),
            ),
        ];
        for (method, params, expected) in cases {
            assert_eq!(parse(method, params.clone()), expected, "{method} {params}");
        }
    }

    #[test]
    fn task_id_is_read_only_for_task_methods() {
        assert_eq!(
            parse("tasks/get", json!({"taskId": "a"})).task_id(),
            Some("a")
        );
        assert_eq!(
            parse("tasks/update", json!({"taskId": "b"})).task_id(),
            Some("b")
        );
        assert_eq!(parse("tools/list", json!({"taskId": "c"})).task_id(), None);
    }
}
