//! Resource ceilings per run and per command: one cgroup per process tree.
//!
//! A shim's subreaper ([`crate::shim`]) already keeps every descendant of its program while the
//! shim lives, but it caps nothing, and a process the shim no longer sees (the shim was killed)
//! is lost. A cgroup holds every descendant whatever it does (`setsid`, `env -i`, double forks,
//! a dead shim) and carries the limits: process count (`pids.max`) and memory (`memory.max` on
//! v2, `memory.limit_in_bytes` on v1).
//!
//! Model:
//! - **Found once** ([`init`], by the daemon at start): the hierarchy is read from
//!   `/proc/self/mountinfo` and `/proc/self/cgroup`. cgroup v2 is used when this process's own
//!   v2 cgroup offers the `pids` controller (`memory` too, if a memory limit is set); else v1
//!   with a writable `pids` hierarchy (and `memory`, when mounted and a memory limit is set: a
//!   memory cgroup per tree without a limit caps nothing and costs the kernel much to end).
//!   Trees go under the daemon's
//!   own cgroup, in `<own>/spaces/<host id>-<tree>`, one directory per hierarchy on v1 (the
//!   hierarchies may place this process differently: `memory` is often nested where `pids` is
//!   not). On v2 the daemon's cgroup must delegate `pids` and `memory` to its children; a cgroup
//!   that holds processes cannot (the "no internal processes" rule), so the daemon first moves
//!   itself into the leaf `<own>/spacesd`. A probe tree is made and removed; when anything
//!   fails (not root, no writable controller, cgroups turned off), [`mode`] says
//!   [`Containment::Subreaper`] and the reason is logged once.
//! - **Planned by the daemon, made by the shim**: [`plan`] names a tree's directories and
//!   limits ([`Plan`], handed to the shim on stdin with its spec); the shim makes them
//!   ([`Plan::create`]) before it starts its program, and the program joins them itself between
//!   fork and exec (`SpawnSpec::cgroups`: it writes `0` to each `cgroup.procs`), so the first
//!   instruction of the program already runs inside, and so does everything it starts. A shim
//!   that cannot make its cgroup refuses to start the program (never runs it uncontained where
//!   the host reports cgroups).
//! - **Ended as a whole**: [`Cgroup::kill`] writes `1` to `cgroup.kill` (v2, Linux 5.14+) and
//!   sends SIGKILL to every pid in `cgroup.procs`, again until it is empty (a fork between the
//!   read and the kill is caught by the next round; `pids.max` bounds how many there can be).
//!   [`Cgroup::remove`] does that and removes the directories; the shim calls it when its tree
//!   is done and when it exits.
//!
//! The shim itself stays outside its tree's cgroup: ending the tree never ends the shim.
//! Processes of the daemon's uid are root here or not; root inside a tree can move itself out
//! (it can write any `cgroup.procs`): cgroups bound what a tree does by accident or by fork
//! loop, not what root does on purpose (see docs/operations.md, Security model).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
pub use spaces_sdk::tools::{Containment, ProcessContainment};

/// The ceilings a tree gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Most tasks (processes and threads) in the tree at once; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    /// Most memory the tree may use, in bytes (its processes are OOM-killed past it); `None`:
    /// no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_bytes: Option<u64>,
}

/// Which controller files a directory carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hierarchy {
    /// cgroup v2: `pids.max`, `memory.max`, `cgroup.kill`.
    Unified,
    /// cgroup v1 `pids`: `pids.max`.
    Pids,
    /// cgroup v1 `memory`: `memory.limit_in_bytes`.
    Memory,
}

/// One tree's cgroup as the daemon plans it: its directories (one per hierarchy) and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub dirs: Vec<(Hierarchy, PathBuf)>,
    #[serde(default)]
    pub limits: Limits,
}

/// A made cgroup (its directories exist, its limits are set).
#[derive(Debug, Clone)]
pub struct Cgroup {
    dirs: Vec<(Hierarchy, PathBuf)>,
}

/// What this host contains trees with, found by [`init`].
#[derive(Debug, Clone)]
struct Host {
    mode: Containment,
    /// Where trees go: `<own>/spaces` per hierarchy.
    bases: Vec<(Hierarchy, PathBuf)>,
    /// What this daemon's tree directories start with: `<host id>-`.
    prefix: String,
    limits: Limits,
}

static HOST: OnceLock<Option<Host>> = OnceLock::new();

