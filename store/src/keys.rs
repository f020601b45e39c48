//! Idempotency keys of mutating agent calls (`request_id` of `agent_start`, `message_id` of
//! `agent_message`): each stored with the result it answered, in the same transaction as that
//! call's effect (the run's row; the turn the message started), and deleted with its run.

use rusqlite::{params, OptionalExtension};

use super::{now_ms, Store};
use crate::error::Result;

/// One stored key: `key` in `scope` (`space:<name>` for starts, `run:<run_id>` for messages),
/// the run it belongs to, the fingerprint of the request it came with, and the result JSON
/// the caller got (or would have got).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub scope: String,
    pub key: String,
    pub run_id: String,
    pub fingerprint: String,
    pub result_json: String,
}

impl Store {
    /// The key `key` of `scope`, if stored: its fingerprint and result.
    pub fn key_get(&self, scope: &str, key: &str) -> Result<Option<KeyRow>> {
        let conn = self.reader()?;
        let row = conn
            .query_row(
                "SELECT run_id, fingerprint, result_json FROM request_keys WHERE scope = ?1 AND key = ?2",
                params![scope, key],
                |r| {
                    Ok(KeyRow {
                        scope: scope.to_owned(),
                        key: key.to_owned(),
                        run_id: r.get(0)?,
                        fingerprint: r.get(1)?,
                        result_json: r.get(2)?,
                    })
                },
            )
            .optional()?;
        Ok(row)
    }
}

/// Inside a write: store `key`. An error (a constraint violation) when the key is taken, so
/// the transaction it belongs to stores nothing (a start: the run row goes with it).
pub fn key_insert_in(conn: &rusqlite::Connection, key: &KeyRow) -> Result<()> {
    insert(conn, key, "INSERT")
}

/// Inside a write: store `key` unless it is stored already (a message's turn: the actor checked
/// the key before, and a turn's commit never fails over its key).
pub fn key_keep_in(conn: &rusqlite::Connection, key: &KeyRow) -> Result<()> {
    insert(conn, key, "INSERT OR IGNORE")
}

fn insert(conn: &rusqlite::Connection, key: &KeyRow, verb: &str) -> Result<()> {
    conn.prepare_cached(&format!(
        "{verb} INTO request_keys (scope, key, run_id, fingerprint, result_json, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
    ))?
    .execute(params![key.scope, key.key, key.run_id, key.fingerprint, key.result_json, now_ms() as i64])?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn row(scope: &str, key: &str, run: &str) -> KeyRow {
        KeyRow { scope: scope.into(), key: key.into(), run_id: run.into(), fingerprint: "f".into(), result_json: "{}".into() }
    }

    /// A key is stored once per scope (a second insert fails and stores nothing; keeping it
    /// is a no-op), the same key
    /// in another scope is another key, and deleting the run deletes its keys.
    #[test]
    fn a_key_is_unique_in_its_scope_and_goes_with_its_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        store.write(|c| key_insert_in(c, &row("run:run-1", "k", "run-1"))).unwrap();
        assert!(store.write(|c| key_insert_in(c, &row("run:run-1", "k", "run-1"))).is_err());
        store.write(|c| key_keep_in(c, &row("run:run-1", "k", "run-1"))).unwrap();
        store.write(|c| key_insert_in(c, &row("run:run-2", "k", "run-2"))).unwrap();
        assert_eq!(store.key_get("run:run-1", "k").unwrap(), Some(row("run:run-1", "k", "run-1")));
        store.run_delete("run-1").unwrap();
        assert_eq!(store.key_get("run:run-1", "k").unwrap(), None);
        assert_eq!(store.key_get("run:run-2", "k").unwrap(), Some(row("run:run-2", "k", "run-2")));
    }
}
