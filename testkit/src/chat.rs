//! The OpenAI Chat Completions streaming wire (`POST /v1/chat/completions`, `stream: true`), as
//! OpenAI-compatible providers serve it (opencode's `@ai-sdk/openai-compatible` provider).
//!
//! A reply is one SSE stream of `chat.completion.chunk` objects, `data:` lines without an
//! `event:` name: a first chunk with `delta.role`, then the content (`delta.content` pieces) or
//! the tool call (`delta.tool_calls[0]` with `id`, `type`, `function.name`, then its
//! `function.arguments` as a JSON string), then a chunk with `finish_reason` (`stop` or
//! `tool_calls`), then, when the request has `stream_options.include_usage`, a chunk with empty
//! `choices` and `usage`, then `data: [DONE]`.
//!
//! Ids are derived from the request (`n` = number of `messages`): `chatcmpl-n`, `call_n`.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::script::Reply;
use crate::wire::{plain, SseFrame};

/// The model name echoed in chunks when the request names none.
const DEFAULT_MODEL: &str = "gpt-5.5";

/// True when this request is a model call of the agent's loop: `POST /v1/chat/completions` or
/// `/chat/completions` offering `tools`. A call without tools is the CLI's own side task (opencode
/// asks its `title` agent for a session title before the first answer) and goes to
/// [`side_request`], which never takes a script reply.
pub fn is_model_call(path: &str, body: Option<&Value>) -> bool {
    is_chat_path(path) && body.and_then(|b| b.get("tools")).and_then(Value::as_array).is_some_and(|t| !t.is_empty())
}

fn is_chat_path(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    path == "/v1/chat/completions" || path == "/chat/completions"
}

/// The SSE frames that stream `reply` (never called with `HttpError` or `Hang`). An MCP tool
/// call is the function `<server>_<tool>` (opencode's name for MCP tools); a `CustomToolCall`
/// a function whose arguments are `{"input": <string>}`.
pub fn frames(reply: &Reply, request: Option<&Value>) -> Vec<SseFrame> {
    let n = request.and_then(|r| r.get("messages")).and_then(Value::as_array).map_or(0, Vec::len);
    let model = request.and_then(|r| r.get("model")).and_then(Value::as_str).unwrap_or(DEFAULT_MODEL).to_owned();
    let usage = request.and_then(|r| r.pointer("/stream_options/include_usage")).and_then(Value::as_bool).unwrap_or(false);
    let chunk = |choices: Value| json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": model, "choices": choices});
    let mut out =
        vec![frame(chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}])), Duration::ZERO)];
    let (finish, produced) = match reply {
        Reply::Text(text) => {
            out.push(frame(chunk(json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}])), Duration::ZERO));
            ("stop", text.clone())
        }
        Reply::SlowText { text, chunks, delay_ms } => {
            for piece in split_chunks(text, *chunks) {
                out.push(frame(
                    chunk(json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}])),
                    Duration::from_millis(*delay_ms),
                ));
            }
            ("stop", text.clone())
        }
        Reply::ToolCall { name, input } => tool_call(&mut out, &chunk, n, name, &input.to_string()),
        Reply::McpToolCall { server, tool, input } => tool_call(&mut out, &chunk, n, &format!("{server}_{tool}"), &input.to_string()),
        Reply::CustomToolCall { name, input } => tool_call(&mut out, &chunk, n, name, &json!({"input": input}).to_string()),
        Reply::HttpError { .. } | Reply::RateLimited { .. } | Reply::Hang => ("stop", String::new()),
    };
    out.push(frame(chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}])), Duration::ZERO));
    if usage {
        let (input, output) = (100 + 10 * n as u64, tokens(&produced));
        let mut last = chunk(json!([]));
        last["usage"] = json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output});
        out.push(frame(last, Duration::ZERO));
    }
    out.push(frame(Value::String("[DONE]".to_owned()), Duration::ZERO));
    out
}

/// A tool call in two chunks (name, then arguments); the finish reason and what it produced.
fn tool_call(out: &mut Vec<SseFrame>, chunk: &dyn Fn(Value) -> Value, n: usize, name: &str, arguments: &str) -> (&'static str, String) {
    let head = json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function",
        "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}]);
    out.push(frame(chunk(head), Duration::ZERO));
    let args = json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}, "finish_reason": null}]);
    out.push(frame(chunk(args), Duration::ZERO));
    ("tool_calls", arguments.to_owned())
}

