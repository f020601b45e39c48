//! The whole `spacesd` process around the command line, shared by the `spacesd` binary and the
//! language bindings that carry the daemon (`python -m spaces._daemon`, `node daemon.js`): logs
//! to stderr, parsing, SIGPIPE for client commands, the runtime, and the exit code.

use std::ffi::OsString;
use std::time::Duration;

use super::{main, Cli, TurnFailed};

/// Threads of the runtime's blocking pool the daemon makes at start (issue 30).
///
/// The processes a daemon starts are its uid's, and `RLIMIT_NPROC` counts the uid's tasks, the
/// daemon's threads among them: a command's sandbox ceiling (`SPACES_PIDS_MAX`, or the uid's own
/// limit when that is lower) bounds one command, not the uid. A fork bomb under a non-root
/// daemon, or a few commands at their ceilings, can take every task the uid may have, and then
/// no thread of the daemon starts. tokio makes a blocking thread when a blocking task (event
/// pages, statuses, lists, home saves, `block_in_place`) finds none idle; when the OS refuses
/// one it queues the task for a thread of the pool, and panics ("OS can't spawn worker thread")
/// only when the pool has no thread at all. So the daemon makes these threads before they are
/// needed and keeps every blocking thread it made ([`BLOCKING_KEEP_ALIVE`]): under an exhausted
/// uid, blocking work waits for one of them instead of panicking.
const RESERVED_BLOCKING_THREADS: usize = 8;

/// How long an idle blocking thread of the daemon waits for work before it ends: the daemon's
/// life (tokio's default, 10 s, would let the pool empty out in any quiet moment).
const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Makes [`RESERVED_BLOCKING_THREADS`] threads of `runtime`'s blocking pool: as many blocking
/// tasks at once, each holding its thread until all of them run (1 s at most). A thread the OS
/// refuses now is a warning, never a failure: the daemon starts with those it got.
fn reserve_blocking_threads(runtime: &tokio::runtime::Runtime) {
    use std::sync::{Arc, Condvar, Mutex, PoisonError};
    let arrived = Arc::new((Mutex::new(0usize), Condvar::new()));
    let mut tasks = Vec::with_capacity(RESERVED_BLOCKING_THREADS);
    for _ in 0..RESERVED_BLOCKING_THREADS {
        let arrived = arrived.clone();
        // tokio panics when it cannot make the pool's first thread: caught, so the daemon
        // starts all the same.
        let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.spawn_blocking(move || {
                let (count, changed) = &*arrived;
                let mut n = count.lock().unwrap_or_else(PoisonError::into_inner);
                *n += 1;
                changed.notify_all();
                let deadline = std::time::Instant::now() + Duration::from_secs(1);
                while *n < RESERVED_BLOCKING_THREADS {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    n = changed.wait_timeout(n, left).unwrap_or_else(PoisonError::into_inner).0;
                }
            })
        }));
        match spawned {
            Ok(task) => tasks.push(task),
            Err(_) => break,
        }
    }
    runtime.block_on(async {
        for task in tasks {
            let _ = task.await;
        }
    });
    let made = *arrived.0.lock().unwrap_or_else(PoisonError::into_inner);
    if made < RESERVED_BLOCKING_THREADS {
        tracing::warn!(
            "{made} of the {RESERVED_BLOCKING_THREADS} blocking threads the daemon keeps in reserve could be made (its uid's process limit?)"
        );
    }
}

/// The internal word that enters a sandbox (`spacesd sandbox-exec [--max-processes N] -- PROGRAM`),
/// written by shims into bubblewrap's command line (`spaces_os::sandbox::command`).
const SANDBOX_EXEC: &str = "sandbox-exec";

