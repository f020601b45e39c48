//! Spaces and agent runs (API reference, "Agent runs"): typed operations over the supervisor.

use spaces_sdk::{
    ActionReport, AgentEventsRequest, AgentListRequest, AgentMessageRequest, AgentRunRequest, AgentStartReport, AgentStartRequest,
    AgentStatusRequest, ApiError, Capabilities, Empty, EventsPage, RunStatus, SpaceAddRequest, SpaceRecord,
};

use crate::service::Service;

type Result<T> = std::result::Result<T, ApiError>;

impl Service {
    /// `agent_capabilities`: the harnesses of this host. Never fails.
    pub async fn agent_capabilities(&self, _req: Empty) -> Result<Capabilities> {
        Ok(self.sup.capabilities())
    }

    /// `space_list`: every registered Space. Errors: `INTERNAL` (state database).
    pub async fn space_list(&self, _req: Empty) -> Result<Vec<SpaceRecord>> {
        self.sup.space_list().map_err(|e| e.to_api())
    }

    /// `space_add`. Errors: `INVALID_ARGUMENT` (bad name, root not a directory, a changed
    /// registration without `replace`).
    pub async fn space_add(&self, req: SpaceAddRequest) -> Result<SpaceRecord> {
        let record =
            SpaceRecord { name: req.name, root: req.root, read_only: req.read_only, approvals: req.approvals, network: req.network };
        self.sup.space_add(&record, req.replace).map_err(|e| e.to_api())
    }

    /// `agent_start`. Errors: `WORKSPACE_NOT_FOUND`, `HARNESS_UNAVAILABLE`, `INVALID_ARGUMENT`,
    /// `LEASE_HELD` (with `options.home`, another run holds the persistent agent),
    /// `OPERATION_KEY_CONFLICT` (`request_id` used before with another request); nothing is
    /// created on error.
    pub async fn agent_start(&self, req: AgentStartRequest) -> Result<AgentStartReport> {
        self.sup.agent_start(&req.space.clone(), &req).await.map_err(|e| e.to_api())
    }

    /// `agent_list`: newest first. Errors: `WORKSPACE_NOT_FOUND`.
    pub async fn agent_list(&self, req: AgentListRequest) -> Result<Vec<RunStatus>> {
        let sup = self.sup.clone();
        off_runtime(move || sup.agent_list(&req.space)).await
    }

    /// `agent_status` with `tail` lines (default 40, clamped to 10,000). Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`.
    pub async fn agent_status(&self, req: AgentStatusRequest) -> Result<RunStatus> {
        let sup = self.sup.clone();
        off_runtime(move || sup.agent_status(&req.space, &req.run_id, req.tail_lines())).await
    }

    /// `agent_events`: `max` clamped to 1..=1000 (default 100), `wait_ms` to 60,000. Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT` (cursor past the last event).
    pub async fn agent_events(&self, req: AgentEventsRequest) -> Result<EventsPage> {
        let wait = std::time::Duration::from_millis(req.wait_ms_clamped());
        self.sup
            .agent_events(&req.space, &req.run_id, req.cursor.unwrap_or(0), req.page_size(), wait, req.raw.unwrap_or(false))
            .await
            .map_err(|e| e.to_api())
    }

    /// `agent_message`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT`,
    /// `OPERATION_KEY_CONFLICT` (`message_id` used before with another text or `force`).
    pub async fn agent_message(&self, req: AgentMessageRequest) -> Result<ActionReport> {
        self.sup
            .agent_message(
                &req.space,
                &req.run_id,
                &req.text,
                req.force.unwrap_or(false),
                req.message_id.as_deref(),
                req.traceparent.as_deref(),
            )
            .await
            .map_err(|e| e.to_api())
    }

    /// `agent_interrupt`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`.
    pub async fn agent_interrupt(&self, req: AgentRunRequest) -> Result<ActionReport> {
        self.sup.agent_interrupt(&req.space, &req.run_id).await.map_err(|e| e.to_api())
    }

    /// `agent_stop`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`.
    pub async fn agent_stop(&self, req: AgentRunRequest) -> Result<ActionReport> {
        self.sup.agent_stop(&req.space, &req.run_id).await.map_err(|e| e.to_api())
    }

    /// `space_remove`. Errors: `WORKSPACE_NOT_FOUND`, `AGENT_BUSY` (live runs without `force`).
    pub async fn space_remove(&self, req: spaces_sdk::SpaceRemoveRequest) -> Result<spaces_sdk::SpaceRemoveReport> {
        self.sup.space_remove(&req.name, req.force.unwrap_or(false)).await.map_err(|e| e.to_api())
    }

