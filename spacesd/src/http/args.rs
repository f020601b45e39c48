//! A request as its operation's argument object, the same way for every route:
//! - the JSON body (POST, PATCH; empty means `{}`; it must be an object),
//! - plus the query string, each value converted by the type its field has in the request schema
//!   (`?cursor=abc` for an integer field is `INVALID_ARGUMENT` naming `cursor`),
//! - plus the `{field}` path segments as strings (a body that names the same field differently
//!   is refused).
//!
//! Used by the plain JSON answer ([`super::ops`]) and the event stream ([`super::sse`]) alike;
//! it knows neither.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use spaces_sdk::op::HttpMethod;
use spaces_sdk::{ApiError, ErrorCode};
use spaces_service::Row;

use super::{error_response, HttpError};

/// Largest request body, bytes (a patch of a large file fits). Larger bodies are refused with
/// 413 in the error envelope.
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The kind of JSON value a query-string field converts to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Scalar {
    Integer,
    Number,
    Boolean,
    Text,
}

/// The scalar kind of each top-level field of the row's request schema.
pub(super) fn query_types(row: &Row) -> HashMap<String, Scalar> {
    let schema = spaces_service::request_schema(row.info.name).unwrap_or_default();
    let mut out = HashMap::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let types: Vec<&str> = match prop.get("type") {
                Some(Value::String(t)) => vec![t.as_str()],
                Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let kind = if types.contains(&"integer") {
                Scalar::Integer
            } else if types.contains(&"number") {
                Scalar::Number
            } else if types.contains(&"boolean") {
                Scalar::Boolean
            } else {
                Scalar::Text
            };
            out.insert(name.clone(), kind);
        }
    }
    out
}

/// The row's argument object from body, query and path, or the refusal to send.
pub(super) fn arguments(
    row: &Row,
    types: &HashMap<String, Scalar>,
    path: Result<Path<HashMap<String, String>>, PathRejection>,
    query: Option<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Value, Box<Response>> {
    let name = row.info.name;
    let refuse = |msg: String, field: Option<String>| {
        let mut e = ApiError::new(ErrorCode::InvalidArgument, format!("{name}: {msg}"));
        e.field = field;
        Box::new(HttpError(e).into_response())
    };
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            let err = ApiError::new(ErrorCode::InvalidArgument, format!("{name}: the request body is larger than {MAX_BODY_BYTES} bytes"));
            return Box::new(error_response(err, StatusCode::PAYLOAD_TOO_LARGE));
        }
        refuse(format!("cannot read the request body: {}", e.body_text()), None)
    })?;
    let mut args: Map<String, Value> = if row.info.method == HttpMethod::Get || body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(m)) => m,
            Ok(other) => {
                let kind = match other {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    _ => "null",
                };
                return Err(refuse(format!("the body must be a JSON object of request fields, not {kind}"), None));
            }
            Err(e) => return Err(refuse(format!("the body is not valid JSON: {e}"), None)),
        }
    };
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(&query).map_err(|_| refuse("malformed query string".to_owned(), None))?;
        for (key, raw) in pairs {
            let kind = types.get(&key).copied().unwrap_or(Scalar::Text);
            let value = convert(kind, &raw).map_err(|expected| {
                let shown = shown_key(&key);
                refuse(format!("invalid value for `{shown}`: expected {expected}"), Some(shown))
            })?;
            if args.insert(key.clone(), value).is_some() {
                let shown = shown_key(&key);
                return Err(refuse(format!("`{shown}` is given twice"), Some(shown)));
            }
        }
    }
    let path = path.map_err(|_| refuse("a path segment is not valid (percent-encoded UTF-8)".to_owned(), None))?;
    for (key, value) in path.0 {
        match args.get(&key) {
            Some(Value::String(v)) if *v == value => {}
            Some(_) => {
                let shown = shown_key(&key);
                return Err(refuse(format!("`{shown}` differs between the path and the request"), Some(shown)));
            }
            None => {
                args.insert(key, Value::String(value));
            }
        }
    }
    Ok(Value::Object(args))
}

/// `raw` as a JSON value of `kind`, or what was expected.
fn convert(kind: Scalar, raw: &str) -> Result<Value, &'static str> {
    match kind {
        Scalar::Integer => {
            if let Ok(n) = raw.parse::<u64>() {
                Ok(Value::from(n))
            } else {
                raw.parse::<i64>().map(Value::from).map_err(|_| "an integer")
            }
        }
        Scalar::Number => raw.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number).ok_or("a number"),
        Scalar::Boolean => match raw {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err("true or false"),
        },
        Scalar::Text => Ok(Value::String(raw.to_owned())),
    }
}

/// A request key as an error message shows it: its first `MAX_KEY_CHARS` characters.
fn shown_key(key: &str) -> String {
    key.chars().take(spaces_sdk::decode::MAX_KEY_CHARS).collect()
}