/// Find and set up this host's cgroups for trees with `limits`, once per process (later calls
/// change nothing); `enabled` false keeps the subreaper. `host_id` separates the trees of two
/// daemons of one host. Returns what is in force; when cgroups cannot be used, logs why once.
pub fn init(enabled: bool, limits: Limits, host_id: &str) -> Containment {
    let host = HOST.get_or_init(|| {
        if !enabled {
            tracing::info!("cgroups are turned off: each run and command is held by its shim's subreaper only");
            return None;
        }
        match detect(host_id, limits) {
            Ok(host) => {
                tracing::info!(mode = ?host.mode, ?limits, "runs and commands each get a cgroup");
                Some(host)
            }
            Err(why) => {
                eprintln!("spacesd: no cgroups for runs and commands ({why}); each is held by its shim's subreaper only, without process or memory limits");
                None
            }
        }
    });
    host.as_ref().map_or(Containment::Subreaper, |h| h.mode)
}

/// What holds trees in this process: a cgroup mode once [`init`] found one, else
/// [`Containment::Subreaper`].
pub fn mode() -> Containment {
    HOST.get().and_then(Option::as_ref).map_or(Containment::Subreaper, |h| h.mode)
}

/// The limits trees get (all `None` without cgroups).
pub fn limits() -> Limits {
    HOST.get().and_then(Option::as_ref).map(|h| h.limits).unwrap_or_default()
}

/// [`mode`] and [`limits`] as `workspace_info` and `agent_capabilities` report them.
pub fn report() -> ProcessContainment {
    let limits = limits();
    ProcessContainment { mode: mode(), pids_max: limits.pids_max, memory_max_bytes: limits.memory_max_bytes }
}

/// The cgroup of the tree tagged `tag`, when the host has cgroups.
pub fn plan(tag: &str) -> Option<Plan> {
    let host = HOST.get()?.as_ref()?;
    let name = leaf_name(tag);
    let name = format!("{}{name}", host.prefix);
    Some(Plan { dirs: host.bases.iter().map(|(h, base)| (*h, base.join(&name))).collect(), limits: host.limits })
}

/// Remove the empty tree directories of this daemon (`<own>/spaces/<host id>-*`): those a
/// killed shim left (its processes were ended since, by the next daemon's recovery). A tree
/// that still holds a process is left alone: its shim may be alive.
pub fn sweep() {
    let Some(Some(host)) = HOST.get() else { return };
    for (_, base) in &host.bases {
        for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
            if !entry.file_name().to_str().is_some_and(|n| n.starts_with(&host.prefix)) {
                continue;
            }
            let path = entry.path();
            let empty = std::fs::read_to_string(path.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty());
            if empty {
                // Fails (EBUSY) if a process joined meanwhile: then it is in use.
                let _ = std::fs::remove_dir(&path);
            }
        }
    }
}

/// End everything in the tree tagged `tag` and remove its cgroup (its shim is gone, so nobody
/// else will). Blocking. False when the host has no cgroups or a directory is left.
pub fn end(tag: &str) -> bool {
    match plan(tag) {
        Some(plan) => Cgroup { dirs: plan.dirs }.remove(),
        None => false,
    }
}

/// [`end`] for every tree of this daemon whose tag starts with `tag_prefix` (all the process
/// generations of one run: `agent/<run>/`). Blocking. Returns how many trees were ended.
pub fn end_all(tag_prefix: &str) -> usize {
    let Some(Some(host)) = HOST.get() else { return 0 };
    let Some((_, first)) = host.bases.first() else { return 0 };
    let start = format!("{}{}", host.prefix, leaf_name(tag_prefix));
    let names: Vec<String> = std::fs::read_dir(first)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.starts_with(&start))
        .collect();
    for name in &names {
        Cgroup { dirs: host.bases.iter().map(|(h, b)| (*h, b.join(name))).collect() }.remove();
    }
    names.len()
}

/// A directory name for `tag` (`exec/proc-<uuid>` -> `exec-proc-<uuid>`).
fn leaf_name(tag: &str) -> String {
    let name: String = tag.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' }).collect();
    name.chars().take(200).collect()
}

