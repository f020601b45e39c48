//! Helpers shared by the exec tests: specs with a clean environment and reads until a condition.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use tempfile::TempDir;

use crate::exec::{ExecLimits, ExecSpec, Processes};
use spaces_os::process::alive_with_marker;

/// Upper bound for anything a test waits for; reached only when something is broken.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Limits with short grace and drain so tests finish quickly.
pub fn limits() -> ExecLimits {
    ExecLimits { grace: Duration::from_millis(500), drain_after_exit: Duration::from_millis(300), ..ExecLimits::default() }
}

/// A pipe-mode spec in `dir`, own owner and tag.
pub fn spec(dir: &TempDir, argv: &[&str]) -> ExecSpec {
    let env = BTreeMap::from([
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("TERM".to_owned(), "xterm".to_owned()),
    ]);
    let unique = uuid::Uuid::new_v4();
    ExecSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: dir.path().to_path_buf(),
        env,
        tty: false,
        tty_size: None,
        owner: format!("ws-{unique}"),
        workspace_id: format!("ws-{unique}"),
        timeout: None,
        tag: format!("test/{unique}"),
        sandbox: None,
    }
}

/// The same with a PTY.
pub fn tty_spec(dir: &TempDir, argv: &[&str]) -> ExecSpec {
    ExecSpec { tty: true, ..spec(dir, argv) }
}

/// Pids of live processes carrying `tag`.
pub fn tagged(tag: &str) -> Vec<i32> {
    alive_with_marker(&spaces_os::process::tag_marker(tag))
}

/// Pids of live processes carrying `tag`, looked up until there are `n` (for at most 2 s): while
/// `exec` swaps a program, or a fork is about to exec, its environment reads empty for a moment.
pub async fn tagged_n(tag: &str, n: usize) -> Vec<i32> {
    let mut pids = tagged(tag);
    for _ in 0..100 {
        if pids.len() == n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        pids = tagged(tag);
    }
    pids
}

/// Read from cursor 0 until `done(output so far)` or EOF; returns the output and whether EOF
/// was reached.
pub async fn read_until(p: &Processes, id: &str, done: impl Fn(&str) -> bool) -> (String, bool) {
    let work = async {
        let mut out = String::new();
        let mut cursor = 0;
        loop {
            let r = p.read(id, Some(cursor), Some(Duration::from_secs(5))).await.unwrap();
            out.push_str(&r.chunk);
            cursor = r.cursor;
            if r.eof || done(&out) {
                return (out, r.eof);
            }
        }
    };
    tokio::time::timeout(PATIENCE, work).await.expect("output condition not reached in time")
}

/// Everything until EOF.
pub async fn read_all(p: &Processes, id: &str) -> String {
    read_until(p, id, |_| false).await.0
}
