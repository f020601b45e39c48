//! `Last-Event-ID` on `GET /mcp` (case M44): a session's stream is resumed only from an event
//! that session was sent; anything else is a definite `400` in the JSON-RPC error shape, never an
//! empty `200` stream.
//!
//! Why this layer exists. rmcp's session manager (3.11) takes any `Last-Event-ID` it can parse:
//! an index the session never reached (`9999`) on the common stream opens a stream that waits
//! for ever, and one while the common stream is open opens an idle "shadow" stream; an id it
//! cannot use (malformed, another session's request stream, a request stream it no longer
//! keeps) is answered with an immediately closed empty `200` (its comment: so a browser's
//! `EventSource` stops retrying; a non-200 answer stops it just as well). A client cannot tell
//! either from "nothing to replay".
//!
//! How. [`Resumable`] wraps rmcp's [`LocalSessionManager`]: every stream it hands rmcp (a
//! request's answer, the standalone `GET` stream, a resumed one) is watched as it is sent, and
//! the highest event index sent on each of the session's streams is kept ([`Sent`]). Event ids
//! are rmcp's: `N` on the session's common stream, `N/R` on the stream of its HTTP request `R`.
//! A resume is checked against what was sent before rmcp sees it; the common stream's `0` is
//! always accepted (rmcp's priming event that every `initialize` answer carries). A refusal,
//! or rmcp's own failure to resume, is handed to the `/mcp` middleware of this request through
//! a task-local slot ([`capture`]), which answers [`refusal_response`] in place of rmcp's empty
//! stream. The record of a session goes when it is closed, or when a new session finds it gone.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};

/// Why a `Last-Event-ID` was refused: the header's value and the reason, for the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The `Last-Event-ID` as sent (cut to 64 characters).
    pub last_event_id: String,
    /// What is wrong with it, said to the client.
    pub why: String,
}

/// The errors of [`Resumable`]: rmcp's own, or a refused `Last-Event-ID`.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// rmcp's session manager failed (no such session, a closed channel, ...).
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// The `Last-Event-ID` names no event this session was sent (see the module doc).
    #[error("Last-Event-ID {:?} refused: {}", .0.last_event_id, .0.why)]
    Refused(Refusal),
}

tokio::task_local! {
    /// The refusal of the `GET /mcp` this task serves, if its resume was refused.
    static REFUSED: RefCell<Option<Refusal>>;
}

/// Runs `serve` (one `/mcp` request) with a slot for its resume's refusal; returns its answer
/// and the refusal, if the request resumed a stream and that was refused.
pub async fn capture<F: std::future::Future>(serve: F) -> (F::Output, Option<Refusal>) {
    REFUSED
        .scope(RefCell::new(None), async move {
            let out = serve.await;
            (out, REFUSED.with(|r| r.borrow_mut().take()))
        })
        .await
}

fn note(refusal: &Refusal) {
    let _ = REFUSED.try_with(|r| *r.borrow_mut() = Some(refusal.clone()));
}

/// The answer to a refused `Last-Event-ID`: `400`, a JSON-RPC error (`-32600`, invalid request,
/// `id: null`) whose `data` carries the daemon's error code and the header's value.
pub fn refusal_response(refusal: &Refusal) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32600,
            "message": format!("Last-Event-ID {:?} {}", refusal.last_event_id, refusal.why),
            "data": {"code": "INVALID_ARGUMENT", "last_event_id": refusal.last_event_id},
        },
    });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The highest event index sent on each stream of one session.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Streams {
    /// On the common stream (ids `N`).
    common: Option<usize>,
    /// On the stream of each HTTP request (ids `N/R`, by `R`).
    requests: HashMap<u64, usize>,
}

/// One parsed rmcp event id: `N` (`request: None`) or `N/R`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EventId {
    index: usize,
    request: Option<u64>,
}

fn parse(id: &str) -> Option<EventId> {
    let digits = |s: &str| !s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit());
    match id.split_once('/') {
        Some((n, r)) if digits(n) && digits(r) => Some(EventId { index: n.parse().ok()?, request: Some(r.parse().ok()?) }),
        None if digits(id) => Some(EventId { index: id.parse().ok()?, request: None }),
        _ => None,
    }
}

/// What each live session was sent, by session id.
#[derive(Debug, Default)]
pub struct Sent {
    sessions: Mutex<HashMap<SessionId, Streams>>,
}

impl Sent {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Streams>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes an event sent to `session` (one without an id, a retry hint, is nothing to note).
    fn sent(&self, session: &SessionId, message: &ServerSseMessage) {
        let Some(id) = message.event_id.as_deref().and_then(parse) else { return };
        let mut sessions = self.lock();
        let streams = sessions.entry(session.clone()).or_default();
        let top = match id.request {
            None => streams.common.get_or_insert(id.index),
            Some(r) => streams.requests.entry(r).or_insert(id.index),
        };
        *top = (*top).max(id.index);
    }

