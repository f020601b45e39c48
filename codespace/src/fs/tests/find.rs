//! `find`: globs, sorting, pagination, listing versions, what is skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};

use nix::sys::stat::Mode;
use spaces_sdk::ErrorCode;

use super::{put, workspace};

fn tree() -> (tempfile::TempDir, crate::fs::Root) {
    let (dir, root) = workspace();
    for rel in ["b.txt", "a.rs", "src/c.rs", "src/deep/d.rs", "src/deep/e.md"] {
        put(dir.path(), rel, rel.as_bytes());
    }
    symlink("a.rs", dir.path().join("link.rs")).unwrap();
    symlink("src", dir.path().join("dirlink")).unwrap();
    symlink("/", dir.path().join("slash")).unwrap();
    nix::unistd::mkfifo(&dir.path().join("pipe.rs"), Mode::from_bits_truncate(0o644)).unwrap();
    (dir, root)
}

#[test]
fn lists_regular_files_sorted_skipping_links_and_specials() {
    let (_dir, root) = tree();
    let all = root.find(None, None, None).unwrap();
    assert_eq!(all.paths, ["a.rs", "b.txt", "src/c.rs", "src/deep/d.rs", "src/deep/e.md"]);
    assert!(!all.truncated && !all.incomplete && all.next_offset.is_none());
}

#[test]
fn globs_keep_separators_literal() {
    let (_dir, root) = tree();
    assert_eq!(root.find(Some("*.rs"), None, None).unwrap().paths, ["a.rs"]);
    assert_eq!(root.find(Some("**/*.rs"), None, None).unwrap().paths, ["a.rs", "src/c.rs", "src/deep/d.rs"]);
    assert_eq!(root.find(Some("src/*"), None, None).unwrap().paths, ["src/c.rs"]);
    let err = root.find(Some("a[b"), None, None).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
}

#[test]
fn pages_share_one_listing_version() {
    let (dir, root) = tree();
    let first = root.find(None, None, Some(2)).unwrap();
    assert_eq!(first.paths, ["a.rs", "b.txt"]);
    assert_eq!((first.truncated, first.next_offset), (true, Some(2)));
    let second = root.find(None, first.next_offset, Some(2)).unwrap();
    assert_eq!(second.paths, ["src/c.rs", "src/deep/d.rs"]);
    let last = root.find(None, second.next_offset, Some(2)).unwrap();
    assert_eq!((last.paths.len(), last.truncated, last.next_offset), (1, false, None));
    assert_eq!(first.listing_version, last.listing_version);
    let past = root.find(None, Some(99), None).unwrap();
    assert!(past.paths.is_empty() && !past.truncated);

    let rs = root.find(Some("**/*.rs"), None, None).unwrap();
    assert_ne!(rs.listing_version, first.listing_version);
    put(dir.path(), "z.txt", b"");
    assert_ne!(root.find(None, None, Some(2)).unwrap().listing_version, first.listing_version);
    assert_eq!(root.find(None, None, Some(0)).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn walk_bound_and_unreadable_directories_mark_incomplete() {
    let (dir, root) = tree();
    let bounded = root.find_bounded(None, None, None, 3).unwrap();
    assert!(bounded.incomplete);
    assert!(bounded.paths.len() < 5);

    // A name that is not UTF-8 cannot be returned as a path: skipped, and said so.
    let odd = std::ffi::OsStr::from_bytes(b"bad\xff.txt");
    std::fs::write(dir.path().join(odd), b"").unwrap();
    let got = root.find(None, None, None).unwrap();
    assert!(got.incomplete);
    assert_eq!(got.paths.len(), 5);
    std::fs::remove_file(dir.path().join(odd)).unwrap();
    assert!(!root.find(None, None, None).unwrap().incomplete);

    // Permissions do not stop root: as root (CI), the walk runs as `nobody` in a child.
    for rel in ["", "src", "src/deep"] {
        std::fs::set_permissions(dir.path().join(rel), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let locked = dir.path().join("src/deep");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let got = unprivileged(|| {
        let got = root.find(None, None, None).unwrap();
        format!("{} {:?}", got.incomplete, got.paths)
    });
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(got, r#"true ["a.rs", "b.txt", "src/c.rs"]"#);
}

/// The uid `unprivileged` drops to as root: `nobody`.
const NOBODY: u32 = 65534;

/// Runs `check` without root's rights and returns its answer: in this process when it is not
/// root; as root, in a forked child that first drops to [`NOBODY`] (groups, gid, uid) and hands
/// the answer back over a pipe, so no other test of this process loses its rights. Panics if the
/// child did not end cleanly or kept root's uid.
fn unprivileged(check: impl FnOnce() -> String) -> String {
    use nix::unistd::{fork, getuid, pipe2, setgid, setgroups, setuid, ForkResult, Gid, Uid};
    if !nix::unistd::geteuid().is_root() {
        return check();
    }
    let (rx, tx) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    // SAFETY: the child only drops its ids, runs `check`, writes to the pipe and `_exit`s; it
    // never returns into the test harness.
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            drop(rx);
            let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                setgroups(&[]).unwrap();
                setgid(Gid::from_raw(NOBODY)).unwrap();
                setuid(Uid::from_raw(NOBODY)).unwrap();
                format!("uid {} {}", getuid(), check())
            }));
            let (text, code) = match answer {
                Ok(text) => (text, 0),
                Err(_) => ("the check panicked".to_owned(), 101),
            };
            let mut bytes = text.as_bytes();
            while let Ok(n @ 1..) = nix::unistd::write(&tx, bytes) {
                bytes = &bytes[n..];
            }
            // SAFETY: ends the forked child without running the parent's exit handlers.
            unsafe { nix::libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop(tx);
            let mut out = String::new();
            std::io::Read::read_to_string(&mut std::fs::File::from(rx), &mut out).unwrap();
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0), "{out}");
            out.strip_prefix(&format!("uid {NOBODY} ")).unwrap_or_else(|| panic!("the child did not run as {NOBODY}: {out}")).to_owned()
        }
    }
}
