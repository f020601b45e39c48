//! The patch ledger: mint before execution, finish with the replayable result, look up by id or
//! key (API.md `apply_patch` idempotency and `operation_status`; CASES.md X19).

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use spaces_sdk::{ApiError, ErrorCode};

use super::operation_record::{
    add_event, load, EventName, Minted, OperationRef, OperationStatus, StoredOperation,
};
use crate::fs::ChangeRecord;
use super::{db, now_ms, Ledger};

impl Ledger {
    /// Record a patch before it runs (see [`Minted`]). Errors: `OPERATION_KEY_CONFLICT` when the
    /// key belongs to a different fingerprint (carrying the earlier `operation_id`),
    /// `INVALID_ARGUMENT` for an empty key, `INTERNAL` on database failure.
    pub fn mint(
        &self,
        workspace_id: &str,
        operation_key: Option<&str>,
        fingerprint: &str,
    ) -> Result<Minted, ApiError> {
        if operation_key == Some("") {
            return Err(ApiError::new(
                ErrorCode::InvalidArgument,
                "operation_key must not be empty; omit it or send a non-empty key",
            ));
        }
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        if let Some(key) = operation_key {
            let found: Option<(String, String)> = tx
                .query_row(
                    "SELECT operation_id, fingerprint FROM operations WHERE operation_key = ?1",
                    [key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(db)?;
            if let Some((operation_id, stored)) = found {
                if stored != fingerprint {
                    let mut e = ApiError::new(
                        ErrorCode::OperationKeyConflict,
                        format!(
                            "operation_key {key:?} belongs to different arguments (operation \
                             {operation_id}); inspect that request with operation_status, and use \
                             a new key for a different request (a preview and its apply need \
                             different keys)"
                        ),
                    );
                    e.operation_id = Some(operation_id);
                    return Err(e);
                }
                let record = load(&tx, &OperationRef::Id(operation_id.clone()))?
                    .ok_or_else(|| not_found(&operation_id))?;
                return Ok(if record.result.is_some() {
                    Minted::Replay(record)
                } else {
                    Minted::Unfinished(record)
                });
            }
        }
        let operation_id = format!("op-{}", uuid::Uuid::new_v4());
        let now = now_ms();
        tx.execute(
            "INSERT INTO operations (operation_id, operation_key, fingerprint, workspace_id, status, created_at, boot_id)
             VALUES (?1, ?2, ?3, ?4, 'unknown', ?5, ?6)",
            params![operation_id, operation_key, fingerprint, workspace_id, now, self.boot_id],
        )
        .map_err(db)?;
        add_event(&tx, &operation_id, now, EventName::Minted, None, None)?;
        tx.commit().map_err(db)?;
        Ok(Minted::New { operation_id })
    }

    /// Records what an unfinished operation is about to change (`files`, planned `changes`)
    /// before its commit starts, so that a crash mid-commit leaves a record (`unknown`) that
    /// names the files to inspect. Errors: `OPERATION_NOT_FOUND`; a finished operation is left
    /// as it is (`INTERNAL`).
    pub fn record_plan(&self, operation_id: &str, files: &[String], changes: &[ChangeRecord]) -> Result<(), ApiError> {
        let files_json = serde_json::to_string(files).map_err(db)?;
        let changes_json = serde_json::to_string(changes).map_err(db)?;
        let updated = self
            .conn()
            .execute(
                "UPDATE operations SET files_json = ?2, changes_json = ?3
                 WHERE operation_id = ?1 AND finished_at IS NULL",
                params![operation_id, files_json, changes_json],
            )
            .map_err(db)?;
        if updated == 1 {
            return Ok(());
        }
        match self.operation(OperationRef::Id(operation_id.to_owned())) {
            Ok(_) => Err(ApiError::new(
                ErrorCode::Internal,
                format!("operation {operation_id} is already finished; its record stands"),
            )),
            Err(e) => Err(e),
        }
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
    ) -> Result<(), ApiError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        let finished: Option<Option<i64>> = tx
            .query_row(
                "SELECT finished_at FROM operations WHERE operation_id = ?1",
                [operation_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
        match finished {
            None => return Err(not_found(operation_id)),
            Some(Some(_)) => {
                let mut e = ApiError::new(
                    ErrorCode::Internal,
                    format!(
                        "operation {operation_id} is already finished; its recorded outcome \
                         stands, inspect it with operation_status"
                    ),
                );
                e.operation_id = Some(operation_id.to_owned());
                return Err(e);
            }
            Some(None) => {}
        }
        let now = now_ms();
        let files_json = serde_json::to_string(files).map_err(db)?;
        let changes_json = serde_json::to_string(changes).map_err(db)?;
        tx.execute(
            "UPDATE operations SET status = ?2, finished_at = ?3, files_json = ?4, changes_json = ?5, result_json = ?6
             WHERE operation_id = ?1",
            params![operation_id, status.as_str(), now, files_json, changes_json, result.to_string()],
        )
        .map_err(db)?;
        add_event(&tx, operation_id, now, EventName::Finished, Some(status), reason)?;
        tx.commit().map_err(db)
    }

    /// The recorded operation (`operation_status`). Errors: `OPERATION_NOT_FOUND`, `INTERNAL`.
    pub fn operation(&self, by: OperationRef) -> Result<StoredOperation, ApiError> {
        let conn = self.conn();
        load(&conn, &by)?.ok_or_else(|| match &by {
            OperationRef::Id(id) => not_found(id),
            OperationRef::Key(key) => ApiError::new(
                ErrorCode::OperationNotFound,
                format!(
            "no recorded patch has operation_key {key:?}; operation_status tracks apply_patch only \
             (commands stay on process_id)"
        ),
            ),
        })
    }
}

/// Crash recovery: close every unfinished row as `unknown` with a `finished` event whose reason
/// is `"unknown"`, in one transaction. Returns how many were closed.
pub(super) fn close_unfinished(conn: &mut Connection) -> Result<usize, ApiError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
    let ids: Vec<String> = {
        let mut stmt = tx
            .prepare("SELECT operation_id FROM operations WHERE finished_at IS NULL")
            .map_err(db)?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)?
    };
    let now = now_ms();
    for id in &ids {
        tx.execute(
            "UPDATE operations SET status = 'unknown', finished_at = ?2 WHERE operation_id = ?1",
            params![id, now],
        )
        .map_err(db)?;
        add_event(
            &tx,
            id,
            now,
            EventName::Finished,
            Some(OperationStatus::Unknown),
            Some("unknown"),
        )?;
    }
    tx.commit().map_err(db)?;
    Ok(ids.len())
}

fn not_found(operation_id: &str) -> ApiError {
    let mut e = ApiError::new(
        ErrorCode::OperationNotFound,
        format!(
            "no recorded patch has operation_id {operation_id:?}; operation_status tracks apply_patch only \
             (commands stay on process_id)"
        ),
    );
    e.operation_id = Some(operation_id.to_owned());
    e
}
