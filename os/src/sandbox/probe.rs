//! Is a sandbox possible here? [`find`] looks for bubblewrap, [`check`] makes one sandbox with
//! the namespaces every tree gets and runs `true` in it, so a host without user namespaces (or
//! with a broken bubblewrap) is found at the daemon's start, not at a run's. [`landlock()`] enters
//! the Landlock level through the real helper and checks that a hidden file cannot be read.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::Error;

/// `bwrap` on `path` (a `PATH`-style list). Errors: [`Error::Unavailable`] naming the fix.
pub fn find(path: &str) -> Result<PathBuf, Error> {
    std::env::split_paths(path).map(|dir| dir.join("bwrap")).find(|p| p.is_file()).ok_or_else(|| {
        Error::Unavailable(
            "bubblewrap (`bwrap`) is not on PATH: install it (Debian/Ubuntu: `apt-get install bubblewrap`), \
                 or run every agent and command unsandboxed with SPACES_SANDBOX=off (see docs/operations.md, \"Security model\")"
                .into(),
        )
    })
}

/// Runs `true` in a sandbox of `bwrap` with the namespaces of [`super::command`] (a user
/// namespace when `user_namespace`). Errors: [`Error::Unavailable`] with bubblewrap's own words.
pub fn check(bwrap: &Path, user_namespace: bool) -> Result<(), Error> {
    let mut cmd = Command::new(bwrap);
    if user_namespace {
        cmd.arg("--unshare-user");
    }
    cmd.args(["--unshare-pid", "--unshare-ipc", "--unshare-uts"])
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"])
        .args(["--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = cmd.output().map_err(|e| Error::Unavailable(format!("cannot run {}: {e}", bwrap.display())))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    Err(Error::Unavailable(format!(
        "{} cannot make a sandbox here ({}: {}); {}",
        bwrap.display(),
        out.status,
        said.trim(),
        if user_namespace {
            "unprivileged user namespaces may be off (sysctl kernel.unprivileged_userns_clone=1, or AppArmor's \
             kernel.apparmor_restrict_unprivileged_userns=0), or set SPACES_SANDBOX=off to run unsandboxed"
        } else {
            "set SPACES_SANDBOX=off to run unsandboxed"
        }
    )))
}

/// Runs `helper sandbox-exec --landlock POLICY --report` with a file hidden, and a shell that
/// must fail to read it. Returns what Landlock reached ([`super::landlock::Reached`]). Errors:
/// [`Error::Unavailable`] when the helper fails (no Landlock in this kernel: its words) or the
/// hidden file could be read.
pub fn landlock(helper: &[String]) -> Result<super::landlock::Reached, Error> {
    let fail =
        |why: String| Error::Unavailable(format!("Landlock cannot make a sandbox here: {why}; set SPACES_SANDBOX=off to run unsandboxed"));
    let dir = std::env::temp_dir().join(format!("spaces-landlock-probe-{}", std::process::id()));
    let secret = dir.join("hidden");
    std::fs::create_dir_all(&secret)
        .and_then(|()| std::fs::write(secret.join("file"), "x"))
        .map_err(|e| fail(format!("cannot make {}: {e}", dir.display())))?;
    let policy = super::Policy { level: super::Level::Landlock, hidden: vec![secret.clone()], ..Default::default() };
    let result = (|| {
        let file = secret.join("file").display().to_string();
        let argv = ["/bin/sh", "-c", "! cat \"$0\" >/dev/null 2>&1", file.as_str()].map(String::from);
        let mut line = super::landlock::command(&policy, helper, &argv)?;
        line.insert(line.len() - argv.len() - 1, "--report".to_owned());
        let out = Command::new(&line[0])
            .args(&line[1..])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| fail(format!("cannot run {}: {e}", line[0])))?;
        let said = String::from_utf8_lossy(&out.stderr);
        let reached: Option<super::landlock::Reached> =
            String::from_utf8_lossy(&out.stdout).lines().find_map(|l| serde_json::from_str(l).ok());
        match (out.status.success(), reached) {
            (true, Some(reached)) => Ok(reached),
            (false, Some(_)) => Err(fail("a file it hides could still be read".into())),
            _ => Err(fail(format!("{} ({})", said.trim(), out.status))),
        }
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_path_without_bwrap_names_the_fix() {
        let empty = tempfile::tempdir().unwrap();
        let err = find(&empty.path().display().to_string()).unwrap_err().to_string();
        assert!(err.contains("apt-get install bubblewrap") && err.contains("SPACES_SANDBOX=off"), "{err}");
    }
}
