//! The Landlock level: where bubblewrap cannot make a sandbox (it is not installed, or user
//! namespaces are off, as in many containers), the helper ([`super::enter`]) confines the
//! program itself with Landlock (the kernel's unprivileged access control, `landlock(7)`, through
//! the `landlock` crate) before its seccomp filter and its exec. No namespace is made: the tree
//! sees the host's processes and paths where they really are.
//!
//! What the ruleset, derived from the same [`Policy`] as the bubblewrap command line
//! ([`rules`]), allows:
//! - read and execute on the host, except the hidden paths (state dir, token file, local volume,
//!   other Spaces' roots), which the tree cannot open at all. Landlock only allows (a rule on a
//!   folder covers all beneath it), so `/` is not granted whole: along the path from `/` down to
//!   each hidden path, each sibling is granted on its own ([`rules`]). The folders on such a
//!   path cannot be listed (a rule on one would cover the hidden path too); what they hold can
//!   be opened by name. Symbolic links are not followed: their targets are granted where they
//!   are. `/dev` only as a few devices (`/dev/null`, terminals, random): a root tree must not
//!   read a disk holding the state dir;
//! - read and write on the writable paths: the Space root (unless read-only), the run's home,
//!   the run's API directory and a private temporary directory ([`Policy::tmp`], `TMPDIR`);
//!   never making device nodes;
//! - from ABI 6, no signal to and no connection to an abstract Unix socket of any process
//!   outside the tree's own domain (the daemon, its shims, other trees, the host);
//! - with `network: false`, from ABI 4, no TCP bind or connect (UDP from the ABI that has it);
//! - from ABI 9, no connection to a Unix socket by path outside the writable paths.
//!
//! Landlock also keeps the tree from ptracing any process outside its domain (and so from
//! reading their `/proc/PID/mem` or `environ`). It is best effort: what the kernel lacks is
//! left out, and [`restrict`] says which ABI it reached ([`Reached`]; the daemon probes it at
//! start and tells in `workspace_info`, `agent_capabilities` and the runs' notes). A kernel
//! without Landlock at all is refused.

use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};

use super::{Error, Policy};

/// The newest Landlock ABI this module asks for; the running kernel gives what it has of it.
const ASKED: ABI = ABI::V10;

/// The device nodes a tree may open (read and write): everything else of `/dev` is hidden.
/// `/dev/shm` is not among them (shared by every process of the host).
pub const DEVICES: [&str; 8] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"];

/// The name of the private temporary directory a shim makes in its own directory for a tree
/// at this level ([`Policy::tmp`]).
pub const TMP_DIR: &str = "tmp";

/// The paths of a ruleset, as [`rules`] derives them from a [`Policy`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Read and execute (folders: list too), each covering everything beneath it.
    pub read: Vec<PathBuf>,
    /// Read, write, make and remove (no device nodes), each covering everything beneath it.
    pub write: Vec<PathBuf>,
}

/// What [`restrict`] reached on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reached {
    /// The Landlock ABI in force (1 to 10; 0: none).
    pub abi: u8,
    /// Every right this module knows (up to ABI 10) is enforced; false on any older kernel,
    /// whose ABI says what it lacks ([`Reached::scoped`], [`Reached::tcp`],
    /// [`Reached::unix_paths`]).
    pub full: bool,
}

impl Reached {
    /// Signals and abstract Unix sockets are scoped to the tree (ABI 6).
    pub fn scoped(self) -> bool {
        self.abi >= 6
    }

    /// TCP can be refused (`network: false`; ABI 4).
    pub fn tcp(self) -> bool {
        self.abi >= 4
    }

    /// Unix sockets by path are refused outside the writable paths (ABI 9).
    pub fn unix_paths(self) -> bool {
        self.abi >= 9
    }
}

