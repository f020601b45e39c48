//! What a run's actor is sent ([`Cmd`]) and the map of their channels ([`Actors`]): which runs
//! have a live actor, and the only ways one joins or leaves it. Commands are sent and actors
//! removed under one lock, so a command can never slip in between an actor's last look at its
//! channel and its removal. Starting and reviving actors is `actors.rs`'s; serving the commands,
//! `actor.rs`'s.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use spaces_sdk::{ActionReport, ApiError};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::keys::Keyed;

/// A request to a run's actor.
pub enum Cmd {
    /// A follow-up; `key`, its `message_id` (see [`super::keys`]).
    Message {
        text: String,
        force: bool,
        key: Option<Keyed>,
        /// The caller's `traceparent`: a link of the turn the message starts at once.
        traceparent: Option<String>,
        reply: Reply,
    },
    Interrupt {
        reply: Reply,
    },
    Stop {
        reply: Reply,
    },
    /// `agent_budget`: replace the fields of the run's budget that `budget` sets.
    Budget {
        budget: spaces_sdk::Budget,
        reply: oneshot::Sender<Result<spaces_sdk::BudgetReport, ApiError>>,
    },
    /// `agent_merge`, in the parent's actor (no turn of the parent starts meanwhile): bring
    /// what the folder `theirs` changed since this run's checkpoint `at_turn` into its folder.
    Merge {
        theirs: std::path::PathBuf,
        at_turn: u32,
        reply: oneshot::Sender<Result<spaces_volumes::checkpoint::MergeReport, ApiError>>,
    },
    /// `agent_rewind`: back to the end of turn `to_turn`.
    Rewind {
        to_turn: u32,
        what: spaces_sdk::RewindWhat,
        reply: oneshot::Sender<Result<spaces_sdk::RewindReport, ApiError>>,
    },
}

/// Where a command's answer goes: a report, or a typed refusal.
pub type Reply = oneshot::Sender<Result<ActionReport, ApiError>>;

/// The command channel of every run that has a live actor, by run id, and the actors' tasks.
#[derive(Default)]
pub(super) struct Actors {
    map: Mutex<HashMap<String, mpsc::UnboundedSender<Cmd>>>,
    /// Every actor's task, so the daemon can wait for them at shutdown ([`Self::stop`]).
    tasks: TaskTracker,
    /// Cancelled when the daemon stops: each actor leaves its loop at its next wait.
    stopping: CancellationToken,
}

impl Actors {
    /// The map, locked: commands are sent and actors added or removed while holding it.
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<Cmd>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run an actor's task `actor`, counted until it ends.
    pub(super) fn spawn(&self, actor: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(actor);
    }

    /// A token cancelled when the daemon stops ([`Self::stop`]): an actor's loop waits on it
    /// before its commands, events and timers, and leaves when it fires.
    pub(super) fn stopping(&self) -> CancellationToken {
        self.stopping.clone()
    }

    /// True once the daemon is stopping ([`Self::stop`]): no actor starts after that.
    pub(super) fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// At shutdown: every actor leaves its loop at its next wait (what it is doing, such as
    /// storing a batch of events, it finishes first; commands still in its channel are left
    /// unanswered, so their callers' connections drop and they retry with their keys against
    /// the next daemon); waits at most `within` until all have left. Returns whether all left
    /// in time. The runs' agents go on under their shims.
    pub(super) async fn stop(&self, within: std::time::Duration) -> bool {
        self.stopping.cancel();
        self.tasks.close();
        tokio::time::timeout(within, self.tasks.wait()).await.is_ok()
    }

    /// True while run `run_id` has a live actor.
    pub(super) fn has(&self, run_id: &str) -> bool {
        self.lock().contains_key(run_id)
    }

    /// Remove the actor of `run_id` if no command is waiting for it. Commands are sent while
    /// holding the same lock, so none can slip in between this check and the removal.
    pub(super) fn retire(&self, run_id: &str, cmds: &mut mpsc::UnboundedReceiver<Cmd>) -> bool {
        let mut map = self.lock();
        if cmds.is_empty() {
            map.remove(run_id);
            true
        } else {
            false
        }
    }
}
