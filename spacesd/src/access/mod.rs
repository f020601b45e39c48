//! Who may do what: operators and tool callers (docs/operations.md, "Security model").
//!
//! Theory of operation: each listener's middleware ([`crate::http::auth`]) turns a request's
//! credential into a [`Principal`] and puts it in the request's extensions; the HTTP adapter
//! ([`crate::http`]) and `/mcp` ([`crate::mcp`]) run every operation through
//! [`Principal::call`]. A request without a principal never reaches an operation.
//!
//! - **Operator**: the daemon's own uid (or root) on the Unix socket, or the daemon's bearer
//!   token (`<state dir>/token`, `--token-file`). Everything: registering and re-policing Spaces,
//!   every run, every tool, `approval_resolve`, `/inbox`.
//! - **Tool caller**: a token made by `spacesd token create --space NAME --scope control|watch`
//!   ([`tokens`]), on TCP or the Unix socket. It acts on its one Space only, with the checks of
//!   a scoped MCP server ([`crate::mcp::scope`]: the Space filled in or checked, process and
//!   work ids looked up, only holds it opened resumed); with `watch` only operations that
//!   change nothing. Never the operator's operations.
//! - Refusals: `UNAUTHORIZED` when there is no credential or a wrong one (another uid on the
//!   Unix socket without a token, an unknown or revoked token), `FORBIDDEN` when the credential
//!   lacks the right. Messages never repeat the presented credential.

pub mod tokens;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use spaces_sdk::op::{Audience, OperationInfo};
use spaces_sdk::{ApiError, ErrorCode};

use crate::mcp::scope::{Scope, NOT_OFFERED};
use crate::mcp::tools::ToolEntry;
use crate::mcp::Backend;
pub use tokens::CallerScope;

/// A tool caller: one token's Space and scope, and its scope checks (which remember the
/// approval holds it opened, for as long as the daemon runs).
#[derive(Debug)]
pub struct Caller {
    pub token_id: String,
    pub space: String,
    pub scope: CallerScope,
    checks: Arc<Scope>,
}

/// Who is asking.
#[derive(Debug, Clone)]
pub enum Principal {
    Operator,
    Caller(Arc<Caller>),
}

/// True for the operations only an operator may call: registering and listing Spaces, granting
/// or denying holds, the user's side of steering (`/inbox`), persistent agents' homes and
/// `persistent_agent_send` (a persistent agent is not scoped to one Space).
pub fn operator_only(info: &OperationInfo) -> bool {
    matches!(info.audience, Audience::Inbox | Audience::Operator) || NOT_OFFERED.contains(&info.name)
}

impl Caller {
    /// Refuses (`FORBIDDEN`) an operation this caller may never call.
    pub fn allows(&self, info: &OperationInfo) -> Result<(), ApiError> {
        if operator_only(info) {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("{}: only the operator may call it (this token is a tool caller's for Space {:?})", info.name, self.space),
            ));
        }
        if self.scope == CallerScope::Watch && !info.read_only {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("{}: this token has watch scope on Space {:?}: only operations that change nothing", info.name, self.space),
            ));
        }
        Ok(())
    }

    /// The MCP tools this caller may call, with the Space optional in their schemas.
    pub fn tools(&self) -> Vec<&ToolEntry> {
        self.checks
            .tools()
            .iter()
            .filter(|t| spaces_sdk::op::find(&t.tool.name).is_ok_and(|info| self.allows(&info).is_ok()))
            .collect()
    }
}

impl Principal {
    /// Runs operation `name` with `args` on `backend` as this principal. Errors: `FORBIDDEN`
    /// (see [`Caller::allows`], another Space, an id of another Space), then the operation's.
    pub async fn call<B: Backend>(&self, backend: &B, name: &str, args: Value) -> Result<Value, ApiError> {
        match self {
            Principal::Operator => backend.call(name, args).await,
            Principal::Caller(caller) => {
                caller.allows(&spaces_sdk::op::find(name)?)?;
                caller.checks.call(backend, name, args).await
            }
        }
    }
}

/// The credentials this daemon accepts.
pub struct Access {
    daemon_uid: u32,
    /// SHA-256 of the operator's bearer token (TCP on), hex.
    operator_token: Option<String>,
    book: tokens::Book,
    /// One caller per token id, kept so its approval holds are remembered across requests.
    callers: Mutex<HashMap<String, Arc<Caller>>>,
}

impl Access {
    /// The credentials of the daemon of `state_dir`, with `operator_token` if TCP is on.
    pub fn new(state_dir: &Path, operator_token: Option<&str>) -> Access {
        Access {
            daemon_uid: nix::unistd::geteuid().as_raw(),
            operator_token: operator_token.map(tokens::digest),
            book: tokens::Book::new(state_dir),
            callers: Mutex::new(HashMap::new()),
        }
    }

    /// The principal of a presented bearer token: the operator's, or a caller's from the
    /// tokens file; `None` for anything else.
    pub fn by_token(&self, presented: &str) -> Option<Principal> {
        let digest = tokens::digest(presented);
        if self.operator_token.as_deref() == Some(digest.as_str()) {
            return Some(Principal::Operator);
        }
        let record = self.book.find(&digest)?;
        let mut callers = self.callers.lock().unwrap_or_else(|p| p.into_inner());
        let caller = callers.entry(record.id.clone()).or_insert_with(|| {
            Arc::new(Caller {
                token_id: record.id.clone(),
                space: record.space.clone(),
                scope: record.scope,
                checks: Scope::for_token(record.space.clone()),
            })
        });
        Some(Principal::Caller(caller.clone()))
    }

    /// The principal of a Unix-socket peer without a token: the operator for the daemon's own
    /// uid and root, `None` for any other uid.
    pub fn by_peer_uid(&self, uid: u32) -> Option<Principal> {
        (uid == self.daemon_uid || uid == 0).then_some(Principal::Operator)
    }

    /// The daemon's own uid.
    pub fn daemon_uid(&self) -> u32 {
        self.daemon_uid
    }
}
