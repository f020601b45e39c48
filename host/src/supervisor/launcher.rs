//! The launcher: everything between "this turn needs an agent process" and the events its output
//! becomes. On the way out: the CLI binary (the operator's, or the pinned install, installed at
//! most once at a time per harness), the harness's launch plan and the files it asks for, the
//! agent's clean environment carrying the run marker, and the start under a shim
//! ([`super::proc`]). On the way back: each journaled line redacted, appended to `output.log`,
//! kept in the stderr tail when it is stderr, and handed to the normalizer; records waiting
//! behind each other leave as one batch of events for the event log, with the journal offset
//! they reach (stored in the same transaction, so a restarted daemon resumes exactly there).
//!
//! It decides nothing about the run: phases, failures and what a process end means are the
//! actor's ([`super::actor`]).

use spaces_os::path_io::PathIo;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use spaces_harnesses::{EventDraft, Harness, LaunchContext, Normalizer, StdinMode};
use spaces_os::process::bulk;
use spaces_os::redact::Redactor;
use spaces_os::shim::{Followed, Record, ShimSpec, Stream, PROTOCOL};
use spaces_sdk::EventKind;
use spaces_store::runs::RunRow;
use spaces_store::JournalPos;
use tokio::sync::{mpsc, OwnedMutexGuard};

use super::ahead;
use super::error::{Error, Result};
use super::install;
use super::journal::Journal;
use super::marker::{turn_tag, RUN_ENV};
use super::mcp_servers;
use super::proc::{self, Adopted, LiveProc, ProcEvent};
use super::run_sandbox;
use super::secrets::RunSecrets;
use super::shared::Inner;

/// Most events stored in one transaction when output lines queue up.
const MAX_BATCH_EVENTS: usize = 128;
/// Most bytes of output lines in one batch (the line that reaches it is the last): a batch is
/// one writer transaction, and a quiet run's commit waits for the one in progress. Under CPU
/// contention a batch of 128 lines of 1.6 KB (about 200 KB) kept the writer long enough to put
/// the quiet line's p99 at 18 to 49 ms, against 6 to 8 ms with batches of 32 such lines (about
/// 50 KB of rows); 40 lines (64 KiB) read 22 ms (`scripts/bench load`, docs/benchmarks.md).
/// Short lines (a streamed answer's pieces) still batch by the hundred.
const MAX_BATCH_BYTES: usize = 48 * 1024;
/// Journal records waiting for the actor; with the follower's own queue, what one run holds in
/// memory of an agent's output it has not stored yet.
const EVENTS_QUEUE: usize = MAX_BATCH_EVENTS;
/// Lines of stderr kept for error reasons.
const STDERR_TAIL_LINES: usize = 20;
/// Longest output line kept whole, in bytes; a longer one becomes a `notice` saying where it
/// was cut and how long it was (case R37).
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// How long the shim waits for output EOF after the agent exited before ending what is left of
/// the tree (a tool left in the background may hold the pipes).
const DRAIN_AFTER_EXIT_MS: u64 = 2000;

/// Where the agent's binary stands before a turn.
pub enum Binary {
    /// It exists: run this path.
    Ready(PathBuf),
    /// The pinned install is missing. The harness's install lock is held until
    /// [`Launcher::install`] is done with it.
    Install(OwnedMutexGuard<()>),
}

/// A process ready to start: the harness's plan turned into a shim spec.
pub struct Launch {
    spec: ShimSpec,
    initial_stdin: Option<Vec<u8>>,
    /// Close stdin after `initial_stdin` ([`StdinMode::Once`]).
    close_stdin: bool,
    /// The sandbox the agent starts in ([`crate::sandbox`]); `None` when it is off.
    sandbox: Option<spaces_os::sandbox::Policy>,
    /// The paths the sandbox adds read-only besides the run's own (the harness's files outside
    /// the run directory, the agent's binary): the next run's are the same ([`super::ahead`]).
    readonly: Vec<PathBuf>,
    /// The run's Space.
    space: String,
}

/// How a process of the current generation ended, as its journal tells.
#[derive(Debug, Clone, Copy)]
pub enum ProcEnd {
    /// It exited (code or signal); its record ends at `pos`.
    Exited { code: Option<i32>, signal: Option<i32>, pos: JournalPos },
    /// Its shim went away before the process's exit was journaled (killed, or the host
    /// restarted): nothing more will come.
    Gone,
}

