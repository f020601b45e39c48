//! Following a run's events live: [`Client::follow`] reads the server-sent event stream of
//! `agent_events` (`Accept: text/event-stream`), and falls back to long-polling the same route
//! when the daemon does not answer with a stream (an older daemon answers the JSON page).
//!
//! Both ways stand on the same cursor: a stream that breaks (the daemon restarted, a proxy cut
//! it) is opened again with `Last-Event-ID` set to the last event received, so every event
//! comes once, in order. [`EventFollow::next`] returns `None` at the end the caller chose
//! ([`Until`]); [`EventFollow::status`] then says the run's status at that moment.

use std::collections::VecDeque;

use bytes::{Buf, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::client::{Client, ClientError};
use crate::error::ApiError;
use crate::event::{Event, EventsPage};
use crate::run::{AgentEventsRequest, Status};

/// How long one long-poll of the fallback waits, ms.
pub const POLL_WAIT_MS: u64 = 20_000;
/// Reconnections in a row without an event in between before the follow gives up.
const MAX_RECONNECTS: u32 = 5;

/// Where a follow ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Caught up and the run no longer `running` (its turn ended): `--follow --until turn`.
    Turn,
    /// Caught up and the run `stopped` or `done`: across turns.
    Stopped,
}

impl Until {
    /// `"turn"` or `"stopped"` (the SDKs' spelling of the value). Errors: another value, named
    /// in a message that gives both.
    pub fn parse(value: &str) -> Result<Until, String> {
        match value {
            "turn" => Ok(Until::Turn),
            "stopped" => Ok(Until::Stopped),
            other => Err(format!("until {other:?}: want \"turn\" or \"stopped\"")),
        }
    }

    /// The SSE query value.
    pub fn as_str(self) -> &'static str {
        match self {
            Until::Turn => "turn",
            Until::Stopped => "stopped",
        }
    }

    /// Whether a caught-up follow of a run in `status` ends here.
    pub fn reached(self, status: Status) -> bool {
        match self {
            Until::Turn => status != Status::Running,
            Until::Stopped => matches!(status, Status::Stopped | Status::Done),
        }
    }
}

/// How the events arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Not opened yet.
    Unopened,
    /// The server-sent event stream.
    Sse,
    /// Long-polls of the JSON route (the daemon answered no stream).
    LongPoll,
}

impl Transport {
    /// `"unopened"`, `"sse"` or `"long_poll"`: how the SDKs report it.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Unopened => "unopened",
            Transport::Sse => "sse",
            Transport::LongPoll => "long_poll",
        }
    }
}

/// A live follow of one run's events (see the module doc). Made by [`Client::follow`].
pub struct EventFollow {
    client: Client,
    space: String,
    run_id: String,
    cursor: u64,
    until: Until,
    raw: bool,
    transport: Transport,
    stream: Option<Incoming>,
    buf: BytesMut,
    pending: VecDeque<Event>,
    status: Option<Status>,
    ended: bool,
    reconnects: u32,
    /// Heartbeat comments seen (for tests and diagnostics).
    heartbeats: u64,
}

impl Client {
    /// Follow `run_id`'s events after `cursor` until `until`: server-sent events, or long-polls
    /// when the daemon answers no stream. No connection is made before the first
    /// [`EventFollow::next`].
    pub fn follow(&self, space: &str, run_id: &str, cursor: u64, until: Until) -> EventFollow {
        EventFollow {
            client: self.clone(),
            space: space.to_owned(),
            run_id: run_id.to_owned(),
            cursor,
            until,
            raw: false,
            transport: Transport::Unopened,
            stream: None,
            buf: BytesMut::new(),
            pending: VecDeque::new(),
            status: None,
            ended: false,
            reconnects: 0,
            heartbeats: 0,
        }
    }
}

impl EventFollow {
    /// Include each event's original harness line as `raw`.
    pub fn with_raw(mut self, raw: bool) -> Self {
        self.raw = raw;
        self
    }

    /// Never open a stream: long-poll from the start (what an older daemon gets anyway).
    pub fn long_poll_only(mut self) -> Self {
        self.transport = Transport::LongPoll;
        self
    }

    /// The seq of the last event returned (or the starting cursor).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The run's status when the follow ended (`None` before).
    pub fn status(&self) -> Option<Status> {
        self.status
    }

    /// How the events arrive (after the first [`Self::next`]).
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Heartbeat comments received on the stream so far.
    pub fn heartbeats(&self) -> u64 {
        self.heartbeats
    }

