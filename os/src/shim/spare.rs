//! Spare shims: one shim started ahead of need, so a run or a command starts without waiting for
//! a shim's exec or for its program's cgroup move.
//!
//! Starting a contained program used to cost, on the start path: exec'ing the shim (the daemon's
//! binary, 2 to 4 ms idle, up to 50 ms under load) and the program's move into its cgroup (on
//! cgroup v1, an RCU grace period: 5 to 20 ms whether the host is idle or busy). A spare shim does
//! both before it is needed:
//!
//! - **The daemon's side** ([`keep`], `take`): the daemon keeps one spare (`spacesd shim /` with
//!   [`SPARE_ENV`] naming a cgroup of its own, `<host id>-spare-<pid>-<n>`). A launch
//!   ([`super::ShimClient::launch`]) takes it when its command and environment match, hands it
//!   the [`super::protocol::Launch`] (with the shim's directory, which the spare did not know), and
//!   a new spare is started in the background. No spare ready (a burst of starts): the launch
//!   starts a shim as before. A spare found exited, or gone when its launch is written to it
//!   (the write fails), is replaced by a fresh shim; one that dies after it read its launch
//!   fails that start as a fresh shim dying then would (its program may have started).
//!   Only on cgroup v1 does a spare make a cgroup (v2 cannot rename one): on v2 its child
//!   joins the tree's cgroup when its program comes.
//! - **The spare's side** ([`Made`]): before it reads its launch, the spare makes its cgroup and
//!   forks its program's child into it ([`crate::process::prepared`]). When the launch comes,
//!   the spare renames its cgroup's directories to the ones the launch plans (cgroup v1 allows a
//!   rename within a parent; on any failure it falls back to making the planned cgroup and
//!   starting the program the usual way), and the waiting child execs the program. A launch on a
//!   terminal (PTY) discards the child and starts the program the usual way.
//! - **Warm sandboxes**: a command (`exec_command`: combined output, no terminal) or an agent
//!   (stdout and stderr apart, stdin a pipe) in a bubblewrap sandbox pays for the sandbox's
//!   namespaces and mounts (5 to 10 ms) at its start. So once a launch's exact [`Policy`] (and
//!   kind of output) comes a second time, or when the daemon knows it will come ([`prewarm`]:
//!   the next run of a Space and harness, made ready ahead), the daemon also keeps a spare
//!   made for it (at most [`WARM_MAX`] kinds remembered, the least recently used let go),
//!   renewed at each launch that takes it (a [`prewarm`]ed one is not: it was for one launch):
//!   its child
//!   starts bubblewrap at once and waits inside, ready ([`prepared::prepare_warm`]). The next
//!   launch with an equal policy takes it, and its program starts with one exec
//!   ([`Prepared::start_warm`]); any other launch, or one the warm sandbox cannot take
//!   (its sandbox died, a cgroup it would have to join now: cgroup v2), goes the usual way.
//!   A policy names every path the sandbox shows or hides, and a warm sandbox is used only
//!   while each of those paths is still the file it was when the sandbox was made
//!   ([`crate::sandbox::identity`]: a Space folder renamed and replaced is not), so it is only
//!   ever used for a tree the daemon would have given the very same sandbox.
//! - **Cleanup**: a spare that reads EOF instead of a launch (the daemon exited, or dropped it)
//!   kills its child and removes its cgroup; its child dies with it (`PR_SET_PDEATHSIG`). A
//!   leftover empty spare cgroup is removed by the next daemon's sweep ([`crate::process::cgroup::sweep`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::waiting::Waiting;
use crate::process::cgroup::{self, Cgroup, Containment, Plan};
use crate::process::prepared::{self, Prepared};
use crate::sandbox::Policy;

/// The variable that makes `spacesd shim` a spare: a JSON [`SpareSpec`].
pub const SPARE_ENV: &str = "SPACES_SHIM_SPARE";

/// What a spare prepares before its launch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SpareSpec {
    /// Its cgroup (the host's hierarchies, a spare's name); `None`: the host has no cgroups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<Plan>,
    /// A warm sandbox under this policy (bubblewrap level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm: Option<Policy>,
    /// The warm sandbox's program gets stdout and stderr apart (an agent's launch:
    /// [`super::protocol::OutputMode::Lines`]); else one stream (a command's).
    #[serde(default)]
    pub split: bool,
}

/// A warm sandbox's kind: its policy, and whether its output is split ([`SpareSpec::split`]).
pub type WarmKey<'a> = (&'a Policy, bool);