/// Journal records taken from the process channel in one go.
pub struct Batch {
    /// Events of the records, in order (already redacted).
    pub drafts: Vec<EventDraft>,
    /// At least one line arrived: the agent is not silent.
    pub saw_output: bool,
    /// The journal position just past the records whose events are in `drafts`: stored with
    /// them.
    pub pos: Option<JournalPos>,
    /// An end that followed the records; handle it after their events are stored.
    pub end: Option<ProcEnd>,
    /// The agent's stdout reached EOF ([`Record::Eof`]) among the records (case R42).
    pub stdout_closed: bool,
    /// The agent's output can no longer be recorded: its shim's journal took a
    /// [`Record::Fault`], or `output.log` hit a full disk. Why, naming the disk when it is
    /// full; the actor ends the process for it.
    pub fault: Option<String>,
}

/// Launches the agent processes of one run and reads their output.
pub struct Launcher {
    inner: Arc<Inner>,
    harness: &'static dyn Harness,
    /// The run's own environment and MCP servers (secrets included; never stored outside the
    /// run directory).
    secrets: RunSecrets,
    run_id: String,
    run_dir: PathBuf,
    /// The output journal and the stderr tail: what a batch of records changes besides the
    /// normalizer.
    lines: Lines,
    /// Generation of the latest process, so late events of an old one are recognised.
    gen: u64,
    /// Bounded ([`EVENTS_QUEUE`]): an actor behind its agent's output holds the journal
    /// follower back instead of buffering the output in memory.
    events_tx: mpsc::Sender<ProcEvent>,
    events_rx: mpsc::Receiver<ProcEvent>,
}

impl Launcher {
    /// The launcher of the run `run_id` with its environment and MCP servers, `secrets`.
    pub fn new(inner: Arc<Inner>, run_id: &str, harness: &'static dyn Harness, secrets: RunSecrets) -> Self {
        // Absolute: paths in the plan (home, MCP config) are read by an agent whose cwd is the Space.
        let run_dir = inner.cfg.run_dir(run_id);
        let run_dir = std::path::absolute(&run_dir).unwrap_or(run_dir);
        let (events_tx, events_rx) = mpsc::channel(EVENTS_QUEUE);
        // A generation whose process never stored anything (the daemon died as it started)
        // left its directory: a new process never reuses it either.
        let stored_gen = inner.store.journal_pos(run_id).ok().flatten().map_or(0, |p| p.gen);
        let inner_gen = stored_gen.max(proc::newest_gen(&run_dir).unwrap_or(0));
        Self {
            lines: Lines::new(&run_dir, inner.cfg.output_log_max_bytes),
            run_id: run_id.to_owned(),
            run_dir,
            inner,
            harness,
            secrets,
            // Generations only grow: a new process never reuses a stored journal position.
            gen: inner_gen,
            events_tx,
            events_rx,
        }
    }

    // ----- out: binary, plan, spawn -----

    /// Whether the agent's binary is there. Errors: an operator-set binary that does not exist.
    pub async fn binary(&self) -> Result<Binary> {
        let (source, exists) = install::locate(&self.inner.cfg, self.harness);
        if exists {
            return Ok(Binary::Ready(source.path().clone()));
        }
        if let install::Source::Operator(p) = source {
            return Err(Error::BinaryMissing(p));
        }
        // One lock per install: harnesses sharing a package share it (`install::install_id`).
        let lock = self.inner.install_lock(install::install_id(self.harness)).lock_owned().await;
        // Another run may have installed it while this one waited for the lock.
        let (source, exists) = install::locate(&self.inner.cfg, self.harness);
        if exists {
            return Ok(Binary::Ready(source.path().clone()));
        }
        Ok(Binary::Install(lock))
    }

