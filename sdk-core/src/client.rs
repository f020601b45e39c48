//! A small async client for a running `spacesd` (HTTP/1.1 over its Unix socket, or loopback TCP
//! with a bearer token). Connections are kept alive between calls: a client (and its clones)
//! keeps up to [`POOL_MAX`] idle connections for [`POOL_IDLE`] each, well inside the daemon's
//! idle limit between requests (`SPACES_HTTP_HEADER_TIMEOUT_MS`, 10 s by default). A call on a
//! kept connection the daemon closed meanwhile (a restart, its idle limit) is sent again on a new
//! connection when hyper hands the request back unsent; one the daemon may have read is never
//! resent here (the keyed retries below cover those). Event streams take a connection of their
//! own.
//!
//! Routes are those of the daemon's HTTP API (`docs/api.md`). Errors the daemon returns come back
//! as [`ClientError::Api`] carrying the wire [`ApiError`] (`code` + `message`).
//!
//! Idempotent retries: `agent_start` and `agent_message` always carry a key (`request_id`,
//! `message_id`; a fresh UUID v4 when the caller gave none), and a call of theirs whose connection
//! is lost before an answer (reset, EOF: e.g. the daemon stopping mid-call) is sent once more,
//! with the same key, as soon as the daemon accepts connections again (within
//! [`RECONNECT_WITHIN`]). The daemon answers a repeated key with the first result, so the retry
//! never starts a second run or delivers a message twice. Other calls are never retried.

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
use crate::op::{HttpMethod, Operation, OperationInfo};

/// Where the daemon listens.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// The daemon's Unix socket (`<state dir>/spacesd.sock`). Requests go without a bearer
    /// token (the peer's uid decides); once the daemon refuses that (`UNAUTHORIZED`: a daemon
    /// whose sandbox is Landlock takes only the operator's token on its socket) and the token
    /// file beside the socket (`<state dir>/token`) is readable, the request is sent again with
    /// its token, and every later one of this client carries it.
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
    /// The connection was lost after the request was sent and before its answer (the daemon
    /// stopped or restarted mid-call): whether the daemon acted is not known. `agent_start` and
    /// `agent_message` were already retried once with their key (see the module doc); another
    /// call may be repeated once the daemon is back, if repeating it is safe.
    #[error("the connection to spacesd at {endpoint} was lost before an answer: {detail}")]
    Lost { endpoint: String, detail: String },
}

/// The codes of the failures that happen on the client's side, the same in every SDK and the
/// CLI (beside the contract's wire codes, which a daemon answers).
pub mod client_codes {
    /// No daemon answers at the endpoint ([`super::ClientError::Connect`]).
    pub const DAEMON_UNREACHABLE: &str = "DAEMON_UNREACHABLE";
    /// A local daemon could not be started ([`crate::local::StartError`]).
    pub const DAEMON_START_FAILED: &str = "DAEMON_START_FAILED";
    /// The daemon's answer was not understood ([`super::ClientError::Protocol`]).
    pub const PROTOCOL: &str = "PROTOCOL";
    /// The connection was lost before the answer ([`super::ClientError::Lost`]).
    pub const CONNECTION_LOST: &str = "CONNECTION_LOST";
}

impl ClientError {
    /// The error's code: the wire code of a daemon's typed error (`RUN_NOT_FOUND`, ...), else
    /// one of [`client_codes`]. Both SDKs raise this as `.code`.
    pub fn code(&self) -> String {
        match self {
            ClientError::Api(e) => e.code.as_str(),
            ClientError::Connect { .. } => client_codes::DAEMON_UNREACHABLE.to_owned(),
            ClientError::Protocol(_) => client_codes::PROTOCOL.to_owned(),
            ClientError::Lost { .. } => client_codes::CONNECTION_LOST.to_owned(),
        }
    }
}

/// How long a retry of a call whose connection was lost waits for the daemon to accept
/// connections again (a restart), polling every 100 ms.
pub const RECONNECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

