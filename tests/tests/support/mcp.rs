//! Two small MCP clients written out by hand, so the tests see the bytes on the wire:
//! [`StdioMcp`] runs `spacesd mcp` and speaks newline-delimited JSON-RPC on its stdin/stdout;
//! [`HttpMcp`] speaks Streamable HTTP (POST, `Mcp-Session-Id`, SSE answers) to `/mcp` over TCP or
//! the Unix socket. Both implement [`Mcp`] for the tests that run on either.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::spacesd_bin;

/// The protocol revision the tests ask for.
pub const PROTOCOL: &str = "2025-11-25";

/// A client that can call tools.
pub trait Mcp {
    /// `tools/call`: the whole `CallToolResult`.
    fn call(&mut self, name: &str, args: Value) -> Value;
    /// `tools/list`: the tools.
    fn list_tools(&mut self) -> Vec<Value>;

    /// A call that must succeed: its `structuredContent`, checked against its text content.
    fn ok(&mut self, name: &str, args: Value) -> Value {
        let r = self.call(name, args.clone());
        success(name, &args, &r)
    }

    /// A call that must be refused: the error JSON of its text content.
    fn refused(&mut self, name: &str, args: Value) -> Value {
        let r = self.call(name, args.clone());
        refusal(name, &args, &r)
    }
}

/// The `structuredContent` of a successful result; its one text content holds the same JSON.
pub fn success(name: &str, args: &Value, r: &Value) -> Value {
    assert_eq!(r["isError"], json!(false), "{name} {args} was refused: {r}");
    let structured = r["structuredContent"].clone();
    assert!(structured.is_object(), "{name}: structuredContent must be an object: {r}");
    let content = r["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "{name}: one text content: {r}");
    assert_eq!(content[0]["type"], "text");
    let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, structured, "{name}: the text content is the structured JSON");
    structured
}

/// The error JSON of a refusal: `isError`, no `structuredContent`, the error as text.
pub fn refusal(name: &str, args: &Value, r: &Value) -> Value {
    assert_eq!(r["isError"], json!(true), "{name} {args} should be refused: {r}");
    assert!(r.get("structuredContent").is_none(), "{name}: no structuredContent on an error: {r}");
    let content = r["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "{r}");
    serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap()
}

fn initialize_params() -> Value {
    json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "spaces-e2e", "version": "0"}})
}

// ----- stdio -----

/// `spacesd mcp` as a child: requests on its stdin, every stdout line checked to be one
/// JSON-RPC message. Killed on drop.
pub struct StdioMcp {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    /// Messages read but not consumed yet (notifications, other answers), in arrival order.
    pending: Vec<Value>,
    next_id: u64,
    /// Stdout lines that were not a JSON-RPC message (must stay empty).
    pub stray: Arc<Mutex<Vec<String>>>,
    /// Where the child's stderr goes.
    pub stderr: PathBuf,
}

impl StdioMcp {
    /// Starts `spacesd mcp --state-dir STATE` with extra environment; stderr to `stderr`.
    pub fn start(state: &Path, env: &[(&str, &str)], stderr: &Path) -> StdioMcp {
        Self::start_with_args(state, &[], env, stderr)
    }

