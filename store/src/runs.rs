//! Runs and their turns.

use rusqlite::{params, OptionalExtension, Row};
use spaces_sdk::{Phase, SpaceAgentOptions, Status};

use super::{now_ms, Store};
use crate::error::Result;

/// One run as stored. `options` never holds `env` values (those live 0600 in the run dir).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub run_id: String,
    pub space: String,
    pub agent: String,
    pub created_ms: u64,
    pub status: Status,
    pub phase: Phase,
    pub reason: String,
    pub result_text: Option<String>,
    pub session_id: Option<String>,
    pub turns: u32,
    /// Absolute working directory of the agent.
    pub cwd: String,
    pub options: SpaceAgentOptions,
    pub notes: Vec<String>,
    /// Process group of the live agent process, if any.
    pub pgid: Option<i32>,
    /// The first turn's prompt, redacted and cut ([`spaces_sdk::RunStatus::prompt_excerpt`]);
    /// `None` for runs recorded before the column existed.
    pub prompt_excerpt: Option<String>,
    /// With status `quota_waiting`: when the run continues by itself, Unix ms.
    pub resets_at_ms: Option<u64>,
}

const COLUMNS: &str = "run_id, space, agent, created_ms, status, phase, reason, result_text, \
                       session_id, turns, cwd, options_json, notes_json, pgid, prompt_excerpt, resets_at_ms";

/// A run from its row. Errors: a column of the wrong type, or `options_json`/`notes_json` that
/// do not parse (never read as empty: a run's options hold its home, sandbox and budget, and
/// an unreadable row must say so rather than run without them).
fn from_row(r: &Row<'_>) -> rusqlite::Result<RunRow> {
    let unreadable = |column: usize| {
        move |e: serde_json::Error| rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e))
    };
    let options = serde_json::from_str(&r.get::<_, String>(11)?).map_err(unreadable(11))?;
    let notes = serde_json::from_str(&r.get::<_, String>(12)?).map_err(unreadable(12))?;
    Ok(RunRow {
        run_id: r.get(0)?,
        space: r.get(1)?,
        agent: r.get(2)?,
        created_ms: r.get::<_, i64>(3)? as u64,
        status: Status::parse(&r.get::<_, String>(4)?),
        phase: Phase::parse(&r.get::<_, String>(5)?),
        reason: r.get(6)?,
        result_text: r.get(7)?,
        session_id: r.get(8)?,
        turns: r.get::<_, i64>(9)? as u32,
        cwd: r.get(10)?,
        options,
        notes,
        pgid: r.get(13)?,
        prompt_excerpt: r.get(14)?,
        resets_at_ms: r.get::<_, Option<i64>>(15)?.map(|v| v.max(0) as u64),
    })
}

impl Store {
    /// Insert a new run.
    pub fn run_insert(&self, run: &RunRow) -> Result<()> {
        self.run_insert_keyed(run, None)
    }

    /// Insert a new run and, in the same transaction, the idempotency key of the `agent_start`
    /// that made it (`key`): both are stored or neither. An error when `key` is already taken
    /// (a concurrent start with the same key won): nothing is stored then.
    pub fn run_insert_keyed(&self, run: &RunRow, key: Option<super::keys::KeyRow>) -> Result<()> {
        let run = run.clone();
        self.write(move |conn| {
            if let Some(key) = &key {
                super::keys::key_insert_in(conn, key)?;
            }
            conn.execute(
                &format!("INSERT INTO runs ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)"),
                params![
                    run.run_id,
                    run.space,
                    run.agent,
                    run.created_ms as i64,
                    run.status.as_str(),
                    run.phase.as_str(),
                    run.reason,
                    run.result_text,
                    run.session_id,
                    run.turns as i64,
                    run.cwd,
                    serde_json::to_string(&run.options)?,
                    serde_json::to_string(&run.notes)?,
                    run.pgid,
                    run.prompt_excerpt,
                    run.resets_at_ms.map(|v| v as i64),
                ],
            )?;
            Ok(())
        })
    }

    /// Write back the mutable fields of `run` (state, result, session, turns, pgid).
    pub fn run_update(&self, run: &RunRow) -> Result<()> {
        let run = run.clone();
        self.write(move |conn| run_update_in(conn, &run))
    }

    /// The run `run_id`, if it exists.
    pub fn run_get(&self, run_id: &str) -> Result<Option<RunRow>> {
        Ok(self
            .reader()?
            .prepare_cached(&format!("SELECT {COLUMNS} FROM runs WHERE run_id = ?1"))?
            .query_row(params![run_id], from_row)
            .optional()?)
    }

