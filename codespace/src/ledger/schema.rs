//! The ledger's tables. One file, versioned by `PRAGMA user_version`; every statement is
//! `IF NOT EXISTS`, so opening an existing file is a no-op.

use rusqlite::Connection;

use crate::error::Result;

/// Schema version written to `PRAGMA user_version`.
const VERSION: i64 = 1;

/// `operations`: one row per `apply_patch` (the patch ledger). `operation_key` is unique
/// host-wide (NULLs allowed: a request without a key is never replayed). `finished_at` NULL means
/// in flight; `result_json` is the full response to replay (NULL when crash recovery closed it).
/// `operation_events`: the `minted`/`finished` history, ordered by `id`.
/// `approvals`: one row per hold; `hold_key` finds the hold a retry of the same request reuses;
/// `boot_id` names the daemon that began a resume; `result_json` is the stored terminal result.
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS operations (
    operation_id  TEXT PRIMARY KEY,
    operation_key TEXT UNIQUE,
    fingerprint   TEXT NOT NULL,
    workspace_id  TEXT NOT NULL,
    status        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    files_json    TEXT NOT NULL DEFAULT '[]',
    changes_json  TEXT NOT NULL DEFAULT '[]',
    result_json   TEXT,
    boot_id       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_unfinished ON operations (finished_at) WHERE finished_at IS NULL;
CREATE TABLE IF NOT EXISTS operation_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT NOT NULL REFERENCES operations (operation_id),
    at           INTEGER NOT NULL,
    name         TEXT NOT NULL,
    status       TEXT,
    reason       TEXT
);
CREATE INDEX IF NOT EXISTS operation_events_by_op ON operation_events (operation_id, id);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id    TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    tool           TEXT NOT NULL,
    arguments_json TEXT NOT NULL,
    hold_key       TEXT NOT NULL,
    state          TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    boot_id        TEXT,
    operation_id   TEXT,
    result_json    TEXT
);
CREATE INDEX IF NOT EXISTS approvals_by_hold ON approvals (hold_key, state);
CREATE INDEX IF NOT EXISTS approvals_by_workspace ON approvals (workspace_id, state);
CREATE INDEX IF NOT EXISTS operations_finished ON operations (workspace_id, finished_at) WHERE finished_at IS NOT NULL;
"#;

/// Create the tables if missing and stamp the version.
pub(super) fn apply(conn: &Connection) -> Result<()> {
    conn.execute_batch(SCHEMA)?;
    conn.pragma_update(None, "user_version", VERSION)?;
    Ok(())
}
