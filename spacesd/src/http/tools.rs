//! `GET /v1/tools` -> `{"tools": [names]}`: the CodeSpace tools of the operation table (each is
//! served at `POST /v1/tools/{name}` by the table's adapter, [`super::ops`]).

use axum::Json;
use serde_json::Value;

/// `GET /v1/tools`.
pub async fn list() -> Json<Value> {
    let tools: Vec<&str> = spaces_service::table().iter().filter(|r| r.info.path.starts_with("/v1/tools/")).map(|r| r.info.name).collect();
    Json(serde_json::json!({ "tools": tools }))
}
