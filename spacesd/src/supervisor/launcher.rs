//! The launcher: everything between "this turn needs an agent process" and the events its output
//! becomes. On the way out: the CLI binary (the operator's, or the pinned install, installed at
//! most once at a time per harness), the harness's launch plan and the files it asks for, the
//! agent's clean environment carrying the run marker, and the detached spawn ([`super::proc`]).
//! On the way back: each output line redacted, journaled (`output.log`), kept in the stderr tail
//! when it is stderr, and handed to the normalizer; lines waiting behind each other leave as one
//! batch of events for the event log.
//!
//! It decides nothing about the run: phases, failures and what a process end means are the
//! actor's ([`super::actor`]).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use spaces_codespace::process::{SpawnSpec, StdinSpec, StdioSpec};
use spaces_harnesses::{EventDraft, Harness, LaunchContext, Normalizer, Redactor, StdinMode};
use spaces_sdk::EventKind;
use tokio::sync::{mpsc, OwnedMutexGuard};

use super::install;
use super::journal::Journal;
use super::marker::{turn_tag, RUN_ENV};
use super::mcp_servers;
use super::proc::{self, LiveProc, ProcEnd, ProcEvent, Stream};
use super::secrets::RunSecrets;
use super::Inner;
use crate::store::runs::RunRow;

/// Most events stored in one transaction when output lines queue up.
const MAX_BATCH_EVENTS: usize = 512;
/// Lines of stderr kept for error reasons.
const STDERR_TAIL_LINES: usize = 20;

/// Where the agent's binary stands before a turn.
pub enum Binary {
    /// It exists: run this path.
    Ready(PathBuf),
    /// The pinned install is missing. The harness's install lock is held until
    /// [`Launcher::install`] is done with it.
    Install(OwnedMutexGuard<()>),
}

/// A process ready to spawn: the harness's plan turned into a spawn spec.
pub struct Launch {
    spec: SpawnSpec,
    initial_stdin: Option<Vec<u8>>,
}

/// Output taken from the process channel in one go.
pub struct Batch {
    /// Events of the lines, in order (already redacted).
    pub drafts: Vec<EventDraft>,
    /// At least one line arrived: the agent is not silent.
    pub saw_output: bool,
    /// An EOF or exit of process generation `.0` that followed the lines; handle it after their
    /// events are stored.
    pub end: Option<(u64, ProcEnd)>,
}

/// Launches the agent processes of one run and reads their output.
pub struct Launcher {
    inner: Arc<Inner>,
    harness: &'static dyn Harness,
    /// The run's own environment and MCP servers (secrets included; never stored outside the
    /// run directory).
    secrets: RunSecrets,
    run_dir: PathBuf,
    journal: Journal,
    stderr_tail: VecDeque<String>,
    /// Generation of the latest process, so late events of an old one are recognised.
    gen: u64,
    events_tx: mpsc::UnboundedSender<ProcEvent>,
    events_rx: mpsc::UnboundedReceiver<ProcEvent>,
}

impl Launcher {
    /// The launcher of the run `run_id` with its environment and MCP servers, `secrets`.
    pub fn new(inner: Arc<Inner>, run_id: &str, harness: &'static dyn Harness, secrets: RunSecrets) -> Self {
        // Absolute: paths in the plan (home, MCP config) are read by an agent whose cwd is the Space.
        let run_dir = inner.cfg.run_dir(run_id);
        let run_dir = std::path::absolute(&run_dir).unwrap_or(run_dir);
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        Self {
            journal: Journal::new(&run_dir),
            run_dir,
            inner,
            harness,
            secrets,
            stderr_tail: VecDeque::new(),
            gen: 0,
            events_tx,
            events_rx,
        }
    }

    // ----- out: binary, plan, spawn -----

    /// Whether the agent's binary is there. Errors: an operator-set binary that does not exist.
    pub async fn binary(&self) -> Result<Binary, String> {
        let (source, exists) = install::locate(&self.inner.cfg, self.harness);
        if exists {
            return Ok(Binary::Ready(source.path().clone()));
        }
        if let install::Source::Operator(p) = source {
            return Err(format!("the operator-set binary {} does not exist", p.display()));
        }
        let lock = self.inner.install_lock(self.harness.id()).lock_owned().await;
        // Another run may have installed it while this one waited for the lock.
        let (source, exists) = install::locate(&self.inner.cfg, self.harness);
        if exists {
            return Ok(Binary::Ready(source.path().clone()));
        }
        Ok(Binary::Install(lock))
    }

    /// Install the pinned CLI while holding `_lock`; every progress line is an `install` event of
    /// the run `run_id`.
    pub async fn install(&self, run_id: &str, _lock: OwnedMutexGuard<()>) -> Result<PathBuf, String> {
        let run_id = run_id.to_owned();
        let inner = self.inner.clone();
        let cfg = self.inner.cfg.clone();
        install::install(&cfg, self.harness, |line| {
            let draft = EventDraft::new(0, EventKind::Install).summary(&line).text(line);
            if let Err(e) = inner.log.append(&run_id, vec![draft]) {
                tracing::warn!("run {run_id}: install event lost: {e}");
            }
        })
        .await
    }

