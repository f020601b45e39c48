//! Idempotency keys of the mutating agent calls: `request_id` of `agent_start` (scoped to the
//! Space) and `message_id` of `agent_message` (scoped to the run).
//!
//! A key is stored with the result the call answered, in the same transaction as the call's
//! effect: with a start, the run's row ([`spaces_store::Store::run_insert_keyed`]); with a
//! message, the turn it started (the actor's turn-start commit, before the text goes to the
//! agent). A message queued behind a running turn is stored with its key in the run's queue
//! (`spaces_store::queued`) until its turn starts: a daemon that stops before then delivers it
//! after its restart, and a retry finds it queued. A repeat finds the key either stored or queued and answers the first
//! result; with another payload (the request's fingerprint differs) it is refused with
//! `OPERATION_KEY_CONFLICT`. Keys go with their run (`agent_remove`, `agent_prune`, retention).

use serde::{de::DeserializeOwned, Serialize};
use sha2::{Digest, Sha256};
use spaces_sdk::{bounded, ActionReport, AgentStartRequest, ApiError, ErrorCode, IDEMPOTENCY_KEY_MAX};
use spaces_store::keys::KeyRow;
use spaces_store::Store;

use crate::error::{Error, Result};

/// A key a caller gave, checked, with the fingerprint of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed {
    /// The request field it came in (`request_id`, `message_id`), for messages.
    field: &'static str,
    scope: String,
    key: String,
    fingerprint: String,
}

impl Keyed {
    /// `request_id` of `req`, a start in Space `space`; `None` without one. Errors:
    /// `INVALID_ARGUMENT` naming `request_id` for a key too long or with other characters.
    pub fn start(space: &str, req: &AgentStartRequest) -> Result<Option<Keyed>> {
        let Some(key) = &req.request_id else { return Ok(None) };
        check("request_id", key)?;
        let unkeyed = AgentStartRequest { request_id: None, ..req.clone() };
        Ok(Some(Keyed { field: "request_id", scope: format!("space:{space}"), key: key.clone(), fingerprint: fingerprint(&unkeyed)? }))
    }

    /// `message_id` of a message `text` (`force`) to run `run_id`; `None` without one. Errors:
    /// as [`Keyed::start`], naming `message_id`.
    pub fn message(run_id: &str, message_id: Option<&str>, text: &str, force: bool) -> Result<Option<Keyed>> {
        let Some(key) = message_id else { return Ok(None) };
        check("message_id", key)?;
        Ok(Some(Keyed {
            field: "message_id",
            scope: format!("run:{run_id}"),
            key: key.to_owned(),
            fingerprint: fingerprint(&(text, force))?,
        }))
    }

    /// The result stored with this key, if it is stored: `Ok(Some)` for a repeat of the same
    /// request, `Ok(None)` for a key not used yet. Errors: `OPERATION_KEY_CONFLICT` naming the
    /// key when it came with another request; `INTERNAL` (the state database).
    pub fn replay<T: DeserializeOwned>(&self, store: &Store) -> Result<Option<T>> {
        let Some(row) = store.key_get(&self.scope, &self.key)? else { return Ok(None) };
        self.same_request(&row.fingerprint)?;
        let result = serde_json::from_str(&row.result_json)?;
        Ok(Some(result))
    }

    /// Whether `other` is this key (a message already queued with it): `Ok(true)` for the same
    /// request, `Ok(false)` for another key. Errors: `OPERATION_KEY_CONFLICT` as [`Self::replay`].
    pub fn repeats(&self, other: &Keyed) -> std::result::Result<bool, ApiError> {
        if self.scope != other.scope || self.key != other.key {
            return Ok(false);
        }
        self.same_request(&other.fingerprint).map_err(|e| e.to_api())?;
        Ok(true)
    }

    /// The row that stores this key with `result` (its call's answer) for run `run_id`.
    pub fn row<T: Serialize>(&self, run_id: &str, result: &T) -> Result<KeyRow> {
        Ok(KeyRow {
            scope: self.scope.clone(),
            key: self.key.clone(),
            run_id: run_id.to_owned(),
            fingerprint: self.fingerprint.clone(),
            result_json: serde_json::to_string(result)?,
        })
    }

    /// The key a stored `row` holds, with the answer stored with it (a queued message read
    /// back after a restart); `None` for a row that does not parse.
    pub fn from_row(row: &KeyRow) -> Option<(Keyed, ActionReport)> {
        let field = if row.scope.starts_with("space:") { "request_id" } else { "message_id" };
        let report = serde_json::from_str(&row.result_json).ok()?;
        let key = Keyed { field, scope: row.scope.clone(), key: row.key.clone(), fingerprint: row.fingerprint.clone() };
        Some((key, report))
    }

