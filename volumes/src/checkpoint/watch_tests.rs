//! The watch between checkpoints (`watch.rs`): a folder nothing touched is checkpointed without
//! a walk, and every kind of change is still caught, as a walk would catch it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::tests::{exclude, tree, write};
use super::*;

fn watched(state: &Path) -> Checkpoints {
    let mut cp = Checkpoints::open(state, &exclude()).unwrap();
    cp.watch();
    assert!(cp.watch.is_some(), "this host gives no inotify instance");
    cp
}

#[test]
fn an_untouched_folder_is_checkpointed_without_a_walk_and_stores_nothing() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "src/a.rs", "a\n");
    write(w, "src/deep/b.rs", "b\n");
    write(w, "node_modules/dep/index.js", "x");
    let mut cp = watched(state.path());
    cp.take(w, 0).unwrap();
    let bytes = cp.disk_bytes();

    let r = cp.take(w, 1).unwrap();
    assert_eq!((r.files, r.stored_bytes, r.changes.len(), cp.walks), (2, 0, 0, 1), "{r:?}");
    assert_eq!(cp.disk_bytes(), bytes);
    assert_eq!(cp.load(1).unwrap().entries, cp.load(0).unwrap().entries);

    // Changes under an excluded directory do not count.
    write(w, "node_modules/dep/index.js", "changed");
    write(w, "node_modules/new/x.js", "new");
    let r = cp.take(w, 2).unwrap();
    assert_eq!((r.changes.len(), cp.walks), (0, 1), "{r:?}");

    // A real change is walked, listed, and the watch is armed again.
    write(w, "src/deep/b.rs", "b2\n");
    let r = cp.take(w, 3).unwrap();
    assert_eq!((r.changes.len(), cp.walks), (1, 2), "{r:?}");
    cp.take(w, 4).unwrap();
    assert_eq!(cp.walks, 2);
}

type Change = (&'static str, fn(&Path));

/// Each change a turn can make, after the folder's last checkpoint.
fn changes() -> Vec<Change> {
    vec![
        ("write a file", |w| write(w, "src/a.rs", "a changed\n")),
        ("overwrite in place, same size", |w| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(w.join("src/a.rs")).unwrap();
            f.write_all(b"A").unwrap();
        }),
        ("chmod", |w| std::fs::set_permissions(w.join("src/a.rs"), std::fs::Permissions::from_mode(0o755)).unwrap()),
        ("make a file", |w| write(w, "new.txt", "new\n")),
        ("remove a file", |w| std::fs::remove_file(w.join("new.txt")).unwrap()),
        ("rename a file", |w| std::fs::rename(w.join("src/a.rs"), w.join("src/a2.rs")).unwrap()),
        ("make a folder with a file", |w| write(w, "fresh/dir/f.txt", "f\n")),
        ("write in the folder the last turn made", |w| write(w, "fresh/dir/f.txt", "f2\n")),
        ("write deep down", |w| write(w, "src/deep/er/c.rs", "c\n")),
        ("make a symlink", |w| std::os::unix::fs::symlink("a2.rs", w.join("src/link")).unwrap()),
        ("truncate", |w| std::fs::OpenOptions::new().write(true).truncate(true).open(w.join("src/a2.rs")).map(drop).unwrap()),
        ("rename a folder", |w| std::fs::rename(w.join("fresh"), w.join("fresher")).unwrap()),
        ("write in the renamed folder", |w| write(w, "fresher/dir/f.txt", "f3\n")),
        ("move a folder out", |w| std::fs::rename(w.join("fresher"), w.parent().unwrap().join("gone-fresher")).unwrap()),
        ("remove a folder", |w| std::fs::remove_dir_all(w.join("src/deep/er")).unwrap()),
    ]
}

