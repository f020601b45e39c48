//! Anthropic Messages streaming wire, as Claude Code 2.1.x uses it.
//!
//! What the CLI sends (observed with `claude -p` 2.1.197 against this server):
//! - `HEAD /` preconnects before the first model call (answered 200, empty);
//! - `POST /v1/messages?beta=true` with `stream: true`: the main-loop model calls, one per model
//!   step (a tool call and its follow-up are two calls). These consume script replies;
//! - auxiliary calls, which must not consume the script. Without
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` the first turn also sends a session-title call:
//!   a *streaming* `POST /v1/messages` with no tools and `output_config.format` a JSON schema
//!   (`{"title": string}`). Any request with a structured-output format (or `max_tokens` <= 1, a
//!   quota probe) is auxiliary and gets a minimal answer that fits its schema, streamed or not as
//!   asked; so do `POST /v1/messages/count_tokens` and non-streaming message calls. With the
//!   offline env the harness sets, only the preconnect and main-loop calls were seen.
//!
//! Reply stream (the sequence the CLI accepts): `message_start`, per content block
//! `content_block_start` (text, or `tool_use` with `input: {}`), `content_block_delta`
//! (`text_delta` or `input_json_delta`), `content_block_stop`, then `message_delta` (`stop_reason`
//! `end_turn` or `tool_use`, usage) and `message_stop`.
//!
//! Ids are deterministic so recorded fixtures are stable: `msg_scripted_<n>` and
//! `toolu_scripted_<n>`, where `n` is the number of messages in the request (it grows with every
//! step of a conversation, so ids never repeat within one session).

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::script::Reply;
use crate::wire::{plain, SseFrame};

/// Fixed token counts reported in `usage` (the CLI only displays and sums them).
const INPUT_TOKENS: u64 = 12;
/// Output tokens reported per reply.
const OUTPUT_TOKENS: u64 = 6;

/// True when this request is a main-loop model call that consumes a script reply: a `POST` to
/// `/v1/messages` asking for a stream that is not [`is_auxiliary`]. `count_tokens` and
/// non-streaming calls go to [`side_request`]. The server only calls this for `POST` requests.
pub fn is_model_call(path: &str, body: Option<&Value>) -> bool {
    let path = path.trim_end_matches('/');
    path == "/v1/messages"
        && body.and_then(|b| b.get("stream")).and_then(Value::as_bool).unwrap_or(false)
        && !body.is_some_and(is_auxiliary)
}

/// True for a message request the CLI makes on the side of the conversation: a structured-output
/// call (`output_config.format`, e.g. session titles) or a quota probe (`max_tokens` <= 1).
pub fn is_auxiliary(body: &Value) -> bool {
    body.pointer("/output_config/format").is_some_and(|f| !f.is_null())
        || body.get("max_tokens").and_then(Value::as_u64).is_some_and(|m| m <= 1)
}

/// The SSE frames that stream `reply` (never called with `HttpError` or `Hang`; a
/// `CustomToolCall`, which this wire has no form for, is streamed as a tool call whose input is
/// `{"input": <string>}`).
pub fn frames(reply: &Reply, request: Option<&Value>) -> Vec<SseFrame> {
    let n = request.and_then(|r| r.get("messages")).and_then(Value::as_array).map_or(0, Vec::len);
    let model = request.and_then(|r| r.get("model")).and_then(Value::as_str).unwrap_or("claude-scripted").to_owned();
    let mut out = vec![frame(
        "message_start",
        json!({
            "type": "message_start",
            "message": {
                "id": format!("msg_scripted_{n}"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": INPUT_TOKENS,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0
                }
            }
        }),
    )];
    let stop_reason = match reply {
        Reply::Text(text) => {
            text_block(&mut out, &[text.as_str()], Duration::ZERO);
            "end_turn"
        }
        Reply::SlowText { text, chunks, delay_ms } => {
            let pieces = split_chunks(text, *chunks);
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            text_block(&mut out, &pieces, Duration::from_millis(*delay_ms));
            "end_turn"
        }
        Reply::ToolCall { name, input } => {
            tool_block(&mut out, &format!("toolu_scripted_{n}"), name, input);
            "tool_use"
        }
        Reply::CustomToolCall { name, input } => {
            tool_block(&mut out, &format!("toolu_scripted_{n}"), name, &json!({ "input": input }));
            "tool_use"
        }
        Reply::McpToolCall { server, tool, input } => {
            tool_block(&mut out, &format!("toolu_scripted_{n}"), &format!("mcp__{server}__{tool}"), input);
            "tool_use"
        }
        // The server answers these itself; an empty text keeps the stream well-formed anyway.
        Reply::HttpError { .. } | Reply::RateLimited { .. } | Reply::Hang => {
            text_block(&mut out, &[""], Duration::ZERO);
            "end_turn"
        }
    };
    out.push(frame(
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason, "stop_sequence": null },
            "usage": { "output_tokens": OUTPUT_TOKENS }
        }),
    ));
    out.push(frame("message_stop", json!({ "type": "message_stop" })));
    out
}

/// Answer a request that is not a model call: `HEAD`/`GET` preconnects get 200 with an empty
/// body, `count_tokens` gets `{"input_tokens": N}`, an auxiliary or non-streaming
/// `POST /v1/messages` gets a short text fitting its schema (streamed when asked),
/// `GET /v1/models` a one-entry list; anything else a JSON 404 in Anthropic's error shape.
pub fn side_request(method: &Method, path: &str, body: Option<&Value>) -> Response {
    let path = path.trim_end_matches('/');
    if *method == Method::HEAD || (*method == Method::GET && path.is_empty()) {
        return empty(StatusCode::OK);
    }
    if *method == Method::POST && path == "/v1/messages/count_tokens" {
        return plain(200, json!({ "input_tokens": INPUT_TOKENS }).to_string());
    }
    if *method == Method::POST && path == "/v1/messages" {
        return auxiliary_answer(body);
    }
    if *method == Method::GET && path == "/v1/models" {
        let list = json!({
            "data": [{ "type": "model", "id": "claude-scripted", "display_name": "Scripted" }],
            "has_more": false,
            "first_id": "claude-scripted",
            "last_id": "claude-scripted"
        });
        return plain(200, list.to_string());
    }
    let err = json!({
        "type": "error",
        "error": { "type": "not_found_error", "message": format!("scripted model: no route {method} {path}") }
    });
    plain(404, err.to_string())
}

/// The answer to an auxiliary message call: text that fits the request's JSON schema when it has
/// one (e.g. `{"title":"Scripted session"}`), else `ok`; an SSE stream when the request asked
/// for one, else a complete message.
fn auxiliary_answer(body: Option<&Value>) -> Response {
    let text = match body.and_then(|b| b.pointer("/output_config/format/schema")) {
        Some(schema) => crate::schema::fill(schema, "Scripted session").to_string(),
        None => "ok".to_owned(),
    };
    let streaming = body.and_then(|b| b.get("stream")).and_then(Value::as_bool).unwrap_or(false);
    if streaming {
        let mut sse = String::new();
        for f in frames(&Reply::Text(text), body) {
            if let Some(ev) = &f.event {
                sse.push_str(&format!("event: {ev}\n"));
            }
            sse.push_str(&format!("data: {}\n\n", f.data));
        }
        let mut resp = Response::new(Body::from(sse));
        resp.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("text/event-stream"));
        return resp;
    }
    let model = body.and_then(|b| b.get("model")).and_then(Value::as_str).unwrap_or("claude-scripted");
    let msg = json!({
        "id": "msg_scripted_aux",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{ "type": "text", "text": text }],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": { "input_tokens": INPUT_TOKENS, "output_tokens": 1 }
    });
    plain(200, msg.to_string())
}

fn frame(event: &str, data: Value) -> SseFrame {
    SseFrame { event: Some(event.to_owned()), data, delay: Duration::ZERO }
}

/// One text block at index 0 streamed as `pieces`, each delta after `delay`.
fn text_block(out: &mut Vec<SseFrame>, pieces: &[&str], delay: Duration) {
    out.push(frame(
        "content_block_start",
        json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
    ));
    for piece in pieces {
        let mut f = frame(
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": piece } }),
        );
        f.delay = delay;
        out.push(f);
    }
    out.push(frame("content_block_stop", json!({ "type": "content_block_stop", "index": 0 })));
}

/// One `tool_use` block at index 0 whose input arrives as one `input_json_delta`.
fn tool_block(out: &mut Vec<SseFrame>, id: &str, name: &str, input: &Value) {
    out.push(frame(
        "content_block_start",
        json!({
            "type": "content_block_start",
            "index": 0,
            "content_block": { "type": "tool_use", "id": id, "name": name, "input": {} }
        }),
    ));
    out.push(frame(
        "content_block_delta",
        json!({
            "type": "content_block_delta",
            "index": 0,
            "delta": { "type": "input_json_delta", "partial_json": input.to_string() }
        }),
    ));
    out.push(frame("content_block_stop", json!({ "type": "content_block_stop", "index": 0 })));
}

/// `text` cut into `chunks` pieces of about equal length (on char boundaries; at least one).
fn split_chunks(text: &str, chunks: u32) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let chunks = (chunks.max(1) as usize).min(chars.len().max(1));
    let size = chars.len().div_ceil(chunks).max(1);
    let mut pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    if pieces.is_empty() {
        pieces.push(String::new());
    }
    pieces
}

fn empty(status: StatusCode) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = status;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_streaming_messages_posts_are_model_calls() {
        let stream = json!({ "stream": true, "messages": [] });
        let plain_body = json!({ "messages": [] });
        assert!(is_model_call("/v1/messages", Some(&stream)));
        assert!(!is_model_call("/v1/messages", Some(&plain_body)));
        assert!(!is_model_call("/v1/messages/count_tokens", Some(&stream)));
        assert!(!is_model_call("/v1/messages", None));
    }

    #[test]
    fn title_calls_are_auxiliary_and_get_a_schema_shaped_answer() {
        let schema = json!({"type": "object", "properties": {"title": {"type": "string"}},
            "required": ["title"], "additionalProperties": false});
        let title = json!({ "stream": true, "messages": [{}],
            "output_config": { "effort": "high", "format": { "type": "json_schema", "schema": schema } } });
        assert!(!is_model_call("/v1/messages", Some(&title)));
        let main = json!({ "stream": true, "messages": [{}], "output_config": { "effort": "high" } });
        assert!(is_model_call("/v1/messages", Some(&main)));
        assert_eq!(crate::schema::fill(&schema, "Scripted session"), json!({"title": "Scripted session"}));
    }

    #[test]
    fn tool_call_streams_input_json_delta_and_stops_for_tool_use() {
        let req = json!({ "model": "m", "messages": [1, 2, 3] });
        let reply = Reply::ToolCall { name: "Write".into(), input: json!({ "a": 1 }) };
        let f = frames(&reply, Some(&req));
        let names: Vec<_> = f.iter().filter_map(|f| f.event.clone()).collect();
        assert_eq!(
            names,
            ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
        );
        assert_eq!(f[1].data["content_block"]["id"], "toolu_scripted_3");
        assert_eq!(f[2].data["delta"]["partial_json"], "{\"a\":1}");
        assert_eq!(f[4].data["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn mcp_tool_calls_use_claude_codes_tool_name() {
        let reply = Reply::McpToolCall { server: "echo".into(), tool: "echo".into(), input: json!({"text": "hi"}) };
        let f = frames(&reply, None);
        assert_eq!(f[1].data["content_block"]["name"], "mcp__echo__echo");
        assert_eq!(f[2].data["delta"]["partial_json"], "{\"text\":\"hi\"}");
        assert_eq!(f[4].data["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn slow_text_is_chunked_with_delays() {
        let reply = Reply::SlowText { text: "abcdef".into(), chunks: 3, delay_ms: 50 };
        let f = frames(&reply, None);
        let deltas: Vec<_> = f
            .iter()
            .filter(|f| f.event.as_deref() == Some("content_block_delta"))
            .map(|f| (f.data["delta"]["text"].as_str().map(str::to_owned), f.delay))
            .collect();
        assert_eq!(
            deltas,
            [
                (Some("ab".to_owned()), Duration::from_millis(50)),
                (Some("cd".to_owned()), Duration::from_millis(50)),
                (Some("ef".to_owned()), Duration::from_millis(50)),
            ]
        );
    }
}