/// How many policies get a warm sandbox at once (each costs an idle shim, bubblewrap's two
/// processes and the helper, all asleep): a few Spaces' commands and the next runs made ready
/// ahead ([`prewarm`]).
pub const WARM_MAX: usize = 6;

// ----- the daemon's side -----

struct Pool {
    command: Vec<String>,
    env: BTreeMap<String, String>,
    /// The ordinary spare.
    slot: Slot,
    /// Warm spares, most recently used last.
    warm: Vec<Warm>,
}

/// One spare kept ready: the ready one, and whether one is being started.
#[derive(Default)]
struct Slot {
    spare: Option<Waiting>,
    making: bool,
}

struct Warm {
    policy: Policy,
    split: bool,
    /// Made for one launch known to come ([`prewarm`]): let go once taken, not renewed.
    once: bool,
    slot: Slot,
}

impl Warm {
    fn is(&self, (policy, split): WarmKey<'_>) -> bool {
        self.split == split && &self.policy == policy
    }
}

impl Pool {
    /// The slot of `warm`'s kind (`None`: not remembered), or the ordinary spare's.
    fn slot(&mut self, warm: Option<WarmKey<'_>>) -> Option<&mut Slot> {
        match warm {
            None => Some(&mut self.slot),
            Some(key) => self.warm.iter_mut().find(|w| w.is(key)).map(|w| &mut w.slot),
        }
    }

    /// Remember `key` as the most recently used warm kind (the least recently used let go past
    /// [`WARM_MAX`]: its spare reads EOF and exits).
    fn remember(&mut self, (policy, split): WarmKey<'_>, once: bool) {
        if self.warm.len() >= WARM_MAX {
            self.warm.remove(0);
        }
        self.warm.push(Warm { policy: policy.clone(), split, once, slot: Slot::default() });
    }
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);
static SPARES: AtomicU64 = AtomicU64::new(0);

/// From now on, keep one spare shim of `command` (`spacesd`'s own, as [`super::ShimClient`]
/// starts it) with `env` ready, starting the first now. Call inside a tokio runtime (the spare is
/// started on its blocking pool). A later call replaces the command and environment (the old
/// spare exits).
pub fn keep(command: Vec<String>, env: BTreeMap<String, String>) {
    if let Ok(mut pool) = POOL.lock() {
        *pool = Some(Pool { command, env, slot: Slot::default(), warm: Vec::new() });
    }
    refill(None);
}

/// Keep no spare any more: the ready one reads EOF and exits, removing its cgroup.
pub fn stop() {
    if let Ok(mut pool) = POOL.lock() {
        *pool = None;
    }
}

/// The ready spare of `command` with `env`, if there is one and it still runs (another is
/// started in the background). `None`: spares are not kept, none is ready yet, the ready one
/// exited, or they are of another command. With `warm` (the launch's policy, when a warm
/// sandbox could start it, and whether its output is split: see the module doc), a warm spare of
/// that kind first; either way one is made ready for the next launch with it.
pub(super) fn take(command: &[String], env: &BTreeMap<String, String>, warm: Option<WarmKey<'_>>) -> Option<Waiting> {
    let warm = warm.filter(|_| cgroup::mode() != Containment::CgroupV2);
    if let Some(key) = warm {
        let spare = {
            let mut pool = POOL.lock().ok()?;
            let pool = pool.as_mut()?;
            if pool.command != command || &pool.env != env {
                return None;
            }
            match pool.warm.iter().position(|w| w.is(key)) {
                Some(at) => {
                    let mut entry = pool.warm.remove(at);
                    let spare = entry.slot.spare.take();
                    let renew = !entry.once;
                    if renew {
                        pool.warm.push(entry);
                    }
                    Some((spare, renew))
                }
                None => {
                    // Seen once: remembered, but a sandbox is made only when it comes again
                    // (commands that each go to another Space would pay for sandboxes
                    // nobody uses).
                    pool.remember(key, false);
                    None
                }
            }
        };
        let Some((spare, renew)) = spare else { return take_spare(command, env) };
        if renew {
            refill(Some(key));
        }
        if let Some(spare) = spare.and_then(|mut s| s.alive().then_some(s)) {
            return Some(spare);
        }
    }
    take_spare(command, env)
}

