//! `agent_fork` and `agent_merge` (issue 34): a run forked at a turn into a new idle run with a
//! worktree of its own, and the fork's changes merged back into its parent's folder.
//!
//! The fork's worktree is `<Space root>/.spaces-worktrees/<fork run id>`: a `git worktree`
//! (detached) when the Space is a git repository, else a new folder; either way it is then made
//! exactly what the parent's checkpoint of that turn holds. Checkpoints never look inside
//! `.spaces-worktrees`. The fork's session is the native fork where the CLI has one: its config
//! directory (with the parent's transcripts) is copied into the fork's home, and its first
//! launch resumes the parent's session at the turn's point (`LaunchContext::resume_at`: Claude
//! Code `--resume-session-at` + `--fork-session`, Codex app-server `thread/fork`). What the
//! fork came from is kept in its run directory ([`FORK_FILE`]); `agent_remove` of the fork
//! removes its worktree.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use spaces_harnesses::EventDraft;
use spaces_sdk::{AgentForkRequest, AgentMergeRequest, ErrorCode, EventKind, ForkReport, MergeConflict, MergeReport, Phase, Status};
use spaces_store::runs::RunRow;

use super::checkpoints;
use super::registry;
use super::secrets::RunSecrets;
use super::shared::Inner;
use crate::error::{refuse, Error, Result};

/// In a fork's run directory: what it was forked from.
const FORK_FILE: &str = "fork.json";

/// What a fork came from, and what its worktree is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ForkOrigin {
    pub parent_run_id: String,
    pub at_turn: u32,
    /// The worktree (absolute).
    pub worktree: String,
    /// `git` or `copy`.
    pub kind: String,
}

