//! `spacesd`: the Spaces host daemon and its command line. See `spacesd --help`.

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Logs go to stderr only (stdout is `spacesd mcp`'s JSON-RPC channel): level from
    // SPACES_LOG, else RUST_LOG, else warn; colours only on a terminal.
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPACES_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let cli = spacesd::cli::Cli::parse();
    if cli.command.is_client() {
        // A client command whose output pipe closes (`spacesd agent events RUN | head -3`) ends
        // quietly as the shell expects (status 141), never with a panic. The daemon (`serve`,
        // `demo`, `mcp`) keeps Rust's default of ignoring SIGPIPE: a closed socket is an error
        // there, not a reason to die.
        // SAFETY: called before any other thread writes to a pipe; SIG_DFL is a valid handler.
        unsafe {
            let _ = nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl);
        }
    }
    match spacesd::cli::main(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spacesd: {e:#}");
            match e.downcast_ref::<spacesd::cli::TurnFailed>() {
                Some(_) => std::process::ExitCode::from(spacesd::cli::TurnFailed::EXIT_CODE),
                None => std::process::ExitCode::FAILURE,
            }
        }
    }
}
