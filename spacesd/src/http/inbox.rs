//! The user's side of steering: `/inbox` (API reference, "Coordination"). Users list works and
//! their intents, create drafts, edit them with a revision check, queue, cancel, reorder, and
//! stop a work. Only queued intents are ever delivered to the agent (`steer_claim_next`).
//!
//! Routes:
//! - `GET  /inbox/works?workspace_id=` -> `[Work]`
//! - `GET  /inbox/works/{work_id}` -> `{work, intents}`
//! - `POST /inbox/works/{work_id}/intents {body, kind?, delivery?}` -> `Intent` (a draft)
//! - `POST /inbox/works/{work_id}/reorder {intent_ids}` -> `[Intent]`
//! - `POST /inbox/works/{work_id}/stop` -> `Work`
//! - `PATCH /inbox/intents/{intent_id} {body, revision}` -> `Intent`
//! - `POST /inbox/intents/{intent_id}/queue {revision}` -> `Intent`
//! - `POST /inbox/intents/{intent_id}/cancel` -> `Intent`

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use spaces_codespace::service::CodeSpace;
use spaces_codespace::steer::{Delivery, Steering};
use spaces_sdk::{ApiError, ErrorCode};

use super::routes::body;
use super::HttpError;

type Answer = Result<Json<Value>, HttpError>;

/// The `/inbox` routes.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S>
where
    CodeSpace: axum::extract::FromRef<S>,
{
    Router::new()
        .route("/inbox/works", get(works))
        .route("/inbox/works/{work_id}", get(work))
        .route("/inbox/works/{work_id}/intents", post(create))
        .route("/inbox/works/{work_id}/reorder", post(reorder))
        .route("/inbox/works/{work_id}/stop", post(stop))
        .route("/inbox/intents/{intent_id}", axum::routing::patch(edit))
        .route("/inbox/intents/{intent_id}/queue", post(queue))
        .route("/inbox/intents/{intent_id}/cancel", post(cancel))
}

/// Runs `f` on the steering store on the blocking pool and encodes its answer.
async fn with<T: serde::Serialize + Send + 'static>(
    cs: CodeSpace,
    f: impl FnOnce(&Steering) -> Result<T, ApiError> + Send + 'static,
) -> Answer {
    let out = cs.steer(f).await.map_err(HttpError)?;
    serde_json::to_value(out)
        .map(Json)
        .map_err(|e| HttpError(ApiError::new(ErrorCode::Internal, format!("cannot encode the answer: {e}"))))
}

#[derive(Deserialize)]
struct WorksQuery {
    workspace_id: Option<String>,
}

async fn works(State(cs): State<CodeSpace>, Query(q): Query<WorksQuery>) -> Answer {
    with(cs, move |s| s.works(q.workspace_id.as_deref())).await
}

async fn work(State(cs): State<CodeSpace>, Path(work_id): Path<String>) -> Answer {
    with(cs, move |s| Ok(json!({ "work": s.work(&work_id)?, "intents": s.intents(&work_id)? }))).await
}

#[derive(Deserialize)]
struct CreateBody {
    body: String,
    kind: Option<String>,
    delivery: Option<Delivery>,
}

async fn create(State(cs): State<CodeSpace>, Path(work_id): Path<String>, req: Result<Json<CreateBody>, JsonRejection>) -> Answer {
    let req = body(req)?;
    with(cs, move |s| s.intent_create(&work_id, &req.body, req.kind.as_deref(), req.delivery)).await
}

#[derive(Deserialize)]
struct ReorderBody {
    intent_ids: Vec<String>,
}

async fn reorder(State(cs): State<CodeSpace>, Path(work_id): Path<String>, req: Result<Json<ReorderBody>, JsonRejection>) -> Answer {
    let req = body(req)?;
    with(cs, move |s| s.intent_reorder(&work_id, &req.intent_ids)).await
}

async fn stop(State(cs): State<CodeSpace>, Path(work_id): Path<String>) -> Answer {
    with(cs, move |s| s.work_stop(&work_id)).await
}

#[derive(Deserialize)]
struct EditBody {
    body: String,
    revision: u64,
}

async fn edit(State(cs): State<CodeSpace>, Path(intent_id): Path<String>, req: Result<Json<EditBody>, JsonRejection>) -> Answer {
    let req = body(req)?;
    with(cs, move |s| s.intent_edit(&intent_id, &req.body, req.revision)).await
}

#[derive(Deserialize)]
struct QueueBody {
    revision: u64,
}

async fn queue(State(cs): State<CodeSpace>, Path(intent_id): Path<String>, req: Result<Json<QueueBody>, JsonRejection>) -> Answer {
    let req = body(req)?;
    with(cs, move |s| s.intent_queue(&intent_id, req.revision)).await
}

async fn cancel(State(cs): State<CodeSpace>, Path(intent_id): Path<String>) -> Answer {
    with(cs, move |s| s.intent_cancel(&intent_id)).await
}