/// The ready ordinary spare of `command` with `env` (another is started in the background).
fn take_spare(command: &[String], env: &BTreeMap<String, String>) -> Option<Waiting> {
    let spare = {
        let mut pool = POOL.lock().ok()?;
        let pool = pool.as_mut()?;
        if pool.command != command || &pool.env != env {
            return None;
        }
        pool.slot.spare.take()
    };
    refill(None);
    spare.and_then(|mut s| s.alive().then_some(s))
}

/// Make a warm sandbox of `key` ready now, for a launch known to come (the next run of a Space
/// and harness, made ready ahead by the daemon: `spaces-host`'s `supervisor::ahead`), without
/// waiting for the policy's second use; once taken it is let go, not renewed (a later launch
/// with the same policy is seen as a first use). Nothing on cgroup v2 (a warm sandbox cannot join its
/// cgroup late), when spares are not kept, or when one of that kind is ready or being made.
pub fn prewarm(key: WarmKey<'_>) {
    if cgroup::mode() == Containment::CgroupV2 {
        return;
    }
    {
        let Ok(mut pool) = POOL.lock() else { return };
        let Some(pool) = pool.as_mut() else { return };
        if !pool.warm.iter().any(|w| w.is(key)) {
            pool.remember(key, true);
        }
    }
    refill(Some(key));
}

/// Start a spare in the background (with `warm`, a warm one of that kind) unless its slot
/// holds one ready or being started, or a warm kind's entry was let go meanwhile.
fn refill(warm: Option<WarmKey<'_>>) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
    let (command, env) = {
        let Ok(mut pool) = POOL.lock() else { return };
        let Some(pool) = pool.as_mut() else { return };
        let Some(slot) = pool.slot(warm) else { return };
        if slot.spare.is_some() || slot.making {
            return;
        }
        slot.making = true;
        (pool.command.clone(), pool.env.clone())
    };
    let warm = warm.map(|(policy, split)| (policy.clone(), split));
    handle.spawn_blocking(move || {
        let key = warm.as_ref().map(|(policy, split)| (policy, *split));
        let made = start(&command, &env, key);
        if let Err(why) = &made {
            let what = if warm.is_some() { "a warm sandbox's spare shim" } else { "a spare shim" };
            tracing::warn!("cannot start {what}: {why}");
        }
        if let Ok(mut pool) = POOL.lock() {
            if let Some(slot) = pool.as_mut().filter(|p| p.command == command && p.env == env).and_then(|p| p.slot(key)) {
                slot.making = false;
                slot.spare = made.ok();
            }
        }
    });
}

/// Start one spare shim (blocking, about 1 ms: no fork of this process); with `warm`, one that
/// starts a warm sandbox of that kind.
fn start(command: &[String], env: &BTreeMap<String, String>, warm: Option<WarmKey<'_>>) -> super::error::Result<Waiting> {
    let n = SPARES.fetch_add(1, Ordering::Relaxed);
    // Only cgroup v1 renames a directory: on v2 the child joins the tree's cgroup when its
    // program comes (the spare still saves the shim's exec).
    let cgroup = match cgroup::mode() {
        Containment::CgroupV1 => cgroup::plan(&format!("spare/{}-{n}", std::process::id())),
        _ => None,
    };
    let spec = SpareSpec { cgroup, warm: warm.map(|(policy, _)| policy.clone()), split: warm.is_some_and(|(_, split)| split) };
    let mut env = env.clone();
    env.insert(SPARE_ENV.to_owned(), serde_json::to_string(&spec)?);
    // The directory comes with the launch.
    Waiting::start(command, env, Path::new("/"), "shim/spare".into())
}

// ----- the spare's side -----

/// What a spare made before its launch: its cgroup and the child waiting in it.
pub struct Made {
    cgroup: Option<Cgroup>,
    child: Option<Prepared>,
    warm: Option<Policy>,
    split: bool,
    /// [`crate::sandbox::identity`] of the warm sandbox's policy, taken before it was made.
    seen: Vec<Option<(u64, u64)>>,
}

/// The prepared child for the program (a warm sandbox's: under the policy it names), and
/// whether it already sits in the program's cgroup.
pub struct Child {
    /// The waiting child.
    pub prepared: Prepared,
    /// It is in the launch's cgroup already (else it joins at its exec; a warm sandbox cannot).
    pub joined: bool,
    /// A warm sandbox's policy: only a launch with an equal one may use it.
    pub warm: Option<Policy>,
    /// The warm sandbox's output is split (stdout and stderr apart): only a launch whose output
    /// is may use it.
    pub split: bool,
    /// What the policy's paths were ([`crate::sandbox::identity`]) before the warm sandbox was
    /// made: it may start a program only while they are the same.
    pub seen: Vec<Option<(u64, u64)>>,
}

