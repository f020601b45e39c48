//! Wire records of coordination (API reference, "Coordination"): works, intents, and the results
//! of the agent-side tools. Plain data; the rules live in `agent`, `inbox` and `queue`.

use serde::{Deserialize, Serialize};
use spaces_sdk::{ApiError, ErrorCode};

/// Lifecycle of a work. `active` until the agent's `work_finish` closes it (`closed`) or the user
/// stops it (`stopped`). Agent calls on a closed or stopped work fail with `WORK_CLOSED`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    Active,
    Closed,
    Stopped,
}

/// When a queued intent may be claimed (see the module docs of `steer` for the exact rule).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Claimable at any `steer_claim_next` of its work.
    #[default]
    NextCheckpoint,
    /// Claimable once no `next_checkpoint` intent of its work is queued or claimed, or once the
    /// agent has called `work_finish` on the work.
    AfterCurrentWork,
    /// Never claimable in its own work; carried to the next work opened in the same workspace.
    NextWork,
}

/// Lifecycle of an intent: `draft` -> `queued` -> `claimed` -> `done` | `blocked`; `draft` and
/// `queued` may end `cancelled`. Only `queued` intents are ever delivered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum IntentState {
    Draft,
    Queued,
    Claimed,
    Done,
    Blocked,
    Cancelled,
}

/// How the agent ended a claimed intent (`steer_complete{outcome}`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Done,
    Blocked,
}

/// A unit of agent work that user instructions attach to. `created_at` is Unix time in ms.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Work {
    pub work_id: String,
    pub workspace_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub state: WorkState,
    pub created_at: u64,
}

/// A user instruction. `content` is the body. `revision` starts at 1 and counts body edits
/// (the value `intent_edit` and `intent_queue` check). Times are Unix ms.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Intent {
    pub intent_id: String,
    pub work_id: String,
    pub revision: u64,
    pub kind: String,
    pub delivery: Delivery,
    pub state: IntentState,
    pub content: String,
    pub created_at: u64,
    pub updated_at: u64,
}

/// `steer_status` result: counts only, never bodies. `queued` counts queued intents this work will
/// deliver (`next_work` ones excluded), `claimed` those claimed and not completed, `claimable_now`
/// those `steer_claim_next` could claim right now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SteerStatus {
    pub work_id: String,
    pub state: WorkState,
    pub queued: u64,
    pub claimed: u64,
    pub claimable_now: u64,
    pub queue_revision: u64,
}

/// The intent handed to the agent by `steer_claim_next`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClaimedItem {
    pub intent_id: String,
    pub revision: u64,
    pub kind: String,
    pub delivery: Delivery,
    pub content: String,
}

/// `steer_claim_next` result: `item` is absent when nothing is claimable now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClaimNext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<ClaimedItem>,
}

/// `work_finish` result. `closed: false` comes with `reason: "pending_user_input"` while `queued`
/// (deliverable queued intents) or `claimed` (claimed, not completed) is non-zero. `claimed` is
/// an addition to the API reference shape so the agent sees why a finish with `queued: 0` failed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkFinish {
    pub closed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub queued: u64,
    pub claimed: u64,
    pub state: WorkState,
}

/// Attached by the service to results of tools given a `work_id`. `pending_user_items` is queued
/// deliverable plus claimed intents: non-zero exactly when `work_finish` would refuse to close.
/// A hint, not the instruction body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Coordination {
    pub work_id: String,
    pub pending_user_items: u64,
    pub queue_revision: u64,
}

macro_rules! text_enum {
    ($ty:ident, $what:literal, $($var:ident => $s:literal),+) => {
        impl $ty {
            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$var => $s),+ }
            }
        }
        impl std::str::FromStr for $ty {
            type Err = ApiError;
            /// Parse the wire spelling; anything else is `INVALID_ARGUMENT` naming the choices.
            fn from_str(s: &str) -> Result<Self, ApiError> {
                match s {
                    $($s => Ok($ty::$var),)+
                    other => Err(ApiError::new(
                        ErrorCode::InvalidArgument,
                        format!(concat!("unknown ", $what, " {:?}; use one of: ", $($s, " "),+), other),
                    )),
                }
            }
        }
    };
}

text_enum!(WorkState, "work state", Active => "active", Closed => "closed", Stopped => "stopped");
text_enum!(Delivery, "delivery", NextCheckpoint => "next_checkpoint",
    AfterCurrentWork => "after_current_work", NextWork => "next_work");
text_enum!(IntentState, "intent state", Draft => "draft", Queued => "queued",
    Claimed => "claimed", Done => "done", Blocked => "blocked", Cancelled => "cancelled");
text_enum!(Outcome, "outcome", Done => "done", Blocked => "blocked");
