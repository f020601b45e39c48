//! `spacesd`: the Spaces host daemon and its command line. See `spacesd --help`.

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SPACES_LOG").unwrap_or_else(|_| "warn".into()),
        )
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
