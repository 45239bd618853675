//! One audit line: what is recorded about a request, and how it is summarised without
//! secrets (no token, no image bytes, no request text unless asked for).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::SystemTime;

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::plugin::parse_uuid;
use crate::plugin::{Outcome, RequestId};

/// What the arguments of a `tools/call` looked like, without their content.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ArgsSummary {
    /// Length of `request` in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<usize>,
    /// Lowercase hex SHA-256 of `request`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_count: Option<usize>,
    /// Decoded bytes of all images, computed from the base64 length (nothing is decoded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_bytes: Option<u64>,
    /// The full request text, only with `audit.include_request`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

impl ArgsSummary {
    /// Summarises `arguments`; `None` when there is nothing to summarise.
    pub fn of(arguments: &Map<String, Value>, include_request: bool) -> Option<ArgsSummary> {
        let mut summary = ArgsSummary::default();
        if let Some(request) = arguments.get("request").and_then(Value::as_str) {
            summary.request_bytes = Some(request.len());
            summary.request_sha256 = Some(lower_hex(&Sha256::digest(request.as_bytes())));
            if include_request {
                summary.request = Some(capped(request, MAX_REQUEST_TEXT_BYTES).into_owned());
            }
        }
        summary.temperature = arguments.get("temperature").and_then(Value::as_f64);
        if let Some(images) = arguments.get("images").and_then(Value::as_array) {
            summary.image_count = Some(images.len());
            let total = images
                .iter()
                .filter_map(|i| i.get("data_base64").and_then(Value::as_str))
                .map(base64_decoded_len)
                .fold(0u64, u64::saturating_add);
            summary.image_bytes = Some(total);
        }
        (summary != ArgsSummary::default()).then_some(summary)
    }
}

/// Most answers recorded from one `tasks/update` (a client chooses how many it sends).
const MAX_ANSWERS: usize = 16;

/// The answers of a `tasks/update` as recorded: each key (capped and scrubbed: client text)
/// with its action, one of the four words; `None` when there are none.
pub fn answers_field(responses: Option<&Value>) -> Option<Box<Map<String, Value>>> {
    let responses = responses?.as_object()?;
    let answers: Map<String, Value> = responses
        .iter()
        .take(MAX_ANSWERS)
        .map(|(key, answer)| {
            let action = answer
                .get("action")
                .and_then(Value::as_str)
                .filter(|a| matches!(*a, "accept" | "decline" | "cancel"))
                .unwrap_or("invalid");
            (
                scrub_message(&capped(key, MAX_NAME_BYTES)),
                Value::from(action),
            )
        })
        .collect();
    (!answers.is_empty()).then(|| Box::new(answers))
}

/// The decoded size of standard base64 text, from its length and padding alone.
pub fn base64_decoded_len(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let padding = bytes
        .iter()
        .rev()
        .take_while(|&&b| b == b'=')
        .count()
        .min(2);
    let len = bytes.len() as u64;
    (len * 3 / 4).saturating_sub(padding as u64)
}

/// `bytes` as lowercase hex digits.
fn lower_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A UUID argument or result field; anything else is not recorded (it could be arbitrary
/// client text).
pub fn uuid_field(value: Option<&str>) -> Option<Uuid> {
    value.and_then(parse_uuid)
}

/// A tool name as recorded: one of ours as is (no copy), anything else capped and scrubbed
/// like an error message (it is client text).
pub fn name_field(name: &str) -> Cow<'static, str> {
    Cow::Borrowed(match name {
        "agent_run" => "agent_run",
        "agent_status" => "agent_status",
        _ => return Cow::Owned(scrub_message(&capped(name, MAX_NAME_BYTES))),
    })
}

/// Most of a request text recorded with `audit.include_request`, in bytes (the default
/// `mcp.max_request_bytes`: a longer text is refused anyway unless the operator raised it).
pub const MAX_REQUEST_TEXT_BYTES: usize = 256 * 1024;
/// Longest error message recorded, in bytes.
const MAX_MESSAGE_BYTES: usize = 1000;
/// Longest method or tool name, identity, or client name or version recorded, in bytes
/// (client text: a name longer than this is not one of ours).
pub const MAX_NAME_BYTES: usize = 128;
/// Longest JSON-RPC string id recorded as it came, in bytes; a longer one is recorded as its
/// first 64 bytes and its length.
pub const MAX_ID_BYTES: usize = 128;
const ID_KEPT_BYTES: usize = 64;

