//! The state the supervisor's rooms share ([`Inner`]): the configuration, the stores, the actor
//! map, the run sockets, and the locks of installs and turn starts. Every room takes it from
//! here; it names no room but the actor map's channels (`mailbox.rs`) and the run sockets
//! (`api.rs`), so no room reaches up into `mod.rs` for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use spaces_store::eventlog::EventLog;
use spaces_store::Store;

use super::api;
use super::mailbox::Actors;
use crate::config::Config;
use crate::homes::Homes;

/// Shared state of the supervisor and its actors.
pub struct Inner {
    pub cfg: Arc<Config>,
    pub store: Arc<Store>,
    pub log: Arc<EventLog>,
    /// The volume of persistent agents' homes, and the leases this host holds.
    pub homes: Arc<Homes>,
    pub(super) actors: Actors,
    installs: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Failed turns in a row of runs whose actor retired (case P7's back-off outlives an actor).
    failures: Mutex<HashMap<String, u32>>,
    /// Each live run's own API socket ([`api`]).
    pub api: api::RunSockets,
    /// Held (shared) by each turn start from the commit that records the turn until its text
    /// reached the agent (a process started, or the message written to a live one); taken
    /// whole by `Supervisor::finish_turn_starts` when the daemon stops, so a SIGTERM never cuts
    /// a turn between the two (its key stored, its text never delivered: case R45).
    pub(super) turn_starts: tokio::sync::RwLock<()>,
    /// The next run of each (Space, harness) made ready ahead: its run id, or `None` while it
    /// is being made (`super::ahead`).
    pub(super) ahead: Mutex<HashMap<(String, String), Option<String>>>,
    /// The slots of turns running at once and the runs waiting for one ([`super::admission`]).
    pub(super) admission: super::admission::Admission,
    /// The operator's webhook endpoints and their loops ([`crate::webhooks`]).
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    /// The exporter of run spans, when the operator set an OTLP endpoint ([`crate::traces`]).
    pub traces: Option<Arc<crate::traces::Traces>>,
}

impl Inner {
    /// The state of a supervisor over `store`, with `cfg`, keeping persistent agents' homes in
    /// `homes`; no actor, install or turn start yet.
    pub(super) fn new(cfg: Config, store: Arc<Store>, homes: Arc<Homes>) -> Self {
        let log = Arc::new(EventLog::new(store.clone()));
        let cfg_caps = cfg.admission.clone();
        let traces = cfg.otlp_endpoint.as_deref().and_then(|url| match crate::traces::Traces::new(url) {
            Ok(t) => Some(Arc::new(t)),
            Err(e) => {
                tracing::warn!("no traces: {e}");
                None
            }
        });
        let webhooks = Arc::new(crate::webhooks::Webhooks::new(store.clone(), log.clone()));
        Self {
            cfg: Arc::new(cfg),
            store,
            log,
            homes,
            actors: Actors::default(),
            installs: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            api: api::RunSockets::default(),
            turn_starts: tokio::sync::RwLock::new(()),
            ahead: Mutex::new(HashMap::new()),
            admission: super::admission::Admission::new(cfg_caps),
            webhooks,
            traces,
        }
    }

    /// The lock serializing installs of one harness.
    pub(super) fn install_lock(&self, harness_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.installs.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(harness_id.to_owned()).or_default().clone()
    }

    /// Failed turns in a row of run `run_id`, kept while its actor is retired.
    pub(super) fn fast_failures(&self, run_id: &str) -> u32 {
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).get(run_id).copied().unwrap_or(0)
    }

    /// Keep `n` failed turns in a row for run `run_id` (0 forgets it).
    pub(super) fn set_fast_failures(&self, run_id: &str, n: u32) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if n == 0 {
            map.remove(run_id);
        } else {
            map.insert(run_id.to_owned(), n);
        }
    }
}
