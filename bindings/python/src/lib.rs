//! `spaces._native`: the thin native half of the Python SDK (`bindings/python/python/spaces`).
//!
//! It exposes these things and nothing else (STYLE item 8):
//! - `NativeClient`: a handle on the typed Rust client with one generic async
//!   `call(name, args_json) -> result_json` over [`Client::call_named`]; the Python layer builds
//!   every `Spaces`/`Space` method from the catalogue on top of it.
//! - `NativeFollow` (`NativeClient.follow`): a run's live events over [`Client::follow`]
//!   (server-sent events, reconnecting with `Last-Event-ID`; long-polls as the fallback), one
//!   awaitable `next()` at a time; `spaces.Space.agent_follow` iterates it.
//! - `catalogue`: the operation catalogue as data (name, doc, route, audience and the JSON
//!   Schema of each request), so a new operation reaches Python without code written for it.
//! - `Exchange`, `parse_head`, `answer_error`, `transport_error`: one call as bytes
//!   ([`spaces_sdk::exchange`]), which `spaces._transport` sends to a local daemon from the
//!   asyncio loop's own thread.
//! - `ensure_daemon` / `default_state_dir` / `hold_daemon`: the no-set-up path of
//!   `spaces_sdk::local` (a daemon started with `--exit-when-unused` lives while a client holds it).
//! - `daemon_main`: spacesd's own command line, so `python -m spaces._daemon serve` runs the
//!   real daemon (the package carries it; docs/architecture.md says why).
//!
//! Errors are mapped in one place, `errors`. Async calls run on the tokio runtime of
//! pyo3-async-runtimes and hand Python an `asyncio.Future` (`bridge`): the GIL is not held
//! while a call waits, and no tokio task holds the interpreter beyond setting the result.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::follow::{EventFollow, Transport, Until};

mod bridge;
mod errors;

/// A connection handle on one daemon (no connection is made until a call).
#[pyclass(frozen, module = "spaces._native")]
struct NativeClient {
    client: Client,
}

#[pymethods]
impl NativeClient {
    /// A client of the daemon listening on the Unix socket `path`.
    #[staticmethod]
    fn unix(path: PathBuf) -> Self {
        Self { client: Client::new(Endpoint::Unix(path)) }
    }

    /// A client of a daemon on TCP `addr` (`host:port`) with the bearer `token`.
    #[staticmethod]
    fn tcp(addr: String, token: String) -> Self {
        Self { client: Client::new(Endpoint::Tcp { addr, token }) }
    }

    /// Where this client connects (socket path or `host:port`).
    fn endpoint(&self) -> String {
        match self.client.endpoint() {
            Endpoint::Unix(p) => p.display().to_string(),
            Endpoint::Tcp { addr, .. } => addr.clone(),
        }
    }

    /// Runs operation `name` with `args_json` (a JSON object of its request fields); the
    /// awaitable resolves to the result as JSON text or raises `SpacesError`.
    fn call<'py>(&self, py: Python<'py>, name: String, args_json: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        bridge::awaitable(py, async move {
            let args: serde_json::Value = serde_json::from_str(&args_json).map_err(errors::bad_json)?;
            let answer = client.call_named(&name, args).await.map_err(errors::client_error)?;
            Ok(answer.to_string())
        })
    }

    /// Follows run `run_id` of Space `space` after `cursor` until `until`: `"turn"` (caught up
    /// and the run no longer running) or `"stopped"` (across turns, until stopped or done).
    /// Nothing is sent before the first `next()`. Raises `InvalidArgumentError` for another
    /// `until`.
    #[pyo3(signature = (space, run_id, cursor = 0, until = "turn"))]
    fn follow(&self, space: &str, run_id: &str, cursor: u64, until: &str) -> PyResult<NativeFollow> {
        let until = Until::parse(until).map_err(|message| Python::attach(|py| errors::invalid(&message).into_pyerr(py)))?;
        Ok(NativeFollow {
            follow: Arc::new(tokio::sync::Mutex::new(self.client.follow(space, run_id, cursor, until))),
            seen: Arc::new(Mutex::new((Transport::Unopened, cursor))),
        })
    }
}

/// A live follow of one run's events (`NativeClient.follow`).
#[pyclass(frozen, module = "spaces._native")]
struct NativeFollow {
    follow: Arc<tokio::sync::Mutex<EventFollow>>,
    /// The transport and cursor after the last `next()`, readable while one is in flight.
    seen: Arc<Mutex<(Transport, u64)>>,
}

