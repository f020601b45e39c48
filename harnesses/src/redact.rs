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
            // Agents print values inside JSON too, where `"`, `\` and control characters are
            // escaped: hide that spelling as well.
            if let Ok(quoted) = serde_json::to_string(&v) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != v {
                    secrets.push(escaped.to_owned());
                }
            }
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
    fn long_values_are_replaced_short_ones_kept() {
        let r = Redactor::new(["sk-secret-123456", "short", "sk-secret-123456-longer"]);
        assert_eq!(
            r.apply("a sk-secret-123456-longer b sk-secret-123456 c short"),
            "a [redacted] b [redacted] c short"
        );
    }
}
