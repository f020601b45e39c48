//! [`AcpNormalizer`]: one ACP conversation (JSON-RPC lines on the agent's stdout) to events, and
//! the lines Spaces writes back.
//!
//! What goes out when (every line through [`Normalizer::take_outgoing`] unless said otherwise):
//! 1. `initialize` (id 0) is the launch plan's `initial_stdin` ([`super::rpc::initialize`]);
//! 2. on its answer: `session/load` when resuming a session and the agent advertised
//!    `agentCapabilities.loadSession` (and the harness can load a session in a new process,
//!    [`Flavor::load_in_new_process`]), else `session/resume` when it advertised
//!    `agentCapabilities.sessionCapabilities.resume`, else `session/new` (with a `notice` that the
//!    conversation starts fresh when a resume was asked); a failed load or resume falls back to
//!    `session/new` with the same notice;
//! 3. on the session id: `session/prompt` of the process's first turn (the launch's prompt, or
//!    the turn begun before the session was ready);
//! 4. follow-ups: [`Normalizer::turn_input`] gives the `session/prompt` line;
//! 5. interrupt: [`Normalizer::interrupt_input`] gives the `session/cancel` notification; the
//!    prompt's answer then has `stopReason: "cancelled"` and the turn ends `interrupted`. An
//!    interrupt before the prompt was sent ends the turn at once and the prompt is never sent;
//! 6. the agent's requests: `session/request_permission` is answered by the [`PermissionPolicy`]
//!    (after a cancel: `cancelled`, as ACP asks) and shown as a `permission` event; any other
//!    request gets a JSON-RPC "method not found" error (never left waiting) and a `notice`.
//!
//! The prompt's answer ends the turn: `end_turn` (text: the last answer), `max_turn_requests`
//! as `max_turns`, `cancelled` as `interrupted`, `max_tokens` and `refusal` as `error` with the
//! reason, an error answer as `error` (or `interrupted` after a cancel). Its `usage` (ACP
//! unstable: `inputTokens`, `outputTokens`, `cachedReadTokens`, ...) becomes a `usage` event, or
//! when it has none, Gemini CLI's `_meta.quota.token_count` ([`quota_usage_of`]).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use spaces_sdk::{EventKind, StopReason, Usage};

use super::rpc::{self, Incoming};
use crate::draft::EventDraft;
use crate::harness::Normalizer;
use crate::lines::{self, StderrTail};
use crate::plan::{ExitInfo, LaunchContext};
use crate::{ending, wording};

/// What differs between ACP agents, as far as the conversation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavor {
    /// The agent's name in notices (`opencode`, `Gemini CLI`).
    pub name: &'static str,
    /// Whether `session/load` of a session made by an earlier process works (it does not for
    /// Gemini CLI 0.61.0, which advertises it): when false a resume is a fresh session + notice.
    pub load_in_new_process: bool,
}

/// How `session/request_permission` is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionPolicy {
    /// Pick an `allow_once` option, else `allow_always`, else the first option (Spaces runs
    /// agents unattended inside their Space, as the other harnesses skip permissions).
    #[default]
    Allow,
    /// Pick `reject_once`, else `reject_always`; cancel when there is neither.
    Reject,
}

/// A request of ours waiting for its answer.
#[derive(Debug, Clone, PartialEq)]
enum Pending {
    Initialize,
    NewSession,
    /// `session/load` or `session/resume` of this session.
    Restore(String),
    Prompt,
}

/// A tool call of the turn in flight without its result yet.
#[derive(Debug, Clone)]
pub(super) struct OpenTool {
    pub(super) id: String,
    pub(super) title: String,
    pub(super) kind: String,
}

/// Per-run state of one ACP agent (one process at a time; [`Normalizer::launched`] resets the
/// per-process part).
#[derive(Debug)]
pub struct AcpNormalizer {
    flavor: Flavor,
    policy: PermissionPolicy,
    pub(super) turn: u32,
    in_flight: bool,
    interrupt_requested: bool,
    // The process.
    cwd: String,
    mcp_servers: Value,
    resume: Option<String>,
    next_id: u64,
    pending: BTreeMap<u64, Pending>,
    session_id: Option<String>,
    ready: bool,
    /// The text of a turn to send once the session is ready.
    wanted: Option<String>,
    /// A `session/prompt` is out and unanswered.
    prompt_out: bool,
    /// A `session/load` is replaying the history.
    pub(super) loading: bool,
    outgoing: Vec<String>,
    // The turn.
    pub(super) answer: String,
    pub(super) thought: String,
    pub(super) last_answer: Option<String>,
    pub(super) open_tools: Vec<OpenTool>,
    stderr_tail: StderrTail,
}

