//! The one error type of this crate and its mapping to the wire.
//!
//! Every module returns [`Result`]; each [`Error`] variant names what happened in the CodeSpace
//! domain (a refused path, a stale version, a busy workspace, a process that stopped reading) and
//! its message says what to do next. [`Error::code`] is the one mapping to the contract's error
//! code; [`Error::to_api`] (also `From<Error> for ApiError`) builds the wire error with the
//! `operation_id`, `approval_id` or `field` a variant carries. The daemon converts at its service
//! boundary; nothing inside this crate builds a wire error, except that the ledger keeps the
//! terminal answers it replays in their wire form ([`Error::Replayed`]).
//!
//! "Retry" below means sending the same request again unchanged.

use std::path::PathBuf;
use std::time::Duration;

use spaces_sdk::tools::{HoldableTool, WorkState};
use spaces_sdk::{bounded, ApiError};

mod wire;

/// `Result` of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// How to find an operation (in the ledger, `crate::ledger`): exactly one of `operation_id` or `operation_key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationRef {
    Id(String),
    Key(String),
}

/// Everything that can go wrong in the CodeSpace execution layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // --- workspaces and policy -------------------------------------------------------------
    /// No Space named `workspace_id` is registered on this host (`WORKSPACE_NOT_FOUND`). A
    /// retry does not help: register the Space or fix the id.
    #[error("no workspace {workspace_id:?} is registered on this host", workspace_id = bounded(workspace_id))]
    WorkspaceNotFound { workspace_id: String },

    /// The host's workspace registry could not be read (`INTERNAL`). A retry may help once the
    /// host's state is readable again.
    #[error("cannot read the Space registry: {0}")]
    Registry(#[source] Box<dyn std::error::Error + Send + Sync>),

    /// `tool` would change a read-only workspace (`UNAUTHORIZED`). A retry does not help:
    /// `read` and `find` stay available.
    #[error("workspace {workspace_id:?} is read-only: {tool} is not available (read and find are)", workspace_id = bounded(workspace_id))]
    ReadOnly { workspace_id: String, tool: &'static str },

    /// The workspace's network is `none` and this host runs commands without a sandbox
    /// (`SPACES_SANDBOX=off`), so nothing would keep `tool`'s command off the network
    /// (`UNAUTHORIZED`). A retry does not help: the operator turns the sandbox on, or registers
    /// the Space with `network: enabled`.
    #[error(
        "workspace {workspace_id:?} has network: none, and this host runs commands without a sandbox \
         (SPACES_SANDBOX=off), so nothing would keep the command off the network: {tool} is refused; the operator \
         turns the sandbox on, or registers the Space with network: enabled",
        workspace_id = bounded(workspace_id)
    )]
    NetworkUnenforced { workspace_id: String, tool: &'static str },

    /// A live command (`process_id`) occupies the workspace, so `apply_patch`, a second
    /// `exec_command` or a resume must wait (`WORKSPACE_BUSY`; carries the `approval_id` of a
    /// refused resume). Retry once the process has exited or was terminated.
    #[error(
        "workspace {workspace_id:?} is busy: process {process_id} is still running; wait for it \
         (process_status) or end it (terminate_process), then retry; read and find stay available",
        workspace_id = bounded(workspace_id), process_id = bounded(process_id)
    )]
    WorkspaceBusy { workspace_id: String, process_id: String, approval_id: Option<String> },

    /// The workspace's root directory cannot be opened: gone (`FILE_NOT_FOUND`), not a
    /// directory (`PATH_NOT_DIRECTORY`) or unreadable (`FILE_OPERATION_FAILED`). A retry helps
    /// only once the operator has fixed the directory.
    #[error("workspace root {} must be an existing directory ({source})", root.display())]
    RootUnavailable { root: PathBuf, source: std::io::Error },

    /// Nothing is at the workspace's registered path any more (its folder was removed, or
    /// renamed: a workspace is bound to its path and never follows a folder to its new name)
    /// (`WORKSPACE_NOT_FOUND`). Nothing was read or changed. A retry helps once a folder is at
    /// that path again (or the Space is registered at the folder's new path).
    #[error(
        "the workspace folder {} is gone (removed, or renamed: a Space is bound to its path and never follows a \
         folder to its new name); make the folder again at that path, or register the Space at its new path \
         (`spacesd space add NAME PATH --replace`)",
        root.display()
    )]
    RootGone { root: PathBuf },

    /// A symlink now stands at the workspace's registered path, or on its way (the folder was
    /// replaced by a link to somewhere else) (`SYMLINK_REJECTED`). A workspace is bound to the
    /// directory at its path and never follows it elsewhere: nothing was read or changed, at
    /// either place. A retry helps once a directory is back at that path (or the Space is
    /// registered at the folder meant).
    #[error(
        "the workspace folder {} is now a symlink or lies beneath one{}: a Space is bound to the directory at its \
         registered path and never follows a link elsewhere; put a directory back at that path, or register the \
         Space at the folder you mean (`spacesd space add NAME PATH --replace`)",
        root.display(),
        now.as_ref().map(|n| format!(" (it leads to {})", n.display())).unwrap_or_default()
    )]
    RootRedirected {
        root: PathBuf,
        /// Where the path leads now, when it resolves.
        now: Option<PathBuf>,
    },

    // --- paths and files ---------------------------------------------------------------------
    /// The path is empty, absolute, holds a NUL or a `..` component, or resolves outside the
    /// root (`PATH_ESCAPE`; `why` says which). A retry does not help: give a path inside the
    /// root.
    #[error("{path:?} {why}; give a path relative to the workspace root, inside it", path = bounded(path))]
    PathEscape { path: String, why: &'static str },

    /// A symlink is the file or one of its parents; symlinks are never followed
    /// (`SYMLINK_REJECTED`). A retry does not help: use the real path.
    #[error(
        "{path}: a symlink is on the path (the file or a parent directory); symlinks are never \
         followed in a workspace, use the real path",
        path = bounded(path)
    )]
    SymlinkRejected { path: String },

    /// The path is a FIFO, device or socket (`SPECIAL_FILE_REJECTED`). A retry does not help:
    /// only regular files are read or patched.
    #[error("{path} is a FIFO, device or socket; only regular files are read or patched", path = bounded(path))]
    SpecialFileRejected { path: String },

    /// The file (or the directory) does not exist (`FILE_NOT_FOUND`); `hint` says what to do.
    /// A retry helps only once it exists.
    #[error("{path} does not exist{hint}", path = bounded(path))]
    FileNotFound { path: String, hint: &'static str },

    /// The path, or one of its parents, is not a directory (`PATH_NOT_DIRECTORY`). A retry does
    /// not help: check the path with `find`.
    #[error("{path} is not a directory (or a parent of it is not)", path = bounded(path))]
    PathNotDirectory { path: String },

    /// `read` or a patch named a directory where a file belongs (`INVALID_ARGUMENT`). A retry
    /// does not help: list it with `find`.
    #[error("{path} is a directory, not a file; list it with find", path = bounded(path))]
    IsDirectory { path: String },

    /// A system call on `path` failed for another reason: permissions, a full disk, an I/O
    /// error (`FILE_OPERATION_FAILED`). A retry may help once the cause is fixed.
    #[error("{path}: {action} failed ({source})", path = bounded(path))]
    FileOperationFailed { path: String, action: &'static str, source: std::io::Error },

    // --- patches -----------------------------------------------------------------------------
    /// The V4A engine refused the patch (`INVALID_PATCH`, `ADD_FILE_EXISTS`,
    /// `MOVE_DESTINATION_EXISTS`, `VERSION_CONFLICT`: [`spaces_v4a::Error::code`]); the inner
    /// error says why and whether a retry helps. The committer's re-check raises the engine's
    /// `VersionConflict` too, so a stale file reads the same whoever found it. The engine's
    /// `FILE_NOT_FOUND` and `expected_versions` refusals become this crate's
    /// [`Error::FileNotFound`] and [`Error::InvalidArgument`].
    #[error(transparent)]
    Patch(spaces_v4a::Error),

    /// After a commit, `path` is not at the planned version on disk (`FILE_OPERATION_FAILED`):
    /// something else wrote it meanwhile, or the write was lost. A retry does not help: read it
    /// and repair it.
    #[error("{path} is at version {actual} on disk, expected {expected}; read it and repair it", path = bounded(path), expected = bounded(expected), actual = bounded(actual))]
    VerifyMismatch { path: String, expected: String, actual: String },

    /// A commit step failed (`cause`) and undoing the steps already done failed too
    /// (`rollback`); some files may be changed. Its code is the cause's. A retry does not help:
    /// read the files and repair them.
    #[error("{cause}; rolling back also failed: {rollback}; read the files and repair them")]
    RollbackFailed { cause: Box<Error>, rollback: Box<Error> },

    /// The commit of a planned patch did not finish (`FILE_OPERATION_FAILED`): every file was
    /// restored (`failed_rolled_back`), or, when `partial`, some may be changed
    /// (`failed_partial`). A retry may help once the cause is fixed; after a partial failure,
    /// inspect the files first.
    #[error(
        "patch {}: {cause}; {}",
        if *partial { "failed_partial" } else { "failed_rolled_back" },
        if *partial {
            "some files may be changed: inspect them before a new patch"
        } else {
            "every file was restored"
        }
    )]
    CommitFailed { partial: bool, cause: Box<Error> },

    // --- the operations ledger ---------------------------------------------------------------
    /// `operation_key` was used by a request with other arguments, operation `operation_id`
    /// (`OPERATION_KEY_CONFLICT`). A retry does not help: use a new key for a different request.
    #[error(
        "operation_key {operation_key:?} belongs to different arguments (operation \
         {operation_id}); inspect that request with operation_status, and use a new key for a \
         different request (a preview and its apply need different keys)",
        operation_key = bounded(operation_key), operation_id = bounded(operation_id)
    )]
    OperationKeyConflict { operation_key: String, operation_id: String },

    /// No recorded patch has this id or key (`OPERATION_NOT_FOUND`). A retry does not help:
    /// commands are tracked by `process_id`, not here.
    #[error(
        "no recorded patch has {}; operation_status tracks apply_patch only (commands stay on \
         process_id)",
        describe(by)
    )]
    OperationNotFound { by: OperationRef },

    /// The operation already has its recorded outcome and cannot be changed (`INTERNAL`: two
    /// daemons on one ledger, or a row closed by crash recovery). A retry does not help:
    /// inspect it with `operation_status`.
    #[error(
        "operation {operation_id} is already finished; its recorded outcome stands, inspect it \
         with operation_status",
        operation_id = bounded(operation_id)
    )]
    OperationFinished { operation_id: String },

    /// `error` happened inside the patch operation `operation_id`, whose outcome is recorded in
    /// the ledger (same code and message as `error`, plus the `operation_id`). Retry as for
    /// `error`, with a new operation key if one was given.
    #[error("{error}")]
    InOperation { operation_id: String, error: Box<Error> },

    /// A terminal answer the ledger recorded earlier (an `apply_patch` replayed by its key, a
    /// consumed approval's stored error), answered again exactly as stored. Retry as the stored
    /// code says; the same request keeps answering the same.
    #[error("{}", .0.message)]
    Replayed(ApiError),

    // --- approvals ---------------------------------------------------------------------------
    /// The workspace holds `tool` for approval: the hold is `approval_id` (`APPROVAL_REQUIRED`).
    /// A retry reuses the hold: grant it with `approval_resolve`, then `operation_resume`.
    #[error(
        "workspace {workspace_id:?} requires approval for {}: grant it with approval_resolve \
         {{approval_id: {approval_id:?}, decision: grant}}, then run it with operation_resume",
        tool.as_str(),
        workspace_id = bounded(workspace_id), approval_id = bounded(approval_id)
    )]
    ApprovalRequired { workspace_id: String, tool: HoldableTool, approval_id: String },

    /// A workspace already has [`crate::ledger::Retention::pending_approvals_max`] pending
    /// holds (`RESOURCE_QUEUE_FULL`). A retry helps once some are resolved.
    #[error(
        "workspace {workspace_id:?} already has {limit} pending approval holds; resolve some \
         (approval_resolve) before holding more",
        workspace_id = bounded(workspace_id)
    )]
    ApprovalQueueFull { workspace_id: String, limit: usize },

    /// The workspace's pending holds keep `held` bytes of requests, and this one (`adding`
    /// bytes) would take them past [`crate::ledger::Retention::pending_approvals_max_bytes`]
    /// (`RESOURCE_QUEUE_FULL`). A retry helps once some are resolved; a request larger than
    /// the limit alone never fits.
    #[error(
        "workspace {workspace_id:?} holds {held} bytes of requests awaiting approval, and this \
         one ({adding} bytes) would pass the limit of {limit} bytes; resolve some holds \
         (approval_resolve) before holding more{}",
        if *adding > *limit { ", or send a smaller request: this one alone is over the limit" } else { "" },
        workspace_id = bounded(workspace_id)
    )]
    ApprovalQueueTooLarge { workspace_id: String, held: u64, adding: u64, limit: u64 },

    /// No hold has this id (`APPROVAL_NOT_FOUND`). A retry does not help.
    #[error(
        "no approval hold {approval_id:?}; use the approval_id returned with APPROVAL_REQUIRED \
         or approval_create",
        approval_id = bounded(approval_id)
    )]
    ApprovalNotFound { approval_id: String },

    /// The hold's state does not allow this step (`APPROVAL_CONFLICT`; `why` names the state).
    /// A retry helps only for a resume still in progress.
    #[error("approval {approval_id} cannot do that: {why}", approval_id = bounded(approval_id))]
    ApprovalConflict { approval_id: String, why: String },

    /// The resume of a held command was interrupted by a daemon stop, so whether it started is
    /// unknown (`APPROVAL_AMBIGUOUS`). A retry answers the same: the command is never started
    /// again.
    #[error(
        "the resume of this command was interrupted (the daemon stopped) and its outcome is \
         unknown; it will not be started again: inspect the workspace before deciding on a new \
         command"
    )]
    ApprovalAmbiguous { approval_id: String },

    // --- processes ---------------------------------------------------------------------------
    /// The command is empty, or its program an empty string (`INVALID_COMMAND`). A retry does
    /// not help: give a program.
    #[error("command must be a non-empty argument array, e.g. [\"/bin/echo\", \"hi\"]")]
    EmptyCommand,

    /// The OS refused to start `program`: missing binary or interpreter, permissions, a missing
    /// working directory, no PTY left (`PROCESS_SPAWN_FAILED`). A retry helps only after fixing
    /// the cause named in `source`.
    #[error(
        "could not start {program:?}: {source}; check that the program exists in PATH and is \
         executable",
        program = bounded(program)
    )]
    SpawnFailed { program: String, source: std::io::Error },

    /// The id is unknown or its handle expired after exit (`PROCESS_NOT_FOUND`). A retry does
    /// not help.
    #[error(
        "no process {process_id}: the id is unknown or its handle expired after exit; do not \
         retry with it",
        process_id = bounded(process_id)
    )]
    ProcessNotFound { process_id: String },

    /// A resize of a process started without a terminal (`PROCESS_NOT_TTY`). A retry does not
    /// help.
    #[error("process {process_id} has no terminal (started without tty); nothing to resize", process_id = bounded(process_id))]
    ProcessNotTty { process_id: String },

    /// Input or a resize sent to a process that has ended (`PROCESS_NOT_RUNNING`); `how` says
    /// how it ended. A retry does not help: read its output or start a new command.
    #[error(
        "process {process_id} {how}; it takes no more input: read its output or start a new \
         command",
        process_id = bounded(process_id)
    )]
    ProcessNotRunning { process_id: String, how: String },

    /// The process closed its input (the pipe's reader is gone) after `written` of `total`
    /// bytes, though it still runs (`PROCESS_NOT_RUNNING`). A retry does not help.
    #[error("process {process_id} closed its input after {written} of {total} bytes", process_id = bounded(process_id))]
    StdinClosed { process_id: String, written: usize, total: usize },

    /// `write_stdin` waited `waited` for the process to take its input and it did not: it
    /// stopped reading (`TIMEOUT`). `written` of `total` bytes went through; the process keeps
    /// running. A retry would send the whole data again: treat the write as interrupted,
    /// inspect its partial effects, and send only what is still needed.
    #[error(
        "process {process_id} took only {written} of {total} bytes in {} ms: it is not reading its \
         input; treat the write as interrupted and inspect partial effects (the process keeps \
         running: read its output, or terminate it)",
        waited.as_millis(),
        process_id = bounded(process_id)
    )]
    StdinTimeout { process_id: String, written: usize, total: usize, waited: Duration },

    /// Writing the input failed unexpectedly after `written` of `total` bytes (`INTERNAL`). A
    /// retry may help: treat the write as interrupted and inspect its partial effects first.
    #[error("writing to process {process_id} failed after {written} of {total} bytes: {source}", process_id = bounded(process_id))]
    StdinFailed { process_id: String, written: usize, total: usize, source: std::io::Error },

    /// A line longer than the terminal's canonical-mode limit `max` would be cut silently by
    /// the kernel, so nothing was written (`INVALID_ARGUMENT`). A retry does not help: split
    /// the line, or run the program without tty.
    #[error(
        "a line of {longest} bytes is longer than the terminal's canonical-mode limit of {max} \
         bytes, and the kernel would drop the rest silently; nothing was written: split the \
         line, or run the program without tty"
    )]
    LineTooLong { longest: usize, max: usize },

    /// An OS call on a process's terminal or pipes failed unexpectedly (`INTERNAL`). A retry
    /// may help.
    #[error("process {process_id}: {action} failed: {source}", process_id = bounded(process_id))]
    ProcessIo { process_id: String, action: &'static str, source: std::io::Error },

    /// Processes can only be started inside a tokio runtime (`INTERNAL`, a host bug). A retry
    /// does not help.
    #[error("exec needs a tokio runtime: {0}")]
    NoRuntime(#[from] tokio::runtime::TryCurrentError),

    // --- coordination (works and intents) ----------------------------------------------------
    /// No work has this id (`WORK_NOT_FOUND`). A retry does not help: call `work_open`.
    #[error("no work {work_id:?}; call work_open or list works at /inbox", work_id = bounded(work_id))]
    WorkNotFound { work_id: String },

    /// The work was closed or stopped (`WORK_CLOSED`). A retry does not help: open a new work.
    #[error("work {work_id:?} is {}; open a new work with work_open", state.as_str(), work_id = bounded(work_id))]
    WorkClosed { work_id: String, state: WorkState },

    /// No intent has this id (`INTENT_NOT_FOUND`). A retry does not help.
    #[error("no intent {intent_id:?}; list the work's intents at /inbox", intent_id = bounded(intent_id))]
    IntentNotFound { intent_id: String },

    /// The intent belongs to another work than the one named (`INTENT_NOT_FOUND`). A retry does
    /// not help.
    #[error("intent {intent_id:?} does not belong to work {work_id:?}", work_id = bounded(work_id), intent_id = bounded(intent_id))]
    IntentNotInWork { intent_id: String, work_id: String },

    /// The agent has claimed the intent, so the user can no longer change it
    /// (`INTENT_ALREADY_CLAIMED`; `doing` is the refused change). A retry does not help.
    #[error("intent {intent_id:?} is claimed by the agent; it can no longer be {doing}", intent_id = bounded(intent_id))]
    IntentAlreadyClaimed { intent_id: String, doing: &'static str },

    /// The intent's state does not allow the change (`INTENT_NOT_EDITABLE`; `reason` names the
    /// state and what to do). A retry does not help.
    #[error("intent {intent_id:?} is {reason}", intent_id = bounded(intent_id))]
    IntentNotEditable { intent_id: String, reason: String },

    /// The intent was edited since the caller read it: it is at `current`, not `given`
    /// (`INTENT_REVISION_CONFLICT`). Reload it and retry with the current revision.
    #[error("intent {intent_id:?} is at revision {current}, not {given}; reload it and retry", intent_id = bounded(intent_id))]
    IntentRevisionConflict { intent_id: String, current: u64, given: u64 },

    /// `steer_complete` on an intent not claimed yet (`INVALID_ARGUMENT`). Claim it first.
    #[error("intent {intent_id:?} is not claimed; claim it with steer_claim_next first", intent_id = bounded(intent_id))]
    IntentNotClaimed { intent_id: String },

    // --- requests and internals --------------------------------------------------------------
    /// A request value is out of range or inconsistent (`INVALID_ARGUMENT`); `field` names the
    /// offending request field when known (`arguments.cmd`). A retry does not help: fix it as
    /// the message says.
    #[error("{message}")]
    InvalidArgument { field: Option<String>, message: String },

    /// SQLite failed (the ledger or the steering store: disk full, a lock held too long,
    /// corruption; `INTERNAL`). A retry may help.
    #[error("database error: {0}; retry later, or check the database file")]
    Db(#[from] rusqlite::Error),

    /// A record could not be encoded as JSON, or stored JSON could not be decoded (`INTERNAL`).
    /// A retry does not help.
    #[error("cannot encode or decode a stored record: {0}")]
    Json(#[from] serde_json::Error),

    /// A stored record (`what`) cannot be read back (`INTERNAL`). A retry does not help:
    /// inspect the record or the database file.
    #[error("{what} is unreadable ({detail}); inspect it, or check the database file")]
    StoredUnreadable { what: String, detail: String },

    /// A blocking task of the service panicked or was cancelled (`INTERNAL`). A retry may help.
    #[error("internal task failed: {0}")]
    TaskFailed(#[from] tokio::task::JoinError),
}

impl Error {
    /// An `INVALID_ARGUMENT` without a field.
    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidArgument { field: None, message: message.into() }
    }

    /// An `INVALID_ARGUMENT` from [`spaces_sdk::decode`]'s refusal (which names the field).
    pub(crate) fn decode(e: ApiError) -> Error {
        Error::InvalidArgument { field: e.field, message: e.message }
    }

    /// `self` as the outcome of the patch operation `operation_id`.
    pub(crate) fn in_operation(self, operation_id: &str) -> Error {
        Error::InOperation { operation_id: operation_id.to_owned(), error: Box::new(self) }
    }
}

/// `operation_id "op-…"` or `operation_key "…"`.
fn describe(by: &OperationRef) -> String {
    match by {
        OperationRef::Id(id) => format!("operation_id {:?}", bounded(id)),
        OperationRef::Key(key) => format!("operation_key {:?}", bounded(key)),
    }
}
