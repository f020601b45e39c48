//! `spacesd serve`: open the store, recover runs, and serve the HTTP API and MCP (`/mcp`,
//! Streamable HTTP) on the Unix socket (0600, `<state dir>/spacesd.sock`) and optionally on
//! loopback TCP with a bearer token.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use spaces_host::config::Config;
use spaces_host::supervisor::Supervisor;
use spaces_store::Store;

use crate::access::Access;
use crate::http::{self, AppState};
use crate::mcp;

/// Options of `spacesd serve`.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Also listen on this loopback address (e.g. `127.0.0.1:7700`; port 0 picks one).
    pub tcp: Option<SocketAddr>,
    /// Token file for TCP (created 0600 with a random token if missing); default
    /// `<state dir>/token`.
    pub token_file: Option<PathBuf>,
    /// End once no client has held the daemon for [`crate::unused::GRACE`] and no turn is in
    /// flight (`serve --exit-when-unused`, what the SDKs start; see [`crate::unused`]).
    pub exit_when_unused: bool,
}

/// Open state and build the supervisor (recovering runs a previous daemon left) and the
/// CodeSpace tool service (`<state dir>/codespace.db`). No Space root may reach the state dir
/// or any of `secrets` (files the daemon keeps elsewhere, e.g. `--token-file`).
pub async fn open(cfg: Config, secrets: &[PathBuf]) -> anyhow::Result<AppState> {
    spaces_store::fsutil::create_private_dir(&cfg.state_dir)
        .with_context(|| format!("cannot create state dir {}", cfg.state_dir.display()))?;
    let store = Arc::new(Store::open(&cfg.db_path()).context("cannot open the state database")?);
    for secret in secrets {
        store.protect(secret);
    }
    // Before any run or command starts (re-adopted ones keep the cgroups they have).
    spaces_os::process::priority::set_agent_nice(cfg.agent_nice);
    spaces_os::process::cgroup::init(cfg.cgroups, cfg.process_limits(), &spaces_host::workspaces::host_id(&cfg.state_dir));
    let cs = spaces_host::workspaces::open(&cfg, store.clone()).context("cannot open the CodeSpace ledger")?;
    let adopted = cs.adopt_commands().await;
    if adopted > 0 {
        eprintln!("spacesd: re-adopted {adopted} command(s) held by their shims");
    }
    let leftovers = cs.end_leftovers().await;
    if !leftovers.signalled.is_empty() {
        eprintln!(
            "spacesd: ended {} process(es) of commands an earlier daemon left running{}",
            leftovers.signalled.len(),
            if leftovers.survivors.is_empty() { String::new() } else { format!("; still alive: {:?}", leftovers.survivors) }
        );
    }
    let homes = spaces_host::homes::Homes::open(&cfg).context("cannot open the volume of persistent agents' homes")?;
    if let Some(dir) = homes.local_dir() {
        // A local volume is daemon state: no Space may contain it.
        store.protect(dir);
    }
    // Before any run starts (re-adopted commands keep the sandbox they have); what the store
    // protects is what every sandbox hides.
    let level = spaces_host::sandbox::init(&cfg, &store)?;
    tracing::info!(sandbox = level.as_str(), "runs and commands start in a sandbox");
    let sup = Supervisor::new(cfg, store, homes);
    // Lease renewals start with the first lease a run takes; what they have to say goes to
    // the run's events.
    sup.tell_runs_lease_news();
    sup.recover().await.context("cannot recover runs")?;
    // Home saves the previous daemon died in, in the background.
    sup.retry_interrupted_saves();
    sup.spawn_retention();
    sup.spawn_webhooks();
    // Trees whose shims a crash took are ended by now: their empty cgroups go.
    spaces_os::process::cgroup::sweep();
    // From now on a shim waits ready for the next run or command (after the sweep: a spare's
    // cgroup is empty for a moment after it is made).
    match spaces_host::config::self_command() {
        Ok(command) if sup.config().spare_shims => spaces_os::shim::spare::keep(command, spaces_host::supervisor::shim_env()),
        Ok(_) => tracing::info!("spare shims are turned off: each run and command starts its shim when it starts"),
        Err(e) => tracing::warn!("no spare shims: cannot tell how to run spacesd shim: {e}"),
    }
    Ok(AppState { sup, cs })
}

/// The credentials of the daemon of `state` ([`Access`]), with `operator_token` if TCP is on.
pub fn access(state: &AppState, operator_token: Option<&str>) -> Arc<Access> {
    Arc::new(Access::new(&state.sup.config().state_dir, operator_token))
}

