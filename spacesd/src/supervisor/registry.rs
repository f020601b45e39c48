//! The Space registry as the supervisor sees it: registering a Space (name and root checks,
//! idempotent re-registration, `replace` for a changed one), listing them, and the lookups every
//! run operation starts with (a Space by name, a run inside a Space).

use spaces_sdk::{ErrorCode, SpaceRecord};

use crate::error::{refuse, Result};
use crate::store::runs::RunRow;
use crate::store::Store;

/// Register `space` (see [`super::Supervisor::space_add`] for the rules and errors).
pub(super) fn add(store: &Store, space: &SpaceRecord, replace: bool) -> Result<SpaceRecord> {
    let name_ok = !space.name.is_empty()
        && space.name.len() <= 64
        && space.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(refuse(
            ErrorCode::InvalidArgument,
            format!("invalid Space name {:?}: use 1-64 letters, digits, '-', '_' or '.'", space.name),
        ));
    }
    let root = std::fs::canonicalize(&space.root).map_err(|e| {
        refuse(ErrorCode::InvalidArgument, format!("Space root {:?} is not usable: {e}; give an existing directory", space.root))
    })?;
    if !root.is_dir() {
        return Err(refuse(ErrorCode::InvalidArgument, format!("Space root {} is not a directory", root.display())));
    }
    let record = SpaceRecord { name: space.name.clone(), root: root.display().to_string(), read_only: space.read_only, approvals: space.approvals };
    if let Some(existing) = store.space_get(&record.name)? {
        if existing == record {
            return Ok(record);
        }
        if !replace {
            return Err(refuse(
                ErrorCode::InvalidArgument,
                format!(
                    "Space {:?} is already registered as {} (read_only: {}, approvals: {}); \
                     to change it, add it again with --replace (HTTP: ?replace=true)",
                    existing.name,
                    existing.root,
                    existing.read_only,
                    existing.approvals.as_str()
                ),
            ));
        }
    }
    store.space_put(&record)?;
    Ok(record)
}

/// Every registered Space.
pub(super) fn list(store: &Store) -> Result<Vec<SpaceRecord>> {
    store.space_list()
}

/// The Space `name`. Errors: `WORKSPACE_NOT_FOUND`, naming the command that registers it.
pub(super) fn space(store: &Store, name: &str) -> Result<SpaceRecord> {
    store.space_get(name)?.ok_or_else(|| {
        refuse(ErrorCode::WorkspaceNotFound, format!("no Space named {name:?} on this host; register it with `spacesd space add {name} PATH`"))
    })
}

/// The run `run_id` of Space `space`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND` (also for a
/// run of another Space).
pub(super) fn run_in_space(store: &Store, space: &str, run_id: &str) -> Result<RunRow> {
    self::space(store, space)?;
    match store.run_get(run_id)? {
        Some(run) if run.space == space => Ok(run),
        _ => Err(refuse(ErrorCode::RunNotFound, format!("no run {run_id:?} in Space {space:?}; list runs with `spacesd agent list --space {space}`"))),
    }
}
