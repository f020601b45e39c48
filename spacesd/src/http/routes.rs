//! Route table and handlers.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use spaces_sdk::{
    ActionReport, AgentMessageRequest, AgentStartReport, AgentStartRequest, Capabilities,
    EventsPage, RunStatus, SpaceRecord,
};

use spaces_codespace::service::CodeSpace;

use super::HttpError;
use crate::supervisor::Supervisor;

type Answer<T> = Result<Json<T>, HttpError>;

/// A JSON body, or `INVALID_ARGUMENT` saying what is wrong with it.
pub(super) fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, HttpError> {
    b.map(|Json(v)| v).map_err(|e| {
        HttpError(spaces_sdk::ApiError::new(spaces_sdk::ErrorCode::InvalidArgument, format!("invalid request body: {}", e.body_text())))
    })
}

/// What every handler can reach: the run supervisor and the CodeSpace tool service.
#[derive(Clone)]
pub struct AppState {
    pub sup: Supervisor,
    pub cs: CodeSpace,
}

impl FromRef<AppState> for Supervisor {
    fn from_ref(app: &AppState) -> Supervisor {
        app.sup.clone()
    }
}

impl FromRef<AppState> for CodeSpace {
    fn from_ref(app: &AppState) -> CodeSpace {
        app.cs.clone()
    }
}

/// The API router over `sup` and `cs` (no auth: add [`super::auth::check`] for TCP). Unknown
/// paths and methods answer in the error envelope too.
pub fn router(sup: Supervisor, cs: CodeSpace) -> Router {
    Router::new()
        .route("/v1/tools", get(super::tools::list))
        .route(
            "/v1/tools/{name}",
            post(super::tools::call).layer(axum::extract::DefaultBodyLimit::max(super::tools::MAX_BODY_BYTES)),
        )
        .merge(super::inbox::routes())
        .route("/v1/health", get(health))
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/spaces", get(space_list).post(space_add))
        .route("/v1/spaces/{space}/agents", get(agent_list).post(agent_start))
        .route("/v1/spaces/{space}/agents/{run_id}", get(agent_status))
        .route("/v1/spaces/{space}/agents/{run_id}/events", get(agent_events))
        .route("/v1/spaces/{space}/agents/{run_id}/message", post(agent_message))
        .route("/v1/spaces/{space}/agents/{run_id}/interrupt", post(agent_interrupt))
        .route("/v1/spaces/{space}/agents/{run_id}/stop", post(agent_stop))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(AppState { sup, cs })
}

async fn not_found(uri: axum::http::Uri) -> HttpError {
    HttpError(spaces_sdk::ApiError::new(
        spaces_sdk::ErrorCode::InvalidArgument,
        format!("no route {}: see docs/api.md for the routes", uri.path()),
    ))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> HttpError {
    HttpError(spaces_sdk::ApiError::new(
        spaces_sdk::ErrorCode::InvalidArgument,
        format!("{method} is not allowed on {}: see docs/api.md", uri.path()),
    ))
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"ok": true, "version": env!("CARGO_PKG_VERSION")}))
}

async fn capabilities(State(sup): State<Supervisor>) -> Json<Capabilities> {
    Json(sup.capabilities())
}

async fn space_list(State(sup): State<Supervisor>) -> Answer<Vec<SpaceRecord>> {
    Ok(Json(sup.space_list()?))
}

#[derive(Deserialize)]
struct SpaceAddQuery {
    #[serde(default)]
    replace: bool,
}

async fn space_add(
    State(sup): State<Supervisor>,
    Query(q): Query<SpaceAddQuery>,
    space: Result<Json<SpaceRecord>, JsonRejection>,
) -> Answer<SpaceRecord> {
    Ok(Json(sup.space_add(&body(space)?, q.replace)?))
}

async fn agent_start(
    State(sup): State<Supervisor>,
    Path(space): Path<String>,
    req: Result<Json<AgentStartRequest>, JsonRejection>,
) -> Answer<AgentStartReport> {
    Ok(Json(sup.agent_start(&space, &body(req)?)?))
}

async fn agent_list(State(sup): State<Supervisor>, Path(space): Path<String>) -> Answer<Vec<RunStatus>> {
    Ok(Json(sup.agent_list(&space)?))
}

#[derive(Deserialize)]
struct StatusQuery {
    tail: Option<u32>,
}

async fn agent_status(
    State(sup): State<Supervisor>,
    Path((space, run_id)): Path<(String, String)>,
    Query(q): Query<StatusQuery>,
) -> Answer<RunStatus> {
    Ok(Json(sup.agent_status(&space, &run_id, q.tail)?))
}

#[derive(Deserialize)]
struct EventsQuery {
    cursor: Option<u64>,
    max: Option<u32>,
    wait_ms: Option<u64>,
    raw: Option<bool>,
}

async fn agent_events(
    State(sup): State<Supervisor>,
    Path((space, run_id)): Path<(String, String)>,
    Query(q): Query<EventsQuery>,
) -> Answer<EventsPage> {
    Ok(Json(sup.agent_events(&space, &run_id, q.cursor, q.max, q.wait_ms, q.raw.unwrap_or(false)).await?))
}

async fn agent_message(
    State(sup): State<Supervisor>,
    Path((space, run_id)): Path<(String, String)>,
    req: Result<Json<AgentMessageRequest>, JsonRejection>,
) -> Answer<ActionReport> {
    let req = body(req)?;
    Ok(Json(sup.agent_message(&space, &run_id, &req.text, req.force.unwrap_or(false)).await?))
}

async fn agent_interrupt(
    State(sup): State<Supervisor>,
    Path((space, run_id)): Path<(String, String)>,
) -> Answer<ActionReport> {
    Ok(Json(sup.agent_interrupt(&space, &run_id).await?))
}

async fn agent_stop(
    State(sup): State<Supervisor>,
    Path((space, run_id)): Path<(String, String)>,
) -> Answer<ActionReport> {
    Ok(Json(sup.agent_stop(&space, &run_id).await?))
}