    /// Turn `turn` of `run` with the user's `text`, run by `binary`: the agent's home, the
    /// run's MCP servers (the caller's, and `spaces` when `space_tools` is on), the harness's
    /// plan and its files written, the clean environment with the run marker.
    pub fn plan(&self, run: &RunRow, turn: u32, text: &str, binary: &Path) -> Result<Launch, String> {
        let home = self.run_dir.join("home");
        std::fs::create_dir_all(&home).map_err(|e| format!("cannot create the agent home {}: {e}", home.display()))?;
        let cwd = PathBuf::from(&run.cwd);
        let state_dir = std::path::absolute(&self.inner.cfg.state_dir).unwrap_or_else(|_| self.inner.cfg.state_dir.clone());
        let servers = mcp_servers::for_launch(
            &self.secrets.mcp_servers,
            &run.options,
            &state_dir,
            &run.space,
            mcp_servers::self_command,
        )?;
        let ctx = LaunchContext {
            run_id: &run.run_id,
            turn,
            prompt: text,
            session_id: run.session_id.as_deref(),
            binary,
            cwd: &cwd,
            home: &home,
            run_dir: &self.run_dir,
            model: run.options.model.as_deref(),
            base_url: run.options.base_url.as_deref(),
            env: &self.secrets.env,
            mcp_servers: &servers,
        };
        let plan = self.harness.launch(&ctx);
        for (path, content) in &plan.files {
            crate::fsutil::write_private(path, content.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        let mut env = BTreeMap::new();
        env.insert("PATH".to_owned(), std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()));
        env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
        env.extend(plan.env.clone());
        let stdin = match plan.stdin {
            StdinMode::Null => StdinSpec::Null,
            StdinMode::Pipe => StdinSpec::Pipe,
        };
        let spec = SpawnSpec {
            argv: plan.argv.clone(),
            env,
            cwd,
            markers: vec![(RUN_ENV.to_owned(), run.run_id.clone())],
            tag: turn_tag(&run.run_id, turn),
            stdio: StdioSpec::Pipes { stdin },
        };
        Ok(Launch { spec, initial_stdin: plan.initial_stdin.clone() })
    }

    /// Spawn `launch` as the next process generation; its output arrives through
    /// [`Self::next_event`]. A new process starts with an empty stderr tail.
    pub fn spawn(&mut self, launch: Launch) -> Result<LiveProc, String> {
        self.gen += 1;
        let live = proc::start(&launch.spec, self.gen, launch.initial_stdin, self.events_tx.clone()).map_err(|e| e.to_string())?;
        self.stderr_tail.clear();
        Ok(live)
    }

    // ----- back: output lines -----

    /// The next thing a process of this run did (never `None` while the launcher lives: it
    /// holds a sender itself).
    pub async fn next_event(&mut self) -> Option<ProcEvent> {
        self.events_rx.recv().await
    }

    /// `first` and every output line already waiting behind it: lines are redacted, journaled
    /// and normalized in order, so their events can be stored in one transaction (under load one
    /// commit carries many events; with a slow agent it is one line, so no latency is added). An
    /// EOF or exit ends the batch.
    pub fn batch(&mut self, first: ProcEvent, redactor: &Redactor, norm: &mut dyn Normalizer) -> Batch {
        let mut batch = Batch { drafts: Vec::new(), saw_output: false, end: None };
        let mut next = Some(first);
        while let Some(ev) = next.take() {
            match ev {
                ProcEvent::Line { stream, line } => {
                    batch.saw_output = true;
                    batch.drafts.extend(self.line(stream, &line, redactor, norm));
                    if batch.drafts.len() < MAX_BATCH_EVENTS {
                        next = self.events_rx.try_recv().ok();
                    }
                }
                ProcEvent::End { gen, end } => batch.end = Some((gen, end)),
            }
        }
        batch
    }

    /// One output line: journal it and return its events.
    fn line(&mut self, stream: Stream, line: &str, redactor: &Redactor, norm: &mut dyn Normalizer) -> Vec<EventDraft> {
        let line = redactor.apply(line);
        self.journal.append(if stream == Stream::Stderr { "[stderr] " } else { "" }, &line);
        match stream {
            Stream::Stdout => norm.stdout_line(&line),
            Stream::Stderr => {
                self.stderr_tail.push_back(line.clone());
                while self.stderr_tail.len() > STDERR_TAIL_LINES {
                    self.stderr_tail.pop_front();
                }
                norm.stderr_line(&line)
            }
        }
    }

    /// Add the daemon's own `note` to the stderr tail, so the error reason of the process end
    /// that follows names it (the next stderr line trims the tail again).
    pub fn note_in_stderr_tail(&mut self, note: String) {
        self.stderr_tail.push_back(note);
    }

    /// The stderr tail, one line each, for error reasons.
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}