#[pymethods]
impl NativeFollow {
    /// The next event as its wire JSON text, or `None` once the follow reached its end; raises
    /// the typed error (an unknown run, a cursor past the end, the daemon unreachable).
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (follow, seen) = (self.follow.clone(), self.seen.clone());
        bridge::awaitable(py, async move {
            let mut follow = follow.lock().await;
            let event = follow.next().await.map_err(errors::client_error)?;
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = (follow.transport(), follow.cursor());
            event.map(|e| serde_json::to_string(&e).map_err(errors::bad_json)).transpose()
        })
    }

    /// How the events arrive: `"sse"`, `"long_poll"`, or `"unopened"` before the first `next()`.
    #[getter]
    fn transport(&self) -> &'static str {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).0.as_str()
    }

    /// The seq of the last event returned (or the starting cursor).
    #[getter]
    fn cursor(&self) -> u64 {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).1
    }
}

/// The catalogue as JSON, from the one description the SDKs share
/// ([`spaces_sdk::methods::methods`]).
fn catalogue_value() -> serde_json::Value {
    let methods = spaces_sdk::methods::methods();
    serde_json::Value::Array(
        methods
            .iter()
            .map(|m| {
                serde_json::json!({
                    "name": m.info.name,
                    "doc": m.info.doc,
                    "method": m.info.method.as_str(),
                    "path": m.info.path,
                    "read_only": m.info.read_only,
                    "audience": format!("{:?}", m.info.audience).to_lowercase(),
                    "request": &m.request,
                    "fields": &m.fields,
                    "required": &m.required,
                    "on_space": m.on_space,
                    "space_field": m.space_field,
                })
            })
            .collect(),
    )
}

/// Every operation of the catalogue as JSON text: a list of `{name, doc, method, path,
/// read_only, audience, request, fields, required, on_space, space_field}` where `request` is
/// the JSON Schema of its request and `on_space`/`space_field` say whether it sits on a `Space`
/// and which field that fills ([`spaces_sdk::methods`]).
#[pyfunction]
fn catalogue() -> String {
    catalogue_value().to_string()
}

/// `SPACES_HOME`, else `<user data dir>/spaces`.
#[pyfunction]
fn default_state_dir() -> PathBuf {
    spaces_sdk::local::default_state_dir()
}

/// The daemon's Unix socket in `state_dir`.
#[pyfunction]
fn socket_path(state_dir: PathBuf) -> PathBuf {
    spaces_sdk::local::socket_path(&state_dir)
}

/// Makes sure the daemon of `state_dir` answers, starting `command` detached when none does.
/// Resolves to the pid it started, or `None` when one was already answering.
#[pyfunction]
fn ensure_daemon(py: Python<'_>, state_dir: PathBuf, command: Vec<OsString>) -> PyResult<Bound<'_, PyAny>> {
    bridge::awaitable(py, async move { spaces_sdk::local::ensure_daemon(&state_dir, &command).await.map_err(errors::start_error) })
}

/// One call as bytes ([`spaces_sdk::exchange::Exchange`]): `spaces._transport` sends it to a
/// local daemon from the asyncio loop's own thread (no hop to a tokio thread and back).
#[pyclass(frozen, module = "spaces._native")]
struct Exchange {
    exchange: spaces_sdk::exchange::Exchange,
}

#[pymethods]
impl Exchange {
    /// The call of operation `name` with `args_json` (a JSON object of its request fields).
    /// Raises `SpacesError` (`INVALID_ARGUMENT` for an unknown operation or a missing path field);
    /// refuses a forked child as every call does.
    #[new]
    fn new(name: &str, args_json: &str) -> PyResult<Self> {
        errors::fork_guard()?;
        Python::attach(|py| {
            let args: serde_json::Value = serde_json::from_str(args_json).map_err(|e| errors::bad_json(e).into_pyerr(py))?;
            spaces_sdk::exchange::Exchange::new(name, args)
                .map(|exchange| Self { exchange })
                .map_err(|e| errors::client_error(e).into_pyerr(py))
        })
    }

    /// True when a lost connection may be answered by sending the same bytes once more.
    #[getter]
    fn keyed(&self) -> bool {
        self.exchange.keyed()
    }

    /// The whole HTTP/1.1 request, with `Authorization: Bearer TOKEN` when `token` is given.
    #[pyo3(signature = (token = None))]
    fn request<'py>(&self, py: Python<'py>, token: Option<&str>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.exchange.request(token))
    }
}

