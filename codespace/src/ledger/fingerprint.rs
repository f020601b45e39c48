//! Canonical encodings and the `apply_patch` idempotency fingerprint (API.md, "Idempotency").
//!
//! The fingerprint is the SHA-256 (lowercase hex) of a versioned tag line followed by canonical
//! JSON of `{check_only, expected_versions, patch, workspace_id}`. Canonical JSON sorts object keys
//! at every depth (independent of serde_json's map ordering features) and uses serde_json's string
//! escaping, so two different requests can never encode to the same bytes.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Tag that versions the encoding; changing the encoding must change the tag.
const PATCH_TAG: &str = "spaces.codespace.apply_patch.v1\n";

/// Canonical JSON text of `value`: object keys sorted by bytes at every depth, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lowercase hex SHA-256 of `tag` followed by `body`.
pub(crate) fn sha256_hex(tag: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(tag.as_bytes());
    hasher.update(body.as_bytes());
    spaces_v4a::hex(&hasher.finalize())
}

/// The `apply_patch` idempotency fingerprint (API.md "Idempotency"): lowercase hex SHA-256 (64
/// chars) of a canonical encoding of `{workspace_id, patch, expected_versions, check_only}`. A missing `expected_versions` is the
/// empty map. `check_only` is part of it, so a preview and its apply never share a key.
pub fn fingerprint(workspace_id: &str, patch: &str, expected_versions: &BTreeMap<String, String>, check_only: bool) -> String {
    let versions: Map<String, Value> = expected_versions.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    let mut doc = Map::new();
    doc.insert("check_only".into(), Value::Bool(check_only));
    doc.insert("expected_versions".into(), Value::Object(versions));
    doc.insert("patch".into(), Value::String(patch.to_owned()));
    doc.insert("workspace_id".into(), Value::String(workspace_id.to_owned()));
    sha256_hex(PATCH_TAG, &canonical_json(&Value::Object(doc)))
}
