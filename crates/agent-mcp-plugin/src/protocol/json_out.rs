//! JSON text written straight into a buffer, byte for byte what `serde_json::to_vec` writes
//! for the same value (compact, keys in a `Map`'s order, the same string escapes), but with
//! strings scanned eight bytes at a time: the answer's text is most of its bytes, and
//! serde_json looks at each byte on its own. A long string's escaped form is also kept a
//! while ([`write_str`]): a client polling a task gets the same text many times over.

use std::cell::RefCell;

use serde_json::{Map, Value};

/// Appends `value` as JSON.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // serde_json's own number formatting (itoa / ryu); writing to a Vec cannot fail.
        Value::Number(n) => {
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_map(out, map),
    }
}

/// Appends `map` as a JSON object.
pub fn write_map(out: &mut Vec<u8>, map: &Map<String, Value>) {
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        write_value(out, value);
    }
    out.push(b'}');
}

const LOW_BITS: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// A mask with the high bit set in each of the eight bytes (little-endian) that needs an escape
/// (a control character, `"` or `\`), and maybe in bytes after such a byte: the classic
/// "has a byte less than n" and "has a zero byte" tests are exact up to the first hit, and
/// only the first is asked for.
#[inline]
fn escape_mask(chunk: u64) -> u64 {
    let below_space = chunk.wrapping_sub(LOW_BITS * 0x20) & !chunk;
    let quote = chunk ^ (LOW_BITS * u64::from(b'"'));
    let backslash = chunk ^ (LOW_BITS * u64::from(b'\\'));
    let has_quote = quote.wrapping_sub(LOW_BITS) & !quote;
    let has_backslash = backslash.wrapping_sub(LOW_BITS) & !backslash;
    (below_space | has_quote | has_backslash) & HIGH_BITS
}

/// Strings at least this long and at most [`MEMO_MAX_BYTES`] are looked up in this thread's
/// memo of escaped strings before they are escaped (shorter ones cost less to escape than to
/// look up).
const MEMO_MIN_BYTES: usize = 128;
const MEMO_MAX_BYTES: usize = 16 * 1024;
/// Strings a thread's memo keeps (replaced in turn): at most 256 KiB of text, and its escapes
/// (as long as the text, up to six times for control characters).
const MEMO_ENTRIES: usize = 16;

/// Long strings and their escaped forms, most written first in the slot after the last.
#[derive(Default)]
struct Memo {
    entries: Vec<(Box<str>, Box<[u8]>)>,
    next: usize,
}

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::default();
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it. A long string is first
/// looked up by its content in this thread's memo: the escaped form of exactly the same text
/// (compared byte for byte, so never another text's) is copied instead of escaped again. A
/// status answer is mostly one such text, the same for every poll until the task moves on.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if !(MEMO_MIN_BYTES..=MEMO_MAX_BYTES).contains(&s.len()) {
        return escape(out, s);
    }
    MEMO.with_borrow_mut(|memo| {
        if let Some((_, escaped)) = memo.entries.iter().find(|(text, _)| **text == *s) {
            out.extend_from_slice(escaped);
            return;
        }
        let start = out.len();
        escape(out, s);
        let entry = (Box::from(s), Box::from(&out[start..]));
        let slot = memo.next;
        memo.next = (slot + 1) % MEMO_ENTRIES;
        match memo.entries.get_mut(slot) {
            Some(old) => *old = entry,
            None => memo.entries.push(entry),
        }
    })
}

/// [`write_str`] without the memo: the runs of bytes that need no escape copied whole, found
/// eight bytes at a time.
fn escape(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `start..` is not written yet.
    let mut start = 0;
    loop {
        let i = next_escape(bytes, start);
        out.extend_from_slice(&bytes[start..i]);
        let Some(&b) = bytes.get(i) else {
            break;
        };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ]);
            }
        }
        start = i + 1;
    }
    out.push(b'"');
}

