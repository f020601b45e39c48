//! Confinement: the string gate, both open paths (openat2 and the no-follow walk), X33.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::symlink;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use spaces_sdk::ErrorCode;
use tempfile::TempDir;

use super::{put, snapshot, workspace};
use crate::fs::confine::{self, components, via_openat2, via_walk};
use crate::fs::CommitStatus;

type Opener = fn(BorrowedFd, &[&str], OFlag) -> Result<OwnedFd, Errno>;

#[test]
fn string_gate_refuses_escapes_and_drops_dot_components() {
    for bad in ["", "/etc/passwd", "a/../b", "..", "a\0b", "x/.."] {
        assert_eq!(components(bad).unwrap_err().code(), ErrorCode::PathEscape, "{bad:?}");
    }
    assert_eq!(components("a/./b//c").unwrap(), vec!["a", "b", "c"]);
    assert!(components(".").unwrap().is_empty());
}

/// The same expectations for both ways of opening.
fn check_opener(open: Opener) {
    let (dir, root) = workspace();
    put(dir.path(), "src/lib.rs", b"x");
    put(dir.path(), "file.txt", b"y");
    symlink("src", dir.path().join("inner_link")).unwrap();
    symlink("file.txt", dir.path().join("leaf_link")).unwrap();
    let rd = OFlag::O_RDONLY;
    let fd = root.fd();
    // What was opened is that very file (and the root itself), by device and inode.
    let id = |st: nix::sys::stat::FileStat| (st.st_dev, st.st_ino);
    let opened = open(fd, &["src", "lib.rs"], rd).unwrap();
    assert_eq!(id(nix::sys::stat::fstat(&opened).unwrap()), id(nix::sys::stat::stat(&dir.path().join("src/lib.rs")).unwrap()));
    let opened = open(fd, &[], OFlag::O_RDONLY | OFlag::O_DIRECTORY).unwrap();
    assert_eq!(id(nix::sys::stat::fstat(&opened).unwrap()), id(nix::sys::stat::stat(dir.path()).unwrap()));
    // A symlink is refused even when it points inside the workspace.
    assert_eq!(open(fd, &["inner_link", "lib.rs"], rd).unwrap_err(), Errno::ELOOP);
    assert_eq!(open(fd, &["leaf_link"], rd).unwrap_err(), Errno::ELOOP);
    assert_eq!(open(fd, &["inner_link"], OFlag::O_PATH | OFlag::O_DIRECTORY).unwrap_err(), Errno::ELOOP);
    assert_eq!(open(fd, &["missing", "x"], rd).unwrap_err(), Errno::ENOENT);
    assert_eq!(open(fd, &["file.txt", "x"], rd).unwrap_err(), Errno::ENOTDIR);
    assert_eq!(open(fd, &["src"], OFlag::O_RDONLY | OFlag::O_DIRECTORY).map(|_| ()), Ok(()));
}

#[test]
fn openat2_refuses_symlinks_anywhere_on_the_path() {
    let (_dir, root) = workspace();
    if let Err(e @ (Errno::ENOSYS | Errno::EPERM)) = via_openat2(root.fd(), &[], OFlag::O_PATH) {
        panic!(
            "openat2 is unavailable here ({e}): this test cannot check it; the fallback walk is \
             checked by fallback_walk_refuses_symlinks_anywhere_on_the_path"
        );
    }
    check_opener(via_openat2);
}

/// Whichever way this kernel opens (openat2, or the walk when it lacks it), the result is the same.
#[test]
fn the_opener_in_use_refuses_symlinks_anywhere_on_the_path() {
    check_opener(confine::open_beneath);
}

#[test]
fn fallback_walk_refuses_symlinks_anywhere_on_the_path() {
    check_opener(via_walk);
    // An O_PATH open of a symlink leaf succeeds in the walk; the type check refuses it.
    let (dir, root) = workspace();
    symlink("/etc/hostname", dir.path().join("l")).unwrap();
    let fd = via_walk(root.fd(), &["l"], OFlag::O_PATH).unwrap();
    let st = nix::sys::stat::fstat(fd.as_fd()).unwrap();
    assert_eq!(confine::file_type(&st), nix::sys::stat::SFlag::S_IFLNK);
}