    /// Every run of `space`, newest first.
    pub fn run_list(&self, space: &str) -> Result<Vec<RunRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM runs WHERE space = ?1 ORDER BY created_ms DESC, rowid DESC"))?;
        let rows = stmt.query_map(params![space], from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The runs started as persistent agent `home` (`options.home`), newest first.
    pub fn runs_with_home(&self, home: &str) -> Result<Vec<RunRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM runs WHERE json_extract(options_json, '$.home') = ?1 ORDER BY created_ms DESC, rowid DESC"
        ))?;
        let rows = stmt.query_map(params![home], from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Delete run `run_id` with its turns, events, journal position and idempotency keys, in
    /// one transaction.
    pub fn run_delete(&self, run_id: &str) -> Result<()> {
        let id = run_id.to_owned();
        self.write(move |conn| {
            for table in [
                "event_chunks",
                "turns",
                "journals",
                "request_keys",
                "queued_messages",
                "turn_usage",
                "admission_queue",
                "webhook_scan",
                "runs",
            ] {
                conn.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), params![id])?;
            }
            Ok(())
        })
    }

    /// Runs of persistent agents that may still take a turn (running, idle, failed, crashed):
    /// their leases are taken again at start.
    pub fn live_persistent_runs(&self) -> Result<Vec<RunRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM runs WHERE json_extract(options_json, '$.home') IS NOT NULL \
             AND status IN ('running', 'queued', 'quota_waiting', 'idle', 'failed', 'crashed') ORDER BY created_ms"
        ))?;
        let rows = stmt.query_map([], from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Runs a previous daemon may have left mid-flight: status `running`, `queued` or `quota_waiting`, or a recorded agent
    /// process group (used once at start-up).
    pub fn runs_to_recover(&self) -> Result<Vec<RunRow>> {
        let conn = self.reader()?;
        let mut stmt =
            conn.prepare(&format!("SELECT {COLUMNS} FROM runs WHERE status IN (?1, ?2, ?3) OR pgid IS NOT NULL ORDER BY created_ms"))?;
        let rows = stmt.query_map(params![Status::Running.as_str(), Status::Queued.as_str(), Status::QuotaWaiting.as_str()], from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// How many runs have a turn in flight (status `running`), on every Space.
    pub fn runs_running(&self) -> Result<usize> {
        let n: i64 = self
            .reader()?
            .prepare_cached("SELECT COUNT(*) FROM runs WHERE status = ?1")?
            .query_row(params![Status::Running.as_str()], |row| row.get(0))?;
        Ok(n as usize)
    }

    /// Record that turn `turn` of `run_id` ended with `stop_reason`; returns how long it ran,
    /// ms (0 when its start is not recorded).
    pub fn turn_end(&self, run_id: &str, turn: u32, stop_reason: &str) -> Result<u64> {
        let (run_id, stop_reason) = (run_id.to_owned(), stop_reason.to_owned());
        self.write(move |conn| turn_end_in(conn, &run_id, turn, &stop_reason, now_ms()))
    }
}

/// Inside a write: turn `turn` of `run_id` ended `stop_reason` at `now` (ms since the epoch);
/// returns how long it ran, ms (0 when its start is not recorded).
pub(crate) fn turn_end_in(conn: &rusqlite::Connection, run_id: &str, turn: u32, stop_reason: &str, now: u64) -> Result<u64> {
    let started: Option<i64> = conn
        .prepare_cached("UPDATE turns SET ended_ms = ?3, stop_reason = ?4 WHERE run_id = ?1 AND turn = ?2 RETURNING started_ms")?
        .query_row(params![run_id, turn as i64, now as i64, stop_reason], |r| r.get(0))
        .optional()?;
    Ok(started.map_or(0, |s| (now as i64 - s).max(0) as u64))
}

impl Store {
    /// Replace the stored options of `run_id` (`agent_budget` changes its budget). Errors: the
    /// options do not encode, or the write fails.
    pub fn run_set_options(&self, run_id: &str, options: &SpaceAgentOptions) -> Result<()> {
        let (run_id, json) = (run_id.to_owned(), serde_json::to_string(options)?);
        self.write(move |conn| {
            conn.execute("UPDATE runs SET options_json = ?2 WHERE run_id = ?1", params![run_id, json])?;
            Ok(())
        })
    }
}

/// Inside a write: the run row's state columns from `run`.
pub fn run_update_in(conn: &rusqlite::Connection, run: &RunRow) -> Result<()> {
    conn.prepare_cached(
        "UPDATE runs SET status = ?2, phase = ?3, reason = ?4, result_text = ?5,
             session_id = ?6, turns = ?7, pgid = ?8, resets_at_ms = ?9 WHERE run_id = ?1",
    )?
    .execute(params![
        run.run_id,
        run.status.as_str(),
        run.phase.as_str(),
        run.reason,
        run.result_text,
        run.session_id,
        run.turns as i64,
        run.pgid,
        run.resets_at_ms.map(|v| v as i64),
    ])?;
    Ok(())
}

/// Inside a write: turn `turn` of `run_id` started with `text`.
pub fn turn_start_in(conn: &rusqlite::Connection, run_id: &str, turn: u32, text: &str) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO turns (run_id, turn, text, started_ms) VALUES (?1, ?2, ?3, ?4)")?.execute(params![
        run_id,
        turn as i64,
        text,
        now_ms() as i64
    ])?;
    Ok(())
}

