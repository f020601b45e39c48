//! The operation reference of docs/api.md and docs/openapi.json, generated from the table. A
//! test compares both files with what the table generates and fails on drift; regenerate with
//! `SPACES_UPDATE_DOCS=1 cargo test -p spaces-service docs_`.

use serde_json::Value;

use super::schema::{request_schema, result_schema};
use super::table::table;

/// Marks the start of the generated part of docs/api.md.
pub const BEGIN: &str = "<!-- BEGIN GENERATED: operations (service/src/docs.rs) -->";
/// Marks its end.
pub const END: &str = "<!-- END GENERATED: operations -->";

/// The generated operation reference (Markdown): a summary table, then each operation's route,
/// request fields (type, required, description) and result type.
pub fn operations_markdown() -> String {
    let mut out = String::new();
    out.push_str("| operation | route | what it does |\n|---|---|---|\n");
    for row in table() {
        let i = &row.info;
        out.push_str(&format!("| [`{}`](#{}) | {} `{}` | {} |\n", i.name, i.name, i.method.as_str(), i.path, i.doc));
    }
    for row in table() {
        let i = &row.info;
        out.push_str(&format!("\n### {}\n{}\n\n`{} {}`", i.name, i.doc, i.method.as_str(), i.path));
        if i.read_only {
            out.push_str(" (read-only)");
        }
        out.push_str("\n\n");
        let request = request_schema(i.name).unwrap_or(Value::Null);
        let required: Vec<&str> =
            request.get("required").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        match request.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) {
            Some(props) => {
                out.push_str("| field | type | required | description |\n|---|---|---|---|\n");
                for (name, prop) in props {
                    let where_ = if i.path.contains(&format!("{{{name}}}")) { " (path)" } else { "" };
                    out.push_str(&format!(
                        "| `{name}`{where_} | {} | {} | {} |\n",
                        type_name(prop),
                        if required.contains(&name.as_str()) { "yes" } else { "" },
                        one_line(prop.get("description").and_then(Value::as_str).unwrap_or(""))
                    ));
                }
            }
            None => out.push_str("No arguments.\n"),
        }
        let result = result_schema(i.name).unwrap_or(Value::Null);
        out.push_str(&format!("\nResult: {}\n", result_title(&result)));
    }
    out
}

/// A short type name of a property schema: `string`, `integer`, `[string]`, `Approvals`, ...
fn type_name(schema: &Value) -> String {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return format!("`{}`", r.rsplit('/').next().unwrap_or(r));
    }
    if let Some(any) = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array) {
        let parts: Vec<String> = any.iter().filter(|s| s.get("type").and_then(Value::as_str) != Some("null")).map(type_name).collect();
        return parts.join(" or ");
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.iter().map(|v| format!("`{}`", v.as_str().unwrap_or_default())).collect::<Vec<_>>().join(" \\| ");
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
        _ => vec![],
    };
    match types.first() {
        Some(&"array") => format!("[{}]", schema.get("items").map(type_name).unwrap_or_else(|| "any".into())),
        Some(&"object") => match schema.get("additionalProperties") {
            Some(v) if v.is_object() => format!("map of {}", type_name(v)),
            _ => "object".into(),
        },
        Some(t) => (*t).to_owned(),
        None => "any".into(),
    }
}

fn result_title(schema: &Value) -> String {
    if let Some(title) = schema.get("title").and_then(Value::as_str) {
        return format!("`{title}`");
    }
    type_name(schema)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn docs_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs")
    }

    fn update() -> bool {
        std::env::var_os("SPACES_UPDATE_DOCS").is_some()
    }

    #[test]
    fn docs_api_md_matches_the_table() {
        let path = docs_dir().join("api.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else {
            panic!("docs/api.md lacks the generated-section markers {BEGIN:?} ... {END:?}");
        };
        let want = format!("{BEGIN}\n{}{END}", operations_markdown());
        let have = &text[a..b + END.len()];
        if have != want {
            if update() {
                std::fs::write(&path, format!("{}{want}{}", &text[..a], &text[b + END.len()..])).unwrap();
            } else {
                panic!("docs/api.md drifted from the operation table; regenerate with `SPACES_UPDATE_DOCS=1 cargo test -p spaces-service docs_`");
            }
        }
    }

    #[test]
    fn docs_openapi_json_matches_the_table() {
        let path = docs_dir().join("openapi.json");
        let want = serde_json::to_string_pretty(&crate::openapi()).unwrap() + "\n";
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            if update() {
                std::fs::write(&path, want).unwrap();
            } else {
                panic!("docs/openapi.json drifted from the operation table; regenerate with `SPACES_UPDATE_DOCS=1 cargo test -p spaces-service docs_`");
            }
        }
    }

    #[test]
    fn every_openapi_ref_resolves() {
        let doc = crate::openapi();
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let pointer = r.strip_prefix('#').unwrap_or(&r);
            assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
        }
    }

    fn collect_refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|v| collect_refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }

    /// Every operation's schemas are pinned: a change to a request or result type shows up here
    /// as a snapshot diff, so it is deliberate.
    #[test]
    fn schemas_are_pinned() {
        for row in table() {
            let name = row.info.name;
            let schemas = serde_json::json!({
                "operation": name,
                "request": request_schema(name),
                "result": result_schema(name),
            });
            insta::assert_json_snapshot!(name, schemas);
        }
    }
}
