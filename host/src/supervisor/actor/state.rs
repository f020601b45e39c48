//! The run actor's state machine, pure: no I/O, no clock, no store. The actor feeds it what
//! happened (a message, an interrupt, a stop, output, a closed stdout, an exit, a turn's end, a
//! deadline passing) with the time and the normalizer's view of the turn, and it answers what the
//! actor is to do (queue, start, interrupt, end the process, which status to store); the actor
//! does that I/O. Each transition is a method here and has a unit test (`state/tests.rs`) with a
//! fake process in place of a shim.
//!
//! Where the run's process is ([`State`]):
//!
//! ```text
//!            spawned / adopted                      stop (end the processes)
//!   Absent ───────────────────▶ Live(Live) ─────────────────────────────▶ Stopping { live, drain }
//!     ▲  ◀── process exited ─────┘   │ ▲                                     │ exit, or the drain
//!     │                              │ └ interrupt, closed stdout, stall:    ▼ deadline passed
//!     └────── stop with no process ──┼── marks in `Live` (what the exit means)  Stopped
//!                                    └──────────────────────────────────────▶ (terminal)
//! ```
//!
//! The turn in flight is the normalizer's (it reads the agent's lines); the machine keeps what
//! the turn and the process mean for what comes next: the queue, the stall rule, the marks of the
//! live process (interrupted, closing, ended by a rule, resuming a session, its closed stdout's
//! deadline) and the failures in a row (case P7's back-off).

use std::collections::VecDeque;
use std::time::Duration;

use spaces_harnesses::ProcessModel;
use spaces_sdk::Status;
use tokio::time::Instant;

use super::super::keys::Queued;

mod ends;
pub use ends::{exit_reason, AfterExit};
#[cfg(test)]
use ends::{Change, ExitPlan, DONE_REASON, INTERRUPTED, WAITING};

/// Most follow-ups one run holds queued behind its running turn; one more is refused with
/// `RESOURCE_QUEUE_FULL` (memory stays bounded whatever a caller sends).
pub const MAX_QUEUED_MESSAGES: usize = 64;
/// How long a stopped process's exit may take to reach the journal before the stop is
/// considered done without it.
pub const EXIT_AFTER_STOP: Duration = Duration::from_secs(5);
/// How long an agent may run on after closing its stdout before its process is ended (case
/// R42): an agent that exits closes its output first, and its exit follows within moments.
pub const OUTPUT_CLOSED_GRACE: Duration = Duration::from_secs(5);
/// How long an idle agent of an `exit_when_idle` run may run on after its stdin was closed
/// before its process is ended: a CLI whose event loop a child keeps alive (Gemini CLI with an
/// MCP server) does not exit on end of input by itself.
pub const STDIN_CLOSED_GRACE: Duration = Duration::from_secs(5);
/// Why an agent that closed its stdout and ran on was ended (the turn's error names it).
pub const OUTPUT_CLOSED: &str = "the agent closed its output (stdout) but kept running, so it could report nothing more";

/// What the machine knows of the run for good: set when the actor is made.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub model: ProcessModel,
    /// `exit_when_idle`: the agent's stdin is closed once it answered, its exit is `done`.
    pub exit_when_idle: bool,
    /// A persistent agent (`home`): its home is saved after turns and exits.
    pub persistent: bool,
    /// The stall rule's limit (`SPACES_STALL_MS`).
    pub stall_limit: Duration,
    /// A new process of the run continues its CLI's session (`supports.resume`); false: it
    /// starts a fresh one (Gemini CLI), and the status of an `exit_when_idle` run says so.
    pub resumes: bool,
}

/// Where the run's agent process is. `P` is the actor's handle of it (a shim client; a fake
/// in the tests).
#[derive(Debug)]
pub enum State<P> {
    /// No process of the run is live: none started yet, or the last one exited.
    Absent,
    /// A process is live.
    Live(Live<P>),
    /// A stop was asked: the queue is dropped and follow-ups refused. `live` is the stopped
    /// process until its exit reaches the journal, awaited until `drain`.
    Stopping { live: Option<Live<P>>, drain: Option<Instant> },
    /// Stopped: nothing of the run is left.
    Stopped,
}

