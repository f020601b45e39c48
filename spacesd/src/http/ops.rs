//! The HTTP adapter of the operation table: one route per row (`row.info.method` on
//! `row.info.path`). A request becomes the row's JSON argument object in one way for every
//! route ([`super::args`]); a row whose catalogue entry says it streams
//! ([`spaces_sdk::op::Hint::EventStream`]) answers `Accept: text/event-stream` with
//! server-sent events instead ([`super::sse`]).
//!
//! The row then decodes it (unknown keys refused) and runs as the request's principal
//! ([`crate::access`]); errors go out in the envelope. A request that reached no credential
//! check (no principal) is refused `UNAUTHORIZED`.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, RawQuery};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Extension, Json, Router};
use spaces_sdk::op::HttpMethod;
use spaces_sdk::{ApiError, ErrorCode};
use spaces_service::{table, Service};

use super::args::{arguments, query_types, MAX_BODY_BYTES};
use super::HttpError;
use crate::access::Principal;

/// Every row of the table as a route of one router.
pub fn routes(service: Service) -> Router {
    let mut by_path: Vec<(&'static str, MethodRouter)> = Vec::new();
    for row in table() {
        let filter = match row.info.method {
            HttpMethod::Get => MethodFilter::GET,
            HttpMethod::Post => MethodFilter::POST,
            HttpMethod::Patch => MethodFilter::PATCH,
        };
        let scalar_types = query_types(row);
        let (svc, row_ref) = (service.clone(), row.clone());
        let handler = move |principal: Option<Extension<Principal>>,
                            path: Result<Path<HashMap<String, String>>, PathRejection>,
                            RawQuery(query): RawQuery,
                            headers: HeaderMap,
                            body: Result<Bytes, BytesRejection>| {
            let (svc, row, types) = (svc.clone(), row_ref.clone(), scalar_types.clone());
            async move {
                let Some(Extension(principal)) = principal else {
                    return HttpError(ApiError::new(ErrorCode::Unauthorized, "no credential was checked for this request")).into_response();
                };
                if row.info.event_stream() && super::sse::wanted(&headers) {
                    return super::sse::respond(svc, row, principal, &types, path, query, &headers).await;
                }
                let args = match arguments(&row, &types, path, query, body) {
                    Ok(args) => args,
                    Err(response) => return *response,
                };
                let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok());
                let args = spaces_service::trace_context::with_traceparent(row.info.name, args, traceparent);
                let result = match principal {
                    Principal::Operator => row.call(svc, args).await,
                    caller => caller.call(&svc, row.info.name, args).await,
                };
                match result {
                    Ok(v) => Json(v).into_response(),
                    Err(e) => HttpError(e).into_response(),
                }
            }
        };
        let method_router = on(filter, handler);
        match by_path.iter_mut().find(|(p, _)| *p == row.info.path) {
            Some((_, existing)) => *existing = std::mem::take(existing).merge(method_router),
            None => by_path.push((row.info.path, method_router)),
        }
    }
    let mut router = Router::new();
    for (path, method_router) in by_path {
        router = router.route(path, method_router);
    }
    router.layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
}
