//! A persistent agent's run (`agent_start` with `home`, API reference "Agent runs"): its home
//! restored from the volume before its first process, saved after every turn, its lease
//! released when it stops or finishes.
//!
//! The home is the harness's config directory under the run's agent home
//! (`<run dir>/home/.claude` = `CLAUDE_CONFIG_DIR`, `<run dir>/home/.codex` = `CODEX_HOME`:
//! [`spaces_harnesses::HomeLayout`]). It is restored only when it does not exist yet (a new run);
//! a run revived on the same host keeps its own, newer copy. The snapshot's record
//! ([`AgentMeta`]) carries the CLI's session id: the run resumes it, after moving its transcript
//! to where the CLI looks from this host's folder ([`spaces_harnesses::SessionFiles`]). A session
//! whose transcript is missing from the home (case V25) is not resumed: the run starts a fresh
//! session with clean arguments and a `notice` says the session was reset.
//!
//! Saves run beside the run (the next turn never waits for one); they are serialized per home,
//! and an unchanged home uploads nothing. A file of the home holding one of the run's secret
//! values (its `env` values, forwarded provider keys, MCP server secrets, the daemon's own) is
//! never uploaded: that save fails, naming the file. Each save that stored something, and each
//! one that failed, is a `notice` of the turn.
//!
//! Every save is written down before it starts and crossed off when done ([`pending`]), so a
//! save the daemon died in is retried by the next daemon at start, with a `notice` saying so.
//! Leases are renewed beside the run by `crate::homes::renew`; what it has to tell a run
//! (renewals failing, working again, the lease lapsed or lost) becomes a `notice` of the run's
//! current turn (`tell_runs_lease_news`).

mod pending;

use spaces_os::path_io::PathIo;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use spaces_harnesses::{EventDraft, Harness, HomeLayout};
use spaces_sdk::EventKind;
use spaces_store::runs::RunRow;

use super::error::{Error, Result};
use super::shared::Inner;
use crate::homes::meta::AgentMeta;

/// Deepest directory level searched for a session transcript.
const MAX_DEPTH: usize = 6;

/// The agent home of run `run_id` (`HOME` of its processes; the launcher makes the same path
/// absolute).
fn agent_home(inner: &Inner, run_id: &str) -> PathBuf {
    let dir = inner.cfg.run_dir(run_id).join("home");
    std::path::absolute(&dir).unwrap_or(dir)
}

/// Before a process of `run` starts: take the home's lease (a no-op while held), and for a new
/// run restore the home and pick up the saved session. Returns the notices to append.
/// Errors (the turn fails before start, with this reason): `LEASE_HELD`, a snapshot that cannot
/// be restored, a home of another harness.
pub(super) async fn prepare(inner: &Inner, run: &mut RunRow, harness: &dyn Harness) -> Result<Vec<EventDraft>> {
    let Some(home) = run.options.home.clone() else { return Ok(Vec::new()) };
    inner.homes.claim(&home, &run.run_id, &run.space).await?;
    let layout = harness.persistent_home();
    let agent_home = agent_home(inner, &run.run_id);
    let config_dir = agent_home.join(layout.config_dir);
    if config_dir.exists() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(&agent_home).map_err(PathIo::at("create the agent home", &agent_home))?;
    let turn = run.turns;
    let Some(snapshot) = inner.homes.restore_latest(&home, &config_dir).await? else {
        return Ok(vec![notice(turn, format!("persistent agent {home:?} is new: its home starts empty and is saved after every turn"))]);
    };
    let meta = AgentMeta::from_value(&snapshot.meta);
    if !meta.agent.is_empty() && !spaces_harnesses::same_cli(&meta.agent, harness.id()) {
        return Err(Error::HomeOfOtherAgent { home: home.clone(), agent: meta.agent, harness: harness.id().to_owned() });
    }
    let mut notes = vec![notice(
        turn,
        format!(
            "home of persistent agent {home:?} restored from snapshot {} ({} files, {} bytes, saved on {})",
            snapshot.id, snapshot.files, snapshot.bytes, snapshot.host
        ),
    )];
    if run.session_id.is_none() {
        if let Some(sid) = meta.session_id.filter(|s| !s.is_empty()) {
            match find_transcript(&config_dir, &layout, &sid) {
                Some(found) => {
                    relocate(&config_dir, &layout, &found, &PathBuf::from(&run.cwd)).map_err(Error::Transcript)?;
                    run.session_id = Some(sid);
                }
                None => notes.push(notice(
                    turn,
                    format!(
                        "the saved session {sid} has no transcript in the restored home; the session was reset: \
                         this run starts a fresh session"
                    ),
                )),
            }
        }
    }
    Ok(notes)
}

