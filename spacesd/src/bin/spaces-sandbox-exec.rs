//! `spaces-sandbox-exec [sandbox-exec] [--max-processes N] -- PROGRAM [ARGS...]`: the program's
//! side of a sandbox (`spaces_os::sandbox::enter`), the same as `spacesd sandbox-exec`, as a
//! program of its own. A shim starts it inside every sandbox when it stands beside the shim's
//! own executable: it links nothing of the daemon, so it starts in a fraction of a millisecond
//! where `spacesd` takes about 5 ms (docs/benchmarks.md, "The sandbox's cost to a start").

fn main() -> std::process::ExitCode {
    let args: Option<Vec<String>> = std::env::args_os().skip(1).map(|a| a.into_string().ok()).collect();
    let code = match args {
        Some(args) => {
            // The word the shim writes after the helper's command (`spacesd ... sandbox-exec`).
            let rest = args.strip_prefix(&["sandbox-exec".to_owned()]).unwrap_or(&args);
            spaces_os::sandbox::enter::main(rest)
        }
        None => {
            eprintln!("sandbox-exec: the program's arguments must be UTF-8");
            127
        }
    };
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(127))
}
