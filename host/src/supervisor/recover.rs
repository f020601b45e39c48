//! Recovery at daemon start: pick up what the previous daemon left.
//!
//! - A run whose agent process runs under a shim ([`super::proc`]) is **re-adopted**: its actor
//!   comes back, replays the journal records already stored (so the normalizer knows the turn
//!   in flight and its open tool calls), and resumes ingest at the stored offset. A turn that
//!   ran while no daemon was up completes, and its events appear once each. If the shim itself
//!   died (killed, or the host restarted), the rest of its journal is read and the turn ends as
//!   the exit says, or `crashed` when the journal has no exit (open tool calls closed first).
//! - Nothing is lost in a run's first moments: a generation whose shim started but none of
//!   whose output was stored yet (the daemon died as it started) is re-adopted from the start
//!   of its journal; a turn recorded as started whose agent never started (no shim directory,
//!   or one whose shim never started its agent) starts now, with the first prompt kept in the
//!   run directory ([`super::secrets::save_first_prompt`]); a run whose first turn was not even
//!   recorded starts it.
//! - A run cut off mid-turn with no journal to go on (a daemon of an older release) ends
//!   `crashed`; a follow-up resumes the session. Leftover processes of such runs are ended.
//! - Every shim of this state dir's runs that is not re-adopted is ended (its tree stopped,
//!   its journal acknowledged), never left waiting for a daemon: one pass over `/proc` finds
//!   them by their working directory (`<run dir>/shim-<g>`).
//!
//! - A persistent agent's run that may take another turn takes its home's lease back.
//! - Runs waiting for a turn slot (`queued`) wait on, in their stored order; the runs stored
//!   `running` hold the slots (`super::admission`). Runs waiting for a provider's limit to
//!   reset (`quota_waiting`) get their actor back, which continues them at the stored time.
//!
//! One pass over `/proc` finds leftovers of runs that are not re-adopted, so start-up does not
//! grow with the number of finished runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use spaces_harnesses::EventDraft;
use spaces_os::process::{alive_with_env, kill_tree};
use spaces_os::shim::journal::journal_path;
use spaces_sdk::{EventKind, Phase, Status, StopReason};
use spaces_store::runs::RunRow;
use spaces_store::JournalPos;

use super::actors;
use super::marker::{run_marker, RUN_ENV};
use super::proc::{self, shim_dir};
use super::shared::Inner;
use crate::error::Result;

/// Grace between SIGTERM and SIGKILL for a leftover process tree.
const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// Recover every run of the store (see the module doc).
pub(super) async fn recover(inner: &Arc<Inner>) -> Result<()> {
    super::ahead::sweep(&inner.cfg.state_dir.join("runs"));
    let mut leftovers: BTreeSet<String> = alive_with_env(RUN_ENV).into_iter().map(|(_, run_id)| run_id).collect();
    let shims = proc::alive_shims(&inner.cfg.state_dir.join("runs"));
    let mut adopted = BTreeSet::new();
    let runs = inner.store.runs_to_recover()?;
    // The slots are those of the runs a turn runs in; the waiting keep their order.
    let running = runs.iter().filter(|r| r.status == Status::Running).map(|r| (r.run_id.clone(), r.space.clone()));
    inner.admission.restore(running, inner.store.admission_waiting()?);
    for mut run in runs {
        leftovers.remove(&run.run_id);
        let run_dir = inner.cfg.run_dir(&run.run_id);
        // A run waiting for a slot with no process: nothing to adopt; its turn waits on.
        let waiting = matches!(run.status, Status::Queued | Status::QuotaWaiting) && run.pgid.is_none();
        let picked = if waiting { Pick::Nothing } else { pick(inner, &run, &shims).await? };
        match picked {
            Pick::Adopt(pos) => match actors::adopt(inner, run.clone(), pos).await {
                Ok(()) => {
                    adopted.insert(canonical(&shim_dir(&run_dir, pos.gen)));
                    continue;
                }
                Err(e) => tracing::warn!("run {}: cannot re-adopt its agent ({e}); ending the turn", run.run_id),
            },
            Pick::Restart(text) => match actors::restart(inner, run.clone(), text) {
                Ok(()) => {
                    tracing::info!("run {}: its turn's agent had not started when spacesd stopped; starting it", run.run_id);
                    continue;
                }
                Err(e) => tracing::warn!("run {}: cannot start its turn again ({e}); ending the turn", run.run_id),
            },
            Pick::Nothing => {}
        }
        let _ = kill_tree(run.pgid, &run_marker(&run.run_id), LEFTOVER_GRACE).await;
        run.pgid = None;
        if run.status == Status::Running {
            let turn = run.turns;
            let why = format!("spacesd restarted while turn {turn} was running, and no journal of its agent was left");
            let draft = EventDraft::new(turn, EventKind::TurnEnded)
                .stop(StopReason::Crashed)
                .text(why.clone())
                .summary(format!("turn {turn} ended: crashed ({why})"));
            inner.log.append(&run.run_id, vec![draft])?;
            inner.store.turn_end(&run.run_id, turn, StopReason::Crashed.as_str())?;
            run.status = Status::Crashed;
            run.phase = Phase::Crashed;
            // It held a slot as a running run (`admission::restore`): no more.
            inner.admission.release(&run.run_id);
            run.reason = format!("{why}; a follow-up resumes the session");
        }
        inner.store.run_update(&run)?;
        if run.status == Status::Queued {
            keep_first_prompt(inner, &run)?;
        }
        if !inner.store.queued_list(&run.run_id)?.is_empty() || run.status == Status::QuotaWaiting {
            // What the caller was told is queued behind the lost turn runs now, resuming the
            // session (issue 30).
            let run_id = run.run_id.clone();
            if let Err(e) = actors::revive_queue(inner, run) {
                tracing::warn!("run {run_id}: its queued messages cannot start: {e}");
            }
        }
    }
    // Persistent agents' runs that may take another turn hold their homes' leases again (a
    // lease of the same holder is taken back; one another host took after expiry is refused,
    // and that run's next save says so).
    for run in inner.store.live_persistent_runs()? {
        let Some(home) = run.options.home.clone() else { continue };
        if let Err(e) = inner.homes.claim(&home, &run.run_id, &run.space).await {
            tracing::warn!("run {}: the lease of home {home:?} was not taken back: {}", run.run_id, e.to_api().message);
        }
    }
    // Shims nobody adopted (their run ended, could not be re-adopted, or starts its turn again):
    // ended, so none waits for an acknowledgement forever, and with them what they hold.
    // In the background, all at once: the daemon answers meanwhile.
    for (dir, pid) in shims.into_iter().filter(|(dir, _)| !adopted.contains(dir)) {
        tracing::info!("ending the shim {pid} in {}: its run is not re-adopted", dir.display());
        tokio::spawn(async move { proc::end_orphan(&dir, pid, LEFTOVER_GRACE).await });
    }
    // Tool processes of this host's runs whose state needs no change (e.g. orphans of an idle
    // run). Processes of runs this store does not know belong to another daemon.
    for run_id in &leftovers {
        if inner.store.run_get(run_id)?.is_some() {
            let _ = kill_tree(None, &run_marker(run_id), LEFTOVER_GRACE).await;
        }
    }
    Ok(())
}

