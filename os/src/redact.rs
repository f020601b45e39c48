//! Redaction of secret values from everything stored or shown (API reference, `options.env`:
//! every value of 8+ characters becomes `[redacted]`).

/// Values shorter than this are not redacted (too likely to match ordinary text).
pub const REDACT_MIN_LEN: usize = 8;
/// What a secret value is replaced by.
pub const REDACTED: &str = "[redacted]";

/// Replaces known secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for these values; those shorter than [`REDACT_MIN_LEN`] are ignored. Longer
    /// values are replaced first so a secret containing another is fully hidden.
    pub fn new<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = Vec::new();
        for v in values.into_iter().map(Into::into) {
            if v.chars().count() < REDACT_MIN_LEN {
                continue;
            }
            secrets.extend(json_spellings(&v));
            secrets.push(v);
        }
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets }
    }

    /// `text` with every secret value replaced by `[redacted]`.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }
}

impl Redactor {
    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Every spelling this redactor replaces (each value and its JSON-escaped form), longest
    /// first: for handing the same set to another process.
    pub fn spellings(&self) -> &[String] {
        &self.secrets
    }

    /// `bytes` with every secret value replaced by `[redacted]` (output that may not be UTF-8).
    pub fn apply_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        self.scan(bytes, bytes.len(), &mut out);
        out
    }

    /// Copy `bytes[..limit]` to `out` with every secret that starts there replaced (the longest
    /// at each position; one that starts before `limit` is consumed whole). Returns where it
    /// stopped (at or past `limit`).
    fn scan(&self, bytes: &[u8], limit: usize, out: &mut Vec<u8>) -> usize {
        let mut i = 0;
        while i < limit {
            match self.secrets.iter().find(|s| bytes[i..].starts_with(s.as_bytes())) {
                Some(s) => {
                    out.extend_from_slice(REDACTED.as_bytes());
                    i += s.len();
                }
                None => {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
        }
        i
    }
}

/// The spellings of `v` inside JSON text other than `v` itself: `"`, `\\` and control
/// characters escaped (every writer), and on top of that `/` as `\/` (PHP, some Java) and
/// non-ASCII as `\uXXXX` escapes in lower and upper case hex (Python's `json.dumps`).
fn json_spellings(v: &str) -> Vec<String> {
    let Ok(quoted) = serde_json::to_string(v) else { return Vec::new() };
    let escaped = quoted[1..quoted.len() - 1].to_owned();
    let ascii = |upper: bool| {
        let mut out = String::with_capacity(escaped.len());
        for c in escaped.chars() {
            if c.is_ascii() {
                out.push(c);
            } else {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&if upper { format!("\\u{u:04X}") } else { format!("\\u{u:04x}") });
                }
            }
        }
        out
    };
    let mut out = vec![escaped.clone(), ascii(false), ascii(true)];
    let slashed: Vec<String> = out.iter().map(|s| s.replace('/', "\\/")).collect();
    out.extend(slashed);
    out.sort();
    out.dedup();
    out.retain(|s| s != v);
    out
}

/// Redaction of a byte stream that arrives in pieces: a secret split across two pieces is
/// still replaced, because the last `longest - 1` bytes of what came are held back until more
/// comes ([`RedactStream::push`]) or the holder says the stream paused or ended
/// ([`RedactStream::flush`]). A secret printed across such a flush (with a pause between its
/// halves) is not seen.
#[derive(Debug, Clone, Default)]
pub struct RedactStream {
    redactor: Redactor,
    held: Vec<u8>,
}

impl RedactStream {
    /// A stream redacting what `redactor` redacts.
    pub fn new(redactor: Redactor) -> Self {
        Self { redactor, held: Vec::new() }
    }

    /// Take the next piece; returns the bytes that are safe to pass on now.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.redactor.is_empty() {
            return bytes.to_vec();
        }
        self.held.extend_from_slice(bytes);
        // A secret starting before `limit` lies wholly in `held`; one starting later may not.
        let keep = self.redactor.secrets.iter().map(String::len).max().unwrap_or(1) - 1;
        let limit = self.held.len().saturating_sub(keep);
        let mut out = Vec::with_capacity(limit);
        let used = self.redactor.scan(&self.held, limit, &mut out);
        self.held.drain(..used);
        out
    }

    /// Pass on everything held back (the stream paused or ended).
    pub fn flush(&mut self) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        self.redactor.apply_bytes(&held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escaped_spelling_is_replaced_too() {
        let r = Redactor::new(["pa\"ss\\word99", "tab\there-secret"]);
        assert_eq!(r.apply(r#"{"text":"pa\"ss\\word99"}"#), r#"{"text":"[redacted]"}"#);
        assert_eq!(r.apply("pa\"ss\\word99"), "[redacted]");
        assert_eq!(r.apply(r#""tab\there-secret""#), r#""[redacted]""#);
    }

    #[test]
    fn every_json_spelling_is_replaced() {
        let r = Redactor::new(["pa\"ss\\w/ord-é-98765"]);
        for spelling in [
            "pa\"ss\\w/ord-é-98765",
            r#"pa\"ss\\w/ord-é-98765"#,
            r#"pa\"ss\\w\/ord-é-98765"#,
            r#"pa\"ss\\w/ord-\u00e9-98765"#,
            r#"pa\"ss\\w\/ord-\u00E9-98765"#,
        ] {
            assert_eq!(r.apply(&format!("<{spelling}>")), "<[redacted]>", "{spelling}");
        }
    }

    #[test]
    fn a_secret_split_across_pieces_is_replaced() {
        let mut s = RedactStream::new(Redactor::new(["sk-secret-123456"]));
        let mut out = Vec::new();
        for piece in ["before sk-sec", "ret-12", "3456 after sk-", "x"] {
            out.extend(s.push(piece.as_bytes()));
        }
        out.extend(s.flush());
        assert_eq!(String::from_utf8_lossy(&out), "before [redacted] after sk-x");
        let mut plain = RedactStream::new(Redactor::default());
        assert_eq!(plain.push(b"as is"), b"as is");
    }

    #[test]
    fn long_values_are_replaced_short_ones_kept() {
        let r = Redactor::new(["sk-secret-123456", "short", "sk-secret-123456-longer"]);
        assert_eq!(r.apply("a sk-secret-123456-longer b sk-secret-123456 c short"), "a [redacted] b [redacted] c short");
    }
}
