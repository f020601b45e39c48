//! The run supervisor: validates requests, records runs, and routes every later action to the
//! run's actor, which owns the agent process and the run's state machine.
//!
//! Actors are started on `agent_start` and retire when their run has no process, no turn in
//! flight and nothing queued; a later message, interrupt or stop revives one from the stored run.
//! Agent processes run under per-run shims (`spaces_os::shim`), so they outlive the
//! daemon: [`Supervisor::recover`] re-adopts them at start and resumes ingest where the stored
//! journal offset says, each event exactly once.
//!
//! Rooms, one purpose each; this file keeps only the [`Supervisor`] handle and the thin public
//! operations that call into them:
//! - `shared`: the state the rooms share (`Inner`): configuration, stores, the actor map, locks.
//! - `mailbox`: what an actor is sent (`Cmd`) and the map of their channels.
//! - `registry`: Spaces (add, list) and the Space/run lookups every operation starts with.
//! - `start`: `agent_start` validation, the run directory and row, then the launch.
//! - `actors`: the actor map: launch, dispatch (reviving a retired actor), retire.
//! - `actor`: one run's state machine (commands, turns, status transitions).
//! - `launcher`: a turn's binary, launch plan and spawn; its output lines redacted, journaled
//!   and normalized into batches of events.
//! - `proc`: one agent process under its shim: started or re-adopted, its journal followed.
//! - `status`, `events`: what callers read (a run's status, pages of its events).
//! - `recover`: re-adopting the shims a previous daemon left, at start.
//! - `run_sandbox`, `ahead`: the sandbox of a run's process; the next run of a Space and
//!   harness made ready ahead, with a warm sandbox for its agent.
//! - `capabilities`: what this host offers, per harness.
//! - `install`, `journal`, `marker`: CLI installs, the output journal, and the marker that
//!   names a run's processes.
//! - `files`: `options.files`, checked at `agent_start`, written into the run directory and
//!   named in the first turn's prompt.
//! - `prepare`: `repo` and `branch`: checked at `agent_start`, cloned or checked out before
//!   the first turn (phase `preparing`).
//! - `lifecycle`: removing runs and Spaces (`agent_remove`, `agent_prune`, `space_remove`) and
//!   the retention setting.
//! - `persist`: a persistent agent's run: its home restored first, saved after every turn,
//!   its lease released at the end (the volume itself: [`crate::homes`]).
//! - `admission`: the caps on turns running at once (host, Space) and the queue of runs waiting
//!   for a slot (status `queued`).
//! - `ledger`, `usage`: a run's usage ledger in memory (each turn's share of the CLI's figures,
//!   what the run spent against its budget), and `agent_usage`/`agent_budget`.
//! - `error`: why a step of a turn failed (`supervisor::error::Error`), from the checkout
//!   to the shim; a turn that cannot start carries its sentence as the reason.
//! - `secrets`, `mcp_servers`: what a run keeps 0600 in its directory (env, MCP server
//!   secrets), and the run's MCP servers (checked at start, `space_tools` added at launch).

mod actor;
mod actors;
pub mod admission;
mod ahead;
pub mod api;
mod capabilities;
mod checkpoints;
pub mod error;
mod events;
mod files;
mod folder;
mod fork;
mod install;
pub mod journal;
mod keys;
mod launcher;
mod ledger;
mod lifecycle;
mod mailbox;
mod marker;
mod mcp_servers;
mod persist;
mod prepare;
mod proc;
mod recover;
mod registry;
mod run_sandbox;
mod secrets;
mod shared;
mod start;
mod status;
mod usage;

use std::sync::Arc;

use spaces_sdk::{
    ActionReport, AgentStartReport, AgentStartRequest, Capabilities, ErrorCode, EventsPage, PersistentAgentSendReport, RunStatus,
    SpaceRecord, Status,
};
use spaces_store::Store;

use crate::config::Config;
use crate::error::{refuse, Result};
use crate::homes::meta::AgentMeta;
use crate::homes::Homes;
use mailbox::Cmd;
use shared::Inner;

pub use capabilities::PROTOCOL;
pub use install::{install as install_harness, locate as locate_harness, npm_passes, Source, NPM_ENV};
pub use mcp_servers::space_tools_server;
pub use proc::shim_env;
pub use secrets::{command_redactions, learn_host_secrets, learn_secret};
pub use status::accepts_message;

