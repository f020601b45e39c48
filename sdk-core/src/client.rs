//! A small async client for a running `spacesd` (HTTP/1.1 over its Unix socket, or loopback TCP
//! with a bearer token). One connection per request: simple and robust against daemon restarts.
//!
//! Routes are those of the daemon's HTTP API (`docs/api.md`). Errors the daemon returns come back
//! as [`ClientError::Api`] carrying the wire [`ApiError`] (`code` + `message`).

use std::path::PathBuf;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;

/// HTTP methods for [`Client::call`].
pub use hyper::Method;
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{ApiError, ErrorEnvelope};
use crate::{
    ActionReport, AgentMessageRequest, AgentStartReport, AgentStartRequest, Capabilities,
    EventsPage, RunStatus, SpaceRecord,
};

/// Where the daemon listens.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// The daemon's Unix socket (`<state dir>/spacesd.sock`).
    Unix(PathBuf),
    /// Loopback TCP (`127.0.0.1:PORT`) with the bearer token from the daemon's token file.
    Tcp { addr: String, token: String },
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon answered with a typed error.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The daemon could not be reached (not running, wrong socket path). Start `spacesd serve`.
    #[error("cannot reach spacesd at {endpoint}: {source}")]
    Connect { endpoint: String, source: std::io::Error },
    /// The daemon's answer was not understood (version mismatch or a bug).
    #[error("unexpected answer from spacesd: {0}")]
    Protocol(String),
}

/// Async client for one daemon.
#[derive(Debug, Clone)]
pub struct Client {
    endpoint: Endpoint,
}

/// Query of `agent_events`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EventsQuery {
    /// Seq of the last event the caller has (0: from the start).
    pub cursor: Option<u64>,
    /// Page size, default 100, clamped to 1..=1000.
    pub max: Option<u32>,
    /// Long-poll: wait up to this many ms for a later event when caught up.
    pub wait_ms: Option<u64>,
    /// Include each event's original harness line as `raw`.
    pub raw: Option<bool>,
}

impl Client {
    /// A client for `endpoint`. No connection is made until the first call.
    pub fn new(endpoint: Endpoint) -> Self {
        Self { endpoint }
    }

    /// Where this client connects.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `GET /v1/capabilities`.
    pub async fn capabilities(&self) -> Result<Capabilities, ClientError> {
        self.call(Method::GET, "/v1/capabilities", None::<&()>).await
    }

    /// `GET /v1/spaces`.
    pub async fn space_list(&self) -> Result<Vec<SpaceRecord>, ClientError> {
        self.call(Method::GET, "/v1/spaces", None::<&()>).await
    }

    /// `POST /v1/spaces`: register a Space (`name`, absolute `root`, policy). The same
    /// registration again is a no-op; a changed one is refused (`INVALID_ARGUMENT`): use
    /// [`Client::space_replace`].
    pub async fn space_add(&self, space: &SpaceRecord) -> Result<SpaceRecord, ClientError> {
        self.call(Method::POST, "/v1/spaces", Some(space)).await
    }

    /// `POST /v1/spaces?replace=true`: register `space`, replacing an existing registration of
    /// the same name (its root or policy).
    pub async fn space_replace(&self, space: &SpaceRecord) -> Result<SpaceRecord, ClientError> {
        self.call(Method::POST, "/v1/spaces?replace=true", Some(space)).await
    }

    /// `POST /v1/spaces/{space}/agents` (`agent_start`).
    pub async fn agent_start(
        &self,
        space: &str,
        req: &AgentStartRequest,
    ) -> Result<AgentStartReport, ClientError> {
        self.call(Method::POST, &format!("/v1/spaces/{}/agents", enc(space)), Some(req)).await
    }