/// At the Landlock level (no namespaces: a tree could reach the Unix socket by its path), the
/// operator's token that the Unix socket then requires, read from `token_file` or created there
/// (0600) and redacted from every run's output; `None` at any other level. Clients of the socket
/// send it when they can read the file ([`spaces_sdk::client`]). Call after `open` (which sets
/// the level). Errors: the token file's.
pub fn landlock_token(token_file: &std::path::Path) -> anyhow::Result<Option<String>> {
    if spaces_os::sandbox::level() != spaces_os::sandbox::Level::Landlock {
        return Ok(None);
    }
    let token = read_or_create_token(token_file)?;
    spaces_host::supervisor::learn_secret(&token);
    Ok(Some(token))
}

/// Serve until SIGINT/SIGTERM.
pub async fn serve(cfg: Config, opts: ServeOptions) -> anyhow::Result<()> {
    let socket = cfg.socket_path();
    let activated = activated_listener(&socket)?;
    let socket_activated = activated.is_some();
    // Refuse before touching state: recovery ends leftover processes, which must never be a
    // live daemon's. A socket handed over by systemd is ours: nobody else serves it.
    if activated.is_none() && socket.exists() {
        if let Some(how) = still_served(&socket).await {
            anyhow::bail!("another spacesd is already serving {} ({how})", socket.display());
        }
        std::fs::remove_file(&socket).with_context(|| format!("cannot remove stale socket {}", socket.display()))?;
    }
    // Bad TCP options are refused before recovery touches anything, too.
    let tcp_token = match opts.tcp {
        Some(addr) if !addr.ip().is_loopback() => {
            anyhow::bail!("refusing to listen on {addr}: only loopback addresses are allowed")
        }
        Some(addr) => {
            spaces_store::fsutil::create_private_dir(&cfg.state_dir)
                .with_context(|| format!("cannot create state dir {}", cfg.state_dir.display()))?;
            let token_file = opts.token_file.clone().unwrap_or_else(|| cfg.state_dir.join("token"));
            let token = read_or_create_token(&token_file)?;
            Some((addr, token_file, token))
        }
        None => None,
    };
    // Nothing of the same uid (without CAP_SYS_PTRACE) may ptrace this process or read its
    // memory and environment through /proc; root still can.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("spacesd: cannot make the daemon non-dumpable: {e}");
    }
    spaces_host::supervisor::learn_host_secrets(&cfg);
    if let Some((_, _, token)) = &tcp_token {
        spaces_host::supervisor::learn_secret(token);
    }
    let mut secrets: Vec<PathBuf> = tcp_token.iter().map(|(_, file, _)| file.clone()).collect();
    // A token file kept elsewhere is hidden from every tree even without TCP: the Landlock
    // level needs the token on the Unix socket too (below).
    secrets.extend(opts.token_file.clone().filter(|f| !secrets.contains(f)));
    let token_file = opts.token_file.clone().unwrap_or_else(|| cfg.state_dir.join("token"));
    // The Unix socket answers from here on: `/v1/health` at once, every other request once the
    // state is open and the runs recovered (`http::starting`), so a restart under load is
    // seen alive within its first moments, and a second daemon is refused meanwhile.
    spaces_store::fsutil::create_private_dir(&cfg.state_dir)
        .with_context(|| format!("cannot create state dir {}", cfg.state_dir.display()))?;
    // Bound before the API socket answers: a client that sees the daemon answer finds its hold
    // socket there too.
    let hold_path = spaces_sdk::local::hold_path(&cfg.state_dir);
    let holders = match opts.exit_when_unused {
        true => Some(crate::unused::Holders::listen(&hold_path).with_context(|| format!("cannot bind {}", hold_path.display()))?),
        false => None,
    };
    // Our hold socket goes with this function, however it returns: left behind, clients would
    // hold nothing.
    let _hold_file = holders.as_ref().map(|_| RemoveOnDrop(hold_path.clone()));
    let unix = match activated {
        Some(listener) => {
            listener.set_nonblocking(true)?;
            tokio::net::UnixListener::from_std(listener)?
        }
        None => tokio::net::UnixListener::bind(&socket).with_context(|| format!("cannot bind {}", socket.display()))?,
    };
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    let limits = http::Limits::of(&cfg);
    let (gate, starting) = http::starting::gate();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(async move { http::serve_unix(unix, starting, limits).await.map_err(anyhow::Error::from) });
    let state = match open(cfg, &secrets).await {
        Ok(state) => state,
        Err(e) => {
            if !socket_activated {
                let _ = std::fs::remove_file(&socket);
            }
            return Err(e);
        }
    };
    // At the Landlock level a tree can reach the Unix socket by its path: the operator proves
    // itself with the token there ([`crate::access::Access::uid_trusted`]).
    let landlock_token = match tcp_token {
        None => landlock_token(&token_file)?,
        Some(_) => None,
    };
    let sup = state.sup.clone();
    let app = http::router(state.sup.clone(), state.cs.clone());
    // `/mcp` on each listener (its accepted `Host` values differ), ended with the daemon.
    let service = spaces_service::Service::new(state.sup.clone(), state.cs.clone());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mcp_route = |listener| mcp::http::router(service.clone(), listener, shutdown.child_token());
    // Everything a client may look for (token file, tcp.addr, signal handling) is ready before
    // the Unix socket answers its first request but `/v1/health` (the gate opens below).
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let access = access(&state, tcp_token.as_ref().map(|(_, _, token)| token.as_str()).or(landlock_token.as_deref()));
    if let Some((addr, token_file, _)) = tcp_token {
        let listener = bind_tcp(addr).with_context(|| format!("cannot bind {addr}"))?;
        let bound = listener.local_addr()?;
        std::fs::write(sup.config().state_dir.join("tcp.addr"), bound.to_string())?;
        access.sessions().listen_on(bound);
        let app = app
            .clone()
            .merge(mcp_route(mcp::http::Listener::Tcp(bound)))
            .merge(http::ui::tickets(access.clone()))
            .merge(http::ui::pages(access.clone()));
        let access = access.clone();
        tasks.spawn(async move { http::serve_tcp(listener, app, access, limits).await.map_err(anyhow::Error::from) });
        // One line scripts parse (URL and token file), then a hint of its own.
        eprintln!("spacesd: listening on http://{bound} (operator's bearer token in {})", token_file.display());
        eprintln!("spacesd: the web page of runs is at http://{bound}/ui/; `spacesd ui` prints a one-time login link");
    }
    let app = app.merge(mcp_route(mcp::http::Listener::Unix)).merge(http::ui::tickets(access.clone()));
    // Each run's own socket: the API without the operator's pages, every request that run.
    let run_app = app.clone();
    let run_access = access.clone();
    sup.serve_run_sockets(Arc::new(move |listener, run_id: String, space: String| {
        let (app, principal) = (run_app.clone(), run_access.for_run(&run_id, &space));
        Box::pin(async move {
            if let Err(e) = http::serve_run(listener, app, principal, limits).await {
                tracing::warn!("run {run_id}: its API socket stopped: {e}");
            }
        })
    }));
    gate.open(http::unix_app(app, access));
    eprintln!("spacesd: listening on {} (pid {}; SIGTERM stops it)", socket.display(), std::process::id());
    let unused = async {
        match &holders {
            Some(holders) => {
                eprintln!(
                    "spacesd: started with --exit-when-unused: ends {} s after its last client is gone (clients hold it on {}), once no turn is in flight",
                    crate::unused::GRACE.as_secs(),
                    hold_path.display()
                );
                holders.unused(&sup, crate::unused::GRACE).await
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = unused => {
            eprintln!("spacesd: no client has held this daemon for {} s and no turn is in flight: exiting (--exit-when-unused)", crate::unused::GRACE.as_secs());
        }
        Some(res) = tasks.join_next() => { res??; }
    }
    shutdown.cancel();
    // A turn that was recorded as started gets its text to its agent before the daemon goes
    // (a follow-up's key is stored with its turn: a retry must find it delivered).
    if !sup.finish_turn_starts(std::time::Duration::from_secs(5)).await {
        eprintln!("spacesd: a turn start did not finish within 5 s; stopping all the same");
    }
    // Each run's actor leaves its loop before the runtime goes (its agent goes on under its shim).
    if !sup.stop_actors(std::time::Duration::from_secs(5)).await {
        eprintln!("spacesd: a run's actor did not stop within 5 s; stopping all the same");
    }
    // Finished spans still in the exporter's batch go to the collector.
    sup.flush_traces().await;
    if !socket_activated {
        let _ = std::fs::remove_file(&socket);
    }
    // A stale address would send clients to a port nothing (or something else) listens on.
    let _ = std::fs::remove_file(sup.config().state_dir.join("tcp.addr"));
    if state.cs.processes().shimmed() {
        eprintln!("spacesd: shutting down; agent runs and running commands go on under their shims and the next start re-adopts them");
    } else {
        let ended = state.cs.processes().terminate_all().await;
        if ended > 0 {
            eprintln!("spacesd: ended {ended} running command(s) (no shims: exec_command handles do not survive a shutdown)");
        }
        eprintln!("spacesd: shutting down; agent runs go on under their shims and the next start re-adopts them");
    }
    spaces_os::shim::spare::stop();
    // This daemon's empty cgroup directories (shims still running keep theirs).
    spaces_os::process::cgroup::sweep();
    Ok(())
}

/// Whether a daemon serves `socket`, and how that was seen. One that answers `/v1/health` (a live daemon does at once,
/// even while it recovers: `http::starting`) is seen at the first look; otherwise whatever keeps
/// accepting connections for a second is taken for one. A killed daemon's child caught between
/// its fork and its exec still holds a copy of the listener, which accepts a connection and
/// answers nothing, and lets it go within milliseconds: its socket is stale (a kill -9 of the
/// daemon while it started a process, seen in the end-to-end suite). A socket nothing holds
/// answers no connection, at once. (Two daemons started together, as two SDK clients may: the
/// second sees the first answer and leaves at once, rather than lingering a second.)
async fn still_served(socket: &std::path::Path) -> Option<&'static str> {
    const LOOKS: u32 = 10;
    const HEALTH_WAIT: std::time::Duration = std::time::Duration::from_millis(500);
    let client = spaces_sdk::client::Client::new(spaces_sdk::client::Endpoint::Unix(socket.to_path_buf()));
    let health = client.call::<(), serde_json::Value>(spaces_sdk::client::Method::GET, "/v1/health", None);
    if tokio::time::timeout(HEALTH_WAIT, health).await.is_ok_and(|answer| answer.is_ok()) {
        return Some("it answers /v1/health");
    }
    for look in 0..LOOKS {
        if tokio::net::UnixStream::connect(socket).await.is_err() {
            return None;
        }
        if look + 1 < LOOKS {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Some("it kept accepting connections for a second")
}

/// Removes a file when dropped (the hold socket of `serve --exit-when-unused`).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The Unix socket systemd (or `systemd-socket-activate`) handed over, when `LISTEN_FDS` names
/// one: socket activation (docs/operations.md "Under systemd", `contrib/systemd/spacesd.socket`).
/// The socket must be a listening Unix stream socket bound at `socket` (the path every client
/// looks at); it is made close-on-exec so no agent or command inherits it, and it is left in
/// place at shutdown (systemd owns it and keeps queueing connections for the next start).
/// Errors: a handed-over descriptor that is not such a socket, naming what to set.
fn activated_listener(socket: &std::path::Path) -> anyhow::Result<Option<std::os::unix::net::UnixListener>> {
    let mut fds = listenfd::ListenFd::from_env();
    if fds.len() == 0 {
        return Ok(None);
    }
    let listener = fds
        .take_unix_listener(0)
        .context("socket activation: the first passed descriptor is not a listening Unix stream socket (ListenStream= a path)")?
        .context("socket activation: LISTEN_FDS is set but its first descriptor was already taken")?;
    let bound = listener.local_addr()?.as_pathname().map(std::path::Path::to_path_buf);
    if bound.as_deref() != Some(socket) {
        anyhow::bail!(
            "socket activation: the passed socket is bound at {:?}, but clients of this state dir look at {}; set ListenStream={} in the socket unit",
            bound,
            socket.display(),
            socket.display()
        );
    }
    nix::fcntl::fcntl(&listener, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
    Ok(Some(listener))
}

/// A TCP listener on `addr` whose backlog holds [`TCP_BACKLOG`] connections: past the
/// connection cap ([`http::Limits`]) new connections wait there, holding none of the daemon's
/// descriptors.
fn bind_tcp(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(TCP_BACKLOG)
}

/// The TCP listener's backlog (the kernel caps it at `net.core.somaxconn`).
pub const TCP_BACKLOG: u32 = 1024;

/// Read the bearer token from `path`, creating it (0600, random) if missing. A token file
/// readable by others is refused.
pub fn read_or_create_token(path: &std::path::Path) -> anyhow::Result<String> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            if meta.permissions().mode() & 0o077 != 0 {
                anyhow::bail!("token file {} must be 0600 (chmod 600 it)", path.display());
            }
            let token = std::fs::read_to_string(path)?.trim().to_owned();
            if token.is_empty() {
                anyhow::bail!("token file {} is empty", path.display());
            }
            Ok(token)
        }
        Err(_) => {
            let token = uuid::Uuid::new_v4().simple().to_string();
            spaces_store::fsutil::write_private(path, token.as_bytes())?;
            Ok(token)
        }
    }
}
