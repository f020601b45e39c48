//! Bearer-token and Host/Origin checks for the TCP listener.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use spaces_sdk::{ApiError, ErrorCode};

use super::HttpError;

/// The token every TCP request must present.
#[derive(Clone)]
pub struct TcpAuth {
    pub token: String,
}

fn loopback_host(value: &str) -> bool {
    let host = value.trim();
    let host = host.strip_prefix("http://").or_else(|| host.strip_prefix("https://")).unwrap_or(host);
    let host = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// Refuse requests without the bearer token (403 `UNAUTHORIZED`) or naming a non-loopback
/// `Host`/`Origin` (DNS-rebinding and cross-site requests).
pub async fn check(State(auth): State<TcpAuth>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host_ok = headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(loopback_host).unwrap_or(false);
    let origin_ok = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(loopback_host).unwrap_or(true);
    if !host_ok || !origin_ok {
        return HttpError(ApiError::new(ErrorCode::Unauthorized, "Host/Origin must be a loopback address")).into_response();
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if presented != Some(auth.token.as_str()) {
        return HttpError(ApiError::new(ErrorCode::Unauthorized, "missing or wrong bearer token; read it from the daemon's token file")).into_response();
    }
    next.run(req).await
}
