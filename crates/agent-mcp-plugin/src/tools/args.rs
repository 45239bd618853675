//! The arguments of the two tools as typed values, and the one place their rules are written.
//!
//! A `tools/call` of `agent_run` or `agent_status` is parsed once, by whoever needs it first
//! (`McpRequest::parse_tool_call` in the protocol: the
//! validate layer in the full stack, the service when it runs bare), into a [`ToolCall`] that
//! travels on the request. Later layers and the service read the typed values; nothing parses
//! or checks the same arguments again.
//!
//! Every rule here has one wording, the contract's `Invalid arguments for tool "…":` header
//! followed by one `<field path>: <what is wrong>; <what to do>` line per problem
//! (the protocol's `invalid_args`). The validate layer quotes the same [`hint`]s for what the published
//! schema finds, and the images layer adds the rules that need its limits (count, sizes,
//! encoding, magic bytes) on the typed [`ImageArg`]s.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::{AGENT_RUN, AGENT_STATUS};

/// Most lines about image elements in one answer; a huge array of bad elements must not make
/// a huge answer.
pub const MAX_ELEMENT_LINES: usize = 20;

/// Longest stretch of a rejected value quoted back in a message.
const QUOTE_LIMIT: usize = 40;

/// A `tools/call` of one of our tools, its arguments parsed and checked.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolCall {
    Run(RunArgs),
    Status(StatusArgs),
}

impl ToolCall {
    /// The tool's name.
    pub fn tool(&self) -> &'static str {
        match self {
            ToolCall::Run(_) => AGENT_RUN,
            ToolCall::Status(_) => AGENT_STATUS,
        }
    }

    /// Parses the `arguments` object of a call of `tool`; `None` when `tool` is not one of
    /// ours. On failure, the problem lines (without the header, which the protocol's `invalid_args` adds).
    pub fn parse(
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Option<Result<ToolCall, Vec<String>>> {
        match tool {
            AGENT_RUN => Some(RunArgs::parse(arguments).map(ToolCall::Run)),
            AGENT_STATUS => Some(StatusArgs::parse(arguments).map(ToolCall::Status)),
            _ => None,
        }
    }
}

/// `agent_run` arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct RunArgs {
    /// The work request; never blank.
    pub request: String,
    /// The session to continue, if any.
    pub session_id: Option<Uuid>,
    /// From 0.0 through 2.0; `None` for the server default.
    pub temperature: Option<f64>,
    /// In request order; empty when the call has none.
    pub images: Vec<ImageArg>,
}

/// `agent_status` arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusArgs {
    pub task_id: Uuid,
    /// When given, the task must belong to this session.
    pub session_id: Option<Uuid>,
}

/// One image of an `agent_run` call: a supported type and a base64 string, not yet decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageArg {
    pub mime_type: ImageType,
    pub data_base64: String,
    /// Filled by the images layer once the image passed every rule: decoded exactly once
    /// there, so the store keys it by this hash instead of decoding it again.
    pub checked: Option<CheckedImage>,
}

/// What the images layer learnt decoding an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedImage {
    /// Size of the decoded image in bytes.
    pub decoded_len: usize,
    /// SHA-256 of the decoded image.
    pub sha256: [u8; 32],
}

/// The image types the contract accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageType {
    Png,
    Jpeg,
    Webp,
}

impl ImageType {
    pub fn from_mime(mime: &str) -> Option<Self> {
        match mime {
            "image/png" => Some(Self::Png),
            "image/jpeg" => Some(Self::Jpeg),
            "image/webp" => Some(Self::Webp),
            _ => None,
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Webp => "image/webp",
        }
    }

    /// What the first bytes of decoded data say it is.
    pub fn sniff(head: &[u8]) -> Option<Self> {
        if head.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
            Some(Self::Webp)
        } else {
            None
        }
    }

    /// `PNG`, `JPEG`, `WebP`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Png => "PNG",
            Self::Jpeg => "JPEG",
            Self::Webp => "WebP",
        }
    }
}

