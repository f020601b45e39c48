//! Every error the native module raises, mapped in this one file: a daemon's typed error
//! ([`ApiError`]) becomes `SpacesError` (or the subclass of its family; `CuaError`, the source
//! documents' name, is the same class) with `.code`, `.message`, `.field` (the offending request
//! field of an `INVALID_ARGUMENT`, else `None`), `.operation_id` and `.approval_id` (when the
//! error carries them, else `None`) and `.details` (the whole error as a dict-ready JSON text);
//! a daemon that cannot be reached or started is `UnavailableError` with sdk-core's client
//! codes (`DAEMON_UNREACHABLE`, `DAEMON_START_FAILED`, `CONNECTION_LOST`; the Node SDK's too).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use spaces_sdk::client::ClientError;
use spaces_sdk::local::StartError;
use spaces_sdk::{ApiError, ErrorCode};

create_exception!(
    _native,
    SpacesError,
    PyException,
    "A Spaces call failed: `.code` (e.g. RUN_NOT_FOUND), `.message`, `.field`, `.operation_id`, `.approval_id`."
);
create_exception!(_native, NotFoundError, SpacesError, "The named thing does not exist (`*_NOT_FOUND`).");
create_exception!(_native, ConflictError, SpacesError, "The state changed or is held (version, key, busy, closed, exists).");
create_exception!(_native, InvalidError, SpacesError, "The request is wrong (`INVALID_*`, path or file refusals).");
create_exception!(_native, UnavailableError, SpacesError, "Not available now: a harness, or the daemon itself.");

/// The family of a wire code. Exhaustive: a new code must be placed here.
fn family(code: ErrorCode) -> Family {
    use ErrorCode::*;
    match code {
        WorkspaceNotFound | FileNotFound | OperationNotFound | ProcessNotFound | WorkNotFound | IntentNotFound | ApprovalNotFound
        | RunNotFound => Family::NotFound,
        WorkspaceBusy
        | WorkspaceExists
        | ResourceQueueFull
        | AddFileExists
        | MoveDestinationExists
        | VersionConflict
        | OperationKeyConflict
        | WorkClosed
        | IntentAlreadyClaimed
        | IntentNotEditable
        | IntentRevisionConflict
        | ApprovalConflict
        | ApprovalAmbiguous
        | AgentBusy
        | LeaseHeld
        | BudgetReached
        | ProcessNotRunning => Family::Conflict,
        InvalidPatch | InvalidCommand | InvalidArgument | PathEscape | SymlinkRejected | SpecialFileRejected | PathNotDirectory
        | ProcessNotTty => Family::Invalid,
        HarnessUnavailable | ProcessSpawnFailed | Timeout => Family::Unavailable,
        Unauthorized | Forbidden | FileOperationFailed | ApprovalRequired | Internal => Family::Other,
    }
}

#[derive(Debug)]
enum Family {
    NotFound,
    Conflict,
    Invalid,
    Unavailable,
    Other,
}

/// A failed call as plain data (no GIL needed), turned into its exception at hand-over.
#[derive(Debug)]
pub struct CallError {
    family: Family,
    code: String,
    message: String,
    /// The ids an error may name, boxed: most errors carry none, and a small `Err` keeps every
    /// `Result` of the binding small.
    ids: Box<Ids>,
    details: String,
}

/// `.field`, `.operation_id` and `.approval_id` of an error.
#[derive(Debug, Default)]
struct Ids {
    field: Option<String>,
    operation_id: Option<String>,
    approval_id: Option<String>,
}

impl CallError {
    fn new(family: Family, code: &str, message: &str, field: Option<&str>, details: String) -> Self {
        let ids = Ids { field: field.map(str::to_owned), ..Ids::default() };
        Self { family, code: code.to_owned(), message: message.to_owned(), ids: Box::new(ids), details }
    }

