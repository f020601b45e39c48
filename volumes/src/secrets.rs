//! Looking for the caller's secret values (`SaveOptions::refuse`) in what a save is about to
//! store: file contents as they are read, paths and symlink targets.

use std::io::{self, Read};

use memchr::memmem::Finder;

use crate::scan::Content;
use crate::types::SecretValue;

/// Finds any of a set of secret values; says which one by name, never by value.
pub(crate) struct Scanner {
    finders: Vec<(String, Finder<'static>)>,
    /// Length of the longest value: a chunked read keeps that many bytes minus one of overlap.
    longest: usize,
}

impl Scanner {
    pub fn new(values: &[SecretValue]) -> Scanner {
        let finders: Vec<(String, Finder<'static>)> =
            values.iter().filter(|v| !v.value.is_empty()).map(|v| (v.name.clone(), Finder::new(&v.value).into_owned())).collect();
        let longest = finders.iter().map(|(_, f)| f.needle().len()).max().unwrap_or(0);
        Scanner { finders, longest }
    }

    pub fn is_empty(&self) -> bool {
        self.finders.is_empty()
    }

    /// The name of a value found in `bytes`.
    pub fn in_bytes(&self, bytes: &[u8]) -> Option<&str> {
        self.finders.iter().find(|(_, f)| f.find(bytes).is_some()).map(|(n, _)| n.as_str())
    }

    /// `text` with every value replaced by `[redacted]` (for a path that holds one).
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (_, f) in &self.finders {
            if let Ok(v) = std::str::from_utf8(f.needle()) {
                out = out.replace(v, "[redacted]");
            }
        }
        out
    }

    /// The error for value `name` found in entry `path` (the path itself redacted).
    pub fn refusal(&self, path: &str, name: &str) -> crate::error::VolumeError {
        crate::error::VolumeError::Secret { path: self.redact(path), name: name.to_string() }
    }

    /// The name of a value found in what `r` reads, chunk by chunk (a value split across two
    /// chunks is found too).
    pub fn in_reader(&self, r: &mut dyn Read) -> io::Result<Option<&str>> {
        if self.is_empty() {
            return Ok(None);
        }
        let keep = self.longest - 1;
        let mut buf = vec![0u8; (1 << 20) + keep];
        let mut held = 0;
        loop {
            let n = r.read(&mut buf[held..])?;
            if n == 0 {
                return Ok(None);
            }
            let end = held + n;
            if let Some(name) = self.in_bytes(&buf[..end]) {
                return Ok(Some(name));
            }
            let tail = keep.min(end);
            buf.copy_within(end - tail..end, 0);
            held = tail;
        }
    }

    /// The name of a value found in file contents read by a save.
    pub fn in_content(&self, c: &Content) -> io::Result<Option<&str>> {
        if self.is_empty() {
            return Ok(None);
        }
        match c {
            Content::Mem(b) => Ok(self.in_bytes(b)),
            Content::Spool(t) => self.in_reader(&mut t.reopen()?),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn scanner() -> Scanner {
        Scanner::new(&[
            SecretValue { name: "API_KEY".into(), value: b"sk-abcdefgh-0123".to_vec() },
            SecretValue { name: "EMPTY".into(), value: Vec::new() },
        ])
    }

    #[test]
    fn finds_a_value_anywhere_even_across_chunks() {
        let s = scanner();
        assert_eq!(s.in_bytes(b"token: sk-abcdefgh-0123\n"), Some("API_KEY"));
        assert_eq!(s.in_bytes(b"token: sk-abcdefgh-012"), None);
        // Across the 1 MiB chunk boundary of a chunked read.
        for at in [(1 << 20) - 8, (1 << 20) - 1, 1 << 20, (3 << 20) + 5] {
            let mut data = vec![b'x'; 4 << 20];
            data[at..at + 16].copy_from_slice(b"sk-abcdefgh-0123");
            assert_eq!(s.in_reader(&mut &data[..]).unwrap(), Some("API_KEY"), "at {at}");
        }
        assert_eq!(s.in_reader(&mut &vec![b'x'; 3 << 20][..]).unwrap(), None);
        assert!(!format!("{:?}", SecretValue { name: "N".into(), value: b"hidden-value".to_vec() }).contains("hidden"));
    }
}
