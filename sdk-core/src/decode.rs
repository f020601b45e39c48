//! Decoding a request: one place where every front door (HTTP bodies and query strings, MCP
//! tool arguments, SDK calls, stored approval arguments) turns JSON into a typed request.
//!
//! Requests refuse unknown fields (`#[serde(deny_unknown_fields)]` on every request type). A
//! refusal is `INVALID_ARGUMENT` whose message names the offending key with its path
//! (`options.baseUrl`) and, when a valid key resembles it, suggests that key (`base_url`): the
//! usual slip is a camelCase or misspelt name that would otherwise vanish without a word
//! (case C1). A wrongly typed or missing field is named the same way. The error's `field`
//! carries the path for programs.
//!
//! A refusal never repeats a value of the request (it may be a secret, or markup for whoever
//! shows the error): it says which kind of value came and what was expected. Key names are
//! repeated, cut to [`MAX_KEY_CHARS`].

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, ErrorCode};

/// Decodes `value` as the request type `T` of operation `op`. `null` is read as `{}` (a call
/// with no arguments).
///
/// Errors: `INVALID_ARGUMENT` naming the field (unknown key with a suggestion, wrong type,
/// missing required field, out-of-range number).
pub fn decode<T: DeserializeOwned>(op: &str, value: Value) -> Result<T, ApiError> {
    let value = if value.is_null() { Value::Object(Default::default()) } else { value };
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        refusal(op, &path, &inner)
    })
}

/// The longest key name a refusal repeats; longer ones are cut (ending in `...`).
pub const MAX_KEY_CHARS: usize = 64;

fn shorten(name: &str) -> String {
    if name.chars().count() <= MAX_KEY_CHARS {
        return name.to_owned();
    }
    format!("{}...", name.chars().take(MAX_KEY_CHARS).collect::<String>())
}

/// serde's message without the value it quotes: `invalid type: string "x", expected u32`
/// becomes `invalid type: string, expected u32`, ``unknown variant `x`, expected ...`` becomes
/// `unknown variant, expected ...`. Other messages are the code's own and pass unchanged.
fn without_value(inner: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: ", "unknown variant "] {
        if let Some(rest) = inner.strip_prefix(prefix) {
            // The expected part comes from the type, never from the input: the last one.
            let (got, expected) = rest.rsplit_once(", expected ").unwrap_or((rest, ""));
            let kind = got.split(['"', '`']).next().unwrap_or("").trim_end();
            let head = prefix.trim_end();
            let head = if kind.is_empty() { head.to_owned() } else { format!("{head} {kind}") };
            return if expected.is_empty() { head } else { format!("{head}, expected {expected}") };
        }
    }
    inner.to_owned()
}

/// The `INVALID_ARGUMENT` error for serde's message `inner` at `path` (`.` for the top level).
fn refusal(op: &str, path: &str, inner: &str) -> ApiError {
    let path = shorten(path);
    let path = path.as_str();
    let inner = without_value(inner);
    let inner = inner.as_str();
    let at = |field: &str| -> String {
        match path {
            "." | "" => field.to_owned(),
            p if p.ends_with(field) => p.to_owned(),
            p => format!("{p}.{field}"),
        }
    };
    let (field, message) = if let Some(rest) = inner.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let valid = backticked(expected);
        let field = at(&shorten(key));
        let hint = match closest(key, &valid) {
            Some(best) => format!("; did you mean `{best}`?"),
            None => String::new(),
        };
        let list = if valid.is_empty() { String::new() } else { format!(" (valid keys: {})", valid.join(", ")) };
        (field.clone(), format!("{op}: unknown field `{field}`{hint}{list}"))
    } else if let Some(rest) = inner.strip_prefix("missing field `") {
        let key = rest.split('`').next().unwrap_or(rest);
        let field = at(key);
        (field.clone(), format!("{op}: missing field `{field}`"))
    } else {
        let field = if path == "." { String::new() } else { path.to_owned() };
        let message = if field.is_empty() {
            format!("{op}: invalid arguments: {inner}")
        } else {
            format!("{op}: invalid value for `{field}`: {inner}")
        };
        (field, message)
    };
    let mut err = ApiError::new(ErrorCode::InvalidArgument, message);
    if !field.is_empty() {
        err.field = Some(field);
    }
    err
}

/// Every `` `name` `` in serde's "expected one of `a`, `b`" tail.
fn backticked(s: &str) -> Vec<String> {
    s.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The valid key `key` most resembles, if one is close: equal once case, `_` and `-` are
/// ignored (`baseUrl` ~ `base_url`), or within a small edit distance (`paht` ~ `path`).
pub fn closest(key: &str, valid: &[String]) -> Option<String> {
    let norm = |s: &str| s.chars().filter(|c| *c != '_' && *c != '-').flat_map(char::to_lowercase).collect::<String>();
    let k = norm(key);
    if let Some(v) = valid.iter().find(|v| norm(v) == k) {
        return Some(v.clone());
    }
    valid
        .iter()
        .map(|v| (strsim::damerau_levenshtein(&k, &norm(v)), v))
        .filter(|(d, v)| *d <= 2 && *d < v.len().max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, v)| v.clone())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Opts {
        base_url: Option<String>,
        exit_when_idle: Option<bool>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        prompt: String,
        #[serde(default)]
        options: Option<Opts>,
        max: Option<u32>,
    }

    #[test]
    fn nested_camel_case_key_names_path_and_suggestion() {
        let e = decode::<Req>("agent_start", serde_json::json!({"prompt": "hi", "options": {"baseUrl": "x"}})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert_eq!(e.field.as_deref(), Some("options.baseUrl"));
        assert!(e.message.contains("did you mean `base_url`?"), "{}", e.message);
    }

    #[test]
    fn top_level_typo_and_wrong_type_and_missing() {
        let e = decode::<Req>("op", serde_json::json!({"prompt": "hi", "maxx": 3})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("maxx"));
        assert!(e.message.contains("did you mean `max`?"), "{}", e.message);
        let e = decode::<Req>("op", serde_json::json!({"prompt": "hi", "max": "lots"})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("max"));
        let e = decode::<Req>("op", serde_json::json!({})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("prompt"));
        let e = decode::<Req>("op", serde_json::json!({"prompt": "hi", "zzzzzz": 1})).unwrap_err();
        assert!(!e.message.contains("did you mean"), "{}", e.message);
    }

    #[test]
    fn refusals_never_repeat_a_value() {
        let secret = "sk-live-<script>alert(1)</script>, expected nothing";
        for args in [
            serde_json::json!({"prompt": "hi", "max": secret}),
            serde_json::json!({"prompt": secret.len(), "max": 1}),
            serde_json::json!({"prompt": "hi", "options": {"exit_when_idle": secret}}),
            serde_json::json!({"prompt": "hi", "options": secret}),
        ] {
            let e = decode::<Req>("op", args.clone()).unwrap_err();
            assert!(!e.message.contains("sk-live") && !e.message.contains(&secret.len().to_string()), "{args}: {}", e.message);
            assert!(e.message.contains("invalid type: ") && e.message.contains(", expected "), "{args}: {}", e.message);
        }
        let long_key = "k".repeat(500);
        let e = decode::<Req>("op", serde_json::json!({"prompt": "hi", long_key.clone(): 1})).unwrap_err();
        assert!(!e.message.contains(&long_key) && e.message.contains(&format!("{}...", "k".repeat(MAX_KEY_CHARS))), "{}", e.message);
    }
}