    fn same_request(&self, stored: &str) -> Result<()> {
        if stored == self.fingerprint {
            return Ok(());
        }
        let what = if self.field == "request_id" { "agent_start request" } else { "message text or force" };
        let mut e = ApiError::new(
            ErrorCode::OperationKeyConflict,
            format!(
                "{} {:?} was already used with another {what}; a retry must repeat the first request exactly, and a \
                 new request needs a new {}",
                self.field,
                bounded(&self.key),
                self.field
            ),
        );
        e.field = Some(self.field.to_owned());
        Err(Error::Api(e))
    }
}

/// A message a run's actor holds: its text, and its key until the turn that delivers it
/// stores the key with `report`, the answer its caller got. `n`: its row in the store's queue
/// (`spaces_store::queued`) while it waits behind a running turn, deleted in its turn's first
/// commit.
#[derive(Debug, Clone)]
pub struct Queued {
    pub text: String,
    pub key: Option<(Keyed, ActionReport)>,
    pub n: Option<i64>,
}

impl From<String> for Queued {
    fn from(text: String) -> Self {
        Queued { text, key: None, n: None }
    }
}

/// `INVALID_ARGUMENT` naming `field` unless `key` is 1 to [`IDEMPOTENCY_KEY_MAX`] bytes of ASCII
/// letters, digits, `-`, `_`, `.` and `:`.
fn check(field: &str, key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && key.len() <= IDEMPOTENCY_KEY_MAX
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok {
        return Ok(());
    }
    let mut e = ApiError::new(
        ErrorCode::InvalidArgument,
        format!(
            "{field} {:?} is not a key: give 1 to {IDEMPOTENCY_KEY_MAX} ASCII letters, digits, '-', '_', '.' or ':' \
             (a UUID fits)",
            bounded(key)
        ),
    );
    e.field = Some(field.to_owned());
    Err(Error::Api(e))
}

/// `sha256:<hex>` of the request's JSON.
fn fingerprint<T: Serialize>(request: &T) -> Result<String> {
    let json = serde_json::to_vec(request)?;
    Ok(format!("sha256:{:x}", Sha256::digest(&json)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The key's charset and length bound, each refusal naming its field.
    #[test]
    fn a_key_is_1_to_128_bytes_of_letters_digits_and_dash_underscore_dot_colon() {
        for good in ["a", "3f2b9c1e-7d4a-4c1b-9a8e-0f6d2c4b1a7e", "job-42:try.1_x", &"k".repeat(IDEMPOTENCY_KEY_MAX)] {
            assert!(check("message_id", good).is_ok(), "{good}");
        }
        for bad in ["", "a b", "ä", "a/b", "a\nb", &"k".repeat(IDEMPOTENCY_KEY_MAX + 1)] {
            let e = check("message_id", bad).unwrap_err().to_api();
            assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("message_id")), "{bad:?}");
        }
    }

    /// The same key with another text or force is another request; a start's fingerprint
    /// leaves its own key out.
    #[test]
    fn the_fingerprint_covers_the_payload_not_the_key() {
        let a = Keyed::message("run-1", Some("k"), "hi", false).unwrap().unwrap();
        assert_eq!(a.repeats(&a.clone()), Ok(true));
        let other_text = Keyed::message("run-1", Some("k"), "hello", false).unwrap().unwrap();
        assert_eq!(a.repeats(&other_text).unwrap_err().code, ErrorCode::OperationKeyConflict);
        let other_force = Keyed::message("run-1", Some("k"), "hi", true).unwrap().unwrap();
        assert_eq!(a.repeats(&other_force).unwrap_err().code, ErrorCode::OperationKeyConflict);
        let other_run = Keyed::message("run-2", Some("k"), "hello", false).unwrap().unwrap();
        assert_eq!(a.repeats(&other_run), Ok(false));
        let req = |id: &str| AgentStartRequest {
            space: "s".into(),
            agent: "claude-code".into(),
            prompt: "p".into(),
            show: None,
            options: None,
            request_id: Some(id.into()),
            traceparent: None,
        };
        let (one, two) = (Keyed::start("s", &req("k1")).unwrap().unwrap(), Keyed::start("s", &req("k2")).unwrap().unwrap());
        assert_eq!(one.fingerprint, two.fingerprint);
    }
}
