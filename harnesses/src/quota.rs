//! Provider limits (issue 33, quota waits): whether a failed turn's words say the provider
//! refused it for a rate or usage limit, and when that limit resets, in the forms the CLIs
//! print them. Pure text and JSON reading; the daemon decides what to do (wait, then continue).
//!
//! Forms recognized (docs/harnesses.md, "Provider limits"):
//! - Claude Code: a `result` with `api_error_status: 429`, or the text `usage limit reached`
//!   (its plan message, `Claude AI usage limit reached|<Unix seconds>`, carries the reset);
//! - Codex: the error `usage_limit_reached` / "You've hit your usage limit" (with
//!   `resets_in_seconds` or `resets_at` when the provider sent them), or `429 Too Many Requests`;
//! - the ACP CLIs (opencode, Gemini CLI): a prompt answered with an error naming a limit;
//! - the words, for every CLI that passes them through: `rate limit`, `usage limit`, `too many
//!   requests`, `RESOURCE_EXHAUSTED`, `quota exceeded`, or a standalone `429`.

/// True when `text` says a provider refused the request for a rate or usage limit: its words,
/// or the status 429 standing alone (not inside an id or a longer number).
pub fn is_limit(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    let words = ["rate limit", "rate_limit", "usage limit", "usage_limit", "too many requests", "resource_exhausted", "quota exceeded"];
    words.iter().any(|w| t.contains(w)) || status_429(&t)
}

/// `429` with no letter, digit, `-` or `_` on either side.
fn status_429(t: &str) -> bool {
    let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    t.match_indices("429").any(|(i, _)| !part(t[..i].chars().next_back()) && !part(t[i + 3..].chars().next()))
}

/// When the limit `text` names resets, Unix ms, given the time `now_ms`: Claude Code's
/// `limit reached|<Unix seconds>`, a `resets_at` of Unix seconds, a `resets_in_seconds` (or
/// `retry after N seconds`, `try again in N seconds|minutes`). `None` when it says no time.
pub fn reset_at_ms(text: &str, now_ms: u64) -> Option<u64> {
    let t = text.to_ascii_lowercase();
    if let Some(secs) = t.find("limit reached|").and_then(|i| number_at(&t[i + "limit reached|".len()..])) {
        return Some(secs.saturating_mul(1000));
    }
    if let Some(secs) = after(&t, "resets_at") {
        return Some(secs.saturating_mul(1000));
    }
    for key in ["resets_in_seconds", "retry after", "try again in", "retry-after"] {
        if let Some(n) = after(&t, key) {
            let rest = &t[t.find(key).unwrap_or(0) + key.len()..];
            let unit = if rest.trim_start_matches(|c: char| !c.is_ascii_alphabetic()).starts_with("min") { 60 } else { 1 };
            return Some(now_ms.saturating_add(n.saturating_mul(unit * 1000)));
        }
    }
    None
}

/// The first number after `key` (skipping quotes, colons, spaces, `=`), within 8 characters.
fn after(t: &str, key: &str) -> Option<u64> {
    let rest = &t[t.find(key)? + key.len()..];
    let skip = rest.find(|c: char| c.is_ascii_digit())?;
    (skip <= 8 && !rest[..skip].chars().any(|c| c.is_ascii_alphanumeric())).then(|| number_at(&rest[skip..])).flatten()
}

fn number_at(s: &str) -> Option<u64> {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_told_from_other_failures() {
        assert!(is_limit("API Error: Request rejected (429) · This request would exceed your account's rate limit."));
        assert!(is_limit("You've hit your usage limit. Upgrade to Pro"));
        assert!(is_limit(r#"{"error":{"type":"usage_limit_reached"}}"#));
        assert!(!is_limit("API Error: 500 internal server error"));
        assert!(is_limit("exceeded retry limit, last status: 429 Too Many Requests"));
        assert!(!is_limit("request req_8429a1 failed: 500"), "a 429 inside an id is no status");
        assert!(!is_limit("stream error after 14290 bytes"));
    }

    #[test]
    fn resets_are_read_in_each_form() {
        let now = 1_000_000;
        assert_eq!(reset_at_ms("Claude AI usage limit reached|1735689600", now), Some(1_735_689_600_000));
        assert_eq!(reset_at_ms(r#"{"type":"usage_limit_reached","resets_in_seconds":3}"#, now), Some(now + 3000));
        assert_eq!(reset_at_ms(r#""resets_at": 1700000000"#, now), Some(1_700_000_000_000));
        assert_eq!(reset_at_ms("Rate limited. Try again in 2 minutes.", now), Some(now + 120_000));
        assert_eq!(reset_at_ms("rate limit exceeded", now), None);
    }
}
