#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;

pub(super) fn exclude() -> Vec<String> {
    DEFAULT_EXCLUDE.iter().map(|s| (*s).to_owned()).collect()
}

/// Every entry under `dir` (`.git` and `node_modules` included): path -> (mode, contents or
/// link target), to compare folders byte for byte.
pub(super) fn tree(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let md = p.symlink_metadata().unwrap();
            let mode = md.permissions().mode() & 0o7777;
            if md.file_type().is_symlink() {
                out.insert(rel, (0, std::fs::read_link(&p).unwrap().to_string_lossy().into_owned().into_bytes()));
            } else if md.is_dir() {
                out.insert(rel, (mode, b"<dir>".to_vec()));
                stack.push(p);
            } else {
                out.insert(rel, (mode, std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

pub(super) fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn a_turn_s_changes_are_listed_with_line_counts_and_an_unchanged_folder_stores_nothing() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    write(w, "old.txt", "a\nb\n");
    write(w, "node_modules/dep/index.js", "x");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    let first = cp.take(w, 0).unwrap();
    assert_eq!((first.files, first.changes.len()), (2, 0), "{first:?}");

    write(w, "src/main.rs", "fn main() {\n    println!(\"hello\");\n    println!(\"again\");\n}\n");
    std::fs::remove_file(w.join("old.txt")).unwrap();
    write(w, "new.txt", "one\n");
    std::fs::write(w.join("blob.bin"), [0u8, 1, 2, 3]).unwrap();
    write(w, "node_modules/dep/index.js", "changed, but excluded");
    let r = cp.take(w, 1).unwrap();
    let got: Vec<(&str, ChangeKind, u64, u64, bool)> =
        r.changes.iter().map(|c| (c.path.as_str(), c.change, c.added_lines, c.removed_lines, c.binary)).collect();
    assert_eq!(
        got,
        [
            ("blob.bin", ChangeKind::Added, 0, 0, true),
            ("new.txt", ChangeKind::Added, 1, 0, false),
            ("old.txt", ChangeKind::Removed, 0, 2, false),
            ("src/main.rs", ChangeKind::Changed, 2, 1, false),
        ]
    );
    assert!(r.stored_bytes > 0);

    let before = cp.disk_bytes();
    let same = cp.take(w, 2).unwrap();
    assert_eq!((same.stored_bytes, same.changes.len()), (0, 0), "{same:?}");
    assert_eq!(cp.disk_bytes(), before, "an unchanged folder's checkpoint writes no byte");
    assert_eq!(cp.turns().unwrap(), [0, 1, 2]);

    let (changes, text) = cp.diff(0, 1).unwrap();
    assert_eq!(changes, r.changes);
    assert!(text.contains("diff --git a/src/main.rs b/src/main.rs\n--- a/src/main.rs\n+++ b/src/main.rs\n"), "{text}");
    assert!(text.contains("-    println!(\"hi\");\n+    println!(\"hello\");\n+    println!(\"again\");\n"), "{text}");
    assert!(text.contains("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+one\n"), "{text}");
    assert!(text.contains("Binary files /dev/null and b/blob.bin differ\n"), "{text}");
    assert!(!text.contains("node_modules"), "{text}");
}

#[test]
fn a_restore_gives_the_folder_back_byte_for_byte_and_leaves_excluded_paths_alone() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "a/b/c.txt", "c\n");
    write(w, "run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(w.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a/b/c.txt", w.join("link")).unwrap();
    write(w, "node_modules/keep.js", "1");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(w, 0).unwrap();
    let at_zero = tree(w);

    // A turn edits, chmods, removes, replaces a directory by a file and a link, adds files.
    write(w, "a/b/c.txt", "changed\n");
    std::fs::set_permissions(w.join("run.sh"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(w.join("link")).unwrap();
    std::fs::write(w.join("link"), "now a file").unwrap();
    write(w, "later/deep/new.txt", "new\n");
    write(w, "node_modules/added.js", "2");
    cp.take(w, 1).unwrap();

    let r = cp.restore(w, 0).unwrap();
    assert!(r.written >= 3 && r.removed >= 3, "{r:?}");
    let mut back = tree(w);
    assert_eq!(back.remove("node_modules/added.js"), Some((0o644 & !umask(), b"2".to_vec())), "excluded paths are left alone");
    assert_eq!(back, at_zero);
    // The next checkpoint sees the restored folder as turn 0's.
    let next = cp.take(w, 2).unwrap();
    assert_eq!(next.changes, Vec::new());
    assert_eq!((cp.base_of(2).unwrap(), cp.base_of(1).unwrap()), (Some(0), None), "turn 2 started from the checkpoint rewound to");
    let (to_one, _) = cp.diff(2, 1).unwrap();
    assert!(to_one.iter().any(|c| c.path == "later/deep/new.txt"), "{to_one:?}");
}

/// Found by a new user's trial: a rewind past a turn that made a symlink failed on it
/// (`ENOTDIR`: it was removed as a directory) after removing other entries, leaving the folder
/// half restored. Links to a file, to a directory, dangling, and one replacing a directory
/// are all taken away, and the folder is the checkpoint's again.
#[test]
fn a_rewind_removes_the_symlinks_made_after_its_checkpoint() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "a.txt", "a\n");
    write(w, "d/inside.txt", "i\n");
    write(w, "was_dir/x.txt", "x\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(w, 0).unwrap();
    let at_zero = tree(w);

    std::os::unix::fs::symlink("a.txt", w.join("link")).unwrap();
    std::os::unix::fs::symlink("d", w.join("dirlink")).unwrap();
    std::os::unix::fs::symlink("nowhere", w.join("d/dangling")).unwrap();
    std::fs::remove_dir_all(w.join("was_dir")).unwrap();
    std::os::unix::fs::symlink("d", w.join("was_dir")).unwrap();
    write(w, "a.txt", "changed\n");
    cp.take(w, 1).unwrap();

    let r = cp.restore(w, 0).unwrap();
    assert_eq!(r.removed, 4, "{r:?}");
    assert_eq!(tree(w), at_zero);
    assert_eq!(std::fs::read_to_string(w.join("d/inside.txt")).unwrap(), "i\n", "the linked directory itself stays");
}

/// `agent_diff`'s text is a patch `git apply` takes (found by a new user's trial: a symlink was
/// written `+-> target` and became a link to "-> target"): applied to a copy of the folder at
/// the first checkpoint it makes the folder at the second, links, type changes, files without
/// a last newline and modes included.
#[test]
fn a_diff_applies_with_git_apply_links_and_type_changes_included() {
    let (work, state, copy) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "keep.txt", "one\ntwo\nthree\n");
    write(w, "no_newline.txt", "last line");
    write(w, "file_then_link", "a file\n");
    std::os::unix::fs::symlink("keep.txt", w.join("link_then_file")).unwrap();
    std::os::unix::fs::symlink("keep.txt", w.join("retargeted")).unwrap();
    write(w, "gone.txt", "bye\n");
    write(w, "run.sh", "echo\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(w, 0).unwrap();
    let g = copy.path().join("g");
    let copied = std::process::Command::new("cp").arg("-a").arg(w).arg(&g).status().unwrap();
    assert!(copied.success());

    write(w, "keep.txt", "one\n2\nthree\n");
    write(w, "no_newline.txt", "last line, longer");
    std::fs::remove_file(w.join("file_then_link")).unwrap();
    std::os::unix::fs::symlink("keep.txt", w.join("file_then_link")).unwrap();
    std::fs::remove_file(w.join("link_then_file")).unwrap();
    write(w, "link_then_file", "now a file\n");
    std::fs::remove_file(w.join("retargeted")).unwrap();
    std::os::unix::fs::symlink("no_newline.txt", w.join("retargeted")).unwrap();
    std::os::unix::fs::symlink("new/added.txt", w.join("new_link")).unwrap();
    write(w, "new/added.txt", "added\n");
    std::fs::remove_file(w.join("gone.txt")).unwrap();
    std::fs::set_permissions(w.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    cp.take(w, 1).unwrap();

    let (changes, text) = cp.diff(0, 1).unwrap();
    assert_eq!(changes.len(), 9, "{changes:?}");
    let patch = copy.path().join("turn.patch");
    std::fs::write(&patch, &text).unwrap();
    let applied = std::process::Command::new("git").arg("apply").arg(&patch).current_dir(&g).output().unwrap();
    assert!(applied.status.success(), "git apply: {}\n{text}", String::from_utf8_lossy(&applied.stderr));
    let modes = |t: BTreeMap<String, (u32, Vec<u8>)>| t.into_iter().map(|(p, (m, b))| (p, (m & 0o111, b))).collect::<BTreeMap<_, _>>();
    assert_eq!(modes(tree(&g)), modes(tree(w)), "the patch:\n{text}");
}

fn umask() -> u32 {
    let m = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    nix::sys::stat::umask(m);
    m.bits()
}

/// Overwrites every content stored under the checkpoints in `state` (a torn write).
fn tear_every_object(state: &Path) {
    for fan in std::fs::read_dir(state.join("objects")).unwrap().flatten() {
        for obj in std::fs::read_dir(fan.path()).unwrap().flatten() {
            std::fs::write(obj.path(), "torn").unwrap();
        }
    }
}

#[test]
fn a_damaged_content_fails_the_restore_instead_of_writing_it() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "f.txt", "original\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(w, 0).unwrap();
    write(w, "f.txt", "edited\n");
    tear_every_object(state.path());
    let e = cp.restore(w, 0).unwrap_err();
    assert!(matches!(e, VolumeError::Corrupt { .. }), "{e:?}");
    assert_eq!(std::fs::read_to_string(w.join("f.txt")).unwrap(), "edited\n", "nothing torn was written");
    let e = cp.restore(w, 7).unwrap_err();
    assert!(matches!(e, VolumeError::SnapshotNotFound { .. }), "{e:?}");
}

#[test]
fn a_directory_swapped_for_a_symlink_is_never_written_through() {
    let (work, state, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "d/f.txt", "inside\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(w, 0).unwrap();
    std::fs::remove_dir_all(w.join("d")).unwrap();
    std::os::unix::fs::symlink(outside.path(), w.join("d")).unwrap();
    cp.restore(w, 0).unwrap();
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none(), "nothing was written outside");
    assert!(w.join("d").symlink_metadata().unwrap().is_dir());
    assert_eq!(std::fs::read_to_string(w.join("d/f.txt")).unwrap(), "inside\n");
}

#[test]
fn pruning_keeps_the_newest_checkpoints_and_the_contents_they_need() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    for turn in 0..5 {
        write(w, "f.txt", &format!("version {turn}\n"));
        cp.take(w, turn).unwrap();
    }
    cp.prune(2).unwrap();
    assert_eq!(cp.turns().unwrap(), [3, 4]);
    cp.restore(w, 3).unwrap();
    assert_eq!(std::fs::read_to_string(w.join("f.txt")).unwrap(), "version 3\n");
    let objects = std::fs::read_dir(state.path().join("objects"))
        .unwrap()
        .flatten()
        .map(|f| std::fs::read_dir(f.path()).unwrap().count())
        .sum::<usize>();
    assert_eq!(objects, 2);
}

#[test]
fn a_merge_takes_the_fork_s_changes_and_a_conflict_writes_nothing() {
    let (parent, fork, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (p, f) = (parent.path(), fork.path());
    write(p, "shared.txt", "one\ntwo\nthree\nfour\nfive\n");
    write(p, "parent-only.txt", "p\n");
    write(p, "gone.txt", "bye\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(p, 0).unwrap();
    cp.restore(f, 0).unwrap();
    // The parent edits line 1 and its own file; the fork edits line 5, adds and removes files.
    write(p, "shared.txt", "ONE\ntwo\nthree\nfour\nfive\n");
    write(p, "parent-only.txt", "p2\n");
    write(f, "shared.txt", "one\ntwo\nthree\nfour\nFIVE\n");
    write(f, "new/deep.txt", "from the fork\n");
    std::fs::remove_file(f.join("gone.txt")).unwrap();
    let r = cp.merge(0, f, p).unwrap();
    assert_eq!(r.conflicts, Vec::new());
    assert_eq!(r.applied, ["gone.txt", "new/deep.txt", "shared.txt"]);
    assert_eq!(std::fs::read_to_string(p.join("shared.txt")).unwrap(), "ONE\ntwo\nthree\nfour\nFIVE\n");
    assert_eq!(std::fs::read_to_string(p.join("new/deep.txt")).unwrap(), "from the fork\n");
    assert_eq!(std::fs::read_to_string(p.join("parent-only.txt")).unwrap(), "p2\n");
    assert!(!p.join("gone.txt").exists());

    // Both change the same line: reported, and the parent's folder is left as it was.
    write(p, "shared.txt", "ONE\ntwo\nTHREE-PARENT\nfour\nFIVE\n");
    write(f, "shared.txt", "one\ntwo\nTHREE-FORK\nfour\nFIVE\n");
    write(f, "another.txt", "would be added\n");
    let before = tree(p);
    let r = cp.merge(0, f, p).unwrap();
    assert_eq!(r.applied, Vec::<String>::new());
    assert_eq!(
        r.conflicts.iter().map(|c| (c.path.as_str(), c.why.as_str())).collect::<Vec<_>>(),
        [("shared.txt", "both changed the same lines")]
    );
    assert_eq!(tree(p), before, "nothing of the merge was written");
}

#[test]
fn a_file_holding_a_secret_value_is_never_stored_and_a_rewind_leaves_it() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, ".env", "API_KEY=sk-very-secret-0123456789\n");
    write(w, "plain.txt", "nothing to hide\n");
    std::os::unix::fs::symlink("sk-very-secret-0123456789", w.join("odd-link")).unwrap();
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.refuse(&[crate::types::SecretValue { name: "API_KEY".into(), value: b"sk-very-secret-0123456789".to_vec() }]);
    cp.take(w, 0).unwrap();
    write(w, ".env", "API_KEY=sk-very-secret-0123456789\nMORE=1\n");
    write(w, "plain.txt", "changed\n");
    let r = cp.take(w, 1).unwrap();
    let env = r.changes.iter().find(|c| c.path == ".env").unwrap();
    assert!(env.binary && env.change == ChangeKind::Changed, "{env:?}");
    let needle = b"sk-very-secret-0123456789";
    let mut stack = vec![state.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                let bytes = std::fs::read(e.path()).unwrap();
                assert!(!bytes.windows(needle.len()).any(|x| x == needle), "{} holds the secret", e.path().display());
            }
        }
    }
    let back = cp.restore(w, 0).unwrap();
    assert_eq!(std::fs::read_to_string(w.join("plain.txt")).unwrap(), "nothing to hide\n");
    assert_eq!(std::fs::read_to_string(w.join(".env")).unwrap(), "API_KEY=sk-very-secret-0123456789\nMORE=1\n", "left as it is");
    assert_eq!(back.unrestored, [".env"], "and named as not restored (found by a new user's trial: a skipped file went unsaid)");
}

