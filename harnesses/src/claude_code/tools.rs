//! Titles, kinds and texts of Claude Code tool calls (`tool_use` blocks) and results.

use serde_json::Value;

use crate::draft::one_line;

/// Longest `text` kept on a tool event (tool input or output), in characters; the full line
/// stays in `raw`.
pub const TOOL_TEXT_MAX_CHARS: usize = 8000;

/// How a tool call is shown: `title` (e.g. `Write hello.txt`, `Run: ls`) and `kind`, one of
/// `edit | execute | read | search | fetch | think | other`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLabel {
    /// One line, e.g. `Write hello.txt`, `Run: ls`, `files: read` (an MCP tool).
    pub title: String,
    /// `edit | execute | read | search | fetch | think | other`.
    pub kind: &'static str,
}

/// The label of a call to the tool `name` with `input`. File paths under `cwd` are shown
/// relative to it. MCP tools (`mcp__server__tool`) are titled `server: tool`, kind `other`.
pub fn label(name: &str, input: &Value, cwd: Option<&str>) -> ToolLabel {
    let s = |key: &str| input.get(key).and_then(Value::as_str).map(one_line);
    let path = |key: &str| s(key).map(|p| relative(&p, cwd));
    let (title, kind) = match name {
        "Bash" => (crate::wording::run_title(&s("command").unwrap_or_default()), "execute"),
        "BashOutput" | "KillShell" | "KillBash" => (name.to_owned(), "execute"),
        "Write" | "Edit" | "MultiEdit" => (with(name, " ", path("file_path")), "edit"),
        "NotebookEdit" => (with(name, " ", path("notebook_path")), "edit"),
        "Read" => (with(name, " ", path("file_path")), "read"),
        "Glob" | "Grep" => (with(name, " ", s("pattern")), "search"),
        "LS" => (with(name, " ", path("path")), "search"),
        "WebFetch" => (with("Fetch", " ", s("url")), "fetch"),
        "WebSearch" => (with("Search", " ", s("query")), "fetch"),
        "Task" | "Agent" => (with(name, ": ", s("description")), "think"),
        "TodoWrite" => ("Update todos".to_owned(), "think"),
        _ => match name.strip_prefix("mcp__").and_then(|rest| rest.split_once("__")) {
            Some((server, tool)) => (crate::wording::mcp_title(server, tool), "other"),
            None => (name.to_owned(), "other"),
        },
    };
    ToolLabel { title: one_line(&title), kind }
}

/// The text of a `tool_result` block's `content`: a string, or the `text` of each text block
/// joined by newlines (images and other blocks are named in brackets).
pub fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("text").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => format!("[{}]", b.get("type").and_then(Value::as_str).unwrap_or("block")),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// `text` cut to [`TOOL_TEXT_MAX_CHARS`] characters (with `…` when cut).
pub fn cap(text: &str) -> String {
    if text.chars().count() <= TOOL_TEXT_MAX_CHARS {
        text.to_owned()
    } else {
        let mut out: String = text.chars().take(TOOL_TEXT_MAX_CHARS - 1).collect();
        out.push('…');
        out
    }
}

/// The `TodoWrite` list's summary: `plan: D/T done` (D todos `completed` of T).
pub fn todo_summary(input: &Value) -> String {
    let todos = input.get("todos").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let done = todos.iter().filter(|t| t.get("status").and_then(Value::as_str) == Some("completed")).count();
    crate::wording::plan(done, todos.len())
}

/// The `TodoWrite` list as plan text: one `[status] content` line per todo.
pub fn todo_plan(input: &Value) -> Option<String> {
    let todos = input.get("todos")?.as_array()?;
    let lines: Vec<String> = todos
        .iter()
        .map(|t| {
            let status = t.get("status").and_then(Value::as_str).unwrap_or("pending");
            let content = t.get("content").and_then(Value::as_str).unwrap_or("");
            format!("[{status}] {content}")
        })
        .collect();
    Some(lines.join("\n"))
}

fn with(prefix: &str, sep: &str, arg: Option<String>) -> String {
    match arg {
        Some(a) if !a.is_empty() => format!("{prefix}{sep}{a}"),
        _ => prefix.to_owned(),
    }
}

fn relative(path: &str, cwd: Option<&str>) -> String {
    let Some(cwd) = cwd.map(|c| c.trim_end_matches('/')).filter(|c| !c.is_empty()) else {
        return path.to_owned();
    };
    match path.strip_prefix(cwd).and_then(|rest| rest.strip_prefix('/')) {
        Some(rel) if !rel.is_empty() => rel.to_owned(),
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn titles_and_kinds() {
        let cwd = Some("/w/ws");
        let cases = [
            ("Write", json!({"file_path": "/w/ws/hello.txt"}), "Write hello.txt", "edit"),
            ("Write", json!({"file_path": "/etc/x"}), "Write /etc/x", "edit"),
            ("Bash", json!({"command": "ls\nwc"}), "Run: ls", "execute"),
            ("Read", json!({"file_path": "/w/ws/a/b.rs"}), "Read a/b.rs", "read"),
            ("Grep", json!({"pattern": "fn main"}), "Grep fn main", "search"),
            ("WebFetch", json!({"url": "https://x.y"}), "Fetch https://x.y", "fetch"),
            ("mcp__files__read", json!({}), "files: read", "other"),
            ("Frobnicate", json!({}), "Frobnicate", "other"),
        ];
        for (name, input, title, kind) in cases {
            assert_eq!(label(name, &input, cwd), ToolLabel { title: title.into(), kind }, "{name}");
        }
    }

    #[test]
    fn result_text_joins_blocks() {
        let c = json!([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]);
        assert_eq!(result_text(Some(&c)), "a\n[image]\nb");
        assert_eq!(result_text(Some(&json!("plain"))), "plain");
        assert_eq!(result_text(None), "");
    }
}
