//! Persistent agents and their homes (API reference, "Words": volume, persistent agent;
//! `Spaces.persistent_agent_send`): typed operations over the supervisor and the volume
//! ([`spaces_host::homes`]).

use spaces_sdk::{
    ApiError, Empty, HomeDeleteReport, HomeExportRequest, HomeImportRequest, HomeMoveReport, HomeMoveRequest, HomeRecord, HomeRequest,
    HomeRestoreRequest, HomeSnapshot, HomeTransferReport, PersistentAgentSendReport, PersistentAgentSendRequest,
};

use crate::service::Service;

type Result<T> = std::result::Result<T, ApiError>;

impl Service {
    /// `persistent_agent_send`. Errors: `AGENT_BUSY` (mid-turn), `INVALID_ARGUMENT` (empty
    /// text, unknown agent), `WORKSPACE_NOT_FOUND`, `LEASE_HELD`.
    pub async fn persistent_agent_send(&self, req: PersistentAgentSendRequest) -> Result<PersistentAgentSendReport> {
        self.sup.persistent_agent_send(&req.name, &req.text).await.map_err(|e| e.to_api())
    }

    /// `home_list`. Errors: `INTERNAL` (the volume cannot be read).
    pub async fn home_list(&self, _req: Empty) -> Result<Vec<HomeRecord>> {
        self.sup.homes().list().await.map_err(|e| e.to_api())
    }

    /// `home_snapshots`. Errors: `INVALID_ARGUMENT` (no such home).
    pub async fn home_snapshots(&self, req: HomeRequest) -> Result<Vec<HomeSnapshot>> {
        self.sup.homes().snapshots(&req.name).await.map_err(|e| e.to_api())
    }

    /// `home_export`. Errors: `INVALID_ARGUMENT` (relative path, no such home or snapshot).
    pub async fn home_export(&self, req: HomeExportRequest) -> Result<HomeTransferReport> {
        self.sup.homes().export(&req).await.map_err(|e| e.to_api())
    }

    /// `home_import`. Errors: `LEASE_HELD`, `INVALID_ARGUMENT` (relative or missing path, an
    /// entry that would escape the home, a corrupt archive).
    pub async fn home_import(&self, req: HomeImportRequest) -> Result<HomeTransferReport> {
        self.sup.homes().import(&req).await.map_err(|e| e.to_api())
    }

    /// `home_restore`. Errors: `LEASE_HELD` (without `to`), `INVALID_ARGUMENT`.
    pub async fn home_restore(&self, req: HomeRestoreRequest) -> Result<HomeTransferReport> {
        self.sup.homes().restore(&req).await.map_err(|e| e.to_api())
    }

    /// `home_delete`. Errors: `LEASE_HELD` (a run holds the home), `INVALID_ARGUMENT` (no such
    /// home).
    pub async fn home_delete(&self, req: HomeRequest) -> Result<HomeDeleteReport> {
        self.sup.homes().delete(&req.name).await.map_err(|e| e.to_api())
    }

    /// `home_move`. Errors: `WORKSPACE_NOT_FOUND` (no such Space here), `LEASE_HELD` (a run
    /// holds the home), `INVALID_ARGUMENT` (no such home).
    pub async fn home_move(&self, req: HomeMoveRequest) -> Result<HomeMoveReport> {
        self.sup.home_move(&req.name, &req.space).await.map_err(|e| e.to_api())
    }
}