/// A program's cgroup that could not be made, limited or renamed: what was done, to which
/// path, and the system's error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A directory or control file of the cgroup (`pids.max`, `memory.max`, ...) failed.
    #[error(transparent)]
    Io(#[from] crate::path_io::PathIo),
    /// A spare shim's cgroup could not become the launch's (its hierarchies differ, or
    /// rename(2) failed); the launch makes its own instead.
    #[error("cannot rename the cgroup {} to {}: {why}", from.display(), to.display())]
    Rename {
        /// The spare's directory.
        from: PathBuf,
        /// The launch's planned directory.
        to: PathBuf,
        /// rename(2)'s error, or why it was not tried.
        why: String,
    },
}

impl Plan {
    /// Make the directories and set the limits. Errors: [`Error::Io`], naming the file.
    pub fn create(&self) -> Result<Cgroup, Error> {
        let cgroup = Cgroup { dirs: self.dirs.clone() };
        for (hierarchy, dir) in &self.dirs {
            match std::fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    cgroup.remove_now();
                    return Err(crate::path_io::PathIo::at("create", dir)(e).into());
                }
            }
            if let Err(why) = set_limits(*hierarchy, dir, self.limits) {
                cgroup.remove_now();
                return Err(why);
            }
        }
        Ok(cgroup)
    }

    /// The planned directories, which exist already (a spare shim's cgroup renamed to them:
    /// [`crate::shim::spare`]), with the limits set. Errors: [`Error::Io`], naming the file.
    pub fn limit(&self) -> Result<Cgroup, Error> {
        for (hierarchy, dir) in &self.dirs {
            set_limits(*hierarchy, dir, self.limits)?;
        }
        Ok(Cgroup { dirs: self.dirs.clone() })
    }
}

fn set_limits(hierarchy: Hierarchy, dir: &Path, limits: Limits) -> Result<(), Error> {
    let write = |file: &str, value: String| {
        std::fs::write(dir.join(file), value).map_err(|e| Error::from(crate::path_io::PathIo::at("write", dir.join(file))(e)))
    };
    match hierarchy {
        Hierarchy::Unified => {
            if let Some(n) = limits.pids_max {
                write("pids.max", n.to_string())?;
            }
            if let Some(n) = limits.memory_max_bytes {
                write("memory.max", n.to_string())?;
            }
        }
        Hierarchy::Pids => {
            if let Some(n) = limits.pids_max {
                write("pids.max", n.to_string())?;
            }
        }
        Hierarchy::Memory => {
            if let Some(n) = limits.memory_max_bytes {
                write("memory.limit_in_bytes", n.to_string())?;
            }
        }
    }
    Ok(())
}

impl Cgroup {
    /// The directories with their hierarchies.
    pub fn hierarchy_dirs(&self) -> &[(Hierarchy, PathBuf)] {
        &self.dirs
    }

    /// The directories a process joins (one per hierarchy).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(_, d)| d.clone()).collect()
    }

    /// Every process in the tree now (the union over the hierarchies).
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs
            .iter()
            .filter_map(|(_, d)| std::fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect::<Vec<i32>>())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Send `signal` to every process in the tree; returns them.
    pub fn signal(&self, signal: Signal) -> Vec<i32> {
        let pids = self.pids();
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), signal);
        }
        pids
    }

    /// One round of ending the whole tree: `cgroup.kill` where the kernel has it (v2), and
    /// SIGKILL to every pid listed. Returns the pids signalled.
    pub fn kill(&self) -> Vec<i32> {
        for (hierarchy, dir) in &self.dirs {
            if *hierarchy == Hierarchy::Unified {
                let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            }
        }
        self.signal(Signal::SIGKILL)
    }

    /// End the tree (SIGKILL rounds until it is empty, for at most about 2 s) and remove the
    /// directories. Blocking. False when a directory is left (a process that would not die, or
    /// the OS refused).
    pub fn remove(&self) -> bool {
        for _ in 0..100 {
            if self.kill().is_empty() && self.remove_now() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Remove the (empty) directories now; true when none is left.
    fn remove_now(&self) -> bool {
        let mut gone = true;
        for (_, dir) in &self.dirs {
            match std::fs::remove_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // EBUSY: a process that was just killed has not left yet.
                Err(_) => gone = false,
            }
        }
        gone
    }
}

/// A cgroup mount: `(root within the hierarchy, mount point, fstype, super options)`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    root: String,
    point: PathBuf,
    v2: bool,
    options: Vec<String>,
}

/// The cgroup mounts listed in a `/proc/self/mountinfo` text.
fn mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (left.get(3), left.get(4), right.first()) else { continue };
        let v2 = match *fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        let options = right.get(2).map(|o| o.split(',').map(str::to_owned).collect()).unwrap_or_default();
        out.push(Mount { root: unescape(root), point: PathBuf::from(unescape(point)), v2, options });
    }
    out
}