/// `text` cut to at most `max` bytes at a character boundary, with `…` when cut.
pub fn capped(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!("{}…", &text[..cut]))
}

/// A JSON-RPC id as recorded: a number as it is, a string of at most [`MAX_ID_BYTES`] as it
/// is, a longer one as its start and its length (a client chooses its ids; 25 MiB of id must
/// not become 25 MiB of audit line).
pub fn id_field(id: &RequestId) -> RequestId {
    match id {
        RequestId::String(s) if s.len() > MAX_ID_BYTES => {
            RequestId::String(format!("{}[{} bytes]", capped(s, ID_KEPT_BYTES), s.len()))
        }
        other => other.clone(),
    }
}

/// `clientInfo`'s name and version as recorded (each capped), if it names either.
pub fn client_field(info: Option<&Value>) -> Option<ClientSummary> {
    let info = info?.as_object()?;
    let field = |key: &str| {
        info.get(key)
            .and_then(Value::as_str)
            .map(|s| scrub_message(&capped(s, MAX_NAME_BYTES)))
    };
    let summary = ClientSummary {
        name: field("name"),
        version: field("version"),
    };
    (summary.name.is_some() || summary.version.is_some()).then_some(summary)
}

/// The client's own name for itself (`_meta` `clientInfo`), for telling clients apart.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClientSummary {
    pub name: Option<String>,
    pub version: Option<String>,
}
/// Runs of base64-alphabet characters at least this long are replaced: an error message may
/// quote client input (serde does), and that input may be image data.
const MAX_OPAQUE_RUN: usize = 40;

/// An error message made safe to record: URL passwords and long opaque runs redacted, length
/// capped.
pub fn scrub_message(text: &str) -> String {
    let text = &*crate::plugin::redact_urls_in(text);
    let mut out = String::with_capacity(text.len().min(MAX_MESSAGE_BYTES + 16));
    let mut run_start = None;
    let is_opaque = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_');
    let flush_run = |out: &mut String, run: &str| {
        if run.len() >= MAX_OPAQUE_RUN {
            out.push_str(&format!("[{} chars redacted]", run.len()));
        } else {
            out.push_str(run);
        }
    };
    for (i, c) in text.char_indices() {
        if is_opaque(c) {
            run_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = run_start.take() {
            flush_run(&mut out, &text[start..i]);
        }
        out.push(c);
    }
    if let Some(start) = run_start {
        flush_run(&mut out, &text[start..]);
    }
    if out.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// One line of the audit log.
#[derive(Clone, Debug, Serialize)]
pub struct AuditRecord {
    /// When the request arrived, RFC 3339 UTC with microseconds.
    #[serde(serialize_with = "rfc3339")]
    pub time: SystemTime,
    pub id: Option<RequestId>,
    /// `modern` (2026-07-28) or `legacy` (2025 revisions).
    pub era: &'static str,
    pub version: &'static str,
    /// `http`, `stdio` or `in-process`.
    pub transport: &'static str,
    /// The HTTP peer address.
    pub peer: Option<SocketAddr>,
    /// Who called (a token name, `stdio`), or `None` for an anonymous or refused caller.
    pub identity: Option<String>,
    /// The client's `clientInfo` name and version, when it sent them.
    pub client: Option<ClientSummary>,
    pub method: Cow<'static, str>,
    pub tool: Option<Cow<'static, str>>,
    pub task_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
    pub outcome: Outcome,
    pub error_code: Option<i64>,
    pub error_message: Option<String>,
    pub duration_us: u64,
    pub args: Option<Box<ArgsSummary>>,
    /// Refusals of this peer left out of the log since its previous line (see
    /// `throttle.rs`); only on refusal lines, and only when some were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<u64>,
    /// On a `tasks/update` line (and a `tools/call` carrying `inputResponses`): each input
    /// request key answered and the answer's action
    /// (`accept`, `decline`, `cancel`, or `invalid`) — who decided an approval is this line's
    /// `identity`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answers: Option<Box<Map<String, Value>>>,
}

fn rfc3339<S: Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_micros(*time))
}