/// What to do about a problem with the argument `field`, in plain words.
pub fn hint(field: &str) -> &'static str {
    match field {
        "request" => "describe the work to do as a non-empty string",
        "session_id" => "pass the session_id that agent_run returned, or omit it",
        "temperature" => "use a number from 0.0 through 2.0, or null for the server default",
        "images" => "send an array of {mime_type, data_base64} objects, or omit it",
        "mime_type" => "use image/png, image/jpeg or image/webp",
        "data_base64" => "give the image bytes as standard base64",
        "task_id" => "pass the task_id that agent_run returned",
        _ => "see the tool's input schema in tools/list",
    }
}

/// The rule on `request` the schema cannot say.
pub fn request_problem(request: &str) -> Option<String> {
    request
        .trim()
        .is_empty()
        .then(|| "request: must not be empty or whitespace-only".to_owned())
}

/// The rule on `temperature` the schema cannot say (`t` as the client wrote it).
pub fn temperature_problem(t: &serde_json::Number) -> Option<String> {
    (!t.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t)))
        .then(|| format!("temperature: {t} is out of range; {}", hint("temperature")))
}

/// `"text" is not a UUID`, for `field`.
pub fn not_a_uuid(field: &str, text: &Value) -> String {
    format!("{field}: {} is not a UUID; {}", quote(text), hint(field))
}

/// `a string`, `null`, … : how a value's JSON type is named in messages.
pub fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value quoted back as JSON (so a newline in it cannot break the one-line-per-problem
/// format), cut short when long.
pub fn quote(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > QUOTE_LIMIT => {
            let cut: String = s.chars().take(QUOTE_LIMIT).collect();
            format!("{}…", Value::String(cut))
        }
        other => other.to_string(),
    }
}

/// Problem lines keyed by top-level field, so the answer lists them in field order (and the
/// lines of one field in the order found).
#[derive(Default)]
struct Problems(Vec<(String, String)>);

impl Problems {
    fn push(&mut self, field: &str, line: String) {
        self.0.push((field.to_owned(), line));
    }

    fn wrong_type(&mut self, field: &str, expected: &str, got: &Value) {
        self.push(
            field,
            format!(
                "{field}: must be {expected}, got {}; {}",
                type_of(got),
                hint(field)
            ),
        );
    }

    fn unknown(&mut self, field: &str, allowed: &str) {
        self.push(
            field,
            format!("{field}: unknown property; allowed: {allowed}"),
        );
    }

    fn missing(&mut self, field: &str) {
        self.push(field, format!("{field}: missing; {}", hint(field)));
    }

    fn finish<T>(mut self, value: impl FnOnce() -> T) -> Result<T, Vec<String>> {
        if self.0.is_empty() {
            return Ok(value());
        }
        self.0.sort_by(|a, b| a.0.cmp(&b.0));
        Err(self.0.into_iter().map(|(_, line)| line).collect())
    }
}

/// An optional UUID field (`null` or absent is `None`).
fn optional_uuid(field: &str, value: Option<Value>, problems: &mut Problems) -> Option<Uuid> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => match parse_uuid(&text) {
            Some(id) => Some(id),
            None => {
                problems.push(field, not_a_uuid(field, &Value::String(text)));
                None
            }
        },
        Some(other) => {
            problems.wrong_type(field, "a string or null", &other);
            None
        }
    }
}

/// A UUID in the hyphenated form the schema's `uuid` format means (`Uuid::parse_str` alone
/// would also take braced and URN forms).
pub fn parse_uuid(text: &str) -> Option<Uuid> {
    if text.len() != 36 {
        return None;
    }
    Uuid::parse_str(text).ok()
}

impl RunArgs {
    const ALLOWED: &'static str = "images, request, session_id, temperature";

