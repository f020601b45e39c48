//! Saves in flight, written down before they start, so a daemon that dies mid-save leaves a
//! note the next one acts on.
//!
//! Each save of a persistent agent's home first writes a marker
//! `<state dir>/pending-saves/<run_id>.<id>.json` ([`Marker`]: run, home, turn, whether it was
//! the run's last save, when it started), synced to disk, and removes it when the save is done
//! (a run's last save: once its lease is released too): stored, or refused for a reason a retry
//! cannot mend (a secret in a file, the home taken by another host or Space). A save that failed
//! on the store or the files leaves its marker, so the next start tries it again. At start, after the runs are recovered, every run with a marker
//! is saved again, in the background ([`retry`]): its home as it is on disk now (the CLI's files
//! of the interrupted turn included), with a `notice` on the run saying the save was retried.
//! The lease the dead daemon held is this host's own (holder `<host id>/<run_id>`; the host id
//! is kept in `<state dir>/host-id`), so the retry takes it back at once instead of waiting out
//! the TTL; a run that had stopped or finished releases it again once the save is done.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use spaces_sdk::Status;

use super::super::shared::Inner;
use super::Why;

/// What a marker of a save in flight holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::supervisor) struct Marker {
    /// The run whose home is saved.
    pub run_id: String,
    /// The persistent agent's name (the home on the volume).
    pub home: String,
    /// The turn after which the save started.
    pub turn: u32,
    /// The run's last save (it stopped or finished; its lease is released after it).
    pub last: bool,
    /// When the save started, ms since the Unix epoch.
    pub started_ms: u64,
}

/// A written marker; [`Pending::clear`] removes it.
#[derive(Debug)]
pub(in crate::supervisor) struct Pending {
    path: PathBuf,
}

/// `<state dir>/pending-saves`.
fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("pending-saves")
}

/// Write `marker` durably (the file and its directory synced) before its save starts.
/// Errors: the state dir cannot be written (the save runs anyway; only its retry is lost).
pub(in crate::supervisor) fn record(state_dir: &Path, marker: &Marker) -> std::io::Result<Pending> {
    let dir = dir(state_dir);
    let id = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let path = dir.join(format!("{}.{id}.json", marker.run_id));
    let body = serde_json::to_vec(marker).map_err(std::io::Error::other)?;
    spaces_store::fsutil::write_private(&path, &body)?;
    spaces_store::fsutil::blocking(|| std::fs::File::open(&dir)?.sync_all())?;
    Ok(Pending { path })
}

impl Pending {
    /// The save is done: forget it (a marker left behind only costs a needless retry).
    pub(in crate::supervisor) fn clear(self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove the save marker {}: {e}", self.path.display());
            }
        }
    }
}

/// Every marker left in `state_dir`, grouped by run (oldest first within a run). An unreadable
/// marker is logged and removed: it names nothing a retry could act on.
pub(in crate::supervisor) fn left(state_dir: &Path) -> Vec<(String, Vec<(Marker, Pending)>)> {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else { return Vec::new() };
    let mut by_run: std::collections::BTreeMap<String, Vec<(Marker, Pending)>> = Default::default();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        match std::fs::read(&path).map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice::<Marker>(&b).map_err(|e| e.to_string()))
        {
            Ok(m) => by_run.entry(m.run_id.clone()).or_default().push((m, Pending { path })),
            Err(e) => {
                tracing::warn!("removing the unreadable save marker {}: {e}", path.display());
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    by_run
        .into_iter()
        .map(|(run, mut v)| {
            v.sort_by_key(|(m, _)| m.started_ms);
            (run, v)
        })
        .collect()
}

/// Save again, in the background, the home of every run a previous daemon left a marker for
/// (module doc).
pub(in crate::supervisor) fn retry(inner: &Arc<Inner>) {
    for (run_id, markers) in left(&inner.cfg.state_dir) {
        let run = match inner.store.run_get(&run_id) {
            Ok(Some(run)) if run.options.home.is_some() => run,
            Ok(_) => {
                tracing::info!("run {run_id}: an interrupted home save of a run that is gone; forgotten");
                markers.into_iter().for_each(|(_, p)| p.clear());
                continue;
            }
            Err(e) => {
                tracing::warn!("run {run_id}: cannot read the run to retry its interrupted home save ({e}); the next start tries again");
                continue;
            }
        };
        let Some(harness) = spaces_harnesses::by_id(&run.agent) else {
            tracing::warn!("run {run_id}: unknown agent {:?}; its interrupted home save is forgotten", run.agent);
            markers.into_iter().for_each(|(_, p)| p.clear());
            continue;
        };
        let release = matches!(run.status, Status::Stopped | Status::Done);
        let turn = markers.last().map_or(run.turns, |(m, _)| m.turn);
        let started_ms = markers.first().map_or(0, |(m, _)| m.started_ms);
        let pending = markers.into_iter().map(|(_, p)| p).collect();
        let why = Why::Retry { turn, started_ms, pending };
        let task = super::save_task(inner, &run, harness, why);
        let (inner, home) = (inner.clone(), run.options.home.clone().unwrap_or_default());
        tokio::spawn(async move {
            let done = match task {
                Some(task) => task.await,
                None => {
                    tracing::warn!("run {run_id}: its home is gone from the run directory; the interrupted save cannot be retried");
                    Vec::new()
                }
            };
            if release {
                inner.homes.release(&home, &run_id).await;
            }
            done.into_iter().for_each(Pending::clear);
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_stays_until_cleared_and_markers_come_back_grouped_by_run() {
        let state = tempfile::tempdir().unwrap();
        let m = |run: &str, turn, started_ms| Marker { run_id: run.into(), home: "h".into(), turn, last: false, started_ms };
        let a2 = record(state.path(), &m("run-a", 2, 20)).unwrap();
        let _a1 = record(state.path(), &m("run-a", 1, 10)).unwrap();
        let b1 = record(state.path(), &m("run-b", 1, 15)).unwrap();
        std::fs::write(dir(state.path()).join("garbled.json"), b"{").unwrap();
        let left1 = left(state.path());
        let shape: Vec<(String, Vec<u32>)> = left1.iter().map(|(r, v)| (r.clone(), v.iter().map(|(m, _)| m.turn).collect())).collect();
        assert_eq!(shape, [("run-a".to_string(), vec![1, 2]), ("run-b".to_string(), vec![1])]);
        assert!(!dir(state.path()).join("garbled.json").exists(), "an unreadable marker is removed");
        a2.clear();
        b1.clear();
        let shape: Vec<(String, usize)> = left(state.path()).iter().map(|(r, v)| (r.clone(), v.len())).collect();
        assert_eq!(shape, [("run-a".to_string(), 1)]);
    }
}
