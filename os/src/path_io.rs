//! An I/O failure at a path, with what was being done there: the one shape the OS layer's
//! errors (a program's cgroup: `process::cgroup::Error`) and the daemon's run path
//! (`spaces-host`'s `supervisor::error::Error`) share. Its text: `cannot {action} {path}:
//! {source}`.

use std::path::PathBuf;

/// What failed at which path, and the system's error.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct PathIo {
    /// What was being done, as a verb phrase ("create", "write", "create the agent home").
    pub action: &'static str,
    /// The path it was done to.
    pub path: PathBuf,
    /// The system's error.
    pub source: std::io::Error,
}

impl PathIo {
    /// For `map_err`: the [`PathIo`] of `action` on `path`.
    pub fn at(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> PathIo {
        let path = path.into();
        move |source| PathIo { action, path, source }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_the_action_the_path_and_the_cause() {
        let e = PathIo::at("write", "/sys/fs/cgroup/pids/x/pids.max")(std::io::Error::from_raw_os_error(13));
        assert!(e.to_string().starts_with("cannot write /sys/fs/cgroup/pids/x/pids.max: Permission denied"), "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }
}
