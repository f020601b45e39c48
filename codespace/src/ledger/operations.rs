//! The patch ledger: mint before execution, finish with the replayable result, look up by id or
//! key (API.md `apply_patch` idempotency and `operation_status`; CASES.md X19).

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use spaces_sdk::{ApiError, ErrorCode};

use super::{db, ms, now_ms, Ledger};

/// Outcome of a patch (API.md `apply_patch.status`). A row still in flight also reads `unknown`
/// (its outcome is not known yet); it is told apart by having no `finished_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    Checked,
    Applied,
    Rejected,
    FailedRolledBack,
    FailedPartial,
    Unknown,
}

impl OperationStatus {
    /// The wire spelling, e.g. `"failed_rolled_back"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Checked => "checked",
            Self::Applied => "applied",
            Self::Rejected => "rejected",
            Self::FailedRolledBack => "failed_rolled_back",
            Self::FailedPartial => "failed_partial",
            Self::Unknown => "unknown",
        }
    }

    /// Parse the wire spelling; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Checked, Self::Applied, Self::Rejected, Self::FailedRolledBack, Self::FailedPartial, Self::Unknown]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// What the ledger tracks: patches only (commands stay on `process_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    Patch,
}

/// Name of a ledger event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventName {
    Minted,
    Finished,
}

/// One entry of `operation_status.events`: `{at (Unix ms), name, status?, reason?}`.
/// A `finished` event with `reason: "unknown"` was written by crash recovery.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OperationEvent {
    pub at: u64,
    pub name: EventName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<OperationStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The `operation_status` response (API.md): times in Unix ms, `changes` as the caller stored
/// them (`[{path, kind, before_version?, after_version?}]`). `key` and `result` are internal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OperationRecord {
    pub operation_id: String,
    pub status: OperationStatus,
    pub kind: OperationKind,
    pub workspace_id: String,
    pub created_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    pub files: Vec<String>,
    pub changes: Value,
    pub events: Vec<OperationEvent>,
    /// The caller's `operation_key`, if any.
    #[serde(skip)]
    pub key: Option<String>,
    /// The full stored `apply_patch` response (or error JSON) to replay; `None` while in flight
    /// or when crash recovery closed the row.
    #[serde(skip)]
    pub result: Option<Value>,
}

/// How to find an operation: exactly one of `operation_id` or `operation_key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationRef {
    Id(String),
    Key(String),
}

/// What [`Ledger::mint`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Minted {
    /// A fresh row (`op-<uuid>`) and its `minted` event are committed: execute, then `finish`.
    New { operation_id: String },
    /// Same key and fingerprint, finished with a stored result: return it with `replayed: true`.
    Replay(OperationRecord),
    /// Same key and fingerprint but no stored result (in flight now, or closed `unknown` by
    /// crash recovery): report the record, never re-apply.
    Unfinished(OperationRecord),
}

impl Ledger {
    /// Record a patch before it runs (see [`Minted`]). Errors: `OPERATION_KEY_CONFLICT` when the
    /// key belongs to a different fingerprint (carrying the earlier `operation_id`),
    /// `INVALID_ARGUMENT` for an empty key, `INTERNAL` on database failure.
    pub fn mint(&self, workspace_id: &str, operation_key: Option<&str>, fingerprint: &str) -> Result<Minted, ApiError> {
        if operation_key == Some("") {
            return Err(ApiError::new(ErrorCode::InvalidArgument, "operation_key must not be empty; omit it or send a non-empty key"));
        }
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        if let Some(key) = operation_key {
            let found: Option<(String, String)> = tx
                .query_row("SELECT operation_id, fingerprint FROM operations WHERE operation_key = ?1", [key], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
                .map_err(db)?;
            if let Some((operation_id, stored)) = found {
                if stored != fingerprint {
                    let mut e = ApiError::new(
                        ErrorCode::OperationKeyConflict,
                        format!("operation_key {key:?} belongs to different arguments (operation {operation_id}); inspect that request with operation_status, and use a new key for a different request (a preview and its apply need different keys)"),
                    );
                    e.operation_id = Some(operation_id);
                    return Err(e);
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
        )
        .map_err(db)?;
        add_event(&tx, &operation_id, now, EventName::Minted, None, None)?;
        tx.commit().map_err(db)?;
        Ok(Minted::New { operation_id })
    }

    /// Close a minted operation with its outcome and the full response to replay (`result`),
    /// writing a `finished` event. Errors: `OPERATION_NOT_FOUND`; `INTERNAL` if it was already
    /// finished (e.g. closed `unknown` by a later daemon's crash recovery) or on database failure.
    pub fn finish(
        &self,
        operation_id: &str,
        status: OperationStatus,
        files: &[String],
        changes: &Value,
        result: &Value,
        reason: Option<&str>,
    ) -> Result<(), ApiError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
        let finished: Option<Option<i64>> = tx
            .query_row("SELECT finished_at FROM operations WHERE operation_id = ?1", [operation_id], |r| r.get(0))
            .optional()
            .map_err(db)?;
        match finished {
            None => return Err(not_found(operation_id)),
            Some(Some(_)) => {
                let mut e = ApiError::new(ErrorCode::Internal, format!("operation {operation_id} is already finished; its recorded outcome stands, inspect it with operation_status"));
                e.operation_id = Some(operation_id.to_owned());
                return Err(e);
            }
            Some(None) => {}
        }
        let now = now_ms();
        let files_json = serde_json::to_string(files).map_err(db)?;
        tx.execute(
            "UPDATE operations SET status = ?2, finished_at = ?3, files_json = ?4, changes_json = ?5, result_json = ?6
             WHERE operation_id = ?1",
            params![operation_id, status.as_str(), now, files_json, changes.to_string(), result.to_string()],
        )
        .map_err(db)?;
        add_event(&tx, operation_id, now, EventName::Finished, Some(status), reason)?;
        tx.commit().map_err(db)
    }

    /// The recorded operation (`operation_status`). Errors: `OPERATION_NOT_FOUND`, `INTERNAL`.
    pub fn operation(&self, by: OperationRef) -> Result<OperationRecord, ApiError> {
        let conn = self.conn();
        load(&conn, &by)?.ok_or_else(|| match &by {
            OperationRef::Id(id) => not_found(id),
            OperationRef::Key(key) => ApiError::new(
                ErrorCode::OperationNotFound,
                format!("no recorded patch has operation_key {key:?}; operation_status tracks apply_patch only (commands stay on process_id)"),
            ),
        })
    }
}

/// Crash recovery: close every unfinished row as `unknown` with a `finished` event whose reason
/// is `"unknown"`, in one transaction. Returns how many were closed.
pub(super) fn close_unfinished(conn: &mut Connection) -> Result<usize, ApiError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db)?;
    let ids: Vec<String> = {
        let mut stmt = tx.prepare("SELECT operation_id FROM operations WHERE finished_at IS NULL").map_err(db)?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)?
    };
    let now = now_ms();
    for id in &ids {
        tx.execute("UPDATE operations SET status = 'unknown', finished_at = ?2 WHERE operation_id = ?1", params![id, now])
            .map_err(db)?;
        add_event(&tx, id, now, EventName::Finished, Some(OperationStatus::Unknown), Some("unknown"))?;
    }
    tx.commit().map_err(db)?;
    Ok(ids.len())
}

