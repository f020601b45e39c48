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
    match spacesd::cli::main(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spacesd: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
