//! `find`: globs, sorting, pagination, listing versions, what is skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};

use nix::sys::stat::Mode;
use spaces_sdk::ErrorCode;

use super::{put, workspace};

fn tree() -> (tempfile::TempDir, crate::fs::Root) {
    let (dir, root) = workspace();
    for rel in [
        "b.txt",
        "a.rs",
        "src/c.rs",
        "src/deep/d.rs",
        "src/deep/e.md",
    ] {
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
    assert_eq!(
        all.paths,
        [
            "a.rs",
            "b.txt",
            "src/c.rs",
            "src/deep/d.rs",
            "src/deep/e.md"
        ]
    );
    assert!(!all.truncated && !all.incomplete && all.next_offset.is_none());
}

#[test]
fn globs_keep_separators_literal() {
    let (_dir, root) = tree();
    assert_eq!(root.find(Some("*.rs"), None, None).unwrap().paths, ["a.rs"]);
    assert_eq!(
        root.find(Some("**/*.rs"), None, None).unwrap().paths,
        ["a.rs", "src/c.rs", "src/deep/d.rs"]
    );
    assert_eq!(
        root.find(Some("src/*"), None, None).unwrap().paths,
        ["src/c.rs"]
    );
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
    assert_eq!(
        (last.paths.len(), last.truncated, last.next_offset),
        (1, false, None)
    );
    assert_eq!(first.listing_version, last.listing_version);
    let past = root.find(None, Some(99), None).unwrap();
    assert!(past.paths.is_empty() && !past.truncated);

    let rs = root.find(Some("**/*.rs"), None, None).unwrap();
    assert_ne!(rs.listing_version, first.listing_version);
    put(dir.path(), "z.txt", b"");
    assert_ne!(
        root.find(None, None, Some(2)).unwrap().listing_version,
        first.listing_version
    );
    assert_eq!(
        root.find(None, None, Some(0)).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
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

    if nix::unistd::geteuid().is_root() {
        eprintln!("running as root: permissions do not stop reads, skipping the unreadable case");
        return;
    }
    let locked = dir.path().join("src/deep");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let got = root.find(None, None, None);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    let got = got.unwrap();
    assert!(got.incomplete);
    assert_eq!(got.paths, ["a.rs", "b.txt", "src/c.rs"]);
}