/// The ruleset's paths for `policy`: see the module doc. Hidden paths are taken where they
/// really are (symlinks in them resolved); one that does not exist yet keeps its name free
/// (nothing beneath its nearest existing folder is granted under that name); one inside another
/// is hidden with it. Unreadable folders on the way are left out (nothing granted in them).
pub fn rules(policy: &Policy) -> Rules {
    let mut hidden: Vec<PathBuf> = policy.hidden.iter().map(|p| resolve(p)).collect();
    // `/dev` is split like a hidden path's parent; its devices come back below.
    hidden.push(PathBuf::from("/dev"));
    let mut read = Vec::new();
    cover(Path::new("/"), &hidden, &mut read);
    read.extend(policy.readonly.iter().filter(|p| p.exists()).cloned());
    let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).filter(|p| p.exists()).collect();
    write.extend(policy.writable.iter().chain(&policy.api_dir).chain(&policy.home).chain(&policy.tmp).filter(|p| p.exists()).cloned());
    Rules { read, write }
}

/// Grants `dir` whole into `out`, or, when a hidden path is beneath it, each of its entries the
/// same way (the hidden ones and symbolic links left out).
fn cover(dir: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| h == dir) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut children: Vec<PathBuf> =
        entries.filter_map(|e| e.ok()).filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink())).map(|e| e.path()).collect();
    children.sort();
    for child in children {
        cover(&child, hidden, out);
    }
}

/// `path` absolute with the symlinks of its longest existing part resolved, the rest appended.
fn resolve(path: &Path) -> PathBuf {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rest = Vec::new();
    let mut head = path.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(head) {
            return rest.iter().rev().fold(real, |acc: PathBuf, name| acc.join(name));
        }
        match (head.parent(), head.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                head = parent;
            }
            _ => return path,
        }
    }
}

/// The helper's command line for `policy` at this level: `helper sandbox-exec --landlock
/// POLICY-JSON -- argv` (the working directory and environment are the caller's). Errors:
/// [`Error::Usage`] if the policy cannot be written as JSON (a bug).
pub fn command(policy: &Policy, helper: &[String], argv: &[String]) -> Result<Vec<String>, Error> {
    let json = serde_json::to_string(policy).map_err(|e| Error::Usage(format!("the policy cannot be written: {e}")))?;
    let mut out = helper.to_vec();
    out.extend(["sandbox-exec".to_owned(), "--landlock".to_owned(), json, "--".to_owned()]);
    out.extend(argv.iter().cloned());
    Ok(out)
}

/// Confines this thread (and what it execs) to `policy`'s ruleset, with `no_new_privs`.
/// Errors: [`Error::Enter`] when the kernel has no Landlock (enabled), when `network: false`
/// cannot be enforced (ABI below 4), or when the ruleset cannot be built or applied.
pub fn restrict(policy: &Policy) -> Result<Reached, Error> {
    let enter = |what: &'static str| move |e: landlock::RulesetError| Error::Enter { what, source: std::io::Error::other(e.to_string()) };
    let rules = rules(policy);
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(ASKED)).map_err(enter("handle file access"))?;
    if !policy.network {
        // Off the network is a promise: no kernel support, no start.
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(enter("keep the network off (Landlock ABI 4 needed)"))?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessNet::from_all(ASKED))
            .map_err(enter("keep the network off"))?;
    }
    let status = ruleset
        .scope(Scope::from_all(ASKED))
        .map_err(enter("scope signals and abstract sockets"))?
        .create()
        .map_err(enter("create the Landlock ruleset"))?
        .add_rules(path_beneath_rules(&rules.read, AccessFs::from_read(ASKED)))
        .map_err(enter("add the read rules"))?
        .add_rules(path_beneath_rules(&rules.write, write_access()))
        .map_err(enter("add the write rules"))?
        .restrict_self()
        .map_err(enter("apply the Landlock ruleset"))?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => number(effective_abi),
        _ => 0,
    };
    if status.ruleset == RulesetStatus::NotEnforced || abi == 0 {
        return Err(Error::Enter {
            what: "apply the Landlock ruleset",
            source: std::io::Error::other("this kernel has no Landlock (or it is not enabled: see lsm= on its command line)"),
        });
    }
    Ok(Reached { abi, full: status.ruleset == RulesetStatus::FullyEnforced })
}

