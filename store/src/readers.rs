//! Read-only connections for readers (event pages, status, lists), kept in a small pool.
//!
//! In WAL mode a reader never waits for the writer nor the writer for a reader: each read runs
//! on a snapshot of the last commit. A connection is opened when the pool is empty and kept
//! after use while fewer than [`MAX_IDLE`] wait there.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::Result;

/// Connections kept open between reads.
pub const MAX_IDLE: usize = 8;

/// The pool of read-only connections to one database.
pub(crate) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// A connection borrowed from [`Readers`]; back in the pool on drop.
pub(crate) struct Reader<'a> {
    pool: &'a Readers,
    conn: Option<Connection>,
}

impl Readers {
    /// A pool over the database at `path` (which must exist: the writer created it).
    pub(crate) fn new(path: &Path) -> Readers {
        Readers { path: path.to_path_buf(), idle: Mutex::new(Vec::new()) }
    }

    /// A read-only connection. Errors: SQLite's, when a new one cannot be opened.
    pub(crate) fn get(&self) -> Result<Reader<'_>> {
        let pooled = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match pooled {
            Some(c) => c,
            None => {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let c = Connection::open_with_flags(&self.path, flags)?;
                c.busy_timeout(Duration::from_millis(spaces_codespace::sqlite::BUSY_TIMEOUT_MS))?;
                c
            }
        };
        Ok(Reader { pool: self, conn: Some(conn) })
    }
}

impl Deref for Reader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        // Taken only in Drop.
        self.conn.as_ref().unwrap_or_else(|| unreachable!("a reader's connection is gone before its drop"))
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
    }
}