#[test]
fn an_unchanged_secret_file_stays_unstored_across_turns_and_a_rewind_keeps_it() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, ".env", "TOKEN=sk-very-secret-0123456789\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.refuse(&[crate::types::SecretValue { name: "TOKEN".into(), value: b"sk-very-secret-0123456789".to_vec() }]);
    cp.take(w, 0).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(120));
    write(w, "other.txt", "x\n");
    let r = cp.take(w, 1).unwrap();
    assert_eq!(r.changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(), ["other.txt"], "the untouched .env did not change");
    assert_eq!(cp.restore(w, 1).unwrap().unrestored, Vec::<String>::new(), "an untouched unstored file is not named");
    write(w, ".env", "TOKEN=sk-very-secret-0123456789\nEDITED=1\n");
    cp.restore(w, 1).unwrap();
    assert_eq!(std::fs::read_to_string(w.join(".env")).unwrap(), "TOKEN=sk-very-secret-0123456789\nEDITED=1\n", "never emptied");
    let (c, _) = cp.diff(0, 1).unwrap();
    assert!(!c.iter().any(|c| c.path == ".env"), "{c:?}");
}

#[test]
fn a_damaged_content_stops_a_restore_before_any_file_is_removed() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    write(w, "kept.txt", "v0\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(w, 0).unwrap();
    write(w, "kept.txt", "v1\n");
    write(w, "later.txt", "made later\n");
    tear_every_object(state.path());
    assert!(matches!(cp.restore(w, 0).unwrap_err(), VolumeError::Corrupt { .. }));
    assert!(w.join("later.txt").exists(), "nothing was removed before the damage was found");
    assert_eq!(std::fs::read_to_string(w.join("kept.txt")).unwrap(), "v1\n");
}