/// Runs `spacesd` with `argv` (the program name first) to its end and returns the exit code:
/// 0 done, 1 failed, 2 a followed turn failed ([`TurnFailed`]) or a usage error (clap's code).
/// Logs go to stderr only (stdout is `spacesd mcp`'s JSON-RPC channel): level from `SPACES_LOG`,
/// else `RUST_LOG`, else `warn`; colours only on a terminal.
pub fn run(argv: impl IntoIterator<Item = OsString>) -> i32 {
    let argv: Vec<OsString> = argv.into_iter().collect();
    // Inside a sandbox, before the program (`spaces_os::sandbox::enter`): on every start of an
    // agent or a command, so before logging and parsing, and never a runtime.
    if argv.get(1).is_some_and(|a| a == SANDBOX_EXEC) {
        let rest: Option<Vec<String>> = argv[2..].iter().map(|a| a.clone().into_string().ok()).collect();
        return match rest {
            Some(rest) => spaces_os::sandbox::enter::main(&rest),
            None => {
                eprintln!("sandbox-exec: the program's arguments must be UTF-8");
                127
            }
        };
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPACES_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        // A log line that cannot be written (a full disk under the log file) is dropped: the
        // default says so with `eprintln!`, which panics on the same full disk.
        .log_internal_errors(false)
        .try_init();
    let parsed = <Cli as clap::CommandFactory>::command()
        .try_get_matches_from(argv)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m).map(|cli| (cli, m)));
    let cli = match parsed {
        Ok((mut cli, m)) => {
            cli.state_dir_given = m.value_source("state_dir") == Some(clap::parser::ValueSource::CommandLine);
            cli
        }
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    if let super::Command::Shim { dir } = &cli.command {
        // Its own single-threaded runtime, and no daemon state: see `spaces_os::shim`.
        return spaces_os::shim::server::main(dir);
    }
    let is_client = cli.command.is_client();
    if is_client {
        // A client command whose output pipe closes (`spacesd agent events RUN | head -3`) ends
        // quietly as the shell expects (status 141), never with a panic. The daemon (`serve`,
        // `demo`, `mcp`) keeps Rust's default of ignoring SIGPIPE: a closed socket is an error
        // there, not a reason to die.
        // SAFETY: called before the runtime starts any thread; SIG_DFL is a valid handler.
        unsafe {
            let _ = nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl);
        }
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if !is_client {
        // The daemon's runtime threads wake for every hop of a line, a follow-up or a start:
        // each asks for a short slice, to run at once rather than after a busy task's slice.
        builder.on_thread_start(|| {
            spaces_os::process::priority::ask_short_slice();
        });
        // Blocking threads, once made, stay: see `reserve_blocking_threads`.
        builder.thread_keep_alive(BLOCKING_KEEP_ALIVE);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("spacesd: cannot start the tokio runtime: {e}");
            return 1;
        }
    };
    if !is_client {
        reserve_blocking_threads(&runtime);
    }
    let code = match runtime.block_on(main(cli)) {
        Ok(()) => 0,
        Err(e) => {
            match e.downcast_ref::<spaces_sdk::client::ClientError>() {
                // The OS error once (not again as the error's source), and what to do.
                Some(spaces_sdk::client::ClientError::Connect { endpoint, source }) => {
                    eprintln!("spacesd: no daemon answers at {endpoint} ({source}); start it with: spacesd serve")
                }
                _ => eprintln!("spacesd: {e:#}"),
            }
            match e.downcast_ref::<TurnFailed>() {
                Some(_) => i32::from(TurnFailed::EXIT_CODE),
                None => 1,
            }
        }
    };
    if is_client {
        runtime.shutdown_timeout(Duration::from_secs(2));
    } else {
        // The daemon's runtime is never shut down: the process exits with its tasks where they
        // are, as after a kill -9 (which its state survives by design), once `serve` has stopped
        // the runs' actors and cleaned up. A shutdown would drop the time driver under a task
        // resumed from `block_in_place` (a store write's wait), whose next timer then panics
        // ("A Tokio 1.x context was found, but it is being shutdown").
        std::mem::forget(runtime);
    }
    code
}
