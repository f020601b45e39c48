//! The OpenAI Responses streaming wire (`POST /v1/responses`, `stream: true`), as Codex CLI
//! 0.171.0 consumes it.
//!
//! A reply is one SSE stream: `response.created`, `response.in_progress`, then one output item
//! (`response.output_item.added`, its content or argument events, `response.output_item.done` with
//! the whole item), then `response.completed` with `usage`. Every frame carries `event: <type>` and
//! a JSON `data` whose `type` repeats it, plus a `sequence_number` counting from 0.
//!
//! Ids are derived from the request (`n` = number of `input` items), so a given script and
//! conversation always produce the same ids: `resp_n`, `msg_n`, `fc_n`/`ctc_n`, `call_n`.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::script::Reply;
use crate::wire::{plain, SseFrame};

/// The model name echoed in responses when the request names none.
const DEFAULT_MODEL: &str = "gpt-5.5";

/// True when this request is a model call that consumes a script reply: `POST /v1/responses`
/// (also without the `/v1` prefix, for providers configured without it). The caller already
/// checked the method.
pub fn is_model_call(path: &str, _body: Option<&serde_json::Value>) -> bool {
    let path = path.trim_end_matches('/');
    path == "/v1/responses" || path == "/responses"
}

/// The SSE frames that stream `reply` (never called with `HttpError` or `Hang`).
pub fn frames(reply: &Reply, request: Option<&serde_json::Value>) -> Vec<SseFrame> {
    let mut s = Stream::new(request);
    s.opening();
    match reply {
        Reply::Text(text) => s.message(&[text.as_str()], Duration::ZERO),
        Reply::SlowText { text, chunks, delay_ms } => {
            let pieces = split_chunks(text, *chunks);
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            s.message(&refs, Duration::from_millis(*delay_ms));
        }
        Reply::ToolCall { name, input } => s.function_call(name, input),
        Reply::McpToolCall { server, tool, input } => s.namespaced_function_call(&format!("mcp__{server}"), tool, input),
        Reply::CustomToolCall { name, input } => s.custom_tool_call(name, input),
        // The server answers these itself; an empty-output completion is the harmless fallback.
        Reply::HttpError { .. } | Reply::RateLimited { .. } | Reply::Hang => {}
    }
    s.completed();
    s.frames
}

/// Answer a request that is not a model call: `GET /v1/models` lists the default model, a
/// preconnect `HEAD`/`GET /` gets an empty 200, anything else a 404 JSON error in OpenAI's shape.
pub fn side_request(method: &Method, path: &str, _body: Option<&serde_json::Value>) -> Response {
    let trimmed = path.trim_end_matches('/');
    if *method == Method::GET && (trimmed == "/v1/models" || trimmed == "/models") {
        let body = json!({
            "object": "list",
            "data": [{"id": DEFAULT_MODEL, "object": "model", "created": 0, "owned_by": "scripted"}],
            "models": [],
        });
        return plain(StatusCode::OK.as_u16(), body.to_string());
    }
    if trimmed.is_empty() && (*method == Method::HEAD || *method == Method::GET) {
        return plain(StatusCode::OK.as_u16(), String::new());
    }
    let body = json!({
        "error": {
            "message": format!("scripted model: no route for {method} {path}"),
            "type": "invalid_request_error",
            "param": null,
            "code": "not_found",
        }
    });
    plain(StatusCode::NOT_FOUND.as_u16(), body.to_string())
}

/// `text` cut into `chunks` pieces of about equal length (on char boundaries; at least one).
fn split_chunks(text: &str, chunks: u32) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = (chunks.max(1) as usize).min(chars.len().max(1));
    let size = chars.len().div_ceil(n).max(1);
    let mut out: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

/// Builder of one response stream.
struct Stream {
    frames: Vec<SseFrame>,
    seq: u64,
    n: usize,
    model: String,
    output: Vec<Value>,
    output_tokens: u64,
    input_tokens: u64,
}

impl Stream {
    fn new(request: Option<&Value>) -> Self {
        let input = request.and_then(|r| r.get("input")).and_then(Value::as_array);
        let n = input.map(Vec::len).unwrap_or(0);
        let model = request.and_then(|r| r.get("model")).and_then(Value::as_str).unwrap_or(DEFAULT_MODEL).to_owned();
        Self { frames: Vec::new(), seq: 0, n, model, output: Vec::new(), output_tokens: 0, input_tokens: 100 + 10 * n as u64 }
    }