impl Made {
    /// In a shim started as a spare ([`SPARE_ENV`] set): make the cgroup and fork the child.
    /// `None` in an ordinary shim, or when that fails (then the launch goes the usual way).
    /// Call while the process is single-threaded (before the shim's runtime starts).
    pub fn from_env() -> Option<Made> {
        let spec: SpareSpec = serde_json::from_str(&std::env::var(SPARE_ENV).ok()?).ok()?;
        // The child runs ordinary code after the fork: only from a process of one thread (a
        // shim run by a host that already started threads, e.g. the Node binding's, goes the
        // usual way).
        let threads = std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0);
        if threads != 1 {
            return None;
        }
        let cgroup = match spec.cgroup.as_ref().map(Plan::create).transpose() {
            Ok(cgroup) => cgroup,
            Err(why) => {
                crate::disk::say(format_args!("spare shim: {why}; the launch goes the usual way"));
                return None;
            }
        };
        let dirs = cgroup.as_ref().map(Cgroup::dirs).unwrap_or_default();
        let seen = spec.warm.as_ref().map(crate::sandbox::identity).unwrap_or_default();
        let made = match &spec.warm {
            Some(policy) => {
                let helper = super::own::sandbox_helper();
                // SAFETY: called before the shim starts any thread.
                unsafe {
                    prepared::prepare_warm(&dirs, spec.split, |fd| {
                        crate::sandbox::bwrap::warm_command(policy, &helper, fd).unwrap_or_default()
                    })
                }
            }
            // SAFETY: called before the shim starts any thread.
            None => unsafe { prepared::prepare(&dirs) },
        };
        match made {
            Ok(child) => Some(Made { cgroup, child: Some(child), warm: spec.warm, split: spec.split, seen }),
            Err(e) => {
                crate::disk::say(format_args!("spare shim: {e}; the launch goes the usual way"));
                if let Some(cgroup) = cgroup {
                    cgroup.remove();
                }
                None
            }
        }
    }

    /// Turn what was made into the launch's: the cgroup `plan` plans (the spare's, renamed) and
    /// the child. Falls back to [`Plan::create`] and no child when the rename fails. Errors:
    /// [`Plan::create`]'s.
    pub fn adopt(mut self, plan: Option<&Plan>) -> Result<(Option<Cgroup>, Option<Child>), cgroup::Error> {
        let (warm, split, seen) = (self.warm.take(), self.split, std::mem::take(&mut self.seen));
        let child = self.child.take();
        let child = move |joined: bool| child.map(|prepared| Child { prepared, joined, warm, split, seen });
        match (self.cgroup.take(), plan) {
            (None, None) => Ok((None, child(true))),
            (None, Some(plan)) => Ok((Some(plan.create()?), child(false))),
            (Some(spare), None) => {
                drop(child);
                spare.remove();
                Ok((None, None))
            }
            (Some(spare), Some(plan)) => match rename(&spare, plan) {
                Ok(cgroup) => Ok((Some(cgroup), child(true))),
                Err(why) => {
                    crate::disk::say(format_args!("spare shim: {why}; the program's cgroup is made anew"));
                    // The child is killed and reaped first: the directories are empty then.
                    drop(child);
                    spare.remove();
                    Ok((Some(plan.create()?), None))
                }
            },
        }
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        drop(self.child.take());
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.remove();
        }
    }
}

/// Rename each of `spare`'s directories to `plan`'s of the same hierarchy, then set `plan`'s
/// limits. On failure the spare's directories that were renamed are renamed back.
fn rename(spare: &Cgroup, plan: &Plan) -> Result<Cgroup, cgroup::Error> {
    let from = spare.hierarchy_dirs();
    let mut done = Vec::new();
    for (i, (h2, new)) in plan.dirs.iter().enumerate() {
        let (old, moved) = match from.get(i) {
            Some((h, old)) if h == h2 && from.len() == plan.dirs.len() => (old, std::fs::rename(old, new).map_err(|e| e.to_string())),
            other => (other.map_or(new, |(_, old)| old), Err("the spare's cgroup has other hierarchies than the launch's".to_owned())),
        };
        if let Err(why) = moved {
            for (old, new) in done {
                let _ = std::fs::rename(new, old);
            }
            return Err(cgroup::Error::Rename { from: old.clone(), to: new.clone(), why });
        }
        done.push((old.clone(), new.clone()));
    }
    plan.limit()
}