    /// Install the pinned CLI while holding `_lock`; every progress line is an `install` event of
    /// the run `run_id`.
    pub async fn install(&self, run_id: &str, _lock: OwnedMutexGuard<()>) -> Result<PathBuf> {
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
    /// `max_budget_usd` is what the run's budget leaves in dollars, for a CLI with a limit of
    /// its own ([`LaunchContext::max_budget_usd`]); `traceparent`, the turn's span as the
    /// agent's `TRACEPARENT` (traces on, `crate::traces`).
    ///
    /// `norm` is told of the process ([`Normalizer::launched`]) before any of its output is fed:
    /// a conversation harness keeps what its handshake needs (cwd, model, the session to resume).
    #[allow(clippy::too_many_arguments)] // the turn's inputs, each from a different part of the actor
    pub fn plan(
        &self,
        run: &RunRow,
        turn: u32,
        text: &str,
        binary: &Path,
        norm: &mut dyn Normalizer,
        max_budget_usd: Option<f64>,
        traceparent: Option<&str>,
    ) -> Result<Launch> {
        let home = self.run_dir.join(run_sandbox::HOME);
        std::fs::create_dir_all(&home).map_err(PathIo::at("create the agent home", &home))?;
        let cwd = PathBuf::from(&run.cwd);
        // In a sandbox the state dir is not there: the `spaces` server reaches the daemon through
        // the run's own socket (`spacesd --state-dir /run/spaces`, see `super::api`), and the
        // agent's home is at the same path on every host (`/run/home`), which is what the
        // harness is told; the files it asks for there are written to the home on this host.
        // At the Landlock level nothing is mounted: the same two directories, where they are
        // (the operator's socket must not be the one the `spaces` server is given).
        let level = spaces_os::sandbox::level();
        let sandboxed = level != spaces_os::sandbox::Level::Off;
        // Likewise the run directory the harness writes its files to (Claude Code's MCP config)
        // is the run's API directory, at `/run/spaces`: no path given to the agent names the
        // state dir (at the Landlock level, only unreadable paths under it).
        let api_dir = super::api::dir(&self.run_dir);
        let (state_dir, seen_home, seen_run_dir) = match level {
            spaces_os::sandbox::Level::Bubblewrap => {
                let api = PathBuf::from(spaces_os::sandbox::API_DIR);
                (api.clone(), PathBuf::from(spaces_os::sandbox::HOME_DIR), api)
            }
            spaces_os::sandbox::Level::Landlock => (api_dir.clone(), home.clone(), api_dir.clone()),
            spaces_os::sandbox::Level::Off => (
                std::path::absolute(&self.inner.cfg.state_dir).unwrap_or_else(|_| self.inner.cfg.state_dir.clone()),
                home.clone(),
                self.run_dir.clone(),
            ),
        };
        let mut env = self.secrets.env.clone();
        if let Some(tp) = traceparent {
            env.insert("TRACEPARENT".to_owned(), tp.to_owned());
        }
        // A rewind's point, for this launch only (`actor/rewind.rs`).
        let resume_at = run.session_id.as_ref().and(super::actor::rewind_point(&self.run_dir));
        let servers =
            mcp_servers::for_launch(&self.secrets.mcp_servers, &run.options, &state_dir, &run.space, crate::config::self_command)?;
        let ctx = LaunchContext {
            run_id: &run.run_id,
            turn,
            prompt: text,
            session_id: run.session_id.as_deref(),
            binary,
            cwd: &cwd,
            home: &seen_home,
            run_dir: &seen_run_dir,
            model: run.options.model.as_deref(),
            base_url: run.options.base_url.as_deref(),
            env: &env,
            mcp_servers: &servers,
            max_budget_usd,
            resume_at: resume_at.as_deref(),
        };
        let plan = self.harness.launch(&ctx);
        norm.launched(&ctx);
        let on_host = |path: &Path| match (path.strip_prefix(&seen_home), path.strip_prefix(&seen_run_dir)) {
            (Ok(rest), _) => home.join(rest),
            (_, Ok(rest)) if sandboxed => api_dir.join(rest),
            _ => path.to_path_buf(),
        };
        for (path, content) in &plan.files {
            let path = on_host(path);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(PathIo::at("create", dir))?;
            }
            spaces_store::fsutil::write_private(&path, content.as_bytes()).map_err(PathIo::at("write", &path))?;
        }
        let mut env = BTreeMap::new();
        env.insert("PATH".to_owned(), std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()));
        env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
        env.extend(plan.env.clone());
        let spec = ShimSpec {
            protocol: PROTOCOL,
            gen: 0,
            turn,
            argv: plan.argv.clone(),
            env,
            cwd,
            markers: vec![(RUN_ENV.to_owned(), run.run_id.clone())],
            tag: turn_tag(&run.run_id, turn),
            stdin_pipe: plan.stdin != StdinMode::Null,
            max_line_bytes: MAX_LINE_BYTES,
            drain_ms: DRAIN_AFTER_EXIT_MS,
        };
        let files = plan.files.iter().map(|(p, _)| on_host(p)).filter(|p| !p.starts_with(&home) && !p.starts_with(&api_dir));
        let readonly: Vec<PathBuf> = files.chain([binary.to_path_buf()]).collect();
        let sandbox = run_sandbox::policy(&self.inner, &run.space, &self.run_dir, readonly.clone())?;
        let close_stdin = plan.stdin == StdinMode::Once;
        Ok(Launch { spec, initial_stdin: plan.initial_stdin.clone(), close_stdin, sandbox, readonly, space: run.space.clone() })
    }

    /// Start `launch` under a shim as the next process generation; its journal arrives through
    /// [`Self::next_event`]. A new process starts with an empty stderr tail.
    pub async fn spawn(&mut self, mut launch: Launch) -> Result<LiveProc> {
        self.gen += 1;
        launch.spec.gen = self.gen;
        self.open_api()?;
        // The prompt goes with the launch: the shim writes it (and closes stdin when the CLI
        // reads it to EOF), so a daemon that dies as the agent starts costs no prompt.
        let first = launch.initial_stdin.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        // An agent whose stdin is a pipe can start in a warm sandbox: the next run of this
        // Space and harness is made ready ahead, with one ([`super::ahead`]).
        let ahead = launch.spec.stdin_pipe && launch.sandbox.as_ref().is_some_and(|p| p.level == spaces_os::sandbox::Level::Bubblewrap);
        let live = proc::start(&self.run_dir, &launch.spec, launch.sandbox, (first, launch.close_stdin), self.events_tx.clone()).await?;
        self.lines.stderr_tail.clear();
        if ahead {
            ahead::prepare(self.inner.clone(), launch.space, self.harness.id(), launch.readonly);
        }
        Ok(live)
    }

    /// Re-adopt generation `gen` after a daemon restart, its events stored up to `offset`:
    /// the records already stored are replayed through `norm` (their events discarded: they are
    /// stored; what it would write to the agent, [`Normalizer::take_outgoing`], discarded too:
    /// the previous daemon wrote it) so it knows the turn in flight and its open tool calls; the
    /// rest arrives through [`Self::next_event`]. Returns the live process, or `None` when its exit was stored.
    pub async fn adopt(&mut self, gen: u64, offset: u64, redactor: &Redactor, norm: &mut dyn Normalizer) -> Result<Option<LiveProc>> {
        self.gen = gen;
        self.open_api()?;
        let Adopted { replay, live } = proc::adopt(&self.run_dir, gen, offset, self.events_tx.clone()).await?;
        for record in replay {
            match record {
                Record::Start { turn, .. } | Record::Turn { turn } => drop(norm.begin_turn(turn, "")),
                Record::Line { s, l, cut: None } => drop(self.lines.normalize(s, &redactor.apply(&l), norm)),
                _ => {}
            }
        }
        // What a conversation normalizer would answer to these lines was written by the daemon
        // that first read them: never again.
        drop(norm.take_outgoing());
        Ok(live)
    }

    /// The run's own API socket ([`super::api`]), open before its process starts.
    fn open_api(&self) -> Result<()> {
        let run = self.inner.store.run_get(&self.run_id)?;
        let space = run.map(|r| r.space).ok_or_else(|| Error::RunGone(self.run_id.clone()))?;
        self.inner.api.open(&self.run_id, &space, &self.run_dir)
    }

    // ----- back: output lines -----

    /// The next thing a process of this run did (never `None` while the launcher lives: it
    /// holds a sender itself).
    pub async fn next_event(&mut self) -> Option<ProcEvent> {
        self.events_rx.recv().await
    }

    /// `first` and every record already waiting behind it: lines are redacted, appended to
    /// `output.log` and normalized in order, so their events can be stored in one transaction
    /// (under load one commit carries many events; with a slow agent it is one line, so no
    /// latency is added). An exit, or the shim going away, ends the batch. Records of an older
    /// process generation are dropped (they can never reach the current turn).
    ///
    /// A large batch (a noisy agent's backlog) is processed on the bulk lane, below the
    /// daemon's priority, while the caller's runtime worker goes on with other tasks
    /// ([`spaces_os::process::bulk::spawn`]): the journal, the stderr tail and `norm`
    /// go there with it and come back. `norm` meanwhile holds a fresh normalizer of the
    /// harness, which nothing sees: the actor awaits this batch. A quiet run's line is
    /// processed here.
    pub async fn batch(&mut self, first: ProcEvent, turn: u32, redactor: &Arc<Redactor>, norm: &mut Box<dyn Normalizer>) -> Batch {
        let records = self.waiting(first);
        let gen = self.gen;
        if records.len() < bulk::BULK_MIN_ITEMS {
            return self.lines.process(records, gen, turn, redactor, norm.as_mut());
        }
        let mut lines = std::mem::replace(&mut self.lines, Lines::new(&self.run_dir, self.inner.cfg.output_log_max_bytes));
        let mut taken = std::mem::replace(norm, self.harness.normalizer());
        let redactor = redactor.clone();
        let (lines, taken, batch) = bulk::spawn(move || {
            let batch = lines.process(records, gen, turn, &redactor, taken.as_mut());
            (lines, taken, batch)
        })
        .await;
        self.lines = lines;
        *norm = taken;
        batch
    }

    /// `first` and the records already waiting behind it ([`take_batch`]).
    fn waiting(&mut self, first: ProcEvent) -> Vec<ProcEvent> {
        take_batch(first, &mut self.events_rx, self.gen)
    }

    /// Add the daemon's own `note` to the stderr tail, so the error reason of the process end
    /// that follows names it (the next stderr line trims the tail again).
    pub fn note_in_stderr_tail(&mut self, note: String) {
        self.lines.stderr_tail.push_back(note);
    }

    /// The stderr tail, one line each, for error reasons.
    pub fn stderr_tail(&self) -> String {
        self.lines.stderr_tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// What a batch of journal records writes besides events: the run's `output.log` and the
/// stderr tail kept for error reasons. Owned, so a large batch takes it to the bulk lane.
struct Lines {
    journal: Journal,
    stderr_tail: VecDeque<String>,
}

impl Lines {
    fn new(run_dir: &Path, max_bytes: u64) -> Self {
        Self { journal: Journal::new(run_dir, max_bytes), stderr_tail: VecDeque::new() }
    }

    /// The events of `records` (from [`Launcher::waiting`]; those of generations other than
    /// `gen` dropped), in order, their lines written out to `output.log`.
    fn process(&mut self, records: Vec<ProcEvent>, gen: u64, turn: u32, redactor: &Redactor, norm: &mut dyn Normalizer) -> Batch {
        let mut batch = self.events_of(records, gen, turn, redactor, norm);
        self.journal.flush();
        if let Some(full) = self.journal.take_fault() {
            batch.fault.get_or_insert(full);
        }
        batch
    }

    fn events_of(&mut self, records: Vec<ProcEvent>, current: u64, turn: u32, redactor: &Redactor, norm: &mut dyn Normalizer) -> Batch {
        let mut batch = Batch { drafts: Vec::new(), saw_output: false, pos: None, end: None, stdout_closed: false, fault: None };
        for ProcEvent { gen, what } in records {
            if gen == current {
                let pos = |offset| JournalPos { gen, offset };
                match what {
                    Followed::Record(Record::Line { s, l, cut }, offset) => {
                        batch.saw_output = true;
                        let drafts = match cut {
                            None => self.line(s, &l, redactor, norm),
                            Some(len) => self.cut_line(turn, s, &l, len, redactor),
                        };
                        batch.drafts.extend(drafts);
                        batch.pos = Some(pos(offset));
                    }
                    Followed::Record(Record::Note { text }, offset) => {
                        batch.drafts.push(EventDraft::new(turn, EventKind::Notice).summary(redactor.apply(&text)));
                        batch.pos = Some(pos(offset));
                    }
                    Followed::Record(Record::Fault { text }, offset) => {
                        let text = redactor.apply(&text);
                        batch.drafts.push(EventDraft::new(turn, EventKind::Notice).summary(text.clone()));
                        batch.fault.get_or_insert(text);
                        batch.pos = Some(pos(offset));
                    }
                    Followed::Record(Record::Eof { s }, offset) => {
                        batch.stdout_closed |= s == Stream::Out;
                        batch.pos = Some(pos(offset));
                    }
                    Followed::Record(Record::Exit { code, signal }, offset) => {
                        batch.end = Some(ProcEnd::Exited { code, signal, pos: pos(offset) });
                        return batch;
                    }
                    // Turn starts were applied when the actor started them; `Done` means the
                    // shim is finishing (the exit was handled before it).
                    Followed::Record(Record::Start { .. } | Record::Turn { .. } | Record::Done { .. }, offset) => {
                        batch.pos = Some(pos(offset));
                    }
                    Followed::Gone => {
                        batch.end = Some(ProcEnd::Gone);
                        return batch;
                    }
                }
            }
        }
        batch
    }

    /// One output line: append it to `output.log` and return its events.
    fn line(&mut self, stream: Stream, line: &str, redactor: &Redactor, norm: &mut dyn Normalizer) -> Vec<EventDraft> {
        let line = redactor.apply(line);
        self.journal.append(if stream == Stream::Err { "[stderr] " } else { "" }, &line);
        self.normalize(stream, &line, norm)
    }

    fn normalize(&mut self, stream: Stream, line: &str, norm: &mut dyn Normalizer) -> Vec<EventDraft> {
        match stream {
            Stream::Out => norm.stdout_line(line),
            Stream::Err => {
                self.stderr_tail.push_back(line.to_owned());
                while self.stderr_tail.len() > STDERR_TAIL_LINES {
                    self.stderr_tail.pop_front();
                }
                norm.stderr_line(line)
            }
        }
    }

    /// A line longer than [`MAX_LINE_BYTES`]: one `notice` saying how long it was and where it
    /// was cut, with its start (case R37). The normalizer never sees half a line.
    fn cut_line(&mut self, turn: u32, stream: Stream, start: &str, len: u64, redactor: &Redactor) -> Vec<EventDraft> {
        let start = redactor.apply(start);
        let name = if stream == Stream::Err { "stderr" } else { "stdout" };
        let summary = format!(
            "a {len}-byte line on {name} was longer than the {MAX_LINE_BYTES}-byte limit: it was cut after its first {} \
             bytes (kept in this event's text) and not interpreted",
            start.len()
        );
        self.journal.append(if stream == Stream::Err { "[stderr] " } else { "" }, &format!("{start} [cut: {len} bytes]"));
        vec![EventDraft::new(turn, EventKind::Notice).summary(summary).text(start)]
    }
}

/// `first` and the records already waiting in `rx` behind it, at most [`MAX_BATCH_EVENTS`] and
/// about [`MAX_BATCH_BYTES`] of lines (the line that reaches it is the last), up to and
/// including an end of generation `gen`'s process (what follows it waits for the next batch).
fn take_batch(first: ProcEvent, rx: &mut mpsc::Receiver<ProcEvent>, gen: u64) -> Vec<ProcEvent> {
    let bytes_of = |r: &ProcEvent| match &r.what {
        Followed::Record(Record::Line { l, .. }, _) => l.len(),
        _ => 0,
    };
    let mut bytes = bytes_of(&first);
    let mut records = vec![first];
    while records.len() < MAX_BATCH_EVENTS && bytes < MAX_BATCH_BYTES {
        let Some(last) = records.last() else { break };
        let ends = last.gen == gen && matches!(last.what, Followed::Record(Record::Exit { .. }, _) | Followed::Gone);
        if ends {
            break;
        }
        match rx.try_recv() {
            Ok(next) => {
                bytes += bytes_of(&next);
                records.push(next);
            }
            Err(_) => break,
        }
    }
    records
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod batch_tests {
    use super::*;

    fn line(len: usize, offset: u64) -> ProcEvent {
        ProcEvent { gen: 1, what: Followed::Record(Record::Line { s: Stream::Out, l: "x".repeat(len), cut: None }, offset) }
    }

    /// Every record queued, taken batch by batch: the sizes of the batches.
    fn batches(records: Vec<ProcEvent>) -> Vec<usize> {
        let (tx, mut rx) = mpsc::channel(records.len() + 1);
        for r in records {
            tx.try_send(r).unwrap();
        }
        let mut sizes = Vec::new();
        while let Ok(first) = rx.try_recv() {
            sizes.push(take_batch(first, &mut rx, 1).len());
        }
        sizes
    }

    #[test]
    fn long_lines_batch_by_bytes_short_ones_by_count_and_an_exit_ends_a_batch() {
        // 1.6 KB lines (a noisy agent's): a batch stops at the line that reaches 48 KiB.
        let per = MAX_BATCH_BYTES.div_ceil(1600);
        assert_eq!(batches((0..100).map(|i| line(1600, i)).collect()), vec![per, per, per, 100 - 3 * per]);
        // Short lines (a streamed answer's pieces): by the hundred.
        assert_eq!(batches((0..300).map(|i| line(40, i)).collect()), vec![MAX_BATCH_EVENTS, MAX_BATCH_EVENTS, 300 - 2 * MAX_BATCH_EVENTS]);
        // One line over the limit is a batch of its own; an exit of the current process ends one.
        let exit = ProcEvent { gen: 1, what: Followed::Record(Record::Exit { code: Some(0), signal: None }, 9) };
        assert_eq!(batches(vec![line(MAX_BATCH_BYTES + 1, 0), line(10, 1), exit, line(10, 2)]), vec![1, 2, 1]);
    }
}
