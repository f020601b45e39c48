//! The Unix socket answers from the moment it is bound, before the daemon has opened its
//! state and recovered the runs a previous daemon left (issue 30: after a `kill -9` under
//! load, recovery alone took over a second, and `/v1/health` with it).
//!
//! While the daemon starts, the [`Gate`]'s router answers `GET /v1/health` at once with
//! `{"ok": true, "version": ..., "ready": false}` (no credential needed: it tells nothing but
//! the version) and holds every other request until the daemon is ready, then hands it to the
//! daemon's own router (which checks the caller as always). Once ready, every request,
//! health too, goes to that router unchanged.

use axum::extract::Request;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use tokio::sync::watch;

/// The switch from "starting" to the daemon's router ([`gate`]).
pub struct Gate {
    ready: watch::Sender<Option<Router>>,
}

impl Gate {
    /// From now on every request (and each one held meanwhile) goes to `app`.
    pub fn open(&self, app: Router) {
        self.ready.send_replace(Some(app));
    }
}

/// A router to serve while the daemon starts, and the [`Gate`] that opens it to the daemon's
/// router. A request held while starting waits as long as the start takes; if the start fails
/// (the gate is dropped unopened) it is answered 503 with `INTERNAL` in the error envelope,
/// and nothing of it was done.
pub fn gate() -> (Gate, Router) {
    let (tx, rx) = watch::channel::<Option<Router>>(None);
    let router = Router::new().fallback(move |req: Request| {
        let mut rx = rx.clone();
        async move {
            let ready = rx.borrow().clone();
            let app = match ready {
                Some(app) => app,
                None if req.method() == Method::GET && req.uri().path() == "/v1/health" => return starting_health(),
                None => match rx.wait_for(Option::is_some).await {
                    Ok(app) => app.clone().unwrap_or_default(),
                    Err(_) => return start_failed(),
                },
            };
            tower::ServiceExt::oneshot(app, req).await.unwrap_or_else(|never| match never {})
        }
    });
    (Gate { ready: tx }, router)
}

fn starting_health() -> Response {
    Json(serde_json::json!({"ok": true, "version": env!("CARGO_PKG_VERSION"), "ready": false})).into_response()
}

fn start_failed() -> Response {
    let e = spaces_sdk::ApiError::new(spaces_sdk::ErrorCode::Internal, "the daemon failed to start (see its log); nothing was done");
    super::error_response(e, axum::http::StatusCode::SERVICE_UNAVAILABLE)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use std::time::Duration;
    use tower::ServiceExt;

    fn get_req(path: &str) -> Request {
        Request::builder().uri(path).body(Body::empty()).unwrap()
    }

    async fn body_json(r: Response) -> serde_json::Value {
        serde_json::from_slice(&axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap()).unwrap()
    }

    #[tokio::test]
    async fn health_answers_while_starting_and_other_requests_wait_for_the_daemons_router() {
        let (gate, router) = gate();
        let health = body_json(router.clone().oneshot(get_req("/v1/health")).await.unwrap()).await;
        assert_eq!(health["ready"], false);
        let held = tokio::spawn(router.clone().oneshot(get_req("/v1/x")));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!held.is_finished(), "a request answered before the daemon was ready");
        gate.open(Router::new().route("/v1/x", get(|| async { "late" })).route("/v1/health", get(|| async { "ready" })));
        let answered = held.await.unwrap().unwrap();
        assert_eq!(axum::body::to_bytes(answered.into_body(), 100).await.unwrap(), "late");
        let health = router.oneshot(get_req("/v1/health")).await.unwrap();
        assert_eq!(axum::body::to_bytes(health.into_body(), 100).await.unwrap(), "ready");
    }

    #[tokio::test]
    async fn a_held_request_is_refused_when_the_start_fails() {
        let (gate, router) = gate();
        let held = tokio::spawn(router.oneshot(get_req("/v1/runs")));
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(gate);
        let r = held.await.unwrap().unwrap();
        assert_eq!(r.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body_json(r).await["error"]["code"], "INTERNAL");
    }
}