    fn parse(mut args: Map<String, Value>) -> Result<RunArgs, Vec<String>> {
        let mut problems = Problems::default();
        let request = match args.remove("request") {
            Some(Value::String(request)) => {
                if let Some(line) = request_problem(&request) {
                    problems.push("request", line);
                }
                request
            }
            Some(other) => {
                problems.wrong_type("request", "a string", &other);
                String::new()
            }
            None => {
                problems.missing("request");
                String::new()
            }
        };
        let session_id = optional_uuid("session_id", args.remove("session_id"), &mut problems);
        let temperature = match args.remove("temperature") {
            None | Some(Value::Null) => None,
            Some(Value::Number(t)) => {
                if let Some(line) = temperature_problem(&t) {
                    problems.push("temperature", line);
                }
                t.as_f64()
            }
            Some(other) => {
                problems.wrong_type("temperature", "a number or null", &other);
                None
            }
        };
        let images = match args.remove("images") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => images(items, &mut problems),
            Some(other) => {
                problems.wrong_type("images", "an array or null", &other);
                Vec::new()
            }
        };
        for field in args.keys() {
            problems.unknown(field, Self::ALLOWED);
        }
        problems.finish(|| RunArgs {
            request,
            session_id,
            temperature,
            images,
        })
    }
}

impl StatusArgs {
    const ALLOWED: &'static str = "session_id, task_id";

    fn parse(mut args: Map<String, Value>) -> Result<StatusArgs, Vec<String>> {
        let mut problems = Problems::default();
        let task_id = match args.remove("task_id") {
            Some(Value::String(text)) => match parse_uuid(&text) {
                Some(id) => Some(id),
                None => {
                    problems.push("task_id", not_a_uuid("task_id", &Value::String(text)));
                    None
                }
            },
            Some(other) => {
                problems.wrong_type("task_id", "a string", &other);
                None
            }
            None => {
                problems.missing("task_id");
                None
            }
        };
        let session_id = optional_uuid("session_id", args.remove("session_id"), &mut problems);
        for field in args.keys() {
            problems.unknown(field, Self::ALLOWED);
        }
        problems.finish(|| StatusArgs {
            task_id: task_id.unwrap_or_default(),
            session_id,
        })
    }
}

/// The shape of each image element: an object with a supported `mime_type` and a string
/// `data_base64` (the published schema lets both be `null`; the contract does not).
fn images(items: Vec<Value>, problems: &mut Problems) -> Vec<ImageArg> {
    let mut out = Vec::with_capacity(items.len());
    let mut lines = 0usize;
    let mut note = |line: String| {
        lines += 1;
        if lines <= MAX_ELEMENT_LINES {
            problems.push("images", line);
        }
    };
    for (index, item) in items.into_iter().enumerate() {
        let Value::Object(mut object) = item else {
            let what = if item.is_null() { ", not null" } else { "" };
            note(format!(
                "images[{index}]: must be an object with mime_type and data_base64{what}; send one object per image"
            ));
            continue;
        };
        let mime_type = match object.remove("mime_type") {
            Some(Value::String(mime)) => match ImageType::from_mime(&mime) {
                Some(kind) => Some(kind),
                None => {
                    note(format!(
                        "images[{index}].mime_type: {} is not supported; {}",
                        Value::String(mime.chars().take(QUOTE_LIMIT).collect()),
                        hint("mime_type")
                    ));
                    None
                }
            },
            other => {
                note(format!(
                    "images[{index}].mime_type: {}; {}",
                    not_a_string(other.as_ref()),
                    hint("mime_type")
                ));
                None
            }
        };
        let data_base64 = match object.remove("data_base64") {
            Some(Value::String(data)) => Some(data),
            other => {
                note(format!(
                    "images[{index}].data_base64: {}; {}",
                    not_a_string(other.as_ref()),
                    hint("data_base64")
                ));
                None
            }
        };
        for field in object.keys() {
            note(format!(
                "images[{index}].{field}: unknown property; allowed: data_base64, mime_type"
            ));
        }
        if let (Some(mime_type), Some(data_base64)) = (mime_type, data_base64) {
            out.push(ImageArg {
                mime_type,
                data_base64,
                checked: None,
            });
        }
    }
    if lines > MAX_ELEMENT_LINES {
        problems.push(
            "images",
            format!(
                "images: {} more problems not listed; fix these and call again",
                lines - MAX_ELEMENT_LINES
            ),
        );
    }
    out
}

