//! `scripted-model`: serve a [`Script`] of model replies on 127.0.0.1 until killed.
//!
//! ```text
//! scripted-model --wire anthropic|openai|chat|gemini --script FILE.json [--var NAME=VALUE]... [--port N]
//! ```
//!
//! `FILE.json` is the JSON form of [`Script`], e.g.
//! `{"replies": [{"text": "hello"}], "fallback": {"text": "done"}}`. Every `{{NAME}}` in a string
//! of the script is replaced by the VALUE of `--var NAME=VALUE` (e.g. an absolute path a tool call
//! must name; `scripts/demo` passes `--var SPACE_DIR=...`); a placeholder without a `--var` is an
//! error. Once bound, one line `listening on http://127.0.0.1:PORT` goes to stdout (flushed), so a
//! caller can read the port; requests are logged on stderr (`model_call=true` for each request
//! that consumed a reply). On SIGTERM or Ctrl-C it logs the requests not yet logged, then
//! `scripted-model: served N model calls`, and exits 0.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use spaces_testkit::{Script, ScriptedServer, Wire};

/// Command line of `scripted-model`.
#[derive(Debug, Parser)]
#[command(name = "scripted-model", about = "Serve scripted model replies on 127.0.0.1 (offline agent runs)")]
struct Args {
    /// Which model API to speak.
    #[arg(long, value_enum)]
    wire: WireArg,
    /// The script: JSON form of `spaces_testkit::Script`.
    #[arg(long)]
    script: PathBuf,
    /// Replace `{{NAME}}` in the script's strings by VALUE (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, String)>,
    /// Port to bind on 127.0.0.1 (0 or absent: a random free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

/// `--wire` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum WireArg {
    /// Anthropic Messages streaming (Claude Code).
    Anthropic,
    /// OpenAI Responses streaming (Codex).
    Openai,
    /// OpenAI Chat Completions streaming (opencode's OpenAI-compatible provider).
    Chat,
    /// Gemini API `streamGenerateContent` (Gemini CLI).
    Gemini,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let text = std::fs::read_to_string(&args.script).with_context(|| format!("reading script {}", args.script.display()))?;
    let mut json: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("parsing script {}", args.script.display()))?;
    substitute(&mut json, &args.vars).with_context(|| format!("script {}", args.script.display()))?;
    let script: Script = serde_json::from_value(json).with_context(|| format!("parsing script {}", args.script.display()))?;
    let wire = match args.wire {
        WireArg::Anthropic => Wire::AnthropicMessages,
        WireArg::Openai => Wire::OpenAiResponses,
        WireArg::Chat => Wire::OpenAiChatCompletions,
        WireArg::Gemini => Wire::GeminiStreamGenerateContent,
    };
    let server = ScriptedServer::start_on(wire, script, args.port).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", server.base_url())?;
    out.flush()?;
    drop(out);

    // Log each request on stderr as it arrives, until SIGTERM or Ctrl-C; then log what is left.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut seen = 0;
    let mut stopping = false;
    while !stopping {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => stopping = true,
            _ = term.recv() => stopping = true,
            _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
        }
        let reqs = server.requests();
        for r in reqs.iter().skip(seen) {
            eprintln!("{} {} model_call={}{}", r.method, r.path, r.model_call, describe(r.json.as_ref()));
        }
        seen = reqs.len();
    }
    eprintln!("scripted-model: served {} model calls", server.model_calls().len());
    Ok(())
}

/// `--var NAME=VALUE`.
fn parse_var(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

/// Replace every `{{NAME}}` of `vars` in the strings of `json`; refuse a `{{...}}` left over.
fn substitute(json: &mut serde_json::Value, vars: &[(String, String)]) -> anyhow::Result<()> {
    match json {
        serde_json::Value::String(s) => {
            let mut out = String::with_capacity(s.len());
            let mut rest = s.as_str();
            while let Some(start) = rest.find("{{") {
                out.push_str(&rest[..start]);
                let after = &rest[start + 2..];
                let Some(end) = after.find("}}") else {
                    anyhow::bail!("unclosed placeholder {:?}", &rest[start..]);
                };
                let name = &after[..end];
                let Some((_, value)) = vars.iter().find(|(n, _)| n == name) else {
                    anyhow::bail!("placeholder {{{{{name}}}}} has no --var {name}=VALUE");
                };
                out.push_str(value);
                rest = &after[end + 2..];
            }
            out.push_str(rest);
            *s = out;
        }
        serde_json::Value::Array(items) => {
            for item in items {
                substitute(item, vars)?;
            }
        }
        serde_json::Value::Object(map) => {
            for item in map.values_mut() {
                substitute(item, vars)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A short description of a model request body for the log: model, stream, message count and
/// the start of the last user text.
fn describe(body: Option<&serde_json::Value>) -> String {
    let Some(b) = body else { return String::new() };
    let messages = b.get("messages").and_then(|m| m.as_array());
    let last_text = messages
        .and_then(|m| m.last())
        .and_then(|m| m.get("content"))
        .map(|c| match c {
            serde_json::Value::String(s) => s.clone(),
            other => other
                .as_array()
                .and_then(|a| a.iter().rev().find_map(|x| x.get("text").and_then(|t| t.as_str())))
                .unwrap_or_default()
                .to_owned(),
        })
        .unwrap_or_default();
    let snippet: String = last_text.chars().take(100).collect();
    format!(
        " model={} stream={} max_tokens={} messages={} last={:?}",
        b.get("model").unwrap_or(&serde_json::Value::Null),
        b.get("stream").unwrap_or(&serde_json::Value::Null),
        b.get("max_tokens").unwrap_or(&serde_json::Value::Null),
        messages.map_or(0, Vec::len),
        snippet,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn vars_fill_placeholders_in_nested_strings() {
        let mut v = serde_json::json!({"replies": [{"tool_call": {"name": "Write",
            "input": {"file_path": "{{DIR}}/hello.txt", "content": "{{DIR}} and {{X}}"}}}]});
        let vars = [("DIR".to_owned(), "/tmp/a {{b}}".to_owned()), ("X".to_owned(), "x".to_owned())];
        substitute(&mut v, &vars).unwrap();
        let input = &v["replies"][0]["tool_call"]["input"];
        assert_eq!(input["file_path"], "/tmp/a {{b}}/hello.txt");
        assert_eq!(input["content"], "/tmp/a {{b}} and x");
        let script: Script = serde_json::from_value(v).unwrap();
        assert_eq!(script.replies.len(), 1);
    }

    #[test]
    fn a_placeholder_without_a_var_is_refused() {
        let mut v = serde_json::json!({"replies": [{"text": "in {{SPACE_DIR}}"}]});
        let e = substitute(&mut v, &[]).unwrap_err().to_string();
        assert!(e.contains("{{SPACE_DIR}}") && e.contains("--var SPACE_DIR=VALUE"), "{e}");
        assert!(parse_var("novalue").is_err());
        assert_eq!(parse_var("A=b=c").unwrap(), ("A".to_owned(), "b=c".to_owned()));
    }
}
