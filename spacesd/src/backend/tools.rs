//! The MCP tool list, derived from the operation table: every row whose audience is `Tool`, with
//! the row's name, doc, request schema (`inputSchema`), result schema (`outputSchema`) and
//! behaviour hints (annotations).

use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Map, Value};
use spaces_sdk::op::Audience;

use spaces_service::{request_schema, result_schema, table, Row};

/// The key an array result is wrapped under: MCP tool output is an object, so `space_list` and
/// `agent_list` answer `{"items": [...]}` in `structuredContent` and in their output schema.
pub const ITEMS: &str = "items";

/// The rows served as MCP tools, in catalogue order.
pub fn tool_rows() -> impl Iterator<Item = &'static Row> {
    table().iter().filter(|r| r.info.audience == Audience::Tool)
}

/// One tool: its MCP description and whether its result is wrapped under [`ITEMS`].
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub tool: Tool,
    pub wraps_items: bool,
}

/// Every tool, built once from the table.
pub fn tools() -> &'static [ToolEntry] {
    static TOOLS: OnceLock<Vec<ToolEntry>> = OnceLock::new();
    TOOLS.get_or_init(|| tool_rows().map(entry).collect())
}

/// The tool named `name`, if it is one.
pub fn tool(name: &str) -> Option<&'static ToolEntry> {
    tools().iter().find(|t| t.tool.name == name)
}

fn entry(row: &'static Row) -> ToolEntry {
    let name = row.info.name;
    let input = request_schema(name).unwrap_or_else(|| json!({"type": "object"}));
    let (output, wraps_items) = output_schema(result_schema(name).unwrap_or_else(|| json!({"type": "object"})));
    let mut annotations = ToolAnnotations::new().read_only(row.info.read_only);
    if !row.info.read_only {
        if let Some(destructive) = row.info.destructive() {
            annotations = annotations.destructive(destructive);
        }
        if row.info.idempotent() {
            annotations = annotations.idempotent(true);
        }
    }
    // Spaces' tools act on this host's Spaces only: a closed world.
    annotations = annotations.open_world(false);
    let tool = Tool::new(name, row.info.doc, Arc::new(object(input)))
        .with_raw_output_schema(Arc::new(object(output)))
        .with_annotations(annotations);
    ToolEntry { tool, wraps_items }
}

/// The output schema for a result schema: itself when it describes an object, else (an array)
/// an object with the array under [`ITEMS`]; `$schema` and `$defs` stay at the root.
fn output_schema(mut schema: Value) -> (Value, bool) {
    if schema.get("type").and_then(Value::as_str) != Some("array") {
        return (schema, false);
    }
    let Some(obj) = schema.as_object_mut() else { return (schema, false) };
    let dialect = obj.remove("$schema");
    let defs = obj.remove("$defs");
    let mut root = Map::new();
    if let Some(d) = dialect {
        root.insert("$schema".into(), d);
    }
    root.insert("type".into(), json!("object"));
    root.insert("properties".into(), json!({ ITEMS: Value::Object(obj.clone()) }));
    root.insert("required".into(), json!([ITEMS]));
    if let Some(d) = defs {
        root.insert("$defs".into(), d);
    }
    (Value::Object(root), true)
}

/// The `structuredContent` of a result of `entry`: the value, or `{"items": value}`.
pub fn structured(entry: &ToolEntry, value: Value) -> Value {
    if entry.wraps_items {
        json!({ ITEMS: value })
    } else {
        value
    }
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_operation_is_a_tool_with_object_schemas() {
        let names: Vec<&str> = tools().iter().map(|t| t.tool.name.as_ref()).collect();
        // Independent of how `tools()` is built: the catalogue's operations meant for agents.
        let want: Vec<&str> =
            spaces_sdk::op::catalogue().into_iter().filter(|o| o.audience == spaces_sdk::op::Audience::Tool).map(|o| o.name).collect();
        assert_eq!(names, want);
        assert!(names.contains(&"read") && names.contains(&"agent_start") && !names.contains(&"inbox_works"));
        for t in tools() {
            assert_eq!(t.tool.input_schema.get("type"), Some(&json!("object")), "{}", t.tool.name);
            let out = t.tool.output_schema.as_ref().unwrap();
            assert_eq!(out.get("type"), Some(&json!("object")), "{}", t.tool.name);
        }
    }

    #[test]
    fn array_results_are_wrapped_under_items() {
        let wrapped: Vec<&str> = tools().iter().filter(|t| t.wraps_items).map(|t| t.tool.name.as_ref()).collect();
        assert_eq!(wrapped, ["space_list", "agent_list"]);
        let t = tool("space_list").unwrap();
        let out = t.tool.output_schema.as_ref().unwrap();
        assert_eq!(out["properties"][ITEMS]["type"], json!("array"));
        assert!(out["$defs"].get("SpaceRecord").is_some());
        assert_eq!(structured(t, json!([1])), json!({"items": [1]}));
        assert_eq!(structured(tool("read").unwrap(), json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn annotations_come_from_the_row() {
        let a = |n: &str| tool(n).unwrap().tool.annotations.clone().unwrap();
        assert_eq!(a("read").read_only_hint, Some(true));
        assert_eq!(a("read").destructive_hint, None);
        assert_eq!(a("terminate_process").destructive_hint, Some(true));
        assert_eq!(a("terminate_process").idempotent_hint, Some(true));
        assert_eq!(a("agent_stop").destructive_hint, Some(true));
        assert_eq!(a("work_open").destructive_hint, Some(false));
        assert_eq!(a("apply_patch").read_only_hint, Some(false));
        assert_eq!(a("apply_patch").idempotent_hint, None);
    }
}
