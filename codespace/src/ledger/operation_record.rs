//! Operation records: how a row and its events are read and written (API.md
//! `operation_status`; the wire shape is `spaces_sdk::tools::OperationRecord`).

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::ms;
use crate::error::{OperationRef, Result};

pub use spaces_sdk::tools::{EventName, OperationEvent, OperationKind, OperationRecord, OperationStatus};

/// An operation as the ledger stores it: the `operation_status` wire record plus what only the
/// ledger needs.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredOperation {
    /// The `operation_status` response.
    pub record: OperationRecord,
    /// The caller's `operation_key`, if any.
    pub key: Option<String>,
    /// The full stored `apply_patch` response (`{"ok": ...}` or `{"error": ...}`) to replay;
    /// `None` while in flight or when crash recovery closed the row.
    pub result: Option<Value>,
}

/// What [`crate::ledger::Ledger::mint`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Minted {
    /// A fresh row (`op-<uuid>`) and its `minted` event are committed: execute, then `finish`.
    New { operation_id: String },
    /// Same key and fingerprint, finished with a stored result: return it with `replayed: true`.
    Replay(StoredOperation),
    /// Same key and fingerprint but no stored result (in flight now, or closed `unknown` by
    /// crash recovery): report the record, never re-apply.
    Unfinished(StoredOperation),
}

pub(super) fn add_event(
    conn: &Connection,
    operation_id: &str,
    at: i64,
    name: EventName,
    status: Option<OperationStatus>,
    reason: Option<&str>,
) -> Result<()> {
    let name = match name {
        EventName::Minted => "minted",
        EventName::Finished => "finished",
    };
    conn.execute(
        "INSERT INTO operation_events (operation_id, at, name, status, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![operation_id, at, name, status.map(OperationStatus::as_str), reason],
    )?;
    Ok(())
}

/// Read one operation with its events, or `None`.
pub(super) fn load(conn: &Connection, by: &OperationRef) -> Result<Option<StoredOperation>> {
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
        .optional()?;
    let Some((operation_id, key, workspace_id, status, created_at, finished_at, files, changes, result)) = row else {
        return Ok(None);
    };
    let mut stmt = conn.prepare("SELECT at, name, status, reason FROM operation_events WHERE operation_id = ?1 ORDER BY id")?;
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
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some(StoredOperation {
        record: OperationRecord {
            operation_id,
            status: OperationStatus::parse(&status).unwrap_or(OperationStatus::Unknown),
            kind: OperationKind::Patch,
            workspace_id,
            created_at: ms(created_at),
            finished_at: finished_at.map(ms),
            files: serde_json::from_str(&files)?,
            changes: serde_json::from_str(&changes)?,
            events,
        },
        key,
        result: result.map(|r| serde_json::from_str(&r)).transpose()?,
    }))
}
