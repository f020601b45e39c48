//! Wire records of coordination (API reference, "Coordination"): works, intents, and the results
//! of the agent-side tools. Defined once in `spaces_sdk::tools`; the rules live in `agent`,
//! `inbox` and `queue`.

pub use spaces_sdk::tools::{
    ClaimedItem, Coordination, Delivery, FinishReason, Intent, IntentState, Outcome, SteerClaimNextResult, SteerStatus, Work,
    WorkFinishResult, WorkState,
};
