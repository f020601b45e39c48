//! Commands held by shims ([`spaces_os::shim`] in raw mode): started, followed, and re-adopted
//! after a daemon restart.
//!
//! Files: each command has a directory `<shims dir>/<process_id>` (0700) holding `handle.json`
//! (its [`HandleRecord`], written before the shim starts), the shim's `journal`, `ctl.sock`,
//! `shim.log` and the output segments `output.<k>` ([`spaces_os::shim::output`]; at most three
//! segments of [`segment_bytes`] each, however much the command prints). The directory is the
//! durable record of the handle: it is removed when the handle is evicted from the table (10
//! minutes after the exit, or the 256-exited cap), and the shim, seeing its journal gone, ends
//! what is left of its tree and exits.
//!
//! A follower task per handle ([`follow`]) reads the journal (exit, end of output, done) and
//! copies the output files into the handle's ring from any offset, so `read_process` answers
//! from the same absolute cursors before and after a restart. It is woken by the shim's `Watch`
//! stream and looks at least every [`POLL`].

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::handle::{Handle, Io};
use super::ExecSpec;
use crate::error::{Error, Result};
use spaces_os::shim::journal::JournalReader;
use spaces_os::shim::output::{extent, read_range, KEEP_SEGMENTS};
use spaces_os::shim::{Launch, OutputMode, RawRecord, ShimClient, ShimSpec, Watcher, PROTOCOL};

/// A follower looks at the files at least this often, even without a wake-up.
const POLL: Duration = Duration::from_secs(1);

/// How the host starts shims: `command shim DIR` (the daemon's own command line), with
/// environment `env`, each in its own directory under `dir`.
#[derive(Debug, Clone)]
pub struct ShimSetup {
    /// The daemon's own command line (`spacesd`, or a binding's interpreter and script).
    pub command: Vec<String>,
    /// The shims' environment (what finds and runs `command`; never the daemon's secrets).
    pub env: BTreeMap<String, String>,
    /// Where command directories are created (0700; created if missing). Its path plus
    /// `/proc-<uuid>/ctl.sock` must fit a Unix socket address (108 bytes).
    pub dir: PathBuf,
    /// The secret values the shims redact from commands' output ([`Launch::redact`]), asked
    /// for at each start (the host may learn more while it runs).
    pub secrets: fn() -> Vec<String>,
}

/// What `handle.json` holds: everything a restarted daemon needs to re-adopt the command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HandleRecord {
    pub process_id: String,
    pub owner: String,
    pub workspace_id: String,
    pub tag: String,
    pub tty: bool,
    /// Size of one output segment, in bytes.
    pub segment_bytes: u64,
    /// Wall-clock start, ms since the Unix epoch.
    pub started_at_ms: u64,
    /// The time limit in ms, if any (the rest of it applies after a restart).
    pub timeout_ms: Option<u64>,
}

/// Output segment size for a window of `retained` bytes: three segments keep at least the
/// window plus 3 bytes (case R36 needs those to find the window's first character).
pub(crate) fn segment_bytes(retained: usize) -> u64 {
    (retained as u64 + 4).max(64 * 1024)
}

const _: () = assert!(KEEP_SEGMENTS >= 3, "two full segments must hold the window plus 3 bytes");

