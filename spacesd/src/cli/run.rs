//! The whole `spacesd` process around the command line, shared by the `spacesd` binary and the
//! language bindings that carry the daemon (`python -m spaces._daemon`, `node daemon.js`): logs
//! to stderr, parsing, SIGPIPE for client commands, the runtime, and the exit code.

use std::ffi::OsString;
use std::time::Duration;

use super::{main, Cli, TurnFailed};

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
    if cli.command.is_client() {
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
    if !cli.command.is_client() {
        // The daemon's runtime threads wake for every hop of a line, a follow-up or a start:
        // each asks for a short slice, to run at once rather than after a busy task's slice.
        builder.on_thread_start(|| {
            spaces_os::process::priority::ask_short_slice();
        });
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("spacesd: cannot start the tokio runtime: {e}");
            return 1;
        }
    };
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
    runtime.shutdown_timeout(Duration::from_secs(2));
    code
}