impl AcpNormalizer {
    /// A normalizer for a fresh run of the agent `flavor`, answering permissions by `policy`.
    /// Before any [`Normalizer::launched`] it expects the `initialize` answer (id 0) first.
    pub fn new(flavor: Flavor, policy: PermissionPolicy) -> Self {
        Self {
            flavor,
            policy,
            turn: 0,
            in_flight: false,
            interrupt_requested: false,
            cwd: "/".to_owned(),
            mcp_servers: json!([]),
            resume: None,
            next_id: 1,
            pending: BTreeMap::from([(rpc::INITIALIZE_ID, Pending::Initialize)]),
            session_id: None,
            ready: false,
            wanted: None,
            prompt_out: false,
            loading: false,
            outgoing: Vec::new(),
            answer: String::new(),
            thought: String::new(),
            last_answer: None,
            open_tools: Vec::new(),
            stderr_tail: StderrTail::default(),
        }
    }

    fn ev(&self, kind: EventKind) -> EventDraft {
        EventDraft::new(self.turn, kind)
    }

    fn send(&mut self, method: &str, params: Value, pending: Pending) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.outgoing.push(rpc::request(id, method, params));
        self.pending.insert(id, pending);
        id
    }

    fn prompt_line(&mut self, text: &str) -> Option<String> {
        let sid = self.session_id.clone().filter(|_| self.ready)?;
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, Pending::Prompt);
        self.prompt_out = true;
        Some(rpc::request(id, "session/prompt", rpc::prompt_params(&sid, text)))
    }

    /// Send the wanted prompt if the session is ready.
    fn maybe_prompt(&mut self) {
        if self.ready && !self.prompt_out {
            if let Some(text) = self.wanted.take() {
                if let Some(line) = self.prompt_line(&text) {
                    self.outgoing.push(line);
                }
            }
        }
    }

    fn new_session(&mut self) {
        let params = rpc::session_params(&self.cwd, &self.mcp_servers, None);
        self.send("session/new", params, Pending::NewSession);
    }

    fn fresh_notice(&self, sid: &str, why: &str) -> EventDraft {
        self.ev(EventKind::Notice)
            .summary(format!("{} cannot resume session {sid} ({why}): the conversation starts fresh", self.flavor.name))
    }

    fn on_response(&mut self, id: &Value, outcome: Result<Value, Value>) -> Vec<EventDraft> {
        let known = id.as_u64().and_then(|n| self.pending.remove(&n));
        let kind = known.or_else(|| match &outcome {
            // An answer to no request we know (a re-fed log, a test): judged by its shape.
            Ok(r) if r.get("stopReason").is_some() => Some(Pending::Prompt),
            Ok(r) if r.get("sessionId").is_some() => Some(Pending::NewSession),
            Ok(r) if r.get("protocolVersion").is_some() => Some(Pending::Initialize),
            _ => None,
        });
        match (kind, outcome) {
            (Some(Pending::Initialize), Ok(r)) => self.initialized(&r),
            (Some(Pending::NewSession), Ok(r)) => {
                let sid = str_of(&r, "sessionId").unwrap_or("").to_owned();
                self.session_ready(sid, "new")
            }
            (Some(Pending::Restore(sid)), Ok(r)) => {
                self.loading = false;
                let sid = str_of(&r, "sessionId").map_or(sid, str::to_owned);
                self.session_ready(sid, "resumed")
            }
            (Some(Pending::Restore(sid)), Err(e)) => {
                self.loading = false;
                let out = vec![self.fresh_notice(&sid, &rpc::error_text(&e))];
                self.new_session();
                out
            }
            (Some(Pending::Prompt), outcome) => self.prompt_answered(outcome),
            (Some(step), Err(e)) => {
                // `initialize` or `session/new` failed: no turn can run in this process.
                let why = format!(
                    "{} refused {}: {}",
                    self.flavor.name,
                    if step == Pending::Initialize { "initialize" } else { "session/new" },
                    rpc::error_text(&e)
                );
                let mut out = vec![self.ev(EventKind::Error).summary(&why).text(&why)];
                self.wanted = None;
                if self.in_flight {
                    out.extend(self.end_turn(StopReason::Error, Some(why)));
                }
                out
            }
            (None, Err(e)) => vec![self.ev(EventKind::Notice).summary(format!("error answer to request {id}: {}", rpc::error_text(&e)))],
            (None, Ok(_)) => vec![wording::control(self.turn, &format!("answer to request {id}"))],
        }
    }

    fn initialized(&mut self, r: &Value) -> Vec<EventDraft> {
        let caps = r.get("agentCapabilities").unwrap_or(&Value::Null);
        let can_load = caps.get("loadSession").and_then(Value::as_bool).unwrap_or(false) && self.flavor.load_in_new_process;
        let can_resume = caps.pointer("/sessionCapabilities/resume").is_some_and(|v| !v.is_null());
        let info = r.get("agentInfo").unwrap_or(&Value::Null);
        let who = format!("{} {}", str_of(info, "name").unwrap_or(self.flavor.name), str_of(info, "version").unwrap_or(""));
        let mut out = vec![wording::control(
            self.turn,
            &format!("initialized: {}, protocol {}", who.trim(), r.get("protocolVersion").unwrap_or(&Value::Null)),
        )];
        match self.resume.clone() {
            Some(sid) if can_load || can_resume => {
                let params = rpc::session_params(&self.cwd, &self.mcp_servers, Some(&sid));
                self.loading = can_load;
                self.send(if can_load { "session/load" } else { "session/resume" }, params, Pending::Restore(sid));
            }
            Some(sid) => {
                out.push(self.fresh_notice(&sid, "it cannot load a session of an earlier process"));
                self.new_session();
            }
            None => self.new_session(),
        }
        out
    }

    fn session_ready(&mut self, sid: String, how: &str) -> Vec<EventDraft> {
        self.session_id = Some(sid.clone());
        self.ready = true;
        self.resume = None;
        let out = vec![self.ev(EventKind::Session).text(format!("session {sid} ({how}), {}", self.flavor.name))];
        self.maybe_prompt();
        out
    }

    fn prompt_answered(&mut self, outcome: Result<Value, Value>) -> Vec<EventDraft> {
        self.prompt_out = false;
        let mut out = self.flush();
        if let Ok(r) = &outcome {
            if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                out.push(wording::usage_event(self.turn, usage_of(u)));
            } else if let Some(u) = r.pointer("/_meta/quota/token_count").filter(|u| u.is_object()) {
                out.push(wording::usage_event(self.turn, quota_usage_of(u)));
            }
        }
        if !self.in_flight {
            out.push(self.ev(EventKind::Other).text("prompt answer outside a turn"));
            return out;
        }
        let (reason, text) = match outcome {
            Ok(r) => stop_reason(str_of(&r, "stopReason").unwrap_or(""), self.interrupt_requested, self.last_answer.clone()),
            Err(e) if self.interrupt_requested => {
                (StopReason::Interrupted, Some(format!("interrupted by the caller ({})", rpc::error_text(&e))))
            }
            Err(e) => {
                let why = rpc::error_text(&e);
                let reason = if crate::quota::is_limit(&why) { StopReason::QuotaWaiting } else { StopReason::Error };
                (reason, Some(why))
            }
        };
        out.extend(self.end_turn(reason, text));
        out
    }

    fn on_request(&mut self, id: &Value, method: &str, params: &Value) -> Vec<EventDraft> {
        if method != "session/request_permission" {
            self.outgoing.push(rpc::error_response(id, rpc::METHOD_NOT_FOUND, &format!("Spaces does not serve {method}")));
            return vec![self.ev(EventKind::Notice).summary(format!("{} asked for {method}; answered: not served", self.flavor.name))];
        }
        let mut out = self.flush();
        let options = params.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        let pick = |kinds: &[&str]| kinds.iter().find_map(|k| options.iter().find(|o| str_of(o, "kind") == Some(k)));
        let chosen = if self.interrupt_requested {
            None
        } else {
            match self.policy {
                PermissionPolicy::Allow => pick(&["allow_once", "allow_always"]).or(options.first()),
                PermissionPolicy::Reject => pick(&["reject_once", "reject_always"]),
            }
        };
        let tool = params.get("toolCall").unwrap_or(&Value::Null);
        let title = str_of(tool, "title").map(str::to_owned).or_else(|| {
            let id = str_of(tool, "toolCallId")?;
            self.open_tools.iter().find(|t| t.id == id).map(|t| t.title.clone())
        });
        let what = title.unwrap_or_else(|| "a tool call".to_owned());
        let (result, decision) = match chosen {
            Some(o) => {
                let oid = o.get("optionId").cloned().unwrap_or(Value::Null);
                let name = str_of(o, "kind").or_else(|| str_of(o, "name")).unwrap_or("?").to_owned();
                (json!({"outcome": {"outcome": "selected", "optionId": oid}}), name)
            }
            None => (json!({"outcome": {"outcome": "cancelled"}}), "cancelled".to_owned()),
        };
        self.outgoing.push(rpc::response(id, result));
        let mut ev = self.ev(EventKind::Permission).summary(format!("permission for {what}: {decision}"));
        if let Some(tid) = str_of(tool, "toolCallId") {
            ev.tool_id = Some(tid.to_owned());
        }
        out.push(ev);
        out
    }

    /// Close open tools as `failed`, then the single `turn_ended` of the turn in flight.
    fn end_turn(&mut self, reason: StopReason, text: Option<String>) -> Vec<EventDraft> {
        let mut out = self.flush();
        for tool in std::mem::take(&mut self.open_tools) {
            out.push(ending::unfinished_tool(self.turn, tool.id, tool.title, tool.kind));
        }
        let mut ended = self.ev(EventKind::TurnEnded).stop(reason).summary(wording::turn_ended(self.turn, reason, text.as_deref()));
        if let Some(text) = text {
            ended = ended.text(text);
        }
        out.push(ended);
        self.in_flight = false;
        self.interrupt_requested = false;
        out
    }
}