#[test]
fn a_merge_over_a_folder_or_under_a_file_of_the_parent_is_a_conflict_and_writes_nothing() {
    let (parent, fork, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (p, f) = (parent.path(), fork.path());
    write(p, "a.txt", "a\n");
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(p, 0).unwrap();
    cp.copy_to(f, 0).unwrap();
    write(p, "x/inner.txt", "the parent's folder\n");
    write(f, "x", "the fork's file\n");
    write(p, "y", "the parent's file\n");
    write(f, "y/inner.txt", "the fork's folder\n");
    write(f, "z.txt", "fine on its own\n");
    let before = tree(p);
    let r = cp.merge(0, f, p).unwrap();
    let paths: Vec<&str> = r.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["x", "y/inner.txt"], "{r:?}");
    assert_eq!(tree(p), before, "nothing written");
}

#[test]
fn a_sqlite_database_with_a_live_log_is_checkpointed_whole_and_a_rewind_drops_the_newer_log() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let w = work.path();
    let rows = |db: &Path| {
        let conn = rusqlite::Connection::open(db).unwrap();
        let mut q = conn.prepare("SELECT v FROM t ORDER BY rowid").unwrap();
        q.query_map([], |r| r.get::<_, String>(0)).unwrap().collect::<std::result::Result<Vec<_>, _>>().unwrap()
    };
    // A program keeps the database open in WAL mode and never checkpoints it: its rows live in
    // `app.db-wal`, not in `app.db`.
    let conn = rusqlite::Connection::open(w.join("app.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn.execute_batch("CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('turn-0');").unwrap();
    // An operator's pattern naming the log changes nothing: it is part of the database.
    let mut patterns = exclude();
    patterns.push("**/*-wal".to_owned());
    let mut cp = Checkpoints::open(state.path(), &patterns).unwrap();
    cp.take(w, 0).unwrap();
    conn.execute("INSERT INTO t VALUES ('turn-1')", []).unwrap();
    let r = cp.take(w, 1).unwrap();
    let paths: Vec<&str> = r.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["app.db"], "the log is part of the database, never a file of its own");
    assert!(w.join("app.db-wal").exists());

    // Back to turn 0 while the log of turn 1 is still beside the database.
    cp.restore(w, 0).unwrap();
    // (The program is gone without closing: closing would write its log into the old file.)
    std::mem::forget(conn);
    assert!(!w.join("app.db-wal").exists() && !w.join("app.db-shm").exists());
    assert_eq!(rows(&w.join("app.db")), ["turn-0"]);
    // And forward again to turn 1: both rows.
    cp.restore(w, 1).unwrap();
    assert_eq!(rows(&w.join("app.db")), ["turn-0", "turn-1"]);
}

