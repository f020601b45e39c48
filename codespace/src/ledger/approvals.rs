//! Approval holds (API.md "Approvals"; seed "Confirm a held mutation"): a hold per held
//! `apply_patch`/`exec_command` request, resolved once, resumed once, its terminal result stored.
//!
//! States: pending -> granted | denied (terminal); granted -> resuming (stamped with the resuming
//! daemon's `boot_id`) -> consumed (with the result). `queued` (API.md) is not used by this ledger.

use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde_json::{Map, Value};

use super::approval_record::{load, load_with_boot, ApprovalRecord, ApprovalState, Decision, HoldableTool, ResumeStart, StoredApproval};
use super::fingerprint::{canonical_json, sha256_hex};
use super::{now_ms, Ledger};
use crate::error::{Error, Result};

/// Tag that versions the hold-key encoding.
const HOLD_TAG: &str = "spaces.codespace.approval_hold.v1\n";

impl Ledger {
    /// Open a pending hold `appr-<uuid>` for `tool` with `arguments`, or return the pending or
    /// granted (not yet resumed) hold for the same workspace, tool and canonical arguments (a
    /// retry reuses its hold). Errors: `RESOURCE_QUEUE_FULL` when the workspace already has
    /// [`super::Retention::pending_approvals_max`] pending holds, or their requests and this one
    /// would be more than [`super::Retention::pending_approvals_max_bytes`]; `INTERNAL`.
    pub fn approval_hold(&self, workspace_id: &str, tool: HoldableTool, arguments: &Value) -> Result<ApprovalRecord> {
        let tool = tool.as_str();
        let mut doc = Map::new();
        doc.insert("arguments".into(), arguments.clone());
        doc.insert("tool".into(), Value::String(tool.to_owned()));
        doc.insert("workspace_id".into(), Value::String(workspace_id.to_owned()));
        let hold_key = sha256_hex(HOLD_TAG, &canonical_json(&Value::Object(doc)));
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing: Option<String> = tx
            .query_row(
                "SELECT approval_id FROM approvals WHERE hold_key = ?1 AND state IN ('pending', 'granted')
                 ORDER BY created_at DESC LIMIT 1",
                [&hold_key],
                |r| r.get(0),
            )
            .optional()?;
        let created = existing.is_none();
        let approval_id = match existing {
            Some(id) => id,
            None => {
                // The pending holds' count and the bytes of their requests, in one pass.
                let (pending, held): (i64, i64) = tx.query_row(
                    "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(arguments_json AS BLOB))), 0) FROM approvals
                     WHERE workspace_id = ?1 AND state = 'pending'",
                    [workspace_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                let limit = self.retention.pending_approvals_max;
                if usize::try_from(pending).unwrap_or(usize::MAX) >= limit {
                    return Err(Error::ApprovalQueueFull { workspace_id: workspace_id.to_owned(), limit });
                }
                let arguments_json = canonical_json(arguments);
                let held = u64::try_from(held).unwrap_or(0);
                let adding = arguments_json.len() as u64;
                let limit_bytes = self.retention.pending_approvals_max_bytes;
                if held.saturating_add(adding) > limit_bytes {
                    return Err(Error::ApprovalQueueTooLarge { workspace_id: workspace_id.to_owned(), held, adding, limit: limit_bytes });
                }
                let id = format!("appr-{}", uuid::Uuid::new_v4());
                let now = now_ms();
                tx.execute(
                    "INSERT INTO approvals (approval_id, workspace_id, tool, arguments_json, hold_key, state, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6)",
                    params![id, workspace_id, tool, arguments_json, hold_key, now],
                )?;
                id
            }
        };
        let stored = load(&tx, &approval_id)?;
        tx.commit()?;
        drop(conn);
        if created {
            self.added();
        }
        Ok(stored.record)
    }

    /// The hold. Errors: `APPROVAL_NOT_FOUND`, `INTERNAL`.
    pub fn approval(&self, approval_id: &str) -> Result<StoredApproval> {
        load(&self.conn(), approval_id)
    }

    /// Grant or deny a pending hold (`approval_resolve`). Deny is terminal. Errors:
    /// `APPROVAL_NOT_FOUND`; `APPROVAL_CONFLICT` unless pending; `INTERNAL`.
    pub fn approval_resolve(&self, approval_id: &str, decision: Decision) -> Result<ApprovalRecord> {
        let to = match decision {
            Decision::Grant => ApprovalState::Granted,
            Decision::Deny => ApprovalState::Denied,
        };
        self.transition(
            approval_id,
            |rec| match rec.record.state {
                ApprovalState::Pending => Ok(()),
                other => Err(conflict(approval_id, &format!("it is {}, and only a pending hold can be resolved", other.as_str()))),
            },
            to,
            None,
        )
    }

    /// Start `operation_resume` (see [`ResumeStart`]). Errors: `APPROVAL_NOT_FOUND`;
    /// `APPROVAL_CONFLICT` when pending, denied, or already resuming under this daemon; `INTERNAL`.
    pub fn approval_begin_resume(&self, approval_id: &str) -> Result<ResumeStart> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (mut rec, owner) = load_with_boot(&tx, approval_id)?;
        match rec.record.state {
            ApprovalState::Consumed => Ok(ResumeStart::Done(rec.result.unwrap_or(Value::Null))),
            ApprovalState::Pending => Err(conflict(approval_id, "it is still pending; grant it with approval_resolve first")),
            ApprovalState::Denied => Err(conflict(approval_id, "it was denied, and deny is terminal")),
            ApprovalState::Resuming if owner.as_deref() == Some(self.boot_id.as_str()) => Err(conflict(
                approval_id,
                "a resume is already in progress; wait and call operation_resume again \
                     to read its result",
            )),
            ApprovalState::Resuming => Ok(ResumeStart::Interrupted(rec)),
            ApprovalState::Granted => {
                tx.execute(
                    "UPDATE approvals SET state = 'resuming', boot_id = ?2, updated_at = ?3 WHERE approval_id = ?1",
                    params![approval_id, self.boot_id, now_ms()],
                )?;
                tx.commit()?;
                rec.record.state = ApprovalState::Resuming;
                Ok(ResumeStart::Run(rec))
            }
        }
    }

    /// Record which patch operation a resume minted, so a resume interrupted by a crash can
    /// recover it from the ledger. Errors: `APPROVAL_NOT_FOUND`; `APPROVAL_CONFLICT` unless
    /// resuming.
    pub fn approval_link_operation(&self, approval_id: &str, operation_id: &str) -> Result<ApprovalRecord> {
        self.transition(
            approval_id,
            |rec| match rec.record.state {
                ApprovalState::Resuming => Ok(()),
                other => Err(conflict(approval_id, &format!("it is {}, not resuming", other.as_str()))),
            },
            ApprovalState::Resuming,
            Some(("operation_id", operation_id)),
        )
    }

    /// Store the terminal result of a resume and mark the hold consumed. Allowed from `resuming`
    /// under any `boot_id` (a recovered interrupted patch resume consumes too). Errors:
    /// `APPROVAL_NOT_FOUND`; `APPROVAL_CONFLICT` unless resuming; `INTERNAL`.
    pub fn approval_consume(&self, approval_id: &str, result: &Value) -> Result<ApprovalRecord> {
        let text = result.to_string();
        self.transition(
            approval_id,
            |rec| match rec.record.state {
                ApprovalState::Resuming => Ok(()),
                other => Err(conflict(approval_id, &format!("it is {}, and only a resuming hold can be consumed", other.as_str()))),
            },
            ApprovalState::Consumed,
            Some(("result_json", &text)),
        )
    }

    /// One transaction: load, check with `allow`, set `to` (plus one extra column when given),
    /// return the new record.
    fn transition(
        &self,
        approval_id: &str,
        allow: impl FnOnce(&StoredApproval) -> Result<()>,
        to: ApprovalState,
        extra: Option<(&str, &str)>,
    ) -> Result<ApprovalRecord> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        allow(&load(&tx, approval_id)?)?;
        tx.execute("UPDATE approvals SET state = ?2, updated_at = ?3 WHERE approval_id = ?1", params![approval_id, to.as_str(), now_ms()])?;
        if let Some((column, value)) = extra {
            // `column` is one of two fixed names chosen above, never caller input.
            let sql = format!("UPDATE approvals SET {column} = ?2 WHERE approval_id = ?1");
            tx.execute(&sql, params![approval_id, value])?;
        }
        let rec = load(&tx, approval_id)?;
        tx.commit()?;
        Ok(rec.record)
    }
}

fn conflict(approval_id: &str, why: &str) -> Error {
    Error::ApprovalConflict { approval_id: approval_id.to_owned(), why: why.to_owned() }
}