/// The number of `abi` (the crate's enum is not numbered outside it).
fn number(abi: ABI) -> u8 {
    let known = [ABI::V1, ABI::V2, ABI::V3, ABI::V4, ABI::V5, ABI::V6, ABI::V7, ABI::V8, ABI::V9, ABI::V10];
    known.iter().filter(|v| abi >= **v).count() as u8
}

/// The rights a write rule carries: everything Landlock knows but making device nodes.
fn write_access() -> BitFlags<AccessFs> {
    AccessFs::from_all(ASKED) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn policy(hidden: Vec<PathBuf>, writable: Vec<PathBuf>) -> Policy {
        Policy { level: super::super::Level::Landlock, hidden, writable, ..Default::default() }
    }

    /// Every path granted for reading, relative to `base`, for those beneath it.
    fn under(rules: &Rules, base: &Path) -> Vec<String> {
        let mut v: Vec<String> = rules.read.iter().filter_map(|p| p.strip_prefix(base).ok()).map(|p| p.display().to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn siblings_along_the_way_to_a_hidden_path_are_granted_and_it_is_not() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        for d in ["a/state/runs", "a/other", "b", "c/space"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("a/file"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("a/state"), base.join("link")).unwrap();
        let rules = rules(&policy(vec![base.join("a/state"), base.join("c/space")], vec![base.join("b")]));
        assert_eq!(under(&rules, &base), ["a/file", "a/other", "b"], "{rules:?}");
        // Nothing above the hidden path is granted whole (that would cover it).
        for p in &rules.read {
            assert!(!base.join("a/state").starts_with(p) && !base.join("c/space").starts_with(p), "{p:?} covers a hidden path");
        }
        assert!(rules.write.contains(&base.join("b")) && rules.write.contains(&PathBuf::from("/dev/null")));
        assert!(!rules.read.contains(&PathBuf::from("/dev")) && !rules.read.iter().any(|p| p.starts_with("/dev/")), "{rules:?}");
        assert!(rules.read.contains(&PathBuf::from("/usr")) || !Path::new("/usr").exists());
    }

    #[test]
    fn nested_missing_and_symlinked_hidden_paths() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        for d in ["s/runs/r1", "s/tools", "x"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(base.join("s"), base.join("alias")).unwrap();
        // Hidden: the state dir by a symlink, the token inside it, a Space not made yet in `x`.
        let mut p = policy(vec![base.join("alias"), base.join("s/token"), base.join("x/later/space")], vec![]);
        p.readonly = vec![base.join("s/tools")];
        let rules = rules(&p);
        assert_eq!(under(&rules, &base), ["s/tools"], "{rules:?}");
        // `x` holds nothing yet: nothing is granted under the name the Space will have.
        std::fs::create_dir_all(base.join("x/later")).unwrap();
        std::fs::create_dir_all(base.join("x/near")).unwrap();
        let rules = super::rules(&p);
        assert_eq!(under(&rules, &base), ["s/tools", "x/near"], "{rules:?}");
    }

    #[test]
    fn resolve_keeps_a_missing_tail() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::os::unix::fs::symlink(&base, base.join("l")).unwrap();
        assert_eq!(resolve(&base.join("l/no/such")), base.join("no/such"));
    }

    #[test]
    fn the_command_carries_the_policy() {
        let p = policy(vec![PathBuf::from("/srv/state")], vec![PathBuf::from("/srv/space")]);
        let argv = command(&p, &["/bin/helper".into()], &["sh".into(), "-c".into(), "true".into()]).unwrap();
        assert_eq!(&argv[..3], ["/bin/helper", "sandbox-exec", "--landlock"]);
        assert_eq!(serde_json::from_str::<Policy>(&argv[3]).unwrap(), p);
        assert_eq!(&argv[4..], ["--", "sh", "-c", "true"]);
        assert!(!write_access().contains(AccessFs::MakeBlock));
    }
}
