//! The compiled tool schemas and the contract's runtime rules, rendered as plain-words
//! `<field path>: <what is wrong>; <what to do>` lines.

use std::fmt;
use std::sync::OnceLock;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::{Location, LocationSegment};
use jsonschema::{Draft, JsonType, ValidationError, Validator};
use serde_json::Value;

use crate::plugin::tools::args::{self, quote, type_of};
use crate::plugin::{AGENT_RUN, AGENT_STATUS, agent_run_schema, agent_status_schema};

/// Most violation lines in one answer. A huge malformed array would otherwise turn a small
/// request into a huge response.
pub(crate) const MAX_LINES: usize = 20;

/// One of the two tools whose arguments this layer checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ToolRules {
    AgentRun,
    AgentStatus,
}

type Compiled = Result<Validator, String>;

impl ToolRules {
    pub(super) fn of(name: &str) -> Option<Self> {
        match name {
            AGENT_RUN => Some(Self::AgentRun),
            AGENT_STATUS => Some(Self::AgentStatus),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::AgentRun => AGENT_RUN,
            Self::AgentStatus => AGENT_STATUS,
        }
    }

    /// The published schema: the value `tools/list` returns.
    fn schema(self) -> &'static Value {
        match self {
            Self::AgentRun => agent_run_schema(),
            Self::AgentStatus => agent_status_schema(),
        }
    }

    /// The schema compiled once per process, with `format` (here: `uuid`) asserted.
    fn validator(self) -> &'static Compiled {
        static RUN: OnceLock<Compiled> = OnceLock::new();
        static STATUS: OnceLock<Compiled> = OnceLock::new();
        let cell = match self {
            Self::AgentRun => &RUN,
            Self::AgentStatus => &STATUS,
        };
        cell.get_or_init(|| {
            jsonschema::options()
                .with_draft(Draft::Draft202012)
                .should_validate_formats(true)
                .build(self.schema())
                .map_err(|e| e.to_string())
        })
    }

    /// Every violation in `args`, one line each, ordered by field path.
    pub(super) fn check(self, args: &Value) -> Vec<String> {
        let mut found: Vec<(FieldPath, String)> = Vec::new();
        match self.validator() {
            Ok(validator) => {
                if !validator.is_valid(args) {
                    // Enough to fill MAX_LINES and know there are more; the rest stay unread.
                    for error in validator.iter_errors(args).take(MAX_LINES + 1) {
                        self.describe(&error, &mut found);
                    }
                }
            }
            Err(e) => {
                tracing::error!(tool = self.name(), error = %e, "tool schema failed to compile");
                found.push((
                    FieldPath::default(),
                    "the server could not compile this tool's schema; report it to the server's operator"
                        .to_owned(),
                ));
            }
        }
        // With a valid shape the typed parse (`McpRequest::parse_tool_call`) applies the rules
        // the schema cannot say; only a refused request lists them here too, so one answer
        // names every problem.
        if self == Self::AgentRun && !found.is_empty() {
            runtime_rules(args, &mut found);
        }
        // Stable: two problems of one field keep the order they were found in.
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let more = found.len() > MAX_LINES;
        found.truncate(MAX_LINES);
        let mut lines: Vec<String> = found
            .into_iter()
            .map(|(path, problem)| format!("{path}: {problem}"))
            .collect();
        if more {
            lines.push(format!(
                "arguments: more problems than the {MAX_LINES} listed; fix these and call again"
            ));
        }
        lines
    }

    /// Turns one schema violation into lines a person (or model) can act on.
    fn describe(self, error: &ValidationError<'_>, found: &mut Vec<(FieldPath, String)>) {
        let path = FieldPath::from(error.instance_path());
        match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let allowed = self.allowed_properties(error.schema_path());
                for name in unexpected {
                    let problem = if allowed.is_empty() {
                        "unknown property; remove it".to_owned()
                    } else {
                        format!("unknown property; allowed: {}", allowed.join(", "))
                    };
                    found.push((path.join_key(name), problem));
                }
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                let path = path.join_key(name);
                let problem = format!("missing; {}", path.hint());
                found.push((path, problem));
            }
            ValidationErrorKind::Type { kind } => {
                let problem = format!(
                    "must be {}, got {}; {}",
                    expected_types(kind),
                    type_of(error.instance()),
                    path.hint()
                );
                found.push((path, problem));
            }
            ValidationErrorKind::Format { format } if format == "uuid" => {
                let problem = format!("{} is not a UUID; {}", quote(error.instance()), path.hint());
                found.push((path, problem));
            }
            ValidationErrorKind::Format { format } => {
                let problem = format!("{} is not a valid {format}", quote(error.instance()));
                found.push((path, problem));
            }
            _ => found.push((path, error.masked().to_string())),
        }
    }

    /// The property names the schema object around `additionalProperties` declares, sorted.
    fn allowed_properties(self, schema_path: &Location) -> Vec<String> {
        let pointer = schema_path.as_str();
        let parent = pointer
            .strip_suffix("/additionalProperties")
            .unwrap_or(pointer);
        let mut names: Vec<String> = self
            .schema()
            .pointer(parent)
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|props| props.keys().cloned().collect())
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// The rules the schema cannot say (`docs/contract.md` §2.4), in their one wording
/// ([`crate::plugin::tools::args`]): a blank `request`, `temperature` out of range.
fn runtime_rules(args: &Value, found: &mut Vec<(FieldPath, String)>) {
    if let Some(line) = args
        .get("request")
        .and_then(Value::as_str)
        .and_then(args::request_problem)
    {
        found.push((FieldPath::key("request"), strip_field(line)));
    }
    if let Some(Value::Number(t)) = args.get("temperature")
        && let Some(line) = args::temperature_problem(t)
    {
        found.push((FieldPath::key("temperature"), strip_field(line)));
    }
}

