//! The run supervisor: validates requests, records runs, and routes every later action to the
//! run's actor ([`actor`]), which owns the agent process and the run's state machine.
//!
//! Actors are started on `agent_start` and retire when their run has no process, no turn in
//! flight and nothing queued; a later message, interrupt or stop revives one from the stored run
//! (this is also how runs continue after a daemon restart: [`Supervisor::recover`] marks turns
//! that were cut off as `crashed`, and the next follow-up resumes the CLI's session).

mod actor;
mod install;
mod journal;
mod marker;
mod proc;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spaces_codespace::process::{alive_with_env, kill_tree};
use spaces_harnesses::{EventDraft, Harness};
use spaces_sdk::event::{EVENTS_MAX_DEFAULT, EVENTS_MAX_LIMIT, EVENTS_WAIT_MS_LIMIT};
use spaces_sdk::{
    ActionReport, AgentStartReport, AgentStartRequest, Capabilities, ErrorCode, EventKind,
    EventsPage, HarnessCapabilities, Phase, RunStatus, SpaceRecord, Status, StopReason,
};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::error::{refuse, Error, Result};
use crate::eventlog::EventLog;
use crate::store::runs::RunRow;
use crate::store::{now_ms, Store};
use actor::{Actor, Cmd};
use marker::{run_marker, turn_tag, RUN_ENV};

pub use install::{install as install_harness, locate as locate_harness, Source};
pub use journal::DEFAULT_TAIL_LINES;

/// Protocol name reported by `agent_capabilities`.
pub const PROTOCOL: &str = "spaces/1";