/// Inside a write: `excerpt` becomes the run's prompt excerpt if it has none (a fork made at
/// turn 0 carries no conversation: its first message is its first prompt).
pub fn prompt_excerpt_in(conn: &rusqlite::Connection, run_id: &str, excerpt: &str) -> Result<()> {
    conn.prepare_cached("UPDATE runs SET prompt_excerpt = ?2 WHERE run_id = ?1 AND prompt_excerpt IS NULL")?
        .execute(params![run_id, excerpt])?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn row(run_id: &str) -> RunRow {
        RunRow {
            run_id: run_id.to_owned(),
            space: "proj".to_owned(),
            agent: "claude-code".to_owned(),
            created_ms: 1,
            status: Status::Running,
            phase: Phase::Working,
            reason: "a turn is running".to_owned(),
            result_text: None,
            session_id: None,
            turns: 1,
            cwd: "/w".to_owned(),
            options: serde_json::from_value(serde_json::json!({"home": "h"})).unwrap(),
            notes: vec!["n".to_owned()],
            pgid: None,
            prompt_excerpt: None,
            resets_at_ms: None,
        }
    }

    /// A run whose stored options no longer parse is an error naming the column, never a run
    /// with empty options (which would lose its persistent home, its sandbox settings...).
    #[test]
    fn a_row_whose_options_do_not_parse_is_an_error_not_empty_options() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("spaces.db")).unwrap();
        store.run_insert(&row("r1")).unwrap();
        assert_eq!(store.run_get("r1").unwrap().unwrap(), row("r1"));
        store
            .write(|conn| {
                conn.execute("UPDATE runs SET options_json = '{\"home\": ' WHERE run_id = 'r1'", [])?;
                Ok(())
            })
            .unwrap();
        let e = store.run_get("r1").expect_err("a row that does not parse");
        assert!(e.to_string().contains("11"), "names the column: {e}");
    }

    /// A database of a `spacesd` from before version 1 (issue 31): its `openai-codex` runs ran
    /// `codex exec` and become `openai-codex-exec`, its `openai-codex-app-server` runs become
    /// `openai-codex`; once, so a new `openai-codex` run is never renamed by a later open.
    #[test]
    fn runs_of_the_renamed_codex_harnesses_keep_their_wire_after_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spaces.db");
        let store = Store::open(&path).unwrap();
        for (id, agent) in [("r1", "openai-codex"), ("r2", "openai-codex-app-server"), ("r3", "claude-code")] {
            store.run_insert(&RunRow { agent: agent.to_owned(), ..row(id) }).unwrap();
        }
        // As an older daemon left it: no schema version.
        store.write(|conn| Ok(conn.execute_batch("PRAGMA user_version = 0")?)).unwrap();
        drop(store);
        let agent = |store: &Store, id: &str| store.run_get(id).unwrap().unwrap().agent;
        let store = Store::open(&path).unwrap();
        assert_eq!([agent(&store, "r1"), agent(&store, "r2"), agent(&store, "r3")], ["openai-codex-exec", "openai-codex", "claude-code"]);
        store.run_insert(&RunRow { agent: "openai-codex".to_owned(), ..row("r4") }).unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!([agent(&store, "r1"), agent(&store, "r2"), agent(&store, "r4")], ["openai-codex-exec", "openai-codex", "openai-codex"]);
    }
}