/// The request field that makes operation `name` idempotent, for the operations the client
/// retries: `request_id` of `agent_start`, `message_id` of `agent_message`.
pub fn idempotency_field(name: &str) -> Option<&'static str> {
    match name {
        "agent_start" => Some("request_id"),
        "agent_message" => Some("message_id"),
        _ => None,
    }
}

/// Most idle kept-alive connections a client keeps.
pub const POOL_MAX: usize = 4;
/// How long an idle connection is kept for the next call.
pub const POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(2);

/// A kept-alive connection: its request sender and when it went idle.
type Idle = (std::time::Instant, hyper::client::conn::http1::SendRequest<Full<Bytes>>);

/// Async client for one daemon.
#[derive(Debug, Clone)]
pub struct Client {
    endpoint: Endpoint,
    /// The daemon refused this client's uid on its Unix socket: the token beside the socket
    /// goes with every request ([`Endpoint::Unix`]). Shared by clones.
    token_needed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Idle kept-alive connections, newest last. Shared by clones.
    idle: std::sync::Arc<std::sync::Mutex<Vec<Idle>>>,
}

impl Client {
    /// A client for `endpoint`. No connection is made until the first call.
    pub fn new(endpoint: Endpoint) -> Self {
        Self { endpoint, token_needed: Default::default(), idle: Default::default() }
    }

    /// The bearer token a Unix-socket request carries: the one beside the socket once the
    /// daemon asked for it.
    fn unix_token(&self, socket: &std::path::Path) -> Option<String> {
        if self.token_needed.load(std::sync::atomic::Ordering::Relaxed) {
            token_beside(socket)
        } else {
            None
        }
    }

    /// After an answer of `status` to a request sent without a token: the token to send it
    /// again with, when the daemon refused the uid and the token beside its socket is readable.
    fn retry_token(&self, status: u16, sent_token: bool) -> Option<String> {
        let Endpoint::Unix(socket) = &self.endpoint else { return None };
        if sent_token || !(status == 401 || status == 403) {
            return None;
        }
        let token = token_beside(socket)?;
        self.token_needed.store(true, std::sync::atomic::Ordering::Relaxed);
        Some(token)
    }

    /// Where this client connects.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Runs operation `O` with `req` over its HTTP route and decodes its result. Every named
    /// method of this client (one per operation of the catalogue, generated from it) is this
    /// call. Errors: [`ClientError::Api`] with the operation's typed error.
    pub async fn op<O: Operation>(&self, req: &O::Request) -> Result<O::Result, ClientError> {
        let args = serde_json::to_value(req).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let answer = self.invoke(&OperationInfo::of::<O>(), args).await?;
        serde_json::from_value(answer).map_err(|e| ClientError::Protocol(format!("{}: {e}", O::NAME)))
    }

    /// Runs the operation named `name` (any name of [`crate::op::catalogue`]) with `args` (a JSON
    /// object of its request fields) and returns the result JSON. Errors: `INVALID_ARGUMENT`
    /// for an unknown name (with the closest name), and the operation's own.
    pub async fn call_named(&self, name: &str, args: serde_json::Value) -> Result<serde_json::Value, ClientError> {
        let info = crate::op::find(name)?;
        self.invoke(&info, args).await
    }

    /// Maps `args` onto the route of `info`: `{field}` segments from the fields of that name,
    /// the rest as the query string (GET) or the JSON body (POST, PATCH).
    async fn invoke(&self, info: &OperationInfo, args: serde_json::Value) -> Result<serde_json::Value, ClientError> {
        let shaped = crate::exchange::shape(info, args)?;
        let method = match shaped.method {
            HttpMethod::Get => Method::GET,
            HttpMethod::Post => Method::POST,
            HttpMethod::Patch => Method::PATCH,
        };
        match &shaped.body {
            None => self.call(method, &shaped.path, None::<&()>).await,
            Some(body) => match self.call(method.clone(), &shaped.path, Some(body)).await {
                Err(ClientError::Lost { .. }) if shaped.keyed => {
                    self.await_daemon().await;
                    self.call(method, &shaped.path, Some(body)).await
                }
                other => other,
            },
        }
    }