/// Start `spec` (tag filled in) as process `id` under a new shim. Errors: `PROCESS_SPAWN_FAILED`
/// (the directory, the shim, or the program could not start: the reason says which).
pub(crate) async fn start(
    setup: &ShimSetup,
    id: &str,
    spec: &ExecSpec,
    retained: usize,
    drain: Duration,
) -> Result<(HandleRecord, ShimClient)> {
    let program = spec.argv.first().cloned().unwrap_or_default();
    let fail = |why: String| Error::SpawnFailed { program: program.clone(), source: std::io::Error::other(why) };
    let dir = setup.dir.join(id);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&setup.dir)
        .and_then(|()| std::fs::DirBuilder::new().mode(0o700).create(&dir))
        .map_err(|e| fail(format!("cannot create the command directory {}: {e}", dir.display())))?;
    let record = HandleRecord {
        process_id: id.to_owned(),
        owner: spec.owner.clone(),
        workspace_id: spec.workspace_id.clone(),
        tag: spec.tag.clone(),
        tty: spec.tty,
        segment_bytes: segment_bytes(retained),
        started_at_ms: crate::sqlite::now_ms(),
        timeout_ms: spec.timeout.map(|t| t.as_millis() as u64),
    };
    let written = serde_json::to_vec(&record).map_err(std::io::Error::other).and_then(|json| write_atomic(&dir.join("handle.json"), &json));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(fail(format!("cannot record the command in {}: {e}", dir.display())));
    }
    let launch = Launch {
        stdin_first: None,
        stdin_close: false,
        redact: (setup.secrets)(),
        cgroup: spaces_os::process::cgroup::plan(&spec.tag),
        nice: spaces_os::process::priority::agent_nice(),
        dir: None,
        sandbox: spec.sandbox.clone(),
        spec: ShimSpec {
            protocol: PROTOCOL,
            gen: 1,
            turn: 0,
            argv: spec.argv.clone(),
            cwd: spec.cwd.clone(),
            env: spec.env.clone(),
            markers: Vec::new(),
            tag: spec.tag.clone(),
            stdin_pipe: true,
            max_line_bytes: 0,
            drain_ms: drain.as_millis() as u64,
        },
        output: OutputMode::Raw {
            tty: spec.tty.then(|| spec.tty_size.unwrap_or(super::spawn::DEFAULT_TTY_SIZE)),
            segment_bytes: record.segment_bytes,
        },
    };
    match ShimClient::launch(&setup.command, setup.env.clone(), &dir, &launch).await {
        Ok(client) => Ok((record, client)),
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(fail(why.to_string()))
        }
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A command directory found at start-up.
pub(crate) struct Found {
    pub record: HandleRecord,
    pub dir: PathBuf,
    /// The process's pid from the journal's start record.
    pub pid: i32,
    /// The shim, if one answers.
    pub client: Option<ShimClient>,
}