impl AuditRecord {
    /// Appends this record as one JSON object (no newline) to `out`: the same text
    /// `serde_json::to_writer` makes of it, written directly. Keys and the fixed values
    /// (era, transport, outcome, known names) need no escaping; only client-influenced
    /// strings go through serde_json's escaper.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        use std::io::Write as _;
        out.extend_from_slice(b"{\"time\":\"");
        rfc3339_micros(out, self.time);
        out.extend_from_slice(b"\",\"id\":");
        match &self.id {
            None => out.extend_from_slice(b"null"),
            Some(RequestId::Number(n)) => json_value(out, n),
            Some(RequestId::String(s)) => json_value(out, s),
        }
        out.extend_from_slice(b",\"era\":");
        plain_str(out, self.era);
        out.extend_from_slice(b",\"version\":");
        json_value(out, self.version);
        out.extend_from_slice(b",\"transport\":");
        plain_str(out, self.transport);
        out.extend_from_slice(b",\"peer\":");
        match &self.peer {
            None => out.extend_from_slice(b"null"),
            Some(SocketAddr::V4(peer)) => {
                // As `Display` writes it, without the formatting machinery.
                out.push(b'"');
                for (i, octet) in peer.ip().octets().into_iter().enumerate() {
                    if i > 0 {
                        out.push(b'.');
                    }
                    json_value(out, &octet);
                }
                out.push(b':');
                json_value(out, &peer.port());
                out.push(b'"');
            }
            Some(peer) => {
                // Writing into a Vec cannot fail.
                let _ = write!(out, "\"{peer}\"");
            }
        }
        out.extend_from_slice(b",\"identity\":");
        json_value(out, &self.identity);
        out.extend_from_slice(b",\"client\":");
        json_value(out, &self.client);
        out.extend_from_slice(b",\"method\":");
        name(out, &self.method);
        out.extend_from_slice(b",\"tool\":");
        match &self.tool {
            None => out.extend_from_slice(b"null"),
            Some(tool) => name(out, tool),
        }
        out.extend_from_slice(b",\"task_id\":");
        uuid(out, self.task_id);
        out.extend_from_slice(b",\"session_id\":");
        uuid(out, self.session_id);
        out.extend_from_slice(b",\"outcome\":");
        plain_str(out, self.outcome.as_str());
        out.extend_from_slice(b",\"error_code\":");
        json_value(out, &self.error_code);
        out.extend_from_slice(b",\"error_message\":");
        json_value(out, &self.error_message);
        out.extend_from_slice(b",\"duration_us\":");
        json_value(out, &self.duration_us);
        out.extend_from_slice(b",\"args\":");
        json_value(out, &self.args);
        if let Some(n) = self.suppressed {
            out.extend_from_slice(b",\"suppressed\":");
            json_value(out, &n);
        }
        if let Some(answers) = &self.answers {
            out.extend_from_slice(b",\"answers\":");
            json_value(out, answers);
        }
        out.push(b'}');
    }
}

/// `time` as `humantime::format_rfc3339_micros` writes it (`2026-12-06T01:02:03.000004Z`),
/// without the formatting machinery for the years 1970 to 9999 (the rest through humantime):
/// it is written on every line.
fn rfc3339_micros(out: &mut Vec<u8>, time: SystemTime) {
    const YEAR_10000: u64 = 253_402_300_800;
    let since_epoch = match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) if d.as_secs() < YEAR_10000 => d,
        _ => {
            use std::io::Write as _;
            // Writing into a Vec cannot fail.
            let _ = write!(out, "{}", humantime::format_rfc3339_micros(time));
            return;
        }
    };
    let secs = since_epoch.as_secs();
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    // Days to the civil date (proleptic Gregorian; H. Hinnant's `civil_from_days`).
    let z = days + 719_468;
    let (era, of_era) = (z / 146_097, z % 146_097);
    let year_of_era = (of_era - of_era / 1460 + of_era / 36_524 - of_era / 146_096) / 365;
    let day_of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    let micros = u64::from(since_epoch.subsec_micros());
    let fields: [(u64, usize, u8); 7] = [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (of_day / 3600, 2, b':'),
        (of_day / 60 % 60, 2, b':'),
        (of_day % 60, 2, b'.'),
        (micros, 6, b'Z'),
    ];
    for (mut value, width, then) in fields {
        let mut digits = [b'0'; 6];
        for digit in digits[..width].iter_mut().rev() {
            *digit = b'0' + (value % 10) as u8;
            value /= 10;
        }
        out.extend_from_slice(&digits[..width]);
        out.push(then);
    }
}

/// Any serialisable value, as serde_json writes it.
fn json_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Serialising these plain types into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// A string this module chose (ASCII, nothing to escape).
fn plain_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// A method or tool name: borrowed ones are the known names, owned ones client text.
#[expect(
    clippy::ptr_arg,
    reason = "whether the name is borrowed is what matters here"
)]
fn name(out: &mut Vec<u8>, name: &Cow<'static, str>) {
    match name {
        Cow::Borrowed(known) => plain_str(out, known),
        Cow::Owned(text) => json_value(out, text),
    }
}

