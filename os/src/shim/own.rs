//! What a shim runs of its own: the daemon's command it was started as, and the helper every
//! sandbox is entered through. Used by the shim's server and by spare shims alike.

/// What a sandbox enters through (`... sandbox-exec -- PROGRAM`): the small
/// `spaces-sandbox-exec` beside this shim's executable when it is there (it starts in a
/// fraction of a millisecond), else the daemon's own command ([`own_command`]: `spacesd`, or a
/// binding's interpreter and script).
pub fn sandbox_helper() -> Vec<String> {
    let small = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join(SANDBOX_HELPER))).filter(|p| p.is_file());
    match small {
        Some(path) => vec![path.display().to_string()],
        None => own_command(),
    }
}

/// The file name of the small helper a shim enters each sandbox through, when it stands beside
/// the shim's executable (`spacesd/src/bin/spaces-sandbox-exec.rs`).
pub const SANDBOX_HELPER: &str = "spaces-sandbox-exec";

/// The command that started this shim, without its `shim DIR`: the daemon's own command.
pub fn own_command() -> Vec<String> {
    let mut args: Vec<String> = std::env::args().collect();
    args.truncate(args.len().saturating_sub(2));
    if let Some(first) = args.first_mut() {
        // A relative argv[0] would not be found from the program's working directory.
        if let Ok(exe) = std::env::current_exe() {
            if !first.contains('/') || std::path::Path::new(first.as_str()).is_relative() {
                *first = exe.display().to_string();
            }
        }
    }
    args
}
