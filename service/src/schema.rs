//! Schemas of the operation table: one JSON Schema (draft 2020-12) per request and result, and
//! the OpenAPI 3.1 document of the HTTP API (served at `GET /v1/openapi.json`, written to
//! docs/openapi.json), all generated from the request and result types with `schemars`.

use schemars::generate::SchemaSettings;
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};
use spaces_sdk::op::{path_params, HttpMethod};

use super::table::table;

/// The generator every schema of the table comes from: draft 2020-12, nested types under
/// `definitions_path`, only the formats JSON Schema defines (`standard_formats`).
pub fn schema_generator(definitions_path: &str) -> SchemaGenerator {
    let path = definitions_path.to_owned();
    SchemaSettings::draft2020_12().with(|s| s.definitions_path = path.into()).with_transform(standard_formats).into_generator()
}

/// The `format` values of JSON Schema draft 2020-12 (section 7.3), the only ones a validator
/// must know.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Drops every `format` JSON Schema does not define, in this schema and all below it:
/// `schemars` writes Rust's integer widths (`uint64`, `int32`, `double`), which Ajv-based MCP
/// clients (Claude Code, the MCP Inspector) warn about once per field. An unsigned width
/// becomes `minimum: 0` (unless a minimum is there), so the schema still says what it meant.
pub fn standard_formats(schema: &mut schemars::Schema) {
    if let Some(obj) = schema.as_object_mut() {
        let format = obj.get("format").and_then(Value::as_str).map(str::to_owned);
        if let Some(format) = format.filter(|f| !STANDARD_FORMATS.contains(&f.as_str())) {
            obj.remove("format");
            if format.starts_with("uint") && !obj.contains_key("minimum") && !obj.contains_key("exclusiveMinimum") {
                obj.insert("minimum".to_owned(), json!(0));
            }
        }
    }
    schemars::transform::transform_subschemas(&mut standard_formats, schema);
}

/// The request schema of operation `name` as a root schema (nested types under `$defs`): the
/// MCP tool `inputSchema`. `None` for an unknown name.
pub fn request_schema(name: &str) -> Option<Value> {
    let row = table().iter().find(|r| r.info.name == name)?;
    Some(root(row.request_schema))
}

/// The result schema of operation `name` as a root schema (the MCP tool `outputSchema`).
pub fn result_schema(name: &str) -> Option<Value> {
    let row = table().iter().find(|r| r.info.name == name)?;
    Some(root(row.result_schema))
}

/// A root schema: the top schema with its referenced definitions as `$defs`.
fn root(schema_of: fn(&mut SchemaGenerator) -> schemars::Schema) -> Value {
    let mut generator = schema_generator("/$defs");
    let top = schema_of(&mut generator).to_value();
    let mut defs = generator.take_definitions(true);
    // A named type comes back as a `$ref`: inline it as the root.
    let mut out = match top.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) if top.as_object().is_some_and(|o| o.len() == 1) => {
            let name = name.to_owned();
            let mut inlined = defs.remove(&name).unwrap_or(top);
            if let Some(obj) = inlined.as_object_mut() {
                obj.entry("title").or_insert(Value::String(name));
            }
            inlined
        }
        _ => top,
    };
    if let Some(obj) = out.as_object_mut() {
        obj.insert("$schema".to_owned(), json!("https://json-schema.org/draft/2020-12/schema"));
        if !defs.is_empty() {
            obj.insert("$defs".to_owned(), Value::Object(defs));
        }
    }
    out
}

