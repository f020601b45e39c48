//! A run's checkpoints (issue 34; [`spaces_volumes::checkpoint`]): where they live (the run
//! directory's `checkpoints/`), the `turn_diff` event made of one, and `agent_diff`.

use std::path::PathBuf;

use spaces_harnesses::EventDraft;
use spaces_sdk::{AgentDiffRequest, DiffReport, ErrorCode, EventKind, FileChange, FileChangeKind};
use spaces_volumes::checkpoint::{self, Checkpoints};

use super::registry;
use super::shared::Inner;
use crate::config::Config;
use crate::error::{refuse, Result};

/// Where run `run_id`'s checkpoints are kept.
pub(super) fn dir(cfg: &Config, run_id: &str) -> PathBuf {
    cfg.run_dir(run_id).join("checkpoints")
}

/// The checkpoints of run `run_id`, to read (diffs, forks), `None` when the host has them off.
/// Errors: the directory cannot be made.
pub(super) fn open(cfg: &Config, run_id: &str) -> Result<Option<Checkpoints>> {
    let Some(settings) = &cfg.checkpoints else { return Ok(None) };
    Checkpoints::open(&dir(cfg, run_id), &settings.exclude).map(Some).map_err(|e| internal(&e))
}

/// [`open`] for the run's actor, which takes them, watching the folder between turns when the
/// host does (`SPACES_CHECKPOINT_WATCH`): they never store a file holding one of the run's
/// secret values (its environment's, its MCP servers', the daemon's:
/// [`super::secrets::RunSecrets::refused_in_home`]). Errors: as [`open`], and the run's secrets
/// cannot be read.
pub(super) fn open_to_take(cfg: &Config, run_id: &str) -> Result<Option<Checkpoints>> {
    let Some(mut cps) = open(cfg, run_id)? else { return Ok(None) };
    cps.refuse(&super::secrets::RunSecrets::load(&cfg.run_dir(run_id))?.refused_in_home());
    if cfg.checkpoints.as_ref().is_some_and(|c| c.watch) {
        cps.watch();
    }
    Ok(Some(cps))
}

/// The refusal of `doing` (`"the folder cannot be rewound"`) on a host with checkpoints off,
/// naming `field`.
pub(super) fn off(field: &str, doing: &str) -> spaces_sdk::ApiError {
    spaces_sdk::ApiError::new(ErrorCode::InvalidArgument, format!("checkpoints are off on this host (SPACES_CHECKPOINTS=0): {doing}"))
        .with_field(field)
}

/// [`open`], or the refusal [`off`] of `doing`, naming `field`.
pub(super) fn required(cfg: &Config, run_id: &str, field: &str, doing: &str) -> Result<Checkpoints> {
    open(cfg, run_id)?.ok_or_else(|| crate::error::Error::Api(off(field, doing)))
}

fn internal(e: &spaces_volumes::VolumeError) -> crate::error::Error {
    refuse(ErrorCode::Internal, format!("the run's checkpoints: {e}"))
}

/// The SDK's record of a changed file.
pub(super) fn file_change(c: &checkpoint::FileChange) -> FileChange {
    FileChange {
        path: c.path.clone(),
        change: match c.change {
            checkpoint::ChangeKind::Added => FileChangeKind::Added,
            checkpoint::ChangeKind::Changed => FileChangeKind::Changed,
            checkpoint::ChangeKind::Removed => FileChangeKind::Removed,
        },
        added_lines: c.added_lines,
        removed_lines: c.removed_lines,
        binary: c.binary,
    }
}

/// `2 files changed, +3 -1` (`no file changed` for none).
pub(super) fn summary(files: &[FileChange]) -> String {
    if files.is_empty() {
        return "no file changed".to_owned();
    }
    let (added, removed) = files.iter().fold((0, 0), |(a, r), f| (a + f.added_lines, r + f.removed_lines));
    let noun = if files.len() == 1 { "file" } else { "files" };
    format!("{} {noun} changed, +{added} -{removed}", files.len())
}

/// Most files a `turn_diff` event lists; the summary still counts them all, and `agent_diff`
/// has every one.
pub(super) const TURN_DIFF_MAX_FILES: usize = 1000;

/// The `turn_diff` event of turn `turn` with what it changed.
pub(super) fn turn_diff(turn: u32, mut files: Vec<FileChange>) -> EventDraft {
    let mut summary = summary(&files);
    if files.len() > TURN_DIFF_MAX_FILES {
        summary.push_str(&format!(" (the first {TURN_DIFF_MAX_FILES} listed; agent_diff has them all)"));
        files.truncate(TURN_DIFF_MAX_FILES);
    }
    let mut d = EventDraft::new(turn, EventKind::TurnDiff).summary(summary);
    d.files = Some(files);
    d
}

/// `agent_diff` (see [`AgentDiffRequest`]). Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`,
/// `INVALID_ARGUMENT` naming `turn`, `from_turn` or `to_turn` when that checkpoint does not
/// exist (or `turn` is given with a range, or checkpoints are off on this host).
pub(super) fn diff(inner: &Inner, req: &AgentDiffRequest) -> Result<DiffReport> {
    let run = registry::run_in_space(&inner.store, &req.space, &req.run_id)?;
    let cps = required(&inner.cfg, &run.run_id, "run_id", "no run has a diff")?;
    let turns = cps.turns().map_err(|e| internal(&e))?;
    let last = turns.last().copied();
    let (from, to, from_field, to_field) = match (req.turn, req.from_turn, req.to_turn) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(crate::error::invalid_field("turn", "give either turn, or from_turn and to_turn, not both".to_owned()))
        }
        (Some(0), _, _) => {
            return Err(crate::error::invalid_field(
                "turn",
                "turns count from 1 (checkpoint 0 is the folder before the first turn)".to_owned(),
            ))
        }
        // The checkpoint the turn started from: the one before, or the one a rewind restored.
        (Some(t), _, _) => (cps.base_of(t).map_err(|e| internal(&e))?.unwrap_or(t - 1), t, "turn", "turn"),
        (None, from, to) => {
            let to = to.or(last).unwrap_or(0);
            let base = cps.base_of(to).map_err(|e| internal(&e))?.unwrap_or(to.saturating_sub(1));
            (from.unwrap_or(base), to, "from_turn", "to_turn")
        }
    };
    let range = match (turns.first(), last) {
        (Some(first), Some(last)) => format!("it has checkpoints {first} to {last}"),
        _ => "it has no checkpoint yet".to_owned(),
    };
    for (turn, name) in [(from, from_field), (to, to_field)] {
        if !turns.contains(&turn) {
            return Err(crate::error::invalid_field(name, format!("run {} has no checkpoint of turn {turn}: {range}", run.run_id)));
        }
    }
    let (files, text) = cps.diff(from, to).map_err(|e| internal(&e))?;
    Ok(DiffReport { run_id: run.run_id, from_turn: from, to_turn: to, files: files.iter().map(file_change).collect(), diff: text })
}
