//! Webhooks (issue 33): endpoints the operator registers to be told of run events, without
//! polling. Each chosen event of every run is posted as JSON with the Standard Webhooks headers
//! (`webhook-id`: the delivery id, `webhook-timestamp`, `webhook-signature: v1,<base64
//! HMAC-SHA256 of "<id>.<timestamp>.<body>">`), retried with backoff, at least once and in order
//! per run, across daemon restarts.

use serde::{Deserialize, Serialize};

/// The webhook event types, and the run event each comes from.
pub const WEBHOOK_EVENTS: &[(&str, &str)] = &[
    ("run.started", "the first turn of a run started"),
    ("turn.ended", "any turn ended (its stop_reason in the event)"),
    ("run.idle", "a turn ended end_turn: the run waits for a follow-up (or is done with exit_when_idle)"),
    ("run.failed", "a turn ended error or crashed"),
    ("run.stopped", "a turn ended because the run was stopped"),
    ("approval.needed", "the agent asked for a permission"),
    ("budget.reached", "a turn ended budget_reached"),
    ("quota.waiting", "a turn ended quota_waiting"),
];

/// `webhook_add`: register an endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookAddRequest {
    /// Where to post: an `http` or `https` URL.
    pub url: String,
    /// The event types to send ([`WEBHOOK_EVENTS`]: `run.started`, `turn.ended`, `run.idle`,
    /// `run.failed`, `run.stopped`, `approval.needed`, `budget.reached`, `quota.waiting`);
    /// empty or absent: all. An unknown type is `INVALID_ARGUMENT` naming it.
    #[serde(default)]
    pub events: Vec<String>,
    /// The signing secret: at least 16 bytes; `whsec_<base64>` is decoded as Standard
    /// Webhooks does, any other text is used as its bytes. Never returned.
    pub secret: String,
}

/// A registered endpoint (never its secret), with its deliveries counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WebhookRecord {
    /// `wh-` + hex.
    pub webhook_id: String,
    pub url: String,
    /// The event types sent; empty: all.
    pub events: Vec<String>,
    /// Unix ms; events stored before it are not sent.
    pub created_ms: u64,
    /// Deliveries waiting for a (next) try.
    pub pending: u64,
    /// Deliveries the endpoint took (2xx).
    pub delivered: u64,
    /// Deliveries given up after the last try.
    pub failed: u64,
}

/// `webhook_remove`: unregister an endpoint (its deliveries go too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookRemoveRequest {
    pub webhook_id: String,
}

/// `webhook_deliveries`: deliveries, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookDeliveriesRequest {
    /// Only this endpoint's.
    #[serde(default)]
    pub webhook_id: Option<String>,
    /// Only `pending`, `delivered` or `failed` ones.
    #[serde(default)]
    pub status: Option<String>,
    /// At most this many (default 100, at most 1000).
    #[serde(default)]
    pub max: Option<u32>,
}

/// One delivery of one event to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WebhookDelivery {
    /// `<webhook_id>:<run_id>:<seq>:<event>`, the `webhook-id` header: the same on every try.
    pub delivery_id: String,
    pub webhook_id: String,
    pub run_id: String,
    /// The run event's seq.
    pub seq: u64,
    /// The webhook event type.
    pub event: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    /// Tries so far.
    pub attempts: u32,
    /// Why the last try failed: the endpoint's HTTP status or the connection error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it was made, Unix ms.
    pub created_ms: u64,
    /// When it was delivered or given up, Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_ms: Option<u64>,
    /// With status `pending`: when the next try is due, Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_ms: Option<u64>,
}

/// The `webhook_remove` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WebhookRemoved {
    pub webhook_id: String,
    /// False when there was no such endpoint.
    pub removed: bool,
}
