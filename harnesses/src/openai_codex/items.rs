//! How `codex exec --json` thread items read as tools, plans and messages.
//!
//! Item shapes (codex-cli 0.171.0, `item.started|updated|completed{item}`), each with `id` and
//! `type`:
//! - `agent_message{text}`, `reasoning{text}`
//! - `command_execution{command, aggregated_output, exit_code: int|null, status:
//!   in_progress|completed|failed|declined}`; `command` is the shell line Codex ran, e.g.
//!   `/bin/bash -lc "ls -la"`
//! - `file_change{changes: [{path (absolute), kind: add|delete|update}], status}`
//! - `mcp_tool_call{server, tool, arguments, result: {content, structured_content}|null,
//!   error: {message}|null, status}`
//! - `web_search{query}`, `todo_list{items: [{text, completed}]}`, `error{message}`

use serde_json::Value;

/// Longest tool output kept in an event's `text`, in characters (the rest is cut with a note;
/// the whole line stays in `raw`).
pub const OUTPUT_MAX_CHARS: usize = 16 * 1024;

/// What a tool item looks like in events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolView {
    /// `tool_title`, e.g. `Run: ls -la`, `Edit /w/a.md`, `docs: search` (an MCP tool).
    pub title: String,
    /// `tool_kind` (ACP tool kinds): `execute`, `edit`, `search`, `other`.
    pub kind: &'static str,
}

/// The `tool_update` closing the Codex tool `id` (seen as `view`) still open when `turn` ends:
/// [`crate::ending::unfinished_tool`], with the text both Codex wires give it.
pub fn unfinished(turn: u32, id: String, view: ToolView) -> crate::draft::EventDraft {
    crate::ending::unfinished_tool(turn, id, view.title, view.kind.to_owned()).text("the turn ended before this tool finished")
}

/// The tool view of an item, or `None` when the item type is not a tool.
pub fn tool_view(item: &Value) -> Option<ToolView> {
    let ty = item.get("type").and_then(Value::as_str)?;
    match ty {
        "command_execution" => {
            let cmd = str_field(item, "command");
            Some(ToolView { title: crate::wording::run_title(&display_command(cmd)), kind: "execute" })
        }
        "file_change" => {
            let paths: Vec<&str> = changes(item).into_iter().map(|(_, p)| p).collect();
            let shown = if paths.is_empty() { "(no files)".to_owned() } else { paths.join(", ") };
            Some(ToolView { title: format!("Edit {shown}"), kind: "edit" })
        }
        "mcp_tool_call" => {
            let server = str_field(item, "server");
            let tool = str_field(item, "tool");
            Some(ToolView { title: crate::wording::mcp_title(server, tool), kind: "other" })
        }
        "web_search" => Some(ToolView { title: format!("Search {}", str_field(item, "query")), kind: "search" }),
        _ => None,
    }
}

/// Whether a finished tool item succeeded: its `status` is `completed` and, for commands, the
/// exit code is 0 (or absent).
pub fn tool_succeeded(item: &Value) -> bool {
    let status = item.get("status").and_then(Value::as_str).unwrap_or("completed");
    if status != "completed" {
        return false;
    }
    match item.get("exit_code").and_then(Value::as_i64) {
        Some(code) => code == 0,
        None => item.get("error").is_none_or(Value::is_null),
    }
}

