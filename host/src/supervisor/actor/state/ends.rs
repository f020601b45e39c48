//! What the end of a process or of a turn means for the run: the machine's transitions at an
//! exit ([`Machine::process_ended`], [`Machine::exit_plan`]) and at a turn's end
//! ([`Machine::turn_ended`]).

use spaces_sdk::{Phase, Status, StopReason};

use super::{Live, Machine, State};

/// What the actor is told of a process that ended ([`Machine::process_ended`]).
#[derive(Debug)]
pub struct Ended<P> {
    pub live: Live<P>,
    pub stop_requested: bool,
}

impl<P> Ended<P> {
    /// The exit signal the normalizer is told: none when a rule of the daemon ended the process
    /// (it did not crash: its turn ends `error`, for the rule's reason).
    pub fn signal(&self, signal: Option<i32>) -> Option<i32> {
        if self.live.ended_by.is_some() {
            None
        } else {
            signal
        }
    }
}

/// The status a transition stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub status: Status,
    pub phase: Phase,
    pub reason: String,
}

fn change(status: Status, phase: Phase, reason: impl Into<String>) -> Option<Change> {
    Some(Change { status, phase, reason: reason.into() })
}

/// What the end of a process means ([`Machine::exit_plan`]), in the order the actor acts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitPlan {
    /// Save a persistent agent's home (what the CLI wrote after its turn's last line).
    pub save_home: bool,
    /// Messages dropped from the queue (P7), said in a `notice`.
    pub dropped: usize,
    pub then: AfterExit,
}

/// The run's next state after a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterExit {
    /// V25: `session` could not be resumed; the turn's text runs again in a fresh session
    /// (queued first), and nothing else happens.
    ResetSession { session: String },
    /// A stop ended it: the run is stopped.
    Stopped,
    /// Store this state (or none), then the next queued turn starts if any.
    Set(Option<Change>),
    /// The process failed: `crashed` when a signal killed it, else `failed`.
    Failed { crashed: bool },
}

/// Status reason of an `exit_when_idle` run whose agent exited after answering.
pub const DONE_REASON: &str = "the prompt was answered and the agent exited (exit_when_idle); a follow-up resumes the session";
/// [`DONE_REASON`] for a CLI that cannot continue a session in a new process (`resumes` false).
pub const DONE_FRESH_REASON: &str =
    "the prompt was answered and the agent exited (exit_when_idle); a follow-up starts a fresh session (this CLI cannot resume one)";
pub(super) const WAITING: &str = "waiting for a follow-up";
pub(super) const INTERRUPTED: &str = "the turn was interrupted; waiting for a follow-up";