/// The fork record of run `run_id`, if it is a fork.
pub(super) fn origin(inner: &Inner, run_id: &str) -> Option<ForkOrigin> {
    let bytes = std::fs::read(inner.cfg.run_dir(run_id).join(FORK_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn io(what: &str, e: impl std::fmt::Display) -> Error {
    refuse(ErrorCode::Internal, format!("{what}: {e}"))
}

/// `agent_fork` (see [`AgentForkRequest`]). Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`,
/// `INVALID_ARGUMENT` naming `at_turn` (no checkpoint of it) or the read-only Space, `label`;
/// `INTERNAL` when the worktree or the run directory cannot be made (nothing is left then).
pub(super) async fn fork(inner: &std::sync::Arc<Inner>, req: &AgentForkRequest) -> Result<ForkReport> {
    let parent = registry::run_in_space(&inner.store, &req.space, &req.run_id)?;
    let space = registry::space(&inner.store, &req.space)?;
    if space.read_only {
        return Err(crate::error::invalid_field(
            "space",
            format!("Space {:?} is read-only: a fork writes a worktree and runs an agent, so it cannot be made there", space.name),
        ));
    }
    if let Some(label) = &req.label {
        super::start::check_label(label)?;
    }
    let cps = checkpoints::required(&inner.cfg, &parent.run_id, "at_turn", "no run can be forked")?;
    let turns = cps.turns().map_err(|e| io("the run's checkpoints", e))?;
    if !turns.contains(&req.at_turn) {
        return Err(crate::error::invalid_field(
            "at_turn",
            format!("run {} has no checkpoint of turn {} (it has {turns:?})", parent.run_id, req.at_turn),
        ));
    }
    let run_id = super::ahead::new_run_id();
    let worktree = Path::new(&space.root).join(spaces_volumes::checkpoint::WORKTREES_DIR).join(&run_id);
    let (inner2, parent2, worktree2, run_id2) = (inner.clone(), parent.clone(), worktree.clone(), run_id.clone());
    let at_turn = req.at_turn;
    let label = req.label.clone();
    let space_root = PathBuf::from(&space.root);
    let made = tokio::task::spawn_blocking(move || {
        let made = make(&inner2, &parent2, &cps, at_turn, &space_root, &worktree2, &run_id2, label);
        if made.is_err() {
            remove_worktree(&space_root, &worktree2);
            let _ = std::fs::remove_dir_all(inner2.cfg.run_dir(&run_id2));
        }
        made
    })
    .await
    .map_err(|e| io("the fork", e))??;
    let (kind, conversation, cwd) = made;
    // The fork's notice comes before its first turn; the parent's is of its latest turn.
    let note = |turn: u32, text: String| vec![EventDraft::new(turn, EventKind::Notice).summary(text)];
    let text = format!("forked from run {} at turn {at_turn} ({conversation} session)", parent.run_id);
    if let Err(e) = inner.log.append(&run_id, note(0, text)) {
        tracing::warn!("run {run_id}: the fork notice was not stored: {e}");
    }
    let latest = inner.store.run_get(&parent.run_id).ok().flatten().map_or(parent.turns, |r| r.turns);
    if let Err(e) = inner.log.append(&parent.run_id, note(latest, format!("forked at turn {at_turn} into run {run_id}"))) {
        tracing::warn!("run {}: the fork notice was not stored: {e}", parent.run_id);
    }
    Ok(ForkReport {
        run_id,
        parent_run_id: parent.run_id,
        at_turn,
        cwd: cwd.display().to_string(),
        worktree: kind.to_owned(),
        conversation: conversation.to_owned(),
    })
}

/// The fork's worktree, run directory and row (blocking). Returns the worktree's kind, how its
/// conversation goes on, and its folder (the parent's place in the worktree).
#[allow(clippy::too_many_arguments)]
fn make(
    inner: &Inner,
    parent: &RunRow,
    cps: &spaces_volumes::checkpoint::Checkpoints,
    at_turn: u32,
    space_root: &Path,
    worktree: &Path,
    run_id: &str,
    label: Option<String>,
) -> Result<(&'static str, &'static str, PathBuf)> {
    let kind = make_worktree(space_root, worktree)?;
    // The parent's folder may be a subfolder of the Space: the same place in the worktree. A
    // parent that is a fork itself has its place in its own worktree (a fork of a fork is not
    // nested in `.spaces-worktrees/<parent>/.spaces-worktrees/`: found by a new user's trial).
    let base = origin(inner, &parent.run_id).map_or_else(|| space_root.to_path_buf(), |o| PathBuf::from(o.worktree));
    let rel = Path::new(&parent.cwd).strip_prefix(&base).map(Path::to_path_buf).unwrap_or_default();
    // (`join("")` would end the path in a `/`, and the CLI's session directory is named after
    // the path: the native session would not be found.)
    let cwd = if rel.as_os_str().is_empty() { worktree.to_path_buf() } else { worktree.join(&rel) };
    std::fs::create_dir_all(&cwd).map_err(|e| io("the fork's folder", e))?;
    cps.copy_to(&cwd, at_turn).map_err(|e| io("the fork's worktree", e))?;
    // A merge compares against this checkpoint: the parent keeps it.
    cps.pin(at_turn).map_err(|e| io("the fork point", e))?;
    if kind == "git" {
        index_from_head(worktree);
    }
    let run_dir = inner.cfg.run_dir(run_id);
    spaces_store::fsutil::create_private_dir(&run_dir)?;
    let parent_dir = inner.cfg.run_dir(&parent.run_id);
    RunSecrets::load(&parent_dir)?.save(&run_dir)?;
    // The session: the native fork of the parent's at the turn's point, where the CLI has one.
    let harness = spaces_harnesses::by_id(&parent.agent);
    let point = super::actor::points_in(&parent_dir).remove(&at_turn);
    let native = at_turn > 0 && point.is_some() && harness.is_some_and(|h| h.supports().rewind);
    if let (true, Some(h), Some(super::actor::TurnPoint { session, point })) = (native, harness, &point) {
        let layout = h.persistent_home();
        let (from, to) = (
            parent_dir.join(super::run_sandbox::HOME).join(layout.config_dir),
            run_dir.join(super::run_sandbox::HOME).join(layout.config_dir),
        );
        if let Some(found) = super::persist::find_transcript(&from, &layout, session) {
            transcript_settled(&from.join(found), point);
        }
        copy_tree(&from, &to).map_err(|e| io("the parent's session files", e))?;
        if let Some(found) = super::persist::find_transcript(&to, &layout, session) {
            super::persist::relocate(&to, &layout, &found, &cwd).map_err(|e| io("the parent's transcript", e))?;
        }
        super::actor::set_rewind_point(&run_dir, point).map_err(|e| io("the fork point", e))?;
    }
    let origin =
        ForkOrigin { parent_run_id: parent.run_id.clone(), at_turn, worktree: worktree.display().to_string(), kind: kind.to_owned() };
    spaces_store::fsutil::write_private(&run_dir.join(FORK_FILE), &serde_json::to_vec(&origin).unwrap_or_default())?;
    let mut options = parent.options.clone();
    options.label = Some(label.unwrap_or_else(|| format!("{} (fork)", parent.options.label.as_deref().unwrap_or(&parent.run_id))));
    options.cwd = cwd.strip_prefix(space_root).ok().map(|p| p.display().to_string());
    // A persistent home has one run at a time, and the worktree is the repository's checkout.
    (options.home, options.repo, options.branch) = (None, None, None);
    let conversation = if native { "native" } else { "fresh" };
    let row = RunRow {
        run_id: run_id.to_owned(),
        created_ms: spaces_store::now_ms(),
        status: Status::Idle,
        phase: Phase::Waiting,
        reason: format!("forked from run {} at turn {at_turn}; send a message to run its first turn", parent.run_id),
        result_text: None,
        session_id: point.filter(|_| native).map(|p| p.session),
        turns: 0,
        cwd: cwd.display().to_string(),
        options,
        notes: vec![format!(
            "forked from run {} at turn {at_turn}: worktree {} ({kind}), {conversation} session",
            parent.run_id,
            worktree.display()
        )],
        pgid: None,
        resets_at_ms: None,
        // At turn 0 the fork carries none of the parent's conversation nor work: its first
        // message is its first prompt (set when that turn starts). A fresh-session fork at a
        // later turn keeps the parent's: its worktree and summary carry that task.
        prompt_excerpt: if at_turn == 0 { None } else { parent.prompt_excerpt.clone() },
        ..parent.clone()
    };
    inner.store.run_insert(&row)?;
    Ok((kind, conversation, cwd))
}

/// Most a fork waits for the parent's transcript to hold the fork point (ms).
const TRANSCRIPT_WAIT_MS: u64 = 5_000;

/// Waits (at most [`TRANSCRIPT_WAIT_MS`]) until the parent's transcript `file` holds the fork
/// point `point` (Claude Code's message `uuid`, Codex's turn id). A turn ends on the CLI's last
/// stream line, and the CLI may write the end of its transcript just after: a fork made at once
/// would copy a transcript without its point, and the CLI would refuse to resume. Only the
/// part of the file written since the last look is searched (with the point's length of
/// overlap).
fn transcript_settled(file: &Path, point: &str) {
    use std::io::{Read, Seek};
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(TRANSCRIPT_WAIT_MS);
    let mut from = 0u64;
    while std::time::Instant::now() < deadline {
        let mut tail = Vec::new();
        let read = std::fs::File::open(file).and_then(|mut f| {
            f.seek(std::io::SeekFrom::Start(from))?;
            f.read_to_end(&mut tail)
        });
        if read.is_err() {
            return;
        }
        if memchr::memmem::find(&tail, point.as_bytes()).is_some() {
            return;
        }
        from = (from + tail.len() as u64).saturating_sub(point.len() as u64);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    tracing::warn!("the fork point {point} is not in {} after {TRANSCRIPT_WAIT_MS} ms; forking anyway", file.display());
}

/// `git` with what could run a program of the repository's config turned off: hooks
/// (`core.hooksPath`), the file-system monitor (`core.fsmonitor`). The repository is the
/// agent's to write, and this `git` runs as the daemon.
fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-C"]).arg(dir);
    cmd.stdin(std::process::Stdio::null());
    cmd
}

/// Make `worktree` (in the Space's worktrees folder, which must be a real directory, never a
/// symlink): a detached `git worktree` when `space_root` is a git repository's top, added
/// without a checkout (no filter or hook of the repository runs; the checkpoint fills it) and
/// kept out of `git status` through `.git/info/exclude`; else an empty folder. Returns `git`
/// or `copy`.
fn make_worktree(space_root: &Path, worktree: &Path) -> Result<&'static str> {
    let parent = worktree.parent().unwrap_or(space_root);
    match parent.symlink_metadata() {
        Ok(md) if md.is_dir() => {}
        Ok(_) => {
            return Err(refuse(
                ErrorCode::SymlinkRejected,
                format!("{} is not a directory (a symlink?): no fork is made through it", parent.display()),
            ))
        }
        Err(_) => std::fs::create_dir(parent).map_err(|e| io("the worktrees folder", e))?,
    }
    let git_dir = space_root.join(".git");
    if git_dir.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        let out = git(space_root).args(["worktree", "add", "--detach", "--no-checkout", "--quiet"]).arg(worktree).output();
        match out {
            Ok(o) if o.status.success() => {
                keep_out_of_status(&git_dir);
                return Ok("git");
            }
            Ok(o) => tracing::warn!("git worktree add failed ({}); the fork gets a plain copy", String::from_utf8_lossy(&o.stderr).trim()),
            Err(e) => tracing::warn!("git is not runnable ({e}); the fork gets a plain copy"),
        }
    }
    std::fs::create_dir(worktree).map_err(|e| io("the fork's worktree", e))?;
    Ok("copy")
}

/// Add the worktrees folder to `.git/info/exclude`, never through a symlink.
fn keep_out_of_status(git_dir: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let info = git_dir.join("info");
    if info.symlink_metadata().is_err() {
        let _ = std::fs::create_dir(&info);
    }
    if !info.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        return;
    }
    let exclude = info.join("exclude");
    let line = format!("/{}/", spaces_volumes::checkpoint::WORKTREES_DIR);
    if std::fs::read_to_string(&exclude).is_ok_and(|t| t.lines().any(|l| l.trim() == line)) {
        return;
    }
    let opened = std::fs::OpenOptions::new().create(true).append(true).custom_flags(nix::libc::O_NOFOLLOW).open(&exclude);
    if let Ok(mut f) = opened {
        let _ = writeln!(f, "{line}");
    }
}

