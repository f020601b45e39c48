//! JSON-RPC 2.0 lines of the Agent Client Protocol (ACP v1): what the client (Spaces) writes,
//! and what it reads from the agent.
//!
//! The transport is newline-delimited JSON on the agent's stdio (ACP spec, "Transports": each
//! message is one line of UTF-8 JSON, no embedded newline). Method names and parameter shapes
//! follow the ACP schema (`agent-client-protocol` v1, <https://agentclientprotocol.com>):
//! `initialize`, `session/new`, `session/load`, `session/resume` (unstable), `session/prompt`
//! (client to agent), `session/cancel` and `session/update` (notifications),
//! `session/request_permission` (agent to client). These are small `serde_json` builders rather
//! than the `agent-client-protocol-schema` crate: the normalizer needs a handful of fields and
//! must keep every line it does not understand (an unknown field or variant never fails a line).

use serde_json::{json, Value};
use spaces_sdk::McpServer;

/// The ACP protocol version this client speaks (`initialize.protocolVersion`).
pub const PROTOCOL_VERSION: u64 = 1;

/// The request id of `initialize`, the first line of every process (the launch plan's
/// `initial_stdin`); the normalizer numbers its own requests from 1.
pub const INITIALIZE_ID: u64 = 0;

/// JSON-RPC "method not found" (an agent request this client does not serve).
pub const METHOD_NOT_FOUND: i64 = -32601;

/// The `initialize` request (id [`INITIALIZE_ID`]): protocol version 1, no client file system
/// and no terminal (the agent uses its own tools), and `clientInfo` naming Spaces.
pub fn initialize() -> String {
    json!({
        "jsonrpc": "2.0",
        "id": INITIALIZE_ID,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
            "clientInfo": {"name": "spaces", "title": "Spaces", "version": env!("CARGO_PKG_VERSION")},
        },
    })
    .to_string()
}

/// A request line `{"jsonrpc":"2.0","id":id,"method":method,"params":params}`.
pub fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A notification line (no id, no answer).
pub fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// The answer to the agent's request `id` (its id echoed as it came: number or string).
pub fn response(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error answer to the agent's request `id`.
pub fn error_response(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// The `params` of `session/new`, `session/load` and `session/resume`: `cwd` (absolute) and the
/// MCP servers in ACP's shape, plus `sessionId` for a load or resume.
pub fn session_params(cwd: &str, mcp_servers: &Value, session_id: Option<&str>) -> Value {
    let mut p = json!({"cwd": cwd, "mcpServers": mcp_servers});
    if let Some(sid) = session_id {
        p["sessionId"] = json!(sid);
    }
    p
}

/// The `params` of `session/prompt`: one text content block.
pub fn prompt_params(session_id: &str, text: &str) -> Value {
    json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
}

/// MCP servers as ACP's `McpServer` list: stdio `{name, command, args, env: [{name, value}]}`,
/// HTTP `{type: "http", name, url, headers: [{name, value}]}` (ACP schema `McpServer`; an
/// agent without `mcpCapabilities.http` may refuse the latter).
pub fn mcp_servers(servers: &[McpServer]) -> Value {
    let pairs =
        |m: &std::collections::BTreeMap<String, String>| -> Vec<Value> { m.iter().map(|(k, v)| json!({"name": k, "value": v})).collect() };
    Value::Array(
        servers
            .iter()
            .map(|s| match s {
                McpServer::Stdio(s) => json!({"name": s.name, "command": s.command, "args": s.args, "env": pairs(&s.env)}),
                McpServer::Http(s) => json!({"type": "http", "name": s.name, "url": s.url, "headers": pairs(&s.headers)}),
            })
            .collect(),
    )
}

/// One line the agent wrote, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of our requests: `result` or `error` (`{code, message, data?}`).
    Response { id: Value, outcome: Result<Value, Value> },
    /// A request of the agent: it waits for an answer with the same `id`.
    Request { id: Value, method: String, params: Value },
    /// A notification of the agent (`session/update`).
    Notification { method: String, params: Value },
}

/// Classify one line: `None` when it is not a JSON-RPC message (not JSON, not an object, or
/// neither a method nor a result/error with an id).
pub fn parse(line: &str) -> Option<Incoming> {
    let v: Value = serde_json::from_str(line).ok()?;
    let obj = v.as_object()?;
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    match (obj.get("id").filter(|id| !id.is_null()), obj.get("method").and_then(Value::as_str)) {
        (Some(id), Some(method)) => Some(Incoming::Request { id: id.clone(), method: method.to_owned(), params }),
        (None, Some(method)) => Some(Incoming::Notification { method: method.to_owned(), params }),
        (Some(id), None) => {
            let outcome = match (obj.get("result"), obj.get("error")) {
                (_, Some(err)) if !err.is_null() => Err(err.clone()),
                (Some(res), _) => Ok(res.clone()),
                _ => return None,
            };
            Some(Incoming::Response { id: id.clone(), outcome })
        }
        (None, None) => None,
    }
}

/// The message of a JSON-RPC error object (`message`, with `data.message` or `data` when
/// present), for reasons and notices.
pub fn error_text(err: &Value) -> String {
    let message = err.get("message").and_then(Value::as_str).unwrap_or("error");
    let detail =
        err.get("data").and_then(|d| d.get("message").and_then(Value::as_str).map(str::to_owned).or_else(|| d.as_str().map(str::to_owned)));
    match detail.filter(|d| !d.is_empty() && d != message) {
        Some(d) => format!("{message}: {d}"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spaces_sdk::{McpHttpServer, McpStdioServer};

    #[test]
    fn lines_are_classified_by_id_and_method() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#),
            Some(Incoming::Response { id: json!(3), outcome: Ok(json!({"stopReason": "end_turn"})) })
        );
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"x"}}"#),
            Some(Incoming::Response { outcome: Err(_), .. })
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{}}"#),
            Some(Incoming::Request { .. })
        ));
        assert!(matches!(parse(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#), Some(Incoming::Notification { .. })));
        assert_eq!(parse("not json"), None);
        assert_eq!(parse(r#"{"jsonrpc":"2.0","id":1}"#), None);
        assert_eq!(parse("[1]"), None);
    }

    #[test]
    fn initialize_speaks_v1_without_client_fs_or_terminal() {
        let v: Value = serde_json::from_str(&initialize()).unwrap_or_default();
        assert_eq!(v["id"], 0);
        assert_eq!(v["params"]["protocolVersion"], 1);
        assert_eq!(v["params"]["clientCapabilities"]["fs"]["writeTextFile"], false);
        assert_eq!(v["params"]["clientInfo"]["name"], "spaces");
    }

    #[test]
    fn mcp_servers_take_acps_shape() {
        let servers = [
            McpServer::Stdio(McpStdioServer {
                name: "echo".into(),
                command: "mcp-echo".into(),
                args: vec!["-v".into()],
                env: [("K".to_owned(), "v".to_owned())].into(),
            }),
            McpServer::Http(McpHttpServer { name: "web".into(), url: "http://127.0.0.1:1/mcp".into(), headers: Default::default() }),
        ];
        assert_eq!(
            mcp_servers(&servers),
            json!([
                {"name": "echo", "command": "mcp-echo", "args": ["-v"], "env": [{"name": "K", "value": "v"}]},
                {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": []},
            ])
        );
    }

    #[test]
    fn error_text_adds_data() {
        assert_eq!(error_text(&json!({"code": -32603, "message": "Internal error", "data": {"message": "boom"}})), "Internal error: boom");
        assert_eq!(error_text(&json!({"code": 1, "message": "x"})), "x");
    }
}