/// A live process and what its exit will mean.
#[derive(Debug)]
pub struct Live<P> {
    pub handle: P,
    /// An interrupt was sent to its turn: a non-zero exit that follows is its effect (Codex
    /// exits 1 on SIGINT), not a failure.
    pub interrupted: bool,
    /// Its stdin was closed on purpose (`exit_when_idle`): its exit is `done`.
    pub closing: bool,
    /// When its stdin was closed on purpose, the moment it is ended if it still runs
    /// ([`STDIN_CLOSED_GRACE`]).
    pub close_by: Option<Instant>,
    /// A rule of the daemon ended it (the stall limit, a closed output): its end is an `error`
    /// (not a crash) for this reason.
    pub ended_by: Option<String>,
    /// It closed its stdout and has not exited: ended when this passes (case R42).
    pub out_closed: Option<Instant>,
    /// It was started to resume this session and has neither opened it nor finished a turn: if
    /// it fails now, the session cannot be resumed (case V25).
    pub resuming: Option<String>,
    /// Its launch options are out of date (a raised budget its CLI keeps itself): once idle its
    /// stdin is closed, and its exit leaves the run idle; the next turn starts a new process.
    pub renew: bool,
}

impl<P> Live<P> {
    fn new(handle: P, resuming: Option<String>) -> Self {
        Self { handle, interrupted: false, closing: false, close_by: None, ended_by: None, out_closed: None, resuming, renew: false }
    }
}

/// The stall rule's view of the turn in flight.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    pub last_output: Instant,
    /// When the last stall notice was given, since the last output.
    pub noticed: Option<Instant>,
}

/// The run actor's state: where the process is, and what the run holds for later.
#[derive(Debug)]
pub struct Machine<P> {
    pub setup: Setup,
    pub state: State<P>,
    /// Follow-ups waiting behind the running turn.
    pub queue: VecDeque<Queued>,
    pub stall: Stall,
    /// Consecutive turns whose process failed at once (for back-off, case P7).
    pub fast_failures: u32,
    /// The text of the turn in flight, for a fresh-session retry (V25).
    pub turn_text: String,
    /// The session given up by a reset (never resumed again by this actor).
    pub dropped_session: Option<String>,
}

/// How a follow-up is taken ([`Machine::admit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// The run is stopped: answered `ok: false`.
    Stopped,
    /// A stop is ending the run's processes: `AGENT_BUSY`.
    Stopping,
    /// [`MAX_QUEUED_MESSAGES`] already wait: `RESOURCE_QUEUE_FULL`.
    QueueFull(usize),
    /// `force`: the message goes first in the queue and the turn is interrupted.
    InterruptFirst,
    /// Queued behind the running turn, at this position.
    Queue(usize),
    /// The next turn, with none in flight and none queued: the previous turn ended but its
    /// per-turn process has not exited yet, so the turn starts as soon as it has. The run is
    /// `running` from now on (a follow until the turn's end follows this turn, not the last).
    AfterExit,
    /// Starts the next turn now.
    StartNow,
}

/// What the actor does once nothing else is under way ([`Machine::advance`]).
#[derive(Debug)]
pub enum Advance {
    Nothing,
    /// Start the next turn with this message.
    Start(Queued),
    /// Close the idle agent's stdin (`exit_when_idle`); its exit will be `done`.
    CloseStdin,
}

/// How a stop went once the processes were ended ([`Machine::stop_ended`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopEnd {
    /// Processes survived: the stop is answered `ok: false`.
    Failed,
    /// Nothing is left: the run is stopped now.
    Finish,
    /// The stopped process's exit is awaited (until the drain deadline).
    AwaitExit,
}

/// The deadlines the actor sleeps until.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The turn in flight is silent (the stall rule).
    Stall,
    /// The live process closed its stdout and ran on (R42).
    OutputClosed,
    /// The idle process whose stdin was closed (`exit_when_idle`) ran on.
    StdinClosed,
    /// The stopped process's exit did not reach the journal.
    Drain,
}