impl Normalizer for AcpNormalizer {
    fn begin_turn(&mut self, turn: u32, text: &str) -> Vec<EventDraft> {
        let mut out = Vec::new();
        if self.in_flight {
            let why = format!("turn {turn} began before turn {} ended", self.turn);
            out.extend(self.end_turn(StopReason::Error, Some(why)));
        }
        self.turn = turn;
        self.in_flight = true;
        self.interrupt_requested = false;
        self.open_tools.clear();
        self.last_answer = None;
        out.push(self.ev(EventKind::TurnStarted).summary(wording::turn_started(turn)));
        out.push(self.ev(EventKind::UserMessage).text(text));
        match (&self.session_id, self.ready) {
            // The session goes on: say so in this turn, as the other CLIs' per-turn init lines do.
            (Some(sid), true) => out.push(self.ev(EventKind::Session).text(format!("session {sid}, {}", self.flavor.name))),
            // The handshake is under way: the prompt goes out when the session is ready.
            _ => self.wanted = Some(text.to_owned()),
        }
        out
    }

    fn interrupt_requested(&mut self) -> Vec<EventDraft> {
        if !self.in_flight {
            return Vec::new();
        }
        self.interrupt_requested = true;
        let mut out = self.flush();
        out.push(self.ev(EventKind::CancelRequested).summary(wording::INTERRUPT_REQUESTED));
        if !self.prompt_out {
            // Nothing reached the agent yet: the turn ends here and its prompt is never sent.
            self.wanted = None;
            out.extend(self.end_turn(StopReason::Interrupted, Some("interrupted by the caller before the prompt was sent".to_owned())));
        }
        out
    }

