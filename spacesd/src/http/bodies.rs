//! A concurrency limit on large request bodies: at most [`LARGE_BODY_SLOTS`] requests whose
//! body is over [`LARGE_BODY_BYTES`] (by `Content-Length`; a body without one counts as large)
//! are read and run at once, across both listeners. A large request waits up to
//! [`LARGE_BODY_WAIT`] for a slot, then is refused `RESOURCE_QUEUE_FULL` (HTTP 429) before its
//! body is read: a handful of slow multi-megabyte uploads cannot hold the daemon's memory, and
//! small requests never wait.

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use spaces_sdk::{ApiError, ErrorCode};
use tokio::sync::Semaphore;

use super::HttpError;

/// A body over this many bytes is large.
pub const LARGE_BODY_BYTES: u64 = 1024 * 1024;
/// Large bodies read and run at once.
pub const LARGE_BODY_SLOTS: usize = 4;
/// Longest wait of a large request for a slot.
pub const LARGE_BODY_WAIT: Duration = Duration::from_secs(5);

fn slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| Semaphore::new(LARGE_BODY_SLOTS))
}

/// Whether `req` carries a large body (see the module doc). Requests that have no body by
/// method (`GET`, `HEAD`) and say nothing about one are small.
fn large(req: &Request) -> bool {
    let headers = req.headers();
    match headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(n) => n > LARGE_BODY_BYTES,
        None => headers.contains_key(header::TRANSFER_ENCODING) || !matches!(*req.method(), Method::GET | Method::HEAD),
    }
}

/// Middleware: a large request holds a slot while its body is read and the request runs.
pub async fn limit(req: Request, next: Next) -> Response {
    if !large(&req) {
        return next.run(req).await;
    }
    match tokio::time::timeout(LARGE_BODY_WAIT, slots().acquire()).await {
        Ok(Ok(_slot)) => next.run(req).await,
        _ => HttpError(ApiError::new(
            ErrorCode::ResourceQueueFull,
            format!(
                "{LARGE_BODY_SLOTS} requests with bodies over {} MiB are already being read; try again shortly",
                LARGE_BODY_BYTES / (1024 * 1024)
            ),
        ))
        .into_response(),
    }
}