/// The supervisor of every run on this host.
#[derive(Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

impl Supervisor {
    /// A supervisor over `store`, with `cfg`, keeping persistent agents' homes in `homes`.
    pub fn new(cfg: Config, store: Arc<Store>, homes: Arc<Homes>) -> Self {
        Self { inner: Arc::new(Inner::new(cfg, store, homes)) }
    }

    /// At shutdown: waits (at most `within`) until every turn start under way delivered its
    /// text to its agent, and keeps any other from starting until the process exits. Returns
    /// whether all finished in time (a start that prepares a repository may take longer).
    pub async fn finish_turn_starts(&self, within: std::time::Duration) -> bool {
        match tokio::time::timeout(within, self.inner.turn_starts.write()).await {
            Ok(held) => {
                // Held until the process exits: no turn starts after this point.
                std::mem::forget(held);
                true
            }
            Err(_) => false,
        }
    }

    /// At shutdown, after [`Self::finish_turn_starts`]: every run's actor finishes what it is
    /// doing (a store write, a turn's checkpoint) and leaves its loop at its next wait, and this
    /// waits (at most `within`) until all have; no actor starts after this, and a command sent
    /// meanwhile is never answered (its caller retries with its key against the next daemon).
    /// The agents go on under their shims and the next start adopts them; the daemon's process
    /// then exits without shutting its runtime down (`spacesd::cli::run`). Returns whether all
    /// left in time.
    pub async fn stop_actors(&self, within: std::time::Duration) -> bool {
        self.inner.actors.stop(within).await
    }

    /// How many runs have a turn in flight (status `running`) on this host: a daemon started
    /// with `serve --exit-when-unused` waits for 0 before it ends. Errors: the store's.
    pub fn turns_in_flight(&self) -> Result<usize> {
        Ok(self.inner.store.runs_running()?)
    }

    /// The configuration.
    pub fn serve_run_sockets(&self, server: api::Server) {
        self.inner.api.set_server(server);
    }

