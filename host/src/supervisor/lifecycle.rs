//! Keeping the state dir bounded and Spaces removable (issue "A CLI and daemon that people enjoy
//! operating", item 7): `space_remove`, `agent_remove`, `agent_prune`, and the optional
//! retention setting (`run_retention_days`) the daemon applies by itself.
//!
//! A run is **live** while it is `running` or `idle` (a turn in flight, or a CLI process waiting
//! for the next message) or while its actor still settles; live runs are never deleted. A deleted
//! run loses its row, turns, events, journal position and run directory (agent home included;
//! a persistent agent's home stays in the volume), and a fork its worktree.

use std::path::PathBuf;
use std::sync::Arc;

use spaces_sdk::{ErrorCode, RunsRemovedReport, SpaceRemoveReport, Status};
use spaces_store::now_ms;
use spaces_store::runs::RunRow;

use super::mailbox::Cmd;
use super::shared::Inner;
use super::{actors, registry};
use crate::error::{refuse, Result};

fn live(inner: &Inner, run: &RunRow) -> bool {
    busy(run.status) || inner.actors.has(&run.run_id)
}

/// A status in which a turn is in flight or a process may be waiting for the next message.
fn busy(status: Status) -> bool {
    matches!(status, Status::Running | Status::Queued | Status::QuotaWaiting | Status::Idle)
}

/// How long [`settled`] waits for an ended run's actor to retire (saving a persistent agent's
/// home to its volume happens then): 10 s.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

/// `run` once it is not live, re-read from the store. A run that has ended (`agent_stop`
/// answered) keeps its actor for the moment the actor takes to settle; a remove right after
/// the stop waits for that (at most [`SETTLE`]) instead of refusing a run its caller just
/// stopped. `None` while the run is still live after that.
async fn settled(inner: &Inner, run: RunRow) -> Result<Option<RunRow>> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    let mut run = run;
    while live(inner, &run) {
        if busy(run.status) || tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        run = registry::run_in_space(&inner.store, &run.space, &run.run_id)?;
    }
    Ok(Some(run))
}

/// Delete one run that is not live (see the module doc).
async fn delete(inner: &Inner, run: &RunRow) -> Result<()> {
    // A fork's worktree goes with it (issue 34).
    let worktree = super::fork::origin(inner, &run.run_id).map(|o| PathBuf::from(o.worktree));
    let space_root = inner.store.space_get(&run.space).ok().flatten().map(|s| PathBuf::from(s.root));
    inner.store.run_delete(&run.run_id)?;
    inner.log.forget(&run.run_id);
    if let (Some(worktree), Some(root)) = (worktree, space_root) {
        let _ = tokio::task::spawn_blocking(move || super::fork::remove_worktree(&root, &worktree)).await;
    }
    let dir = inner.cfg.run_dir(&run.run_id);
    // An agent home may hold read-only trees (a Go module cache): made writable first.
    // (A missing directory is fine: `remove_tree` accepts it.)
    let removed = tokio::task::spawn_blocking(move || spaces_volumes::remove_tree(&dir).map_err(|e| e.to_string()))
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    if let Err(e) = removed {
        tracing::warn!("run {}: its directory was not removed: {e}", run.run_id);
    }
    Ok(())
}

/// `agent_remove`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `AGENT_BUSY` for a live run
/// (stop it first).
pub(super) async fn remove(inner: &Arc<Inner>, space: &str, run_id: &str) -> Result<RunsRemovedReport> {
    let found = registry::run_in_space(&inner.store, space, run_id)?;
    let status = found.status;
    let Some(run) = settled(inner, found).await? else {
        return Err(refuse(
            ErrorCode::AgentBusy,
            format!("run {run_id} is {} (live); stop it first (`spacesd agent stop {run_id}`), then remove it", status.as_str()),
        ));
    };
    delete(inner, &run).await?;
    Ok(RunsRemovedReport { space: space.to_owned(), removed: vec![run_id.to_owned()] })
}