/// Save the home of `run` in the background; a `notice` says what was stored, or why nothing
/// could be.
pub(super) fn save(inner: &Arc<Inner>, run: &RunRow, harness: &'static dyn Harness) {
    if let Some(task) = save_task(inner, run, harness, Why::Turn { last: false }) {
        tokio::spawn(async move { task.await.into_iter().for_each(pending::Pending::clear) });
    }
}

/// Why a home is saved.
enum Why {
    /// A turn ended (`last`: the run stopped or finished too).
    Turn { last: bool },
    /// A previous daemon died in the save(s) of `pending`, the latest after turn `turn`, the
    /// first started at `started_ms`.
    Retry { turn: u32, started_ms: u64, pending: Vec<pending::Pending> },
}

/// Turn what the lease renewals have to tell a run into `notice` events of its current turn
/// (`crate::homes::renew`).
pub(super) fn tell_runs_lease_news(inner: &Arc<Inner>) {
    let homes = inner.homes.clone();
    let inner = Arc::downgrade(inner);
    homes.on_lease_news(Box::new(move |run_id, note| {
        let Some(inner) = inner.upgrade() else { return };
        let turn = match inner.store.run_get(run_id) {
            Ok(Some(run)) => run.turns,
            _ => return,
        };
        let draft = notice(turn, note.summary).text(note.detail);
        if let Err(e) = inner.log.append(run_id, vec![draft]) {
            tracing::warn!("run {run_id}: lease notice lost: {e}");
        }
    }));
}

/// Retry, in the background, every home save a previous daemon died in (`persist/pending.rs`).
pub(super) fn retry_interrupted_saves(inner: &Arc<Inner>) {
    pending::retry(inner);
}

/// Save the home of `run` one last time, then release its lease (the run stopped or finished).
/// The save stays written down until the lease is released, so a daemon that dies in between
/// leaves the release to the next one, not to the TTL.
pub(super) fn finish(inner: &Arc<Inner>, run: &RunRow, harness: &'static dyn Harness) {
    let Some(home) = run.options.home.clone() else { return };
    let task = save_task(inner, run, harness, Why::Turn { last: true });
    let inner = inner.clone();
    let run_id = run.run_id.clone();
    tokio::spawn(async move {
        if let Some(task) = task {
            let done = task.await;
            inner.homes.release(&home, &run_id).await;
            done.into_iter().for_each(pending::Pending::clear);
        } else {
            inner.homes.release(&home, &run_id).await;
        }
    });
}

/// The save of `run`'s home, for `why`; `None` when the run has no home here. A turn's save is
/// written down ([`pending::record`]) before this returns. The future's output is what to cross
/// off once the caller is done with it (after a release, for a last save): the save's markers
/// when it is done, none when the store or the files failed (then the next start tries again).
fn save_task(
    inner: &Arc<Inner>,
    run: &RunRow,
    harness: &'static dyn Harness,
    why: Why,
) -> Option<impl std::future::Future<Output = Vec<pending::Pending>>> {
    let home = run.options.home.clone()?;
    let layout = harness.persistent_home();
    let config_dir = agent_home(inner, &run.run_id).join(layout.config_dir);
    if !config_dir.is_dir() {
        if let Why::Retry { pending, .. } = why {
            pending.into_iter().for_each(pending::Pending::clear);
        }
        return None;
    }
    let (pending, retried) = match why {
        Why::Turn { last } => {
            let marker = pending::Marker {
                run_id: run.run_id.clone(),
                home: home.clone(),
                turn: run.turns,
                last,
                started_ms: spaces_store::now_ms(),
            };
            match pending::record(&inner.cfg.state_dir, &marker) {
                Ok(p) => (vec![p], None),
                Err(e) => {
                    tracing::warn!(
                        "run {}: the home save is not written down ({e}); if spacesd dies during it, it is not retried",
                        run.run_id
                    );
                    (Vec::new(), None)
                }
            }
        }
        Why::Retry { turn, started_ms, pending } => (pending, Some((turn, started_ms))),
    };
    let cwd = relative_cwd(inner, run);
    let mut options = run.options.clone();
    options.cwd = cwd;
    let meta = AgentMeta::of_run(harness.id(), &run.space, &run.run_id, run.session_id.as_deref(), &options);
    let inner = inner.clone();
    let run_id = run.run_id.clone();
    let turn = retried.map_or(run.turns, |(t, _)| t);
    Some(async move {
        // The run's secret values are never uploaded: a file holding one fails the save.
        let result = match super::secrets::RunSecrets::load(&inner.cfg.run_dir(&run_id)) {
            Ok(secrets) => inner.homes.save(&home, &run_id, &config_dir, layout.excludes, meta.to_value(), secrets.refused_in_home()).await,
            Err(e) => Err(crate::error::refuse(
                spaces_sdk::ErrorCode::Internal,
                format!("the run's secrets cannot be read to check the home against them ({e})"),
            )),
        };
        // Done, unless the store or the files failed: then the next start tries again.
        let done = match &result {
            Ok(_) => true,
            Err(e) => e.to_api().code != spaces_sdk::ErrorCode::Internal,
        };
        let outcome = match result {
            Ok(r) if r.unchanged => {
                if retried.is_none() {
                    None
                } else {
                    Some(format!("home already saved as snapshot {}", r.snapshot.id))
                }
            }
            Ok(r) => Some(format!(
                "home saved: snapshot {} ({} files, {} bytes uploaded, {} ms)",
                r.snapshot.id, r.snapshot.files, r.uploaded_bytes, r.elapsed_ms
            )),
            Err(e) => Some(format!("home not saved: {}", e.to_api().message)),
        };
        let draft = match (outcome, retried) {
            (None, _) => None,
            (Some(outcome), None) => Some(notice(turn, outcome)),
            (Some(outcome), Some((turn, started_ms))) => {
                Some(notice(turn, format!("home save of turn {turn} retried after spacesd restarted: {outcome}")).text(format!(
                    "the home save of turn {turn} (started at {started_ms}, ms since the epoch) was cut off when spacesd \
                     stopped; it was retried when spacesd started again: {outcome}"
                )))
            }
        };
        if let Some(draft) = draft {
            if let Err(e) = inner.log.append(&run_id, vec![draft]) {
                tracing::warn!("run {run_id}: home save notice lost: {e}");
            }
        }
        if done {
            pending
        } else {
            Vec::new()
        }
    })
}