/// The head of an answer (everything through the blank line) as `(status, length,
/// keep_alive)`: `length` is the body's byte count, or -1 for a chunked body. Raises
/// `SpacesError` `PROTOCOL` for a head that is not HTTP/1.1.
#[pyfunction]
fn parse_head(py: Python<'_>, head: &[u8]) -> PyResult<(u16, i64, bool)> {
    let head = spaces_sdk::exchange::parse_head(head).map_err(|e| errors::client_error(e).into_pyerr(py))?;
    let length = match head.body {
        spaces_sdk::exchange::BodyLength::Exactly(n) => n as i64,
        spaces_sdk::exchange::BodyLength::Chunked => -1,
    };
    Ok((head.status, length, head.keep_alive))
}

/// The typed error of an answer of `status` (not 2xx) with `body`: the daemon's error envelope
/// as `SpacesError` (or its family), or `PROTOCOL` when the body is not one. Returned, not
/// raised: the caller raises it. (A 2xx body is the result's JSON, decoded once by the caller.)
#[pyfunction]
fn answer_error(py: Python<'_>, status: u16, body: &[u8]) -> PyErr {
    errors::client_error(spaces_sdk::client::error_of(status, body)).into_pyerr(py)
}

/// The error of a call that could not be made or finished: `kind` `unreachable` (no daemon
/// answers at `endpoint`: `DAEMON_UNREACHABLE`), `protocol` (an answer not understood:
/// `PROTOCOL`) or `lost` (the connection closed before the answer: `CONNECTION_LOST`), with
/// `detail` (the OS error, or what was wrong). The same classes and codes as a call through the
/// native client. Returned, not raised.
#[pyfunction]
fn transport_error(py: Python<'_>, kind: &str, endpoint: String, detail: String) -> PyErr {
    let e = match kind {
        "unreachable" => spaces_sdk::client::ClientError::Connect { endpoint, source: std::io::Error::other(detail) },
        "protocol" => spaces_sdk::client::ClientError::Protocol(format!("{endpoint}: {detail}")),
        _ => spaces_sdk::client::ClientError::Lost { endpoint, detail },
    };
    errors::client_error(e).into_pyerr(py)
}

/// One client's hold on a daemon started with `serve --exit-when-unused`
/// ([`spaces_sdk::local::hold`]): the daemon does not end while a hold lives. `release()` lets
/// it go; so does dropping the hold or the process exiting.
#[pyclass(frozen, module = "spaces._native")]
struct DaemonHold {
    hold: Mutex<Option<spaces_sdk::local::Hold>>,
}

#[pymethods]
impl DaemonHold {
    /// Closes the hold's connection (once; later calls do nothing).
    fn release(&self) {
        if let Ok(mut hold) = self.hold.lock() {
            hold.take();
        }
    }
}

/// Holds the daemon of `state_dir` (a connection kept open on `<state dir>/spacesd.hold`);
/// with `keep`, also tells it to run on after its last client. `None` when the daemon keeps no
/// count of its clients (it was not started with `--exit-when-unused`).
#[pyfunction]
fn hold_daemon(state_dir: PathBuf, keep: bool) -> Option<DaemonHold> {
    spaces_sdk::local::hold(&state_dir, keep).map(|hold| DaemonHold { hold: Mutex::new(Some(hold)) })
}

/// Runs spacesd's command line with `argv` (without the program name, e.g. `["--state-dir",
/// DIR, "serve"]`) on a runtime of its own, the GIL released; returns the exit status.
#[pyfunction]
fn daemon_main(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.detach(move || spacesd::cli::run(std::iter::once(OsString::from("spacesd")).chain(argv)))
}

/// The module `spaces._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeClient>()?;
    m.add_class::<NativeFollow>()?;
    m.add_class::<DaemonHold>()?;
    m.add_class::<Exchange>()?;
    m.add_function(wrap_pyfunction!(parse_head, m)?)?;
    m.add_function(wrap_pyfunction!(answer_error, m)?)?;
    m.add_function(wrap_pyfunction!(transport_error, m)?)?;
    m.add_function(wrap_pyfunction!(catalogue, m)?)?;
    m.add_function(wrap_pyfunction!(default_state_dir, m)?)?;
    m.add_function(wrap_pyfunction!(socket_path, m)?)?;
    m.add_function(wrap_pyfunction!(ensure_daemon, m)?)?;
    m.add_function(wrap_pyfunction!(hold_daemon, m)?)?;
    m.add_function(wrap_pyfunction!(daemon_main, m)?)?;
    m.add_function(wrap_pyfunction!(bridge::drain, m)?)?;
    errors::register(m)?;
    Ok(())
}
