//! The next run of a Space and harness, made ready ahead, so its agent starts in a warm sandbox
//! (issue 28: bubblewrap's namespaces and mounts cost 5 to 10 ms on a start path).
//!
//! A run's sandbox names the run's own folders (its home at `/run/home`, its API directory at
//! `/run/spaces`, its attached files: [`super::run_sandbox`]), so no sandbox made before a
//! run's id exists could be its. So once a process of a run starts in a bubblewrap sandbox,
//! the daemon picks the id of the *next* run of the same Space and harness ([`prepare`]), makes
//! that run's directory with those folders, and has a warm sandbox made under the policy that
//! run's first process will have (`spaces_os::shim::spare::prewarm`). The next `agent_start`
//! there takes that id ([`take`]); its launch computes the same policy from the same paths, the
//! shim finds the warm sandbox, and the agent starts with one exec. Whatever changed the policy
//! meanwhile (a Space added, a folder replaced, another binary or harness file) makes the
//! policies (or their paths' identity) differ, and the start goes the usual way: a run made
//! ready ahead is a speed-up, never a promise.
//!
//! Nothing is made ahead while the host's CPU is contended (PSI, or the load average without
//! it): the work would delay the calls in flight, which matter more than the next start.
//!
//! A directory made ahead holds the marker [`MARKER`] until a start takes it. One a daemon left
//! when it stopped is removed at the next daemon's start ([`sweep`]); those of a Space being
//! removed go with it ([`forget`]).

use spaces_os::path_io::PathIo;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::shared::Inner;

/// The file in a run directory made ahead that no start has taken yet.
pub(super) const MARKER: &str = ".ahead";

