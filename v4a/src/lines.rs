//! A file's bytes as lines that remember their own endings, and back.
//!
//! Splitting keeps every byte: `text` + `eol` of every line, concatenated, is the file again. Only
//! the last line may have an empty `eol` (a file without a final newline). An empty file has no
//! lines; a file ending in `\n` has no empty last line.

use std::borrow::Cow;

/// One line of a file: its text without the ending, and the ending (`\n`, `\r\n` or empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    pub text: &'a [u8],
    pub eol: &'a [u8],
}

pub(crate) const LF: &[u8] = b"\n";
pub(crate) const CRLF: &[u8] = b"\r\n";

/// Splits `bytes` into lines (see the module doc).
pub(crate) fn split(bytes: &[u8]) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        match rest.iter().position(|&b| b == b'\n') {
            Some(nl) => {
                let (line, tail) = rest.split_at(nl + 1);
                let body_len = if line[..nl].ends_with(b"\r") { nl - 1 } else { nl };
                let (text, eol) = line.split_at(body_len);
                lines.push(Line { text, eol });
                rest = tail;
            }
            None => {
                lines.push(Line { text: rest, eol: b"" });
                rest = b"";
            }
        }
    }
    lines
}

/// The ending for lines a patch adds: `\r\n` when most of the file's lines end so, else `\n`.
pub(crate) fn style(lines: &[Line<'_>]) -> &'static [u8] {
    let crlf = lines.iter().filter(|l| l.eol == CRLF).count();
    let lf = lines.iter().filter(|l| l.eol == LF).count();
    if crlf > lf {
        CRLF
    } else {
        LF
    }
}

/// Lines being assembled into a new file: kept lines borrow the original bytes, added lines own
/// theirs and take the file's ending style.
pub(crate) struct Output<'a> {
    lines: Vec<(Cow<'a, [u8]>, &'a [u8])>,
    style: &'static [u8],
}

impl<'a> Output<'a> {
    pub(crate) fn new(style: &'static [u8]) -> Self {
        Output { lines: Vec::new(), style }
    }

    /// Keeps an original line, byte for byte.
    pub(crate) fn keep(&mut self, line: Line<'a>) {
        self.lines.push((Cow::Borrowed(line.text), line.eol));
    }

    /// Adds a new line (its ending is the file's style).
    pub(crate) fn add(&mut self, text: &str) {
        self.lines.push((Cow::Owned(text.as_bytes().to_vec()), self.style));
    }

    /// The new file. Every line but the last ends with a newline (an original last line that had
    /// none and is no longer last gets the file's style). The last line ends with a newline iff
    /// `final_newline`, so a file without one keeps lacking it (case X17).
    pub(crate) fn finish(self, final_newline: bool) -> Vec<u8> {
        let count = self.lines.len();
        let mut out = Vec::new();
        for (i, (text, eol)) in self.lines.into_iter().enumerate() {
            out.extend_from_slice(&text);
            if i + 1 < count || final_newline {
                out.extend_from_slice(if eol.is_empty() { self.style } else { eol });
            }
        }
        out
    }
}

/// Whether a file's bytes end with a newline; an empty file counts as ending with one (lines
/// added to it are terminated).
pub(crate) fn ends_with_newline(bytes: &[u8]) -> bool {
    bytes.is_empty() || bytes.ends_with(b"\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parts(bytes: &[u8]) -> Vec<(&[u8], &[u8])> {
        split(bytes).into_iter().map(|l| (l.text, l.eol)).collect()
    }

    #[test]
    fn split_keeps_every_byte() {
        assert_eq!(parts(b""), vec![]);
        assert_eq!(parts(b"a"), vec![(&b"a"[..], &b""[..])]);
        assert_eq!(parts(b"a\n"), vec![(&b"a"[..], &b"\n"[..])]);
        assert_eq!(parts(b"a\r\n\nb\rc"), vec![(&b"a"[..], &b"\r\n"[..]), (&b""[..], &b"\n"[..]), (&b"b\rc"[..], &b""[..])]);
    }

    #[test]
    fn style_follows_the_majority() {
        assert_eq!(style(&split(b"a\r\nb\r\nc")), CRLF);
        assert_eq!(style(&split(b"a\r\nb\nc\n")), LF);
        assert_eq!(style(&split(b"abc")), LF);
    }

    #[test]
    fn finish_terminates_inner_lines_and_respects_final_newline() {
        let original = split(b"a\r\nb");
        let mut out = Output::new(CRLF);
        out.keep(original[0]);
        out.keep(original[1]);
        out.add("c");
        assert_eq!(out.finish(false), b"a\r\nb\r\nc".to_vec());
        let mut out = Output::new(LF);
        out.add("x");
        assert_eq!(out.finish(true), b"x\n".to_vec());
        assert_eq!(Output::new(LF).finish(true), Vec::<u8>::new());
    }
}