    /// Whether `session` may resume from `last_event_id`; the refusal otherwise.
    fn check(&self, session: &SessionId, last_event_id: &str) -> Result<(), Refusal> {
        let refuse = |why: String| Refusal { last_event_id: last_event_id.chars().take(64).collect(), why };
        let Some(id) = parse(last_event_id) else {
            return Err(refuse(
                "is not an event id of this server (`N`, or `N/R` for a request's stream); resume from the id of the last \
                 event received on this session, or open the stream without Last-Event-ID"
                    .into(),
            ));
        };
        let sessions = self.lock();
        let streams = sessions.get(session);
        let top = match id.request {
            None => streams.and_then(|s| s.common).or(Some(0)),
            Some(r) => streams.and_then(|s| s.requests.get(&r).copied()),
        };
        match top {
            Some(top) if id.index <= top => Ok(()),
            _ => Err(refuse(
                "was never sent on this session (an id from another session, or past the last event sent); resume from \
                 the id of the last event received on this session, or open the stream without Last-Event-ID"
                    .into(),
            )),
        }
    }

    fn forget(&self, session: &SessionId) {
        self.lock().remove(session);
    }
}

/// rmcp's [`LocalSessionManager`] with the `Last-Event-ID` rule of the module doc.
pub struct Resumable {
    inner: LocalSessionManager,
    sent: Arc<Sent>,
}

impl Resumable {
    /// Wraps `inner`.
    pub fn new(inner: LocalSessionManager) -> Resumable {
        Resumable { inner, sent: Arc::new(Sent::default()) }
    }

    /// `stream` of `session`, each event noted as it is sent.
    fn watched(
        &self,
        session: &SessionId,
        stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        let (sent, session) = (self.sent.clone(), session.clone());
        stream.inspect(move |m| sent.sent(&session, m))
    }
}

impl SessionManager for Resumable {
    type Error = ResumeError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Forget sessions rmcp has ended meanwhile (idle past their keep-alive).
        let known: Vec<SessionId> = self.sent.lock().keys().cloned().collect();
        for id in known {
            if !self.inner.has_session(&id).await? {
                self.sent.forget(&id);
            }
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.sent.forget(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.watched(id, stream))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.watched(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        if let Err(refusal) = self.sent.check(id, &last_event_id) {
            note(&refusal);
            return Err(ResumeError::Refused(refusal));
        }
        match self.inner.resume(id, last_event_id.clone()).await {
            Ok(stream) => Ok(self.watched(id, stream)),
            Err(e) => {
                // Sent, but rmcp cannot replay it: the request's stream ended and is no longer kept.
                let refusal = Refusal {
                    last_event_id: last_event_id.chars().take(64).collect(),
                    why: format!("cannot be resumed: its stream ended and its events are no longer kept ({e}); send the request again"),
                };
                note(&refusal);
                Err(ResumeError::Refused(refusal))
            }
        }
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(self.inner.restore_session(id).await?)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn event(id: &str) -> ServerSseMessage {
        ServerSseMessage::priming(id, std::time::Duration::from_secs(1))
    }

    #[test]
    fn only_ids_sent_on_the_session_resume() {
        let sent = Sent::default();
        let (a, b): (SessionId, SessionId) = ("a".into(), "b".into());
        for id in ["0/1", "1/1", "2/1", "0", "1"] {
            sent.sent(&a, &event(id));
        }
        sent.sent(&b, &event("0/7"));
        for ok in ["0", "1", "0/1", "2/1"] {
            assert_eq!(sent.check(&a, ok), Ok(()), "{ok}");
        }
        for never in ["2", "9999", "3/1", "0/2", "0/7"] {
            assert!(sent.check(&a, never).unwrap_err().why.contains("never sent"), "{never}");
        }
        for malformed in ["", "x", "1/", "/1", "-1", "1/1/1", "1/x", " 1", "99999999999999999999999"] {
            assert!(sent.check(&a, malformed).unwrap_err().why.contains("not an event id"), "{malformed:?}");
        }
        // A session that was sent nothing yet still has rmcp's priming `0` on its common stream.
        assert_eq!(sent.check(&"c".into(), "0"), Ok(()));
        assert!(sent.check(&"c".into(), "0/0").is_err());
        sent.forget(&a);
        assert!(sent.check(&a, "0/1").is_err());
    }

    #[test]
    fn a_refusal_is_a_json_rpc_error() {
        let r = refusal_response(&Refusal { last_event_id: "9999".into(), why: "was never sent".into() });
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert_eq!(r.headers()["content-type"], "application/json");
    }
}