/// `field: problem` → `problem` (the path is rendered from the [`FieldPath`]).
fn strip_field(line: String) -> String {
    match line.split_once(": ") {
        Some((_, problem)) => problem.to_owned(),
        None => line,
    }
}

/// `a string or null`, from a schema's `type`.
fn expected_types(kind: &TypeKind) -> String {
    let mut names: Vec<&str> = match kind {
        TypeKind::Single(t) => vec![type_name(*t)],
        TypeKind::Multiple(set) => {
            let mut v: Vec<JsonType> = set.iter().collect();
            // "a string or null" reads better than "null or a string".
            v.sort_by_key(|t| *t == JsonType::Null);
            v.into_iter().map(type_name).collect()
        }
    };
    match names.pop() {
        Some(last) if names.is_empty() => last.to_owned(),
        Some(last) => format!("{} or {last}", names.join(", ")),
        None => "something else".to_owned(),
    }
}

fn type_name(t: JsonType) -> &'static str {
    match t {
        JsonType::Array => "an array",
        JsonType::Boolean => "true or false",
        JsonType::Integer => "an integer",
        JsonType::Null => "null",
        JsonType::Number => "a number",
        JsonType::Object => "an object",
        JsonType::String => "a string",
    }
}

/// Where in the arguments a problem is: `temperature`, `images[2].mime_type`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct FieldPath(Vec<Segment>);

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Segment {
    Key(String),
    Index(usize),
}

impl FieldPath {
    fn key(name: &str) -> Self {
        Self(vec![Segment::Key(name.to_owned())])
    }

    fn join_key(&self, name: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(name.to_owned()));
        Self(segments)
    }

    /// What to do about a problem at this path, in plain words.
    fn hint(&self) -> &'static str {
        match self.0.last() {
            Some(Segment::Key(k)) => args::hint(k),
            Some(Segment::Index(_)) => "send an object with mime_type and data_base64",
            None => "send the arguments as a JSON object",
        }
    }
}

impl From<&Location> for FieldPath {
    fn from(location: &Location) -> Self {
        Self(
            location
                .iter()
                .map(|segment| match segment {
                    LocationSegment::Property(p) => Segment::Key(p.into_owned()),
                    LocationSegment::Index(i) => Segment::Index(i),
                })
                .collect(),
        )
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("arguments");
        }
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(k) if i == 0 => f.write_str(k)?,
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(args: Value) -> Vec<String> {
        ToolRules::AgentRun.check(&args)
    }

    #[test]
    fn both_schemas_compile() {
        assert!(ToolRules::AgentRun.validator().is_ok());
        assert!(ToolRules::AgentStatus.validator().is_ok());
    }

    #[test]
    fn valid_arguments_have_no_problems() {
        for args in [
            json!({"request": "x"}),
            json!({"request": "x", "temperature": 0.0, "session_id": null, "images": null}),
            json!({"request": "x", "temperature": 2, "images": [{"mime_type": "image/png", "data_base64": "AA=="}]}),
            json!({"request": "x", "session_id": "2a8105cc-84f9-4d37-a5bd-e48e04654eb7"}),
        ] {
            assert_eq!(run(args.clone()), Vec::<String>::new(), "{args}");
        }
    }

    #[test]
    fn image_item_problems_name_the_element_and_field() {
        assert_eq!(
            run(json!({"request": "x", "images": [
                {"mime_type": "image/png", "data_base64": "AA=="},
                {"mime_type": "image/png"},
                {"mime_type": 3, "data_base64": "AA==", "size": 1}
            ]})),
            vec![
                "images[1].data_base64: missing; give the image bytes as standard base64",
                "images[2].mime_type: must be a string or null, got a number; use image/png, image/jpeg or image/webp",
                "images[2].size: unknown property; allowed: data_base64, mime_type",
            ]
        );
    }

    #[test]
    fn long_or_multiline_values_are_quoted_safely() {
        let problems = ToolRules::AgentStatus.check(&json!({"task_id": "a\nb".repeat(30)}));
        assert_eq!(
            problems,
            vec![format!(
                "task_id: \"{}a\"… is not a UUID; pass the task_id that agent_run returned",
                "a\\nb".repeat(13)
            )]
        );
    }

    #[test]
    fn a_flood_of_problems_is_cut_short() {
        let images: Vec<Value> = (0..1000).map(|_| json!(1)).collect();
        let problems = run(json!({"request": "x", "images": images}));
        assert_eq!(problems.len(), MAX_LINES + 1);
        assert_eq!(
            problems[0],
            "images[0]: must be an object or null, got a number; send an object with mime_type and data_base64"
        );
        assert_eq!(
            problems[MAX_LINES],
            "arguments: more problems than the 20 listed; fix these and call again"
        );
    }

    #[test]
    fn paths_render_like_code() {
        let path = FieldPath(vec![
            Segment::Key("images".into()),
            Segment::Index(2),
            Segment::Key("mime_type".into()),
        ]);
        assert_eq!(path.to_string(), "images[2].mime_type");
        assert_eq!(FieldPath::default().to_string(), "arguments");
    }
}
