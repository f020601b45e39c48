//! A small value valid against a simple schema, for the structured answers the CLIs ask their
//! model for (Claude Code's session title, Gemini CLI's next-speaker check): both wires fill
//! the schema their CLI sends with this.

use serde_json::{json, Value};

/// A value valid against `schema` (JSON Schema `object`, or OpenAPI's `OBJECT`: the type is
/// read case-insensitively): an enum's first value; objects with their required (else all)
/// properties filled; strings `text`, numbers 0, booleans false, arrays empty, `null` null.
pub fn fill(schema: &Value, text: &str) -> Value {
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str).map(str::to_ascii_lowercase).as_deref() {
        Some("object") => {
            let props = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = match schema.get("required").and_then(Value::as_array) {
                Some(r) => r.iter().filter_map(Value::as_str).collect(),
                None => props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default(),
            };
            let mut out = serde_json::Map::new();
            for key in required {
                let sub = props.and_then(|p| p.get(key)).cloned().unwrap_or(Value::Null);
                out.insert(key.to_owned(), fill(&sub, text));
            }
            Value::Object(out)
        }
        Some("array") => json!([]),
        Some("number" | "integer") => json!(0),
        Some("boolean") => json!(false),
        Some("null") => Value::Null,
        _ => json!(text),
    }
}
