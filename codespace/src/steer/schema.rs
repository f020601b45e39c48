//! The steering tables (prefixed `steer_`, so the file may hold other components' tables) and
//! how a connection to them is opened.
//!
//! `seq` columns give a stable creation order (explicit `INTEGER PRIMARY KEY AUTOINCREMENT`, so
//! `VACUUM` never renumbers them). Intents are listed by `(position, seq)`; `position` is
//! rewritten by reorder. `queue_revision` and `finish_requested` live on the work row.

use std::path::Path;

use rusqlite::Connection;

use crate::error::Result;

pub use crate::sqlite::BUSY_TIMEOUT_MS;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS steer_works (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    work_id          TEXT NOT NULL UNIQUE,
    workspace_id     TEXT NOT NULL,
    title            TEXT,
    state            TEXT NOT NULL,
    queue_revision   INTEGER NOT NULL DEFAULT 0,
    finish_requested INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS steer_works_by_workspace ON steer_works(workspace_id, seq);
CREATE TABLE IF NOT EXISTS steer_intents (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    intent_id  TEXT NOT NULL UNIQUE,
    work_id    TEXT NOT NULL REFERENCES steer_works(work_id),
    revision   INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    delivery   TEXT NOT NULL,
    state      TEXT NOT NULL,
    content    TEXT NOT NULL,
    position   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS steer_intents_by_work ON steer_intents(work_id, state, position);
"#;

/// Open (creating if needed) the database at `path`: busy timeout first (so a concurrent opener
/// waits instead of failing), then WAL, then the schema. Errors: `INTERNAL`.
pub fn open_connection(path: &Path) -> Result<Connection> {
    let conn = crate::sqlite::open(path, "NORMAL")?;
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}