#[test]
fn every_kind_of_change_is_caught_as_a_walk_catches_it() {
    let (outer, a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = outer.path().join("folder");
    write(&w, "src/a.rs", "a\n");
    write(&w, "src/deep/b.rs", "b\n");
    let (mut fast, mut slow) = (watched(a.path()), Checkpoints::open(b.path(), &exclude()).unwrap());
    fast.take(&w, 0).unwrap();
    slow.take(&w, 0).unwrap();
    for (turn, (what, change)) in (1..).zip(changes()) {
        // Past the walk's racy window, so the walk trusts unchanged stat keys.
        std::thread::sleep(std::time::Duration::from_millis(60));
        change(&w);
        let walks = fast.walks;
        let (f, s) = (fast.take(&w, turn).unwrap(), slow.take(&w, turn).unwrap());
        assert_eq!(f.changes, s.changes, "{what}");
        assert!(!s.changes.is_empty(), "{what}: the walk saw no change");
        assert_eq!(fast.walks, walks + 1, "{what}: the watch missed it");
        assert_eq!(fast.load(turn).unwrap().entries.len(), slow.load(turn).unwrap().entries.len(), "{what}");
        // Exactly the folder's directories are watched: none moved out or removed stays.
        let dirs = 1 + tree(&w).values().filter(|(_, v)| v.as_slice() == b"<dir>").count();
        assert_eq!(fast.watch.as_ref().unwrap().watched_dirs(), dirs, "{what}");
    }
}

#[test]
fn two_watches_of_one_folder_each_see_a_change_and_one_dropped_leaves_the_other() {
    let (work, a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "sub/x.txt", "x\n");
    let (mut one, mut two) = (watched(a.path()), watched(b.path()));
    one.take(w, 0).unwrap();
    two.take(w, 0).unwrap();
    write(w, "sub/x.txt", "x1\n");
    assert_eq!(one.take(w, 1).unwrap().changes.len(), 1);
    drop(one);
    assert_eq!(two.take(w, 1).unwrap().changes.len(), 1, "the other watch's event was lost");
    write(w, "sub/x.txt", "x2\n");
    assert_eq!(two.take(w, 2).unwrap().changes.len(), 1, "dropping one watch removed the other's");
    assert_eq!(two.walks, 3);
}

#[test]
fn a_folder_swapped_under_its_path_is_walked() {
    let (outer, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = outer.path().join("p/folder");
    write(&w, "a.txt", "old\n");
    write(&outer.path().join("q/folder"), "a.txt", "new\n");
    let mut cp = watched(state.path());
    cp.take(&w, 0).unwrap();
    // A parent of the folder is swapped: the path names another folder, and no watched
    // directory saw anything happen.
    std::fs::rename(outer.path().join("p"), outer.path().join("p-old")).unwrap();
    std::fs::rename(outer.path().join("q"), outer.path().join("p")).unwrap();
    let r = cp.take(&w, 1).unwrap();
    assert_eq!((r.changes.len(), cp.walks), (1, 2), "{r:?}");
}

#[test]
fn a_live_sqlite_database_does_not_make_every_checkpoint_walk_but_a_commit_does() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    let conn = rusqlite::Connection::open(w.join("app.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn.execute_batch("CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('a');").unwrap();
    let mut cp = watched(state.path());
    cp.take(w, 0).unwrap();
    // The checkpoint's own copy of the database touched its `-shm`: that is not a change.
    let r = cp.take(w, 1).unwrap();
    assert_eq!((r.changes.len(), cp.walks), (0, 1), "{r:?}");
    // A commit writes the log: walked, and listed.
    conn.execute("INSERT INTO t VALUES ('b')", []).unwrap();
    let r = cp.take(w, 2).unwrap();
    assert_eq!((r.changes.len(), cp.walks), (1, 2), "{r:?}");
    // A file that only looks like an index (no database beside it) still counts.
    write(w, "notes-shm", "x");
    cp.take(w, 3).unwrap();
    write(w, "notes-shm", "y");
    let r = cp.take(w, 4).unwrap();
    assert_eq!((r.changes.len(), cp.walks), (1, 4), "{r:?}");
}

#[test]
fn a_rewind_makes_the_next_checkpoint_walk_and_it_matches_the_rewound_turn() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "f.txt", "one\n");
    let mut cp = watched(state.path());
    cp.take(w, 0).unwrap();
    let at0 = tree(w);
    write(w, "f.txt", "two\n");
    write(w, "g.txt", "new\n");
    cp.take(w, 1).unwrap();
    cp.restore(w, 0).unwrap();
    assert_eq!(tree(w), at0);
    let walks = cp.walks;
    let r = cp.take(w, 2).unwrap();
    assert_eq!((r.changes.len(), cp.walks), (0, walks + 1), "{r:?}");
    assert_eq!(cp.base_of(2).unwrap(), Some(0));
    // And the turn after that, untouched, is spared its walk again.
    cp.take(w, 3).unwrap();
    assert_eq!(cp.walks, walks + 1);
}