/// The OpenAPI 3.1 document of every route of the table, the error envelope, and the bearer
/// token scheme for TCP.
pub fn openapi() -> Value {
    let mut generator = schema_generator("/components/schemas");
    let envelope = generator.subschema_for::<spaces_sdk::error::ErrorEnvelope>().to_value();
    let mut paths: Map<String, Value> = Map::new();
    let mut pending = Vec::new();
    for row in table() {
        let request = (row.request_schema)(&mut generator).to_value();
        let result = (row.result_schema)(&mut generator).to_value();
        pending.push((row.info, request, result));
    }
    let components = generator.take_definitions(true);
    for (info, request, result) in pending {
        let params = path_params(info.path);
        let fields = resolve(&request, &components);
        let mut op = Map::new();
        op.insert("operationId".into(), json!(info.name));
        op.insert("summary".into(), json!(info.doc));
        let mut parameters: Vec<Value> = params
            .iter()
            .map(|p| {
                json!({"name": p, "in": "path", "required": true,
                       "description": prop_description(&fields, p), "schema": {"type": "string"}})
            })
            .collect();
        let required: Vec<&str> =
            fields.get("required").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let props = fields.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        if info.method == HttpMethod::Get {
            for (name, schema) in &props {
                if params.contains(&name.as_str()) {
                    continue;
                }
                parameters.push(json!({"name": name, "in": "query", "required": required.contains(&name.as_str()),
                    "description": schema.get("description").cloned().unwrap_or(json!("")), "schema": schema}));
            }
        } else {
            let mut body = fields.clone();
            if let Some(obj) = body.as_object_mut() {
                if let Some(p) = obj.get_mut("properties").and_then(Value::as_object_mut) {
                    p.retain(|k, _| !params.contains(&k.as_str()));
                }
                if let Some(r) = obj.get_mut("required").and_then(Value::as_array_mut) {
                    r.retain(|k| !k.as_str().is_some_and(|k| params.contains(&k)));
                }
                obj.remove("title");
            }
            op.insert("requestBody".into(), json!({"required": true, "content": {"application/json": {"schema": body}}}));
        }
        if !parameters.is_empty() {
            op.insert("parameters".into(), Value::Array(parameters));
        }
        op.insert(
            "responses".into(),
            json!({
                "200": {"description": "the result", "content": {"application/json": {"schema": result}}},
                "default": {"description": "an error: `{\"error\": {code, message, ...}}` (404 for *_NOT_FOUND and unknown routes, 405 for a wrong method, 409 for conflicts, 403 UNAUTHORIZED, 500 INTERNAL, 400 otherwise)",
                            "content": {"application/json": {"schema": envelope}}}
            }),
        );
        let method = info.method.as_str().to_ascii_lowercase();
        paths
            .entry(info.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .map(|m| m.insert(method, Value::Object(op)));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "spacesd HTTP API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every operation of Spaces over HTTP (JSON). Generated from the operation table; see docs/api.md."
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                "description": "TCP listeners only: the token in <state dir>/token. The Unix socket needs none."}}
        }
    })
}

/// `schema` with a top-level `$ref` into `components` resolved.
fn resolve(schema: &Value, components: &Map<String, Value>) -> Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => components.get(name).cloned().unwrap_or_else(|| schema.clone()),
        None => schema.clone(),
    }
}

fn prop_description(fields: &Value, name: &str) -> Value {
    fields.pointer(&format!("/properties/{name}/description")).cloned().unwrap_or(json!(""))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Every `format` in `v` (at any depth), with where it is.
    fn formats(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "format" {
                        out.push(format!("{at}: {x}"));
                    }
                    formats(x, &format!("{at}/{k}"), out);
                }
            }
            Value::Array(xs) => xs.iter().enumerate().for_each(|(i, x)| formats(x, &format!("{at}/{i}"), out)),
            _ => {}
        }
    }

    /// No schema the table publishes (MCP tools, OpenAPI) carries a format JSON Schema does not
    /// define; unsigned integers say `minimum: 0` instead.
    #[test]
    fn schemas_use_only_the_formats_json_schema_defines() {
        let mut found = Vec::new();
        for row in table() {
            formats(&request_schema(row.info.name).unwrap(), row.info.name, &mut found);
            formats(&result_schema(row.info.name).unwrap(), row.info.name, &mut found);
        }
        formats(&openapi(), "openapi", &mut found);
        let odd: Vec<_> = found.iter().filter(|f| !STANDARD_FORMATS.iter().any(|s| f.ends_with(&format!("\"{s}\"")))).collect();
        assert!(odd.is_empty(), "{odd:#?}");
        let status = result_schema("agent_status").unwrap();
        assert_eq!(status["properties"]["created_ms"]["minimum"], json!(0), "{status:#}");
    }
}
