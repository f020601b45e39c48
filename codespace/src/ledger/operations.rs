//! The patch ledger: mint before execution, finish with the replayable result, look up by id or
//! key (API.md `apply_patch` idempotency and `operation_status`; CASES.md X19).

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use super::operation_record::{add_event, load, EventName, Minted, OperationStatus, StoredOperation};
use super::{now_ms, Ledger};
use crate::error::OperationRef;
use crate::error::{Error, Result};
use crate::fs::ChangeRecord;

impl Ledger {
    /// Record a patch before it runs (see [`Minted`]). Errors: `OPERATION_KEY_CONFLICT` when the
    /// key belongs to a different fingerprint (carrying the earlier `operation_id`),
    /// `INVALID_ARGUMENT` for an empty key, `INTERNAL` on database failure.
    pub fn mint(&self, workspace_id: &str, operation_key: Option<&str>, fingerprint: &str) -> Result<Minted> {
        if operation_key == Some("") {
            return Err(Error::invalid("operation_key must not be empty; omit it or send a non-empty key"));
        }
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(key) = operation_key {
            let found: Option<(String, String)> = tx
                .query_row("SELECT operation_id, fingerprint FROM operations WHERE operation_key = ?1", [key], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            if let Some((operation_id, stored)) = found {
                if stored != fingerprint {
                    return Err(Error::OperationKeyConflict { operation_key: key.to_owned(), operation_id });
                }
                let record = load(&tx, &OperationRef::Id(operation_id.clone()))?.ok_or_else(|| not_found(&operation_id))?;
                return Ok(if record.result.is_some() { Minted::Replay(record) } else { Minted::Unfinished(record) });
            }
        }
        let operation_id = format!("op-{}", uuid::Uuid::new_v4());
        let now = now_ms();
        tx.execute(
            "INSERT INTO operations (operation_id, operation_key, fingerprint, workspace_id, status, created_at, boot_id)
             VALUES (?1, ?2, ?3, ?4, 'unknown', ?5, ?6)",
            params![operation_id, operation_key, fingerprint, workspace_id, now, self.boot_id],
        )?;
        add_event(&tx, &operation_id, now, EventName::Minted, None, None)?;
        tx.commit()?;
        drop(conn);
        self.added();
        Ok(Minted::New { operation_id })
    }

    /// Records what an unfinished operation is about to change (`files`, planned `changes`)
    /// before its commit starts, so that a crash mid-commit leaves a record (`unknown`) that
    /// names the files to inspect. Errors: `OPERATION_NOT_FOUND`; a finished operation is left
    /// as it is (`INTERNAL`).
    pub fn record_plan(&self, operation_id: &str, files: &[String], changes: &[ChangeRecord]) -> Result<()> {
        let files_json = serde_json::to_string(files)?;
        let changes_json = serde_json::to_string(changes)?;
        let updated = self.conn().execute(
            "UPDATE operations SET files_json = ?2, changes_json = ?3
                 WHERE operation_id = ?1 AND finished_at IS NULL",
            params![operation_id, files_json, changes_json],
        )?;
        if updated == 1 {
            return Ok(());
        }
        self.operation(OperationRef::Id(operation_id.to_owned()))?;
        Err(Error::OperationFinished { operation_id: operation_id.to_owned() })
    }

    /// Close a minted operation with its outcome and the full response to replay (`result`),
    /// writing a `finished` event. Errors: `OPERATION_NOT_FOUND`; `INTERNAL` if it was already
    /// finished (e.g. closed `unknown` by a later daemon's crash recovery) or on database failure.
    pub fn finish(
        &self,
        operation_id: &str,
        status: OperationStatus,
        files: &[String],
        changes: &[ChangeRecord],
        result: &Value,
        reason: Option<&str>,
    ) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let finished: Option<Option<i64>> =
            tx.query_row("SELECT finished_at FROM operations WHERE operation_id = ?1", [operation_id], |r| r.get(0)).optional()?;
        match finished {
            None => return Err(not_found(operation_id)),
            Some(Some(_)) => return Err(Error::OperationFinished { operation_id: operation_id.to_owned() }),
            Some(None) => {}
        }
        let now = now_ms();
        let files_json = serde_json::to_string(files)?;
        let changes_json = serde_json::to_string(changes)?;
        tx.execute(
            "UPDATE operations SET status = ?2, finished_at = ?3, files_json = ?4, changes_json = ?5, result_json = ?6
             WHERE operation_id = ?1",
            params![operation_id, status.as_str(), now, files_json, changes_json, result.to_string()],
        )?;
        add_event(&tx, operation_id, now, EventName::Finished, Some(status), reason)?;
        tx.commit()?;
        Ok(())
    }

    /// The recorded operation (`operation_status`). Errors: `OPERATION_NOT_FOUND`, `INTERNAL`.
    pub fn operation(&self, by: OperationRef) -> Result<StoredOperation> {
        let conn = self.conn();
        load(&conn, &by)?.ok_or(Error::OperationNotFound { by })
    }
}

/// Crash recovery: close every unfinished row as `unknown` with a `finished` event whose reason
/// is `"unknown"`, in one transaction. Returns how many were closed.
pub(super) fn close_unfinished(conn: &mut Connection) -> Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let ids: Vec<String> = {
        let mut stmt = tx.prepare("SELECT operation_id FROM operations WHERE finished_at IS NULL")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let now = now_ms();
    for id in &ids {
        tx.execute("UPDATE operations SET status = 'unknown', finished_at = ?2 WHERE operation_id = ?1", params![id, now])?;
        add_event(&tx, id, now, EventName::Finished, Some(OperationStatus::Unknown), Some("unknown"))?;
    }
    tx.commit()?;
    Ok(ids.len())
}

fn not_found(operation_id: &str) -> Error {
    Error::OperationNotFound { by: OperationRef::Id(operation_id.to_owned()) }
}
