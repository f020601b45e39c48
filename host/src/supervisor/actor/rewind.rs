//! `agent_rewind` (issue 34): the run's folder back to a turn's checkpoint, and its conversation
//! back to that turn's end, natively where the CLI can.
//!
//! The conversation's points are recorded as turns end: the normalizer's
//! [`spaces_harnesses::Normalizer::turn_point`] for each turn, kept in the run directory
//! ([`POINTS_FILE`]). A rewind writes the point to go back to ([`REWIND_FILE`]) and renews the
//! live process: the next turn's process is launched resuming the session at that point
//! (`LaunchContext::resume_at`), once. A CLI that cannot resume at a point, a turn without one,
//! and `to_turn` 0 start a fresh session instead, which a notice says.

use std::collections::BTreeMap;
use std::path::Path;

use spaces_harnesses::EventDraft;
use spaces_sdk::{ApiError, ErrorCode, EventKind, RewindReport, RewindWhat, Status};

use super::super::checkpoints;
use super::Actor;

/// Turn -> the normalizer's point at its end, in the run directory.
const POINTS_FILE: &str = "conversation-points.json";
/// The point the next launch resumes the session at, in the run directory (taken by it).
const REWIND_FILE: &str = "rewind-at";

/// The rewind point waiting for the next launch of the run in `run_dir`. It stays until the
/// launched CLI names its new session ([`clear_rewind_point`]): a launch that fails before
/// that is tried again at the same point.
pub fn rewind_point(run_dir: &Path) -> Option<String> {
    let point = std::fs::read_to_string(run_dir.join(REWIND_FILE)).ok()?;
    Some(point.trim().to_owned()).filter(|p| !p.is_empty())
}

/// The CLI named a new session: the rewind point (if any) was used.
pub fn clear_rewind_point(run_dir: &Path) {
    let _ = std::fs::remove_file(run_dir.join(REWIND_FILE));
}

/// A turn's place in the conversation: the session, and the CLI's point in it at the turn's end.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TurnPoint {
    pub session: String,
    pub point: String,
}