    fn push(&mut self, kind: &str, mut data: Value, delay: Duration) {
        if let Some(obj) = data.as_object_mut() {
            obj.insert("type".into(), json!(kind));
            obj.insert("sequence_number".into(), json!(self.seq));
        }
        self.seq += 1;
        self.frames.push(SseFrame { event: Some(kind.to_owned()), data, delay });
    }

    fn response(&self, status: &str, with_usage: bool) -> Value {
        let mut r = json!({
            "id": format!("resp_{}", self.n),
            "object": "response",
            "created_at": 1_700_000_000u64,
            "status": status,
            "model": self.model,
            "output": self.output,
            "parallel_tool_calls": false,
            "tool_choice": "auto",
            "tools": [],
        });
        if with_usage {
            r["usage"] = json!({
                "input_tokens": self.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": self.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.input_tokens + self.output_tokens,
            });
        }
        r
    }

    fn opening(&mut self) {
        let created = json!({"response": self.response("in_progress", false)});
        self.push("response.created", created, Duration::ZERO);
        let progress = json!({"response": self.response("in_progress", false)});
        self.push("response.in_progress", progress, Duration::ZERO);
    }

    fn completed(&mut self) {
        let done = json!({"response": self.response("completed", true)});
        self.push("response.completed", done, Duration::ZERO);
    }

    /// An assistant `message` item whose text arrives in `pieces`, each delta after `delay`.
    fn message(&mut self, pieces: &[&str], delay: Duration) {
        let id = format!("msg_{}", self.n);
        let index = self.output.len();
        let full: String = pieces.concat();
        self.output_tokens += tokens(&full);
        let added = json!({
            "output_index": index,
            "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant",
                     "content": []},
        });
        self.push("response.output_item.added", added, Duration::ZERO);
        let part_added = json!({
            "item_id": id, "output_index": index, "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        });
        self.push("response.content_part.added", part_added, Duration::ZERO);
        for piece in pieces {
            let delta = json!({
                "item_id": id, "output_index": index, "content_index": 0, "delta": piece,
                "logprobs": [],
            });
            self.push("response.output_text.delta", delta, delay);
        }
        let text_done = json!({
            "item_id": id, "output_index": index, "content_index": 0, "text": full, "logprobs": [],
        });
        self.push("response.output_text.done", text_done, Duration::ZERO);
        let part = json!({"type": "output_text", "text": full, "annotations": []});
        let part_done = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
        self.push("response.content_part.done", part_done, Duration::ZERO);
        let item = json!({
            "id": id, "type": "message", "status": "completed", "role": "assistant",
            "content": [part],
        });
        self.item_done(index, item);
    }

    /// A `function_call` item; `arguments` is `input` serialized as a JSON string.
    fn function_call(&mut self, name: &str, input: &Value) {
        let arguments = input.to_string();
        self.tool_item(&FUNCTION_CALL, name, &arguments);
    }

    /// A `function_call` item of a tool in `namespace` (Codex's MCP tools: `mcp__<server>`).
    fn namespaced_function_call(&mut self, namespace: &str, name: &str, input: &Value) {
        let arguments = input.to_string();
        self.tool_item_in(&FUNCTION_CALL, Some(namespace), name, &arguments);
    }

    /// A `custom_tool_call` item (Codex's freeform `apply_patch`) with the raw `input` string.
    fn custom_tool_call(&mut self, name: &str, input: &str) {
        self.tool_item(&CUSTOM_TOOL_CALL, name, input);
    }

    /// A tool item streamed as `output_item.added`, one payload delta, the payload's `done`
    /// frame, then `output_item.done` with the whole item.
    fn tool_item(&mut self, shape: &ToolItemShape, name: &str, payload: &str) {
        self.tool_item_in(shape, None, name, payload);
    }

    /// [`Self::tool_item`] with the item's `namespace` set when given.
    fn tool_item_in(&mut self, shape: &ToolItemShape, namespace: Option<&str>, name: &str, payload: &str) {
        let id = format!("{}_{}", shape.id_prefix, self.n);
        let call_id = format!("call_{}", self.n);
        let index = self.output.len();
        self.output_tokens += tokens(payload);
        let (kind, field) = (shape.item_type, shape.payload_field);
        let mut added_item = json!({"id": id, "type": kind, "status": "in_progress",
                                    "call_id": call_id, "name": name, field: ""});
        let mut item = json!({
            "id": id, "type": kind, "status": "completed", "call_id": call_id,
            "name": name, field: payload,
        });
        if let Some(ns) = namespace {
            added_item["namespace"] = json!(ns);
            item["namespace"] = json!(ns);
        }
        let added = json!({"output_index": index, "item": added_item});
        self.push("response.output_item.added", added, Duration::ZERO);
        let delta = json!({"item_id": id, "output_index": index, "delta": payload});
        self.push(&format!("response.{}.delta", shape.event_stem), delta, Duration::ZERO);
        let done = json!({"item_id": id, "output_index": index, field: payload});
        self.push(&format!("response.{}.done", shape.event_stem), done, Duration::ZERO);
        self.item_done(index, item);
    }

    fn item_done(&mut self, index: usize, item: Value) {
        self.output.push(item.clone());
        let done = json!({"output_index": index, "item": item});
        self.push("response.output_item.done", done, Duration::ZERO);
    }
}

/// How one kind of tool item is spelled on the Responses wire.
struct ToolItemShape {
    item_type: &'static str,
    id_prefix: &'static str,
    /// The field holding the call's payload.
    payload_field: &'static str,
    /// `response.<stem>.delta` / `response.<stem>.done`.
    event_stem: &'static str,
}

const FUNCTION_CALL: ToolItemShape =
    ToolItemShape { item_type: "function_call", id_prefix: "fc", payload_field: "arguments", event_stem: "function_call_arguments" };

const CUSTOM_TOOL_CALL: ToolItemShape =
    ToolItemShape { item_type: "custom_tool_call", id_prefix: "ctc", payload_field: "input", event_stem: "custom_tool_call_input" };

/// A rough token count (4 characters a token, at least 1) for the scripted `usage`.
fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(frames: &[SseFrame]) -> Vec<String> {
        frames.iter().filter_map(|f| f.event.clone()).collect()
    }