impl<P> Machine<P> {
    /// The status reason of an `exit_when_idle` run whose agent exited after answering.
    fn done_reason(&self) -> &'static str {
        if self.setup.resumes {
            DONE_REASON
        } else {
            DONE_FRESH_REASON
        }
    }

    /// The live process exited (or its shim is gone, or a stop's wait for the exit ran out):
    /// it is no longer live. None when nothing was live.
    pub fn process_ended(&mut self) -> Option<Ended<P>> {
        let (live, stop_requested) = match std::mem::replace(&mut self.state, State::Absent) {
            State::Live(live) => (live, false),
            State::Stopping { live: Some(live), .. } => {
                self.state = State::Stopping { live: None, drain: None };
                (live, true)
            }
            other => {
                self.state = other;
                return None;
            }
        };
        Some(Ended { live, stop_requested })
    }

    /// What the end of `ended` means, once the events of its exit are stored: its exit `code`
    /// and `signal`, whether its turn was in flight when it ended (`was_in_turn`), the run's
    /// `status` after those events.
    pub fn exit_plan(&mut self, ended: &Ended<P>, code: Option<i32>, signal: Option<i32>, was_in_turn: bool, status: Status) -> ExitPlan {
        let Live { interrupted, closing, .. } = ended.live;
        let stop = ended.stop_requested;
        let plan = |save_home, dropped, then| ExitPlan { save_home, dropped, then };
        if let Some(session) = &ended.live.resuming {
            if self.dropped_session.is_none() && code != Some(0) && !stop && !interrupted && !closing {
                // V25: only once; the retry resumes nothing.
                self.dropped_session = Some(session.clone());
                let text = std::mem::take(&mut self.turn_text);
                self.queue.push_front(text.into());
                return plan(false, 0, AfterExit::ResetSession { session: session.clone() });
            }
        }
        let save_home = self.setup.persistent && !stop && !closing;
        if stop {
            return plan(save_home, 0, AfterExit::Stopped);
        }
        if closing && ended.live.renew && !self.setup.exit_when_idle {
            // Replaced for new launch options: the run waits for its next turn, in a new process.
            let set = if self.queue.is_empty() { change(Status::Idle, Phase::Waiting, WAITING) } else { None };
            return plan(save_home, 0, AfterExit::Set(set));
        }
        if closing {
            // A message sent meanwhile waited for this exit: it starts now, the run stays running.
            let set = if self.queue.is_empty() { change(Status::Done, Phase::Exited, self.done_reason()) } else { None };
            return plan(save_home, 0, AfterExit::Set(set));
        }
        if interrupted {
            // Not a failure. The session stays resumable; a message queued behind the interrupt
            // (`force`) starts next, else the run waits for a follow-up.
            let set = if self.queue.is_empty() { change(Status::Idle, Phase::Waiting, INTERRUPTED) } else { None };
            return plan(save_home, 0, AfterExit::Set(set));
        }
        let clean = code == Some(0);
        if was_in_turn || !clean {
            self.fast_failures = self.fast_failures.saturating_add(1);
        }
        // P7: an agent that fails is never respawned for messages queued behind it (a CLI that
        // exits at once would loop); they are dropped, saying why. A new follow-up retries.
        let dropped = if clean { 0 } else { self.drop_queue() };
        if !self.queue.is_empty() {
            return plan(save_home, dropped, AfterExit::Set(None));
        }
        if status == Status::QuotaWaiting && !was_in_turn {
            // A turn the provider refused; its process ended after it (Codex's `exec` exits 1):
            // the run waits for the reset all the same, and the next turn starts a process.
            return plan(save_home, dropped, AfterExit::Set(None));
        }
        if clean && !was_in_turn {
            // A per-turn CLI finished its turn, or a long-lived one exited while idle.
            let set = if self.setup.exit_when_idle {
                change(Status::Done, Phase::Exited, self.done_reason())
            } else if status == Status::Running {
                change(Status::Idle, Phase::Waiting, WAITING)
            } else {
                None
            };
            return plan(save_home, dropped, AfterExit::Set(set));
        }
        if matches!(status, Status::Failed | Status::Idle) && !was_in_turn {
            return plan(save_home, dropped, AfterExit::Set(None));
        }
        plan(save_home, dropped, AfterExit::Failed { crashed: ended.signal(signal).is_some() })
    }

    /// A turn ended for `reason` with `text` (its final answer, or its error): whether to save a
    /// persistent agent's home, and the state to store (none while stopping).
    pub fn turn_ended(&mut self, reason: StopReason, text: Option<&str>) -> (bool, Option<Change>) {
        let save_home = self.setup.persistent && !self.stop_requested();
        if self.stop_requested() {
            return (save_home, None);
        }
        let set = match reason {
            StopReason::EndTurn => {
                self.fast_failures = 0;
                if let Some(live) = self.live_mut() {
                    live.resuming = None;
                }
                change(Status::Idle, Phase::Waiting, WAITING)
            }
            StopReason::Interrupted => change(Status::Idle, Phase::Waiting, INTERRUPTED),
            StopReason::MaxTurns => change(Status::Idle, Phase::Waiting, "the turn hit its step limit; waiting for a follow-up"),
            StopReason::QuotaWaiting => {
                change(Status::QuotaWaiting, Phase::Waiting, text.unwrap_or("the provider's rate or usage limit was reached"))
            }
            StopReason::BudgetReached => {
                change(Status::Idle, Phase::Waiting, text.unwrap_or("the run reached its budget; raise it with agent_budget"))
            }
            StopReason::Stopped => None,
            StopReason::Error | StopReason::Crashed => {
                let why = text.unwrap_or("the turn failed");
                let phase = if self.live().is_some() { Phase::Waiting } else { Phase::Failed };
                change(Status::Failed, phase, format!("the last turn failed: {why}; a follow-up retries in the same session"))
            }
        };
        (save_home, set)
    }
}

/// Why a failed process's run failed: its exit code and the last lines of its stderr, the
/// signal that killed it, or the rule of the daemon that ended it (`ended_by`).
pub fn exit_reason(code: Option<i32>, signal: Option<i32>, stderr_tail: &str, ended_by: Option<&str>) -> String {
    let lines: Vec<&str> = stderr_tail.lines().collect();
    let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
    let why = match (code, signal) {
        (Some(c), _) if tail.is_empty() => format!("the agent exited with code {c}"),
        (Some(c), _) => format!("the agent exited with code {c}: {tail}"),
        (None, Some(s)) => format!("the agent was killed by signal {s}"),
        _ => ended_by.unwrap_or("the agent process ended").to_owned(),
    };
    format!("{why}; a follow-up restarts it and resumes the session")
}
