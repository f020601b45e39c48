//! A [`Policy`] as a bubblewrap command line (bubblewrap(1); `bwrap --help` lists the options).
//!
//! The mounts, in order (bubblewrap applies them in the order given, so a later one shows
//! through an earlier one):
//! 1. `--ro-bind / /`: the host read-only, submounts included;
//! 2. `--dev /dev` (a minimal `/dev`), `--proc /proc` (the new pid namespace's), private
//!    tmpfs on `/tmp`, `/dev/shm` and `/run` (`/run` holds the host's service sockets: systemd's,
//!    D-Bus's, a container engine's; none is for a sandbox);
//! 3. each hidden path: an empty tmpfs (a file: `/dev/null` bound read-only);
//! 4. each read-only path, then each writable path, bound at the same path (missing ones
//!    skipped: `--ro-bind-try`, `--bind-try`);
//! 5. the run's API directory at [`super::API_DIR`], its home at [`super::HOME_DIR`];
//! 6. the hidden folders' stand-ins and `/run` remounted read-only.
//!
//! Namespaces: pid, ipc, uts, mount (always, bubblewrap's
//! own), user (a non-root daemon), net (`network: false`). Every capability is dropped
//! (`--cap-drop ALL`: without it, bubblewrap run by root leaves root's capabilities to the
//! program) and `no_new_privs` is set, so no exec inside gains one back.

use std::path::{Path, PathBuf};

use super::{Error, Policy, API_DIR, HOME_DIR};

/// The bubblewrap command line that runs `argv` in `cwd` under `policy`, entering through
/// `helper` (the daemon's own command; `sandbox-exec` is appended). Errors:
/// [`Error::Unavailable`] for a path that is not UTF-8 (the command line is text).
pub fn command(policy: &Policy, helper: &[String], argv: &[String], cwd: &Path) -> Result<Vec<String>, Error> {
    let mut out = options(policy)?;
    out.extend(["--chdir".to_owned(), text(cwd)?]);
    out.extend(enter(policy, helper));
    out.push("--".into());
    out.extend(argv.iter().cloned());
    Ok(out)
}

/// The bubblewrap command line of a warm sandbox under `policy`: its helper takes every step
/// but the exec and then waits on the socket `fd` for its program (`sandbox-exec --await FD`,
/// [`super::enter::Order`]); it starts in `/` and enters the order's directory. Errors: as
/// [`command`].
pub fn warm_command(policy: &Policy, helper: &[String], fd: i32) -> Result<Vec<String>, Error> {
    let mut out = options(policy)?;
    out.extend(["--chdir".to_owned(), "/".to_owned()]);
    out.extend(enter(policy, helper));
    out.extend(["--await".to_owned(), fd.to_string()]);
    Ok(out)
}

/// `-- HELPER sandbox-exec [--max-processes N]`: the end of both command lines but what the
/// helper is told to run.
fn enter(policy: &Policy, helper: &[String]) -> Vec<String> {
    let mut out = vec!["--".to_owned()];
    out.extend(helper.iter().cloned());
    out.push("sandbox-exec".into());
    if let Some(n) = policy.max_processes {
        out.extend(["--max-processes".to_owned(), n.to_string()]);
    }
    out
}

/// `path` as text. Errors: [`Error::Unavailable`] for a path that is not UTF-8.
fn text(p: &Path) -> Result<String, Error> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::Unavailable(format!("the path {} is not UTF-8; the sandbox cannot mount it", p.display())))
}