    fn stdout_line(&mut self, line: &str) -> Vec<EventDraft> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            return Vec::new();
        }
        let out = match rpc::parse(line) {
            Some(Incoming::Response { id, outcome }) => self.on_response(&id, outcome),
            Some(Incoming::Request { id, method, params }) => self.on_request(&id, &method, &params),
            Some(Incoming::Notification { method, params }) if method == "session/update" => self.session_update(&params, line),
            Some(Incoming::Notification { method, .. }) => vec![wording::control(self.turn, &method)],
            None => vec![self.ev(EventKind::Other).text(line)],
        };
        lines::finish_line(self.turn, line, out)
    }

    fn stderr_line(&mut self, line: &str) -> Vec<EventDraft> {
        self.stderr_tail.push(line);
        Vec::new()
    }

    fn process_exited(&mut self, exit: &ExitInfo) -> Vec<EventDraft> {
        let tail = self.stderr_tail.text_for(exit);
        let how = ending::how(exit);
        let mut out = self.flush();
        if self.in_flight {
            let reason = ending::stop_reason_at_exit(exit, self.interrupt_requested);
            let text = match reason {
                StopReason::Stopped => format!("the run was stopped; the agent {how}"),
                StopReason::Interrupted => format!("the agent {how} after an interrupt"),
                _ if tail.is_empty() => format!("the agent {how} before finishing the turn"),
                _ => format!("the agent {how} before finishing the turn: {tail}"),
            };
            out.extend(self.end_turn(reason, Some(text)));
        }
        out.push(ending::exited(self.turn, exit, &tail));
        self.open_tools.clear();
        self.ready = false;
        self.prompt_out = false;
        out
    }

    fn session_id(&self) -> Option<String> {
        self.session_id.clone()
    }

    fn tool_running(&self) -> bool {
        self.in_flight && !self.open_tools.is_empty()
    }

    fn turn_in_flight(&self) -> bool {
        self.in_flight
    }

    fn launched(&mut self, ctx: &LaunchContext<'_>) {
        self.cwd = ctx.cwd.display().to_string();
        self.mcp_servers = rpc::mcp_servers(ctx.mcp_servers);
        self.resume = ctx.session_id.map(str::to_owned);
        self.next_id = 1;
        self.pending = BTreeMap::from([(rpc::INITIALIZE_ID, Pending::Initialize)]);
        self.ready = false;
        self.prompt_out = false;
        self.loading = false;
        self.outgoing.clear();
        self.wanted = Some(ctx.prompt.to_owned()).filter(|p| !p.is_empty());
    }

    fn take_outgoing(&mut self) -> Vec<String> {
        std::mem::take(&mut self.outgoing)
    }

    /// The `session/prompt` of a follow-up when the session is ready; before that `None` (the
    /// prompt is kept and sent when the session is ready; [`crate::harness::Harness::user_message`] of
    /// an ACP harness is empty).
    fn turn_input(&mut self, text: &str) -> Option<String> {
        if self.prompt_out {
            // A prompt is still out: keep this one for when its answer comes.
            self.wanted = Some(text.to_owned());
            return None;
        }
        match self.prompt_line(text) {
            Some(line) => {
                self.wanted = None;
                Some(line)
            }
            None => {
                self.wanted = Some(text.to_owned());
                None
            }
        }
    }

    /// `session/cancel` while a prompt is out; `None` otherwise.
    fn interrupt_input(&mut self) -> Option<String> {
        let sid = self.session_id.as_deref().filter(|_| self.prompt_out)?;
        Some(rpc::notification("session/cancel", json!({"sessionId": sid})))
    }
}

