//! Recovery at daemon start: pick up what the previous daemon left.
//!
//! - A run whose agent process runs under a shim ([`super::proc`]) is **re-adopted**: its actor
//!   comes back, replays the journal records already stored (so the normalizer knows the turn
//!   in flight and its open tool calls), and resumes ingest at the stored offset. A turn that
//!   ran while no daemon was up completes, and its events appear once each. If the shim itself
//!   died (killed, or the host restarted), the rest of its journal is read and the turn ends as
//!   the exit says, or `crashed` when the journal has no exit (open tool calls closed first).
//! - A run cut off mid-turn with no journal to go on (a daemon of an older release) ends
//!   `crashed`; a follow-up resumes the session. Leftover processes of such runs are ended.
//!
//! - A persistent agent's run that may take another turn takes its home's lease back.
//!
//! One pass over `/proc` finds leftovers of runs that are not re-adopted, so start-up does not
//! grow with the number of finished runs.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use spaces_os::process::{alive_with_env, kill_tree};
use spaces_os::shim::journal::journal_path;
use spaces_harnesses::EventDraft;
use spaces_sdk::{EventKind, Phase, Status, StopReason};

use super::actors;
use super::marker::{run_marker, RUN_ENV};
use super::proc::shim_dir;
use super::Inner;
use crate::error::Result;

/// Grace between SIGTERM and SIGKILL for a leftover process tree.
const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// Recover every run of the store (see the module doc).
pub(super) async fn recover(inner: &Arc<Inner>) -> Result<()> {
    let mut leftovers: BTreeSet<String> = alive_with_env(RUN_ENV).into_iter().map(|(_, run_id)| run_id).collect();
    for mut run in inner.store.runs_to_recover()? {
        leftovers.remove(&run.run_id);
        if let Some(pos) = inner.store.journal_pos(&run.run_id)? {
            if journal_path(&shim_dir(&inner.cfg.run_dir(&run.run_id), pos.gen)).exists() {
                match actors::adopt(inner, run.clone(), pos).await {
                    Ok(()) => continue,
                    Err(e) => tracing::warn!("run {}: cannot re-adopt its agent ({e}); ending the turn", run.run_id),
                }
            }
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
            run.reason = format!("{why}; a follow-up resumes the session");
        }
        inner.store.run_update(&run)?;
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
    // Tool processes of this host's runs whose state needs no change (e.g. orphans of an idle
    // run). Processes of runs this store does not know belong to another daemon.
    for run_id in &leftovers {
        if inner.store.run_get(run_id)?.is_some() {
            let _ = kill_tree(None, &run_marker(run_id), LEFTOVER_GRACE).await;
        }
    }
    Ok(())
}
