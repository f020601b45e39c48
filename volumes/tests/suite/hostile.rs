//! Hostile archives of every escaping kind, through import and through restore: each is refused
//! with `Unsafe` naming the entry, nothing lands outside the home, the target is untouched.

use std::path::Path;

use serde_json::{json, Value};
use spaces_volumes::{NoProgress, VolumeError};
use tar::EntryType;

use super::support::*;

/// A hostile entry: (entry name reported, tar bytes before the end blocks).
fn hostile(kind: &str, outside: &Path) -> (String, Vec<u8>) {
    let mut t = Vec::new();
    raw_entry(&mut t, "ok.txt", EntryType::Regular, None, b"fine");
    let out = outside.to_str().unwrap();
    let name = match kind {
        "dotdot" => {
            raw_entry(&mut t, "../evil.txt", EntryType::Regular, None, b"evil");
            "../evil.txt".to_string()
        }
        "dotdot_inner" => {
            raw_entry(&mut t, "a/../../evil.txt", EntryType::Regular, None, b"evil");
            "a/../../evil.txt".to_string()
        }
        "absolute" => {
            let p = format!("{out}/abs-evil.txt");
            raw_entry(&mut t, &p, EntryType::Regular, None, b"evil");
            p
        }
        "symlink_out" => {
            raw_entry(&mut t, "link", EntryType::Symlink, Some(out), b"");
            "link".to_string()
        }
        "symlink_dotdot" => {
            raw_entry(&mut t, "sub/link", EntryType::Symlink, Some("../../.."), b"");
            "sub/link".to_string()
        }
        "hardlink_out" => {
            raw_entry(&mut t, "hard", EntryType::Link, Some(&format!("{out}/victim.txt")), b"");
            "hard".to_string()
        }
        "through_symlink" => {
            raw_entry(&mut t, "dir", EntryType::Directory, None, b"");
            raw_entry(&mut t, "inner", EntryType::Symlink, Some("dir"), b"");
            raw_entry(&mut t, "inner/evil.txt", EntryType::Regular, None, b"evil");
            "inner/evil.txt".to_string()
        }
        "device" => {
            raw_entry(&mut t, "null", EntryType::Char, None, b"");
            "null".to_string()
        }
        "fifo" => {
            raw_entry(&mut t, "pipe", EntryType::Fifo, None, b"");
            "pipe".to_string()
        }
        other => panic!("{other}"),
    };
    raw_entry(&mut t, "after.txt", EntryType::Regular, None, b"after");
    (name, t)
}

const KINDS: &[&str] =
    &["dotdot", "dotdot_inner", "absolute", "symlink_out", "symlink_dotdot", "hardlink_out", "through_symlink", "device", "fifo"];

