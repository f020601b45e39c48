//! The operation table: one [`Row`] per operation of the catalogue, in catalogue order.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use futures_util::future::BoxFuture;
use serde_json::Value;
use spaces_sdk::op::OperationInfo;
use spaces_sdk::{ops, ApiError, ErrorCode, Operation};

use crate::service::Service;

type Handler = Arc<dyn Fn(Service, Value) -> BoxFuture<'static, Result<Value, ApiError>> + Send + Sync>;

/// One operation: its catalogue entry, its schemas, and its handler.
#[derive(Clone)]
pub struct Row {
    /// Name, doc, route, read-only flag, audience (from `spaces_sdk::op`).
    pub info: OperationInfo,
    /// JSON Schema (draft 2020-12) of the request, with field docs as descriptions.
    pub request_schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    /// JSON Schema (draft 2020-12) of the result.
    pub result_schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    handler: Handler,
}

impl Row {
    /// Runs the operation with `args` (a JSON object of request fields): decode (unknown keys,
    /// wrong types and missing fields are `INVALID_ARGUMENT` naming the field), run, encode.
    pub async fn call(&self, service: Service, args: Value) -> Result<Value, ApiError> {
        (self.handler)(service, args).await
    }
}

fn row<O, F, Fut>(f: F) -> Row
where
    O: Operation,
    F: Fn(Service, O::Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O::Result, ApiError>> + Send + 'static,
{
    let f = Arc::new(f);
    Row {
        info: OperationInfo::of::<O>(),
        request_schema: |g| g.subschema_for::<O::Request>(),
        result_schema: |g| g.subschema_for::<O::Result>(),
        handler: Arc::new(move |service, args| {
            let f = f.clone();
            Box::pin(async move {
                let req: O::Request = spaces_sdk::decode(O::NAME, args)?;
                let result = f(service, req).await?;
                serde_json::to_value(result)
                    .map_err(|e| ApiError::new(ErrorCode::Internal, format!("{}: cannot encode the result: {e}", O::NAME)))
            })
        }),
    }
}

macro_rules! rows {
    ($($marker:ident => $method:ident),* $(,)?) => {
        vec![$(row::<ops::$marker, _, _>(|s: Service, r| async move { s.$method(r).await })),*]
    };
}

/// The table: every operation this host serves, in catalogue order.
pub fn table() -> &'static [Row] {
    static TABLE: OnceLock<Vec<Row>> = OnceLock::new();
    TABLE.get_or_init(|| {
        rows![
            AgentCapabilities => agent_capabilities,
            SpaceList => space_list,
            SpaceAdd => space_add,
            AgentStart => agent_start,
            AgentList => agent_list,
            AgentStatus => agent_status,
            AgentEvents => agent_events,
            AgentMessage => agent_message,
            AgentInterrupt => agent_interrupt,
            AgentStop => agent_stop,
            SpaceRemove => space_remove,
            AgentRemove => agent_remove,
            AgentPrune => agent_prune,
            AgentUsage => agent_usage,
            AgentBudget => agent_budget,
            AgentDiff => agent_diff,
            AgentRewind => agent_rewind,
            AgentFork => agent_fork,
            AgentMerge => agent_merge,
            WebhookAdd => webhook_add,
            WebhookList => webhook_list,
            WebhookRemove => webhook_remove,
            WebhookDeliveries => webhook_deliveries,
            PersistentAgentSend => persistent_agent_send,
            HomeList => home_list,
            HomeSnapshots => home_snapshots,
            HomeExport => home_export,
            HomeImport => home_import,
            HomeRestore => home_restore,
            HomeDelete => home_delete,
            HomeMove => home_move,
            WorkspaceInfo => workspace_info,
            Read => read,
            Find => find,
            ApplyPatch => apply_patch,
            OperationStatus => operation_status,
            ExecCommand => exec_command,
            ReadProcess => read_process,
            ProcessStatus => process_status,
            WriteStdin => write_stdin,
            ProcessResize => process_resize,
            TerminateProcess => terminate_process,
            ApprovalCreate => approval_create,
            ApprovalResolve => approval_resolve,
            OperationResume => operation_resume,
            WorkOpen => work_open,
            SteerStatus => steer_status,
            SteerClaimNext => steer_claim_next,
            SteerComplete => steer_complete,
            WorkFinish => work_finish,
            InboxWorks => inbox_works,
            InboxWork => inbox_work,
            InboxIntentCreate => inbox_intent_create,
            InboxReorder => inbox_reorder,
            InboxIntentEdit => inbox_intent_edit,
            InboxIntentQueue => inbox_intent_queue,
            InboxIntentCancel => inbox_intent_cancel,
            InboxWorkStop => inbox_work_stop,
        ]
    })
}

impl Service {
    /// Runs the operation `name` with `args`. Errors: `INVALID_ARGUMENT` for an unknown name
    /// (suggesting the closest), and the operation's own.
    pub async fn call(&self, name: &str, args: Value) -> Result<Value, ApiError> {
        // The table serves the whole catalogue (tested), so its refusal is the catalogue's.
        match table().iter().find(|r| r.info.name == name) {
            Some(row) => row.call(self.clone(), args).await,
            None => Err(spaces_sdk::op::find(name)
                .err()
                .unwrap_or_else(|| ApiError::new(ErrorCode::Internal, format!("operation {name:?} has no row in the table")))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_serves_the_whole_catalogue_in_order() {
        let catalogue: Vec<&str> = spaces_sdk::op::catalogue().iter().map(|o| o.name).collect();
        let served: Vec<&str> = table().iter().map(|r| r.info.name).collect();
        assert_eq!(served, catalogue);
    }
}
