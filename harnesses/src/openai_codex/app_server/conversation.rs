//! [`Conversation`]: the client side of the `codex app-server` JSON-RPC dialogue, as data.
//!
//! The wire (codex-cli 0.171.0, `codex app-server generate-json-schema`; HARNESS-NOTES "Codex"):
//! one JSON object per line both ways, JSON-RPC 2.0 without the `jsonrpc` field. A request is
//! `{"id", "method", "params"}`, its answer `{"id", "result"}` or `{"id", "error": {"code",
//! "message"}}`, a notification `{"method", "params"}` (no id). The server also sends requests of
//! its own (approvals, user input); every one needs an answer or the turn waits on it.
//!
//! The order of one process: `initialize` (id [`INITIALIZE_ID`], the launch plan's stdin) ->
//! its result -> notification `initialized` and `thread/start` (or `thread/resume{threadId}` to
//! continue a session) -> its result names the thread -> `turn/start{threadId, input}` for the
//! turn waiting on it. Then, while the process lives: `turn/start` per follow-up,
//! `turn/interrupt{threadId, turnId}`, `turn/steer{threadId, expectedTurnId, input}`.
//!
//! Nothing here does I/O: every method returns or queues whole lines, without their `\n`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// The id of the `initialize` request every process starts with (it is in the launch plan's
/// `initial_stdin`, written before the normalizer says anything).
pub const INITIALIZE_ID: i64 = 1;

/// The `clientInfo.name` Spaces introduces itself with (Codex puts it in its user agent).
pub const CLIENT_NAME: &str = "spaces";

/// JSON-RPC "method not found": the answer to a server request Spaces does not handle.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// What a request of ours was, to read its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Initialize,
    ThreadStart,
    ThreadResume,
    ThreadFork,
    TurnStart,
    TurnInterrupt,
    TurnSteer,
}

impl Sent {
    /// The method name on the wire.
    pub fn method(self) -> &'static str {
        match self {
            Sent::Initialize => "initialize",
            Sent::ThreadStart => "thread/start",
            Sent::ThreadResume => "thread/resume",
            Sent::ThreadFork => "thread/fork",
            Sent::TurnStart => "turn/start",
            Sent::TurnInterrupt => "turn/interrupt",
            Sent::TurnSteer => "turn/steer",
        }
    }
}

/// The `initialize` request line: `{"id":1,"method":"initialize","params":{"clientInfo":{"name":
/// "spaces","version":...}}}`.
pub fn initialize_line() -> String {
    json!({"id": INITIALIZE_ID, "method": "initialize",
        "params": {"clientInfo": {"name": CLIENT_NAME, "title": "Spaces", "version": env!("CARGO_PKG_VERSION")}}})
    .to_string()
}

