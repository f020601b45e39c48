//! One agent process of a run, held by its shim (`spaces_os::shim`): started
//! ([`start`]) or re-adopted after a daemon restart ([`adopt`]), its journal followed, and
//! everything it did delivered to the run actor as [`ProcEvent`]s on one channel, tagged with
//! the process generation so records of an old process are never mistaken for the current one's.
//!
//! Files: the shim of generation `g` lives in `<run dir>/shim-<g>/` (0700: its journal, control
//! socket and log). The directory is removed once the process's exit is stored and the shim is
//! gone ([`retire`]).

use spaces_os::path_io::PathIo;
use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use spaces_os::process::cgroup;
use spaces_os::shim::journal::JournalReader;
use spaces_os::shim::{follow, Followed, Launch, OutputMode, Record, ShimClient, ShimSpec, Stream};
use tokio::sync::mpsc;

use super::error::{Error, Result};

/// Something the process of generation `gen` did: a journal record (with the offset just past
/// it) or [`Followed::Gone`].
#[derive(Debug)]
pub struct ProcEvent {
    pub gen: u64,
    pub what: Followed,
}

/// Handle on a live process held by the actor (dropped when its exit is handled: a held
/// process has not exited).
pub struct LiveProc {
    pub gen: u64,
    pub pid: i32,
    /// Its shim; `None` when the shim was found gone at re-adoption (its journal is still read).
    pub shim: Option<Arc<ShimClient>>,
    /// Whether the agent's stdin is still open (long-lived agents).
    pub stdin_open: bool,
    /// The agent's stdout reached EOF ([`Record::Eof`]) while it may still run (case R42).
    pub out_closed: bool,
}

/// Environment variables a shim keeps from the daemon: what finds and runs the daemon's own
/// command (a binding's interpreter), never its secrets.
const SHIM_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "HOME", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NODE_PATH", "LD_LIBRARY_PATH"];

/// The environment of a shim (an agent's or a command's): the daemon's own `PATH`, `LANG`, `HOME`
/// and what finds a binding's interpreter (`PYTHONPATH`, `VIRTUAL_ENV`, `NODE_PATH`, ...), never
/// its secrets.
pub fn shim_env() -> BTreeMap<String, String> {
    SHIM_ENV.iter().filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v))).collect()
}

/// Shim launches in flight at once. A burst of a thousand starts (issue 30) started a thousand
/// shims together on two cores: each waited for its exec and its first answer behind all the
/// others, and some past the shim's answer timeout. Beyond this many, a start waits for its
/// turn before its shim is started, so every launch is quick and the burst as fast in all.
const LAUNCHES_AT_ONCE: usize = 16;
static LAUNCHES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(LAUNCHES_AT_ONCE);

/// Longest wait for an acknowledged shim to exit before its directory is removed anyway.
const SHIM_EXIT_WAIT: Duration = Duration::from_secs(5);

/// `<run_dir>/shim-<gen>`.
pub fn shim_dir(run_dir: &Path, gen: u64) -> PathBuf {
    run_dir.join(format!("shim-{gen}"))
}

/// Start `spec` under a new shim in `<run_dir>/shim-<gen>` and follow its journal into
/// `events`. Errors: the shim or the agent could not start (the reason names which).
/// `stdin`: what the shim writes to the agent's stdin first (its prompt), and whether it then
/// closes it.
pub async fn start(
    run_dir: &Path,
    spec: &ShimSpec,
    sandbox: Option<spaces_os::sandbox::Policy>,
    stdin: (Option<String>, bool),
    events: mpsc::Sender<ProcEvent>,
) -> Result<LiveProc> {
    let dir = shim_dir(run_dir, spec.gen);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(PathIo::at("create the shim directory", &dir))?;
    let command = crate::config::self_command().map_err(|source| Error::SelfCommand { purpose: "shim", source })?;
    let env = shim_env();
    // The run's secrets and the daemon's, for the shim to redact from the journal.
    // An unreadable `env.json` stops the start: an agent whose secrets cannot be redacted from
    // its journal must not run.
    let secrets = super::secrets::RunSecrets::load(run_dir).map_err(Error::Secrets)?;
    let redact = secrets.redactor().spellings().to_vec();
    let launch = Launch {
        spec: spec.clone(),
        output: OutputMode::Lines,
        redact,
        cgroup: cgroup::plan(&format!("{}/gen-{}", spec.tag, spec.gen)),
        nice: spaces_os::process::priority::agent_nice(),
        dir: None,
        sandbox,
        stdin_first: stdin.0,
        stdin_close: stdin.1,
    };
    let launching = LAUNCHES.acquire().await;
    let shim = match ShimClient::launch(&command, env, &dir, &launch).await {
        Ok(shim) => shim,
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(Error::Shim(why));
        }
    };
    drop(launching);
    let pid = shim.pid();
    forward(spec.gen, follow(dir, 0), events);
    Ok(LiveProc { gen: spec.gen, pid, shim: Some(Arc::new(shim)), stdin_open: spec.stdin_pipe && !stdin.1, out_closed: false })
}

/// What re-adoption found of generation `gen` after a daemon restart.
pub struct Adopted {
    /// The records already stored as events (from the journal's start up to the stored
    /// offset), for rebuilding the normalizer's state. Includes the exit when it was stored.
    pub replay: Vec<Record>,
    /// The process, followed from the stored offset; `None` when its exit was already stored
    /// (nothing is left to follow).
    pub live: Option<LiveProc>,
}

