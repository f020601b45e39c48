//! The durable store: one SQLite database (WAL) holding spaces, runs, turns and event logs.
//!
//! One connection behind a mutex serves the daemon; every statement is short (indexed point
//! reads, batched appends in one transaction), so holding the lock is brief. Event appends for a
//! batch of lines happen in one transaction (see [`events`]).

pub mod events;
pub mod runs;
pub mod spaces;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

use crate::error::Result;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS spaces (
    name        TEXT PRIMARY KEY,
    root        TEXT NOT NULL,
    read_only   INTEGER NOT NULL DEFAULT 0,
    approvals   TEXT NOT NULL DEFAULT 'off',
    created_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,
    space        TEXT NOT NULL,
    agent        TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    status       TEXT NOT NULL,
    phase        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    result_text  TEXT,
    session_id   TEXT,
    turns        INTEGER NOT NULL DEFAULT 0,
    cwd          TEXT NOT NULL,
    options_json TEXT NOT NULL,
    notes_json   TEXT NOT NULL DEFAULT '[]',
    pgid         INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_space ON runs (space, created_ms DESC);
CREATE TABLE IF NOT EXISTS turns (
    run_id      TEXT NOT NULL,
    turn        INTEGER NOT NULL,
    text        TEXT NOT NULL,
    started_ms  INTEGER NOT NULL,
    ended_ms    INTEGER,
    stop_reason TEXT,
    PRIMARY KEY (run_id, turn)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    body    TEXT NOT NULL,
    raw     TEXT,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS journals (
    run_id  TEXT PRIMARY KEY,
    gen     INTEGER NOT NULL,
    offset  INTEGER NOT NULL
);
"#;

/// Where a run's ingest of its agent's journal stands: process generation `gen`, every record
/// before byte `offset` stored as events. Stored in the same transaction as those events, so a
/// restarted daemon resumes exactly there (each record becomes events once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalPos {
    pub gen: u64,
    pub offset: u64,
}

/// The open database, and the paths no Space may reach (see [`Store::protected`]).
pub struct Store {
    conn: Mutex<Connection>,
    protected: Mutex<Vec<PathBuf>>,
}

impl Store {
    /// Open (creating if needed) the database at `path` in WAL mode and apply the schema.
    pub fn open(path: &Path) -> Result<Store> {
        let conn = spaces_codespace::sqlite::open(path, "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        migrate(&conn)?;
        // The database lives in the state dir: that dir is protected from the start.
        let protected = path.parent().map(|p| vec![p.to_path_buf()]).unwrap_or_default();
        Ok(Store { conn: Mutex::new(conn), protected: Mutex::new(protected) })
    }

    /// Adds `path` (a secret the daemon keeps outside its state dir, e.g. `--token-file`) to the
    /// paths no Space root may equal or contain.
    pub fn protect(&self, path: &Path) {
        self.protected.lock().unwrap_or_else(|p| p.into_inner()).push(path.to_path_buf());
    }

    /// The paths no Space root may equal, contain or lie inside: the state dir (database,
    /// socket, tokens, run directories) and whatever [`Store::protect`] added.
    pub fn protected(&self) -> Vec<PathBuf> {
        self.protected.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The connection (poisoning is ignored: SQLite keeps its own consistency).
    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Brings a database made by an older `spacesd` up to [`SCHEMA`]: columns added since.
fn migrate(conn: &Connection) -> Result<()> {
    let has_approvals: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('spaces') WHERE name = 'approvals'")?
        .exists([])?;
    if !has_approvals {
        conn.execute_batch("ALTER TABLE spaces ADD COLUMN approvals TEXT NOT NULL DEFAULT 'off'")?;
    }
    Ok(())
}

pub use spaces_codespace::sqlite::now_ms;
