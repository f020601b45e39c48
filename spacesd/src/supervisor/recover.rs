//! Recovery at daemon start: end what a previous daemon left behind. Turns cut off mid-flight
//! end `crashed` (status `crashed`; a follow-up resumes the session) and leftover processes of
//! this host's runs are killed. One pass over `/proc` finds the leftovers, so start-up does not
//! grow with the number of finished runs.

use std::collections::BTreeSet;
use std::time::Duration;

use spaces_codespace::process::{alive_with_env, kill_tree};
use spaces_harnesses::EventDraft;
use spaces_sdk::{EventKind, Phase, Status, StopReason};

use super::marker::{run_marker, RUN_ENV};
use super::Inner;
use crate::error::Result;

/// Grace between SIGTERM and SIGKILL for a leftover process tree.
const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// Recover every run of the store (see the module doc).
pub(super) async fn recover(inner: &Inner) -> Result<()> {
    let mut leftovers: BTreeSet<String> = alive_with_env(RUN_ENV).into_iter().map(|(_, run_id)| run_id).collect();
    for mut run in inner.store.runs_to_recover()? {
        leftovers.remove(&run.run_id);
        let _ = kill_tree(run.pgid, &run_marker(&run.run_id), LEFTOVER_GRACE).await;
        run.pgid = None;
        if run.status == Status::Running {
            let turn = run.turns;
            let why = format!("spacesd restarted while turn {turn} was running");
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
    // Tool processes of this host's runs whose state needs no change (e.g. orphans of an idle
    // run). Processes of runs this store does not know belong to another daemon.
    for run_id in &leftovers {
        if inner.store.run_get(run_id)?.is_some() {
            let _ = kill_tree(None, &run_marker(run_id), LEFTOVER_GRACE).await;
        }
    }
    Ok(())
}
