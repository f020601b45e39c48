//! The Space registry as the supervisor sees it: registering a Space (name and root checks,
//! idempotent re-registration, `replace` for a changed one), listing them, and the lookups every
//! run operation starts with (a Space by name, a run inside a Space).
//!
//! Policy belongs to the directory, not the name. A root is refused when it is `/`, or equals,
//! contains or lies inside a protected path (the state dir with its socket, tokens and run
//! directories; a `--token-file` outside it): through such a Space `read` would hand out the
//! daemon's secrets. A root that equals, contains or lies inside another Space's root must be at
//! least as strict as that Space (read-only if it is read-only, `approvals: confirm` if it
//! confirms, `network: none` if its network is off), so a second name cannot lift a policy;
//! only `replace` (an operator's deliberate choice) registers a laxer overlap.

use std::path::{Path, PathBuf};

use spaces_sdk::{bounded, Approvals, ErrorCode, SpaceNetwork, SpaceRecord};
use spaces_store::runs::RunRow;
use spaces_store::Store;

use crate::error::{refuse, Result};

/// Register `space` (see [`super::Supervisor::space_add`] for the rules and errors).
pub(super) fn add(store: &Store, space: &SpaceRecord, replace: bool) -> Result<SpaceRecord> {
    let name_ok = !space.name.is_empty()
        && space.name.len() <= 64
        && space.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(refuse(
            ErrorCode::InvalidArgument,
            format!("invalid Space name {:?}: use 1-64 letters, digits, '-', '_' or '.'", bounded(&space.name)),
        ));
    }
    if !Path::new(&space.root).is_absolute() {
        // Never resolved against the daemon's working directory, which is not the caller's.
        return Err(refuse(
            ErrorCode::InvalidArgument,
            format!("Space root {:?} is relative; give an absolute path (the CLI makes it absolute for you)", bounded(&space.root)),
        ));
    }
    refuse_home(Path::new(&space.root))?;
    let root = std::fs::canonicalize(&space.root).map_err(|e| {
        refuse(ErrorCode::InvalidArgument, format!("Space root {:?} is not usable: {e}; give an existing directory", bounded(&space.root)))
    })?;
    if !root.is_dir() {
        return Err(refuse(ErrorCode::InvalidArgument, format!("Space root {} is not a directory", root.display())));
    }
    refuse_protected(&root, &store.protected())?;
    let record = SpaceRecord {
        name: space.name.clone(),
        root: root.display().to_string(),
        read_only: space.read_only,
        approvals: space.approvals,
        network: space.network,
    };
    if let Some(existing) = store.space_get(&record.name)? {
        if existing == record {
            return Ok(record);
        }
        if !replace {
            return Err(refuse(
                ErrorCode::WorkspaceExists,
                format!(
                    "Space {:?} is already registered as {} ({}); \
                     to change it, add it again with --replace (HTTP: ?replace=true)",
                    existing.name,
                    existing.root,
                    policy(&existing)
                ),
            ));
        }
    }
    if !replace {
        refuse_laxer_overlap(&record, &root, &store.space_list()?)?;
    }
    store.space_put(&record)?;
    Ok(record)
}

/// Refuses the daemon user's home directory, or a directory above it, as a Space root: agents
/// and commands would reach `~/.ssh`, `~/.aws` and every other project. Errors:
/// `INVALID_ARGUMENT` saying to register a project directory.
fn refuse_home(root: &Path) -> Result<()> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute() && h.parent().is_some()) else {
        return Ok(());
    };
    let home = std::fs::canonicalize(&home).unwrap_or(home);
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    if home.starts_with(&root) {
        return Err(refuse(
            ErrorCode::InvalidArgument,
            format!(
                "a Space root cannot be {} (the home directory {} or above it: its agents would reach ~/.ssh, ~/.aws and every project); register a project directory",
                root.display(),
                home.display()
            ),
        ));
    }
    Ok(())
}