/// Bubblewrap and its options for `policy`: namespaces and mounts, in the module doc's order.
fn options(policy: &Policy) -> Result<Vec<String>, Error> {
    let mut out = vec![text(&policy.bwrap)?];
    if policy.user_namespace {
        out.push("--unshare-user".into());
    }
    out.extend(["--unshare-pid", "--unshare-ipc", "--unshare-uts"].map(String::from));
    // Bubblewrap run by root keeps root's capabilities in the sandbox unless told (it drops
    // them itself only in a user namespace it made): none, whoever runs it.
    out.extend(["--cap-drop", "ALL"].map(String::from));
    if !policy.network {
        out.push("--unshare-net".into());
    }
    if policy.die_with_parent {
        out.push("--die-with-parent".into());
    }
    out.extend(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"].map(String::from));
    for private in super::PRIVATE_DIRS {
        out.extend(["--tmpfs".to_owned(), private.to_owned()]);
    }
    // Each path where it really is: a bind or a tmpfs at a path through a symlink would land
    // on (or fail to make) the link's parent, not its target.
    // (real path, is a folder) of each hidden path that exists: nothing else is there to hide.
    let hidden: Vec<(PathBuf, bool)> =
        policy.hidden.iter().filter_map(|p| real(p)).filter_map(|p| std::fs::metadata(&p).ok().map(|m| (p, m.is_dir()))).collect();
    for (path, dir) in &hidden {
        if *dir {
            out.extend(["--tmpfs".to_owned(), text(path)?]);
        } else {
            out.extend(["--ro-bind".to_owned(), "/dev/null".to_owned(), text(path)?]);
        }
    }
    for path in policy.readonly.iter().filter_map(|p| real(p)) {
        out.extend(["--ro-bind-try".to_owned(), text(&path)?, text(&path)?]);
    }
    for path in policy.writable.iter().filter_map(|p| real(p)) {
        out.extend(["--bind-try".to_owned(), text(&path)?, text(&path)?]);
    }
    if let Some(dir) = &policy.api_dir {
        out.extend(["--bind".to_owned(), text(dir)?, API_DIR.to_owned()]);
    }
    if let Some(dir) = policy.home.as_deref().and_then(real) {
        out.extend(["--bind".to_owned(), text(&dir)?, HOME_DIR.to_owned()]);
    }
    // The empty folders standing in for hidden ones (and `/run`) read-only, last: what is
    // bound beneath them keeps its own mode, and nothing written there could mislead a program
    // into thinking it reached the daemon's state.
    for (path, _) in hidden.iter().filter(|(_, dir)| *dir) {
        out.extend(["--remount-ro".to_owned(), text(path)?]);
    }
    out.extend(["--remount-ro".to_owned(), "/run".to_owned()]);
    Ok(out)
}

/// `path` with every symlink resolved; `None` when it does not exist (nothing to mount).
fn real(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mounts_come_in_the_order_that_lets_later_paths_show_through() {
        let state = tempfile::tempdir().unwrap();
        let home = state.path().join("runs/r1/home");
        std::fs::create_dir_all(&home).unwrap();
        let policy = Policy {
            level: crate::sandbox::Level::Bubblewrap,
            bwrap: "/usr/bin/bwrap".into(),
            writable: vec![state.path().join("space"), home.clone()],
            readonly: vec![PathBuf::from("/opt/no-such-tools")],
            hidden: vec![state.path().to_path_buf(), PathBuf::from("/no/such/dir")],
            api_dir: Some(state.path().join("runs/r1/api")),
            home: None,
            tmp: None,
            network: false,
            max_processes: Some(64),
            user_namespace: true,
            die_with_parent: false,
        };
        std::fs::create_dir_all(state.path().join("space")).unwrap();
        let argv = command(&policy, &["/bin/spacesd".into()], &["sh".into(), "-c".into(), "true".into()], Path::new("/srv/space")).unwrap();
        let line = argv.join(" ");
        let at = |needle: &str| line.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {line}"));
        assert!(at("--unshare-user") < at("--ro-bind / /"));
        assert!(at("--cap-drop ALL") < at(" -- "), "no capability is left to the program: {line}");
        assert!(line.contains("--unshare-net"));
        assert!(at("--tmpfs /run") < at(&format!("--tmpfs {}", state.path().display())));
        assert!(at(&format!("--tmpfs {}", state.path().display())) < at(&format!("--bind-try {0} {0}", home.display())));
        assert!(!line.contains("/no/such/dir") && !line.contains("no-such-tools"), "a missing path is not mounted: {line}");
        assert!(line.ends_with("--chdir /srv/space -- /bin/spacesd sandbox-exec --max-processes 64 -- sh -c true"), "{line}");
        let warm = warm_command(&policy, &["/bin/spacesd".into()], 7).unwrap().join(" ");
        let (options, _) = line.split_once(" --chdir ").unwrap();
        assert!(warm.starts_with(options), "a warm sandbox mounts what a cold one does: {warm}");
        assert!(warm.ends_with("--chdir / -- /bin/spacesd sandbox-exec --max-processes 64 --await 7"), "{warm}");
    }
}