/// `agent_prune`: every run of `space` that is not live and was created more than
/// `older_than_ms` ago. Errors: `WORKSPACE_NOT_FOUND`.
pub(super) async fn prune(inner: &Arc<Inner>, space: &str, older_than_ms: u64) -> Result<RunsRemovedReport> {
    registry::space(&inner.store, space)?;
    let cutoff = now_ms().saturating_sub(older_than_ms);
    let mut removed = Vec::new();
    for run in inner.store.run_list(space)? {
        if run.created_ms < cutoff && !live(inner, &run) {
            delete(inner, &run).await?;
            removed.push(run.run_id);
        }
    }
    Ok(RunsRemovedReport { space: space.to_owned(), removed })
}

/// `space_remove`: refused while runs live unless `force`, which stops them first; then every
/// run of the Space is deleted and the Space unregistered. Errors: `WORKSPACE_NOT_FOUND`;
/// `AGENT_BUSY` naming the live runs (without `force`), or a run whose stop left a process.
pub(super) async fn remove_space(inner: &Arc<Inner>, name: &str, force: bool) -> Result<SpaceRemoveReport> {
    registry::space(&inner.store, name)?;
    let runs = inner.store.run_list(name)?;
    let live_runs: Vec<&RunRow> = runs.iter().filter(|r| live(inner, r)).collect();
    if !live_runs.is_empty() && !force {
        let ids: Vec<&str> = live_runs.iter().map(|r| r.run_id.as_str()).collect();
        return Err(refuse(
            ErrorCode::AgentBusy,
            format!(
                "Space {name:?} has live runs ({}); stop them, or remove it with --force (force: true) to stop them first",
                ids.join(", ")
            ),
        ));
    }
    // All at once: each stop waits mostly on its own shim (a thousand, one after another,
    // took over a minute; issue 30).
    let stops = live_runs
        .iter()
        .filter(|r| matches!(r.status, Status::Running | Status::Queued | Status::QuotaWaiting | Status::Idle))
        .map(|run| async move {
            let report = actors::ask(inner, (*run).clone(), |reply| Cmd::Stop { reply }).await?;
            if !report.ok {
                return Err(refuse(ErrorCode::AgentBusy, format!("run {} did not stop: {}", run.run_id, report.reason)));
            }
            Ok(run.run_id.clone())
        });
    let stopped = futures_util::future::join_all(stops).await.into_iter().collect::<Result<Vec<String>>>()?;
    // A stopped run's actor settles (last save of a persistent home, lease release) before it goes.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while runs.iter().any(|r| inner.actors.has(&r.run_id)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut removed = 0;
    for run in inner.store.run_list(name)? {
        if !live(inner, &run) {
            delete(inner, &run).await?;
            removed += 1;
        }
    }
    super::ahead::forget(inner, name);
    inner.store.space_delete(name)?;
    Ok(SpaceRemoveReport { name: name.to_owned(), stopped, runs_removed: removed })
}

/// The retention setting: every Space's runs that are not live and older than `days` are
/// deleted now and then every hour, until the daemon ends.
pub(super) fn spawn_retention(inner: Arc<Inner>, days: u64) {
    let older_than_ms = days.saturating_mul(86_400_000);
    tokio::spawn(async move {
        loop {
            match inner.store.space_list() {
                Ok(spaces) => {
                    for space in spaces {
                        match prune(&inner, &space.name, older_than_ms).await {
                            Ok(r) if !r.removed.is_empty() => {
                                tracing::info!(
                                    "retention: removed {} run(s) of Space {} older than {days} days",
                                    r.removed.len(),
                                    space.name
                                )
                            }
                            Ok(_) => {}
                            Err(e) => tracing::warn!("retention: Space {}: {e}", space.name),
                        }
                    }
                }
                Err(e) => tracing::warn!("retention: {e}"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    });
}
