//! What every scripted wire answers with: SSE frames and plain (non-streaming) bodies, beneath
//! the wires (`anthropic`, `openai`, `chat`, `gemini`) and the server that dispatches to them.

use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;

use crate::Wire;

/// One SSE frame: `event: <name>` (optional) and `data: <json>` (a JSON string is sent as its
/// text, unquoted: `data: [DONE]`).
#[derive(Debug, Clone)]
pub struct SseFrame {
    pub event: Option<String>,
    pub data: serde_json::Value,
    /// Pause before sending this frame.
    pub delay: Duration,
}

/// A non-streaming answer with `status` and `body` (JSON error bodies are passed as text).
/// HTTP 429 as each provider sends it when a limit is hit, resetting `reset_secs` from now:
/// `retry-after` everywhere; Anthropic's `x-should-retry: false` and unified rate-limit headers
/// (`anthropic-ratelimit-unified-status: rejected`, `-reset`: Unix seconds) with a
/// `rate_limit_error`; OpenAI's `usage_limit_reached` error with `resets_in_seconds` and
/// `resets_at` (what Codex reads for a plan's usage limit) and the `x-codex-primary-*`
/// rate-limit headers; a plain `RESOURCE_EXHAUSTED`/`rate_limit` error
/// elsewhere.
pub(crate) fn rate_limited(wire: Wire, reset_secs: u64) -> Response {
    let resets_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) + reset_secs;
    let body = match wire {
        Wire::AnthropicMessages => serde_json::json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. Please try again later."}}),
        Wire::OpenAiResponses => serde_json::json!({"error": {"type": "usage_limit_reached",
            "message": "The usage limit has been reached", "plan_type": "plus", "resets_in_seconds": reset_secs, "resets_at": resets_at}}),
        Wire::OpenAiChatCompletions => serde_json::json!({"error": {"type": "rate_limit_exceeded", "message": "Rate limit reached"}}),
        Wire::GeminiStreamGenerateContent => {
            serde_json::json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded"}})
        }
    };
    let mut resp = plain(429, body.to_string());
    let headers = resp.headers_mut();
    let mut set = |k: &'static str, v: String| {
        if let Ok(v) = axum::http::HeaderValue::from_str(&v) {
            headers.insert(k, v);
        }
    };
    set("retry-after", reset_secs.to_string());
    if wire == Wire::OpenAiResponses {
        // The rate-limit snapshot Codex reads from every answer (`account/rateLimits/updated`).
        set("x-codex-primary-used-percent", "100".into());
        set("x-codex-primary-window-minutes", "300".into());
        set("x-codex-primary-reset-at", resets_at.to_string());
        set("x-codex-primary-reset-after-seconds", reset_secs.to_string());
    }
    if wire == Wire::AnthropicMessages {
        set("x-should-retry", "false".into());
        set("anthropic-ratelimit-unified-status", "rejected".into());
        set("anthropic-ratelimit-unified-reset", resets_at.to_string());
    }
    resp
}

pub(crate) fn plain(status: u16, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    resp
}
