//! What the actor writes to its agent besides a new process's first bytes: the lines a
//! conversation normalizer asks for ([`Normalizer::take_outgoing`]: the next handshake step,
//! the answer to a request of the CLI), a turn's input in the live process
//! ([`Normalizer::turn_input`], else the harness's stateless `user_message`), and an interrupt
//! ([`Normalizer::interrupt_input`], else the harness's recipe).
//!
//! The lines are drained after every call that feeds the normalizer with live output or a
//! caller's action (a batch of output, a turn's start, an interrupt) and written in order through
//! the shim, after the events of that call are stored. Output re-fed at re-adoption never
//! writes ([`super::super::launcher::Launcher::adopt`] discards what it asked for).
//!
//! [`Normalizer::take_outgoing`]: spaces_harnesses::Normalizer::take_outgoing
//! [`Normalizer::turn_input`]: spaces_harnesses::Normalizer::turn_input
//! [`Normalizer::interrupt_input`]: spaces_harnesses::Normalizer::interrupt_input

use std::sync::Arc;

use spaces_harnesses::InterruptRecipe;
use spaces_sdk::ActionReport;

use super::super::keys::Keyed;
use spaces_os::shim::ShimClient;

use super::Actor;

/// How the interrupt reached the agent.
pub(super) enum Sent {
    /// Written or signalled.
    Yes,
    /// The agent refused it: why, for the caller.
    Refused(&'static str),
}

impl Actor {
    /// The shim of the live process whose stdin is open, if any.
    fn open_stdin(&self) -> Option<Arc<ShimClient>> {
        self.machine.process().filter(|p| p.stdin_open).and_then(|p| p.shim.clone())
    }

    /// Write what the normalizer has to say to the agent, in order, one line each. With no
    /// live process taking input, it is dropped (a new process starts its own dialogue).
    pub(super) async fn send_outgoing(&mut self) {
        let lines = self.norm.take_outgoing();
        if lines.is_empty() {
            return;
        }
        let Some(shim) = self.open_stdin() else {
            tracing::debug!("run {}: {} line(s) for the agent dropped: no process takes input", self.run.run_id, lines.len());
            return;
        };
        if let Err(e) = shim.stdin(lines_of(lines), None).await {
            self.launcher.note_in_stderr_tail(format!("a line to the agent could not be written: {e}"));
            tracing::warn!("run {}: a line to the agent not written: {e}", self.run.run_id);
        }
    }

    /// Turn `turn` with `text` in the live long-lived process `shim`: what the normalizer has
    /// to say first, then the turn's input, in one write that the journal records as the turn's
    /// start. A conversation still in its handshake has no input yet: its normalizer sends the
    /// turn when the thread is ready (through [`Self::send_outgoing`]).
    pub(super) async fn send_turn(&mut self, shim: &ShimClient, turn: u32, text: &str) {
        let mut data = lines_of(self.norm.take_outgoing());
        match self.norm.turn_input(text) {
            Some(line) => data.push_str(&(line + "\n")),
            None => data.push_str(&String::from_utf8_lossy(&self.harness.user_message(text))),
        }
        if let Err(e) = shim.stdin(data, Some(turn)).await {
            self.launcher.note_in_stderr_tail(format!("the message could not reach the agent: {e}"));
            tracing::warn!("run {}: turn {turn} not delivered: {e}", self.run.run_id);
        }
    }

    /// Steer `text` into the turn in flight (a `force` message on a wire that can:
    /// [`Normalizer::steer`]): its line written, then its events stored (redacted) in one commit
    /// with its `message_id` and report (`key`), so a retry answers that report and steers
    /// nothing twice. False when the wire cannot steer now or the line could not be written (the
    /// caller then interrupts and runs the message next).
    ///
    /// [`Normalizer::steer`]: spaces_harnesses::Normalizer::steer
    pub(super) async fn steer(&mut self, text: &str, key: Option<(Keyed, ActionReport)>) -> bool {
        let Some(shim) = self.open_stdin() else { return false };
        let Some((line, drafts)) = self.norm.steer(text) else { return false };
        if let Err(e) = shim.stdin(line + "\n", None).await {
            tracing::warn!("run {}: a steer not written ({e}); interrupting instead", self.run.run_id);
            return false;
        }
        let drafts: Vec<_> = drafts.into_iter().map(|d| super::turns::redacted(d, &self.redactor)).collect();
        let key_row = key.and_then(|(k, report)| k.row(&self.run.run_id, &report).ok());
        let stored = self.inner.log.append_with(&self.run.run_id, drafts, None, move |conn| match &key_row {
            Some(key) => spaces_store::keys::key_keep_in(conn, key),
            None => Ok(()),
        });
        if let Err(e) = stored {
            tracing::error!("run {}: cannot record a steered message: {e}", self.run.run_id);
        }
        true
    }

    /// Messages whose steer the agent refused run as the next turns, first in the queue (in
    /// order), so none is lost. Called after every live feed of the normalizer.
    pub(super) fn requeue_refused_steers(&mut self) {
        for text in self.norm.take_refused_steers().into_iter().rev() {
            self.keep_queued(text.into(), true);
        }
    }

    /// Interrupt the turn in flight through `shim`: the normalizer's line when its wire names
    /// the turn, else the harness's recipe (nothing to write when the recipe is empty: the
    /// normalizer then sends it once the turn is known).
    pub(super) async fn send_interrupt(&mut self, shim: &ShimClient) -> Sent {
        if let Some(line) = self.norm.interrupt_input() {
            return match shim.stdin(line + "\n", None).await {
                Ok(()) => Sent::Yes,
                Err(_) => Sent::Refused("the agent process is not accepting input; use stop"),
            };
        }
        match self.harness.interrupt() {
            InterruptRecipe::Stdin(bytes) if bytes.is_empty() => Sent::Yes,
            InterruptRecipe::Stdin(bytes) => match shim.stdin(String::from_utf8_lossy(&bytes).into_owned(), None).await {
                Ok(()) => Sent::Yes,
                Err(_) => Sent::Refused("the agent process is not accepting input; use stop"),
            },
            InterruptRecipe::SignalGroup(sig) => match shim.signal(sig).await {
                Ok(()) => Sent::Yes,
                Err(_) => Sent::Refused("the agent process is not taking signals; use stop"),
            },
        }
    }
}

/// `lines`, each ended by `\n`, as one write.
fn lines_of(lines: Vec<String>) -> String {
    lines.into_iter().flat_map(|l| [l, "\n".to_owned()]).collect()
}