/// A run queued for a slot before its first turn, whose actor had not stored its prompt in the
/// queue yet (the daemon died at once): the first prompt kept in the run directory goes there.
fn keep_first_prompt(inner: &Inner, run: &RunRow) -> Result<()> {
    if run.turns > 0 || !inner.store.queued_list(&run.run_id)?.is_empty() {
        return Ok(());
    }
    if let Some(text) = super::secrets::first_prompt(&inner.cfg.run_dir(&run.run_id)) {
        inner.store.queued_push(&run.run_id, spaces_store::queued::QueuedRow { n: 1, text, key: None })?;
    }
    Ok(())
}

/// What recovery does with a run that may have been cut off.
enum Pick {
    /// Re-adopt this generation, its events stored up to this offset (0: none yet).
    Adopt(JournalPos),
    /// Start the turn in flight again with this text: its agent never started.
    Restart(String),
    /// Nothing to go on: the turn in flight (if any) ends `crashed`.
    Nothing,
}

/// Longest wait for a live shim the previous daemon was starting to journal its agent's start.
const SHIM_START_WAIT: Duration = Duration::from_secs(3);

/// What to do with `run` (see the module doc); `shims`, the live shims ([`proc::alive_shims`]).
async fn pick(inner: &Inner, run: &RunRow, shims: &[(PathBuf, i32)]) -> Result<Pick> {
    let run_dir = inner.cfg.run_dir(&run.run_id);
    let stored = inner.store.journal_pos(&run.run_id)?;
    let newest = proc::newest_gen(&run_dir);
    // A generation none of whose output was stored: the daemon died as it started.
    let fresh = newest.filter(|gen| stored.is_none_or(|p| *gen > p.gen));
    if let Some(gen) = fresh {
        let dir = shim_dir(&run_dir, gen);
        let alive = shims.iter().any(|(d, _)| *d == canonical(&dir));
        if journal_started(&dir, alive).await {
            return Ok(Pick::Adopt(JournalPos { gen, offset: 0 }));
        }
    } else if let Some(pos) = stored.filter(|p| journal_path(&shim_dir(&run_dir, p.gen)).exists()) {
        return Ok(Pick::Adopt(pos));
    }
    // No agent of the turn in flight ever started: only the first turn's text is kept (a
    // follow-up is answered once its process started).
    if run.status == Status::Running && stored.is_none() && run.turns <= 1 {
        if let Some(text) = super::secrets::first_prompt(&run_dir) {
            return Ok(Pick::Restart(text));
        }
    }
    Ok(Pick::Nothing)
}

/// Whether the shim in `dir` journaled its agent's start; while the journal is missing or empty
/// and the shim is `alive` (started just before the daemon died: a shim works in its directory
/// from its start), waiting up to [`SHIM_START_WAIT`] for it.
async fn journal_started(dir: &Path, alive: bool) -> bool {
    let journal = journal_path(dir);
    let deadline = tokio::time::Instant::now() + SHIM_START_WAIT;
    loop {
        if std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0) {
            return true;
        }
        if !alive || tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `path` with its symlinks resolved, as [`proc::alive_shims`] reports shim directories.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