/// The index of the first byte at or after `from` that needs an escape (a control character,
/// `"` or `\`), or `bytes.len()`.
#[inline]
fn next_escape(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let mask = escape_mask(u64::from_le_bytes(word));
        if mask != 0 {
            return i + (mask.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    // The last few bytes, padded with spaces (which need no escape).
    let rest = bytes.get(i..).unwrap_or_default();
    if rest.is_empty() {
        return bytes.len();
    }
    let mut word = [b' '; 8];
    word[..rest.len()].copy_from_slice(rest);
    match escape_mask(u64::from_le_bytes(word)) {
        0 => bytes.len(),
        mask => i + (mask.trailing_zeros() / 8) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn written(value: &Value) -> String {
        let mut out = Vec::new();
        write_value(&mut out, value);
        String::from_utf8(out).expect("JSON text is UTF-8")
    }

    #[test]
    fn every_escape_and_every_kind_of_value_as_serde_json_writes_them() {
        let all_low: String = (0u8..0x80).map(char::from).collect();
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-12),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(""),
            json!(all_low),
            json!("twelve bytes\"then a quote, \\ and\ttab\u{1}\u{1f}\u{7f} ü €😀"),
            json!([]),
            json!({}),
            json!([1, "a", [null, {}], {"b": [true]}]),
            json!({"z": 1, "a\n": {"y": [], "x": "\u{8}"}, "": null}),
        ];
        for value in &values {
            assert_eq!(written(value), serde_json::to_string(value).unwrap());
        }
    }

    fn values() -> impl Strategy<Value = Value> {
        let text = prop_oneof![
            any::<String>(),
            // Dense in what needs escaping, around the eight-byte boundaries.
            prop::collection::vec(
                prop::sample::select(vec![
                    'a', '"', '\\', '\n', '\u{0}', '\u{1f}', ' ', 'é', '😀'
                ]),
                0..40
            )
            .prop_map(|chars| chars.into_iter().collect::<String>()),
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            text.clone().prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 32, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(text.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn long_strings_are_escaped_once_and_told_apart_by_every_byte() {
        let texts: Vec<String> = (0..3 * MEMO_ENTRIES)
            .map(|i| {
                format!(
                    "task {i}\n\"quoted\" \\ {}",
                    "x".repeat(MEMO_MIN_BYTES + i % 3)
                )
            })
            .chain([
                "y".repeat(MEMO_MIN_BYTES - 1),
                "y".repeat(MEMO_MIN_BYTES),
                "y".repeat(MEMO_MAX_BYTES),
                "y".repeat(MEMO_MAX_BYTES + 1),
                format!("{}\u{1}", "y".repeat(MEMO_MIN_BYTES)),
                format!("{}\u{2}", "y".repeat(MEMO_MIN_BYTES)),
            ])
            .collect();
        // Each text written again and again, in an order that fills and recycles the memo.
        for round in 0..4 {
            for (i, text) in texts.iter().enumerate() {
                let text = if (i + round) % 2 == 0 {
                    &texts[i / 2]
                } else {
                    text
                };
                let value = Value::from(text.as_str());
                assert_eq!(written(&value), serde_json::to_string(&value).unwrap());
            }
        }
        assert!(MEMO.with_borrow(|memo| memo.entries.len()) <= MEMO_ENTRIES);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn any_value_is_written_as_serde_json_writes_it(value in values()) {
            prop_assert_eq!(written(&value), serde_json::to_string(&value).unwrap());
        }

        /// Long texts that differ in one byte each get their own escapes, memo or not.
        #[test]
        fn memo_never_answers_for_another_text(
            base in prop::collection::vec(prop::sample::select(vec!['a', '"', '\n', 'é']), 130..200),
            at in any::<prop::sample::Index>(),
            other in prop::sample::select(vec!['b', '\\', '\u{0}', '😀']),
        ) {
            let first: String = base.iter().collect();
            let mut second = base.clone();
            second[at.index(base.len())] = other;
            let second: String = second.into_iter().collect();
            for text in [&first, &second, &first, &second] {
                let value = Value::from(text.as_str());
                prop_assert_eq!(written(&value), serde_json::to_string(&value).unwrap());
            }
        }
    }
}