/// `[{"type":"text","text":...}]`: a turn's input (`UserInput`).
fn text_input(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

/// Per-process state of the dialogue, plus what outlives a process (the session to resume).
#[derive(Debug, Default)]
pub struct Conversation {
    next_id: i64,
    /// Requests of ours not answered yet, by id.
    pending: BTreeMap<i64, Sent>,
    /// Lines to write, oldest first.
    outgoing: Vec<String>,
    /// `thread/start` params of this process: cwd and model.
    cwd: Option<String>,
    model: Option<String>,
    /// The thread to resume instead of starting one.
    resume: Option<String>,
    /// A rewind (issue 34): the thread is forked through this turn instead of resumed.
    fork_at: Option<String>,
    /// The id of the last turn that completed on the server (a rewind's point).
    pub last_turn: Option<String>,
    /// The thread of this process, once `thread/start|resume` answered (or a line named it).
    pub thread: Option<String>,
    /// The turn in flight on the server, once `turn/start` answered or `turn/started` came.
    pub turn_id: Option<String>,
    /// The text of a turn waiting for the thread (sent as `turn/start` when it is ready).
    pub waiting_text: Option<String>,
    /// A `turn/start` went out and its turn has not completed.
    pub turn_sent: bool,
    /// An interrupt asked for before the turn id was known: sent when it is.
    pub interrupt_wanted: bool,
}

impl Conversation {
    /// A new process starts: forget the old one's requests, thread and turn; keep what the new
    /// one needs (`cwd`, `model`, the thread to resume) and the text of a turn still waiting.
    pub fn launched(&mut self, cwd: &str, model: Option<&str>, resume: Option<&str>, fork_at: Option<&str>) {
        let waiting = self.waiting_text.take();
        let last_turn = self.last_turn.take();
        *self = Conversation {
            next_id: INITIALIZE_ID + 1,
            cwd: Some(cwd.to_owned()),
            model: model.map(str::to_owned),
            resume: resume.map(str::to_owned),
            fork_at: fork_at.map(str::to_owned),
            last_turn,
            waiting_text: waiting,
            ..Conversation::default()
        };
        self.pending.insert(INITIALIZE_ID, Sent::Initialize);
    }

    /// True once [`Conversation::launched`] ran: a process of this normalizer is talking (not a
    /// replay of stored output, nor a test feeding lines).
    pub fn live(&self) -> bool {
        self.cwd.is_some()
    }

    /// Drain the lines to write.
    pub fn take_outgoing(&mut self) -> Vec<String> {
        std::mem::take(&mut self.outgoing)
    }

    /// Which request of ours `id` answers (and forget it), if any.
    pub fn answered(&mut self, id: &Value) -> Option<Sent> {
        let id = id.as_i64()?;
        // A line re-fed after a daemon restart names ids this normalizer never sent: the
        // next request must not reuse them.
        self.next_id = self.next_id.max(id + 1);
        self.pending.remove(&id)
    }

    fn request(&mut self, sent: Sent, params: Value) -> String {
        let id = self.next_id.max(INITIALIZE_ID + 1);
        self.next_id = id + 1;
        self.pending.insert(id, sent);
        json!({"id": id, "method": sent.method(), "params": params}).to_string()
    }

    /// `thread/start|resume` params shared by both: the cwd, no approvals, no sandbox (what
    /// `codex exec --dangerously-bypass-approvals-and-sandbox` runs with; a Space is the
    /// boundary), and the model when the caller named one.
    fn thread_params(&self) -> Value {
        let mut p = json!({"approvalPolicy": "never", "sandbox": "danger-full-access"});
        if let Some(cwd) = &self.cwd {
            p["cwd"] = json!(cwd);
        }
        if let Some(model) = &self.model {
            p["model"] = json!(model);
        }
        p
    }

    /// `initialize` answered: queue `initialized` and `thread/start`, or `thread/resume` with
    /// `excludeTurns` (the history is the CLI's business; the answer stays one short line).
    pub fn on_initialized(&mut self) {
        self.outgoing.push(json!({"method": "initialized"}).to_string());
        let mut params = self.thread_params();
        let line = match (self.resume.clone(), self.fork_at.clone()) {
            // A rewind: a new thread holding the turns through `fork_at` only.
            (Some(thread), Some(turn)) => {
                params["threadId"] = json!(thread);
                params["lastTurnId"] = json!(turn);
                params["excludeTurns"] = json!(true);
                self.request(Sent::ThreadFork, params)
            }
            (Some(thread), None) => {
                params["threadId"] = json!(thread);
                params["excludeTurns"] = json!(true);
                self.request(Sent::ThreadResume, params)
            }
            (None, _) => self.request(Sent::ThreadStart, params),
        };
        self.outgoing.push(line);
    }

    /// The thread is ready: queue `turn/start` for the turn waiting on it, if any.
    pub fn on_thread(&mut self, thread: &str) {
        self.thread = Some(thread.to_owned());
        if let Some(text) = self.waiting_text.take() {
            let line = self.turn_start(&text);
            self.outgoing.push(line);
        }
    }

    /// The server's turn id is known: the turn started (nothing waits for the thread any more,
    /// even when this normalizer only reads re-fed output); queue the interrupt asked for before.
    pub fn on_turn_id(&mut self, turn_id: &str) {
        self.turn_id = Some(turn_id.to_owned());
        self.turn_sent = true;
        self.waiting_text = None;
        if std::mem::take(&mut self.interrupt_wanted) {
            if let Some(line) = self.turn_interrupt() {
                self.outgoing.push(line);
            }
        }
    }

    /// The server's turn ended.
    pub fn on_turn_completed(&mut self) {
        if let Some(id) = self.turn_id.take() {
            self.last_turn = Some(id);
        }
        self.turn_sent = false;
        self.interrupt_wanted = false;
    }

    /// `turn/start{threadId, input}` for `text` (the thread must be known).
    pub fn turn_start(&mut self, text: &str) -> String {
        let thread = self.thread.clone().unwrap_or_default();
        self.turn_sent = true;
        self.turn_id = None;
        self.request(Sent::TurnStart, json!({"threadId": thread, "input": text_input(text)}))
    }

    /// `turn/interrupt{threadId, turnId}`, when both are known.
    pub fn turn_interrupt(&mut self) -> Option<String> {
        let params = json!({"threadId": self.thread.clone()?, "turnId": self.turn_id.clone()?});
        Some(self.request(Sent::TurnInterrupt, params))
    }

    /// `turn/steer{threadId, expectedTurnId, input}`, when both ids are known.
    pub fn turn_steer(&mut self, text: &str) -> Option<String> {
        let params = json!({"threadId": self.thread.clone()?, "expectedTurnId": self.turn_id.clone()?, "input": text_input(text)});
        Some(self.request(Sent::TurnSteer, params))
    }

    /// Queue the error answer to a server request Spaces does not handle.
    pub fn refuse(&mut self, id: &Value, method: &str) {
        let message = format!("spaces does not handle {method} (threads run with approvalPolicy never)");
        self.outgoing.push(json!({"id": id, "error": {"code": METHOD_NOT_FOUND, "message": message}}).to_string());
    }
}
