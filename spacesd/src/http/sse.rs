//! `agent_events` as server-sent events: `GET /v1/spaces/{space}/agents/{run_id}/events` with
//! `Accept: text/event-stream`.
//!
//! The stream is a loop over the operation itself (the `agent_events` long-poll, called as the
//! request's principal, so the route's credential checks apply to every page), never over the
//! event log's internals:
//! - each event goes out as `id: <seq>` + `data: <event JSON>` (the default SSE type, so a
//!   browser's `EventSource.onmessage` sees every one; `kind` is in the JSON);
//! - the start is `Last-Event-ID` when the client sends one (a reconnect), else `?cursor=`, else
//!   0: a reconnect resumes exactly after the last event it got, each event once, in order;
//! - when no event arrives for `heartbeat_ms` (default [`HEARTBEAT_MS`], `?heartbeat_ms=` sets
//!   it, 100..=60,000), a comment line `: heartbeat` keeps proxies from closing the stream;
//! - the run's end closes it with `event: end` + `data: {"cursor": N, "status": "..."}` (no
//!   `id`): with `?until=stopped` (the default) once the log is caught up and the run is
//!   `stopped` or `done`; with `?until=turn` once it is caught up and no longer `running` (the
//!   CLI's `--follow --until turn`);
//! - an error on the first page (unknown run, a cursor past the end, a refused credential) is
//!   the route's ordinary JSON error answer; an error later ends the stream with
//!   `event: error` + `data: <error JSON>`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{json, Value};
use spaces_sdk::follow::Until;
use spaces_sdk::{AgentEventsRequest, ApiError, ErrorCode, EventsPage};
use spaces_service::{Row, Service};

use super::args::{arguments, Scalar};
use super::HttpError;
use crate::access::Principal;

/// Default quiet time before a heartbeat comment, ms.
pub const HEARTBEAT_MS: u64 = 15_000;
/// Bounds of `?heartbeat_ms=`, ms.
pub const HEARTBEAT_MS_RANGE: (u64, u64) = (100, 60_000);

/// Whether the request asks for an event stream (`Accept` names `text/event-stream`).
pub fn wanted(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))))
}

/// The SSE answer of `agent_events` (see the module doc).
pub async fn respond(
    svc: Service,
    row: Row,
    principal: Principal,
    types: &HashMap<String, Scalar>,
    path: Result<Path<HashMap<String, String>>, PathRejection>,
    query: Option<String>,
    headers: &HeaderMap,
) -> Response {
    let refuse = |msg: String, field: &str| {
        let mut e = ApiError::new(ErrorCode::InvalidArgument, format!("agent_events: {msg}"));
        e.field = Some(field.to_owned());
        HttpError(e).into_response()
    };
    // The stream's own query keys come off before the rest is the operation's arguments.
    let mut until = Until::Stopped;
    let mut heartbeat = HEARTBEAT_MS;
    let mut rest = Vec::new();
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.as_deref().unwrap_or("")).unwrap_or_default();
    for (key, value) in pairs {
        match key.as_str() {
            "until" => {
                until = match value.as_str() {
                    "turn" => Until::Turn,
                    "stopped" => Until::Stopped,
                    _ => return refuse("`until` must be `turn` or `stopped`".into(), "until"),
                }
            }
            "heartbeat_ms" => match value.parse::<u64>() {
                Ok(ms) => heartbeat = ms.clamp(HEARTBEAT_MS_RANGE.0, HEARTBEAT_MS_RANGE.1),
                Err(_) => return refuse("`heartbeat_ms` must be an integer (ms)".into(), "heartbeat_ms"),
            },
            _ => rest.push((key, value)),
        }
    }
    let query = serde_urlencoded::to_string(&rest).ok();
    let mut args = match arguments(&row, types, path, query, Ok(Bytes::new())) {
        Ok(Value::Object(args)) => args,
        Ok(_) => return refuse("the request is not an object".into(), "cursor"),
        Err(response) => return *response,
    };
    // A reconnect: the last id the client got wins over the cursor it first asked for.
    if let Some(last) = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty()) {
        match last.parse::<u64>() {
            Ok(seq) => {
                args.insert("cursor".into(), Value::from(seq));
            }
            Err(_) => return refuse("Last-Event-ID must be an event's seq".into(), "cursor"),
        }
    }
    args.insert("max".into(), Value::from(AgentEventsRequest::MAX_LIMIT));
    args.remove("wait_ms");
    let cursor = args.get("cursor").and_then(Value::as_u64).unwrap_or(0);
    let mut follower = Follower {
        svc,
        operation: row.info.name,
        principal,
        args,
        cursor,
        until,
        heartbeat: Duration::from_millis(heartbeat),
        done: false,
    };
    // The first page does not wait: its error is the route's ordinary answer.
    let first = match follower.page(0).await {
        Ok(page) => page,
        Err(e) => return HttpError(e).into_response(),
    };
    let opening = follower.frames(first);
    let stream = futures_util::stream::once(async move { Ok::<Bytes, Infallible>(opening) }).chain(futures_util::stream::unfold(
        follower,
        |mut f| async move {
            if f.done {
                return None;
            }
            let wait = f.heartbeat.as_millis() as u64;
            let frames = match f.page(wait).await {
                Ok(page) => f.frames(page),
                Err(e) => {
                    f.done = true;
                    Bytes::from(format!("event: error\ndata: {}\n\n", serde_json::to_string(&e.capped()).unwrap_or_default()))
                }
            };
            Some((Ok::<Bytes, Infallible>(frames), f))
        },
    ));
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = StatusCode::OK;
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// One stream's position and the principal it reads as.
struct Follower {
    svc: Service,
    /// The operation called for each page (the row's name: `agent_events`).
    operation: &'static str,
    principal: Principal,
    args: serde_json::Map<String, Value>,
    cursor: u64,
    until: Until,
    heartbeat: Duration,
    done: bool,
}

impl Follower {
    /// The page after the cursor, waiting up to `wait_ms` for one.
    async fn page(&mut self, wait_ms: u64) -> Result<EventsPage, ApiError> {
        let mut args = self.args.clone();
        args.insert("cursor".into(), Value::from(self.cursor));
        args.insert("wait_ms".into(), Value::from(wait_ms));
        let value = self.principal.call(&self.svc, self.operation, Value::Object(args)).await?;
        serde_json::from_value(value).map_err(|e| ApiError::new(ErrorCode::Internal, format!("agent_events page: {e}")))
    }

    /// The frames of `page`: its events, then the end when it came, or a heartbeat when the
    /// page was empty (the wait ran out).
    fn frames(&mut self, page: EventsPage) -> Bytes {
        let mut out = String::new();
        for e in &page.events {
            out.push_str(&format!("id: {}\ndata: {}\n\n", e.seq, serde_json::to_string(e).unwrap_or_default()));
        }
        self.cursor = page.cursor;
        if page.caught_up && self.until.reached(page.status) {
            self.done = true;
            out.push_str(&format!("event: end\ndata: {}\n\n", json!({"cursor": page.cursor, "status": page.status})));
        } else if page.events.is_empty() {
            out.push_str(": heartbeat\n\n");
        }
        Bytes::from(out)
    }
}