#[test]
fn fifo_is_refused_without_blocking() {
    let (dir, root) = workspace();
    nix::unistd::mkfifo(&dir.path().join("pipe"), Mode::from_bits_truncate(0o644)).unwrap();
    assert_eq!(root.read("pipe", None, None).unwrap_err().code(), ErrorCode::SpecialFileRejected);
    let err = root.plan_patch("*** Begin Patch\n*** Delete File: pipe\n*** End Patch", &BTreeMap::new()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::SpecialFileRejected);
    assert!(root.find(None, None, None).unwrap().paths.is_empty());
}

#[test]
fn case_x33_symlink_escapes_are_refused() {
    let (dir, root) = workspace();
    let outside = TempDir::new().unwrap();
    put(outside.path(), "secret.txt", b"outside\n");
    put(outside.path(), "sub/keep.txt", b"keep\n");
    symlink(outside.path(), dir.path().join("outbox")).unwrap();
    symlink(outside.path().join("sub"), dir.path().join("loop")).unwrap();
    put(dir.path(), "a.txt", b"a\n");
    let outside_before = snapshot(outside.path());
    let inside_before = snapshot(dir.path());

    let refused = [
        ("*** Add File: outbox/pwned.txt\n+pwned\n", ErrorCode::SymlinkRejected),
        ("*** Add File: loop/../pwned2.txt\n+pwned\n", ErrorCode::PathEscape),
        ("*** Update File: outbox\n@@\n-x\n+y\n", ErrorCode::SymlinkRejected),
        ("*** Add File: /etc/x\n+pwned\n", ErrorCode::PathEscape),
        ("*** Update File: a.txt\n*** Move to: outbox/a.txt\n@@\n-a\n+b\n", ErrorCode::SymlinkRejected),
        ("*** Delete File: loop/keep.txt\n", ErrorCode::SymlinkRejected),
    ];
    for (body, code) in refused {
        let text = format!("*** Begin Patch\n{body}*** End Patch\n");
        let err = root.plan_patch(&text, &BTreeMap::new()).unwrap_err();
        assert_eq!(err.code(), code, "{body}: {err}");
    }

    // A plan made elsewhere (an in-memory source) is refused again by the committer.
    let text = "*** Begin Patch\n*** Add File: outbox/pwned.txt\n+pwned\n*** End Patch\n";
    let plan = spaces_v4a::plan(text, &BTreeMap::new(), &BTreeMap::<String, Vec<u8>>::new()).unwrap();
    let report = root.commit(&plan);
    assert_eq!(report.status, CommitStatus::Rejected);
    assert_eq!(report.error.unwrap().code(), ErrorCode::SymlinkRejected);

    // read, find and check_dir refuse or skip the links too.
    assert_eq!(root.read("outbox/secret.txt", None, None).unwrap_err().code(), ErrorCode::SymlinkRejected);
    assert_eq!(root.read("loop", None, None).unwrap_err().code(), ErrorCode::SymlinkRejected);
    assert_eq!(root.read("loop/../a.txt", None, None).unwrap_err().code(), ErrorCode::PathEscape);
    assert_eq!(root.check_dir("outbox").unwrap_err().code(), ErrorCode::SymlinkRejected);
    assert_eq!(root.find(None, None, None).unwrap().paths, vec!["a.txt"]);

    assert_eq!(snapshot(outside.path()), outside_before);
    assert_eq!(snapshot(dir.path()), inside_before);
}

#[test]
fn check_dir_gives_confined_directories_only() {
    let (dir, root) = workspace();
    put(dir.path(), "src/deep/x.rs", b"");
    symlink("src", dir.path().join("alias")).unwrap();
    assert_eq!(root.check_dir("src/deep").unwrap(), root.path().join("src").join("deep"));
    assert_eq!(root.check_dir(".").unwrap(), root.path());
    assert_eq!(root.check_dir("src/deep/x.rs").unwrap_err().code(), ErrorCode::PathNotDirectory);
    assert_eq!(root.check_dir("alias").unwrap_err().code(), ErrorCode::SymlinkRejected);
    assert_eq!(root.check_dir("nope").unwrap_err().code(), ErrorCode::FileNotFound);
    assert_eq!(root.check_dir("../x").unwrap_err().code(), ErrorCode::PathEscape);
}

#[test]
fn root_must_be_an_existing_directory() {
    let (dir, _root) = workspace();
    put(dir.path(), "f", b"");
    assert_eq!(crate::fs::Root::open(&dir.path().join("f")).unwrap_err().code(), ErrorCode::PathNotDirectory);
    assert_eq!(crate::fs::Root::open(&dir.path().join("none")).unwrap_err().code(), ErrorCode::FileNotFound);
}
