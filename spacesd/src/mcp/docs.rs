//! The tool reference of docs/mcp.md, generated from the tool list ([`crate::backend::tools`]). A test
//! compares the file with it and fails on drift; regenerate with
//! `SPACES_UPDATE_DOCS=1 cargo test -p spacesd --lib`.

/// Marks the start of the generated part of docs/mcp.md.
pub const BEGIN: &str = "<!-- BEGIN GENERATED: tools (spacesd/src/mcp/docs.rs) -->";
/// Marks its end.
pub const END: &str = "<!-- END GENERATED: tools -->";

/// The generated tool reference (Markdown): a summary table with annotations, then each tool's
/// description, `inputSchema` and `outputSchema` exactly as `tools/list` gives them.
pub fn tools_markdown() -> String {
    let mut out = String::new();
    out.push_str("| tool | annotations | what it does |\n|---|---|---|\n");
    for t in crate::backend::tools::tools() {
        let tool = &t.tool;
        out.push_str(&format!("| [`{}`](#{}) | {} | {} |\n", tool.name, tool.name, hints(tool), tool.description.as_deref().unwrap_or("")));
    }
    for t in crate::backend::tools::tools() {
        let tool = &t.tool;
        out.push_str(&format!("\n### {}\n{}\n", tool.name, tool.description.as_deref().unwrap_or("")));
        if t.wraps_items {
            out.push_str(&format!("\nThe result is a list: `structuredContent` is `{{\"{}\": [...]}}`.\n", crate::backend::tools::ITEMS));
        }
        for (label, schema) in [("inputSchema", Some(&tool.input_schema)), ("outputSchema", tool.output_schema.as_ref())] {
            let Some(schema) = schema else { continue };
            let text = serde_json::to_string_pretty(schema.as_ref()).unwrap_or_default();
            out.push_str(&format!("\n<details><summary><code>{label}</code></summary>\n\n```json\n{text}\n```\n</details>\n"));
        }
    }
    out
}

fn hints(tool: &rmcp::model::Tool) -> String {
    let Some(a) = &tool.annotations else { return String::new() };
    let mut parts = Vec::new();
    if a.read_only_hint == Some(true) {
        parts.push("read-only");
    }
    match a.destructive_hint {
        Some(true) => parts.push("destructive"),
        Some(false) => parts.push("additive"),
        None => {}
    }
    if a.idempotent_hint == Some(true) {
        parts.push("idempotent");
    }
    parts.join(", ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn docs_mcp_md_matches_the_tool_list() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/mcp.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let (Some(a), Some(b)) = (text.find(BEGIN), text.find(END)) else {
            panic!("docs/mcp.md lacks the generated-section markers {BEGIN:?} ... {END:?}");
        };
        let want = format!("{BEGIN}\n{}{END}", tools_markdown());
        let have = &text[a..b + END.len()];
        if have != want {
            if std::env::var_os("SPACES_UPDATE_DOCS").is_some() {
                std::fs::write(&path, format!("{}{want}{}", &text[..a], &text[b + END.len()..])).unwrap();
            } else {
                panic!("docs/mcp.md drifted from the MCP tool list; regenerate with `SPACES_UPDATE_DOCS=1 cargo test -p spacesd --lib`");
            }
        }
    }
}