/// Every command directory under `shims` that a shim started (`handle.json` and a journal with
/// its start record). Directories without them (a start cut short by a crash) are removed.
pub(crate) async fn find(shims: &Path) -> Vec<Found> {
    let Ok(entries) = std::fs::read_dir(shims) else { return Vec::new() };
    let mut found = Vec::new();
    for dir in entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        let record = std::fs::read(dir.join("handle.json")).ok().and_then(|json| serde_json::from_slice::<HandleRecord>(&json).ok());
        let pid = JournalReader::open(&dir, 0).ok().and_then(|mut r| {
            r.read_new_raw().ok()?.into_iter().find_map(|(rec, _)| match rec {
                RawRecord::Start { pid, .. } => Some(pid),
                _ => None,
            })
        });
        match (record, pid) {
            (Some(record), Some(pid)) => {
                let client = ShimClient::connect(&dir).await.ok();
                found.push(Found { record, dir, pid, client });
            }
            _ => {
                tracing::warn!(dir = %dir.display(), "removing a command directory whose shim never started");
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
    found
}

/// A handle for a command held by a shim.
pub(crate) fn handle(record: &HandleRecord, dir: PathBuf, pid: i32, client: Option<ShimClient>, retained: usize) -> Handle {
    let spec = ExecSpec {
        argv: Vec::new(),
        cwd: PathBuf::new(),
        env: BTreeMap::new(),
        tty: record.tty,
        tty_size: None,
        owner: record.owner.clone(),
        workspace_id: record.workspace_id.clone(),
        timeout: None,
        tag: record.tag.clone(),
        sandbox: None,
    };
    let io = Io::Shim { client: client.map(Arc::new), dir, tty: record.tty };
    Handle::new(record.process_id.clone(), &spec, pid, retained, io)
}

/// What is left of the time limit of `record`, if it has one.
pub(crate) fn time_left(record: &HandleRecord) -> Option<Duration> {
    let limit = record.timeout_ms?;
    let spent = crate::sqlite::now_ms().saturating_sub(record.started_at_ms);
    Some(Duration::from_millis(limit.saturating_sub(spent)))
}

/// Follow the shim of `handle` in `dir`: journal records into its exit and end of output,
/// output files into its ring (from offset 0: what the files no longer hold is reported lost).
/// When the shim is gone without journaling an exit (it was killed), the command's processes
/// are ended by tag and the exit reads `unknown`. Once everything is read and the shim's tree
/// is gone, the shim is told so (it exits); the directory stays until the handle is evicted.
pub(crate) async fn follow(handle: Arc<Handle>, dir: PathBuf, segment: u64, retained: usize, grace: Duration) {
    let mut watcher = Watcher::open(&dir).await;
    let mut journal = match JournalReader::open(&dir, 0) {
        Ok(r) => r,
        Err(_) => {
            handle.record_exit_parts(None, None);
            handle.finish(false);
            handle.mark_tree_done();
            return;
        }
    };
    let mut eof: Option<(u64, bool)> = None;
    let mut done = false;
    let step = |handle: &Handle, journal: &mut JournalReader, eof: &mut Option<(u64, bool)>, done: &mut bool| {
        for (record, _) in journal.read_new_raw().unwrap_or_default() {
            match record {
                RawRecord::Exit { code, signal } => handle.record_exit_parts(code, signal),
                RawRecord::Eof { total, cut } => *eof = Some((total, cut)),
                RawRecord::Done { .. } => {
                    *done = true;
                    handle.mark_tree_done();
                }
                RawRecord::Start { .. } => {}
            }
        }
        pull(handle, &dir, segment, retained, eof.map(|(total, _)| total));
        if let Some((total, cut)) = *eof {
            if handle.total() >= total && !handle.finished() {
                handle.finish(cut);
            }
        }
    };
    loop {
        step(&handle, &mut journal, &mut eof, &mut done);
        if done && handle.finished() && handle.exit().is_some() {
            if let Io::Shim { client: Some(shim), .. } = &handle.io {
                let _ = shim.ack(u64::MAX).await;
            }
            return;
        }
        let alive = match watcher.as_mut() {
            Some(w) => w.next(POLL).await,
            None => {
                // No watch stream (a shim that is gone): one last look is all there is.
                false
            }
        };
        if !alive {
            // Whatever the shim wrote is on disk now.
            step(&handle, &mut journal, &mut eof, &mut done);
            if handle.exit().is_none() {
                // The shim was killed under a running command: nobody holds it any more. Its
                // cgroup (if any) still holds every process of it, markers dropped or not.
                let tag = handle.tag.clone();
                let _ = tokio::task::spawn_blocking(move || spaces_os::process::cgroup::end(&tag)).await;
                let marker = spaces_os::process::tag_marker(&handle.tag);
                spaces_os::process::kill_tree(None, &marker, grace).await;
                handle.record_exit_parts(None, None);
            }
            if !handle.finished() {
                handle.finish(false);
            }
            handle.mark_tree_done();
            return;
        }
    }
}

/// One look at the files of the command in `dir` (journal and output), as the follower takes
/// it: at re-adoption, before the handle answers, so a cursor handed out before the restart is
/// never past what the handle holds.
pub(crate) fn catch_up(handle: &Handle, dir: &Path, segment: u64, retained: usize) {
    let Ok(mut journal) = JournalReader::open(dir, 0) else { return };
    let mut eof = None;
    for (record, _) in journal.read_new_raw().unwrap_or_default() {
        match record {
            RawRecord::Exit { code, signal } => handle.record_exit_parts(code, signal),
            RawRecord::Eof { total, cut } => eof = Some((total, cut)),
            RawRecord::Done { .. } => handle.mark_tree_done(),
            RawRecord::Start { .. } => {}
        }
    }
    pull(handle, dir, segment, retained, eof.map(|(total, _)| total));
    if let Some((total, cut)) = eof {
        if handle.total() >= total && !handle.finished() {
            handle.finish(cut);
        }
    }
}

/// Copy what the output files hold past the ring's total into the ring (not past `limit`, the
/// end the journal reported). When the ring is behind by more than the window (the daemon was
/// away while the command printed), it restarts at the window's start: the bytes between are
/// lost, as the ring would have dropped them.
fn pull(handle: &Handle, dir: &Path, segment: u64, retained: usize, limit: Option<u64>) {
    for _ in 0..8 {
        let Ok((first, end)) = extent(dir, segment) else { return };
        let end = limit.map_or(end, |l| end.min(l));
        let pos = handle.total();
        if end <= pos {
            return;
        }
        let floor = end.saturating_sub(retained as u64 + 3).max(first);
        let from = pos.max(floor);
        let mut bytes = Vec::new();
        match read_range(dir, segment, from, end, &mut bytes) {
            Ok(()) => {
                if from > pos {
                    handle.skip_to(from);
                }
                handle.push(&bytes);
                return;
            }
            // A segment was removed meanwhile: look at the files again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return,
        }
    }
}