fn not_a_string(value: Option<&Value>) -> &'static str {
    match value {
        None => "missing",
        Some(Value::Null) => "must not be null",
        Some(_) => "must be a string",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(tool: &str, args: Value) -> Result<ToolCall, Vec<String>> {
        let Value::Object(args) = args else {
            panic!("test arguments must be an object")
        };
        ToolCall::parse(tool, args).expect("one of our tools")
    }

    #[test]
    fn a_full_agent_run_becomes_typed_values() {
        let id = Uuid::new_v4();
        let got = parse(
            AGENT_RUN,
            json!({"request": "fix it", "session_id": id.to_string(), "temperature": 0.5,
                   "images": [{"mime_type": "image/png", "data_base64": "AA=="}]}),
        );
        assert_eq!(
            got,
            Ok(ToolCall::Run(RunArgs {
                request: "fix it".into(),
                session_id: Some(id),
                temperature: Some(0.5),
                images: vec![ImageArg {
                    mime_type: ImageType::Png,
                    data_base64: "AA==".into(),
                    checked: None,
                }],
            }))
        );
        assert_eq!(
            parse(
                AGENT_RUN,
                json!({"request": "x", "session_id": null, "images": null})
            ),
            Ok(ToolCall::Run(RunArgs {
                request: "x".into(),
                session_id: None,
                temperature: None,
                images: vec![],
            }))
        );
    }

    #[test]
    fn every_problem_is_listed_once_in_field_order() {
        let got = parse(
            AGENT_RUN,
            json!({"temperature": 2.5, "request": "  ", "colour": "red",
                   "images": [null, {"mime_type": "image/gif", "data_base64": null}]}),
        );
        assert_eq!(
            got,
            Err(vec![
                "colour: unknown property; allowed: images, request, session_id, temperature"
                    .to_owned(),
                "images[0]: must be an object with mime_type and data_base64, not null; send one object per image".to_owned(),
                "images[1].mime_type: \"image/gif\" is not supported; use image/png, image/jpeg or image/webp".to_owned(),
                "images[1].data_base64: must not be null; give the image bytes as standard base64".to_owned(),
                "request: must not be empty or whitespace-only".to_owned(),
                "temperature: 2.5 is out of range; use a number from 0.0 through 2.0, or null for the server default".to_owned(),
            ])
        );
    }

    #[test]
    fn status_ids_must_be_uuids() {
        let id = Uuid::new_v4();
        assert_eq!(
            parse(AGENT_STATUS, json!({"task_id": id.to_string()})),
            Ok(ToolCall::Status(StatusArgs {
                task_id: id,
                session_id: None
            }))
        );
        assert_eq!(
            parse(AGENT_STATUS, json!({"task_id": "nope", "session_id": 3})),
            Err(vec![
                "session_id: must be a string or null, got a number; pass the session_id that agent_run returned, or omit it".to_owned(),
                "task_id: \"nope\" is not a UUID; pass the task_id that agent_run returned".to_owned(),
            ])
        );
        assert_eq!(
            parse(AGENT_STATUS, json!({})),
            Err(vec![
                "task_id: missing; pass the task_id that agent_run returned".to_owned()
            ])
        );
        assert!(ToolCall::parse("other", Map::new()).is_none());
    }

    #[test]
    fn a_flood_of_bad_images_is_cut_short() {
        let images: Vec<Value> = (0..100).map(|_| Value::Null).collect();
        let Err(lines) = parse(AGENT_RUN, json!({"request": "x", "images": images})) else {
            panic!("null images must be refused")
        };
        assert_eq!(lines.len(), MAX_ELEMENT_LINES + 1);
        assert_eq!(
            lines.last().map(String::as_str),
            Some("images: 80 more problems not listed; fix these and call again")
        );
    }

    #[test]
    fn image_types_sniff_their_magic() {
        assert_eq!(
            ImageType::sniff(b"\x89PNG\r\n\x1a\nrest"),
            Some(ImageType::Png)
        );
        assert_eq!(
            ImageType::sniff(&[0xFF, 0xD8, 0xFF, 0]),
            Some(ImageType::Jpeg)
        );
        assert_eq!(
            ImageType::sniff(b"RIFF\0\0\0\0WEBPVP8 "),
            Some(ImageType::Webp)
        );
        assert_eq!(ImageType::sniff(b"GIF89a"), None);
        for t in [ImageType::Png, ImageType::Jpeg, ImageType::Webp] {
            assert_eq!(ImageType::from_mime(t.mime()), Some(t));
        }
    }
}
