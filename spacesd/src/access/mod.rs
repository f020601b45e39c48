//! Who may do what: operators and tool callers (docs/operations.md, "Security model").
//!
//! Theory of operation: each listener's middleware ([`crate::http::auth`]) turns a request's
//! credential into a [`Principal`] and puts it in the request's extensions; the HTTP adapter
//! ([`crate::http`]) and `/mcp` ([`crate::mcp`]) run every operation through
//! [`Principal::call`]. A request without a principal never reaches an operation.
//!
//! - **Operator**: the daemon's own uid (or root) on the Unix socket, or the daemon's bearer
//!   token (`<state dir>/token`, `--token-file`), or a browser session of the web page of runs
//!   on TCP, opened by a one-time link minted for one of those ([`sessions`]). Everything: registering and re-policing Spaces,
//!   every run, every tool, `approval_resolve`, `/inbox`.
//! - **Tool caller**: a token made by `spacesd token create --space NAME --scope control|watch`
//!   ([`tokens`]), on TCP or the Unix socket. It acts on its one Space only, with the checks of
//!   a scoped MCP server ([`scope`]: the Space filled in or checked, process and
//!   work ids looked up, only holds it opened resumed); with `watch` only operations that
//!   change nothing. Never the operator's operations.
//! - **A run's own processes** (an agent, its tools, its `spaces` MCP server) are callers of
//!   their Space with control scope ([`Access::for_run`]), by construction: they run in a
//!   sandbox where the operator's socket and token do not exist, and reach the daemon only
//!   through their run's own socket, on which every connection is that run
//!   (`spaces_host::supervisor::api`). A command's processes (`exec_command`) have no socket at all.
//!   Nothing is guessed from a peer's process (its parent chain, its open sockets).
//! - Refusals: `UNAUTHORIZED` when there is no credential or a wrong one (another uid on the
//!   Unix socket without a token, an unknown or revoked token), `FORBIDDEN` when the credential
//!   lacks the right. Messages never repeat the presented credential.

pub mod scope;
pub mod sessions;
pub mod tokens;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use spaces_sdk::op::{Audience, OperationInfo};
use spaces_sdk::{ApiError, ErrorCode};

use crate::backend::tools::ToolEntry;
use crate::backend::Backend;
use scope::{Scope, NOT_OFFERED};
pub use tokens::CallerScope;

/// What makes a caller one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Via {
    /// A caller token (its id).
    Token(String),
    /// A run's own socket (`run/<run_id>`).
    Tree(String),
}

/// A tool caller: one token's (or one run's) Space and scope, and its scope checks (which
/// remember the approval holds it opened, for as long as the daemon runs).
#[derive(Debug)]
pub struct Caller {
    pub via: Via,
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
            let who = match &self.via {
                Via::Token(_) => "this token is a tool caller's",
                Via::Tree(_) => "this process belongs to a run or command, a tool caller",
            };
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("{}: only the operator may call it ({who} for Space {:?})", info.name, self.space),
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
        self.checks.tools().iter().filter(|t| spaces_sdk::op::find(&t.tool.name).is_ok_and(|info| self.allows(&info).is_ok())).collect()
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
    /// The peer's uid on the operator's socket makes it the operator (false at the Landlock
    /// level, where a tree of the daemon's uid can reach that socket by its path: the operator
    /// then presents the token).
    uid_trusted: bool,
    /// SHA-256 of the operator's bearer token (TCP on), hex.
    operator_token: Option<String>,
    book: tokens::Book,
    /// One caller per token id (or per run or command), kept so its approval holds are
    /// remembered across requests.
    callers: Mutex<HashMap<Via, Arc<Caller>>>,
    /// Browser sessions of the web page of runs.
    sessions: sessions::Sessions,
}

impl Access {
    /// The credentials of the daemon of `state_dir`, with `operator_token` if TCP is on.
    pub fn new(state_dir: &Path, operator_token: Option<&str>) -> Access {
        Access {
            daemon_uid: nix::unistd::geteuid().as_raw(),
            uid_trusted: spaces_os::sandbox::level() != spaces_os::sandbox::Level::Landlock,
            operator_token: operator_token.map(tokens::digest),
            book: tokens::Book::new(state_dir),
            callers: Mutex::new(HashMap::new()),
            sessions: sessions::Sessions::default(),
        }
    }

    fn caller(&self, via: Via, space: &str, scope: CallerScope, checks: impl FnOnce() -> Arc<Scope>) -> Arc<Caller> {
        let mut callers = self.callers.lock().unwrap_or_else(|p| p.into_inner());
        callers.entry(via.clone()).or_insert_with(|| Arc::new(Caller { via, space: space.to_owned(), scope, checks: checks() })).clone()
    }

    /// The principal of run `run_id` of Space `space` (its own socket's connections): the caller
    /// of that Space with control scope, the same one for every connection of the run (so the
    /// approval holds it opened are remembered).
    pub fn for_run(&self, run_id: &str, space: &str) -> Principal {
        let owned = space.to_owned();
        Principal::Caller(self.caller(Via::Tree(format!("run/{run_id}")), space, CallerScope::Control, || Scope::for_tree(owned)))
    }

    /// The principal of a presented bearer token: the operator's, or a caller's from the
    /// tokens file; `None` for anything else.
    pub fn by_token(&self, presented: &str) -> Option<Principal> {
        let digest = tokens::digest(presented);
        if self.operator_token.as_deref() == Some(digest.as_str()) {
            return Some(Principal::Operator);
        }
        let record = self.book.find(&digest)?;
        // Known in clear only now: from here on it is redacted like the daemon's own secrets.
        spaces_host::supervisor::learn_secret(presented);
        let space = record.space.clone();
        Some(Principal::Caller(self.caller(Via::Token(record.id), &record.space, record.scope, || Scope::for_token(space))))
    }

    /// The principal of a Unix-socket peer without a token: the operator for the daemon's own
    /// uid and root, `None` for any other uid.
    pub fn by_peer_uid(&self, uid: u32) -> Option<Principal> {
        (self.uid_trusted && (uid == self.daemon_uid || uid == 0)).then_some(Principal::Operator)
    }

    /// Whether a peer's uid is a credential on the operator's socket ([`Access::by_peer_uid`]):
    /// not at the Landlock level (`spaces_os::sandbox::landlock`), where the trees run as the
    /// daemon's uid without a mount namespace to keep the socket's path from them.
    pub fn uid_trusted(&self) -> bool {
        self.uid_trusted
    }

    /// The daemon's own uid.
    pub fn daemon_uid(&self) -> u32 {
        self.daemon_uid
    }

    /// The browser sessions of the web page of runs (login tickets, cookies, CSRF tokens).
    pub fn sessions(&self) -> &sessions::Sessions {
        &self.sessions
    }
}
