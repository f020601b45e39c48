//! Coordination (API reference, "Coordination"): the agent's tools `work_open`,
//! `steer_status`, `steer_claim_next`, `steer_complete`, `work_finish`, the work and intent
//! records, and the bodies of the user's HTTP `/inbox` requests.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorCode};

/// Lifecycle of a work: `active` until the agent's `work_finish` closes it (`closed`) or the
/// user stops it (`stopped`). Agent calls on a closed or stopped work fail with `WORK_CLOSED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// Open: instructions are delivered.
    Active,
    /// Finished by the agent.
    Closed,
    /// Stopped by the user.
    Stopped,
}

/// When a queued intent may be claimed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntentState {
    /// Being written by the user; never delivered, editable.
    Draft,
    /// Waiting to be claimed by the agent.
    Queued,
    /// Handed to the agent by `steer_claim_next`.
    Claimed,
    /// Handled by the agent.
    Done,
    /// The agent could not handle it.
    Blocked,
    /// Withdrawn by the user.
    Cancelled,
}

/// How the agent ended a claimed intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Handled.
    Done,
    /// Could not be handled.
    Blocked,
}

/// Why `work_finish` did not close the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Instructions are queued or claimed: claim and complete them first.
    PendingUserInput,
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
text_enum!(FinishReason, "finish reason", PendingUserInput => "pending_user_input");

/// A unit of agent work that user instructions attach to (`work_open`'s result, the `/inbox`
/// listings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Work {
    /// `work-<uuid>`.
    pub work_id: String,
    /// The workspace the work is about.
    pub workspace_id: String,
    /// A short human title, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `active`, `closed` or `stopped`.
    pub state: WorkState,
    /// When it was opened, Unix ms.
    pub created_at: u64,
}

/// A user instruction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Intent {
    /// `intent-<uuid>`.
    pub intent_id: String,
    /// The work it belongs to.
    pub work_id: String,
    /// Starts at 1 and counts body edits (what edit and queue check).
    pub revision: u64,
    /// What kind of instruction; `instruction` by default.
    pub kind: String,
    /// When it may be claimed.
    pub delivery: Delivery,
    /// Where it is in its lifecycle.
    pub state: IntentState,
    /// The instruction text.
    pub content: String,
    /// When it was created, Unix ms.
    pub created_at: u64,
    /// When it last changed, Unix ms.
    pub updated_at: u64,
}

/// `work_open`: open a work the user can attach instructions to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkOpenRequest {
    /// The workspace the work is about (`WORKSPACE_NOT_FOUND` when unknown).
    pub workspace_id: String,
    /// A short human title shown in the inbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `steer_status`: the work's queue, counts only (never bodies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteerStatusRequest {
    /// The work (`work-<uuid>`); the result carries its `coordination`.
    pub work_id: String,
}

/// Result of `steer_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SteerStatus {
    /// The work.
    pub work_id: String,
    /// `active`, `closed` or `stopped`.
    pub state: WorkState,
    /// Queued intents this work will deliver (`next_work` ones excluded).
    pub queued: u64,
    /// Claimed intents not completed yet.
    pub claimed: u64,
    /// Intents `steer_claim_next` could claim right now.
    pub claimable_now: u64,
    /// Grows on every change to the work's queue.
    pub queue_revision: u64,
}

/// `steer_claim_next`: claim the next claimable instruction, in queue order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteerClaimNextRequest {
    /// The work (`work-<uuid>`); the result carries its `coordination`.
    pub work_id: String,
}

/// The instruction handed to the agent by `steer_claim_next`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimedItem {
    /// The intent, to pass to `steer_complete`.
    pub intent_id: String,
    /// Its revision.
    pub revision: u64,
    /// What kind of instruction.
    pub kind: String,
    /// Its delivery.
    pub delivery: Delivery,
    /// The instruction text.
    pub content: String,
}

/// Result of `steer_claim_next`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SteerClaimNextResult {
    /// The claimed instruction; absent when nothing is claimable now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ClaimedItem>,
}

/// `steer_complete`: end a claimed instruction. Repeating the same outcome returns the intent
/// unchanged. Result: the [`Intent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteerCompleteRequest {
    /// The work (`work-<uuid>`); the result carries its `coordination`.
    pub work_id: String,
    /// The claimed intent (from `steer_claim_next`).
    pub intent_id: String,
    /// `done` or `blocked`.
    pub outcome: Outcome,
}

/// `work_finish`: close the work unless instructions remain for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkFinishRequest {
    /// The work (`work-<uuid>`); the result carries its `coordination`.
    pub work_id: String,
}

/// Result of `work_finish`. `closed: false` comes with `reason: pending_user_input` while
/// `queued` or `claimed` is non-zero; `claimed` tells why a finish with `queued: 0` failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkFinishResult {
    /// True when the work is now closed.
    pub closed: bool,
    /// Why it stayed open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<FinishReason>,
    /// Deliverable queued intents left.
    pub queued: u64,
    /// Claimed intents not completed yet.
    pub claimed: u64,
    /// The work's state now.
    pub state: WorkState,
}

/// `inbox_works`: the works of this host, newest first, optionally of one workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxWorksRequest {
    /// Only the works of this workspace (a Space name); default: every work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
}

/// Names one work: `inbox_work`, `inbox_work_stop`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkRef {
    /// The work (`work-<uuid>`).
    pub work_id: String,
}

/// `inbox_work`: one work and every intent of it, in queue order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InboxWorkResult {
    /// The work.
    pub work: Work,
    /// Its intents, in queue order (every state).
    pub intents: Vec<Intent>,
}

/// `inbox_intent_create`: a new draft at the end of a work's queue (only queued intents are
/// ever delivered).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentCreateRequest {
    /// The work to add to (`work-<uuid>`).
    pub work_id: String,
    /// The instruction text; not empty.
    pub body: String,
    /// What kind of instruction; default `instruction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// When it may be claimed; default `next_checkpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
}

/// `inbox_intent_edit`: replace a draft's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentEditRequest {
    /// The draft (`intent-<uuid>`).
    pub intent_id: String,
    /// The new instruction text; not empty.
    pub body: String,
    /// The revision the caller saw (`INTENT_REVISION_CONFLICT` when stale).
    pub revision: u64,
}

/// `inbox_intent_queue`: make a draft deliverable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentQueueRequest {
    /// The draft (`intent-<uuid>`).
    pub intent_id: String,
    /// The revision the caller saw (`INTENT_REVISION_CONFLICT` when stale).
    pub revision: u64,
}

/// Names one intent: `inbox_intent_cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentRef {
    /// The intent (`intent-<uuid>`).
    pub intent_id: String,
}

/// `inbox_reorder`: the new order of a work's open intents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentReorderRequest {
    /// The work (`work-<uuid>`).
    pub work_id: String,
    /// Every open (draft or queued) intent of the work, each exactly once, in the new order.
    pub intent_ids: Vec<String>,
}
