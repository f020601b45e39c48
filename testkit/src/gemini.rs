//! The Gemini API streaming wire (`POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`), as
//! Gemini CLI consumes it (`GOOGLE_GEMINI_BASE_URL`).
//!
//! A reply is one SSE stream of `GenerateContentResponse` objects (`data:` lines, no `event:`
//! name): text arrives as one chunk per piece with `candidates[0].content.parts[0].text`; a tool
//! call is one chunk with a `functionCall {name, args}` part; the last chunk carries
//! `finishReason: "STOP"` and the full `usageMetadata` (`promptTokenCount`,
//! `candidatesTokenCount`, `totalTokenCount`). Ids: `responseId` `resp-n` (`n` = number of
//! `contents` in the request).
//!
//! Side requests, which never take a script reply: the non-streaming `:generateContent` (the
//! CLI's own checks, such as "who speaks next", asked with a JSON schema) gets a candidate whose
//! text fits the schema (`next_speaker: "user"`: the model's turn is over) or `ok`;
//! `:countTokens` gets a count; `GET .../models` lists the model.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::chat::{split_chunks, tokens};
use crate::script::Reply;
use crate::wire::{plain, SseFrame};

/// The model echoed when the path names none.
const DEFAULT_MODEL: &str = "gemini-2.5-flash";

/// True for `POST .../models/MODEL:streamGenerateContent` (any API version prefix).
pub fn is_model_call(path: &str, _body: Option<&Value>) -> bool {
    path.contains("/models/") && path.trim_end_matches('/').ends_with(":streamGenerateContent")
}

/// The model named in the path (`/v1beta/models/gemini-2.5-flash:stream...`).
fn model_of(path: &str) -> String {
    path.split("/models/").nth(1).and_then(|rest| rest.split(':').next()).filter(|m| !m.is_empty()).unwrap_or(DEFAULT_MODEL).to_owned()
}

/// The SSE frames that stream `reply` (never called with `HttpError` or `Hang`). An MCP tool
/// call is the function `<tool>` (Gemini CLI registers MCP tools by their own name); a
/// `CustomToolCall` a function whose args are `{"input": <string>}`.
pub fn frames(reply: &Reply, request: Option<&Value>, path: &str) -> Vec<SseFrame> {
    let n = request.and_then(|r| r.get("contents")).and_then(Value::as_array).map_or(0, Vec::len);
    let model = model_of(path);
    let prompt_tokens = 100 + 10 * n as u64;
    let chunk = |parts: Value, finish: Option<&str>, output: u64| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        let mut usage = json!({"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
            usage = json!({"promptTokenCount": prompt_tokens, "candidatesTokenCount": output, "totalTokenCount": prompt_tokens + output});
        }
        json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": format!("resp-{n}")})
    };
    let frame = |data: Value, delay: Duration| SseFrame { event: None, data, delay };
    let call = |name: &str, args: Value| {
        let output = tokens(&args.to_string());
        vec![frame(chunk(json!([{"functionCall": {"name": name, "args": args}}]), Some("STOP"), output), Duration::ZERO)]
    };
    match reply {
        Reply::Text(text) => vec![frame(chunk(json!([{"text": text}]), Some("STOP"), tokens(text)), Duration::ZERO)],
        Reply::SlowText { text, chunks, delay_ms } => {
            let pieces = split_chunks(text, *chunks);
            let last = pieces.len() - 1;
            pieces
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    frame(chunk(json!([{"text": p}]), (i == last).then_some("STOP"), tokens(text)), Duration::from_millis(*delay_ms))
                })
                .collect()
        }
        Reply::ToolCall { name, input } => call(name, input.clone()),
        // Gemini CLI names a server's tool `mcp_<server>_<tool>` (its `generateValidName`).
        Reply::McpToolCall { server, tool, input } => call(&format!("mcp_{server}_{tool}"), input.clone()),
        Reply::CustomToolCall { name, input } => call(name, json!({"input": input})),
        Reply::HttpError { .. } | Reply::RateLimited { .. } | Reply::Hang => {
            vec![frame(chunk(json!([{"text": ""}]), Some("STOP"), 1), Duration::ZERO)]
        }
    }
}