/// A new run's id (`run-` and 12 hex digits).
pub(super) fn new_run_id() -> String {
    format!("run-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// The id of the run made ready for the next run of `agent` in `space`, taken (its marker
/// removed), or a new id when there is none or its directory is gone.
pub(super) fn take(inner: &Inner, space: &str, agent: &str) -> String {
    let made = inner.ahead.lock().unwrap_or_else(|p| p.into_inner()).remove(&(space.to_owned(), agent.to_owned()));
    match made.flatten() {
        Some(run_id) if std::fs::remove_file(inner.cfg.run_dir(&run_id).join(MARKER)).is_ok() => run_id,
        _ => new_run_id(),
    }
}

/// Make the next run of harness `agent` in `space` ready (in the background), unless one is
/// ready or being made (a burst of starts makes one), or the CPU is contended: its directory
/// with the folders its sandbox mounts, and a warm sandbox (stdout and stderr apart: an agent's) under the policy of its first process, whose read-only paths besides the
/// run's own are `readonly` (as the run that just started had them). Failures are logged: the
/// next start then goes the usual way.
pub(super) fn prepare(inner: Arc<Inner>, space: String, agent: &'static str, readonly: Vec<PathBuf>) {
    // Making it costs CPU now (a shim, bubblewrap and the helper) to save a start later: on a
    // host whose CPU is contended that work would delay the calls in flight (a follow-up just
    // after a start waited 4 ms more under load), so the next start goes the usual way there.
    let key = (space, agent.to_owned());
    if inner.ahead.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key) || cpu_contended(inner.cfg.ahead_psi_max) {
        return;
    }
    {
        let mut ahead = inner.ahead.lock().unwrap_or_else(|p| p.into_inner());
        if ahead.contains_key(&key) {
            return;
        }
        ahead.insert(key.clone(), None);
    }
    tokio::task::spawn_blocking(move || {
        let run_id = new_run_id();
        let run_dir = inner.cfg.run_dir(&run_id);
        let run_dir = std::path::absolute(&run_dir).unwrap_or(run_dir);
        let made = make(&inner, &key.0, &run_dir, readonly);
        let mut ahead = inner.ahead.lock().unwrap_or_else(|p| p.into_inner());
        // Still wanted: not taken by a start meanwhile (it went the usual way), nor forgotten
        // with its Space.
        let wanted = matches!(ahead.get(&key), Some(None));
        match made {
            Ok(policy) if wanted => {
                ahead.insert(key, Some(run_id));
                drop(ahead);
                if let Some(policy) = policy {
                    spaces_os::shim::spare::prewarm((&policy, true));
                }
            }
            made => {
                if wanted {
                    ahead.remove(&key);
                }
                drop(ahead);
                if let Err(why) = made {
                    tracing::warn!("the next run of {} in Space {} is not made ready ahead: {why}", key.1, key.0);
                }
                remove(&run_dir);
            }
        }
    });
}

/// Whether the host's CPU is contended now: the share of the last 10 s in which some runnable
/// task waited for a CPU (`/proc/pressure/cpu`, PSI `some avg10`, percent) above `psi_max`
/// (`Config::ahead_psi_max`; 100: never contended), or, on a kernel without PSI, a 1-minute
/// load average above the number of CPUs.
fn cpu_contended(psi_max: f64) -> bool {
    if psi_max >= 100.0 {
        return false;
    }
    if let Ok(psi) = std::fs::read_to_string("/proc/pressure/cpu") {
        return psi_some_avg10(&psi).is_some_and(|pct| pct > psi_max);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let load = std::fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok());
    load.is_some_and(|load| load > cpus)
}

/// `avg10` of the `some` line of a PSI file (`some avg10=2.87 avg60=... total=...`).
fn psi_some_avg10(psi: &str) -> Option<f64> {
    let line = psi.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace().find_map(|field| field.strip_prefix("avg10="))?.parse().ok()
}

/// The run directory `run_dir` with its marker and the folders its sandbox mounts, and the
/// policy of its first process. Errors: the folders cannot be made, or those of
/// [`super::run_sandbox::policy`].
fn make(inner: &Inner, space: &str, run_dir: &Path, readonly: Vec<PathBuf>) -> super::error::Result<Option<spaces_os::sandbox::Policy>> {
    spaces_store::fsutil::create_private_dir(run_dir).map_err(PathIo::at("create", run_dir))?;
    std::fs::write(run_dir.join(MARKER), b"").map_err(PathIo::at("write", run_dir.join(MARKER)))?;
    for dir in [run_dir.join(super::run_sandbox::HOME), run_dir.join(super::files::FOLDER), super::api::dir(run_dir)] {
        spaces_store::fsutil::create_private_dir(&dir).map_err(PathIo::at("create", &dir))?;
    }
    super::run_sandbox::policy(inner, space, run_dir, readonly)
}

/// Forget the runs made ready ahead in Space `space` and remove their directories (the Space
/// is being removed).
pub(super) fn forget(inner: &Inner, space: &str) {
    let gone: Vec<String> = {
        let mut ahead = inner.ahead.lock().unwrap_or_else(|p| p.into_inner());
        let keys: Vec<_> = ahead.keys().filter(|(s, _)| s == space).cloned().collect();
        keys.into_iter().filter_map(|k| ahead.remove(&k).flatten()).collect()
    };
    for run_id in gone {
        remove(&inner.cfg.run_dir(&run_id));
    }
}

/// At daemon start: remove the run directories a previous daemon made ahead that no start took
/// (they hold [`MARKER`]; no row names them).
pub(super) fn sweep(runs_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(runs_dir) else { return };
    for entry in entries.flatten() {
        if entry.path().join(MARKER).exists() {
            remove(&entry.path());
        }
    }
}

fn remove(run_dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(run_dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("cannot remove {}, a run directory made ahead: {e}", run_dir.display());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn psi_some_avg10_is_read_from_the_some_line() {
        let psi = "some avg10=42.50 avg60=12.43 avg300=22.34 total=16524852584\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(psi_some_avg10(psi), Some(42.5));
        assert_eq!(psi_some_avg10("full avg10=1.00\n"), None);
    }

    /// Only directories made ahead and never taken (with the marker) are swept; a run's own
    /// directory (no marker) stays.
    #[test]
    fn the_sweep_removes_only_directories_made_ahead() {
        let runs = tempfile::tempdir().unwrap();
        let ahead = runs.path().join("run-aaaaaaaaaaaa");
        std::fs::create_dir_all(ahead.join("home")).unwrap();
        std::fs::write(ahead.join(MARKER), b"").unwrap();
        let taken = runs.path().join("run-bbbbbbbbbbbb");
        std::fs::create_dir_all(taken.join("home")).unwrap();
        sweep(runs.path());
        assert!(!ahead.exists(), "a directory made ahead that no start took is removed");
        assert!(taken.exists(), "a run's directory stays");
    }
}
