//! Approval records: the stored hold, the resume decision, and how a hold row is read (the wire
//! shapes are `spaces_sdk::tools::{ApprovalRecord, ApprovalState, Decision}`).

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::ms;
use crate::error::{Error, Result};

pub use spaces_sdk::tools::{ApprovalRecord, ApprovalState, Decision, HoldableTool};

/// A hold as the ledger stores it: the wire record plus what only the ledger needs.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredApproval {
    /// The hold as `approval_create` answers it.
    pub record: ApprovalRecord,
    /// The stored terminal result (`{"ok": ...}` or `{"error": ...}`), once consumed.
    pub result: Option<Value>,
    /// The patch operation a resume minted (see [`super::Ledger::approval_link_operation`]).
    pub operation_id: Option<String>,
}

/// What [`crate::ledger::Ledger::approval_begin_resume`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum ResumeStart {
    /// Was granted; now `resuming` under this daemon's `boot_id` (committed): re-check policy,
    /// run once, then [`crate::ledger::Ledger::approval_consume`].
    Run(StoredApproval),
    /// Already consumed: the stored terminal result (a repeated resume).
    Done(Value),
    /// Found `resuming` under another `boot_id`: an earlier daemon died mid-resume. Recover a
    /// patch from the ledger (`operation_id` if linked) or answer `APPROVAL_AMBIGUOUS` for a
    /// command; never re-run. Left as is, so every later resume answers the same way.
    Interrupted(StoredApproval),
}

pub(super) fn load(conn: &Connection, approval_id: &str) -> Result<StoredApproval> {
    load_with_boot(conn, approval_id).map(|(rec, _)| rec)
}

/// The hold and the `boot_id` of the daemon that began its resume, if any.
pub(super) fn load_with_boot(conn: &Connection, approval_id: &str) -> Result<(StoredApproval, Option<String>)> {
    type Row = (String, String, String, String, i64, Option<String>, Option<String>, Option<String>);
    let row: Option<Row> = conn
        .query_row(
            "SELECT workspace_id, tool, arguments_json, state, created_at, result_json, operation_id, boot_id
             FROM approvals WHERE approval_id = ?1",
            [approval_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
        )
        .optional()?;
    let Some((workspace_id, tool, arguments, state, created_at, result, operation_id, boot_id)) = row else {
        return Err(Error::ApprovalNotFound { approval_id: approval_id.to_owned() });
    };
    let rec = StoredApproval {
        record: ApprovalRecord {
            approval_id: approval_id.to_owned(),
            workspace_id,
            tool: HoldableTool::parse(&tool).ok_or_else(|| unreadable(approval_id, "tool", &tool))?,
            arguments: serde_json::from_str(&arguments)?,
            state: ApprovalState::parse(&state).ok_or_else(|| unreadable(approval_id, "state", &state))?,
            created_at: ms(created_at),
        },
        result: result.map(|r| serde_json::from_str(&r)).transpose()?,
        operation_id,
    };
    Ok((rec, boot_id))
}

/// A stored column of hold `approval_id` this version does not know.
fn unreadable(approval_id: &str, column: &str, value: &str) -> Error {
    Error::StoredUnreadable { what: format!("the {column} of approval {approval_id}"), detail: format!("unknown {column} {value:?}") }
}
