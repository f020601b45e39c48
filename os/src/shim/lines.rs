//! Splitting an output stream into lines, in bounded memory.
//!
//! A line ends at `\n`; the `\n` and a `\r` before it are dropped; an unterminated last line is
//! still a line (case E11). Bytes are decoded as UTF-8 (invalid sequences, which the program did
//! print, become U+FFFD). A line longer than the limit is never split into several lines and
//! never held whole: its first [`CUT_EXCERPT_BYTES`] are kept, cut on a character boundary,
//! with the line's full length, and the rest is counted and skipped (case R37), so memory stays
//! at most the limit whatever the program prints.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::protocol::CUT_EXCERPT_BYTES;

/// One line read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// The full length in bytes when the line was cut (then `text` is only its start).
    pub cut: Option<u64>,
}

/// Reads lines of at most `max` bytes from `reader` (see the module doc).
pub struct LineReader<R> {
    reader: R,
    max: usize,
    kept: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader of `reader`'s lines; lines over `max` bytes are cut.
    pub fn new(reader: R, max: usize) -> Self {
        Self { reader, max: max.max(CUT_EXCERPT_BYTES), kept: Vec::new() }
    }

    /// The next line; `None` at EOF (a read error counts as EOF: the exit is reported apart).
    pub async fn next(&mut self) -> Option<Line> {
        self.kept.clear();
        let mut total: u64 = 0;
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(b) => b,
                Err(_) => &[],
            };
            if available.is_empty() {
                return (total > 0).then(|| self.finish(total, false));
            }
            let (take, ended) = match memchr::memchr(b'\n', available) {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            let room = self.max.saturating_sub(self.kept.len());
            self.kept.extend_from_slice(&available[..take.min(room)]);
            total += take as u64;
            self.reader.consume(if ended { take + 1 } else { take });
            if ended {
                return Some(self.finish(total, true));
            }
        }
    }

    fn finish(&mut self, total: u64, ended: bool) -> Line {
        if total as usize <= self.max {
            if ended && self.kept.last() == Some(&b'\r') {
                self.kept.pop();
            }
            return Line { text: utf8(self.kept.clone()), cut: None };
        }
        self.kept.truncate(CUT_EXCERPT_BYTES);
        let valid = match std::str::from_utf8(&self.kept) {
            Ok(_) => self.kept.len(),
            // A character cut by the truncation is dropped whole, never shown as U+FFFD.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.kept.len(),
        };
        self.kept.truncate(valid);
        Line { text: utf8(self.kept.clone()), cut: Some(total) }
    }
}

/// `bytes` as text: as they are when valid UTF-8 (the usual case, checked a word at a time),
/// else with each invalid sequence as U+FFFD. (`from_utf8_lossy` alone checks byte by byte:
/// it was the shim's largest cost under a fast stream.)
fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        // A tiny buffer: every line crosses many buffer boundaries.
        let mut r = LineReader::new(tokio::io::BufReader::with_capacity(7, input), max);
        let mut out = Vec::new();
        while let Some(l) = r.next().await {
            out.push(l);
        }
        out
    }

    fn whole(s: &str) -> Line {
        Line { text: s.into(), cut: None }
    }

    #[tokio::test]
    async fn invalid_utf8_becomes_replacement_characters_and_valid_lines_stay_as_printed() {
        let got = lines(b"ok \xe2\x82\xac\nbad \xff\xfe end\ncut \xe2\x82\n", 1 << 20).await;
        assert_eq!(got, vec![whole("ok \u{20ac}"), whole("bad \u{fffd}\u{fffd} end"), whole("cut \u{fffd}")]);
    }

    #[tokio::test]
    async fn crlf_unterminated_and_empty_lines() {
        let got = lines(b"one\r\n\ntwo\nlast, no newline", 1 << 20).await;
        assert_eq!(got, vec![whole("one"), whole(""), whole("two"), whole("last, no newline")]);
    }

    #[tokio::test]
    async fn case_r37_a_long_line_of_two_byte_characters_is_cut_on_a_boundary_in_bounded_memory() {
        let max = 64 * 1024;
        let mut input = "é".repeat(200_000).into_bytes();
        input.extend_from_slice(b"\n{\"type\":\"result\"}\n");
        let got = lines(&input, max).await;
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].cut, Some(400_000));
        assert!(got[0].text.len() <= CUT_EXCERPT_BYTES);
        assert!(got[0].text.chars().all(|c| c == 'é'), "cut on a character boundary, no U+FFFD");
        assert_eq!(got[1], whole("{\"type\":\"result\"}"));
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_whole_and_one_byte_more_is_cut() {
        let max = CUT_EXCERPT_BYTES * 2;
        let at = "a".repeat(max);
        let over = "b".repeat(max + 1);
        let got = lines(format!("{at}\n{over}\n").as_bytes(), max).await;
        assert_eq!(got[0], whole(&at));
        assert_eq!(got[1].cut, Some(max as u64 + 1));
    }
}
