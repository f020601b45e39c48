//! The order of runs waiting for a turn slot (issue 33, admission): one row per run whose next
//! turn waits because the host or its Space runs as many turns as allowed, with its place
//! (`seq`, smaller first). Kept so a restarted daemon starts them in the same order. Rows go
//! when the run gets its slot or leaves the queue, and with their run.

use rusqlite::params;

use super::Store;
use crate::error::Result;

/// One waiting run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingRow {
    pub run_id: String,
    pub space: String,
    pub seq: u64,
}

impl Store {
    /// Record that `row.run_id` waits at `row.seq` (a run already waiting keeps its place).
    pub fn admission_wait(&self, row: &WaitingRow) -> Result<()> {
        let row = row.clone();
        self.write(move |conn| {
            conn.prepare_cached("INSERT OR IGNORE INTO admission_queue (run_id, space, seq) VALUES (?1, ?2, ?3)")?.execute(params![
                row.run_id,
                row.space,
                row.seq as i64
            ])?;
            Ok(())
        })
    }

    /// `run_id` no longer waits.
    pub fn admission_leave(&self, run_id: &str) -> Result<()> {
        let run_id = run_id.to_owned();
        self.write(move |conn| {
            conn.prepare_cached("DELETE FROM admission_queue WHERE run_id = ?1")?.execute(params![run_id])?;
            Ok(())
        })
    }

    /// Every waiting run, first first.
    pub fn admission_waiting(&self) -> Result<Vec<WaitingRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached("SELECT run_id, space, seq FROM admission_queue ORDER BY seq")?;
        let rows =
            stmt.query_map([], |r| Ok(WaitingRow { run_id: r.get(0)?, space: r.get(1)?, seq: r.get::<_, i64>(2)?.max(0) as u64 }))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn waiting_runs_keep_their_order_and_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let row = |id: &str, seq| WaitingRow { run_id: id.into(), space: "s".into(), seq };
        store.admission_wait(&row("b", 2)).unwrap();
        store.admission_wait(&row("a", 1)).unwrap();
        store.admission_wait(&row("b", 9)).unwrap();
        assert_eq!(store.admission_waiting().unwrap(), vec![row("a", 1), row("b", 2)]);
        store.admission_leave("a").unwrap();
        assert_eq!(store.admission_waiting().unwrap(), vec![row("b", 2)]);
    }
}
