//! The coordination block of tools given a `work_id` ([`CodeSpace::coordinated`]) and the
//! steering tools. Transports reach every tool through the daemon's operation table, which
//! calls the typed methods, so names and semantics are the same everywhere.

use std::future::Future;

use spaces_sdk::tools::{
    Coordinated, Intent, SteerClaimNextRequest, SteerClaimNextResult, SteerCompleteRequest, SteerStatus, SteerStatusRequest, Work,
    WorkFinishRequest, WorkFinishResult, WorkOpenRequest,
};

use super::{blocking, CodeSpace};
use crate::error::Result;

impl CodeSpace {
    /// Runs `tool` (a typed method's future, not yet polled) in the coordination context of
    /// `work_id`: when one is given, the work must exist (`WORK_NOT_FOUND`, checked before the
    /// tool runs) and the result carries `coordination{work_id, pending_user_items,
    /// queue_revision}` read after the tool ran (hints, not instruction bodies; left out if
    /// they cannot be read). Without a `work_id` the result is returned as it is.
    ///
    /// The typed methods ignore a request's `work_id`; a transport passes it here, as
    /// the daemon's operation table does.
    pub async fn coordinated<T>(&self, work_id: Option<String>, tool: impl Future<Output = Result<T>>) -> Result<Coordinated<T>> {
        let Some(work_id) = work_id else {
            return Ok(Coordinated::bare(tool.await?));
        };
        {
            let work_id = work_id.clone();
            self.steer(move |s| s.work(&work_id).map(|_| ())).await?;
        }
        let result = tool.await?;
        let coordination = self.steer(move |s| s.coordination(&work_id)).await.ok();
        Ok(Coordinated { result, coordination })
    }

    /// `work_open{workspace_id, title?}` -> the new active work. Queued `next_work`
    /// instructions left on closed or stopped works of the workspace move to it. Errors:
    /// `WORKSPACE_NOT_FOUND`, `INVALID_ARGUMENT` (empty `workspace_id`).
    pub async fn work_open(&self, req: WorkOpenRequest) -> Result<Work> {
        self.workspace(&req.workspace_id)?;
        self.steer(move |s| s.work_open(&req.workspace_id, req.title.as_deref())).await
    }

    /// `steer_status{work_id}` -> counts of the work's queue, never bodies. Errors:
    /// `WORK_NOT_FOUND`.
    pub async fn steer_status(&self, req: SteerStatusRequest) -> Result<SteerStatus> {
        self.steer(move |s| s.steer_status(&req.work_id)).await
    }

    /// `steer_claim_next{work_id}` -> `{item?}`: claims the next claimable instruction.
    /// Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`.
    pub async fn steer_claim_next(&self, req: SteerClaimNextRequest) -> Result<SteerClaimNextResult> {
        self.steer(move |s| s.steer_claim_next(&req.work_id)).await
    }

    /// `steer_complete{work_id, intent_id, outcome}` -> the ended intent. Errors:
    /// `WORK_NOT_FOUND`, `WORK_CLOSED`, `INTENT_NOT_FOUND`, `INVALID_ARGUMENT` (not claimed),
    /// `INTENT_NOT_EDITABLE` (ended otherwise).
    pub async fn steer_complete(&self, req: SteerCompleteRequest) -> Result<Intent> {
        self.steer(move |s| s.steer_complete(&req.work_id, &req.intent_id, req.outcome)).await
    }

    /// `work_finish{work_id}` -> `{closed, reason?, queued, claimed, state}`. Errors:
    /// `WORK_NOT_FOUND`, `WORK_CLOSED` (stopped by the user).
    pub async fn work_finish(&self, req: WorkFinishRequest) -> Result<WorkFinishResult> {
        self.steer(move |s| s.work_finish(&req.work_id)).await
    }

    /// Runs `f` on the steering store on tokio's blocking pool (the `/inbox` routes use it too).
    /// Errors: `f`'s, or [`crate::error::Error::TaskFailed`] if the task panicked.
    pub async fn steer<T: Send + 'static>(&self, f: impl FnOnce(&crate::steer::Steering) -> Result<T> + Send + 'static) -> Result<T> {
        let this = self.clone();
        blocking(move || f(&this.inner.steering)).await
    }
}
