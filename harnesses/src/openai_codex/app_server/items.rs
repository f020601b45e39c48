//! App-server thread items read as `codex exec --json` items, so one mapping
//! ([`crate::openai_codex::items`]) gives the same tool titles, kinds, outputs and summaries
//! whichever wire Codex spoke.
//!
//! Item shapes (`codex app-server generate-json-schema`, codex-cli 0.171.0, `ThreadItem`), each
//! with `id` and a camelCase `type`:
//! - `agentMessage{text}`, `reasoning{summary: [string], content: [string]}`, `plan{text}`,
//!   `userMessage{content}`
//! - `commandExecution{command, aggregatedOutput: string|null, exitCode: int|null, status:
//!   inProgress|completed|failed|declined}`
//! - `fileChange{changes: [{path, kind: {type: add|delete|update}, diff}], status}`
//! - `mcpToolCall{server, tool, arguments, result: {content, structuredContent}|null, error:
//!   {message}|null, status: inProgress|completed|failed}`
//! - `webSearch{query}`, and others (`dynamicToolCall`, `imageView`, `contextCompaction`, ...)
//!   that have no exec counterpart.

use serde_json::{json, Map, Value};

/// The exec spelling of an app-server status: `inProgress` -> `in_progress`, others as they are.
fn status(item: &Value) -> Value {
    match item.get("status").and_then(Value::as_str) {
        Some("inProgress") => json!("in_progress"),
        Some(s) => json!(s),
        None => Value::Null,
    }
}

/// `item` in the shape `codex exec --json` prints for the same thing, or `None` for an item type
/// exec does not have (the caller keeps those as they are).
pub fn as_exec_item(item: &Value) -> Option<Value> {
    let id = item.get("id").cloned().unwrap_or(Value::Null);
    let ty = item.get("type").and_then(Value::as_str)?;
    let mut out = Map::new();
    out.insert("id".into(), id);
    match ty {
        "agentMessage" => {
            out.insert("type".into(), json!("agent_message"));
            out.insert("text".into(), item.get("text").cloned().unwrap_or(json!("")));
        }
        "reasoning" => {
            out.insert("type".into(), json!("reasoning"));
            out.insert("text".into(), json!(reasoning_text(item)));
        }
        "commandExecution" => {
            out.insert("type".into(), json!("command_execution"));
            out.insert("command".into(), item.get("command").cloned().unwrap_or(json!("")));
            out.insert("aggregated_output".into(), item.get("aggregatedOutput").cloned().unwrap_or(Value::Null));
            out.insert("exit_code".into(), item.get("exitCode").cloned().unwrap_or(Value::Null));
            out.insert("status".into(), status(item));
        }
        "fileChange" => {
            let changes: Vec<Value> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            let kind = c.pointer("/kind/type").or_else(|| c.get("kind")).and_then(Value::as_str).unwrap_or("update");
                            json!({"path": c.get("path").cloned().unwrap_or(json!("?")), "kind": kind})
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.insert("type".into(), json!("file_change"));
            out.insert("changes".into(), Value::Array(changes));
            out.insert("status".into(), status(item));
        }
        "mcpToolCall" => {
            out.insert("type".into(), json!("mcp_tool_call"));
            for k in ["server", "tool", "arguments", "error"] {
                out.insert(k.into(), item.get(k).cloned().unwrap_or(Value::Null));
            }
            let result =
                item.get("result").filter(|r| !r.is_null()).map(|r| json!({"content": r.get("content").cloned().unwrap_or(json!([]))}));
            out.insert("result".into(), result.unwrap_or(Value::Null));
            out.insert("status".into(), status(item));
        }
        "webSearch" => {
            out.insert("type".into(), json!("web_search"));
            out.insert("query".into(), item.get("query").cloned().unwrap_or(json!("")));
        }
        _ => return None,
    }
    Some(Value::Object(out))
}

/// The readable text of a `reasoning` item: its summary parts, else its raw content parts, one
/// per paragraph.
pub fn reasoning_text(item: &Value) -> String {
    let parts = |key: &str| -> Vec<String> {
        item.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default()
    };
    let summary = parts("summary");
    if summary.iter().any(|s| !s.trim().is_empty()) {
        summary.join("\n\n")
    } else {
        parts("content").join("\n\n")
    }
}

/// `turn/plan/updated{plan: [{step, status: pending|inProgress|completed}]}` as an exec
/// `todo_list` item (`items: [{text, completed}]`), for [`crate::openai_codex::items::plan_text`].
pub fn plan_as_todo_list(params: &Value) -> Value {
    let items: Vec<Value> = params
        .get("plan")
        .and_then(Value::as_array)
        .map(|steps| {
            steps
                .iter()
                .map(|s| {
                    json!({"text": s.get("step").and_then(Value::as_str).unwrap_or(""),
                        "completed": s.get("status").and_then(Value::as_str) == Some("completed")})
                })
                .collect()
        })
        .unwrap_or_default();
    json!({"type": "todo_list", "items": items})
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::openai_codex::items::{tool_output, tool_succeeded, tool_view};

    #[test]
    fn a_command_reads_as_its_exec_twin() {
        let item = json!({"type": "commandExecution", "id": "call_4", "command": "/bin/bash -lc 'ls'",
            "status": "completed", "aggregatedOutput": "a\n", "exitCode": 0});
        let exec = as_exec_item(&item).unwrap();
        assert_eq!(tool_view(&exec).unwrap().title, "Run: ls");
        assert!(tool_succeeded(&exec));
        assert_eq!(tool_output(&exec).as_deref(), Some("a\n"));
        let running = as_exec_item(&json!({"type": "commandExecution", "id": "c", "command": "ls", "status": "inProgress"})).unwrap();
        assert_eq!(running["status"], "in_progress");
    }

    #[test]
    fn file_changes_keep_paths_and_kinds() {
        let item = json!({"type": "fileChange", "id": "p", "status": "completed",
            "changes": [{"path": "/w/a.md", "kind": {"type": "add"}, "diff": "+x"}]});
        let exec = as_exec_item(&item).unwrap();
        assert_eq!(tool_view(&exec).unwrap().title, "Edit /w/a.md");
        assert_eq!(tool_output(&exec).as_deref(), Some("add /w/a.md"));
    }

    #[test]
    fn reasoning_prefers_the_summary() {
        assert_eq!(reasoning_text(&json!({"summary": ["a", "b"], "content": ["raw"]})), "a\n\nb");
        assert_eq!(reasoning_text(&json!({"summary": [], "content": ["raw"]})), "raw");
        let plan =
            plan_as_todo_list(&json!({"plan": [{"step": "read", "status": "completed"}, {"step": "write", "status": "inProgress"}]}));
        assert_eq!(crate::openai_codex::items::plan_text(&plan).0, "[x] read\n[ ] write");
    }
}
