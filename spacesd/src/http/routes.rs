//! The router: the operation table's routes ([`super::ops`]), a few meta routes, and 404/405
//! answers in the error envelope.

use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use spaces_codespace::service::CodeSpace;
use spaces_host::supervisor::Supervisor;
use spaces_sdk::{bounded, ApiError, ErrorCode};
use spaces_service::{table, Service};

use super::error_response;

/// The daemon's two domains, as `serve` opens them.
#[derive(Clone)]
pub struct AppState {
    pub sup: Supervisor,
    pub cs: CodeSpace,
}

/// The API router over `sup` and `cs` (no auth: the listeners add [`super::auth::check_tcp`] or [`super::auth::check_unix`]). Unknown
/// paths answer 404 and wrong methods 405, in the error envelope.
pub fn router(sup: Supervisor, cs: CodeSpace) -> Router {
    let service = Service::new(sup, cs);
    let meta =
        Router::new().route("/v1/health", get(health)).route("/v1/openapi.json", get(openapi)).route("/v1/tools", get(super::tools::list));
    super::ops::routes(service).merge(meta).fallback(not_found).method_not_allowed_fallback(method_not_allowed)
}

async fn not_found() -> Response {
    let e = ApiError::new(ErrorCode::InvalidArgument, "no such route: see docs/api.md or GET /v1/openapi.json for the routes");
    error_response(e, StatusCode::NOT_FOUND)
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let allowed: Vec<&str> = table().iter().filter(|r| matches_template(r.info.path, uri.path())).map(|r| r.info.method.as_str()).collect();
    let e = ApiError::new(
        ErrorCode::InvalidArgument,
        format!(
            "{} is not allowed on this route{}",
            bounded(method.as_str()),
            if allowed.is_empty() { String::new() } else { format!(": use {}", allowed.join(" or ")) }
        ),
    );
    let mut response = error_response(e, StatusCode::METHOD_NOT_ALLOWED);
    if let Ok(v) = axum::http::HeaderValue::from_str(&allowed.join(", ")) {
        if !allowed.is_empty() {
            response.headers_mut().insert(axum::http::header::ALLOW, v);
        }
    }
    response
}

/// Whether `path` fits the route `template` (`{x}` matches one segment).
fn matches_template(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| t.starts_with('{') || t == p)
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"ok": true, "version": env!("CARGO_PKG_VERSION"), "ready": true}))
}

/// The document never changes while the daemon runs: built once.
async fn openapi() -> Json<serde_json::Value> {
    static DOC: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    Json(DOC.get_or_init(spaces_service::openapi).clone())
}
