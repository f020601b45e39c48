//! MCP servers an agent run connects to (`SpaceAgentOptions.mcp_servers`).
//!
//! Exactly two shapes, told apart by their keys, as in the MCP client configs users already
//! write: `{name, url, headers?}` (Streamable HTTP) and `{name, command, args?, env?}` (stdio).
//! Decoding goes through one flat record that refuses unknown keys, so a misspelt key is named
//! (`options.mcp_servers[0].urll`, "did you mean `url`?") instead of vanishing in an untagged
//! enum's "did not match any variant".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One MCP server for the agent's CLI: Streamable HTTP (`{name, url, headers?}`) or stdio
/// (`{name, command, args?, env?}`). Names are 1-64 letters, digits, `_` or `-`, unique in a
/// run; the CLI calls the server's tools `mcp__<name>__<tool>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum McpServer {
    /// A Streamable HTTP server at `url`.
    Http(McpHttpServer),
    /// A stdio server the CLI starts as `command args...`.
    Stdio(McpStdioServer),
}

/// A Streamable HTTP MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpHttpServer {
    /// The server's name (1-64 letters, digits, `_`, `-`; unique in the run).
    pub name: String,
    /// Its endpoint, `http://` or `https://`.
    pub url: String,
    /// HTTP headers sent with every request (e.g. `Authorization`). Values are secrets: kept
    /// 0600 in the run directory, never stored in clear elsewhere, redacted (8+ characters) in
    /// events, tails and logs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// A stdio MCP server, started by the agent's CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpStdioServer {
    /// The server's name (1-64 letters, digits, `_`, `-`; unique in the run).
    pub name: String,
    /// The program to run (a path, or a name looked up on the agent's `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment for the server on top of what the CLI passes it. Values are secrets like
    /// `options.env`: kept 0600 in the run directory, redacted (8+ characters) in events, tails
    /// and logs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl McpServer {
    /// The server's name.
    pub fn name(&self) -> &str {
        match self {
            McpServer::Http(s) => &s.name,
            McpServer::Stdio(s) => &s.name,
        }
    }

    /// Its secret values: header values of an HTTP server, env values of a stdio server.
    pub fn secret_values(&self) -> Vec<&str> {
        match self {
            McpServer::Http(s) => s.headers.values().map(String::as_str).collect(),
            McpServer::Stdio(s) => s.env.values().map(String::as_str).collect(),
        }
    }
}

/// Every key either shape may have; the shape is chosen by `url` or `command`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    name: String,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
}

impl TryFrom<Fields> for McpServer {
    type Error = &'static str;

    fn try_from(f: Fields) -> Result<Self, Self::Error> {
        match (f.url, f.command) {
            (Some(_), Some(_)) => Err("an MCP server has either `url` (Streamable HTTP) or `command` (stdio), not both"),
            (None, None) => Err("an MCP server needs `url` (Streamable HTTP) or `command` (stdio)"),
            (Some(url), None) => {
                if f.args.is_some() || f.env.is_some() {
                    return Err("`args` and `env` belong to stdio servers (with `command`); an HTTP server (with `url`) takes `headers`");
                }
                Ok(McpServer::Http(McpHttpServer { name: f.name, url, headers: f.headers.unwrap_or_default() }))
            }
            (None, Some(command)) => {
                if f.headers.is_some() {
                    return Err("`headers` belong to HTTP servers (with `url`); a stdio server (with `command`) takes `args` and `env`");
                }
                Ok(McpServer::Stdio(McpStdioServer {
                    name: f.name,
                    command,
                    args: f.args.unwrap_or_default(),
                    env: f.env.unwrap_or_default(),
                }))
            }
        }
    }
}

impl<'de> Deserialize<'de> for McpServer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        McpServer::try_from(Fields::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{decode, AgentStartRequest, ErrorCode};

    fn start_with(servers: serde_json::Value) -> Result<AgentStartRequest, crate::error::ApiError> {
        decode("agent_start", json!({"space": "s", "agent": "claude-code", "prompt": "hi", "options": {"mcp_servers": servers}}))
    }

    fn servers(req: AgentStartRequest) -> Vec<McpServer> {
        req.options.unwrap().mcp_servers
    }

    #[test]
    fn both_shapes_decode_and_serialize_back_unchanged() {
        let wire = json!([
            {"name": "docs", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc"}},
            {"name": "echo", "command": "/bin/mcp-echo", "args": ["--x"], "env": {"TOKEN": "t"}},
            {"name": "bare", "command": "npx"},
            {"name": "open", "url": "http://127.0.0.1:9/mcp"}
        ]);
        let got = servers(start_with(wire.clone()).unwrap());
        assert_eq!(
            got,
            [
                McpServer::Http(McpHttpServer {
                    name: "docs".into(),
                    url: "https://mcp.example.com/mcp".into(),
                    headers: [("Authorization".to_owned(), "Bearer abc".to_owned())].into(),
                }),
                McpServer::Stdio(McpStdioServer {
                    name: "echo".into(),
                    command: "/bin/mcp-echo".into(),
                    args: vec!["--x".into()],
                    env: [("TOKEN".to_owned(), "t".to_owned())].into(),
                }),
                McpServer::Stdio(McpStdioServer { name: "bare".into(), command: "npx".into(), args: vec![], env: BTreeMap::new() }),
                McpServer::Http(McpHttpServer { name: "open".into(), url: "http://127.0.0.1:9/mcp".into(), headers: BTreeMap::new() }),
            ]
        );
        assert_eq!(serde_json::to_value(&got).unwrap(), wire);
    }

    #[test]
    fn a_misspelt_key_is_named_with_a_suggestion() {
        let e = start_with(json!([{"name": "x", "urll": "http://h/mcp"}])).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert_eq!(e.field.as_deref(), Some("options.mcp_servers[0].urll"));
        assert!(e.message.contains("did you mean `url`?"), "{}", e.message);
        let e = start_with(json!([{"name": "x", "command": "c"}, {"name": "y", "command": "c", "Env": {}}])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("options.mcp_servers[1].Env"));
        assert!(e.message.contains("did you mean `env`?"), "{}", e.message);
    }

    #[test]
    fn shapes_do_not_mix() {
        let cases = [
            (json!({"name": "x"}), "needs `url` (Streamable HTTP) or `command` (stdio)"),
            (json!({"name": "x", "url": "http://h", "command": "c"}), "not both"),
            (json!({"name": "x", "url": "http://h", "env": {}}), "belong to stdio servers"),
            (json!({"name": "x", "command": "c", "headers": {}}), "belong to HTTP servers"),
        ];
        for (server, says) in cases {
            let e = start_with(json!([server])).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument);
            assert_eq!(e.field.as_deref(), Some("options.mcp_servers[0]"), "{server}");
            assert!(e.message.contains(says), "{server}: {}", e.message);
        }
        let e = start_with(json!([{"url": "http://h"}])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("options.mcp_servers[0].name"), "{}", e.message);
    }

    #[test]
    fn secret_values_are_headers_or_env() {
        let s = servers(
            start_with(json!([
                {"name": "a", "url": "http://h", "headers": {"X-Key": "k1"}},
                {"name": "b", "command": "c", "env": {"K": "k2"}}
            ]))
            .unwrap(),
        );
        assert_eq!(s[0].secret_values(), ["k1"]);
        assert_eq!(s[1].secret_values(), ["k2"]);
        assert_eq!((s[0].name(), s[1].name()), ("a", "b"));
    }
}
