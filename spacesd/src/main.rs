//! `spacesd`: the Spaces host daemon and its command line. See `spacesd --help`.

fn main() -> std::process::ExitCode {
    let code = spacesd::cli::run(std::env::args_os());
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
