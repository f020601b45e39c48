//! The native half of the Node SDK (`@spaces/sdk`), kept thin (STYLE item 8): one generic async
//! `call(name, argsJson)` over [`Client::call_named`], a run's live events over
//! [`Client::follow`] (server-sent events, long-poll as the fallback), the operation catalogue
//! as data, and the daemon's entry point so that the npm package carries `spacesd` (`daemon.js`). `index.js`
//! builds `Spaces` and `Space` from the catalogue; nothing here names a single operation.
//!
//! Async functions run on napi's tokio runtime and resolve Promises: the Node main thread is
//! never held while a call waits. Nothing here uses `spawn_blocking` (a TCP address is parsed,
//! not resolved), which would keep Node alive at exit.

mod error;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use napi_derive::napi;
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::follow::{EventFollow, Transport, Until};
use spaces_sdk::op::Audience;

use crate::error::Result;

/// How to reach a daemon (`connect`).
#[napi(object)]
pub struct ConnectOptions {
    /// State dir of a local daemon (default: `SPACES_HOME`, else `<data dir>/spaces`).
    pub state_dir: Option<String>,
    /// A remote daemon over TCP: `http://127.0.0.1:7700` or `127.0.0.1:7700` (needs `token`).
    pub url: Option<String>,
    /// Bearer token of the TCP listener.
    pub token: Option<String>,
    /// Local only: the command that serves `stateDir`, started detached when no daemon answers
    /// (`index.js` passes `[process.execPath, daemon.js, "--state-dir", DIR, "serve"]`). Absent:
    /// no daemon is started.
    pub daemon_command: Option<Vec<String>>,
    /// Local only: keep the daemon running after the last client is gone (tells one started
    /// with `--exit-when-unused` to run on). Default false: this client holds the daemon while
    /// it is open (`close()` or the process exiting lets it go).
    pub keep_daemon: Option<bool>,
}

/// A connected client of one daemon.
#[napi]
pub struct NativeClient {
    client: Client,
    state_dir: Option<String>,
    started_pid: Option<u32>,
    /// This client's hold on a daemon that counts its clients (`serve --exit-when-unused`).
    hold: std::sync::Mutex<Option<spaces_sdk::local::Hold>>,
}

/// Connects: to `url` with `token`, else to the daemon of the state dir, starting
/// `daemonCommand` detached when none answers. Rejects with `DAEMON_START_FAILED` when it cannot
/// be started, `INVALID_ARGUMENT` for a `url` without `token`.
#[napi(catch_unwind)]
pub async fn connect(options: ConnectOptions) -> Result<NativeClient> {
    if let Some(url) = options.url {
        let Some(token) = options.token else {
            return Err(error::invalid(format!("url {url:?} needs a token (the daemon's <state dir>/token)")));
        };
        let addr = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
        if addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(error::invalid(format!("url {url:?} is not http://IP:PORT")));
        }
        return Ok(NativeClient {
            client: Client::new(Endpoint::Tcp { addr, token }),
            state_dir: None,
            started_pid: None,
            hold: std::sync::Mutex::new(None),
        });
    }
    let state_dir = options.state_dir.map(PathBuf::from).unwrap_or_else(spaces_sdk::local::default_state_dir);
    let state_dir = std::path::absolute(&state_dir).unwrap_or(state_dir);
    let started_pid = match options.daemon_command {
        Some(cmd) => {
            let cmd: Vec<OsString> = cmd.into_iter().map(OsString::from).collect();
            spaces_sdk::local::ensure_daemon(&state_dir, &cmd).await.map_err(error::start)?
        }
        None => None,
    };
    let hold = spaces_sdk::local::hold(&state_dir, options.keep_daemon.unwrap_or(false));
    Ok(NativeClient {
        client: Client::new(Endpoint::Unix(spaces_sdk::local::socket_path(&state_dir))),
        state_dir: Some(state_dir.display().to_string()),
        started_pid,
        hold: std::sync::Mutex::new(hold),
    })
}

#[napi]
impl NativeClient {
    /// Runs the operation `name` with `argsJson` (a JSON object of its request fields, the
    /// contract's snake_case) and resolves to its result JSON. Rejects with the typed error.
    #[napi(catch_unwind)]
    pub async fn call(&self, name: String, args_json: String) -> Result<String> {
        let args: serde_json::Value =
            serde_json::from_str(&args_json).map_err(|e| error::invalid(format!("{name}: arguments are not JSON: {e}")))?;
        let answer = self.client.call_named(&name, args).await.map_err(error::client)?;
        Ok(answer.to_string())
    }

    /// Follows run `runId` of Space `space` after `cursor` (0: from the start) until `until`:
    /// `turn` (default; caught up and the run no longer running) or `stopped` (across turns,
    /// until the run is stopped or done). Reads the daemon's server-sent event stream,
    /// reconnecting with `Last-Event-ID`, and long-polls when the daemon answers no stream.
    /// Nothing is sent before the first `next()`. Throws `INVALID_ARGUMENT` for another `until`.
    #[napi]
    pub fn follow(&self, space: String, run_id: String, cursor: Option<i64>, until: Option<String>) -> Result<NativeFollow> {
        let until = Until::parse(until.as_deref().unwrap_or("turn")).map_err(error::invalid)?;
        let cursor = u64::try_from(cursor.unwrap_or(0)).map_err(|_| error::invalid("cursor must be 0 or more".to_owned()))?;
        let follow = self.client.follow(&space, &run_id, cursor, until);
        Ok(NativeFollow {
            follow: Arc::new(tokio::sync::Mutex::new(follow)),
            seen: Arc::new(std::sync::Mutex::new(Seen { transport: Transport::Unopened, cursor })),
        })
    }