/// Undo mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            out.push((bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This process's cgroup path in the v2 hierarchy (`0::PATH`) and per v1 controller, from a
/// `/proc/self/cgroup` text.
fn own_paths(proc_cgroup: &str) -> (Option<String>, Vec<(String, String)>) {
    let mut v2 = None;
    let mut v1 = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_owned());
        } else {
            for c in controllers.split(',') {
                v1.push((c.to_owned(), path.to_owned()));
            }
        }
    }
    (v2, v1)
}

/// Where this process's cgroup of `path` is, under `mount`.
fn dir_of(mount: &Mount, path: &str) -> Option<PathBuf> {
    let rel = if mount.root == "/" { path } else { path.strip_prefix(mount.root.as_str())? };
    let rel = rel.trim_start_matches('/');
    Some(if rel.is_empty() { mount.point.clone() } else { mount.point.join(rel) })
}

/// The own cgroup directories: `(v2 dir, v1 pids dir, v1 memory dir)`.
fn own_dirs(mountinfo: &str, proc_cgroup: &str) -> (Option<PathBuf>, Option<PathBuf>, Option<PathBuf>) {
    let mounts = mounts(mountinfo);
    let (v2_path, v1_paths) = own_paths(proc_cgroup);
    let v2 = v2_path.and_then(|p| mounts.iter().find(|m| m.v2).and_then(|m| dir_of(m, &p)));
    let v1 = |controller: &str| {
        let path = v1_paths.iter().find(|(c, _)| c == controller).map(|(_, p)| p.clone())?;
        let mount = mounts.iter().find(|m| !m.v2 && m.options.iter().any(|o| o == controller))?;
        dir_of(mount, &path)
    };
    (v2, v1("pids"), v1("memory"))
}

fn detect(host_id: &str, limits: Limits) -> Result<Host, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let proc_cgroup = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let (v2, pids, memory) = own_dirs(&mountinfo, &proc_cgroup);
    let mut why = Vec::new();
    if let Some(own) = v2 {
        let offered = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
        let offered: Vec<&str> = offered.split_whitespace().collect();
        let memory_needed = limits.memory_max_bytes.is_some();
        if offered.contains(&"pids") && (offered.contains(&"memory") || !memory_needed) {
            // Memory is delegated only for a memory limit (as for v1 below).
            match setup_v2(&own, memory_needed && offered.contains(&"memory")) {
                Ok(base) => {
                    let prefix = format!("{host_id}-");
                    return probe(Host { mode: Containment::CgroupV2, bases: vec![(Hierarchy::Unified, base)], prefix, limits });
                }
                Err(e) => why.push(format!("cgroup v2 at {}: {e}", own.display())),
            }
        } else {
            why.push(format!("cgroup v2 at {} offers no pids{} controller", own.display(), if memory_needed { "/memory" } else { "" }));
        }
    }
    match pids {
        Some(pids) => {
            let mut bases = Vec::new();
            let base = pids.join("spaces");
            std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
            bases.push((Hierarchy::Pids, base));
            // A memory cgroup per tree only to carry a memory limit: without one it limits
            // nothing, and ending it costs the kernel a walk of every mounted file system's
            // reclaim lists (`memcg_reparent_list_lrus`), each sandbox adding its own tmpfs
            // mounts: a stop-all of 1,000 sandboxed runs spent 3 of its 7 s there (issue 30).
            let memory = memory.filter(|_| limits.memory_max_bytes.is_some());
            match memory {
                Some(memory) => {
                    let base = memory.join("spaces");
                    match std::fs::create_dir_all(&base) {
                        Ok(()) => bases.push((Hierarchy::Memory, base)),
                        Err(e) if limits.memory_max_bytes.is_some() => {
                            return Err(format!("a memory limit is set but {} cannot be created: {e}", base.display()))
                        }
                        Err(_) => {}
                    }
                }
                None if limits.memory_max_bytes.is_some() => {
                    return Err("a memory limit is set but the host has no cgroup v1 memory hierarchy".into())
                }
                None => {}
            }
            probe(Host { mode: Containment::CgroupV1, bases, prefix: format!("{host_id}-"), limits })
        }
        None => {
            why.push("no cgroup v1 pids hierarchy".into());
            Err(why.join("; "))
        }
    }
}