/// Answer a request that is not a model call (see the module docs); anything else is a 404 in
/// Google's error shape.
pub fn side_request(method: &Method, path: &str, body: Option<&Value>) -> Response {
    let trimmed = path.split('?').next().unwrap_or(path).trim_end_matches('/');
    if *method == Method::POST && trimmed.ends_with(":generateContent") {
        let config = body.and_then(|b| b.get("generationConfig"));
        let schema = config.and_then(|c| c.get("responseJsonSchema").or_else(|| c.get("responseSchema")));
        let text = schema.map_or_else(|| "ok".to_owned(), |s| crate::schema::fill(s, "scripted").to_string());
        let answer = json!({
            "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
            "modelVersion": model_of(trimmed),
        });
        return plain(StatusCode::OK.as_u16(), answer.to_string());
    }
    if *method == Method::POST && trimmed.ends_with(":countTokens") {
        return plain(StatusCode::OK.as_u16(), json!({"totalTokens": 10}).to_string());
    }
    if *method == Method::GET && trimmed.ends_with("/models") {
        let list = json!({"models": [{"name": format!("models/{DEFAULT_MODEL}"), "supportedGenerationMethods": ["generateContent", "streamGenerateContent"]}]});
        return plain(StatusCode::OK.as_u16(), list.to_string());
    }
    let err = json!({"error": {"code": 404, "message": format!("scripted model: no route for {method} {path}"), "status": "NOT_FOUND"}});
    plain(StatusCode::NOT_FOUND.as_u16(), err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";

    #[test]
    fn text_is_one_chunk_that_finishes_with_usage() {
        let req = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
        let f = frames(&Reply::Text("hello".into()), Some(&req), PATH);
        assert_eq!(f.len(), 1);
        let c = &f[0].data["candidates"][0];
        assert_eq!((c["content"]["parts"][0]["text"].clone(), c["finishReason"].clone()), (json!("hello"), json!("STOP")));
        assert_eq!(f[0].data["usageMetadata"], json!({"promptTokenCount": 110, "candidatesTokenCount": 2, "totalTokenCount": 112}));
        assert_eq!(f[0].data["modelVersion"], "gemini-2.5-flash");
    }

    #[test]
    fn slow_text_finishes_on_its_last_piece() {
        let f = frames(&Reply::SlowText { text: "abcdef".into(), chunks: 3, delay_ms: 4 }, None, PATH);
        let got: Vec<_> = f
            .iter()
            .map(|f| {
                (
                    f.data["candidates"][0]["content"]["parts"][0]["text"].clone(),
                    f.data["candidates"][0].get("finishReason").cloned(),
                    f.delay,
                )
            })
            .collect();
        let d = Duration::from_millis(4);
        assert_eq!(got, [(json!("ab"), None, d), (json!("cd"), None, d), (json!("ef"), Some(json!("STOP")), d)]);
    }

    #[test]
    fn a_tool_call_is_a_function_call_part() {
        let f = frames(&Reply::ToolCall { name: "run_shell_command".into(), input: json!({"command": "ls"}) }, None, PATH);
        assert_eq!(
            f[0].data["candidates"][0]["content"]["parts"][0]["functionCall"],
            json!({"name": "run_shell_command", "args": {"command": "ls"}})
        );
    }

    #[test]
    fn model_calls_and_side_calls_are_told_apart() {
        assert!(is_model_call(PATH, None));
        assert!(!is_model_call("/v1beta/models/gemini-2.5-flash:generateContent", None));
        assert_eq!(model_of("/v1beta/models/m-1:countTokens"), "m-1");
        let schema = json!({"type": "object", "properties": {"reasoning": {"type": "string"}, "next_speaker": {"type": "string", "enum": ["user", "model"]}}, "required": ["reasoning", "next_speaker"]});
        assert_eq!(crate::schema::fill(&schema, "scripted"), json!({"reasoning": "scripted", "next_speaker": "user"}));
    }
}