fn not_found(operation_id: &str) -> ApiError {
    let mut e = ApiError::new(
        ErrorCode::OperationNotFound,
        format!("no recorded patch has operation_id {operation_id:?}; operation_status tracks apply_patch only (commands stay on process_id)"),
    );
    e.operation_id = Some(operation_id.to_owned());
    e
}

fn add_event(
    conn: &Connection,
    operation_id: &str,
    at: i64,
    name: EventName,
    status: Option<OperationStatus>,
    reason: Option<&str>,
) -> Result<(), ApiError> {
    let name = match name {
        EventName::Minted => "minted",
        EventName::Finished => "finished",
    };
    conn.execute(
        "INSERT INTO operation_events (operation_id, at, name, status, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![operation_id, at, name, status.map(OperationStatus::as_str), reason],
    )
    .map_err(db)?;
    Ok(())
}

/// Read one operation with its events, or `None`.
fn load(conn: &Connection, by: &OperationRef) -> Result<Option<OperationRecord>, ApiError> {
    let (column, value) = match by {
        OperationRef::Id(id) => ("operation_id", id),
        OperationRef::Key(key) => ("operation_key", key),
    };
    let sql = format!(
        "SELECT operation_id, operation_key, workspace_id, status, created_at, finished_at, files_json, changes_json, result_json
         FROM operations WHERE {column} = ?1"
    );
    type Row = (String, Option<String>, String, String, i64, Option<i64>, String, String, Option<String>);
    let row: Option<Row> = conn
        .query_row(&sql, [value], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?))
        })
        .optional()
        .map_err(db)?;
    let Some((operation_id, key, workspace_id, status, created_at, finished_at, files, changes, result)) = row else {
        return Ok(None);
    };
    let mut stmt = conn
        .prepare("SELECT at, name, status, reason FROM operation_events WHERE operation_id = ?1 ORDER BY id")
        .map_err(db)?;
    let events = stmt
        .query_map([&operation_id], |r| {
            let name: String = r.get(1)?;
            let status: Option<String> = r.get(2)?;
            Ok(OperationEvent {
                at: ms(r.get(0)?),
                name: if name == "minted" { EventName::Minted } else { EventName::Finished },
                status: status.as_deref().and_then(OperationStatus::parse),
                reason: r.get(3)?,
            })
        })
        .map_err(db)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db)?;
    Ok(Some(OperationRecord {
        operation_id,
        status: OperationStatus::parse(&status).unwrap_or(OperationStatus::Unknown),
        kind: OperationKind::Patch,
        workspace_id,
        created_at: ms(created_at),
        finished_at: finished_at.map(ms),
        files: serde_json::from_str(&files).map_err(db)?,
        changes: serde_json::from_str(&changes).map_err(db)?,
        events,
        key,
        result: result.map(|r| serde_json::from_str(&r)).transpose().map_err(db)?,
    }))
}
