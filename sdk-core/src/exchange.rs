//! One operation as bytes, with no I/O: the route a call takes ([`shape`], shared with
//! [`crate::client::Client`]), the HTTP/1.1 request that carries it ([`Exchange::request`]), the
//! head of the answer ([`parse_head`], by `httparse`) and the decoding of its body ([`answer`]).
//!
//! For a binding that moves the bytes on its own event loop: the Python SDK sends its calls to a
//! local daemon from the asyncio loop's own thread (`spaces/_transport.py`), which saves the two
//! thread hops a call through the tokio runtime costs (issue 32: an SDK call within 1.2x of a
//! kept-alive raw call). The routes, keys, error envelope and client codes are this crate's, so
//! both ways of calling answer alike.

use crate::client::{enc, error_of, idempotency_field, ClientError};
use crate::error::{ApiError, ErrorCode};
use crate::op::{HttpMethod, OperationInfo};

/// A call mapped onto its route: `{field}` path segments filled from the fields of that name,
/// the rest as the query string (`GET`) or the JSON body (`POST`, `PATCH`).
#[derive(Debug, Clone)]
pub struct Shaped {
    /// The route's method.
    pub method: HttpMethod,
    /// Path and query string, percent-encoded.
    pub path: String,
    /// The JSON body (`None` for a `GET`).
    pub body: Option<serde_json::Value>,
    /// True when the call carries an idempotency key (`agent_start`'s `request_id`,
    /// `agent_message`'s `message_id`, a fresh UUID v4 when the caller gave none): it may be sent
    /// once more when its connection is lost before an answer.
    pub keyed: bool,
}

/// Maps `args` (a JSON object of the request's fields, or `null`) onto the route of `info`.
/// Errors: [`ClientError::Protocol`] for arguments that are not an object,
/// [`ClientError::Api`] `INVALID_ARGUMENT` for a missing path field.
pub fn shape(info: &OperationInfo, args: serde_json::Value) -> Result<Shaped, ClientError> {
    let mut fields = match args {
        serde_json::Value::Object(m) => m,
        serde_json::Value::Null => serde_json::Map::new(),
        other => return Err(ClientError::Protocol(format!("{}: arguments must be a JSON object, not {other}", info.name))),
    };
    let keyed = idempotency_field(info.name);
    if let Some(field) = keyed {
        if fields.get(field).is_none_or(serde_json::Value::is_null) {
            fields.insert(field.to_owned(), uuid::Uuid::new_v4().to_string().into());
        }
    }
    let mut path = String::new();
    for seg in info.path.split('/').skip(1) {
        path.push('/');
        match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(field) => match fields.remove(field) {
                Some(serde_json::Value::String(v)) => path.push_str(&enc(&v)),
                Some(v) if !v.is_null() => path.push_str(&enc(&v.to_string())),
                _ => {
                    return Err(ClientError::Api(ApiError::new(
                        ErrorCode::InvalidArgument,
                        format!("{}: missing field `{field}`", info.name),
                    )))
                }
            },
            None => path.push_str(seg),
        }
    }
    if info.method == HttpMethod::Get {
        let query: Vec<String> = fields
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{}={}", enc(k), enc(s)),
                other => format!("{}={}", enc(k), enc(&other.to_string())),
            })
            .collect();
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query.join("&"));
        }
        return Ok(Shaped { method: info.method, path, body: None, keyed: keyed.is_some() });
    }
    Ok(Shaped { method: info.method, path, body: Some(serde_json::Value::Object(fields)), keyed: keyed.is_some() })
}

/// One call of the operation `name`, ready to be sent as often as needed (a keyed retry sends
/// the same bytes, so the same key).
#[derive(Debug, Clone)]
pub struct Exchange {
    shaped: Shaped,
    body: Vec<u8>,
}

impl Exchange {
    /// The call of operation `name` with `args` (its request fields as a JSON object). Errors:
    /// an unknown operation (`INVALID_ARGUMENT`, naming the closest), and those of [`shape`].
    pub fn new(name: &str, args: serde_json::Value) -> Result<Self, ClientError> {
        let info = crate::op::find(name)?;
        let shaped = shape(&info, args)?;
        let body = match &shaped.body {
            Some(b) => serde_json::to_vec(b).map_err(|e| ClientError::Protocol(e.to_string()))?,
            None => Vec::new(),
        };
        Ok(Self { shaped, body })
    }

    /// True when a lost connection may be answered by sending the same request once more
    /// ([`Shaped::keyed`]).
    pub fn keyed(&self) -> bool {
        self.shaped.keyed
    }