/// What a passed deadline asks of the actor ([`Machine::fire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fired {
    Nothing,
    /// Tell the run the agent is silent; `tool`: a tool call is running, so the turn goes on.
    StallNotice {
        silent: Duration,
        tool: bool,
    },
    /// Silent for twice the limit: end the process (its turn ends `error` for `why`).
    EndStalled {
        silent: Duration,
        why: String,
    },
    /// End the process that closed its stdout (R42).
    EndOutputClosed,
    /// End the idle process that did not exit after its stdin was closed; its exit is still
    /// `done`.
    EndStdinClosed,
    /// The stopped process is gone all the same; how it ended is not known.
    DrainExpired,
}

impl<P> Machine<P> {
    /// A run with no live process, its failures in a row so far `fast_failures`.
    pub fn new(setup: Setup, fast_failures: u32, now: Instant) -> Self {
        Self {
            setup,
            state: State::Absent,
            queue: VecDeque::new(),
            stall: Stall { last_output: now, noticed: None },
            fast_failures,
            turn_text: String::new(),
            dropped_session: None,
        }
    }

    /// A stop is ending the run's processes.
    pub fn is_stopping(&self) -> bool {
        matches!(self.state, State::Stopping { .. })
    }

    /// The live process, if any (also while a stop awaits its exit).
    pub fn live(&self) -> Option<&Live<P>> {
        match &self.state {
            State::Live(live) | State::Stopping { live: Some(live), .. } => Some(live),
            _ => None,
        }
    }

    pub fn live_mut(&mut self) -> Option<&mut Live<P>> {
        match &mut self.state {
            State::Live(live) | State::Stopping { live: Some(live), .. } => Some(live),
            _ => None,
        }
    }

    /// The live process's handle.
    pub fn process(&self) -> Option<&P> {
        self.live().map(|l| &l.handle)
    }

    pub fn process_mut(&mut self) -> Option<&mut P> {
        self.live_mut().map(|l| &mut l.handle)
    }

    /// A stop was asked (and perhaps done): no turn starts, no follow-up is taken.
    pub fn stop_requested(&self) -> bool {
        matches!(self.state, State::Stopping { .. } | State::Stopped)
    }

    /// No process, no turn (`in_flight`: the normalizer's), nothing queued: the actor may retire.
    pub fn is_dormant(&self, in_flight: bool) -> bool {
        self.live().is_none() && !in_flight && self.queue.is_empty()
    }

    /// A message now would start a new process in the run's folder (nothing of the run is
    /// running, or a per-turn CLI, whose last process may not have exited yet): R34 checks the
    /// folder first.
    pub fn message_starts_process(&self) -> bool {
        self.live().is_none() || self.setup.model == ProcessModel::PerTurn
    }

    /// How a follow-up is taken, the run's stored status `status`, the turn in flight or not
    /// (`in_flight`). The actor puts it in the queue as told.
    pub fn admit(&self, status: Status, force: bool, in_flight: bool) -> Admit {
        if status == Status::Stopped {
            return Admit::Stopped;
        }
        if self.stop_requested() {
            return Admit::Stopping;
        }
        // A per-turn process that ended its turn and has not exited yet takes no turn either,
        // nor a long-lived one whose stdin was closed (`exit_when_idle`): a new process starts
        // once it has exited, never beside it.
        let between_turns = (self.setup.model == ProcessModel::PerTurn && self.live().is_some()) || self.closing();
        if !in_flight && !between_turns {
            return Admit::StartNow;
        }
        if self.queue.len() >= MAX_QUEUED_MESSAGES {
            return Admit::QueueFull(self.queue.len());
        }
        if force && in_flight {
            return Admit::InterruptFirst;
        }
        if !in_flight && self.queue.is_empty() {
            return Admit::AfterExit;
        }
        Admit::Queue(self.queue.len() + 1)
    }

    /// An interrupt: false when no turn is in flight (nothing to do, nothing remembered).
    /// Otherwise the live process's exit that follows is the interrupt's effect.
    pub fn interrupt(&mut self, in_flight: bool) -> bool {
        if !in_flight {
            return false;
        }
        if let Some(live) = self.live_mut() {
            live.interrupted = true;
        }
        true
    }

    /// A rule of the daemon ends the live process, for `why`.
    pub fn end_by_rule(&mut self, why: String) {
        if let Some(live) = self.live_mut() {
            live.ended_by = Some(why);
        }
    }