/// The turn's end for a prompt's `stopReason` (ACP schema `StopReason`); `answer` is the last
/// visible answer of the turn.
pub fn stop_reason(stop: &str, interrupt_requested: bool, answer: Option<String>) -> (StopReason, Option<String>) {
    match stop {
        "end_turn" => (StopReason::EndTurn, Some(answer.unwrap_or_default())),
        "cancelled" => (StopReason::Interrupted, Some("interrupted by the caller (cancelled)".to_owned())),
        "max_turn_requests" => {
            (StopReason::MaxTurns, Some("stopped at the agent's limit of model requests (max_turn_requests)".to_owned()))
        }
        "max_tokens" => (StopReason::Error, Some("the model reached its output token limit (max_tokens)".to_owned())),
        "refusal" => (StopReason::Error, Some("the agent refused to continue (refusal)".to_owned())),
        _ if interrupt_requested => (StopReason::Interrupted, Some(format!("interrupted by the caller ({stop})"))),
        other => (StopReason::Error, Some(format!("the turn ended with stop reason {other:?}"))),
    }
}

/// ACP's `usage` (camelCase: `inputTokens`, `outputTokens`, `cachedReadTokens`,
/// `cachedWriteTokens`, `thoughtTokens`) as a [`Usage`].
pub fn usage_of(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    Usage {
        input_tokens: n("inputTokens"),
        output_tokens: n("outputTokens"),
        cached_input_tokens: n("cachedReadTokens"),
        cache_creation_input_tokens: n("cachedWriteTokens"),
        reasoning_output_tokens: n("thoughtTokens"),
        ..Usage::default()
    }
}

/// Gemini CLI's own figure when it sends no ACP `usage`: the prompt answer's
/// `_meta.quota.token_count` (`{"input_tokens", "output_tokens"}`, snake_case; seen on 0.61.0),
/// as a [`Usage`].
pub fn quota_usage_of(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    Usage { input_tokens: n("input_tokens"), output_tokens: n("output_tokens"), ..Usage::default() }
}

pub(super) fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}