    /// `GET /v1/spaces/{space}/agents/{run_id}?tail=N` (`agent_status`).
    pub async fn agent_status(
        &self,
        space: &str,
        run_id: &str,
        tail: Option<u32>,
    ) -> Result<RunStatus, ClientError> {
        let mut path = format!("/v1/spaces/{}/agents/{}", enc(space), enc(run_id));
        if let Some(t) = tail {
            path.push_str(&format!("?tail={t}"));
        }
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// `GET /v1/spaces/{space}/agents/{run_id}/events` (`agent_events`).
    pub async fn agent_events(
        &self,
        space: &str,
        run_id: &str,
        q: &EventsQuery,
    ) -> Result<EventsPage, ClientError> {
        let mut params = Vec::new();
        if let Some(v) = q.cursor {
            params.push(format!("cursor={v}"));
        }
        if let Some(v) = q.max {
            params.push(format!("max={v}"));
        }
        if let Some(v) = q.wait_ms {
            params.push(format!("wait_ms={v}"));
        }
        if let Some(v) = q.raw {
            params.push(format!("raw={v}"));
        }
        let mut path = format!("/v1/spaces/{}/agents/{}/events", enc(space), enc(run_id));
        if !params.is_empty() {
            path.push('?');
            path.push_str(&params.join("&"));
        }
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// `POST /v1/spaces/{space}/agents/{run_id}/message` (`agent_message`).
    pub async fn agent_message(
        &self,
        space: &str,
        run_id: &str,
        text: &str,
        force: Option<bool>,
    ) -> Result<ActionReport, ClientError> {
        let body = AgentMessageRequest { text: text.to_owned(), force };
        let path = format!("/v1/spaces/{}/agents/{}/message", enc(space), enc(run_id));
        self.call(Method::POST, &path, Some(&body)).await
    }

    /// `POST /v1/spaces/{space}/agents/{run_id}/interrupt` (`agent_interrupt`).
    pub async fn agent_interrupt(&self, space: &str, run_id: &str) -> Result<ActionReport, ClientError> {
        let path = format!("/v1/spaces/{}/agents/{}/interrupt", enc(space), enc(run_id));
        self.call(Method::POST, &path, None::<&()>).await
    }

    /// `POST /v1/spaces/{space}/agents/{run_id}/stop` (`agent_stop`).
    pub async fn agent_stop(&self, space: &str, run_id: &str) -> Result<ActionReport, ClientError> {
        let path = format!("/v1/spaces/{}/agents/{}/stop", enc(space), enc(run_id));
        self.call(Method::POST, &path, None::<&()>).await
    }

    /// `GET /v1/spaces/{space}/agents` (`agent_list`): newest first.
    pub async fn agent_list(&self, space: &str) -> Result<Vec<RunStatus>, ClientError> {
        self.call(Method::GET, &format!("/v1/spaces/{}/agents", enc(space)), None::<&()>).await
    }

    /// `GET /v1/tools`: the names of the CodeSpace tools this daemon serves.
    pub async fn tools(&self) -> Result<Vec<String>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Tools {
            tools: Vec<String>,
        }
        let t: Tools = self.call(Method::GET, "/v1/tools", None::<&()>).await?;
        Ok(t.tools)
    }

    /// `POST /v1/tools/{name}`: runs CodeSpace tool `name` (`read`, `apply_patch`,
    /// `exec_command`, ...) with `arguments` (a JSON object, fields as in the API reference) and
    /// returns its result JSON. Errors: [`ClientError::Api`] with the tool's error code.
    pub async fn tool(&self, name: &str, arguments: &serde_json::Value) -> Result<serde_json::Value, ClientError> {
        self.call(Method::POST, &format!("/v1/tools/{}", enc(name)), Some(arguments)).await
    }

    /// Send one request and decode a JSON answer (or the typed error envelope).
    pub async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let bytes = match body {
            Some(b) => serde_json::to_vec(b).map_err(|e| ClientError::Protocol(e.to_string()))?,
            None => Vec::new(),
        };
        let (status, answer) = self.send(method, path, bytes).await?;
        if (200..300).contains(&status) {
            serde_json::from_slice(&answer).map_err(|e| {
                ClientError::Protocol(format!("{e}: {}", String::from_utf8_lossy(&answer)))
            })
        } else {
            match serde_json::from_slice::<ErrorEnvelope>(&answer) {
                Ok(env) => Err(ClientError::Api(env.error)),
                Err(_) => Err(ClientError::Protocol(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&answer)
                ))),
            }
        }
    }

    async fn send(&self, method: Method, path: &str, body: Vec<u8>) -> Result<(u16, Bytes), ClientError> {
        let connect_err = |source| ClientError::Connect { endpoint: self.describe(), source };
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::CONTENT_TYPE, "application/json");
        let req_body = Full::new(Bytes::from(body));
        match &self.endpoint {
            Endpoint::Unix(p) => {
                let stream = tokio::net::UnixStream::connect(p).await.map_err(connect_err)?;
                let req = builder.body(req_body).map_err(|e| ClientError::Protocol(e.to_string()))?;
                exchange(TokioIo::new(stream), req).await
            }
            Endpoint::Tcp { addr, token } => {
                let stream = tokio::net::TcpStream::connect(addr).await.map_err(connect_err)?;
                builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
                let req = builder.body(req_body).map_err(|e| ClientError::Protocol(e.to_string()))?;
                exchange(TokioIo::new(stream), req).await
            }
        }
    }

    fn describe(&self) -> String {
        match &self.endpoint {
            Endpoint::Unix(p) => p.display().to_string(),
            Endpoint::Tcp { addr, .. } => addr.clone(),
        }
    }
}

async fn exchange<S>(io: TokioIo<S>, req: Request<Full<Bytes>>) -> Result<(u16, Bytes), ClientError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let proto = |e: hyper::Error| ClientError::Protocol(e.to_string());
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(proto)?;
    let driver = tokio::spawn(conn);
    let resp = sender.send_request(req).await.map_err(proto)?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.map_err(proto)?.to_bytes();
    driver.abort();
    Ok((status, body))
}

/// Percent-encode a path segment (Space names and run ids are plain, but never trust input).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
