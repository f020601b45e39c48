//! `repo` and `branch`: the run's repository, cloned or checked out before its first turn, with
//! the `git` CLI (never a git library: the operator's git, its config and credential helpers).
//!
//! - **At `agent_start`** ([`check`], answered before anything is created): `repo` must be a
//!   repository elsewhere: an `https://`, `http://`, `ssh://` or `git://` URL, or scp-like
//!   `user@host:path` (never an option, never git's `<transport>::` helpers such as `ext::`,
//!   which run programs). A path on this host or a `file://` URL is taken only when the operator
//!   allows it ([`crate::config::Config::allow_local_repos`]): a caller must not have the daemon
//!   read another Space or its own state dir for it. Without that setting every `git` that
//!   reads the repository gets `-c protocol.file.allow=never` (and a clone `--no-local`), so no
//!   redirect or alternate reaches a local one either. Its clone target `<cwd>/<name>` (`name` from the URL's last segment, `.git` cut)
//!   must not exist or be an empty folder, and `git ls-remote` must read it and find `branch`
//!   on it. `branch` alone names a branch of the repository the working directory is in. Every
//!   refusal is `INVALID_ARGUMENT` naming `options.repo` or `options.branch`. The run's
//!   working directory becomes the clone target.
//! - **Before the first turn** ([`prepare`], phase `preparing`): `git clone --progress` into a
//!   temporary folder beside the target (`.<name>.clone-<run_id>`), renamed onto the target
//!   once complete, so a failed or interrupted clone leaves nothing half-cloned where the agent
//!   works; `branch` alone is `git checkout`. Progress goes out as `notice` events (at most one
//!   a second); a failure ends the turn before the agent starts, with git's message. A marker
//!   in the run directory (`prepared`) makes this happen once per run, not per turn.
//!
//! User names and passwords in a URL (`https://user:token@host/...`) never appear in messages.
//!
//! **Every `git` runs in the Space's sandbox** ([`Jail`], `spaces_os::sandbox`), never on the
//! host as the daemon: a repository's own config (`core.fsmonitor`, `core.hooksPath`, hooks in
//! `.git/hooks`) runs its programs where a run's agent would, with the Space writable and the
//! daemon's state, token and other Spaces out of reach (issue 28). A local repository the
//! operator allows (`allow_local_repos`) is mounted read-only for the clone.

use spaces_os::path_io::PathIo;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use spaces_harnesses::EventDraft;
use spaces_sdk::{bounded, ApiError, ErrorCode, EventKind, SpaceAgentOptions, SpaceRecord};
use spaces_store::runs::RunRow;
use tokio::io::AsyncReadExt;

use super::error::Error as StepError;
use super::shared::Inner;
use crate::error::{Error, Result};

/// Longest wait of `git ls-remote` at `agent_start`.
const LS_REMOTE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest `repo` taken, in bytes.
const MAX_URL_BYTES: usize = 4096;
/// Longest `branch` taken, in bytes (git's ref names stay far below).
const MAX_BRANCH_BYTES: usize = 255;
/// Longest clone or checkout.
const CLONE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Whether `options` ask for preparation.
pub(super) fn wanted(options: &SpaceAgentOptions) -> bool {
    options.repo.is_some() || options.branch.is_some()
}

/// Whether `run` still needs its preparation (asked for, not done yet).
pub(super) fn pending(inner: &Inner, run: &RunRow) -> bool {
    wanted(&run.options) && !marker(inner, run).exists()
}

fn marker(inner: &Inner, run: &RunRow) -> PathBuf {
    inner.cfg.run_dir(&run.run_id).join("prepared")
}

fn invalid(field: &str, message: String) -> Error {
    crate::error::invalid_field(field, message)
}

/// `url` with any `user:password@` cut: for messages, and as the stored options keep it.
pub(super) fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_owned(),
    }
}