    /// The whole HTTP/1.1 request: request line, `Host`, `Content-Type: application/json`,
    /// `Content-Length`, `Authorization: Bearer TOKEN` when `token` is given, then the body.
    pub fn request(&self, token: Option<&str>) -> Vec<u8> {
        let method = match self.shaped.method {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Patch => "PATCH",
        };
        let mut out = Vec::with_capacity(160 + self.body.len());
        out.extend_from_slice(format!("{method} {} HTTP/1.1\r\nHost: localhost\r\n", self.shaped.path).as_bytes());
        out.extend_from_slice(format!("Content-Type: application/json\r\nContent-Length: {}\r\n", self.body.len()).as_bytes());
        if let Some(token) = token {
            out.extend_from_slice(format!("Authorization: Bearer {token}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

/// How the body of an answer is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLength {
    /// `Content-Length` bytes (0 when the answer has neither header).
    Exactly(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The head of an answer: status, how its body ends, and whether the connection stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The HTTP status.
    pub status: u16,
    /// How the body is delimited.
    pub body: BodyLength,
    /// False when the daemon said `Connection: close`: the connection is not used again.
    pub keep_alive: bool,
}

/// Parses the head of an answer: `head` is everything up to and including the blank line.
/// Errors: [`ClientError::Protocol`] for a head that is not HTTP/1.1 or is cut short.
pub fn parse_head(head: &[u8]) -> Result<Head, ClientError> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(ClientError::Protocol("an answer's head was cut short".to_owned())),
        Err(e) => return Err(ClientError::Protocol(format!("an answer's head is not HTTP/1.1: {e}"))),
    }
    let status = resp.code.unwrap_or(0);
    let mut body = BodyLength::Exactly(0);
    let mut keep_alive = resp.version == Some(1);
    for h in resp.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = value.trim().parse().map_err(|_| ClientError::Protocol(format!("a Content-Length that is not a number: {value}")))?;
            body = BodyLength::Exactly(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") && value.to_ascii_lowercase().contains("chunked") {
            body = BodyLength::Chunked;
        } else if h.name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close") {
            keep_alive = false;
        }
    }
    Ok(Head { status, body, keep_alive })
}

/// The result of an answer of `status` with `body`: the JSON of a 2xx answer, else the daemon's
/// typed error ([`ClientError::Api`]), or [`ClientError::Protocol`] for a body that is neither.
pub fn answer(status: u16, body: &[u8]) -> Result<serde_json::Value, ClientError> {
    if (200..300).contains(&status) {
        serde_json::from_slice(body).map_err(|e| ClientError::Protocol(format!("{e}: {}", String::from_utf8_lossy(body))))
    } else {
        Err(error_of(status, body))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_get_puts_its_path_fields_in_the_path_and_the_rest_in_the_query() {
        let ex = Exchange::new("agent_status", serde_json::json!({"space": "my space", "run_id": "run-1", "tail": 5})).unwrap();
        let text = String::from_utf8(ex.request(None)).unwrap();
        assert!(text.starts_with("GET /v1/spaces/my%20space/agents/run-1?tail=5 HTTP/1.1\r\n"), "{text}");
        assert!(text.ends_with("Content-Length: 0\r\n\r\n"), "{text}");
        assert!(!ex.keyed());
    }

    #[test]
    fn a_post_carries_its_body_and_a_keyed_call_its_key_in_every_copy() {
        let ex = Exchange::new("agent_start", serde_json::json!({"space": "s", "agent": "claude-code", "prompt": "hi"})).unwrap();
        assert!(ex.keyed());
        let (a, b) = (ex.request(Some("tok")), ex.request(Some("tok")));
        assert_eq!(a, b, "a retry sends the same key");
        let text = String::from_utf8(a).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("POST /v1/spaces/s/agents HTTP/1.1"), "{head}");
        assert!(head.contains("Authorization: Bearer tok"), "{head}");
        assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["prompt"], "hi");
        assert!(body["request_id"].as_str().is_some_and(|k| k.len() == 36), "{body}");
    }

    #[test]
    fn bad_calls_are_refused_before_any_byte_is_sent() {
        let unknown = Exchange::new("agent_statu", serde_json::json!({})).unwrap_err();
        assert!(unknown.to_string().contains("did you mean \"agent_status\""), "{unknown}");
        let missing = Exchange::new("agent_status", serde_json::json!({"space": "s"})).unwrap_err();
        assert_eq!(missing.code(), "INVALID_ARGUMENT");
        let not_object = Exchange::new("agent_status", serde_json::json!([1])).unwrap_err();
        assert_eq!(not_object.code(), "PROTOCOL");
    }

    #[test]
    fn heads_say_how_the_body_ends_and_whether_the_connection_stays() {
        let head = parse_head(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n").unwrap();
        assert_eq!(head, Head { status: 200, body: BodyLength::Exactly(12), keep_alive: true });
        let head = parse_head(b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n").unwrap();
        assert_eq!(head, Head { status: 404, body: BodyLength::Chunked, keep_alive: false });
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\n").unwrap_err().code(), "PROTOCOL");
        assert_eq!(parse_head(b"SSH-2.0-x\r\n\r\n").unwrap_err().code(), "PROTOCOL");
    }

    #[test]
    fn answers_decode_to_json_or_the_typed_error() {
        assert_eq!(answer(200, br#"{"ok":true}"#).unwrap(), serde_json::json!({"ok": true}));
        let err = answer(404, br#"{"error":{"code":"RUN_NOT_FOUND","message":"no run x"}}"#).unwrap_err();
        assert_eq!(err.code(), "RUN_NOT_FOUND");
        assert_eq!(answer(502, b"<html>").unwrap_err().code(), "PROTOCOL");
    }
}