    /// `agent_remove`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `AGENT_BUSY` (a live run).
    pub async fn agent_remove(&self, req: AgentRunRequest) -> Result<spaces_sdk::RunsRemovedReport> {
        self.sup.agent_remove(&req.space, &req.run_id).await.map_err(|e| e.to_api())
    }

    /// `agent_prune`. Errors: `WORKSPACE_NOT_FOUND`.
    pub async fn agent_prune(&self, req: spaces_sdk::AgentPruneRequest) -> Result<spaces_sdk::RunsRemovedReport> {
        self.sup.agent_prune(&req.space, req.older_than_ms).await.map_err(|e| e.to_api())
    }

    /// `agent_usage`: the usage ledger's sums for a run or a Space. Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`.
    pub async fn agent_usage(&self, req: spaces_sdk::AgentUsageRequest) -> Result<spaces_sdk::UsageReport> {
        let sup = self.sup.clone();
        off_runtime(move || sup.agent_usage(&req)).await
    }

    /// `agent_diff`: what the run's turns changed, from its checkpoints (issue 34). Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT` naming a turn without a
    /// checkpoint (or `turn` given with a range).
    pub async fn agent_diff(&self, req: spaces_sdk::AgentDiffRequest) -> Result<spaces_sdk::DiffReport> {
        let sup = self.sup.clone();
        off_runtime(move || sup.agent_diff(&req)).await
    }

    /// `agent_rewind`: take an idle run back to the end of a turn (issue 34). Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `AGENT_BUSY` mid-turn, `INVALID_ARGUMENT` naming
    /// `to_turn` (no such ended turn, or no checkpoint of it).
    pub async fn agent_rewind(&self, req: spaces_sdk::AgentRewindRequest) -> Result<spaces_sdk::RewindReport> {
        self.sup.agent_rewind(&req).await.map_err(|e| e.to_api())
    }

    /// `agent_fork`: a new idle run from a run's turn, in its own worktree (issue 34). Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT` naming `at_turn` (no
    /// checkpoint), or a read-only Space.
    pub async fn agent_fork(&self, req: spaces_sdk::AgentForkRequest) -> Result<spaces_sdk::ForkReport> {
        self.sup.agent_fork(&req).await.map_err(|e| e.to_api())
    }

    /// `agent_merge`: a fork's changes into its parent's folder (issue 34). Errors:
    /// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT` (not a fork), `AGENT_BUSY`
    /// while either run has a turn in flight.
    pub async fn agent_merge(&self, req: spaces_sdk::AgentMergeRequest) -> Result<spaces_sdk::MergeReport> {
        self.sup.agent_merge(&req).await.map_err(|e| e.to_api())
    }

    /// `webhook_add`. Errors: `INVALID_ARGUMENT` naming `url`, `events` or `secret`.
    pub async fn webhook_add(&self, req: spaces_sdk::WebhookAddRequest) -> Result<spaces_sdk::WebhookRecord> {
        self.sup.webhooks().add(&req)
    }

    /// `webhook_list`. Errors: `INTERNAL` (state database).
    pub async fn webhook_list(&self, _req: Empty) -> Result<Vec<spaces_sdk::WebhookRecord>> {
        self.sup.webhooks().list()
    }

    /// `webhook_remove`. Errors: `INTERNAL` (state database).
    pub async fn webhook_remove(&self, req: spaces_sdk::WebhookRemoveRequest) -> Result<spaces_sdk::WebhookRemoved> {
        self.sup.webhooks().remove(&req.webhook_id)
    }

    /// `webhook_deliveries`. Errors: `INVALID_ARGUMENT` naming `status`.
    pub async fn webhook_deliveries(&self, req: spaces_sdk::WebhookDeliveriesRequest) -> Result<Vec<spaces_sdk::WebhookDelivery>> {
        self.sup.webhooks().deliveries(&req)
    }

    /// `agent_budget`. Errors: `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND`, `INVALID_ARGUMENT` (a bad
    /// limit, named).
    pub async fn agent_budget(&self, req: spaces_sdk::AgentBudgetRequest) -> Result<spaces_sdk::BudgetReport> {
        self.sup.agent_budget(&req).await.map_err(|e| e.to_api())
    }
}

/// Runs `read` (database reads on a reader connection, an output tail read from disk) on the
/// blocking pool, so a status or list never holds a runtime worker while it reads.
async fn off_runtime<T: Send + 'static>(read: impl FnOnce() -> spaces_host::error::Result<T> + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(read).await {
        Ok(r) => r.map_err(|e| e.to_api()),
        Err(e) => Err(ApiError::new(spaces_sdk::ErrorCode::Internal, format!("the read task failed: {e}"))),
    }
}