    /// The local state dir (absent for a TCP client).
    #[napi(getter)]
    pub fn state_dir(&self) -> Option<String> {
        self.state_dir.clone()
    }

    /// Lets the daemon go: one started with `--exit-when-unused` ends once no client holds it
    /// and no turn is in flight. Calls still work on a daemon that answers (later ones do not
    /// hold it again: connect anew for that).
    #[napi]
    pub fn close(&self) {
        if let Ok(mut hold) = self.hold.lock() {
            hold.take();
        }
    }

    /// The pid of the daemon this client started (absent when one already answered).
    #[napi(getter)]
    pub fn started_pid(&self) -> Option<u32> {
        self.started_pid
    }
}

/// What a follow last reported, readable without waiting for a `next()` in flight.
#[derive(Clone, Copy)]
struct Seen {
    transport: Transport,
    cursor: u64,
}

/// A live follow of one run's events (`NativeClient.follow`); `index.js` wraps it as an async
/// iterator.
#[napi]
pub struct NativeFollow {
    follow: Arc<tokio::sync::Mutex<EventFollow>>,
    seen: Arc<std::sync::Mutex<Seen>>,
}

#[napi]
impl NativeFollow {
    /// The next event as its wire JSON, or `null` once the follow reached its end. Rejects with
    /// the typed error (an unknown run, a cursor past the end, the daemon unreachable).
    #[napi(catch_unwind)]
    pub async fn next(&self) -> Result<Option<String>> {
        let mut follow = self.follow.lock().await;
        let event = follow.next().await.map_err(error::client)?;
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Seen { transport: follow.transport(), cursor: follow.cursor() };
        event.map(|e| serde_json::to_string(&e).map_err(|e| error::invalid(e.to_string()))).transpose()
    }

    /// How the events arrive: `sse`, `long_poll`, or `unopened` before the first `next()`.
    #[napi(getter)]
    pub fn transport(&self) -> String {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).transport.as_str().to_owned()
    }

    /// The seq of the last event returned (or the starting cursor).
    #[napi(getter)]
    pub fn cursor(&self) -> i64 {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).cursor as i64
    }
}

/// One operation of the catalogue.
#[napi(object)]
pub struct OperationEntry {
    /// Wire name, e.g. `agent_start`.
    pub name: String,
    pub doc: String,
    /// `GET`, `POST`, `PATCH`.
    pub method: String,
    /// Route template, e.g. `/v1/spaces/{space}/agents`.
    pub path: String,
    pub read_only: bool,
    /// `tool` (agents and SDK users) or `inbox` (the user's side of steering).
    pub audience: String,
    /// The request's top-level fields (snake_case), from its JSON Schema.
    pub fields: Vec<String>,
    /// The fields the request requires.
    pub required: Vec<String>,
    /// True when the operation sits on a `Space` (`spaces_sdk::methods`, the rule the Python SDK
    /// reads too).
    pub on_space: bool,
    /// The field a `Space` fills with its name (`space` or `workspace_id`), if any.
    pub space_field: Option<String>,
}

/// The operation catalogue as the SDKs see it (`spaces_sdk::methods::methods()`), in order.
#[napi]
pub fn catalogue() -> Vec<OperationEntry> {
    spaces_sdk::methods::methods()
        .iter()
        .map(|m| {
            let o = m.info;
            OperationEntry {
                name: o.name.to_owned(),
                doc: o.doc.to_owned(),
                method: o.method.as_str().to_owned(),
                path: o.path.to_owned(),
                read_only: o.read_only,
                audience: match o.audience {
                    Audience::Tool => "tool",
                    Audience::Inbox => "inbox",
                    Audience::Operator => "operator",
                }
                .to_owned(),
                fields: m.fields.clone(),
                required: m.required.clone(),
                on_space: m.on_space,
                space_field: m.space_field.map(str::to_owned),
            }
        })
        .collect()
}

/// `SPACES_HOME`, else `<user data dir>/spaces`: the state dir `connect` uses by default.
#[napi]
pub fn default_state_dir() -> String {
    spaces_sdk::local::default_state_dir().display().to_string()
}

/// Runs the `spacesd` command line with `args` (e.g. `["--state-dir", DIR, "serve"]`) in this
/// process, blocking it until the command ends (for `serve`: SIGINT or SIGTERM), and returns
/// its exit code. This is `daemon.js`, the daemon the package carries; never call it from a
/// process that has other work to do.
#[napi]
pub fn run_daemon(args: Vec<String>) -> i32 {
    restore_default_signals();
    spacesd::cli::run(std::iter::once(std::ffi::OsString::from("spacesd")).chain(args.into_iter().map(Into::into)))
}

/// Node installs its own SIGINT and SIGTERM handler (it resets the terminal, then raises the
/// signal again). The daemon's handler (tokio, via signal-hook) chains to it, so the raised
/// signal would come back to the daemon's handler forever and `serve` never ends. The daemon
/// process runs no JavaScript while it serves, so it takes both signals back to their
/// defaults first and lets tokio own them, as in the `spacesd` binary.
fn restore_default_signals() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: installs the default disposition (no handler code runs), before any thread
        // of the daemon's runtime exists.
        if let Err(e) = unsafe { signal(sig, SigHandler::SigDfl) } {
            eprintln!("spacesd: cannot reset {sig}: {e}");
        }
    }
}