    /// A stop was asked: the run goes `Stopping` and drops its queue (returns how many were
    /// dropped); the actor then ends every process of the run.
    pub fn stop(&mut self) -> usize {
        let live = match std::mem::replace(&mut self.state, State::Absent) {
            State::Live(live) => Some(live),
            State::Stopping { live, .. } => live,
            State::Absent | State::Stopped => None,
        };
        self.state = State::Stopping { live, drain: None };
        self.drop_queue()
    }

    /// The processes were ended (`clean`: none survived): how the stop goes on.
    pub fn stop_ended(&mut self, clean: bool, now: Instant) -> StopEnd {
        if !clean {
            return StopEnd::Failed;
        }
        match &mut self.state {
            State::Stopping { live: Some(_), drain } => {
                *drain = Some(now + EXIT_AFTER_STOP);
                StopEnd::AwaitExit
            }
            _ => StopEnd::Finish,
        }
    }

    /// The run is stopped: nothing of it is left.
    pub fn stopped(&mut self) {
        self.state = State::Stopped;
    }

    /// Discard the queue; returns how many messages it held.
    pub fn drop_queue(&mut self) -> usize {
        let n = self.queue.len();
        self.queue.clear();
        n
    }

    /// A turn starts with `text` (the caller's, unredacted: a fresh-session retry sends it again).
    pub fn turn_started(&mut self, text: String, now: Instant) {
        self.turn_text = text;
        self.stall = Stall { last_output: now, noticed: None };
        if let Some(live) = self.live_mut() {
            live.interrupted = false;
        }
    }

    /// A process was started for a turn, to resume `resuming` if given. It replaces whatever
    /// was live (a long-lived process whose stdin was closed).
    pub fn spawned(&mut self, handle: P, resuming: Option<String>) {
        let live = Live::new(handle, resuming);
        match &mut self.state {
            State::Stopping { live: slot, .. } => *slot = Some(live),
            state => *state = State::Live(live),
        }
    }

    /// A daemon restart found the run's process live; `out_closed`: it already closed its stdout.
    pub fn adopted(&mut self, handle: P, out_closed: bool, now: Instant) {
        self.spawned(handle, None);
        self.stall.last_output = now;
        if out_closed {
            self.stdout_closed(now);
        }
    }

    /// A batch of the process's output was stored: `saw_output` (lines, not only records) resets
    /// the stall rule; `session`: the CLI opened its session, so a failure from here on is the
    /// agent's own (P7), not a session that cannot be resumed (V25).
    pub fn output(&mut self, saw_output: bool, session: bool, now: Instant) {
        if saw_output {
            self.stall = Stall { last_output: now, noticed: None };
        }
        if session {
            if let Some(live) = self.live_mut() {
                live.resuming = None;
            }
        }
    }

    /// The live process closed its stdout and runs on: its exit usually follows at once; if it
    /// does not within [`OUTPUT_CLOSED_GRACE`], it is ended (R42).
    pub fn stdout_closed(&mut self, now: Instant) {
        if let Some(live) = self.live_mut() {
            live.out_closed.get_or_insert(now + OUTPUT_CLOSED_GRACE);
        }
    }

    /// The live process's stdin was closed at `now` ([`Advance::CloseStdin`]): ended if it
    /// still runs [`STDIN_CLOSED_GRACE`] later.
    pub fn stdin_closed(&mut self, now: Instant) {
        if let Some(live) = self.live_mut() {
            live.close_by.get_or_insert(now + STDIN_CLOSED_GRACE);
        }
    }

    /// The live long-lived process is to be replaced by a new one at the next turn ([`Live::renew`]).
    pub fn renew_process(&mut self) {
        let long_lived = self.setup.model == ProcessModel::LongLived;
        if let Some(live) = self.live_mut().filter(|_| long_lived) {
            live.renew = true;
        }
    }

    /// The live process's stdin was closed on purpose (`exit_when_idle`) and it has not exited.
    fn closing(&self) -> bool {
        self.live().is_some_and(|l| l.closing)
    }