    /// The same with extra `mcp` arguments (`--space NAME`, `--no-autostart`).
    pub fn start_with_args(state: &Path, args: &[&str], env: &[(&str, &str)], stderr: &Path) -> StdioMcp {
        let mut cmd = Command::new(spacesd_bin());
        super::hermetic(&mut cmd)
            .arg("--state-dir")
            .arg(state)
            .arg("mcp")
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn spacesd mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stray = Arc::new(Mutex::new(Vec::new()));
        let stray2 = stray.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) if v.get("jsonrpc") == Some(&json!("2.0")) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    _ => stray2.lock().unwrap().push(line.chars().take(200).collect()),
                }
            }
        });
        StdioMcp { child, stdin, rx, pending: Vec::new(), next_id: 1, stray, stderr: stderr.to_owned() }
    }

    /// `initialize` then `notifications/initialized`; the initialize result.
    pub fn initialize(&mut self) -> Value {
        let r = self.request("initialize", initialize_params());
        self.notify("notifications/initialized", json!({}));
        r
    }

    /// Writes one message line.
    pub fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id without waiting.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The answer (result or error message) to request `id`, or `None` after `timeout`.
    pub fn answer(&mut self, id: u64, timeout: Duration) -> Option<Value> {
        let is_it = |m: &Value| m.get("id") == Some(&json!(id)) && m.get("method").is_none();
        if let Some(i) = self.pending.iter().position(is_it) {
            return Some(self.pending.remove(i));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(m) if is_it(&m) => return Some(m),
                Ok(m) => self.pending.push(m),
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => panic!("spacesd mcp closed stdout; stderr:\n{}", self.stderr_text()),
            }
        }
    }

    /// A request's result (panics on a JSON-RPC error or after 30 s).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let m = self.answer(id, Duration::from_secs(30)).unwrap_or_else(|| panic!("no answer to {method} within 30 s"));
        assert!(m.get("error").is_none(), "{method}: {m}");
        m["result"].clone()
    }

    /// The notifications received so far with `method`, removed from the pending list.
    pub fn notifications(&mut self, method: &str) -> Vec<Value> {
        while let Ok(m) = self.rx.try_recv() {
            self.pending.push(m);
        }
        let (hits, rest) = std::mem::take(&mut self.pending).into_iter().partition(|m| m["method"] == method);
        self.pending = rest;
        hits
    }

    /// Waits up to `timeout` for a notification with `method` whose params match `pred`.
    pub fn wait_notification(&mut self, method: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(n) = self.notifications(method).into_iter().find(|n| pred(&n["params"])) {
                return Some(n);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            if let Ok(m) = self.rx.recv_timeout(left.min(Duration::from_millis(50))) {
                self.pending.push(m);
            }
        }
    }

    /// Closes the child's stdin (the client goes away).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The exit status within `timeout`, or `None`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Mcp for StdioMcp {
    fn call(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))
    }

    fn list_tools(&mut self) -> Vec<Value> {
        self.request("tools/list", json!({}))["tools"].as_array().unwrap().clone()
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ----- Streamable HTTP -----

/// Where `/mcp` is.
#[derive(Debug, Clone)]
pub enum Dial {
    /// Loopback TCP with the daemon's bearer token.
    Tcp { addr: String, token: String },
    /// The daemon's Unix socket.
    Unix(PathBuf),
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of an SSE or JSON body.
    pub fn messages(&self) -> Vec<Value> {
        if self.header("content-type").is_some_and(|t| t.starts_with("application/json")) {
            return serde_json::from_str(&self.body).into_iter().collect();
        }
        let mut out = Vec::new();
        for event in self.body.split("\n\n") {
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:").map(|d| d.strip_prefix(' ').unwrap_or(d))).collect();
            if let Ok(v) = serde_json::from_str::<Value>(&data.join("\n")) {
                out.push(v);
            }
        }
        out
    }
}

/// A Streamable HTTP client of `/mcp`: one connection per POST (`Connection: close`).
pub struct HttpMcp {
    pub dial: Dial,
    /// The `Host` header sent.
    pub host: String,
    pub session: Option<String>,
    next_id: u64,
}

impl HttpMcp {
    /// A client of `dial`; `Host` is `localhost:<port>` on TCP, `localhost` on the socket.
    pub fn new(dial: Dial) -> HttpMcp {
        let host = match &dial {
            Dial::Tcp { addr, .. } => format!("localhost:{}", addr.rsplit(':').next().unwrap()),
            Dial::Unix(_) => "localhost".to_owned(),
        };
        HttpMcp { dial, host, session: None, next_id: 1 }
    }

    /// POST `body` to `/mcp` with the usual headers (Host, token, session, protocol version)
    /// plus `extra` (which replace a usual one of the same name).
    pub fn post(&self, body: &Value, extra: &[(&str, &str)]) -> Reply {
        self.send("POST", &body.to_string(), extra)
    }

    /// `DELETE /mcp`: ends this client's session.
    pub fn delete(&self) -> Reply {
        self.send("DELETE", "", &[])
    }

    fn send(&self, method: &str, body: &str, extra: &[(&str, &str)]) -> Reply {
        let mut headers: Vec<(String, String)> = vec![
            ("Host".into(), self.host.clone()),
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), "application/json, text/event-stream".into()),
            ("Connection".into(), "close".into()),
        ];
        if let Dial::Tcp { token, .. } = &self.dial {
            headers.push(("Authorization".into(), format!("Bearer {token}")));
        }
        if let Some(s) = &self.session {
            headers.push(("Mcp-Session-Id".into(), s.clone()));
            headers.push(("MCP-Protocol-Version".into(), PROTOCOL.into()));
        }
        for (k, v) in extra {
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            headers.push(((*k).into(), (*v).into()));
        }
        let mut req = format!("{method} /mcp HTTP/1.1\r\n");
        for (k, v) in &headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        let raw = match &self.dial {
            Dial::Tcp { addr, .. } => exchange(std::net::TcpStream::connect(addr).unwrap(), &req),
            Dial::Unix(p) => exchange(std::os::unix::net::UnixStream::connect(p).unwrap(), &req),
        };
        parse_reply(&raw)
    }

    /// `GET /mcp` (the SSE stream of this client's session) with `extra` headers, e.g.
    /// `Last-Event-ID`. A stream may stay open for ever, so the answer is read for at most
    /// `within`: the reply read so far, and whether the server ended it by then.
    pub fn get(&self, extra: &[(&str, &str)], within: Duration) -> (Reply, bool) {
        let mut req = format!("GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nConnection: close\r\n", self.host);
        if let Dial::Tcp { token, .. } = &self.dial {
            req.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if let Some(s) = &self.session {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: {PROTOCOL}\r\n"));
        }
        for (k, v) in extra {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        fn read_for<S: Read + Write>(mut s: S, req: &str, within: Duration, timeout: impl Fn(&S, Duration)) -> (Vec<u8>, bool) {
            s.write_all(req.as_bytes()).unwrap();
            let deadline = Instant::now() + within;
            let mut out = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return (out, false);
                }
                timeout(&s, left);
                match s.read(&mut buf) {
                    Ok(0) => return (out, true),
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return (out, false),
                    Err(e) => panic!("reading GET /mcp: {e}"),
                }
            }
        }
        let (raw, ended) = match &self.dial {
            Dial::Tcp { addr, .. } => {
                read_for(std::net::TcpStream::connect(addr).unwrap(), &req, within, |s, t| s.set_read_timeout(Some(t)).unwrap())
            }
            Dial::Unix(p) => {
                read_for(std::os::unix::net::UnixStream::connect(p).unwrap(), &req, within, |s, t| s.set_read_timeout(Some(t)).unwrap())
            }
        };
        assert!(raw.windows(4).any(|w| w == b"\r\n\r\n"), "no answer to GET /mcp within {within:?}: {:?}", String::from_utf8_lossy(&raw));
        (parse_reply(&raw), ended)
    }

    /// The SSE event ids (`id:` fields) of a streamed reply, in order.
    pub fn event_ids(reply: &Reply) -> Vec<String> {
        reply.body.lines().filter_map(|l| l.strip_prefix("id:")).map(|id| id.trim().to_owned()).collect()
    }

    /// `initialize` (keeps the session id) then `notifications/initialized`.
    pub fn initialize(&mut self) -> Value {
        let reply = self.post(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params()}), &[]);
        assert_eq!(reply.status, 200, "initialize: {reply:?}");
        self.session = reply.header("mcp-session-id").map(str::to_owned);
        assert!(self.session.is_some(), "initialize answers with Mcp-Session-Id: {reply:?}");
        let result = reply.messages().into_iter().find(|m| m["id"] == 0).expect("initialize result")["result"].clone();
        let ack = self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), &[]);
        assert_eq!(ack.status, 202, "{ack:?}");
        result
    }

    /// A request's result (panics on an HTTP or JSON-RPC error).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let reply = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}), &[]);
        assert_eq!(reply.status, 200, "{method}: {reply:?}");
        let m = reply.messages().into_iter().find(|m| m["id"] == id).unwrap_or_else(|| panic!("{method}: no answer in {reply:?}"));
        assert!(m.get("error").is_none(), "{method}: {m}");
        m["result"].clone()
    }
}

impl Mcp for HttpMcp {
    fn call(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))
    }

    fn list_tools(&mut self) -> Vec<Value> {
        self.request("tools/list", json!({}))["tools"].as_array().unwrap().clone()
    }
}

fn exchange<S: Read + Write>(mut s: S, req: &str) -> Vec<u8> {
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

fn parse_reply(raw: &[u8]) -> Reply {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete HTTP answer");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))).collect();
    let mut body = raw[split + 4..].to_vec();
    if headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked")) {
        body = dechunk(&body);
    }
    Reply { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("0").trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&b[start..(start + size).min(b.len())]);
        b = &b[(start + size + 2).min(b.len())..];
    }
    out
}