#[test]
fn a_merge_brings_a_fork_s_live_sqlite_database_whole_and_drops_the_parent_s_old_log() {
    let (parent, fork, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (p, f) = (parent.path(), fork.path());
    let open_wal = |dir: &Path| {
        let conn = rusqlite::Connection::open(dir.join("app.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        conn
    };
    let ours = open_wal(p);
    ours.execute_batch("CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('base');").unwrap();
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    cp.take(p, 0).unwrap();
    cp.copy_to(f, 0).unwrap();
    let theirs = open_wal(f);
    theirs.execute("INSERT INTO t VALUES ('fork')", []).unwrap();
    assert!(p.join("app.db-wal").exists() && f.join("app.db-wal").exists());

    let report = cp.merge(0, f, p).unwrap();
    assert_eq!((report.applied, report.conflicts), (vec!["app.db".to_owned()], vec![]));
    std::mem::forget((ours, theirs));
    assert!(!p.join("app.db-wal").exists(), "the parent's log of the old database is gone");
    let conn = rusqlite::Connection::open(p.join("app.db")).unwrap();
    let rows: Vec<String> =
        conn.prepare("SELECT v FROM t ORDER BY rowid").unwrap().query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(rows, ["base", "fork"]);
}

#[test]
fn a_live_database_held_locked_is_left_unstored_and_a_merge_of_it_is_a_conflict() {
    let (parent, fork, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (p, f) = (parent.path(), fork.path());
    let mut cp = Checkpoints::open(state.path(), &exclude()).unwrap();
    write(p, "a.txt", "a\n");
    cp.take(p, 0).unwrap();
    cp.copy_to(f, 0).unwrap();
    // A program holds the fork's database in WAL mode with an exclusive lock: SQLite itself
    // cannot read it from outside.
    let held = rusqlite::Connection::open(f.join("app.db")).unwrap();
    held.pragma_update(None, "journal_mode", "WAL").unwrap();
    held.pragma_update(None, "locking_mode", "EXCLUSIVE").unwrap();
    held.execute_batch("CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('x');").unwrap();
    assert!(f.join("app.db-wal").exists());

    let mut fork_cps = Checkpoints::open(&state.path().join("fork"), &exclude()).unwrap();
    let r = fork_cps.take(f, 0).unwrap();
    let item = fork_cps.load(0).unwrap().entries.into_iter().find(|e| e.path == "app.db").unwrap();
    assert!(item.uncopied && item.sha256.is_none(), "{item:?} {r:?}");

    let report = cp.merge(0, f, p).unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.conflicts.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(), ["app.db"], "{report:?}");
    assert!(report.conflicts[0].why.contains("live SQLite database"), "{report:?}");
    assert!(!p.join("app.db").exists());
    drop(held);
}