/// Shared state of the supervisor and its actors.
pub struct Inner {
    pub cfg: Arc<Config>,
    pub store: Arc<Store>,
    pub log: Arc<EventLog>,
    actors: Mutex<HashMap<String, mpsc::UnboundedSender<Cmd>>>,
    installs: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Inner {
    /// Remove the actor of `run_id` if no command is waiting for it. Commands are sent while
    /// holding the same lock, so none can slip in between this check and the removal.
    fn retire(&self, run_id: &str, cmds: &mut mpsc::UnboundedReceiver<Cmd>) -> bool {
        let mut map = self.actors.lock().unwrap_or_else(|p| p.into_inner());
        if cmds.is_empty() {
            map.remove(run_id);
            true
        } else {
            false
        }
    }

    /// The lock serializing installs of one harness.
    fn install_lock(&self, harness_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.installs.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(harness_id.to_owned()).or_default().clone()
    }
}

/// The supervisor of every run on this host.
#[derive(Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

impl Supervisor {
    /// A supervisor over `store`, with `cfg`.
    pub fn new(cfg: Config, store: Arc<Store>) -> Self {
        let log = Arc::new(EventLog::new(store.clone()));
        Self {
            inner: Arc::new(Inner {
                cfg: Arc::new(cfg),
                store,
                log,
                actors: Mutex::new(HashMap::new()),
                installs: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }


    // ----- Spaces -----

    /// Register a Space. Registering the same name again with the same root and policy is a
    /// no-op; a different root or policy needs `replace` (it changes what running agents and
    /// tools may do). Errors: `INVALID_ARGUMENT` for an empty or unsafe name, a root that is not
    /// an existing directory, or a changed registration without `replace`.
    pub fn space_add(&self, space: &SpaceRecord, replace: bool) -> Result<SpaceRecord> {
        let name_ok = !space.name.is_empty()
            && space.name.len() <= 64
            && space.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !name_ok {
            return Err(refuse(
                ErrorCode::InvalidArgument,
                format!("invalid Space name {:?}: use 1-64 letters, digits, '-', '_' or '.'", space.name),
            ));
        }
        let root = std::fs::canonicalize(&space.root).map_err(|e| {
            refuse(ErrorCode::InvalidArgument, format!("Space root {:?} is not usable: {e}; give an existing directory", space.root))
        })?;
        if !root.is_dir() {
            return Err(refuse(ErrorCode::InvalidArgument, format!("Space root {} is not a directory", root.display())));
        }
        let record = SpaceRecord { name: space.name.clone(), root: root.display().to_string(), read_only: space.read_only, approvals: space.approvals };
        if let Some(existing) = self.inner.store.space_get(&record.name)? {
            if existing == record {
                return Ok(record);
            }
            if !replace {
                return Err(refuse(
                    ErrorCode::InvalidArgument,
                    format!(
                        "Space {:?} is already registered as {} (read_only: {}, approvals: {}); \
                         to change it, add it again with --replace (HTTP: ?replace=true)",
                        existing.name,
                        existing.root,
                        existing.read_only,
                        existing.approvals.as_str()
                    ),
                ));
            }
        }
        self.inner.store.space_put(&record)?;
        Ok(record)
    }

    /// Every registered Space.
    pub fn space_list(&self) -> Result<Vec<SpaceRecord>> {
        self.inner.store.space_list()
    }

    fn space(&self, name: &str) -> Result<SpaceRecord> {
        self.inner.store.space_get(name)?.ok_or_else(|| {
            refuse(ErrorCode::WorkspaceNotFound, format!("no Space named {name:?} on this host; register it with `spacesd space add {name} PATH`"))
        })
    }

    fn run_in_space(&self, space: &str, run_id: &str) -> Result<RunRow> {
        self.space(space)?;
        match self.inner.store.run_get(run_id)? {
            Some(run) if run.space == space => Ok(run),
            _ => Err(refuse(ErrorCode::RunNotFound, format!("no run {run_id:?} in Space {space:?}; list runs with `spacesd agent list --space {space}`"))),
        }
    }

    // ----- agent operations -----

    /// `agent_start`: validate, record the run, launch its actor, and answer at once.
    /// Errors: `WORKSPACE_NOT_FOUND`, `HARNESS_UNAVAILABLE` (unknown agent), `INVALID_ARGUMENT`
    /// (empty prompt, cwd outside the Space, bad env names). Nothing is created on error.
    pub fn agent_start(&self, space_name: &str, req: &AgentStartRequest) -> Result<AgentStartReport> {
        let space = self.space(space_name)?;
        let harness = spaces_harnesses::by_id(&req.agent).ok_or_else(|| {
            let known: Vec<&str> = spaces_harnesses::all().iter().map(|h| h.id()).collect();
            refuse(ErrorCode::HarnessUnavailable, format!("unknown agent {:?}; this host has: {}", req.agent, known.join(", ")))
        })?;
        if space.read_only {
            return Err(refuse(
                ErrorCode::InvalidArgument,
                format!("Space {:?} is read-only: agents run commands and write files, so they cannot run in it; register a writable Space", space.name),
            ));
        }
        if req.prompt.trim().is_empty() {
            return Err(refuse(ErrorCode::InvalidArgument, "prompt is empty; give the first turn's text"));
        }
        let mut options = req.options.clone().unwrap_or_default();
        let cwd = resolve_cwd(Path::new(&space.root), options.cwd.as_deref())?;
        for name in options.env.keys().chain(options.env_from_host.iter()) {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(refuse(ErrorCode::InvalidArgument, format!("invalid environment variable name {name:?}")));
            }
        }
        let mut notes = Vec::new();
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for name in &options.env_from_host {
            if !self.inner.cfg.forwardable_env.contains(name) {
                notes.push(format!("{name} was not forwarded: it is not on this host's forwardable list ({})", self.inner.cfg.forwardable_env.join(", ")));
            } else {
                match std::env::var(name) {
                    Ok(v) => {
                        env.insert(name.clone(), v);
                    }
                    Err(_) => notes.push(format!("{name} was not forwarded: it is not set on this host")),
                }
            }
        }
        env.extend(options.env.clone());
        if req.show == Some(true) {
            notes.push("show was ignored: PTY viewing is not available on this host yet; follow the run with `spacesd agent events --follow`".into());
        }
        if options.repo.is_some() || options.branch.is_some() {
            notes.push("repo/branch were ignored: cloning before the first turn is not available on this host yet".into());
        }
        if options.home.is_some() {
            notes.push("home was ignored: persistent agent homes (volumes) are not available on this host yet".into());
        }
        let run_id = format!("run-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let run_dir = self.inner.cfg.run_dir(&run_id);
        crate::fsutil::create_private_dir(&run_dir)?;
        crate::fsutil::write_private(&run_dir.join("env.json"), &serde_json::to_vec(&env)?)?;
        // Stored options keep env names but never their values.
        for v in options.env.values_mut() {
            *v = spaces_harnesses::redact::REDACTED.to_owned();
        }
        let run = RunRow {
            run_id: run_id.clone(),
            space: space.name.clone(),
            agent: harness.id().to_owned(),
            created_ms: now_ms(),
            status: Status::Running,
            phase: Phase::Starting,
            reason: "the run is starting".into(),
            result_text: None,
            session_id: None,
            turns: 0,
            cwd: cwd.display().to_string(),
            options,
            notes: notes.clone(),
            pgid: None,
        };
        self.inner.store.run_insert(&run)?;
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut map = self.inner.actors.lock().unwrap_or_else(|p| p.into_inner());
            map.insert(run_id.clone(), tx);
        }
        let actor = Actor::new(self.inner.clone(), run, harness, env);
        tokio::spawn(actor.run(Some(req.prompt.clone()), rx));
        Ok(AgentStartReport {
            process_tag: turn_tag(&run_id, 1),
            run_id,
            agent: harness.id().to_owned(),
            space: space.name,
            notes,
        })
    }

    /// `agent_status`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`.
    pub fn agent_status(&self, space: &str, run_id: &str, tail: Option<u32>) -> Result<RunStatus> {
        let run = self.run_in_space(space, run_id)?;
        Ok(self.status_of(&run, Some(tail.unwrap_or(DEFAULT_TAIL_LINES))))
    }

    /// `agent_list`: every run of the Space, newest first (without output tails).
    pub fn agent_list(&self, space: &str) -> Result<Vec<RunStatus>> {
        self.space(space)?;
        Ok(self.inner.store.run_list(space)?.iter().map(|r| self.status_of(r, None)).collect())
    }

    fn status_of(&self, run: &RunRow, tail: Option<u32>) -> RunStatus {
        RunStatus {
            run_id: run.run_id.clone(),
            agent: Some(run.agent.clone()),
            space: run.space.clone(),
            status: run.status,
            reason: run.reason.clone(),
            phase: run.phase,
            result_text: run.result_text.clone(),
            accepts_message: accepts_message(run.status),
            output_tail: tail.and_then(|n| journal::tail(&self.inner.cfg.run_dir(&run.run_id), n)),
            turns: run.turns,
            session_id: run.session_id.clone(),
            created_ms: run.created_ms,
        }
    }

    /// `agent_events`: events after `cursor`; long-polls up to `wait_ms` when caught up.
    pub async fn agent_events(
        &self,
        space: &str,
        run_id: &str,
        cursor: Option<u64>,
        max: Option<u32>,
        wait_ms: Option<u64>,
        raw: bool,
    ) -> Result<EventsPage> {
        self.run_in_space(space, run_id)?;
        let cursor = cursor.unwrap_or(0);
        let max = max.unwrap_or(EVENTS_MAX_DEFAULT).clamp(1, EVENTS_MAX_LIMIT);
        let wait = Duration::from_millis(wait_ms.unwrap_or(0).min(EVENTS_WAIT_MS_LIMIT));
        let events = self.inner.log.read(run_id, cursor, max, wait, raw).await?;
        let new_cursor = events.last().map(|e| e.seq).unwrap_or(cursor);
        // A short page already proves nothing later existed when it was read.
        let caught_up = events.len() < max as usize || new_cursor >= self.inner.log.last_seq(run_id)?;
        // Re-read the status: it may have changed while the long-poll waited.
        let status = self.inner.store.run_get(run_id)?.map(|r| r.status).unwrap_or(Status::Unknown);
        Ok(EventsPage { caught_up, cursor: new_cursor, events, status: status.as_str().to_owned() })
    }

    /// `agent_message`: next turn, queued mid-turn, or (with `force`) interrupt then run.
    pub async fn agent_message(&self, space: &str, run_id: &str, text: &str, force: bool) -> Result<ActionReport> {
        if text.trim().is_empty() {
            return Err(refuse(ErrorCode::InvalidArgument, "message text is empty"));
        }
        let run = self.run_in_space(space, run_id)?;
        let (reply, rx) = oneshot::channel();
        self.dispatch(run, Cmd::Message { text: text.to_owned(), force, reply })?;
        answer(rx).await
    }

    /// `agent_interrupt`: cancels the turn in flight; a no-op that says so when idle.
    pub async fn agent_interrupt(&self, space: &str, run_id: &str) -> Result<ActionReport> {
        let run = self.run_in_space(space, run_id)?;
        let (reply, rx) = oneshot::channel();
        self.dispatch(run, Cmd::Interrupt { reply })?;
        answer(rx).await
    }

    /// `agent_stop`: SIGTERM, grace, SIGKILL of every process of the run; `ok` only when none
    /// is left.
    pub async fn agent_stop(&self, space: &str, run_id: &str) -> Result<ActionReport> {
        let run = self.run_in_space(space, run_id)?;
        let (reply, rx) = oneshot::channel();
        self.dispatch(run, Cmd::Stop { reply })?;
        answer(rx).await
    }

    /// Send `cmd` to the run's actor, reviving one from the stored run if it retired.
    fn dispatch(&self, run: RunRow, cmd: Cmd) -> Result<()> {
        let mut map = self.inner.actors.lock().unwrap_or_else(|p| p.into_inner());
        let cmd = match map.get(&run.run_id) {
            Some(tx) => match tx.send(cmd) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::SendError(cmd)) => cmd,
            },
            None => cmd,
        };
        // Reload under the lock: a retiring actor saved its final state before leaving.
        let run = self.inner.store.run_get(&run.run_id)?.unwrap_or(run);
        let harness = spaces_harnesses::by_id(&run.agent).ok_or_else(|| {
            refuse(ErrorCode::HarnessUnavailable, format!("run {} uses agent {:?}, which this host does not know", run.run_id, run.agent))
        })?;
        let env_path = self.inner.cfg.run_dir(&run.run_id).join("env.json");
        let env: BTreeMap<String, String> = match std::fs::read(&env_path) {
            Ok(bytes) => serde_json::from_slice(&bytes)?,
            Err(_) => BTreeMap::new(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let run_id = run.run_id.clone();
        let actor = Actor::new(self.inner.clone(), run, harness, env);
        tokio::spawn(actor.run(None, rx));
        let _ = tx.send(cmd);
        map.insert(run_id, tx);
        Ok(())
    }

    /// `agent_capabilities`.
    pub fn capabilities(&self) -> Capabilities {
        let harnesses = spaces_harnesses::all().into_iter().map(|h| self.harness_capabilities(h)).collect();
        Capabilities {
            protocol: PROTOCOL.to_owned(),
            statuses: Status::ALL.iter().map(|s| s.as_str().to_owned()).collect(),
            event_kinds: EventKind::ALL.iter().map(|k| k.as_str().to_owned()).collect(),
            harnesses,
            forwardable_env: self.inner.cfg.forwardable_env.clone(),
        }
    }

    fn harness_capabilities(&self, h: &'static dyn Harness) -> HarnessCapabilities {
        let spec = h.install_spec();
        let (source, exists) = install::locate(&self.inner.cfg, h);
        let mut notes = vec![format!("pinned install: {}", spec.packages.join(" "))];
        let installed_version = match &source {
            Source::Operator(p) => {
                notes.push(format!("operator binary in use: {}", p.display()));
                None
            }
            Source::Pinned(_) if exists => Some(spec.version.to_owned()),
            Source::Pinned(_) => {
                notes.push("not installed yet: installed on first use, or now with `spacesd tools install`".into());
                None
            }
        };
        let has_key = h.keys().iter().any(|k| std::env::var_os(k).is_some());
        HarnessCapabilities {
            id: h.id().to_owned(),
            name: h.name().to_owned(),
            // A missing pinned install is installed on first use, so the harness is still usable.
            ready: exists || matches!(source, Source::Pinned(_)),
            installed_version,
            auth: if has_key { "ok" } else { "missing" }.to_owned(),
            keys: h.keys().iter().map(|s| s.to_string()).collect(),
            endpoint_wires: h.endpoint_wires().iter().map(|s| s.to_string()).collect(),
            can_interrupt: true,
            followups: h.followups().to_owned(),
            notes,
            binary: Some(source.path().display().to_string()),
        }
    }

    /// At daemon start: end what a previous daemon left behind. Turns cut off mid-flight end
    /// `crashed` (status `crashed`, a follow-up resumes the session); leftover processes of any
    /// run are killed. One pass over `/proc` finds the leftovers, so start-up does not grow with
    /// the number of finished runs.
    pub async fn recover(&self) -> Result<()> {
        let mut leftovers: BTreeSet<String> =
            alive_with_env(RUN_ENV).into_iter().map(|(_, run_id)| run_id).collect();
        for mut run in self.inner.store.runs_to_recover()? {
            leftovers.remove(&run.run_id);
            let _ = kill_tree(run.pgid, &run_marker(&run.run_id), Duration::from_secs(2)).await;
            run.pgid = None;
            if run.status == Status::Running {
                let turn = run.turns;
                let why = format!("spacesd restarted while turn {turn} was running");
                let draft = EventDraft::new(turn, EventKind::TurnEnded)
                    .stop(StopReason::Crashed)
                    .text(why.clone())
                    .summary(format!("turn {turn} ended: crashed ({why})"));
                self.inner.log.append(&run.run_id, vec![draft])?;
                self.inner.store.turn_end(&run.run_id, turn, StopReason::Crashed.as_str())?;
                run.status = Status::Crashed;
                run.phase = Phase::Crashed;
                run.reason = format!("{why}; a follow-up resumes the session");
            }
            self.inner.store.run_update(&run)?;
        }
        // Tool processes of this host's runs whose state needs no change (e.g. orphans of an
        // idle run). Processes of runs this store does not know belong to another daemon.
        for run_id in &leftovers {
            if self.inner.store.run_get(run_id)?.is_some() {
                let _ = kill_tree(None, &run_marker(run_id), Duration::from_secs(2)).await;
            }
        }
        Ok(())
    }
}

/// The contract's rule for `accepts_message`: idle, done, crashed or failed; never mid-turn or
/// stopped.
pub fn accepts_message(status: Status) -> bool {
    matches!(status, Status::Idle | Status::Done | Status::Crashed | Status::Failed)
}

async fn answer(rx: oneshot::Receiver<ActionReport>) -> Result<ActionReport> {
    rx.await.map_err(|_| refuse(ErrorCode::Internal, "the run's actor ended before answering; check the run's status"))
}

/// The agent's working directory: the Space root, or `cwd` relative to it, resolved at open
/// time by the same confinement as the file tools (`codespace::fs::Root::check_dir`):
/// `PATH_ESCAPE` for `..`/absolute paths, `SYMLINK_REJECTED` for a symlink on the way,
/// `FILE_NOT_FOUND`, `PATH_NOT_DIRECTORY`.
fn resolve_cwd(root: &Path, cwd: Option<&str>) -> Result<PathBuf> {
    let Some(rel) = cwd.filter(|c| !c.is_empty() && *c != ".") else {
        return Ok(root.to_path_buf());
    };
    let root = spaces_codespace::fs::Root::open(root).map_err(Error::Api)?;
    root.check_dir(rel).map_err(|mut e| {
        e.message = format!("cwd {rel:?}: {}", e.message);
        Error::Api(e)
    })
}