fn assert_refused(r: Result<impl std::fmt::Debug, VolumeError>, kind: &str, name: &str) {
    match r {
        Err(VolumeError::Unsafe { entry, why }) => assert_eq!(entry, name, "{kind}: {why}"),
        other => panic!("{kind}: expected Unsafe naming {name:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn hostile_archives_refused_by_import() {
    let tv = TestVolume::new(Backend::Local);
    let outside = tv.dir("outside");
    write(&outside.join("victim.txt"), b"victim");
    let lease = tv.lease("victim").await;
    for kind in KINDS {
        let (name, t) = hostile(kind, &outside);
        let file = tv.tmp.path().join(format!("{kind}.tar.zst"));
        std::fs::write(&file, finish_tar_zst(t)).unwrap();
        assert_refused(tv.volume.import(&lease, &file, Value::Null, &NoProgress).await, kind, &name);
        assert_eq!(names(&outside), ["victim.txt"], "{kind}: something landed outside");
        assert_eq!(std::fs::read(outside.join("victim.txt")).unwrap(), b"victim");
        assert!(!tv.tmp.path().join("evil.txt").exists());
        assert_eq!(names(&tv.tmp.path().join("cache-a/tmp")), Vec::<String>::new(), "{kind}: staging left");
    }
    assert!(matches!(tv.volume.snapshots("victim").await, Err(VolumeError::HomeNotFound { .. })));
}

#[tokio::test]
async fn hostile_archives_refused_by_restore() {
    let tv = TestVolume::new(Backend::Local);
    let store = tv.store_dir.clone().unwrap();
    let outside = tv.dir("outside");
    write(&outside.join("victim.txt"), b"victim");
    let parent = tv.dir("restore");
    let target = parent.join("home");
    write(&target.join("previous.txt"), b"previous");
    let before = tree(&target);
    let out = outside.to_str().unwrap().to_string();

    // Hostile layers: the manifest is benign, the layer is not.
    for (i, kind) in KINDS.iter().enumerate() {
        let (name, t) = hostile(kind, &outside);
        // A layer holds regular files only: its first directory entry is already refused.
        let name = if *kind == "through_symlink" { "dir".to_string() } else { name };
        let home = format!("layer-{i}");
        plant(&store, &home, 1, json!([file_entry("ok.txt", b"fine"), file_entry("after.txt", b"after")]), &finish_tar_zst(t));
        assert_refused(tv.volume.restore(&home, None, &target, &NoProgress).await, kind, &name);
        assert_eq!(tree(&target), before, "{kind}");
        assert_eq!(names(&parent), ["home"], "{kind}: staging left");
        assert_eq!(names(&outside), ["victim.txt"], "{kind}");
    }

    // Hostile manifests: every escaping kind a manifest can express.
    let mut benign = Vec::new();
    raw_entry(&mut benign, "ok.txt", EntryType::Regular, None, b"fine");
    let benign = finish_tar_zst(benign);
    let ok = file_entry("ok.txt", b"fine");
    let cases: Vec<(&str, Value)> = vec![
        ("../evil.txt", json!([ok, {"path": "../evil.txt", "kind": "dir", "mode": 0o755, "mtime_ns": 0}])),
        (out.as_str(), json!([ok, {"path": out, "kind": "dir", "mode": 0o755, "mtime_ns": 0}])),
        ("link", json!([ok, {"path": "link", "kind": "symlink", "mode": 0o777, "mtime_ns": 0, "target": out}])),
        (
            "d/link",
            json!([ok, {"path": "d", "kind": "dir", "mode": 0o755, "mtime_ns": 0},
                          {"path": "d/link", "kind": "symlink", "mode": 0o777, "mtime_ns": 0, "target": "../../x"}]),
        ),
        (
            "inner/ok.txt",
            json!([{"path": "inner", "kind": "symlink", "mode": 0o777, "mtime_ns": 0, "target": "."},
                                file_entry("inner/ok.txt", b"fine")]),
        ),
    ];
    for (i, (name, entries)) in cases.into_iter().enumerate() {
        let home = format!("manifest-{i}");
        plant(&store, &home, 1, entries, &benign);
        assert_refused(tv.volume.restore(&home, None, &target, &NoProgress).await, "manifest", name);
        assert_eq!(tree(&target), before);
        assert_eq!(names(&parent), ["home"]);
        assert_eq!(names(&outside), ["victim.txt"]);
    }
    // A device in a manifest is not a kind at all: the manifest is corrupt.
    plant(&store, "manifest-dev", 1, json!([ok, {"path": "null", "kind": "char_device", "mode": 0o666, "mtime_ns": 0}]), &benign);
    let r = tv.volume.restore("manifest-dev", None, &target, &NoProgress).await;
    assert!(matches!(r, Err(VolumeError::Corrupt { .. })), "{r:?}");
    // A file whose contents do not match its hash is corrupt, and refused before the swap.
    plant(&store, "manifest-hash", 1, json!([file_entry("ok.txt", b"other")]), &benign);
    let r = tv.volume.restore("manifest-hash", None, &target, &NoProgress).await;
    assert!(matches!(r, Err(VolumeError::Corrupt { .. })), "{r:?}");
    assert_eq!(tree(&target), before);
    // The benign planted snapshot does restore: the planting itself is sound.
    plant(&store, "benign", 1, json!([ok]), &benign);
    tv.volume.restore("benign", None, &target, &NoProgress).await.unwrap();
    assert_eq!(std::fs::read(target.join("ok.txt")).unwrap(), b"fine");
}
