//! The SQLite conventions shared by the ledger, the steering store (both may live in one file)
//! and the daemon's own store: how a connection is opened and what a stored timestamp is.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

/// How long a statement waits for another connection's write lock before failing, ms.
pub const BUSY_TIMEOUT_MS: u64 = 10_000;

/// Opens (creating if needed) the database at `path`: busy timeout first (so a concurrent opener
/// waits instead of failing on the WAL switch), then WAL, then `synchronous` (`NORMAL`, or
/// `FULL` where a commit must survive a power loss). Errors: SQLite's.
pub fn open(path: &Path, synchronous: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    Ok(conn)
}

/// Unix time in ms: what every stored `*_at` column holds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