/// After the checkpoint filled a git worktree: its index is the commit's tree (`read-tree`, no
/// filter runs), so `git status` there shows what differs from the commit.
fn index_from_head(worktree: &Path) {
    match git(worktree).args(["read-tree", "HEAD"]).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => tracing::warn!("git read-tree in {} failed: {}", worktree.display(), String::from_utf8_lossy(&o.stderr).trim()),
        Err(e) => tracing::warn!("git read-tree in {} failed: {e}", worktree.display()),
    }
}

/// Remove a fork's worktree: `git worktree remove --force` for a git one, then whatever is left.
pub(super) fn remove_worktree(space_root: &Path, worktree: &Path) {
    if space_root.join(".git").symlink_metadata().is_ok_and(|m| m.is_dir()) {
        let _ = git(space_root).args(["worktree", "remove", "--force"]).arg(worktree).output();
    }
    if let Err(e) = spaces_volumes::remove_tree(worktree) {
        tracing::warn!("the worktree {} was not removed: {e}", worktree.display());
    }
}

/// Copy the tree `from` into `to` (made): directories, regular files (with their modes) and
/// symlinks as symlinks, never followed. A missing `from` copies nothing.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let Ok(md) = from.symlink_metadata() else { return Ok(()) };
    if !md.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// `agent_merge` (see [`AgentMergeRequest`]). Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`,