/// Re-adopt generation `gen` of a run whose events are stored up to journal offset `offset`
/// (0: nothing of this generation was stored yet, as when the daemon died in a run's first
/// moments): read back what was stored, reconnect to the shim if it still runs, and follow the
/// rest of the journal into `events` (ending with [`Followed::Gone`] if the shim died before it
/// finished). The journal's first record, [`Record::Start`], is always among the replayed ones:
/// the turn it starts was stored by the actor before the process started. Errors: the journal
/// cannot be read, or holds no start record (the shim never started its agent).
pub async fn adopt(run_dir: &Path, gen: u64, offset: u64, events: mpsc::Sender<ProcEvent>) -> Result<Adopted> {
    let dir = shim_dir(run_dir, gen);
    let mut reader = JournalReader::open(&dir, 0).map_err(PathIo::at("read the journal in", &dir))?;
    let mut replay = Vec::new();
    let mut pid = None;
    let mut exited = None;
    for (record, end) in reader.read_new().map_err(PathIo::at("read the journal in", &dir))? {
        let start = matches!(record, Record::Start { .. }) && replay.is_empty();
        if end > offset && !start {
            break;
        }
        match &record {
            Record::Start { pid: p, .. } => pid = Some(*p),
            Record::Exit { code, signal } => exited = Some((*code, *signal)),
            _ => {}
        }
        replay.push(record);
    }
    let Some(pid) = pid.filter(|p| *p > 0) else {
        return Err(Error::JournalWithoutStart(dir));
    };
    if exited.is_some() {
        retire(dir);
        return Ok(Adopted { replay, live: None });
    }
    let out_closed = replay.iter().any(|r| matches!(r, Record::Eof { s: Stream::Out }));
    // A shim that does not answer is gone: the journal is followed to its end all the same,
    // and the follower reports it gone ([`Followed::Gone`]), which ends the turn `crashed`.
    let shim = match ShimClient::connect(&dir).await {
        Ok(shim) => Some(Arc::new(shim)),
        Err(e) => {
            tracing::warn!("{}: the shim does not answer ({e}); its journal is read to its end", dir.display());
            None
        }
    };
    forward(gen, follow(dir, offset), events);
    Ok(Adopted { replay, live: Some(LiveProc { gen, pid, shim, stdin_open: true, out_closed }) })
}

/// The newest process generation with a shim directory in `run_dir` (`shim-<g>`), if any.
pub fn newest_gen(run_dir: &Path) -> Option<u64> {
    std::fs::read_dir(run_dir).ok()?.flatten().filter_map(|e| e.file_name().to_str()?.strip_prefix("shim-")?.parse().ok()).max()
}

/// The shims alive on this host whose directory is a run's under `runs_dir`
/// (`<runs_dir>/<run>/shim-<g>`: a shim works in its directory), as `(directory, pid)`. One
/// pass over `/proc`.
pub fn alive_shims(runs_dir: &Path) -> Vec<(PathBuf, i32)> {
    let Ok(runs_dir) = std::fs::canonicalize(runs_dir) else { return Vec::new() };
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
            let run = cwd.parent()?;
            let is_shim_dir = cwd.file_name()?.to_str()?.starts_with("shim-") && run.parent()? == runs_dir;
            is_shim_dir.then_some((cwd, pid))
        })
        .collect()
}

/// End the shim `pid` in `dir`, whose run the daemon does not adopt: everything it holds is
/// ended and the whole journal acknowledged, so it exits (never left waiting for a daemon);
/// a shim that does not answer is killed with what is in its cgroup. Bounded by the stop's
/// grace and [`SHIM_EXIT_WAIT`].
pub async fn end_orphan(dir: &Path, pid: i32, grace: Duration) {
    if let Ok(shim) = ShimClient::connect(dir).await {
        // A refused stop (nothing left running) is fine: the ack lets the shim exit.
        if let Err(e) = shim.stop(grace).await {
            tracing::info!("{}: leftover shim {pid} refused its stop: {e}", dir.display());
        }
        if let Err(e) = shim.ack(u64::MAX).await {
            tracing::warn!("{}: leftover shim {pid} did not take its ack ({e}); it is killed if it stays", dir.display());
        }
        ShimClient::wait_gone(dir, SHIM_EXIT_WAIT).await;
    }
    // Still there (it did not answer, or did not exit): the same process, by its directory.
    if std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}

/// Forward the follower's records as [`ProcEvent`]s of generation `gen`.
fn forward(gen: u64, mut followed: mpsc::Receiver<Followed>, events: mpsc::Sender<ProcEvent>) {
    tokio::spawn(async move {
        while let Some(what) = followed.recv().await {
            if events.send(ProcEvent { gen, what }).await.is_err() {
                return;
            }
        }
    });
}

/// The exit of the process in `dir` is stored: tell its shim (which then exits once the tree is
/// gone) and remove the directory when the shim has gone, in the background.
pub fn retire(dir: PathBuf) {
    tokio::spawn(async move {
        if let Ok(shim) = ShimClient::connect(&dir).await {
            let _ = shim.ack(u64::MAX).await;
            // The shim exits within its leftover grace; give it a bounded time.
            ShimClient::wait_gone(&dir, SHIM_EXIT_WAIT).await;
        }
        // Off the runtime's workers: a journal's file system frees its blocks here.
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await;
    });
}
