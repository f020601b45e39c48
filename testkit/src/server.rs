//! [`ScriptedServer`]: an axum server on 127.0.0.1 answering model requests from a [`Script`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::Router;
use futures_util::stream;

use crate::script::{Reply, Script};
use crate::wire::plain;
pub use crate::wire::SseFrame;
use crate::{anthropic, chat, gemini, openai};

/// Which model API the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic Messages streaming (`POST /v1/messages`), for Claude Code.
    AnthropicMessages,
    /// OpenAI Responses streaming (`POST /v1/responses`), for Codex.
    OpenAiResponses,
    /// OpenAI Chat Completions streaming (`POST /v1/chat/completions`), for OpenAI-compatible
    /// providers (opencode).
    OpenAiChatCompletions,
    /// Gemini API streaming (`POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`), for
    /// Gemini CLI.
    GeminiStreamGenerateContent,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The JSON body when it parsed as JSON.
    pub json: Option<serde_json::Value>,
    /// True when the request consumed a script reply (a model call).
    pub model_call: bool,
}

/// Computes the reply to a model call from its JSON body, for conversations whose next step
/// depends on what a tool answered (a process id, a cursor). `None` leaves the call to the
/// script.
pub type Responder = Arc<dyn Fn(&serde_json::Value) -> Option<Reply> + Send + Sync>;

struct Shared {
    wire: Wire,
    script: Mutex<Script>,
    responder: Option<Responder>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// SSE frames handed to the connection so far, over every streamed reply.
    frames_sent: AtomicUsize,
    /// Streamed replies whose last frame was handed to the connection.
    replies_finished: AtomicUsize,
}

/// A running scripted endpoint. Dropping it stops the server.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedServer {
    /// Bind 127.0.0.1 on a random port and serve `script` in the background.
    pub async fn start(wire: Wire, script: Script) -> anyhow::Result<Self> {
        Self::start_on(wire, script, 0).await
    }

    /// Like [`ScriptedServer::start`], but each model call first asks `responder` (given the
    /// request's JSON body) for its reply; the script answers when it returns `None`.
    pub async fn start_with_responder(
        wire: Wire,
        script: Script,
        responder: impl Fn(&serde_json::Value) -> Option<Reply> + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        Self::serve(wire, script, Some(Arc::new(responder)), 0).await
    }

    /// Like [`ScriptedServer::start`] on a chosen port (0: random).
    pub async fn start_on(wire: Wire, script: Script, port: u16) -> anyhow::Result<Self> {
        Self::serve(wire, script, None, port).await
    }

    async fn serve(wire: Wire, script: Script, responder: Option<Responder>, port: u16) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            wire,
            script: Mutex::new(script),
            responder,
            requests: Mutex::new(Vec::new()),
            frames_sent: AtomicUsize::new(0),
            replies_finished: AtomicUsize::new(0),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("scripted model server ended: {e}");
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Append replies to the script.
    pub fn push(&self, reply: Reply) {
        if let Ok(mut s) = self.shared.script.lock() {
            s.replies.push_back(reply);
        }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Only the model calls (requests that consumed a reply).
    pub fn model_calls(&self) -> Vec<RecordedRequest> {
        self.requests().into_iter().filter(|r| r.model_call).collect()
    }

    /// SSE frames sent so far, over every streamed reply: a test waits on this (say, for a slow
    /// answer to be partly streamed) instead of sleeping.
    pub fn frames_sent(&self) -> usize {
        self.shared.frames_sent.load(Ordering::SeqCst)
    }

    /// Streamed replies sent to their last frame (a [`Reply::Hang`] never is; an error reply
    /// is not streamed).
    pub fn replies_finished(&self) -> usize {
        self.shared.replies_finished.load(Ordering::SeqCst)
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
    let is_model_call = method == Method::POST
        && match shared.wire {
            Wire::AnthropicMessages => anthropic::is_model_call(uri.path(), json.as_ref()),
            Wire::OpenAiResponses => openai::is_model_call(uri.path(), json.as_ref()),
            Wire::OpenAiChatCompletions => chat::is_model_call(uri.path(), json.as_ref()),
            Wire::GeminiStreamGenerateContent => gemini::is_model_call(uri.path(), json.as_ref()),
        };
    let reply = if is_model_call {
        let computed = match (&shared.responder, &json) {
            (Some(responder), Some(body)) => responder(body),
            _ => None,
        };
        computed.or_else(|| shared.script.lock().ok().map(|mut s| s.next_reply()))
    } else {
        None
    };
    if let Ok(mut reqs) = shared.requests.lock() {
        reqs.push(RecordedRequest {
            method: method.to_string(),
            path: path.clone(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect(),
            json: json.clone(),
            model_call: is_model_call,
        });
    }
    let Some(reply) = reply else {
        return match shared.wire {
            Wire::AnthropicMessages => anthropic::side_request(&method, uri.path(), json.as_ref()),
            Wire::OpenAiResponses => openai::side_request(&method, uri.path(), json.as_ref()),
            Wire::OpenAiChatCompletions => chat::side_request(&method, uri.path(), json.as_ref()),
            Wire::GeminiStreamGenerateContent => gemini::side_request(&method, uri.path(), json.as_ref()),
        };
    };
    match reply {
        Reply::HttpError { status, body } => plain(status, body),
        Reply::RateLimited { reset_secs } => crate::wire::rate_limited(shared.wire, reset_secs),
        Reply::Hang => {
            let never = stream::pending::<Result<Bytes, std::io::Error>>();
            sse_response(Body::from_stream(never))
        }
        other => {
            let frames = match shared.wire {
                Wire::AnthropicMessages => anthropic::frames(&other, json.as_ref()),
                Wire::OpenAiResponses => openai::frames(&other, json.as_ref()),
                Wire::OpenAiChatCompletions => chat::frames(&other, json.as_ref()),
                Wire::GeminiStreamGenerateContent => gemini::frames(&other, json.as_ref(), uri.path()),
            };
            let counters = shared.clone();
            let s = stream::unfold((frames.into_iter().peekable(), counters), |(mut it, counters)| async move {
                let frame = it.next()?;
                if !frame.delay.is_zero() {
                    tokio::time::sleep(frame.delay).await;
                }
                counters.frames_sent.fetch_add(1, Ordering::SeqCst);
                if it.peek().is_none() {
                    counters.replies_finished.fetch_add(1, Ordering::SeqCst);
                }
                let mut text = String::new();
                if let Some(ev) = &frame.event {
                    text.push_str(&format!("event: {ev}\n"));
                }
                match &frame.data {
                    // A string is sent as it is: Chat Completions' closing `data: [DONE]`.
                    serde_json::Value::String(s) => text.push_str(&format!("data: {s}\n\n")),
                    data => text.push_str(&format!("data: {data}\n\n")),
                }
                Some((Ok::<_, std::io::Error>(Bytes::from(text)), (it, counters)))
            });
            sse_response(Body::from_stream(s))
        }
    }
}

fn sse_response(body: Body) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-cache"));
    resp
}