fn uuid(out: &mut Vec<u8>, id: Option<Uuid>) {
    match id {
        None => out.extend_from_slice(b"null"),
        Some(id) => {
            let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
            plain_str(out, id.hyphenated().encode_lower(&mut buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_and_peers_are_written_as_their_display_writes_them() {
        use std::time::Duration;
        let mut times: Vec<SystemTime> = [
            0,
            1,
            59,
            86_399,
            86_400,
            951_782_400,   // 2000-02-29
            951_868_800,   // 2000-03-01
            4_107_542_399, // 2100-02-28 23:59:59
            4_107_542_400, // 2100-03-01
            1_798_761_600, // 2027-01-01
            253_402_300_799,
        ]
        .into_iter()
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s))
        .collect();
        // Every day of four years across a leap year and 2100, at odd times of day.
        let mut at = 4_070_908_800u64; // 2099-01-01
        for i in 0..(4 * 366) {
            at += 86_400;
            times.push(
                SystemTime::UNIX_EPOCH
                    + Duration::new(
                        at + (i * 7919) % 86_400,
                        (i as u32 * 104_729) % 1_000_000_000,
                    ),
            );
        }
        times.push(SystemTime::now());
        for time in times {
            let mut out = Vec::new();
            rfc3339_micros(&mut out, time);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                humantime::format_rfc3339_micros(time).to_string()
            );
        }
        for peer in ["127.0.0.1:1", "0.0.0.0:0", "255.10.0.9:65535", "[::1]:8080"] {
            let peer: SocketAddr = peer.parse().unwrap();
            let record = AuditRecord {
                time: SystemTime::UNIX_EPOCH,
                id: None,
                era: "modern",
                version: "2026-07-28",
                transport: "http",
                peer: Some(peer),
                identity: None,
                client: None,
                method: Cow::Borrowed("tools/call"),
                tool: None,
                task_id: None,
                session_id: None,
                outcome: Outcome::Ok,
                error_code: None,
                error_message: None,
                duration_us: 0,
                args: None,
                suppressed: None,
                answers: None,
            };
            let mut out = Vec::new();
            record.write_json(&mut out);
            let line: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(line["peer"], peer.to_string());
            assert_eq!(out, serde_json::to_vec(&record).unwrap());
        }
    }

    #[test]
    fn decoded_length_from_base64_length() {
        use base64::Engine;
        for n in 0..20usize {
            let data = vec![7u8; n];
            let text = base64::engine::general_purpose::STANDARD.encode(&data);
            assert_eq!(base64_decoded_len(&text), n as u64, "{text}");
            let unpadded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&data);
            assert_eq!(base64_decoded_len(&unpadded), n as u64, "{unpadded}");
        }
    }

    #[test]
    fn summary_of_agent_run_arguments() {
        let args = json!({
            "request": "hello",
            "temperature": 0.5,
            "images": [{"mime_type": "image/png", "data_base64": "AAAA"}, null,
                       {"mime_type": "image/png", "data_base64": "AAA="}]
        });
        let summary = ArgsSummary::of(args.as_object().unwrap(), false).unwrap();
        assert_eq!(
            serde_json::to_value(&summary).unwrap(),
            json!({
                "request_bytes": 5,
                "request_sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
                "temperature": 0.5,
                "image_count": 3,
                "image_bytes": 5
            })
        );
        let with_text = ArgsSummary::of(args.as_object().unwrap(), true).unwrap();
        assert_eq!(with_text.request.as_deref(), Some("hello"));
        let status = json!({"task_id": "x"});
        assert_eq!(ArgsSummary::of(status.as_object().unwrap(), true), None);
    }

    #[test]
    fn names_are_kept_when_known_and_scrubbed_otherwise() {
        assert_eq!(name_field("tools/call"), Cow::<str>::Borrowed("tools/call"));
        assert!(matches!(
            name_field("agent_status"),
            Cow::Borrowed("agent_status")
        ));
        assert!(matches!(name_field("tools/cal"), Cow::Owned(_)));
        let long = "A".repeat(50);
        assert_eq!(name_field(&long), "[50 chars redacted]");
    }

    fn record() -> AuditRecord {
        AuditRecord {
            time: SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_764_495_000_123_456),
            id: Some(RequestId::Number(-7)),
            era: "modern",
            version: "2026-07-28",
            transport: "http",
            peer: Some("[::1]:8080".parse().unwrap()),
            identity: Some("ci \"bot\"\n".into()),
            client: Some(ClientSummary {
                name: Some("probe \"x\"".into()),
                version: None,
            }),
            method: Cow::Borrowed("tools/call"),
            tool: Some(Cow::Owned("odd\u{1}tool ✓".into())),
            task_id: Some(Uuid::from_u128(0x3f2504e0_4f89_11d3_9a0c_0305e82c3301)),
            session_id: None,
            outcome: Outcome::ToolError,
            error_code: Some(-32602),
            error_message: Some("task_id: \"x\" is not a UUID\t\\".into()),
            duration_us: u64::MAX,
            args: ArgsSummary::of(
                json!({"request": "hé", "temperature": 0.1, "images": []})
                    .as_object()
                    .unwrap(),
                true,
            )
            .map(Box::new),
            suppressed: Some(3),
            answers: answers_field(Some(&json!({
                "approval-1": {"action": "accept"},
                "approval-\"2": {"action": "maybe"}
            }))),
        }
    }

    /// The hand-written line is exactly what serde_json makes of the record.
    #[test]
    fn written_lines_equal_serde_output() {
        let mut variants = vec![record()];
        let mut plain = record();
        plain.id = Some(RequestId::String("a\"b".into()));
        plain.peer = Some("127.0.0.1:4000".parse().unwrap());
        plain.tool = Some(Cow::Borrowed("agent_run"));
        plain.session_id = plain.task_id;
        variants.push(plain);
        let mut empty = record();
        empty.id = None;
        empty.peer = None;
        empty.identity = None;
        empty.method = Cow::Owned("[50 chars redacted]".into());
        empty.tool = None;
        empty.task_id = None;
        empty.error_code = None;
        empty.error_message = None;
        empty.duration_us = 0;
        empty.args = None;
        empty.client = None;
        empty.suppressed = None;
        empty.answers = None;
        empty.outcome = Outcome::Ok;
        variants.push(empty);
        for record in variants {
            let mut ours = Vec::new();
            record.write_json(&mut ours);
            let serde = serde_json::to_vec(&record).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(serde).unwrap()
            );
        }
    }

    #[test]
    fn every_client_chosen_field_is_capped() {
        let huge = "i".repeat(25 * 1024 * 1024);
        let RequestId::String(id) = id_field(&RequestId::String(huge.clone())) else {
            panic!("a string id stays a string");
        };
        assert!(id.len() < MAX_ID_BYTES + 32, "{} bytes", id.len());
        assert!(id.ends_with(&format!("[{} bytes]", huge.len())), "{id}");
        assert_eq!(
            id_field(&RequestId::String("abc".into())),
            RequestId::String("abc".into())
        );
        assert_eq!(id_field(&RequestId::Number(7)), RequestId::Number(7));
        let name = name_field(&"a.".repeat(5000));
        assert!(
            name.len() <= MAX_NAME_BYTES + '…'.len_utf8(),
            "{}",
            name.len()
        );
        let client =
            client_field(Some(&json!({"name": "é".repeat(1000), "version": "1"}))).unwrap();
        assert!(client.name.unwrap().len() <= MAX_NAME_BYTES + '…'.len_utf8());
        assert_eq!(client.version.as_deref(), Some("1"));
        assert_eq!(client_field(Some(&json!({"title": "x"}))), None);
        assert_eq!(client_field(Some(&json!("not an object"))), None);
        let secret = scrub_message("cannot reach http://u:hunter2@h:1/api: refused");
        assert!(!secret.contains("hunter2"), "{secret}");
    }

    #[test]
    fn messages_lose_long_opaque_runs_and_are_capped() {
        let b64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk";
        let msg = format!("images: invalid type: string \"{b64}\", expected a sequence");
        assert_eq!(
            scrub_message(&msg),
            format!(
                "images: invalid type: string \"[{} chars redacted]\", expected a sequence",
                b64.len()
            )
        );
        let uuid = "task_id: \"3f2504e0-4f89-11d3-9a0c-0305e82c3301\" is not a UUID";
        assert_eq!(scrub_message(uuid), uuid);
        let long = "é ".repeat(800);
        let scrubbed = scrub_message(&long);
        assert!(scrubbed.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
        assert!(scrubbed.ends_with('…'));
    }
}