/// The run's cwd relative to its Space root (`None`: the root), so another host with its own
/// folder for the Space resolves it there.
fn relative_cwd(inner: &Inner, run: &RunRow) -> Option<String> {
    let space = inner.store.space_get(&run.space).ok().flatten()?;
    let rel = Path::new(&run.cwd).strip_prefix(&space.root).ok()?;
    let rel = rel.to_string_lossy().into_owned();
    (!rel.is_empty()).then_some(rel)
}

fn notice(turn: u32, text: String) -> EventDraft {
    EventDraft::new(turn, EventKind::Notice).summary(text)
}

/// The transcript of session `sid` in `config_dir`, as a path relative to it.
pub(super) fn find_transcript(config_dir: &Path, layout: &HomeLayout, sid: &str) -> Option<String> {
    fn walk(dir: &Path, rel: &str, depth: usize, layout: &HomeLayout, sid: &str) -> Option<String> {
        let entries = std::fs::read_dir(dir).ok()?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let kind = entry.file_type().ok()?;
            if kind.is_file() && layout.sessions.is_transcript(&rel, sid) {
                return Some(rel);
            }
            if kind.is_dir() && depth < MAX_DEPTH {
                if let Some(found) = walk(&entry.path(), &rel, depth + 1, layout, sid) {
                    return Some(found);
                }
            }
        }
        None
    }
    walk(config_dir, "", 0, layout, sid)
}

/// Put the transcript `found` where the CLI looks for it from `cwd` (a copy; the original stays
/// for the folder it came from).
pub(super) fn relocate(config_dir: &Path, layout: &HomeLayout, found: &str, cwd: &Path) -> std::io::Result<()> {
    let Some(want_dir) = layout.sessions.resume_dir(cwd) else { return Ok(()) };
    let file = Path::new(found).file_name().unwrap_or_default();
    let target = config_dir.join(&want_dir).join(file);
    if target.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(config_dir.join(&want_dir))?;
    let tmp = target.with_extension("jsonl.restoring");
    std::fs::copy(config_dir.join(found), &tmp)?;
    std::fs::rename(&tmp, &target)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_filed_under_another_folder_is_copied_to_this_folders_project() {
        let dir = tempfile::tempdir().unwrap();
        let layout = spaces_harnesses::by_id("claude-code").unwrap().persistent_home();
        std::fs::create_dir_all(dir.path().join("projects/-host-a-proj")).unwrap();
        std::fs::write(dir.path().join("projects/-host-a-proj/s-1.jsonl"), "{}\n").unwrap();
        let found = find_transcript(dir.path(), &layout, "s-1").unwrap();
        assert_eq!(found, "projects/-host-a-proj/s-1.jsonl");
        assert_eq!(find_transcript(dir.path(), &layout, "s-2"), None);
        relocate(dir.path(), &layout, &found, Path::new("/host-b/proj")).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("projects/-host-b-proj/s-1.jsonl")).unwrap(), "{}\n");
        assert!(dir.path().join(&found).exists(), "the original stays");
    }
}