/// Answer a request that is not a model call: a chat call without tools gets the text `Scripted
/// session` (streamed when asked), `GET /v1/models` lists the default model, anything else a 404
/// JSON error in OpenAI's shape.
pub fn side_request(method: &Method, path: &str, body: Option<&Value>) -> Response {
    let trimmed = path.trim_end_matches('/');
    if *method == Method::POST && is_chat_path(path) {
        let reply = Reply::Text("Scripted session".to_owned());
        if body.and_then(|b| b.get("stream")).and_then(Value::as_bool).unwrap_or(false) {
            let sse: String = frames(&reply, body)
                .iter()
                .map(|f| match &f.data {
                    Value::String(s) => format!("data: {s}\n\n"),
                    d => format!("data: {d}\n\n"),
                })
                .collect();
            let mut resp = plain(StatusCode::OK.as_u16(), sse);
            resp.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("text/event-stream"));
            return resp;
        }
        let answer = json!({"id": "chatcmpl-side", "object": "chat.completion", "created": 1_700_000_000u64, "model": DEFAULT_MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Scripted session"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}});
        return plain(StatusCode::OK.as_u16(), answer.to_string());
    }
    if *method == Method::GET && (trimmed == "/v1/models" || trimmed == "/models") {
        let body = json!({"object": "list", "data": [{"id": DEFAULT_MODEL, "object": "model", "created": 0, "owned_by": "scripted"}]});
        return plain(StatusCode::OK.as_u16(), body.to_string());
    }
    let body = json!({"error": {"message": format!("scripted model: no route for {method} {path}"), "type": "invalid_request_error", "code": "not_found"}});
    plain(StatusCode::NOT_FOUND.as_u16(), body.to_string())
}

fn frame(data: Value, delay: Duration) -> SseFrame {
    SseFrame { event: None, data, delay }
}

/// `text` cut into `chunks` pieces of about equal length (on char boundaries; at least one).
pub(crate) fn split_chunks(text: &str, chunks: u32) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = (chunks.max(1) as usize).min(chars.len().max(1));
    let size = chars.len().div_ceil(n).max(1);
    let mut out: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

/// A rough token count (4 characters a token, at least 1).
pub(crate) fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_streams_content_then_stop_then_usage_then_done() {
        let req = json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}], "stream": true, "stream_options": {"include_usage": true}});
        let f = frames(&Reply::Text("hello".into()), Some(&req));
        assert!(f.iter().all(|f| f.event.is_none()));
        assert_eq!(f[0].data["choices"][0]["delta"]["role"], "assistant");
        assert_eq!((f[1].data["choices"][0]["delta"]["content"].clone(), f[1].data["id"].clone()), (json!("hello"), json!("chatcmpl-1")));
        assert_eq!(f[2].data["choices"][0]["finish_reason"], "stop");
        assert_eq!(f[3].data["usage"], json!({"prompt_tokens": 110, "completion_tokens": 2, "total_tokens": 112}));
        assert_eq!(f[4].data, json!("[DONE]"));
        assert_eq!(f.len(), 5);
        // Without include_usage: no usage chunk.
        assert_eq!(frames(&Reply::Text("x".into()), None).len(), 4);
    }

    #[test]
    fn tool_calls_stream_name_then_arguments_and_finish_tool_calls() {
        let reply = Reply::ToolCall { name: "bash".into(), input: json!({"command": "ls"}) };
        let f = frames(&reply, None);
        let call = &f[1].data["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!((call["id"].clone(), call["function"]["name"].clone()), (json!("call_0"), json!("bash")));
        assert_eq!(f[2].data["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{\"command\":\"ls\"}");
        assert_eq!(f[3].data["choices"][0]["finish_reason"], "tool_calls");
        let mcp = frames(&Reply::McpToolCall { server: "echo".into(), tool: "echo".into(), input: json!({}) }, None);
        assert_eq!(mcp[1].data["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "echo_echo");
    }

    #[test]
    fn slow_text_has_delayed_pieces() {
        let f = frames(&Reply::SlowText { text: "abcdef".into(), chunks: 3, delay_ms: 5 }, None);
        let pieces: Vec<_> =
            f[1..4].iter().map(|f| (f.data["choices"][0]["delta"]["content"].as_str().unwrap_or("").to_owned(), f.delay)).collect();
        assert_eq!(
            pieces,
            [
                ("ab".to_owned(), Duration::from_millis(5)),
                ("cd".to_owned(), Duration::from_millis(5)),
                ("ef".to_owned(), Duration::from_millis(5))
            ]
        );
    }

    #[test]
    fn only_post_chat_completions_is_a_model_call() {
        let tools = json!({"tools": [{"type": "function", "function": {"name": "bash"}}]});
        assert!(is_model_call("/v1/chat/completions", Some(&tools)));
        assert!(is_model_call("/chat/completions", Some(&tools)));
        assert!(!is_model_call("/v1/chat/completions", Some(&json!({"messages": []}))), "a side task (a title) has no tools");
        assert!(!is_model_call("/v1/responses", Some(&tools)));
    }
}
