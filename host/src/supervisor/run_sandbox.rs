//! The sandbox of a run's process (issue 28): its Space's ([`crate::sandbox::policy`]: the root
//! writable unless read-only, the Space's network, everything of the daemon's hidden), with the
//! run's own folders: its home writable at `/run/home`, its API directory at `/run/spaces`, its
//! attached files and `readonly` (the harness's files, the agent's binary) read-only.
//!
//! One function for the two that need it: the launcher, for the process it starts now, and
//! `ahead`, for the first process of a run made ready ahead. The same paths give the same
//! policy, which is what lets the second find the warm sandbox the first made.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::shared::Inner;

/// The run directory's folder that is the agent's home (`/run/home` in the sandbox).
pub(super) const HOME: &str = "home";

/// The policy of a process of the run in `run_dir` (absolute) in Space `space`, with `readonly`
/// paths added; `None` when the sandbox is off. Errors: the Space is no longer registered
/// ([`Error::SpaceGone`]), the registry cannot be read, or a refusal of
/// [`crate::sandbox::policy`] (a `network: none` Space without a sandbox).
pub(super) fn policy(inner: &Inner, space: &str, run_dir: &Path, readonly: Vec<PathBuf>) -> Result<Option<spaces_os::sandbox::Policy>> {
    let space = inner.store.space_get(space)?.ok_or_else(|| Error::SpaceGone(space.to_owned()))?;
    let api_dir = super::api::dir(run_dir);
    let mut extra = crate::sandbox::Extra { readonly, api_dir: Some(api_dir), home: Some(run_dir.join(HOME)) };
    extra.readonly.push(run_dir.join(super::files::FOLDER));
    Ok(crate::sandbox::policy(&inner.store, Path::new(&space.root), space.read_only, space.network, extra)?)
}
