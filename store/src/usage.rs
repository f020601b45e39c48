//! The usage ledger (issue 33): one row per ended turn with what it spent, the turn's own share
//! of the CLI's figures ([`spaces_sdk::TurnUsage`]), and the figures as the CLI reported them
//! (`reported_json`), so a restarted daemon continues running totals where they were. Rows go
//! with their run (`run_delete`).

use rusqlite::{params, Row};
use spaces_sdk::{TurnUsage, Usage};

use super::Store;
use crate::error::Result;

/// One ledger row: the turn's figures and what the CLI reported for it.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    pub usage: TurnUsage,
    /// The CLI's own figures of the turn's last `usage` event (running totals where the CLI
    /// keeps them); empty when it sent none.
    pub reported: Usage,
}

const COLUMNS: &str = "u.run_id, u.turn, u.ended_ms, u.stop_reason, u.model, u.input_tokens, u.cached_input_tokens, \
                       u.output_tokens, u.cost_usd, u.cost_estimated, u.duration_ms, u.tool_calls, u.reported_json";

fn from_row(r: &Row<'_>) -> rusqlite::Result<LedgerRow> {
    let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
    let reported: String = r.get(12)?;
    Ok(LedgerRow {
        usage: TurnUsage {
            run_id: r.get(0)?,
            turn: n(1)? as u32,
            ended_ms: n(2)?,
            stop_reason: r.get(3)?,
            model: r.get(4)?,
            input_tokens: n(5)?,
            cached_input_tokens: n(6)?,
            output_tokens: n(7)?,
            cost_usd: r.get(8)?,
            cost_estimated: r.get::<_, i64>(9)? != 0,
            duration_ms: n(10)?,
            tool_calls: n(11)?,
        },
        // Written by `usage_record` from a `Usage`; an unreadable one only loses a baseline.
        reported: serde_json::from_str(&reported).unwrap_or_default(),
    })
}

/// Inside a write: record (or replace) `row`.
fn insert_in(conn: &rusqlite::Connection, row: &LedgerRow) -> Result<()> {
    let u = &row.usage;
    let reported = serde_json::to_string(&row.reported).unwrap_or_else(|_| "{}".to_owned());
    conn.prepare_cached(
        "INSERT OR REPLACE INTO turn_usage (run_id, turn, ended_ms, stop_reason, model, input_tokens,
         cached_input_tokens, output_tokens, cost_usd, cost_estimated, duration_ms, tool_calls, reported_json)
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
    )?
    .execute(params![
        u.run_id,
        u.turn as i64,
        u.ended_ms as i64,
        u.stop_reason,
        u.model,
        u.input_tokens as i64,
        u.cached_input_tokens as i64,
        u.output_tokens as i64,
        u.cost_usd,
        u.cost_estimated as i64,
        u.duration_ms as i64,
        u.tool_calls as i64,
        reported,
    ])?;
    Ok(())
}

impl Store {
    /// The end of turn `row.usage.turn` (its stop reason, `turns.ended_ms`) and its ledger row,
    /// in one transaction: the row's `ended_ms` and `duration_ms` (ms) are filled in from the
    /// turn's stored start. Returns the row as stored. Errors: the write fails (neither is
    /// stored).
    pub fn turn_end_counted(&self, row: LedgerRow) -> Result<LedgerRow> {
        self.write(move |conn| {
            let mut row = row;
            let now = crate::now_ms();
            let u = &mut row.usage;
            u.duration_ms = crate::runs::turn_end_in(conn, &u.run_id, u.turn, &u.stop_reason, now)?;
            u.ended_ms = now;
            insert_in(conn, &row)?;
            Ok(row)
        })
    }

    /// Ledger rows of `run_id`, oldest turn first.
    pub fn usage_of_run(&self, run_id: &str) -> Result<Vec<LedgerRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM turn_usage u WHERE u.run_id = ?1 ORDER BY u.turn"))?;
        let rows = stmt.query_map(params![run_id], from_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Ledger rows of every run of `space` whose turn ended at or after `since_ms`, oldest
    /// first.
    pub fn usage_of_space(&self, space: &str, since_ms: u64) -> Result<Vec<LedgerRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM turn_usage u JOIN runs r ON r.run_id = u.run_id
             WHERE r.space = ?1 AND u.ended_ms >= ?2 ORDER BY u.ended_ms, u.run_id, u.turn"
        ))?;
        let rows = stmt.query_map(params![space, since_ms as i64], from_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_turn_recorded_twice_keeps_the_last_row_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let mut row = LedgerRow {
            usage: TurnUsage { run_id: "run-1".into(), turn: 1, input_tokens: 10, cost_usd: Some(0.25), ..TurnUsage::default() },
            reported: Usage { total_cost_usd: Some(0.25), ..Usage::default() },
        };
        store.turn_end_counted(row.clone()).unwrap();
        row.usage.output_tokens = 7;
        let stored = store.turn_end_counted(row.clone()).unwrap();
        assert_eq!(stored.usage.output_tokens, 7);
        assert!(stored.usage.ended_ms > 0, "{stored:?}");
        assert_eq!(stored.usage.duration_ms, 0, "no start of the turn is stored: {stored:?}");
        assert_eq!(store.usage_of_run("run-1").unwrap(), vec![stored]);
        assert!(store.usage_of_run("run-2").unwrap().is_empty());
    }

    #[test]
    fn a_turns_end_and_its_row_are_one_write_timed_from_the_stored_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        store.write(|conn| crate::runs::turn_start_in(conn, "run-1", 1, "hi")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let usage = TurnUsage { run_id: "run-1".into(), turn: 1, stop_reason: "end_turn".into(), ..TurnUsage::default() };
        let stored = store.turn_end_counted(LedgerRow { usage, reported: Usage::default() }).unwrap();
        assert!(stored.usage.duration_ms >= 20, "{stored:?}");
        let (ended, reason): (i64, String) = store
            .reader()
            .unwrap()
            .query_row("SELECT ended_ms, stop_reason FROM turns WHERE run_id = 'run-1' AND turn = 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((ended as u64, reason.as_str()), (stored.usage.ended_ms, "end_turn"));
        assert_eq!(store.usage_of_run("run-1").unwrap(), vec![stored]);
    }
}