    /// The daemon's configuration.
    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }

    // ----- Spaces -----

    /// Register a Space. Registering the same name again with the same root and policy is a
    /// no-op; a different root or policy needs `replace` (it changes what running agents and
    /// tools may do). Errors: `INVALID_ARGUMENT` for an empty or unsafe name, a root that is not
    /// an existing directory, or a changed registration without `replace`.
    pub fn space_add(&self, space: &SpaceRecord, replace: bool) -> Result<SpaceRecord> {
        registry::add(&self.inner.store, space, replace)
    }

    /// Every registered Space.
    pub fn space_list(&self) -> Result<Vec<SpaceRecord>> {
        registry::list(&self.inner.store)
    }

    // ----- agent operations -----

    /// `agent_start`: validate, record the run, launch its actor, and answer at once.
    /// Errors: `WORKSPACE_NOT_FOUND`, `HARNESS_UNAVAILABLE` (unknown agent), `INVALID_ARGUMENT`
    /// (empty prompt, cwd outside the Space, bad env names), `UNAUTHORIZED` (a `network: none`
    /// Space on a daemon without a sandbox). Nothing is created on error. A `network: none`
    /// Space's run says in its notes that its agent has no network.
    /// With `options.home`, the persistent agent's lease is taken first: `LEASE_HELD` when
    /// another run (here or on another host) holds it.
    /// With `request_id` (`supervisor/keys.rs`): a repeat answers the first report and starts nothing;
    /// `OPERATION_KEY_CONFLICT` when the key came with another request, `INVALID_ARGUMENT` for a
    /// malformed key.
    pub async fn agent_start(&self, space_name: &str, req: &AgentStartRequest) -> Result<AgentStartReport> {
        let space = registry::space(&self.inner.store, space_name)?;
        let key = keys::Keyed::start(&space.name, req)?;
        if let Some(first) = key.as_ref().map(|k| k.replay(&self.inner.store)).transpose()?.flatten() {
            return Ok(first);
        }
        if let Some(waiting) = self.inner.admission.full_for("", &space.name) {
            return Err(refuse(
                ErrorCode::ResourceQueueFull,
                format!(
                    "{waiting} runs already wait for a turn slot (the host's limit, admission_queue_max); start again once turns ended"
                ),
            ));
        }
        start::start(&self.inner, space, req, key).await
    }

    /// `persistent_agent_send`: `text` as a follow-up to the live run of persistent agent
    /// `name` on this host, or a fresh run started from its saved record (harness, Space, cwd,
    /// session, options) with its home restored. Errors: `AGENT_BUSY` while that run's turn is
    /// in flight; `INVALID_ARGUMENT` (empty text, no such agent in the volume);
    /// `WORKSPACE_NOT_FOUND` when this host has no Space of the agent's Space name;
    /// `LEASE_HELD` while another host's run holds the agent.
    pub async fn persistent_agent_send(&self, name: &str, text: &str) -> Result<PersistentAgentSendReport> {
        if text.trim().is_empty() {
            return Err(refuse(ErrorCode::InvalidArgument, "text is empty; give the message for the agent"));
        }
        let live = self.inner.store.runs_with_home(name)?.into_iter().find(|r| {
            matches!(r.status, Status::Running | Status::Queued | Status::QuotaWaiting | Status::Idle | Status::Failed | Status::Crashed)
        });
        if let Some(run) = live {
            if run.status == Status::Running {
                return Err(refuse(
                    ErrorCode::AgentBusy,
                    format!(
                        "persistent agent {name:?} is mid-turn in run {}; wait for the turn to end (agent_events) or \
                         interrupt it, then send again",
                        run.run_id
                    ),
                ));
            }
            let run_id = run.run_id.clone();
            let report = actors::ask(&self.inner, run, |reply| Cmd::Message {
                text: text.to_owned(),
                force: false,
                key: None,
                traceparent: None,
                reply,
            })
            .await?;
            if !report.ok {
                return Err(refuse(ErrorCode::AgentBusy, report.reason));
            }
            return Ok(PersistentAgentSendReport { run_id, started: false, restored: false });
        }
        let Some(latest) = self.inner.homes.latest(name).await? else {
            return Err(refuse(
                ErrorCode::InvalidArgument,
                format!(
                    "no persistent agent named {name:?} in this host's volume ({}); start one with agent_start and \
                     options.home, or see `spacesd home list`",
                    self.inner.homes.capabilities().url
                ),
            ));
        };
        let meta = AgentMeta::from_value(&latest.meta);
        if meta.agent.is_empty() || meta.space.is_empty() {
            return Err(refuse(
                ErrorCode::InvalidArgument,
                format!("the home {name:?} holds no agent record (imported?); start its first run with agent_start and options.home"),
            ));
        }
        let req = AgentStartRequest {
            space: meta.space.clone(),
            agent: meta.agent.clone(),
            prompt: text.to_owned(),
            show: None,
            options: Some(meta.options(name)),
            request_id: None,
            traceparent: None,
        };
        let report = self.agent_start(&meta.space, &req).await?;
        Ok(PersistentAgentSendReport { run_id: report.run_id, started: true, restored: true })
    }

    /// Turn what the lease renewals have to tell a run into `notice` events of its current
    /// turn (`crate::homes::renew`). Call once, before runs start.
    pub fn tell_runs_lease_news(&self) {
        persist::tell_runs_lease_news(&self.inner);
    }

    /// Retry, in the background, every home save a previous daemon died in (`persist/pending.rs`).
    /// Call once at start, after [`Supervisor::recover`].
    pub fn retry_interrupted_saves(&self) {
        persist::retry_interrupted_saves(&self.inner);
    }

    /// `space_remove` (see `lifecycle`): refused while runs live unless `force`.
    pub async fn space_remove(&self, name: &str, force: bool) -> Result<spaces_sdk::SpaceRemoveReport> {
        lifecycle::remove_space(&self.inner, name, force).await
    }

    /// `agent_remove`: delete a run that is not live. Errors: `AGENT_BUSY` for a live run.
    pub async fn agent_remove(&self, space: &str, run_id: &str) -> Result<spaces_sdk::RunsRemovedReport> {
        lifecycle::remove(&self.inner, space, run_id).await
    }

    /// `agent_prune`: delete the Space's runs that are not live and older than `older_than_ms`.
    pub async fn agent_prune(&self, space: &str, older_than_ms: u64) -> Result<spaces_sdk::RunsRemovedReport> {
        lifecycle::prune(&self.inner, space, older_than_ms).await
    }

    /// The operator's webhook endpoints (`webhook_*` operations).
    pub fn webhooks(&self) -> &crate::webhooks::Webhooks {
        &self.inner.webhooks
    }

    /// Send the finished spans still batched to the OTLP collector (at shutdown; a no-op when
    /// traces are off).
    pub async fn flush_traces(&self) {
        if let Some(traces) = self.inner.traces.clone() {
            let _ = tokio::task::spawn_blocking(move || traces.flush()).await;
        }
    }

    /// Start delivering webhooks: the scanner of run events and the sender.
    pub fn spawn_webhooks(&self) {
        self.inner.webhooks.spawn();
    }

    /// Apply the retention setting (`run_retention_days`) now and every hour, if configured.
    pub fn spawn_retention(&self) {
        if let Some(days) = self.inner.cfg.run_retention_days {
            lifecycle::spawn_retention(self.inner.clone(), days);
        }
    }

    /// The volume and leases of persistent agents' homes.
    pub fn homes(&self) -> &Arc<Homes> {
        &self.inner.homes
    }

    /// `home_move`: persistent agent `name`'s home belongs to Space `space` (registered here)
    /// from now on. Errors: `WORKSPACE_NOT_FOUND`, `LEASE_HELD`, `INVALID_ARGUMENT` (no such home).
    pub async fn home_move(&self, name: &str, space: &str) -> Result<spaces_sdk::HomeMoveReport> {
        let space = registry::space(&self.inner.store, space)?;
        self.inner.homes.move_to(name, &space.name).await
    }

    /// `agent_status` with the last `tail` lines of output (the caller applies the contract's
    /// default, `AgentStatusRequest::tail_lines`). Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`.
    pub fn agent_status(&self, space: &str, run_id: &str, tail: u32) -> Result<RunStatus> {
        let run = registry::run_in_space(&self.inner.store, space, run_id)?;
        let spent = usage::totals(&self.inner.store.usage_of_run(run_id)?);
        Ok(status::status_of(&self.inner.cfg, &run, Some(tail), spent))
    }

    /// `agent_list`: every run of the Space, newest first (without output tails).
    pub fn agent_list(&self, space: &str) -> Result<Vec<RunStatus>> {
        registry::space(&self.inner.store, space)?;
        let mut spent = usage::totals_by_run(&self.inner.store.usage_of_space(space, 0)?);
        let runs = self.inner.store.run_list(space)?;
        Ok(runs.iter().map(|r| status::status_of(&self.inner.cfg, r, None, spent.remove(&r.run_id).unwrap_or_default())).collect())
    }

    /// `agent_events`: at most `max` events after `cursor`; long-polls up to `wait` when caught
    /// up (the caller applies the contract's defaults and limits, `AgentEventsRequest`).
    pub async fn agent_events(
        &self,
        space: &str,
        run_id: &str,
        cursor: u64,
        max: u32,
        wait: std::time::Duration,
        raw: bool,
    ) -> Result<EventsPage> {
        registry::run_in_space(&self.inner.store, space, run_id)?;
        events::page(&self.inner, run_id, cursor, max, wait, raw).await
    }

    /// `agent_message`: next turn, queued mid-turn, or (with `force`) interrupt then run.
    /// With `message_id` (`supervisor/keys.rs`): a repeat answers the first report and delivers nothing
    /// again; `OPERATION_KEY_CONFLICT` when the key came with another text or `force`,
    /// `INVALID_ARGUMENT` for a malformed key.
    pub async fn agent_message(
        &self,
        space: &str,
        run_id: &str,
        text: &str,
        force: bool,
        message_id: Option<&str>,
        traceparent: Option<&str>,
    ) -> Result<ActionReport> {
        if text.trim().is_empty() {
            return Err(refuse(ErrorCode::InvalidArgument, "message text is empty"));
        }
        start::check_traceparent(traceparent)?;
        let run = registry::run_in_space(&self.inner.store, space, run_id)?;
        let key = keys::Keyed::message(&run.run_id, message_id, text, force)?;
        // Stored: answered at once. Otherwise the actor looks again (stored or queued since).
        if let Some(first) = key.as_ref().map(|k| k.replay(&self.inner.store)).transpose()?.flatten() {
            return Ok(first);
        }
        actors::ask(&self.inner, run, |reply| Cmd::Message {
            text: text.to_owned(),
            force,
            key,
            traceparent: traceparent.map(str::to_owned),
            reply,
        })
        .await
    }

    /// `agent_usage`: what one run, or every run of the Space, spent (`usage.rs`).
    /// Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`.
    pub fn agent_usage(&self, req: &spaces_sdk::AgentUsageRequest) -> Result<spaces_sdk::UsageReport> {
        usage::report(&self.inner.store, req)
    }

    /// `agent_diff`: what the run's turns changed, from its checkpoints (`checkpoints.rs`).
    /// Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT` naming the turn.
    pub fn agent_diff(&self, req: &spaces_sdk::AgentDiffRequest) -> Result<spaces_sdk::DiffReport> {
        checkpoints::diff(&self.inner, req)
    }

    /// `agent_rewind`: take an idle run back to the end of a turn, through its actor
    /// (`actor/rewind.rs`). Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `AGENT_BUSY`,
    /// `INVALID_ARGUMENT` naming `to_turn`.
    pub async fn agent_rewind(&self, req: &spaces_sdk::AgentRewindRequest) -> Result<spaces_sdk::RewindReport> {
        let run = registry::run_in_space(&self.inner.store, &req.space, &req.run_id)?;
        let (to_turn, what) = (req.to_turn, req.what.unwrap_or_default());
        actors::ask(&self.inner, run, |reply| Cmd::Rewind { to_turn, what, reply }).await
    }

    /// `agent_fork`: a new idle run from a run's turn, in its own worktree (`fork.rs`).
    /// Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT`.
    pub async fn agent_fork(&self, req: &spaces_sdk::AgentForkRequest) -> Result<spaces_sdk::ForkReport> {
        fork::fork(&self.inner, req).await
    }

    /// `agent_merge`: a fork's changes into its parent's folder (`fork.rs`). Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT`, `AGENT_BUSY`.
    pub async fn agent_merge(&self, req: &spaces_sdk::AgentMergeRequest) -> Result<spaces_sdk::MergeReport> {
        fork::merge(&self.inner, req).await
    }

    /// `agent_budget`: set or raise a run's budget, through its actor (which checks it before
    /// every turn). Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT`.
    pub async fn agent_budget(&self, req: &spaces_sdk::AgentBudgetRequest) -> Result<spaces_sdk::BudgetReport> {
        let run = registry::run_in_space(&self.inner.store, &req.space, &req.run_id)?;
        actors::ask(&self.inner, run, |reply| Cmd::Budget { budget: req.budget.clone(), reply }).await
    }

    /// `agent_interrupt`: cancels the turn in flight; a no-op that says so when idle.
    pub async fn agent_interrupt(&self, space: &str, run_id: &str) -> Result<ActionReport> {
        let run = registry::run_in_space(&self.inner.store, space, run_id)?;
        actors::ask(&self.inner, run, |reply| Cmd::Interrupt { reply }).await
    }

    /// `agent_stop`: SIGTERM, grace, SIGKILL of every process of the run; `ok` only when none
    /// is left.
    pub async fn agent_stop(&self, space: &str, run_id: &str) -> Result<ActionReport> {
        let run = registry::run_in_space(&self.inner.store, space, run_id)?;
        actors::ask(&self.inner, run, |reply| Cmd::Stop { reply }).await
    }

    /// The Space of run `run_id`, if this daemon has that run.
    pub fn run_space(&self, run_id: &str) -> Option<String> {
        self.inner.store.run_get(run_id).ok().flatten().map(|r| r.space)
    }

    /// `agent_capabilities`.
    pub fn capabilities(&self) -> Capabilities {
        capabilities::capabilities(&self.inner.cfg, self.inner.homes.capabilities())
    }

    /// At daemon start: re-adopt every run whose agent runs under a live shim (its turn goes on;
    /// ingest resumes at the stored journal offset). A run whose shim died, or that has no
    /// journal (a daemon before shims), ends a cut-off turn `crashed` (a follow-up resumes the
    /// session) and its leftover processes are ended.
    pub async fn recover(&self) -> Result<()> {
        recover::recover(&self.inner).await
    }
}