    /// The next event, or `None` once the follow reached its end. Errors: the route's (an
    /// unknown run, a cursor past the end, a refused credential), or the daemon unreachable.
    pub async fn next(&mut self) -> Result<Option<Event>, ClientError> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                self.cursor = e.seq;
                return Ok(Some(e));
            }
            if self.ended {
                return Ok(None);
            }
            match self.transport {
                Transport::LongPoll => self.poll().await?,
                Transport::Unopened | Transport::Sse => {
                    if self.stream.is_none() {
                        self.open().await?;
                        continue;
                    }
                    self.read().await?;
                }
            }
        }
    }

    fn request(&self, wait_ms: u64) -> AgentEventsRequest {
        AgentEventsRequest {
            space: self.space.clone(),
            run_id: self.run_id.clone(),
            cursor: Some(self.cursor),
            max: Some(AgentEventsRequest::MAX_LIMIT),
            wait_ms: Some(wait_ms),
            raw: self.raw.then_some(true),
        }
    }

    /// One long-poll page into `pending`.
    async fn poll(&mut self) -> Result<(), ClientError> {
        // The first read does not wait: a settled, caught-up run ends at once.
        let wait = if self.status.is_none() { 0 } else { POLL_WAIT_MS };
        let page = self.client.agent_events(&self.request(wait)).await?;
        self.take_page(page);
        Ok(())
    }

    fn take_page(&mut self, page: EventsPage) {
        self.status = Some(page.status);
        self.pending.extend(page.events);
        if self.pending.is_empty() {
            self.cursor = page.cursor;
        }
        if page.caught_up && self.until.reached(page.status) {
            self.ended = true;
        }
    }

    /// Open the stream at the cursor (`Last-Event-ID`), or switch to long-polls when the daemon
    /// answers JSON.
    async fn open(&mut self) -> Result<(), ClientError> {
        let mut path = format!(
            "/v1/spaces/{}/agents/{}/events?until={}",
            crate::client::enc(&self.space),
            crate::client::enc(&self.run_id),
            self.until.as_str()
        );
        if self.raw {
            path.push_str("&raw=true");
        }
        let headers = [("accept", "text/event-stream".to_owned()), ("last-event-id", self.cursor.to_string())];
        let resp = self.client.open_stream(&path, &headers).await?;
        let status = resp.status().as_u16();
        let is_stream = resp
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = resp.into_body();
        if !(200..300).contains(&status) {
            let bytes = body.collect().await.map_err(|e| ClientError::Protocol(e.to_string()))?.to_bytes();
            return Err(crate::client::error_of(status, &bytes));
        }
        if !is_stream {
            // An older daemon: the JSON page of the same route; long-poll from here on.
            self.transport = Transport::LongPoll;
            let bytes = body.collect().await.map_err(|e| ClientError::Protocol(e.to_string()))?.to_bytes();
            match serde_json::from_slice::<EventsPage>(&bytes) {
                Ok(page) => self.take_page(page),
                Err(e) => return Err(ClientError::Protocol(format!("agent_events: {e}"))),
            }
            return Ok(());
        }
        self.transport = Transport::Sse;
        self.buf.clear();
        self.stream = Some(body);
        Ok(())
    }

    /// Read the stream until at least one frame is complete; a stream that ends without its
    /// `end` event is opened again from the cursor.
    async fn read(&mut self) -> Result<(), ClientError> {
        let Some(stream) = self.stream.as_mut() else { return Ok(()) };
        match stream.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    self.buf.extend_from_slice(&data);
                }
                self.parse()?;
            }
            Some(Err(_)) | None => {
                // Broken or closed before its end: resume from the last event received.
                self.stream = None;
                self.reconnects += 1;
                if self.reconnects > MAX_RECONNECTS {
                    return Err(ClientError::Protocol(format!(
                        "the event stream of {} closed {MAX_RECONNECTS} times in a row without an event",
                        self.run_id
                    )));
                }
            }
        }
        Ok(())
    }

    /// Complete frames of the buffer into `pending` (events), the end, heartbeats, errors.
    fn parse(&mut self) -> Result<(), ClientError> {
        while let Some(at) = find_blank_line(&self.buf) {
            let frame = self.buf.split_to(at.0);
            self.buf.advance(at.1);
            let text = String::from_utf8_lossy(&frame);
            let (mut kind, mut data) = (String::from("message"), String::new());
            let mut comment = false;
            for line in text.lines() {
                if let Some(c) = line.strip_prefix(':') {
                    comment |= c.trim() == "heartbeat";
                } else if let Some(v) = field(line, "event") {
                    kind = v.to_owned();
                } else if let Some(v) = field(line, "data") {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(v);
                }
            }
            if comment && data.is_empty() {
                self.heartbeats += 1;
                continue;
            }
            match kind.as_str() {
                "message" => {
                    let e: Event = serde_json::from_str(&data).map_err(|e| ClientError::Protocol(format!("event: {e}")))?;
                    self.reconnects = 0;
                    self.pending.push_back(e);
                }
                "end" => {
                    let end: serde_json::Value = serde_json::from_str(&data).map_err(|e| ClientError::Protocol(format!("end: {e}")))?;
                    self.status = end.get("status").and_then(|s| s.as_str()).map(Status::parse);
                    self.ended = true;
                    self.stream = None;
                }
                "error" => {
                    let e: ApiError = serde_json::from_str(&data).map_err(|e| ClientError::Protocol(format!("error: {e}")))?;
                    self.stream = None;
                    return Err(ClientError::Api(e));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// `value` of an SSE line `name: value` (one optional space after the colon).
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// Where the first frame of `buf` ends: (its length, the length of the blank line after it).
fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            return Some((i, 2));
        }
        if buf[i] == b'\r' && buf.get(i + 1..i + 4) == Some(b"\n\r\n") {
            return Some((i, 4));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_on_blank_lines() {
        assert_eq!(find_blank_line(b"id: 1\ndata: {}\n\nid: 2"), Some((14, 2)));
        assert_eq!(find_blank_line(b"id: 1\r\n\r\n"), Some((5, 4)));
        assert_eq!(find_blank_line(b"id: 1\ndata: {}\n"), None);
        assert_eq!(field("data: {\"a\":1}", "data"), Some("{\"a\":1}"));
        assert_eq!(field("data:x", "data"), Some("x"));
        assert_eq!(field("database: x", "data"), None);
    }

    #[test]
    fn until_turn_ends_on_any_settled_status_and_stopped_only_at_the_end() {
        assert!(Until::Turn.reached(Status::Idle) && !Until::Turn.reached(Status::Running));
        assert!(!Until::Stopped.reached(Status::Idle) && Until::Stopped.reached(Status::Done));
    }
}