    /// A message waits for the closing process (`exit_when_idle`) to exit: it is ended at `now`
    /// instead of after the rest of its grace. No effect on a process that is not closing.
    pub fn hurry_close(&mut self, now: Instant) {
        if let Some(live) = self.live_mut().filter(|l| l.closing) {
            live.close_by = Some(now);
        }
    }

    /// The earliest deadline to sleep until, the turn in flight or not (`in_flight`) and a tool
    /// call running or not (`tool`).
    pub fn deadline(&self, in_flight: bool, tool: bool) -> Option<(Instant, Timer)> {
        let limit = self.setup.stall_limit;
        let stall = (in_flight && self.live().is_some()).then(|| match (self.stall.noticed, tool) {
            (None, _) => self.stall.last_output + limit,
            (Some(at), true) => at + limit,
            (Some(_), false) => self.stall.last_output + limit * 2,
        });
        let drain = match self.state {
            State::Stopping { drain, .. } => drain,
            _ => None,
        };
        let out_closed = self.live().and_then(|l| l.out_closed);
        let close_by = self.live().and_then(|l| l.close_by);
        [(stall, Timer::Stall), (out_closed, Timer::OutputClosed), (close_by, Timer::StdinClosed), (drain, Timer::Drain)]
            .into_iter()
            .filter_map(|(at, timer)| at.map(|at| (at, timer)))
            .min_by_key(|(at, _)| *at)
    }

    /// The deadline of `timer` passed at `now`.
    pub fn fire(&mut self, timer: Timer, now: Instant, tool: bool) -> Fired {
        match timer {
            Timer::Stall => self.stall_passed(now, tool),
            Timer::OutputClosed => match self.live_mut() {
                Some(live) => {
                    live.out_closed = None;
                    live.ended_by = Some(OUTPUT_CLOSED.to_owned());
                    Fired::EndOutputClosed
                }
                None => Fired::Nothing,
            },
            Timer::StdinClosed => match self.live_mut() {
                Some(live) => {
                    live.close_by = None;
                    Fired::EndStdinClosed
                }
                None => Fired::Nothing,
            },
            Timer::Drain => {
                if let State::Stopping { drain, .. } = &mut self.state {
                    *drain = None;
                }
                Fired::DrainExpired
            }
        }
    }

    /// The stall rule (docs/operations.md): a turn silent for the limit gets a notice; silent
    /// for twice the limit with no tool call running, its process is ended. A silent turn whose
    /// tool call runs (a long build) only ever gets notices, one per limit of silence.
    fn stall_passed(&mut self, now: Instant, tool: bool) -> Fired {
        let silent = now.saturating_duration_since(self.stall.last_output);
        if self.stall.noticed.is_none() || tool {
            self.stall.noticed = Some(now);
            return Fired::StallNotice { silent, tool };
        }
        if silent >= self.setup.stall_limit * 2 {
            let why = format!("no output for {} s (stall limit)", silent.as_secs());
            self.end_by_rule(why.clone());
            self.stall.last_output = now;
            return Fired::EndStalled { silent, why };
        }
        Fired::Nothing
    }

    /// Once nothing else is under way: the next queued turn starts when the run can take it (a
    /// long-lived process takes it on its stdin; a per-turn one must be gone first), or an idle
    /// long-lived agent of an `exit_when_idle` run that answered (`turns` > 0) is closed.
    pub fn advance(&mut self, in_flight: bool, turns: u32) -> Advance {
        if self.stop_requested() || in_flight {
            return Advance::Nothing;
        }
        let long_lived = self.setup.model == ProcessModel::LongLived;
        if (long_lived && !self.closing()) || self.live().is_none() {
            if let Some(next) = self.queue.pop_front() {
                return Advance::Start(next);
            }
        }
        let exit_when_idle = self.setup.exit_when_idle;
        match self.live_mut() {
            Some(live) if long_lived && !live.closing && (live.renew || exit_when_idle && turns > 0) => {
                live.closing = true;
                Advance::CloseStdin
            }
            _ => Advance::Nothing,
        }
    }

    /// The wait before starting a process after `fast_failures` failures in a row (P7).
    pub fn backoff(&self) -> Option<Duration> {
        (self.fast_failures > 0).then(|| Duration::from_millis(500u64 << self.fast_failures.min(5)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
