//! Splits a byte stream into NDJSON lines.
//!
//! Ollama streams `/api/chat` as newline-delimited JSON, but HTTP chunk boundaries fall anywhere:
//! one chunk may hold half a line or several lines. [`NdjsonSplitter`] buffers bytes as they
//! arrive and hands back complete lines without their terminator (`\n` or `\r\n`). Blank lines
//! are skipped, and [`NdjsonSplitter::finish`] returns a last line that had no trailing newline.

use bytes::{Bytes, BytesMut};

/// Incremental NDJSON line splitter: [`push`](Self::push) bytes, then drain
/// [`next_line`](Self::next_line) until it returns `None`.
#[derive(Debug, Default)]
pub(crate) struct NdjsonSplitter {
    buf: BytesMut,
    /// Bytes at the front of `buf` already known to hold no `\n`, so a long line
    /// arriving in many small chunks is scanned once, not once per chunk.
    scanned: usize,
}

impl NdjsonSplitter {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Appends bytes received from the network.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes buffered that do not yet form a complete line.
    pub(crate) fn pending_len(&self) -> usize {
        self.buf.len()
    }

    /// The next complete, non-blank line, without its `\n` / `\r\n`.
    pub(crate) fn next_line(&mut self) -> Option<Bytes> {
        loop {
            let Some(offset) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') else {
                self.scanned = self.buf.len();
                return None;
            };
            let mut line = self.buf.split_to(self.scanned + offset + 1);
            self.scanned = 0;
            line.truncate(line.len() - 1);
            if line.last() == Some(&b'\r') {
                line.truncate(line.len() - 1);
            }
            if !is_blank(&line) {
                return Some(line.freeze());
            }
        }
    }

    /// Call once the stream has ended: the final line if it lacked a trailing newline.
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        let mut rest = self.buf.split();
        self.scanned = 0;
        if rest.last() == Some(&b'\r') {
            rest.truncate(rest.len() - 1);
        }
        (!is_blank(&rest)).then(|| rest.freeze())
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut NdjsonSplitter) -> Vec<String> {
        std::iter::from_fn(|| s.next_line())
            .map(|l| String::from_utf8_lossy(&l).into_owned())
            .collect()
    }

    /// Pushes `chunks` one at a time: the lines each push completed, then what `finish` gives
    /// (checked to give nothing when asked again).
    fn split(chunks: &[&[u8]]) -> (Vec<Vec<String>>, Option<String>) {
        let mut s = NdjsonSplitter::new();
        let lines = chunks
            .iter()
            .map(|chunk| {
                s.push(chunk);
                drain(&mut s)
            })
            .collect();
        let last = s.finish().map(|l| String::from_utf8_lossy(&l).into_owned());
        assert_eq!(s.finish(), None, "finish again after {chunks:?}");
        (lines, last)
    }

    #[test]
    fn several_lines_in_one_chunk() {
        let (lines, last) = split(&[b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"]);
        assert_eq!(lines, [["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]]);
        assert_eq!(last, None);
    }

    #[test]
    fn line_split_across_chunks() {
        let mut s = NdjsonSplitter::new();
        s.push(b"{\"mess");
        assert_eq!(drain(&mut s), Vec::<String>::new());
        s.push(b"age\":\"hi");
        assert_eq!(drain(&mut s), Vec::<String>::new());
        assert_eq!(s.pending_len(), 14);
        s.push(b"\"}\n{\"done\"");
        assert_eq!(drain(&mut s), ["{\"message\":\"hi\"}"]);
        s.push(b":true}\n");
        assert_eq!(drain(&mut s), ["{\"done\":true}"]);
        assert_eq!(s.pending_len(), 0);
    }

    #[test]
    fn byte_at_a_time() {
        let input = b"{\"x\":1}\r\n\r\n{\"y\":2}\n";
        let bytes: Vec<&[u8]> = input.iter().map(std::slice::from_ref).collect();
        let (lines, last) = split(&bytes);
        assert_eq!(lines.concat(), ["{\"x\":1}", "{\"y\":2}"]);
        assert_eq!(last, None);
    }

    #[test]
    fn crlf_terminators_are_stripped() {
        let (lines, last) = split(&[b"{\"a\":1}\r\n{\"b\":2}\r", b"\n"]);
        assert_eq!(lines, [["{\"a\":1}"], ["{\"b\":2}"]]);
        assert_eq!(last, None);
    }

    #[test]
    fn blank_and_whitespace_lines_are_skipped() {
        let (lines, last) = split(&[b"\n\n  \n\r\n{\"a\":1}\n \t \n"]);
        assert_eq!(lines, [["{\"a\":1}"]]);
        assert_eq!(last, None);
    }

    #[test]
    fn final_line_without_newline() {
        let (lines, last) = split(&[b"{\"a\":1}\n{\"done\":true}"]);
        assert_eq!(lines, [["{\"a\":1}"]]);
        assert_eq!(last.as_deref(), Some("{\"done\":true}"));
    }

    #[test]
    fn final_line_with_lone_carriage_return() {
        let (lines, last) = split(&[b"{\"a\":1}\r"]);
        assert_eq!(lines, [Vec::<String>::new()]);
        assert_eq!(last.as_deref(), Some("{\"a\":1}"));
    }

    #[test]
    fn multibyte_utf8_split_across_chunks() {
        let text = "{\"c\":\"héllo — 世界\"}\n".as_bytes();
        let (lines, last) = split(&[&text[..9], &text[9..]]);
        assert_eq!(lines.concat(), ["{\"c\":\"héllo — 世界\"}"]);
        assert_eq!(last, None);
    }
}
