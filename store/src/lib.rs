//! # spaces-store: the daemon's durable state
//!
//! The durable store: one SQLite database (WAL) holding spaces, runs, turns and event logs
//! ([`Store`]); the event log on top of it ([`eventlog`]: appends through the store's one
//! writer, wake-ups for long-poll readers, the newest events of each run in memory); the small
//! file helpers the state dir's private files are written with ([`fsutil`]); and the store's own
//! [`Error`]. It knows nothing of the wire: the daemon maps every [`Error`] to `INTERNAL`.
//!
//! Three kinds of connection, each with one job:
//! - **one writer** ([`writer`]): a dedicated thread owns the only write connection and runs
//!   every write of the daemon, group-committing whatever is queued (event batches of every run,
//!   journal positions, run rows) in one transaction per wake-up;
//! - **readers** ([`readers`]): a small pool of read-only connections for event pages, status
//!   and lists; in WAL mode they never wait for the writer;
//! - **the checkpointer** ([`checkpoint`]): its own connection and thread, so no commit pays for
//!   a WAL checkpoint.
//!
//! Durability (`synchronous=NORMAL` in WAL mode): a commit is in the WAL (the OS's page cache)
//! when its caller hears of it, so it survives the daemon being killed. The WAL is fsynced by
//! each checkpoint, about every [`checkpoint::TICK`] while busy: a power loss or host crash can
//! cost the commits of the last tick, never the database's consistency, and an event batch and
//! its journal position are lost or kept together.