    /// The exception of its family with `.code`, `.message`, `.field`, `.details`.
    pub fn into_pyerr(self, py: Python<'_>) -> PyErr {
        let text = format!("{}: {}", self.code, self.message);
        let err = match self.family {
            Family::NotFound => NotFoundError::new_err(text),
            Family::Conflict => ConflictError::new_err(text),
            Family::Invalid => InvalidError::new_err(text),
            Family::Unavailable => UnavailableError::new_err(text),
            Family::Other => SpacesError::new_err(text),
        };
        let value = err.value(py);
        let set = || -> PyResult<()> {
            value.setattr("code", &self.code)?;
            value.setattr("message", &self.message)?;
            value.setattr("field", self.ids.field.as_deref())?;
            value.setattr("operation_id", self.ids.operation_id.as_deref())?;
            value.setattr("approval_id", self.ids.approval_id.as_deref())?;
            value.setattr("details", &self.details)?;
            Ok(())
        };
        match set() {
            Ok(()) => err,
            Err(e) => e,
        }
    }
}

fn api(e: &ApiError) -> CallError {
    let details = serde_json::to_string(e).unwrap_or_default();
    let mut err = CallError::new(family(e.code), &e.code.as_str(), &e.message, e.field.as_deref(), details);
    err.ids.operation_id = e.operation_id.clone();
    err.ids.approval_id = e.approval_id.clone();
    err
}

/// A failed call of the client.
pub fn client_error(e: ClientError) -> CallError {
    match e {
        ClientError::Api(e) => api(&e),
        ClientError::Connect { ref endpoint, .. } => {
            // A socket path starts with `/`; a remote daemon is `host:port`, which no client starts.
            let fix = if endpoint.starts_with('/') {
                "start it with `python -m spaces._daemon serve` or let Spaces() start it"
            } else {
                "a remote daemon is started on its host with `spacesd serve --tcp ADDR` (Spaces(url=...) never starts one)"
            };
            let message = format!("{e}; {fix}");
            CallError::new(Family::Unavailable, &e.code(), &message, None, String::new())
        }
        ClientError::Protocol(_) => CallError::new(Family::Other, &e.code(), &e.to_string(), None, String::new()),
        ClientError::Lost { .. } => CallError::new(Family::Unavailable, &e.code(), &e.to_string(), None, String::new()),
    }
}

/// A daemon that could not be started.
pub fn start_error(e: StartError) -> CallError {
    CallError::new(Family::Unavailable, spaces_sdk::client::client_codes::DAEMON_START_FAILED, &e.to_string(), None, String::new())
}

/// An argument the Python layer passed that the daemon would refuse too.
pub fn invalid(message: &str) -> CallError {
    CallError::new(Family::Invalid, "INVALID_ARGUMENT", message, None, String::new())
}

/// Arguments that are not JSON (the Python layer always sends JSON, so this is a bug there).
pub fn bad_json(e: serde_json::Error) -> CallError {
    CallError::new(Family::Invalid, "INVALID_ARGUMENT", &format!("arguments are not JSON: {e}"), None, String::new())
}

/// The pid that first used the runtime. tokio does not survive `fork()` (its threads are not
/// copied), so a forked child is refused with a clear error instead of hanging.
static RUNTIME_PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Refuses calls in a process forked after the runtime started.
pub fn fork_guard() -> PyResult<()> {
    let pid = std::process::id();
    let first = *RUNTIME_PID.get_or_init(|| pid);
    if first == pid {
        Ok(())
    } else {
        Err(SpacesError::new_err(format!(
            "FORKED: this process (pid {pid}) was forked from pid {first} after the Spaces SDK started its \
             runtime, which does not survive fork(); use the SDK in the parent, or start children with \
             multiprocessing's 'spawn' or 'forkserver' method"
        )))
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SpacesError", py.get_type::<SpacesError>())?;
    // The source documents' name for the same class.
    m.add("CuaError", py.get_type::<SpacesError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("InvalidError", py.get_type::<InvalidError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    Ok(())
}