    /// Waits until the daemon accepts a connection again, at most [`RECONNECT_WITHIN`].
    async fn await_daemon(&self) {
        let deadline = tokio::time::Instant::now() + RECONNECT_WITHIN;
        while tokio::time::Instant::now() < deadline {
            let up = match &self.endpoint {
                Endpoint::Unix(p) => tokio::net::UnixStream::connect(p).await.is_ok(),
                Endpoint::Tcp { addr, .. } => tokio::net::TcpStream::connect(addr).await.is_ok(),
            };
            if up {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Send one request and decode a JSON answer (or the typed error envelope).
    pub async fn call<B: Serialize, T: DeserializeOwned>(&self, method: Method, path: &str, body: Option<&B>) -> Result<T, ClientError> {
        let bytes = match body {
            Some(b) => serde_json::to_vec(b).map_err(|e| ClientError::Protocol(e.to_string()))?,
            None => Vec::new(),
        };
        let (status, answer) = self.send(method, path, bytes).await?;
        let value = crate::exchange::answer(status, &answer)?;
        serde_json::from_value(value).map_err(|e| ClientError::Protocol(format!("{e}: {}", String::from_utf8_lossy(&answer))))
    }

    /// A `GET` of `path` with `headers` whose answer's body is read as it arrives (an event
    /// stream): the status, the headers, and the body still streaming.
    pub(crate) async fn open_stream(
        &self,
        path: &str,
        headers: &[(&str, String)],
    ) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
        let token = match &self.endpoint {
            Endpoint::Unix(p) => self.unix_token(p),
            Endpoint::Tcp { .. } => None,
        };
        let resp = self.open_stream_once(path, headers, token.as_deref()).await?;
        match self.retry_token(resp.status().as_u16(), token.is_some()) {
            Some(token) => self.open_stream_once(path, headers, Some(&token)).await,
            None => Ok(resp),
        }
    }

    /// One try of [`Self::open_stream`], a Unix-socket request with `unix_token` if given.
    async fn open_stream_once(
        &self,
        path: &str,
        headers: &[(&str, String)],
        unix_token: Option<&str>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
        let connect_err = |source| ClientError::Connect { endpoint: self.describe(), source };
        let mut builder = Request::builder().method(Method::GET).uri(path).header(hyper::header::HOST, "localhost");
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        match &self.endpoint {
            Endpoint::Unix(p) => {
                let stream = tokio::net::UnixStream::connect(p).await.map_err(connect_err)?;
                if let Some(token) = unix_token {
                    builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
                }
                let req = builder.body(Full::new(Bytes::new())).map_err(|e| ClientError::Protocol(e.to_string()))?;
                open_on(TokioIo::new(stream), req).await
            }
            Endpoint::Tcp { addr, token } => {
                let stream = tokio::net::TcpStream::connect(addr).await.map_err(connect_err)?;
                builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
                let req = builder.body(Full::new(Bytes::new())).map_err(|e| ClientError::Protocol(e.to_string()))?;
                open_on(TokioIo::new(stream), req).await
            }
        }
    }

    async fn send(&self, method: Method, path: &str, body: Vec<u8>) -> Result<(u16, Bytes), ClientError> {
        let body = Bytes::from(body);
        let token = match &self.endpoint {
            Endpoint::Unix(p) => self.unix_token(p),
            Endpoint::Tcp { .. } => None,
        };
        let (status, answer) = self.send_once(method.clone(), path, body.clone(), token.as_deref()).await?;
        match self.retry_token(status, token.is_some()) {
            Some(token) => self.send_once(method, path, body, Some(&token)).await,
            None => Ok((status, answer)),
        }
    }

    /// One try of [`Self::send`], a Unix-socket request with `unix_token` if given: on a kept
    /// connection when one is idle, else on a new one; the connection is kept after the answer.
    async fn send_once(&self, method: Method, path: &str, body: Bytes, unix_token: Option<&str>) -> Result<(u16, Bytes), ClientError> {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::CONTENT_TYPE, "application/json");
        let token = match &self.endpoint {
            Endpoint::Unix(_) => unix_token,
            Endpoint::Tcp { token, .. } => Some(token.as_str()),
        };
        if let Some(token) = token {
            builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let mut req = builder.body(Full::new(body)).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let lost = |e: hyper::Error| lost_or_protocol(e, &self.describe());
        while let Some(mut sender) = self.take_idle() {
            match sender.try_send_request(req).await {
                Ok(resp) => return self.finish(sender, resp).await,
                Err(mut e) => match e.take_message() {
                    // Never written: the connection had closed; the next one takes it.
                    Some(back) => req = back,
                    None => return Err(lost(e.into_error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        let resp = sender.send_request(req).await.map_err(lost)?;
        self.finish(sender, resp).await
    }

    /// A new HTTP/1.1 connection to the daemon, driven by its own task until it closes.
    async fn connect(&self) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, ClientError> {
        let connect_err = |source| ClientError::Connect { endpoint: self.describe(), source };
        let lost = |e: hyper::Error| lost_or_protocol(e, &self.describe());
        match &self.endpoint {
            Endpoint::Unix(p) => driven(tokio::net::UnixStream::connect(p).await.map_err(connect_err)?).await.map_err(lost),
            Endpoint::Tcp { addr, .. } => driven(tokio::net::TcpStream::connect(addr).await.map_err(connect_err)?).await.map_err(lost),
        }
    }

    /// The answer's status and whole body; the connection is kept for the next call when it
    /// stays open.
    async fn finish(
        &self,
        sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        resp: hyper::Response<hyper::body::Incoming>,
    ) -> Result<(u16, Bytes), ClientError> {
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map_err(|e| lost_or_protocol(e, &self.describe()))?.to_bytes();
        if !sender.is_closed() {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.push((std::time::Instant::now(), sender));
            if idle.len() > POOL_MAX {
                idle.remove(0);
            }
        }
        Ok((status, body))
    }

    /// The newest idle connection still open and younger than [`POOL_IDLE`]; older ones are
    /// dropped (closing them).
    fn take_idle(&self) -> Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|(since, sender)| since.elapsed() < POOL_IDLE && !sender.is_closed());
        idle.pop().map(|(_, sender)| sender)
    }

    fn describe(&self) -> String {
        match &self.endpoint {
            Endpoint::Unix(p) => p.display().to_string(),
            Endpoint::Tcp { addr, .. } => addr.clone(),
        }
    }
}

/// The operator's token in the `token` file beside the socket `socket`, when readable and not
/// empty ([`Endpoint::Unix`]). Read at each request: a daemon may make it after the client, or
/// a new one.
fn token_beside(socket: &std::path::Path) -> Option<String> {
    let token = std::fs::read_to_string(socket.with_file_name("token")).ok()?;
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

/// The HTTP/1.1 handshake on `stream`; the connection is driven by a task of its own until it
/// closes (its sender dropped, or the daemon closing it).
async fn driven<S>(stream: S) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move { conn.await.ok() });
    Ok(sender)
}

/// [`ClientError::Lost`] for a connection that ended before the answer (EOF mid-message, closed,
/// canceled, reset, broken pipe); [`ClientError::Protocol`] for an answer not understood.
fn lost_or_protocol(e: hyper::Error, endpoint: &str) -> ClientError {
    use std::error::Error as _;
    let io_lost = e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).is_some_and(|io| {
        matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        )
    });
    if e.is_incomplete_message() || e.is_closed() || e.is_canceled() || io_lost {
        ClientError::Lost { endpoint: endpoint.to_owned(), detail: e.to_string() }
    } else {
        ClientError::Protocol(e.to_string())
    }
}

/// Send `req` on `io` and return the answer with its body still streaming (the connection is
/// driven until the body is done or dropped).
async fn open_on<S>(io: TokioIo<S>, req: Request<Full<Bytes>>) -> Result<hyper::Response<hyper::body::Incoming>, ClientError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let proto = |e: hyper::Error| ClientError::Protocol(e.to_string());
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(proto)?;
    tokio::spawn(conn);
    sender.send_request(req).await.map_err(proto)
}

/// The typed error of a non-2xx answer (the error envelope), or what was not understood.
pub fn error_of(status: u16, answer: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorEnvelope>(answer) {
        Ok(env) => ClientError::Api(env.error),
        Err(_) => ClientError::Protocol(format!("HTTP {status}: {}", String::from_utf8_lossy(answer))),
    }
}

/// Percent-encode a path segment (Space names and run ids are plain, but never trust input).
pub(crate) fn enc(s: &str) -> String {
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

macro_rules! client_methods {
    ($( $name:ident: $marker:ident, $method:ident $path:literal,
        $req:ty => $res:ty, $ro:literal, $aud:ident $([$($hint:ident),*])?, $doc:literal; )*) => {
        /// One method per operation of the catalogue ([`crate::op`]), named after it.
        impl Client {
            $(
                #[doc = $doc]
                #[doc = ""]
                #[doc = concat!("`", stringify!($name), "`: ", stringify!($method), " `", $path, "`. Errors: [`ClientError`].")]
                pub async fn $name(&self, req: &$req) -> Result<$res, ClientError> {
                    self.op::<crate::ops::$marker>(req).await
                }
            )*
        }
    };
}

crate::op::for_each_operation!(client_methods);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod pool_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A bare HTTP/1.1 server on a Unix socket that answers every request `{"n": K}` (K counts
    /// the requests) and counts the connections it accepted; with `close_after_first`, it closes
    /// each connection after its first answer (a daemon's idle limit, a restart).
    /// The socket lives in a temp dir removed when the returned guard drops.
    async fn server(close_after_first: bool) -> (tempfile::TempDir, std::path::PathBuf, Arc<AtomicUsize>) {
        let dir = tempfile::Builder::new().prefix("spaces-pool-").tempdir().unwrap();
        let socket = dir.path().join("spacesd.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let requests = requests.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.clear();
                        let n = requests.fetch_add(1, Ordering::SeqCst) + 1;
                        let body = format!("{{\"n\":{n}}}");
                        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
                        if conn.write_all(format!("{head}{body}").as_bytes()).await.is_err() || close_after_first {
                            return;
                        }
                    }
                });
            }
        });
        (dir, socket, accepted)
    }

    async fn get(client: &Client) -> u64 {
        let v: serde_json::Value = client.call::<(), _>(Method::GET, "/v1/spaces", None).await.unwrap();
        v["n"].as_u64().unwrap()
    }

    #[tokio::test]
    async fn calls_in_a_row_share_one_kept_alive_connection() {
        let (_dir, socket, accepted) = server(false).await;
        let client = Client::new(Endpoint::Unix(socket));
        let clone = client.clone();
        assert_eq!([get(&client).await, get(&clone).await, get(&client).await], [1, 2, 3]);
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection for three calls (clones share it)");
    }

    #[tokio::test]
    async fn a_kept_connection_the_daemon_closed_is_replaced_without_an_error() {
        let (_dir, socket, accepted) = server(true).await;
        let client = Client::new(Endpoint::Unix(socket));
        assert_eq!(get(&client).await, 1);
        // The server has closed that connection (at once after its answer: the client may not
        // have seen it yet); the next calls still answer.
        assert_eq!(get(&client).await, 2);
        assert_eq!(get(&client).await, 3);
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }
}
