//! `mcp-echo`: the smallest stdio MCP server an agent CLI accepts, with one tool, `echo`.
//!
//! It proves the harness side of `options.mcp_servers` without depending on an MCP SDK: the CLI
//! starts it, lists its tool, calls it, and the model sees the answer. The wire is
//! newline-delimited JSON-RPC 2.0 on stdin/stdout (MCP stdio transport): `initialize` (the
//! client's protocol version is echoed back), `ping`, `tools/list`, `tools/call`; notifications
//! (no `id`) are ignored, other methods get `-32601`. It ends when stdin closes.
//!
//! `echo {text}` answers `echo: <text>`, prefixed by `$MCP_ECHO_PREFIX` when that is set (so a
//! test can see that a server's `env` reached it).

use std::io::{BufRead, Write};

use serde_json::{json, Value};

/// The tool's name.
pub const TOOL: &str = "echo";
/// The protocol version answered when the client names none.
const DEFAULT_PROTOCOL: &str = "2025-06-18";

/// Serve MCP on `input`/`output` until `input` ends. `prefix` is `$MCP_ECHO_PREFIX`.
pub fn serve(input: impl BufRead, mut output: impl Write, prefix: Option<&str>) -> std::io::Result<()> {
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = answer(&line, prefix) {
            writeln!(output, "{reply}")?;
            output.flush()?;
        }
    }
    Ok(())
}

/// The reply to one JSON-RPC line, if it needs one (requests do; notifications do not).
pub fn answer(line: &str, prefix: Option<&str>) -> Option<Value> {
    let msg: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, -32700, &format!("parse error: {e}"))),
    };
    let id = msg.get("id").cloned()?;
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let result = match msg.get("method").and_then(Value::as_str).unwrap_or("") {
        "initialize" => json!({
            "protocolVersion": params.get("protocolVersion").and_then(Value::as_str).unwrap_or(DEFAULT_PROTOCOL),
            "capabilities": { "tools": { "listChanged": false } },
            "serverInfo": { "name": "mcp-echo", "version": env!("CARGO_PKG_VERSION") }
        }),
        "ping" => json!({}),
        "tools/list" => json!({
            "tools": [{
                "name": TOOL,
                "description": "Echo the given text back.",
                "inputSchema": {
                    "type": "object",
                    "properties": { "text": { "type": "string", "description": "What to echo." } },
                    "required": ["text"]
                }
            }]
        }),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if name != TOOL {
                return Some(error(id, -32602, &format!("unknown tool {name:?}")));
            }
            let text = params.pointer("/arguments/text").and_then(Value::as_str).unwrap_or("");
            let out = match prefix {
                Some(p) => format!("{p} echo: {text}"),
                None => format!("echo: {text}"),
            };
            json!({ "content": [{ "type": "text", "text": out }], "isError": false })
        }
        other => return Some(error(id, -32601, &format!("method not found: {other}"))),
    };
    Some(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// The headers of each request an [`HttpEchoServer`] received.
type SeenHeaders = std::sync::Arc<std::sync::Mutex<Vec<Vec<(String, String)>>>>;

/// The same one-tool server over MCP Streamable HTTP at `http://127.0.0.1:PORT/mcp`: each POSTed
/// JSON-RPC request is answered with one `application/json` message (notifications get 202),
/// `initialize` assigns an `Mcp-Session-Id`, GET (a server-to-client stream) is 405 as the
/// transport allows. Every request's headers are recorded, so a test can see that the headers
/// it configured arrived. Dropping it stops the server.
pub struct HttpEchoServer {
    addr: std::net::SocketAddr,
    headers: SeenHeaders,
    task: tokio::task::JoinHandle<()>,
}

impl HttpEchoServer {
    /// Bind 127.0.0.1 on a random port and serve in the background.
    pub async fn start() -> anyhow::Result<Self> {
        use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
        use axum::response::{IntoResponse, Response};

        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let headers = SeenHeaders::default();
        let seen = headers.clone();
        let handler = move |method: Method, h: HeaderMap, body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                if let Ok(mut all) = seen.lock() {
                    all.push(h.iter().map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect());
                }
                if method != Method::POST {
                    return StatusCode::METHOD_NOT_ALLOWED.into_response();
                }
                let line = String::from_utf8_lossy(&body);
                let Some(reply) = answer(&line, None) else {
                    return StatusCode::ACCEPTED.into_response();
                };
                let mut resp: Response = reply.to_string().into_response();
                resp.headers_mut().insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                if line.contains("\"initialize\"") {
                    resp.headers_mut().insert("mcp-session-id", HeaderValue::from_static("mcp-echo-session"));
                }
                resp
            }
        };
        let app = axum::Router::new().route("/mcp", axum::routing::any(handler));
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("mcp-echo http server ended: {e}");
            }
        });
        Ok(Self { addr, headers, task })
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The headers of every request so far, in arrival order (names lower-case).
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        self.headers.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

impl Drop for HttpEchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(lines: &[Value], prefix: Option<&str>) -> Vec<Value> {
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let mut out = Vec::new();
        serve(input.as_bytes(), &mut out, prefix).ok();
        String::from_utf8_lossy(&out).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    #[test]
    fn initialize_list_and_call() {
        let replies = session(
            &[
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
                json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
                json!({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}),
            ],
            Some("[p]"),
        );
        assert_eq!(replies.len(), 4, "no reply to the notification: {replies:?}");
        assert_eq!(replies[0]["result"]["protocolVersion"], "2025-03-26");
        assert_eq!(replies[0]["result"]["capabilities"], json!({"tools": {"listChanged": false}}));
        assert_eq!(replies[1]["result"]["tools"][0]["name"], "echo");
        assert_eq!(
            replies[2],
            json!({"jsonrpc": "2.0", "id": "c", "result": {"content": [{"type": "text", "text": "[p] echo: hi"}], "isError": false}})
        );
        assert_eq!(replies[3]["error"]["code"], -32601);
    }

    #[test]
    fn unknown_tools_and_bad_lines_are_errors() {
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}"#, None).map(|v| v["error"]["code"].clone()),
            Some(json!(-32602))
        );
        assert_eq!(answer("not json", None).map(|v| v["error"]["code"].clone()), Some(json!(-32700)));
    }
}