/// v2: let `own` delegate pids (and memory) down to `<own>/spaces`, moving this process into
/// `<own>/spacesd` first when `own` holds processes. Returns the base.
fn setup_v2(own: &Path, memory: bool) -> Result<PathBuf, String> {
    let controllers = if memory { "+pids +memory" } else { "+pids" };
    let enable = |dir: &Path| {
        std::fs::write(dir.join("cgroup.subtree_control"), controllers)
            .map_err(|e| format!("cannot enable {controllers} in {}: {e}", dir.display()))
    };
    if enable(own).is_err() {
        // "No internal processes": a cgroup that delegates must hold none itself.
        let leaf = own.join("spacesd");
        std::fs::create_dir_all(&leaf).map_err(|e| format!("cannot create {}: {e}", leaf.display()))?;
        std::fs::write(leaf.join("cgroup.procs"), "0").map_err(|e| format!("cannot move the daemon into {}: {e}", leaf.display()))?;
        enable(own)?;
    }
    let spaces = own.join("spaces");
    std::fs::create_dir_all(&spaces).map_err(|e| format!("cannot create {}: {e}", spaces.display()))?;
    enable(&spaces)?;
    Ok(spaces)
}

/// Make and remove a probe tree (limits set, this process's pid never moved), and remove this
/// daemon's empty trees a killed shim left behind.
fn probe(host: Host) -> Result<Host, String> {
    let plan = Plan {
        dirs: host.bases.iter().map(|(h, b)| (*h, b.join(format!("{}probe-{}", host.prefix, std::process::id())))).collect(),
        limits: host.limits,
    };
    let made = plan.create().map_err(|e| e.to_string())?;
    if !made.remove() {
        return Err("the probe cgroup could not be removed".into());
    }
    for (_, base) in &host.bases {
        for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
            if entry.file_name().to_str().is_some_and(|n| n.starts_with(&host.prefix)) {
                // Fails (EBUSY) for a tree that still holds processes: a live shim's.
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
    Ok(host)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
24 30 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
25 24 0:23 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
26 24 0:24 /process_api /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
27 24 0:25 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
28 24 0:26 / /sys/fs/cgroup/with\\040space rw - cgroup cgroup rw,cpu,cpuacct
";
    const PROC_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/a2da
2:cpu,cpuacct:/x
0::/user.slice/u
";

    #[test]
    fn own_cgroups_are_found_under_their_mounts_with_the_mount_root_taken_off() {
        let (v2, pids, memory) = own_dirs(MOUNTINFO, PROC_CGROUP);
        assert_eq!(v2, Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice/u")));
        assert_eq!(pids, Some(PathBuf::from("/sys/fs/cgroup/pids")));
        assert_eq!(memory, Some(PathBuf::from("/sys/fs/cgroup/memory/a2da")));
        let m = mounts(MOUNTINFO);
        assert_eq!(m.last().unwrap().point, PathBuf::from("/sys/fs/cgroup/with space"));
        // A path outside the mount's root cannot be placed.
        let (_, _, memory) = own_dirs(MOUNTINFO, "4:memory:/elsewhere\n");
        assert_eq!(memory, None);
    }

    #[test]
    fn tags_become_single_directory_names() {
        assert_eq!(leaf_name("exec/proc-1a2b"), "exec-proc-1a2b");
        assert_eq!(leaf_name("agent/run_1/turn-2"), "agent-run_1-turn-2");
        assert!(!leaf_name("../..").contains('/'));
    }

    #[test]
    fn a_plan_sets_the_limits_of_its_hierarchies_and_removes_its_directories() {
        // A plain directory stands in for the cgroup file system (files are created on write).
        let tmp = tempfile::tempdir().unwrap();
        let limits = Limits { pids_max: Some(20), memory_max_bytes: Some(1 << 20) };
        let plan = Plan { dirs: vec![(Hierarchy::Pids, tmp.path().join("p")), (Hierarchy::Memory, tmp.path().join("m"))], limits };
        let made = plan.create().unwrap();
        assert_eq!(std::fs::read_to_string(tmp.path().join("p/pids.max")).unwrap(), "20");
        assert_eq!(std::fs::read_to_string(tmp.path().join("m/memory.limit_in_bytes")).unwrap(), "1048576");
        assert!(!tmp.path().join("p/memory.limit_in_bytes").exists());
        assert!(made.pids().is_empty());
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    }
}