pub mod admission;
pub mod checkpoint;
mod chunks;
pub mod error;
pub mod eventlog;
pub mod events;
pub mod fsutil;
pub mod keys;
pub mod queued;
pub mod readers;
pub mod reserve;
pub mod runs;
pub mod spaces;
pub mod usage;
pub mod webhooks;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use error::{Error, Result};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS spaces (
    name        TEXT PRIMARY KEY,
    root        TEXT NOT NULL,
    read_only   INTEGER NOT NULL DEFAULT 0,
    approvals   TEXT NOT NULL DEFAULT 'off',
    created_ms  INTEGER NOT NULL,
    network     TEXT NOT NULL DEFAULT 'enabled'
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
    pgid         INTEGER,
    prompt_excerpt TEXT,
    resets_at_ms INTEGER
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
CREATE TABLE IF NOT EXISTS event_chunks (
    run_id    TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    bodies    TEXT NOT NULL,
    raws_z    BLOB,
    PRIMARY KEY (run_id, last_seq)
);
CREATE TABLE IF NOT EXISTS journals (
    run_id  TEXT PRIMARY KEY,
    gen     INTEGER NOT NULL,
    offset  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS request_keys (
    scope       TEXT NOT NULL,
    key         TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result_json TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS request_keys_by_run ON request_keys (run_id);
CREATE TABLE IF NOT EXISTS queued_messages (
    run_id      TEXT NOT NULL,
    n           INTEGER NOT NULL,
    text        TEXT NOT NULL,
    key_scope   TEXT,
    key         TEXT,
    fingerprint TEXT,
    result_json TEXT,
    PRIMARY KEY (run_id, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_usage (
    run_id              TEXT NOT NULL,
    turn                INTEGER NOT NULL,
    ended_ms            INTEGER NOT NULL,
    stop_reason         TEXT NOT NULL,
    model               TEXT,
    input_tokens        INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cost_usd            REAL,
    cost_estimated      INTEGER NOT NULL,
    duration_ms         INTEGER NOT NULL,
    tool_calls          INTEGER NOT NULL,
    reported_json       TEXT NOT NULL,
    PRIMARY KEY (run_id, turn)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS turn_usage_by_end ON turn_usage (ended_ms);
CREATE TABLE IF NOT EXISTS webhooks (
    webhook_id  TEXT PRIMARY KEY,
    url         TEXT NOT NULL,
    events_json TEXT NOT NULL,
    secret      TEXT NOT NULL,
    created_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_scan (
    run_id  TEXT PRIMARY KEY,
    seq     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_outbox (
    delivery_id TEXT PRIMARY KEY,
    webhook_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    next_ms     INTEGER NOT NULL,
    last_error  TEXT,
    created_ms  INTEGER NOT NULL,
    done_ms     INTEGER
);
CREATE INDEX IF NOT EXISTS webhook_outbox_pending ON webhook_outbox (status, webhook_id, run_id, seq);
CREATE TABLE IF NOT EXISTS admission_queue (
    run_id  TEXT PRIMARY KEY,
    space   TEXT NOT NULL,
    seq     INTEGER NOT NULL
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
    // Dropped in this order: the writer finishes its queue before the checkpointer stops.
    writer: writer::Writer,
    _checkpointer: checkpoint::Checkpointer,
    readers: readers::Readers,
    protected: Mutex<Vec<PathBuf>>,
    /// Room kept on the state dir's disk for the writes that end runs when it fills.
    reserve: std::sync::Arc<reserve::Reserve>,
}

impl Store {
    /// Open (creating if needed) the database at `path` in WAL mode, apply the schema and start
    /// the writer and checkpointer threads.
    pub fn open(path: &Path) -> Result<Store> {
        let conn = spaces_codespace::sqlite::open(path, "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        migrate(&conn)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let reserve = std::sync::Arc::new(reserve::Reserve::make(dir, reserve::RESERVE_BYTES));
        let writer = writer::Writer::start_reserved(conn, Some(reserve.clone()))?;
        let checkpointer = checkpoint::Checkpointer::start(path, writer.commits.clone())?;
        // The database lives in the state dir: that dir is protected from the start.
        let protected = path.parent().map(|p| vec![p.to_path_buf()]).unwrap_or_default();
        Ok(Store { writer, _checkpointer: checkpointer, readers: readers::Readers::new(path), protected: Mutex::new(protected), reserve })
    }

    /// A write of a run found the state dir's disk full: give up the reserve
    /// ([`reserve::Reserve::release`]) so the run's end can be stored. Returns whether room was
    /// given back now.
    pub fn release_reserve(&self) -> bool {
        self.reserve.release()
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

    /// A read-only connection from the pool.
    pub(crate) fn reader(&self) -> Result<readers::Reader<'_>> {
        self.readers.get()
    }

    /// Runs `f` in the writer's next transaction and waits (blocking) until it committed.
    pub(crate) fn write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> Result<R> + Send + 'static,
    {
        self.writer.call(f)
    }
}

/// Brings a database made by an older `spacesd` up to [`SCHEMA`]: columns added since.
fn migrate(conn: &rusqlite::Connection) -> Result<()> {
    let has_approvals: bool = conn.prepare("SELECT 1 FROM pragma_table_info('spaces') WHERE name = 'approvals'")?.exists([])?;
    if !has_approvals {
        conn.execute_batch("ALTER TABLE spaces ADD COLUMN approvals TEXT NOT NULL DEFAULT 'off'")?;
    }
    // Spaces registered before the network setting keep the network they had: `enabled`.
    let has_network: bool = conn.prepare("SELECT 1 FROM pragma_table_info('spaces') WHERE name = 'network'")?.exists([])?;
    if !has_network {
        conn.execute_batch("ALTER TABLE spaces ADD COLUMN network TEXT NOT NULL DEFAULT 'enabled'")?;
    }
    let has_excerpt: bool = conn.prepare("SELECT 1 FROM pragma_table_info('runs') WHERE name = 'prompt_excerpt'")?.exists([])?;
    if !has_excerpt {
        conn.execute_batch("ALTER TABLE runs ADD COLUMN prompt_excerpt TEXT")?;
    }
    let has_resets: bool = conn.prepare("SELECT 1 FROM pragma_table_info('runs') WHERE name = 'resets_at_ms'")?.exists([])?;
    if !has_resets {
        conn.execute_batch("ALTER TABLE runs ADD COLUMN resets_at_ms INTEGER")?;
    }
    chunks::migrate_to_chunks(conn)?;
    // Version 1 (issue 31): `openai-codex` became Codex on `codex app-server`. A run stored
    // before it under `openai-codex` ran `codex exec` (now `openai-codex-exec`): its live
    // process, re-adopted, speaks exec's lines; one under `openai-codex-app-server` is now
    // `openai-codex`.
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < 1 {
        conn.execute_batch(
            "BEGIN;
             UPDATE runs SET agent = 'openai-codex-exec' WHERE agent = 'openai-codex';
             UPDATE runs SET agent = 'openai-codex' WHERE agent = 'openai-codex-app-server';
             PRAGMA user_version = 1;
             COMMIT;",
        )?;
    }
    Ok(())
}

pub use spaces_codespace::sqlite::now_ms;
