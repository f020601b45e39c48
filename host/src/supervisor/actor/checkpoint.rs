//! The actor's checkpoints of its run's working folder (issue 34; `super::super::checkpoints`):
//! the folder before a turn's process starts (checkpoint 0, or one a crash left missing), and
//! the folder at each turn's end, whose changes become the turn's `turn_diff` event, stored
//! just before its `turn_ended`.

use spaces_harnesses::EventDraft;
use spaces_sdk::EventKind;
use spaces_volumes::checkpoint::Checkpoints;

use super::super::checkpoints;
use super::Actor;

/// The run's checkpoints, opened at first use.
pub(super) enum Cps {
    Unopened,
    Open(Box<Checkpoints>),
    /// Off on this host, or they could not be opened (said once in the daemon's log).
    Off,
}

/// Checkpoints beyond the kept number before old ones are pruned (pruning reads every kept one).
const PRUNE_SLACK: usize = 10;

impl Actor {
    /// The run's checkpoints; `None` when off on this host.
    pub(super) fn checkpoints(&mut self) -> Option<&mut Checkpoints> {
        if matches!(self.checkpoints, Cps::Unopened) {
            self.checkpoints = match checkpoints::open_to_take(&self.inner.cfg, &self.run.run_id) {
                Ok(Some(c)) => Cps::Open(Box::new(c)),
                Ok(None) => Cps::Off,
                Err(e) => {
                    tracing::warn!("run {}: no checkpoints: {e}", self.run.run_id);
                    Cps::Off
                }
            };
        }
        match &mut self.checkpoints {
            Cps::Open(c) => Some(c),
            _ => None,
        }
    }

    /// Checkpoint turn `turn` of the folder; the files it changed since the checkpoint before.
    fn take_checkpoint(&mut self, turn: u32) -> Option<Vec<spaces_sdk::FileChange>> {
        let folder = std::path::PathBuf::from(&self.run.cwd);
        let keep = self.inner.cfg.checkpoints.as_ref().map_or(usize::MAX, |c| c.keep_turns);
        let run_id = self.run.run_id.clone();
        let cps = self.checkpoints()?;
        let taken = spaces_store::fsutil::blocking(|| {
            let report = cps.take(&folder, turn)?;
            if cps.turns()?.len() > keep + PRUNE_SLACK {
                cps.prune(keep)?;
            }
            Ok::<_, spaces_volumes::VolumeError>(report)
        });
        match taken {
            Ok(report) => Some(report.changes.iter().map(checkpoints::file_change).collect()),
            Err(e) => {
                tracing::warn!("run {run_id}: checkpoint of turn {turn} not taken: {e}");
                None
            }
        }
    }

    /// Before turn `turn`'s process starts: the folder as the turn finds it, when the turn
    /// before left no checkpoint (the first turn: checkpoint 0).
    pub(super) fn checkpoint_before(&mut self, turn: u32) {
        let before = turn.saturating_sub(1);
        let missing = self.checkpoints().is_some_and(|c| c.turns().map(|t| !t.contains(&before)).unwrap_or(true));
        if missing {
            self.take_checkpoint(before);
        }
    }

    /// Drafts about to be stored: each `turn_ended` among them gets the turn's `turn_diff`
    /// just before it, from the checkpoint taken now.
    pub(super) fn note_checkpoints(&mut self, drafts: &mut Vec<EventDraft>) {
        if !drafts.iter().any(|d| d.kind == EventKind::TurnEnded) {
            return;
        }
        let mut out = Vec::with_capacity(drafts.len() + 1);
        for d in std::mem::take(drafts) {
            if d.kind == EventKind::TurnEnded {
                self.record_turn_point(d.turn);
                if let Some(files) = self.take_checkpoint(d.turn) {
                    out.push(checkpoints::turn_diff(d.turn, files));
                }
            }
            out.push(d);
        }
        *drafts = out;
    }
}