    #[test]
    fn text_reply_streams_a_message_item_then_completes_with_usage() {
        let req = json!({"model": "gpt-5.5", "input": [{"role": "user"}]});
        let f = frames(&Reply::Text("hello".into()), Some(&req));
        assert_eq!(
            types(&f),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let last = &f[f.len() - 1].data;
        assert_eq!(last["response"]["output"][0]["content"][0]["text"], "hello");
        assert_eq!(last["response"]["usage"]["output_tokens"], 2);
        assert_eq!(f[7].data["item"]["id"], "msg_1");
    }

    #[test]
    fn tool_call_arguments_are_a_json_string() {
        let reply = Reply::ToolCall { name: "exec_command".into(), input: json!({"cmd": "ls"}) };
        let f = frames(&reply, None);
        let done = f.iter().find(|f| f.event.as_deref() == Some("response.output_item.done"));
        let item = done.map(|d| d.data["item"].clone()).unwrap_or_default();
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["arguments"], "{\"cmd\":\"ls\"}");
        assert_eq!(item["call_id"], "call_0");
    }

    #[test]
    fn mcp_tool_calls_are_namespaced_function_calls() {
        let reply = Reply::McpToolCall { server: "echo".into(), tool: "echo".into(), input: json!({"text": "hi"}) };
        let f = frames(&reply, None);
        let items: Vec<&Value> = f
            .iter()
            .filter(|f| f.event.as_deref().is_some_and(|e| e.starts_with("response.output_item.")))
            .map(|f| &f.data["item"])
            .collect();
        assert_eq!(items.len(), 2);
        for item in items {
            assert_eq!((&item["type"], &item["namespace"], &item["name"]), (&json!("function_call"), &json!("mcp__echo"), &json!("echo")));
        }
        let done = &f[f.len() - 1].data["response"]["output"][0];
        assert_eq!(done["arguments"], "{\"text\":\"hi\"}");
    }

    #[test]
    fn slow_text_has_delayed_chunks() {
        let reply = Reply::SlowText { text: "abcdef".into(), chunks: 3, delay_ms: 7 };
        let f = frames(&reply, None);
        let deltas: Vec<_> = f
            .iter()
            .filter(|f| f.event.as_deref() == Some("response.output_text.delta"))
            .map(|f| (f.data["delta"].as_str().unwrap_or("").to_owned(), f.delay))
            .collect();
        assert_eq!(
            deltas,
            vec![
                ("ab".to_owned(), Duration::from_millis(7)),
                ("cd".to_owned(), Duration::from_millis(7)),
                ("ef".to_owned(), Duration::from_millis(7)),
            ]
        );
    }

    #[test]
    fn only_post_responses_is_a_model_call() {
        assert!(is_model_call("/v1/responses", None));
        assert!(!is_model_call("/v1/models", None));
    }
}
