//! Size caps on what tools send back to the model.

use std::collections::VecDeque;

/// Cuts `text` to at most `limit` bytes (on a char boundary) with a note saying so.
pub(super) fn cap_text(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!(
        "\n[output truncated: {total} bytes, only the first {cut} shown]"
    ));
    text
}

/// Keeps the first and the last `limit / 2` bytes of a stream and counts what falls between
/// (a command's failure summary is usually at the end).
#[derive(Debug)]
pub(super) struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    omitted: u64,
}

impl HeadTail {
    pub(super) fn new(limit: usize) -> Self {
        let half = (limit / 2).max(1);
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            half,
            omitted: 0,
        }
    }

    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        let room = self.half - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.half {
            self.omitted += (self.tail.len() + bytes.len() - self.half) as u64;
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.half..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.half);
        self.omitted += overflow as u64;
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The kept text (lossy UTF-8), with a marker where bytes were left out.
    pub(super) fn into_text(self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.omitted > 0 {
            text.push_str(&format!("\n[… {} bytes omitted …]\n", self.omitted));
        }
        let tail: Vec<u8> = self.tail.into_iter().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_char_boundary() {
        assert_eq!(cap_text("short".into(), 10), "short");
        let capped = cap_text("ééééé".into(), 3);
        assert!(
            capped.starts_with("é\n[output truncated: 10 bytes"),
            "{capped}"
        );
    }

    #[test]
    fn head_and_tail_are_kept() {
        let mut out = HeadTail::new(8);
        out.push(b"0123");
        out.push(b"456789");
        out.push(b"ab");
        assert_eq!(out.into_text(), "0123\n[… 4 bytes omitted …]\n89ab");
        let mut small = HeadTail::new(100);
        small.push(b"hello ");
        small.push(b"world");
        assert_eq!(small.into_text(), "hello world");
        let mut big = HeadTail::new(4);
        big.push(&[b'x'; 1000]);
        assert_eq!(big.into_text(), "xx\n[… 996 bytes omitted …]\nxx");
    }
}