/// The folder name of a clone of `url`: its last path segment without `.git`.
fn clone_name(url: &str) -> Option<String> {
    let trimmed = url.trim_end_matches('/');
    let last = trimmed.rsplit(['/', ':']).next()?;
    let name = last.strip_suffix(".git").unwrap_or(last);
    let ok = !name.is_empty() && name != "." && name != ".." && !name.starts_with('-') && !name.contains(['\\', '\0']);
    ok.then(|| name.to_owned())
}

/// Where a `repo` value points, as git reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RepoKind {
    /// Another host: `https`, `http`, `ssh`, `git` URL or scp-like `user@host:path`.
    Remote,
    /// This host: an absolute path or a `file://` URL.
    Local,
}

/// What `url` is to git, or why it is refused: an option, spaces, a `<transport>::` helper
/// (`ext::` runs a program), an unknown scheme, a relative path.
fn repo_kind(url: &str) -> std::result::Result<RepoKind, &'static str> {
    if url.is_empty() || url.starts_with('-') || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("is not a repository git can clone");
    }
    // git's `<transport>::<address>` (ext::, fd::, any remote helper): a program, not a place.
    if let Some((transport, _)) = url.split_once("::") {
        if !transport.is_empty() && transport.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) {
            return Err("uses a git transport helper (`<transport>::`, such as ext::), which runs programs on this host; give a URL");
        }
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        if rest.is_empty() {
            return Err("is not a repository git can clone");
        }
        return match scheme.to_ascii_lowercase().as_str() {
            "https" | "http" | "ssh" | "git" | "git+ssh" | "ssh+git" => Ok(RepoKind::Remote),
            "file" => Ok(RepoKind::Local),
            _ => Err("is not a repository git can clone"),
        };
    }
    if url.starts_with('/') {
        return Ok(RepoKind::Local);
    }
    // scp-like `[user@]host:path`: git reads it so only when no `/` comes before the first `:`.
    match url.split_once(':') {
        Some((host, path)) if !host.is_empty() && !host.contains('/') && !path.is_empty() => Ok(RepoKind::Remote),
        _ => Err("is not a repository git can clone"),
    }
}

/// The examples a refusal of `options.repo` gives.
const REPO_FORMS: &str = "a URL such as https://host/owner/repo.git, ssh://host/repo.git, git://host/repo, or user@host:path";

/// Where the daemon's `git` commands run: the sandbox of one Space (see the module doc), or the
/// host when the operator turned the sandbox off.
pub(super) struct Jail {
    /// The sandbox and the daemon's own command (which enters it); `None`: no sandbox.
    sandbox: Option<(spaces_os::sandbox::Policy, Vec<String>)>,
}

impl Jail {
    /// The sandbox of Space `space` (its root writable unless read-only, its network), with
    /// `readonly` paths added (an allowed local repository). Errors: `INTERNAL` when the Space
    /// registry cannot be read or the daemon cannot name its own command; `UNAUTHORIZED` for a
    /// `network: none` Space when the sandbox is off ([`crate::sandbox::policy`]).
    pub(super) fn for_space(inner: &Inner, space: &SpaceRecord, readonly: Vec<PathBuf>) -> Result<Jail> {
        let extra = crate::sandbox::Extra { readonly, ..Default::default() };
        let root = Path::new(&space.root);
        let Some(mut policy) = crate::sandbox::policy(&inner.store, root, space.read_only, space.network, extra)? else {
            return Ok(Jail { sandbox: None });
        };
        // A `git` whose daemon-side wait ends (time limit, the daemon exits) takes its sandbox along.
        policy.die_with_parent = true;
        let helper = crate::config::self_command().map_err(|e| {
            Error::Api(ApiError::new(ErrorCode::Internal, format!("cannot tell how to run spacesd for git's sandbox: {e}")))
        })?;
        Ok(Jail { sandbox: Some((policy, helper)) })
    }

    /// The Space of run `run` ([`Jail::for_space`]). Errors: the Space is gone, or those of
    /// [`Jail::for_space`].
    fn for_run(inner: &Inner, run: &RunRow, readonly: Vec<PathBuf>) -> std::result::Result<Jail, StepError> {
        let space = inner.store.space_get(&run.space)?.ok_or_else(|| StepError::SpaceGone(run.space.clone()))?;
        Ok(Jail::for_space(inner, &space, readonly)?)
    }

