//! The folder an agent is about to run in, checked the moment before (cases R34, R43): used by
//! `agent_start` for a Space's root and by a run's actor before each new process.

use std::path::Path;

use spaces_sdk::ErrorCode;

use crate::error::{refuse, Error, Result};

/// A folder an agent is about to run in: a Space's root, or a run's working directory.
pub(super) struct SpaceFolder<'a> {
    /// The Space's name, when known, for the message.
    pub space: Option<&'a str>,
    pub path: &'a Path,
}

/// Case R34: refuse at once with `WORKSPACE_NOT_FOUND` naming the folder when it is gone (moved,
/// renamed or deleted since the Space was registered), instead of letting the agent CLI fail to
/// start in it with a reason that blames the CLI. The run is untouched: once the folder is back,
/// a follow-up resumes it. Case R43: a folder is its path, looked at now
/// (`codespace::fs::Root::open_bound`): one renamed away and replaced by another directory there
/// is the new one, and a symlink put in its place (or on its way) is refused `SYMLINK_REJECTED`,
/// never followed to where it leads.
pub(super) fn folder_present(folder: &SpaceFolder<'_>) -> Result<()> {
    match spaces_codespace::fs::Root::open_bound(folder.path) {
        Ok(_) => return Ok(()),
        Err(e @ spaces_codespace::Error::RootRedirected { .. }) => return Err(Error::Api(e.into())),
        Err(_) => {}
    }
    let whose = folder.space.map(|s| format!(" of Space {s:?}")).unwrap_or_default();
    Err(refuse(
        ErrorCode::WorkspaceNotFound,
        format!(
            "the folder {}{whose} is gone (moved, renamed or deleted); put it back, or register the Space again \
             with `spacesd space add NAME PATH --replace`",
            folder.path.display()
        ),
    ))
}