/// The conversation points recorded in `run_dir`: turn -> its session and the CLI's point at
/// its end.
pub fn points_in(run_dir: &Path) -> BTreeMap<u32, TurnPoint> {
    std::fs::read(run_dir.join(POINTS_FILE)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// The next launch of the run in `run_dir` resumes its session at `point` (once). Errors: the
/// file cannot be written.
pub fn set_rewind_point(run_dir: &Path, point: &str) -> std::io::Result<()> {
    spaces_store::fsutil::write_private(&run_dir.join(REWIND_FILE), point.as_bytes())
}

fn invalid(why: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidArgument, why).with_field("to_turn")
}

impl Actor {
    /// `AGENT_BUSY` for `what` (`"a rewind"`) while a turn runs or waits to, or a stop ends the
    /// run: both change the folder and the session under it.
    fn refuse_if_busy(&self, what: &str) -> Result<(), ApiError> {
        let busy = self.norm.turn_in_flight() || matches!(self.run.status, Status::Running | Status::Queued | Status::QuotaWaiting);
        if !busy && !self.machine.is_stopping() {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorCode::AgentBusy,
            format!(
                "run {} is {}: {what} waits for no turn to run; interrupt the turn (agent_interrupt) or wait for its end",
                self.run.run_id,
                self.run.status.as_str()
            ),
        ))
    }

    fn points(&self) -> BTreeMap<u32, TurnPoint> {
        points_in(&self.inner.cfg.run_dir(&self.run.run_id))
    }

    /// Turn `turn` ended: the normalizer's point there, kept for a later rewind.
    pub(super) fn record_turn_point(&mut self, turn: u32) {
        let (Some(point), Some(session)) = (self.norm.turn_point(), self.norm.session_id().or(self.run.session_id.clone())) else {
            return;
        };
        let mut points = self.points();
        points.insert(turn, TurnPoint { session, point });
        let file = self.inner.cfg.run_dir(&self.run.run_id).join(POINTS_FILE);
        let json = serde_json::to_vec(&points).unwrap_or_default();
        if let Err(e) = spaces_store::fsutil::write_private(&file, &json) {
            tracing::warn!("run {}: the conversation point of turn {turn} was not kept: {e}", self.run.run_id);
        }
    }

    /// `agent_rewind`. Errors: `AGENT_BUSY` while a turn runs or waits to, or a stop ends the
    /// run; `INVALID_ARGUMENT` (`to_turn`) past the last ended turn or without a checkpoint;
    /// `INTERNAL` when the folder could not be restored (what was not written is named).
    pub(super) fn on_rewind(&mut self, to_turn: u32, what: RewindWhat) -> Result<RewindReport, ApiError> {
        self.refuse_if_busy("a rewind")?;
        if to_turn > self.run.turns {
            return Err(invalid(format!(
                "run {} has ended {} turn(s); to_turn must be 0 to {}",
                self.run.run_id, self.run.turns, self.run.turns
            )));
        }
        let files = matches!(what, RewindWhat::Files | RewindWhat::Both);
        let conversation = matches!(what, RewindWhat::Conversation | RewindWhat::Both);
        let (mut written, mut removed, mut unrestored) = (0, 0, Vec::new());
        if files {
            let folder = std::path::PathBuf::from(&self.run.cwd);
            let ran_none = self.run.turns == 0;
            let Some(cps) = self.checkpoints() else { return Err(checkpoints::off("to_turn", "the folder cannot be rewound")) };
            let has = cps.turns().map(|t| t.contains(&to_turn)).unwrap_or(false);
            if !has && ran_none {
                return Err(invalid(format!(
                    "run {} has not run a turn yet: its folder is as it was made, there is nothing to rewind",
                    self.run.run_id
                )));
            }
            if !has {
                return Err(invalid(format!(
                    "run {} has no checkpoint of turn {to_turn} (pruned, or taken before checkpoints were on)",
                    self.run.run_id
                )));
            }
            let report = spaces_store::fsutil::blocking(|| cps.restore(&folder, to_turn))
                .map_err(|e| ApiError::new(ErrorCode::Internal, format!("the folder was not fully restored to turn {to_turn}: {e}")))?;
            (written, removed, unrestored) = (report.written, report.removed, report.unrestored);
        }
        let how = if conversation { self.rewind_conversation(to_turn) } else { "unchanged" };
        let folder =
            format!("the folder is back at the end of turn {to_turn} ({written} written, {removed} removed){}", not_restored(&unrestored));
        let reason = match (files, how) {
            (true, "unchanged") => folder,
            (f, how) => {
                let folder = if f { format!("{folder}; ") } else { String::new() };
                let talk = match how {
                    "native" => format!("the next turn continues the conversation as it was at the end of turn {to_turn}"),
                    _ if to_turn == 0 => "the next turn starts a fresh session".to_owned(),
                    _ => format!(
                        "the next turn starts a fresh session ({} cannot resume a conversation at turn {to_turn})",
                        self.harness.name()
                    ),
                };
                format!("{folder}{talk}")
            }
        };
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice).summary(format!("rewound to turn {to_turn}: {reason}"))]);
        Ok(RewindReport {
            run_id: self.run.run_id.clone(),
            to_turn,
            what,
            files_written: written,
            files_removed: removed,
            conversation: how.to_owned(),
            reason,
        })
    }

    /// `agent_merge` into this run's folder (the parent's actor, so no turn of it starts
    /// meanwhile). Errors: `AGENT_BUSY` while a turn runs; `INVALID_ARGUMENT` when the fork
    /// point's checkpoint is gone or checkpoints are off; `INTERNAL` for a failed read or write
    /// (found before anything is written, where it can be: see `spaces_volumes::checkpoint`).
    pub(super) fn on_merge(&mut self, theirs: &Path, at_turn: u32) -> Result<spaces_volumes::checkpoint::MergeReport, ApiError> {
        self.refuse_if_busy("a merge into it")?;
        let ours = std::path::PathBuf::from(&self.run.cwd);
        let run_id = self.run.run_id.clone();
        let Some(cps) = self.checkpoints() else { return Err(checkpoints::off("run_id", "nothing can be merged")) };
        spaces_store::fsutil::blocking(|| cps.merge(at_turn, theirs, &ours)).map_err(|e| match e {
            spaces_volumes::VolumeError::SnapshotNotFound { .. } => ApiError::new(
                ErrorCode::InvalidArgument,
                format!("the checkpoint of turn {at_turn} of run {run_id}, the fork point, is gone"),
            )
            .with_field("run_id"),
            e => ApiError::new(ErrorCode::Internal, format!("the merge into run {run_id}: {e}")),
        })
    }

    /// The conversation back to the end of `to_turn`: `native` when the next launch resumes the
    /// session at the turn's point, else `fresh` (the session is dropped).
    fn rewind_conversation(&mut self, to_turn: u32) -> &'static str {
        let point = (to_turn > 0 && self.harness.supports().rewind).then(|| self.points().remove(&to_turn)).flatten();
        let run_dir = self.inner.cfg.run_dir(&self.run.run_id);
        // Whatever process runs holds the whole conversation: the next turn gets a new one.
        self.machine.renew_process();
        match point {
            Some(TurnPoint { session, point }) => {
                if set_rewind_point(&run_dir, &point).is_ok() {
                    // The session the turn was in (after an earlier rewind, not the latest).
                    // The session the CLI last named (another branch) is not taken up again
                    // until the next process names its own.
                    let current = self.norm.session_id();
                    self.machine.dropped_session = current.filter(|c| *c != session);
                    self.run.session_id = Some(session);
                    self.save();
                    return "native";
                }
                tracing::warn!("run {}: the rewind point was not kept; the next turn starts a fresh session", self.run.run_id);
                self.drop_session();
                "fresh"
            }
            None => {
                let _ = std::fs::remove_file(run_dir.join(REWIND_FILE));
                self.drop_session();
                "fresh"
            }
        }
    }

    fn drop_session(&mut self) {
        self.machine.dropped_session = self.run.session_id.take();
        self.save();
    }
}

/// What a rewind's answer says of the files it left as they are (`RestoreReport::unrestored`):
/// nothing when there are none, else how many and the first five.
fn not_restored(paths: &[String]) -> String {
    if paths.is_empty() {
        return String::new();
    }
    let mut named = paths.iter().take(5).map(String::as_str).collect::<Vec<_>>().join(", ");
    if paths.len() > 5 {
        named.push_str(&format!(" and {} more", paths.len() - 5));
    }
    format!(
        "; {} file(s) not restored, left as they are (their contents are never stored: over 64 MiB, holding a secret value, or a database SQLite could not copy): {named}",
        paths.len()
    )
}
