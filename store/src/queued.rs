//! Follow-ups waiting behind a running turn (`agent_message` answered "queued"), kept until
//! their turn starts, so a daemon killed meanwhile still delivers them (issue 30: they lived
//! only in the run's actor, and a `kill -9` lost every one the caller had been told was
//! queued).
//!
//! Each row is one message of one run at position `n` (smaller first; a message forced ahead
//! of the others takes a smaller `n`), with its text as the caller sent it (what the agent
//! gets; events hold the redacted text) and, when it came with a `message_id`, the key and the
//! answer it got, so a repeat after a restart finds it. A row is inserted in the same
//! transaction as the notice that says it was queued, and deleted in its turn's first commit,
//! or when the run drops its queue (a stop), or with its run.

use rusqlite::params;

use super::keys::KeyRow;
use super::Store;
use crate::error::Result;

/// One queued follow-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRow {
    /// Its place in the run's queue (smaller first).
    pub n: i64,
    pub text: String,
    /// Its `message_id` with the answer the caller got (`run_id` is the run's).
    pub key: Option<KeyRow>,
}

impl Store {
    /// The queued follow-ups of `run_id`, first first.
    pub fn queued_list(&self, run_id: &str) -> Result<Vec<QueuedRow>> {
        let conn = self.reader()?;
        let mut stmt = conn
            .prepare_cached("SELECT n, text, key_scope, key, fingerprint, result_json FROM queued_messages WHERE run_id = ?1 ORDER BY n")?;
        let rows = stmt.query_map(params![run_id], |r| {
            let key = match (r.get::<_, Option<String>>(2)?, r.get::<_, Option<String>>(3)?) {
                (Some(scope), Some(key)) => Some(KeyRow {
                    scope,
                    key,
                    run_id: run_id.to_owned(),
                    fingerprint: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                    result_json: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                }),
                _ => None,
            };
            Ok(QueuedRow { n: r.get(0)?, text: r.get(1)?, key })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Keep `row` as queued for `run_id` (one commit).
    pub fn queued_push(&self, run_id: &str, row: QueuedRow) -> Result<()> {
        let id = run_id.to_owned();
        self.write(move |conn| queued_insert_in(conn, &id, &row))
    }

    /// Forget every queued follow-up of `run_id` (its queue was dropped).
    pub fn queued_clear(&self, run_id: &str) -> Result<()> {
        let id = run_id.to_owned();
        self.write(move |conn| queued_clear_in(conn, &id))
    }
}

/// Inside a write: keep `row` as queued for `run_id`.
pub fn queued_insert_in(conn: &rusqlite::Connection, run_id: &str, row: &QueuedRow) -> Result<()> {
    let key = row.key.as_ref();
    conn.prepare_cached(
        "INSERT OR REPLACE INTO queued_messages (run_id, n, text, key_scope, key, fingerprint, result_json) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        run_id,
        row.n,
        row.text,
        key.map(|k| &k.scope),
        key.map(|k| &k.key),
        key.map(|k| &k.fingerprint),
        key.map(|k| &k.result_json)
    ])?;
    Ok(())
}

/// Inside a write: the queued follow-up `n` of `run_id` started its turn (or went).
pub fn queued_delete_in(conn: &rusqlite::Connection, run_id: &str, n: i64) -> Result<()> {
    conn.prepare_cached("DELETE FROM queued_messages WHERE run_id = ?1 AND n = ?2")?.execute(params![run_id, n])?;
    Ok(())
}

/// Inside a write: forget every queued follow-up of `run_id`.
pub fn queued_clear_in(conn: &rusqlite::Connection, run_id: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM queued_messages WHERE run_id = ?1")?.execute(params![run_id])?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Rows come back in queue order (a smaller `n` first, as a forced message takes), with
    /// their keys; a started one is deleted, a cleared queue is empty, and a deleted run takes
    /// its rows with it.
    #[test]
    fn queued_follow_ups_keep_their_order_and_keys_until_started_cleared_or_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let key = KeyRow {
            scope: "run:r".into(),
            key: "m-1".into(),
            run_id: "r".into(),
            fingerprint: "f".into(),
            result_json: "{\"ok\":true}".into(),
        };
        let rows = [
            QueuedRow { n: 1, text: "second".into(), key: Some(key.clone()) },
            QueuedRow { n: 2, text: "third".into(), key: None },
            QueuedRow { n: 0, text: "first, forced".into(), key: None },
        ];
        for row in &rows {
            store.queued_push("r", row.clone()).unwrap();
        }
        store.queued_push("other", QueuedRow { n: 1, text: "x".into(), key: None }).unwrap();
        let texts = |store: &Store| store.queued_list("r").unwrap().into_iter().map(|r| r.text).collect::<Vec<_>>();
        assert_eq!(texts(&store), ["first, forced", "second", "third"]);
        assert_eq!(store.queued_list("r").unwrap()[1].key, Some(key));
        store.write(|conn| queued_delete_in(conn, "r", 0)).unwrap();
        assert_eq!(texts(&store), ["second", "third"]);
        store.queued_clear("r").unwrap();
        assert!(store.queued_list("r").unwrap().is_empty());
        store.run_delete("other").unwrap();
        assert!(store.queued_list("other").unwrap().is_empty());
    }
}