/// True when `a` equals, contains or lies inside `b` (whole path components).
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Refuses a root that is `/` or overlaps one of the `protected` paths. Errors:
/// `INVALID_ARGUMENT` naming the protected path.
fn refuse_protected(root: &Path, protected: &[PathBuf]) -> Result<()> {
    if root.parent().is_none() {
        return Err(refuse(
            ErrorCode::InvalidArgument,
            "a Space root cannot be / (it holds the daemon's own state); register a project directory",
        ));
    }
    for p in protected {
        // A protected path that does not exist (yet) is compared as given.
        let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        if overlaps(root, &p) {
            return Err(refuse(
                ErrorCode::InvalidArgument,
                format!(
                    "Space root {} overlaps {}, which holds the daemon's state and secrets; register a directory that neither contains it nor lies inside it",
                    root.display(),
                    p.display()
                ),
            ));
        }
    }
    Ok(())
}

/// True when `a`'s policy is at least as strict as `b`'s: read-only if `b` is, confirming if `b`
/// confirms, without network if `b` is.
fn at_least_as_strict(a: &SpaceRecord, b: &SpaceRecord) -> bool {
    (a.read_only || !b.read_only)
        && (a.approvals == Approvals::Confirm || b.approvals == Approvals::Off)
        && (a.network == SpaceNetwork::None || b.network == SpaceNetwork::Enabled)
}

/// A Space's policy for a message: `read_only: B, approvals: A, network: N`.
fn policy(s: &SpaceRecord) -> String {
    format!("read_only: {}, approvals: {}, network: {}", s.read_only, s.approvals.as_str(), s.network.as_str())
}

/// Refuses `record` (rooted at `root`) when it overlaps another Space of `spaces` with a
/// stricter policy. Errors: `INVALID_ARGUMENT` naming that Space and how to proceed.
fn refuse_laxer_overlap(record: &SpaceRecord, root: &Path, spaces: &[SpaceRecord]) -> Result<()> {
    let stricter =
        spaces.iter().filter(|s| s.name != record.name && overlaps(root, Path::new(&s.root))).find(|s| !at_least_as_strict(record, s));
    match stricter {
        None => Ok(()),
        Some(s) => Err(refuse(
            ErrorCode::InvalidArgument,
            format!(
                "Space root {} overlaps Space {:?} ({}, {}), and this policy ({}) is laxer: \
                 a Space's policy belongs to its directory; register at least as strict a policy, or (operator) add it with --replace (HTTP: ?replace=true) to accept the overlap",
                root.display(),
                s.name,
                s.root,
                policy(s),
                policy(record)
            ),
        )),
    }
}

/// Every registered Space.
pub(super) fn list(store: &Store) -> Result<Vec<SpaceRecord>> {
    Ok(store.space_list()?)
}

/// The Space `name`. Errors: `WORKSPACE_NOT_FOUND`, naming the command that registers it.
pub(super) fn space(store: &Store, name: &str) -> Result<SpaceRecord> {
    store.space_get(name)?.ok_or_else(|| {
        refuse(
            ErrorCode::WorkspaceNotFound,
            format!("no Space named {:?} on this host; register it with `spacesd space add NAME PATH`", bounded(name)),
        )
    })
}