    /// `git` working in `cwd`: inside the sandbox when there is one. Errors: a path the
    /// sandbox cannot mount (not UTF-8); git never runs on the host instead.
    fn git(&self, cwd: &Path) -> std::io::Result<tokio::process::Command> {
        let argv = match &self.sandbox {
            Some((policy, helper)) => {
                spaces_os::sandbox::command(policy, helper, &["git".to_owned()], cwd).map_err(std::io::Error::other)?
            }
            None => vec!["git".to_owned()],
        };
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(cwd);
        Ok(cmd)
    }
}

/// A `git` command (in `jail`, working in `cwd`) with a small, predictable environment: no
/// prompt for credentials (a detached run has nobody to answer), messages in English.
fn git(jail: &Jail, cwd: &Path) -> std::io::Result<tokio::process::Command> {
    let mut cmd = jail.git(cwd)?;
    cmd.env_clear();
    for name in ["PATH", "HOME", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "XDG_CONFIG_HOME"] {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C").stdin(Stdio::null()).kill_on_drop(true);
    Ok(cmd)
}

/// Run `cmd` to its end within `limit`: (exit code, stderr).
async fn output(mut cmd: tokio::process::Command, limit: Duration) -> std::io::Result<(Option<i32>, String)> {
    let out = tokio::time::timeout(limit, cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {} s", limit.as_secs())))??;
    Ok((out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// The last non-empty line of git's stderr.
fn last_line(stderr: &str) -> String {
    stderr.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("git failed").to_owned()
}

/// `agent_start`'s checks of `repo`/`branch` (see the module doc); the run's working directory
/// (the clone target with `repo`, else `cwd`).
/// `allow_local`: [`crate::config::Config::allow_local_repos`].
/// `jail`: the Space's sandbox ([`Jail::for_space`]), where every `git` runs.
pub(super) async fn check(cwd: &Path, options: &SpaceAgentOptions, allow_local: bool, jail: &Jail) -> Result<PathBuf> {
    if let Some(url) = options.repo.as_deref().filter(|u| u.len() > MAX_URL_BYTES) {
        return Err(invalid("options.repo", format!("options.repo is {} bytes long; at most {MAX_URL_BYTES} are allowed", url.len())));
    }
    if let Some(branch) = options.branch.as_deref().filter(|b| b.len() > MAX_BRANCH_BYTES) {
        return Err(invalid(
            "options.branch",
            format!("options.branch is {} bytes long; at most {MAX_BRANCH_BYTES} are allowed", branch.len()),
        ));
    }
    if let Some(branch) = &options.branch {
        let (code, _) = output(git_args(jail, cwd, &["check-ref-format", "--branch", branch]).map_err(git_missing)?, LS_REMOTE_TIMEOUT)
            .await
            .map_err(git_missing)?;
        if branch.starts_with('-') || code != Some(0) {
            return Err(invalid("options.branch", format!("options.branch {:?} is not a valid branch name", bounded(branch))));
        }
    }
    let Some(url) = &options.repo else {
        let branch = options.branch.as_deref().unwrap_or_default();
        let mut cmd = git_args(jail, cwd, &["rev-parse", "--verify", "--quiet"]).map_err(git_missing)?;
        cmd.arg(format!("refs/heads/{branch}^{{commit}}")).current_dir(cwd);
        let local = output(cmd, LS_REMOTE_TIMEOUT).await.map_err(git_missing)?.0 == Some(0);
        let mut cmd = git_args(jail, cwd, &["rev-parse", "--verify", "--quiet"]).map_err(git_missing)?;
        cmd.arg(format!("refs/remotes/origin/{branch}^{{commit}}")).current_dir(cwd);
        let remote = output(cmd, LS_REMOTE_TIMEOUT).await.map_err(git_missing)?.0 == Some(0);
        if !local && !remote {
            return Err(invalid(
                "options.branch",
                format!(
                    "options.branch {:?}: the working directory {} has no such branch (or is not in a git repository); \
                     give options.repo to clone one",
                    bounded(branch),
                    bounded(&cwd.display().to_string())
                ),
            ));
        }
        return Ok(cwd.to_path_buf());
    };
    match repo_kind(url) {
        Err(why) => {
            let forms = if allow_local { format!("{REPO_FORMS}, or an absolute path") } else { REPO_FORMS.to_owned() };
            return Err(invalid("options.repo", format!("options.repo {:?} {why} ({forms})", bounded(&shown(url)))));
        }
        Ok(RepoKind::Local) if !allow_local => {
            return Err(invalid(
                "options.repo",
                format!(
                    "options.repo {:?} is a repository on this host (a path or file:// URL), which this daemon does not clone for \
                     a caller; give {REPO_FORMS} (the operator may allow local repositories: allow_local_repos)",
                    bounded(&shown(url))
                ),
            ));
        }
        Ok(_) => {}
    }
    let Some(name) = clone_name(url) else {
        return Err(invalid("options.repo", format!("options.repo {:?} names no folder to clone into", bounded(&shown(url)))));
    };
    let target = cwd.join(&name);
    if target.exists() && !empty_dir(&target) {
        return Err(invalid(
            "options.repo",
            format!(
                "the clone target {} is not empty: remove it, or start the run with another cwd (options.cwd), \
                 or without options.repo to work in it as it is",
                bounded(&target.display().to_string())
            ),
        ));
    }
    let mut cmd = git_reading(jail, cwd, allow_local, &["ls-remote", "--exit-code", "--heads", "--", url]).map_err(git_missing)?;
    if let Some(branch) = &options.branch {
        cmd.arg(format!("refs/heads/{branch}"));
    }
    let (code, stderr) = output(cmd, LS_REMOTE_TIMEOUT)
        .await
        .map_err(|e| invalid("options.repo", format!("options.repo {:?} cannot be read: {e}", bounded(&shown(url)))))?;
    match code {
        Some(0) => Ok(target),
        Some(2) if options.branch.is_some() => Err(invalid(
            "options.branch",
            format!(
                "options.branch {:?} is not a branch of {}",
                bounded(options.branch.as_deref().unwrap_or_default()),
                bounded(&shown(url))
            ),
        )),
        Some(2) => Ok(target), // an empty repository: it clones to an empty folder
        _ => Err(invalid(
            "options.repo",
            format!("options.repo {:?} cannot be read: {}", bounded(&shown(url)), bounded(&last_line(&stderr))),
        )),
    }
}

fn git_args(jail: &Jail, cwd: &Path, args: &[&str]) -> std::io::Result<tokio::process::Command> {
    let mut cmd = git(jail, cwd)?;
    cmd.args(args);
    Ok(cmd)
}

/// A `git` that reads a caller's repository: unless `allow_local`, the `file` protocol (paths,
/// `file://`, and so a local repository reached through a redirect or an alternate) is off,
/// and so is `ext` (programs as transports), whatever the host's git config says.
fn git_reading(jail: &Jail, cwd: &Path, allow_local: bool, args: &[&str]) -> std::io::Result<tokio::process::Command> {
    let mut cmd = git(jail, cwd)?;
    cmd.args(["-c", "protocol.ext.allow=never"]);
    if !allow_local {
        cmd.args(["-c", "protocol.file.allow=never"]);
    }
    cmd.args(args);
    Ok(cmd)
}

fn git_missing(e: std::io::Error) -> Error {
    Error::Api(ApiError::new(ErrorCode::Internal, format!("cannot run git on this host (is it installed and on PATH?): {e}")))
}

/// The local repository a clone of `url` reads (an allowed host path or `file://` URL), to be
/// mounted read-only in git's sandbox; nothing for a remote URL.
pub(super) fn local_source(url: &str, allow_local: bool) -> Vec<PathBuf> {
    if !allow_local || !matches!(repo_kind(url), Ok(RepoKind::Local)) {
        return Vec::new();
    }
    // `file://[user@]host/path`: the path starts at the first `/` after the authority.
    let path = match url.strip_prefix("file://") {
        Some(rest) => rest.find('/').map_or(rest, |i| &rest[i..]),
        None => url,
    };
    vec![PathBuf::from(path)]
}

fn empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).map(|mut d| d.next().is_none()).unwrap_or(false)
}

/// Clone or check out before the first turn (see the module doc), once per run. Progress and
/// the outcome are `notice` events of `turn`; an error is the reason the turn could not start:
/// the run's secrets unreadable, the Space gone, git missing or failing, the clone not movable.
pub(super) async fn prepare(inner: &Inner, run: &RunRow, turn: u32) -> std::result::Result<(), StepError> {
    let marker = marker(inner, run);
    let notice = |text: String| {
        if let Err(e) = inner.log.append_at(&run.run_id, vec![EventDraft::new(turn, EventKind::Notice).summary(text)], None) {
            tracing::error!("run {}: events not stored: {e}", run.run_id);
        }
    };
    let target = PathBuf::from(&run.cwd);
    match &run.options.repo {
        Some(url) => {
            // The stored URL has its credentials cut; the one given is among the run's secrets.
            // Unreadable secrets stop the clone: the stored URL would fail for want of them.
            let given = super::secrets::RunSecrets::load(&inner.cfg.run_dir(&run.run_id)).map_err(StepError::Secrets)?.repo_url;
            let allow_local = inner.cfg.allow_local_repos;
            let url = given.as_deref().unwrap_or(url);
            let jail = Jail::for_run(inner, run, local_source(url, allow_local))?;
            clone(url, run.options.branch.as_deref(), &target, (&run.run_id, &jail), allow_local, &notice).await?
        }
        None => {
            let branch = run.options.branch.as_deref().unwrap_or_default();
            notice(format!("checking out branch {branch} in {}", target.display()));
            let jail = Jail::for_run(inner, run, Vec::new())?;
            let run_git = |source| StepError::GitRun { what: "checkout", source };
            let mut cmd = git_args(&jail, &target, &["checkout", branch, "--"]).map_err(run_git)?;
            cmd.current_dir(&target);
            let (code, stderr) = output(cmd, CLONE_TIMEOUT).await.map_err(run_git)?;
            if code != Some(0) {
                return Err(StepError::GitFailed { what: format!("git checkout {branch}"), reason: last_line(&stderr) });
            }
            notice(format!("checked out branch {branch}"));
        }
    }
    std::fs::write(&marker, b"").map_err(PathIo::at("write", &marker))?;
    Ok(())
}

/// `git clone` of `url` into a temporary folder beside `target`, then renamed onto it.
async fn clone(
    url: &str,
    branch: Option<&str>,
    target: &Path,
    (run_id, jail): (&str, &Jail),
    allow_local: bool,
    notice: &impl Fn(String),
) -> std::result::Result<(), StepError> {
    let parent = target.parent().ok_or_else(|| StepError::NoParent(target.to_path_buf()))?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = parent.join(format!(".{name}.clone-{run_id}"));
    let _ = std::fs::remove_dir_all(&temp);
    notice(format!("cloning {}{} into {}", shown(url), branch.map(|b| format!(" (branch {b})")).unwrap_or_default(), target.display()));
    let mut cmd =
        git_reading(jail, parent, allow_local, &["clone", "--progress"]).map_err(|source| StepError::GitRun { what: "clone", source })?;
    if !allow_local {
        cmd.arg("--no-local");
    }
    if let Some(b) = branch {
        cmd.args(["--branch", b]);
    }
    cmd.arg("--").arg(url).arg(&temp);
    let outcome = tokio::time::timeout(CLONE_TIMEOUT, run_clone(cmd, notice)).await;
    let failed = match outcome {
        Ok(Ok((true, _))) => None,
        Ok(Ok((false, stderr))) => Some(StepError::GitFailed { what: format!("git clone of {}", shown(url)), reason: last_line(&stderr) }),
        Ok(Err(source)) => Some(StepError::GitRun { what: "clone", source }),
        Err(_) => Some(StepError::CloneTimeout { url: shown(url), minutes: CLONE_TIMEOUT.as_secs() / 60 }),
    };
    if let Some(why) = failed {
        let _ = std::fs::remove_dir_all(&temp);
        return Err(why);
    }
    // rename(2) replaces an empty folder; anything else there now (a race) is refused.
    if let Err(e) = std::fs::rename(&temp, target) {
        let _ = std::fs::remove_dir_all(&temp);
        return Err(StepError::CloneNotMoved { target: target.to_path_buf(), source: e });
    }
    let mut head =
        git_args(jail, target, &["rev-parse", "--abbrev-ref", "HEAD"]).map_err(|source| StepError::GitRun { what: "rev-parse", source })?;
    head.current_dir(target);
    let on =
        head.stdout(Stdio::piped()).output().await.ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default();
    notice(format!("cloned {} into {} (branch {on})", shown(url), target.display()));
    Ok(())
}

/// Run a clone, turning its progress lines (split on `\r` and `\n`) into notices at most once a
/// second; (succeeded, stderr).
async fn run_clone(mut cmd: tokio::process::Command, notice: &impl Fn(String)) -> std::io::Result<(bool, String)> {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let mut stderr = child.stderr.take().ok_or_else(|| std::io::Error::other("no stderr"))?;
    let (mut all, mut chunk) = (String::new(), [0u8; 4096]);
    let mut last_notice = Instant::now();
    loop {
        let n = stderr.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&chunk[..n]);
        all.push_str(&text);
        if last_notice.elapsed() >= Duration::from_secs(1) {
            if let Some(line) = text.split(['\r', '\n']).map(str::trim).rfind(|l| !l.is_empty()) {
                notice(format!("clone: {line}"));
                last_notice = Instant::now();
            }
        }
    }
    let status = child.wait().await?;
    Ok((status.success(), all))
}

#[cfg(test)]
mod tests {
    use super::super::secrets::userinfo;
    use super::*;

    #[test]
    fn clone_names_and_urls() {
        assert_eq!(clone_name("https://github.com/o/repo.git").as_deref(), Some("repo"));
        assert_eq!(clone_name("git@github.com:o/repo").as_deref(), Some("repo"));
        assert_eq!(clone_name("/srv/git/thing.git/").as_deref(), Some("thing"));
        assert_eq!(clone_name("https://host/.."), None);
        for remote in
            ["https://host/o/r.git", "http://host/r", "ssh://git@host/r.git", "git://host/r", "git@host:o/r", "host:r", "ssh://[::1]/r"]
        {
            assert_eq!(repo_kind(remote), Ok(RepoKind::Remote), "{remote}");
        }
        for local in ["/srv/r.git", "file:///srv/r.git", "FILE://localhost/srv/r"] {
            assert_eq!(repo_kind(local), Ok(RepoKind::Local), "{local}");
        }
        for bad in [
            "--upload-pack=x",
            "not a url",
            "relative/path",
            "./r:x",
            "https://",
            "ext::sh",
            "ext::sh%20-c%20touch",
            "fd::3",
            "gopher://h/r",
            "",
        ] {
            assert!(repo_kind(bad).is_err(), "{bad}");
        }
        assert!(repo_kind("ext::x").is_err_and(|why| why.contains("transport helper")));
        assert_eq!(shown("https://user:tok@host/o/r.git"), "https://host/o/r.git");
        assert_eq!(shown("git@host:o/r"), "git@host:o/r");
        assert_eq!(userinfo("https://user:tok@host/o/r.git"), Some("user:tok"));
        assert_eq!(userinfo("https://host/o/r@x"), None);
        assert_eq!(userinfo("git@host:o/r"), None);
    }
}