/// `INVALID_ARGUMENT` (`run_id` is not a fork, or its parent is gone), `AGENT_BUSY` while
/// either run has a turn running or waiting.
pub(super) async fn merge(inner: &std::sync::Arc<Inner>, req: &AgentMergeRequest) -> Result<MergeReport> {
    let fork = registry::run_in_space(&inner.store, &req.space, &req.run_id)?;
    let Some(origin) = origin(inner, &fork.run_id) else {
        return Err(crate::error::invalid_field("run_id", format!("run {} is not a fork (agent_fork makes one)", fork.run_id)));
    };
    let Some(parent) = inner.store.run_get(&origin.parent_run_id)? else {
        return Err(crate::error::invalid_field(
            "run_id",
            format!("the parent of fork {}, run {}, was removed", fork.run_id, origin.parent_run_id),
        ));
    };
    // The parent's actor checks the parent (it runs the merge); the fork is checked here.
    if matches!(fork.status, Status::Running | Status::Queued | Status::QuotaWaiting) {
        return Err(refuse(
            ErrorCode::AgentBusy,
            format!(
                "run {} is {}: a merge waits for both runs to be idle; interrupt the turn or wait for its end",
                fork.run_id,
                fork.status.as_str()
            ),
        ));
    }
    // In the parent's actor: no turn of the parent starts while its folder is merged into.
    let (theirs, at_turn) = (PathBuf::from(&fork.cwd), origin.at_turn);
    let merged = super::actors::ask(inner, parent.clone(), |reply| super::mailbox::Cmd::Merge { theirs, at_turn, reply }).await?;
    let report = MergeReport {
        run_id: fork.run_id.clone(),
        parent_run_id: parent.run_id.clone(),
        merged: merged.conflicts.is_empty(),
        applied: merged.applied,
        conflicts: merged.conflicts.into_iter().map(|c| MergeConflict { path: c.path, why: c.why }).collect(),
    };
    let text = if report.merged {
        format!("merged fork {}: {} file(s) written or removed", fork.run_id, report.applied.len())
    } else {
        format!("merge of fork {} refused: {} conflicting file(s), nothing written", fork.run_id, report.conflicts.len())
    };
    if let Err(e) = inner.log.append(&parent.run_id, vec![EventDraft::new(parent.turns, EventKind::Notice).summary(text)]) {
        tracing::warn!("run {}: the merge notice was not stored: {e}", parent.run_id);
    }
    Ok(report)
}