/// The text of a finished tool item: command output, the file changes, an MCP result or error.
pub fn tool_output(item: &Value) -> Option<String> {
    let ty = item.get("type").and_then(Value::as_str)?;
    let text = match ty {
        "command_execution" => item.get("aggregated_output").and_then(Value::as_str)?.to_owned(),
        "file_change" => changes(item).into_iter().map(|(kind, path)| format!("{kind} {path}")).collect::<Vec<_>>().join("\n"),
        "mcp_tool_call" => {
            if let Some(msg) = item.pointer("/error/message").and_then(Value::as_str) {
                msg.to_owned()
            } else {
                let content = item.pointer("/result/content").and_then(Value::as_array)?;
                content.iter().filter_map(|c| c.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
            }
        }
        _ => return None,
    };
    Some(cut(&text, OUTPUT_MAX_CHARS))
}

/// A one-line summary of a finished tool ([`crate::wording::tool_finished`]): `Run: ls done
/// (exit 0)`, `Edit /w/a.md failed`, `docs: search failed: <the MCP error>`.
pub fn finished_summary(view: &ToolView, item: &Value, ok: bool) -> String {
    let code = item.get("exit_code").and_then(Value::as_i64);
    let why = item.pointer("/error/message").and_then(Value::as_str);
    crate::wording::tool_finished(&view.title, ok, code, why)
}

/// A `todo_list` as text, one `[x] step` / `[ ] step` line per item, and its summary
/// (`plan: 1/3 done`).
pub fn plan_text(item: &Value) -> (String, String) {
    let items = item.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut done = 0;
    let lines: Vec<String> = items
        .iter()
        .map(|it| {
            let completed = it.get("completed").and_then(Value::as_bool).unwrap_or(false);
            if completed {
                done += 1;
            }
            let mark = if completed { "x" } else { " " };
            format!("[{mark}] {}", str_field(it, "text"))
        })
        .collect();
    (lines.join("\n"), crate::wording::plan(done, items.len()))
}

/// The shell line without Codex's `bash -lc` wrapper: `/bin/bash -lc "ls -la"` -> `ls -la`.
pub fn display_command(cmd: &str) -> String {
    const WRAPPERS: [&str; 6] = ["/bin/bash -lc ", "bash -lc ", "/bin/zsh -lc ", "zsh -lc ", "/bin/sh -c ", "sh -c "];
    let Some(rest) = WRAPPERS.iter().find_map(|w| cmd.strip_prefix(w)) else {
        return cmd.to_owned();
    };
    if rest.len() >= 2 && rest.starts_with('\'') && rest.ends_with('\'') {
        // POSIX single quotes: `'\''` is an embedded quote.
        return rest[1..rest.len() - 1].replace("'\\''", "'");
    }
    if rest.len() >= 2 && rest.starts_with('"') && rest.ends_with('"') {
        let inner = &rest[1..rest.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if let Some(&next) = chars.peek() {
                    if matches!(next, '\\' | '"' | '$' | '`') {
                        out.push(next);
                        chars.next();
                        continue;
                    }
                }
            }
            out.push(c);
        }
        return out;
    }
    rest.to_owned()
}

/// `(kind, path)` of each change of a `file_change` item.
fn changes(item: &Value) -> Vec<(&str, &str)> {
    item.get("changes")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| (c.get("kind").and_then(Value::as_str).unwrap_or("update"), c.get("path").and_then(Value::as_str).unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default()
}

/// A string field or `""`.
pub fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `text` cut to `max` characters with a note saying how much was left out.
fn cut(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push_str(&format!("\n[... {} more characters]", total - max));
    out
}

/// What a Codex turn cut off by its process's end says (both wires, `exec` and `app-server`):
/// `the run was stopped (exit code N)`, `interrupted (signal N)`, or `<who> ended without
/// finishing the turn (...)` followed by the last error the CLI reported and its stderr `tail`.
pub fn cut_off_text(
    who: &str,
    reason: spaces_sdk::StopReason,
    exit: &crate::plan::ExitInfo,
    last_error: Option<&str>,
    tail: &str,
) -> String {
    let how = match (exit.code, exit.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        (None, None) => "unknown exit status".to_owned(),
    };
    match reason {
        spaces_sdk::StopReason::Stopped => format!("the run was stopped ({how})"),
        spaces_sdk::StopReason::Interrupted => format!("interrupted ({how})"),
        _ => {
            let mut text = format!("{who} ended without finishing the turn ({how})");
            if let Some(e) = last_error {
                text.push_str(&format!(": {e}"));
            }
            if !tail.is_empty() {
                text.push_str(&format!("\nstderr:\n{tail}"));
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bash_wrappers_are_removed_from_titles() {
        assert_eq!(display_command("/bin/bash -lc 'ls -la'"), "ls -la");
        assert_eq!(
            display_command(r#"/bin/bash -lc "printf 'hello\\n' > hello.txt && ls -la""#),
            r"printf 'hello\n' > hello.txt && ls -la"
        );
        assert_eq!(display_command("/bin/bash -lc 'echo '\\''hi'\\'''"), "echo 'hi'");
        assert_eq!(display_command("ls"), "ls");
    }

    #[test]
    fn a_command_with_a_nonzero_exit_failed() {
        let ok = json!({"type": "command_execution", "status": "completed", "exit_code": 0});
        let bad = json!({"type": "command_execution", "status": "failed", "exit_code": 2});
        assert!(tool_succeeded(&ok));
        assert!(!tool_succeeded(&bad));
    }

    #[test]
    fn plans_render_as_checkboxes() {
        let item = json!({"type": "todo_list", "items": [
            {"text": "read", "completed": true}, {"text": "write", "completed": false}]});
        assert_eq!(plan_text(&item), ("[x] read\n[ ] write".to_owned(), "plan: 1/2 done".to_owned()));
    }
}