/// The run `run_id` of Space `space`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND` (also for a
/// run of another Space).
pub(super) fn run_in_space(store: &Store, space: &str, run_id: &str) -> Result<RunRow> {
    self::space(store, space)?;
    match store.run_get(run_id)? {
        Some(run) if run.space == space => Ok(run),
        _ => Err(refuse(
            ErrorCode::RunNotFound,
            format!(
                "no run {:?} in Space {:?}; list runs with `spacesd agent list --space {}`",
                bounded(run_id),
                bounded(space),
                bounded(space)
            ),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn record(name: &str, root: &Path, read_only: bool, approvals: Approvals) -> SpaceRecord {
        SpaceRecord { name: name.into(), root: root.display().to_string(), read_only, approvals, network: SpaceNetwork::Enabled }
    }

    /// A store in `<tmp>/state` and a project dir `<tmp>/work/proj` with `sub/` inside.
    fn setup() -> (tempfile::TempDir, Store, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let dir_path = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(dir_path.join("state/runs")).unwrap();
        std::fs::create_dir_all(dir_path.join("work/proj/sub")).unwrap();
        let store = Store::open(&dir_path.join("state/spaces.db")).unwrap();
        (dir, store, dir_path)
    }

    fn refused(r: Result<SpaceRecord>) -> String {
        let e = r.unwrap_err().to_api();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{}", e.message);
        e.message
    }

    #[test]
    fn roots_reaching_the_daemons_state_are_refused_even_with_replace() {
        let (_tmp, store, base) = setup();
        let secret = base.join("elsewhere/token");
        std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
        std::fs::write(&secret, "t").unwrap();
        store.protect(&secret);
        for root in [Path::new("/"), &base, &base.join("state"), &base.join("state/runs"), &base.join("elsewhere")] {
            let msg = refused(add(&store, &record("x", root, true, Approvals::Confirm), true));
            assert!(msg.contains("cannot be /") || msg.contains("holds the daemon's state"), "{msg}");
        }
        add(&store, &record("proj", &base.join("work/proj"), false, Approvals::Off), false).unwrap();
    }

    #[test]
    fn an_overlapping_root_must_be_at_least_as_strict_unless_replaced() {
        let (_tmp, store, base) = setup();
        let proj = base.join("work/proj");
        let sub = proj.join("sub");
        add(&store, &record("ro", &proj, true, Approvals::Off), false).unwrap();
        add(&store, &record("held", &sub, true, Approvals::Confirm), false).unwrap();
        // An alias, a Space inside and one around: all laxer, all refused.
        for (name, root, read_only, approvals) in [
            ("alias", &proj, false, Approvals::Off),
            ("inner", &sub, true, Approvals::Off),
            ("outer", &base.join("work"), false, Approvals::Off),
        ] {
            let msg = refused(add(&store, &record(name, root, read_only, approvals), false));
            assert!(msg.contains("laxer") && msg.contains("--replace"), "{msg}");
        }
        // At least as strict: allowed.
        add(&store, &record("view", &proj, true, Approvals::Confirm), false).unwrap();
        // The operator's replace accepts the overlap.
        add(&store, &record("alias", &proj, false, Approvals::Off), true).unwrap();
        assert!(!store.space_get("alias").unwrap().unwrap().read_only);
    }

    #[test]
    fn a_spaces_network_is_stored_and_an_overlap_may_not_open_it() {
        let (_tmp, store, base) = setup();
        let proj = base.join("work/proj");
        let offline = SpaceRecord { network: SpaceNetwork::None, ..record("offline", &proj, false, Approvals::Off) };
        add(&store, &offline, false).unwrap();
        assert_eq!(store.space_get("offline").unwrap().unwrap().network, SpaceNetwork::None);
        assert_eq!(add(&store, &offline, false).unwrap(), offline, "the same registration again is a no-op");
        // The same name with the network on is a change: refused without replace, naming both.
        let online = SpaceRecord { network: SpaceNetwork::Enabled, ..offline.clone() };
        let e = add(&store, &online, false).unwrap_err().to_api();
        assert_eq!(e.code, ErrorCode::WorkspaceExists, "{}", e.message);
        assert!(e.message.contains("network: none"), "{}", e.message);
        // Another name over the same directory or inside it, with the network on: laxer.
        for (name, root) in [("alias", &proj), ("inner", &proj.join("sub"))] {
            let msg = refused(add(&store, &record(name, root, false, Approvals::Off), false));
            assert!(msg.contains("laxer") && msg.contains("network: enabled"), "{msg}");
        }
        add(&store, &SpaceRecord { network: SpaceNetwork::None, ..record("inner", &proj.join("sub"), false, Approvals::Off) }, false)
            .unwrap();
        add(&store, &online, true).unwrap();
        assert_eq!(store.space_get("offline").unwrap().unwrap().network, SpaceNetwork::Enabled, "replace changes it");
    }
}
