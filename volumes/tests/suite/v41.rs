//! Case V41 (../shared/cases/CASES.md): entries that read as inside the home but are not, once
//! other symlinks are followed: `notes/todo.txt`, then `loop -> .`, then `notes ->
//! loop/loop/loop/loop/../../../../tmp/v41-out`, and its kin (link chains, `..` in targets,
//! hard links through a link, entries under a symlinked directory, absolute paths), in every
//! order. Restore, export and import refuse each one naming an entry of it; nothing is created
//! or changed outside the home (no file, no mode, no time), the target stays as it was, no
//! staging directory is left behind. Links that do stay inside still work, and a save lists the
//! ones that resolve outside as skipped, so what a save stores always restores.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use spaces_volumes::{NoProgress, SaveOptions, VolumeError};
use tar::EntryType;

use super::support::*;

/// One entry of a crafted snapshot or archive, in order.
#[derive(Clone, Debug)]
enum Ent {
    File(&'static str),
    Dir(&'static str),
    Link(&'static str, String),
    /// A hard link (archives only): path, target.
    Hard(&'static str, String),
}

use Ent::*;

fn link(p: &'static str, t: &str) -> Ent {
    Link(p, t.to_string())
}

/// `loop/` `n` times, `../` `n` times, then `rest`: reads as inside, resolves `n` levels above
/// the directory it is resolved in once `loop -> .` is followed.
fn up(n: usize, rest: &str) -> String {
    format!("{}{}{rest}", "loop/".repeat(n), "../".repeat(n))
}

/// The variants; `depth` is how many levels the staging directory lies below the test's temp
/// dir, where `outside/` is (so the links aim at a real directory holding a victim file).
fn variants(depth: usize, archive: bool) -> Vec<(String, Vec<Ent>)> {
    let out = up(depth, "outside");
    let mut v: Vec<(String, Vec<Ent>)> = vec![
        ("v41 as written".into(), vec![File("notes/todo.txt"), link("loop", "."), link("notes", &up(4, "tmp/v41-out"))]),
        ("v41 deeper than the root".into(), vec![File("notes/todo.txt"), link("loop", "."), link("notes", &up(11, "tmp/v41-out"))]),
        ("v41 aimed at outside/".into(), vec![File("notes/todo.txt"), link("loop", "."), link("notes", &out)]),
        ("links first".into(), vec![link("loop", "."), link("notes", &out), File("notes/todo.txt")]),
        ("escaping link before its loop".into(), vec![link("notes", &out), link("loop", "."), File("notes/todo.txt")]),
        ("victim file through the link".into(), vec![link("loop", "."), link("notes", &out), File("notes/victim.txt")]),
        (
            "a chain of links".into(),
            vec![link("l1", "."), link("l2", "l1/l1"), link("esc", &format!("l2/{}outside", "../".repeat(depth))), File("esc/evil.txt")],
        ),
        ("a link to a link that escapes".into(), vec![link("loop", "."), link("b", &out), link("a", "b"), File("a/evil.txt")]),
        (
            "a loop inside a directory".into(),
            vec![
                Dir("d"),
                link("d/self", "."),
                link("d/esc", &format!("self/self/{}outside", "../".repeat(depth + 1))),
                File("d/esc/evil.txt"),
            ],
        ),
        ("dotdot in the target".into(), vec![Dir("sub"), link("sub/up", "../../outside"), File("sub/up/evil.txt")]),
        ("absolute target".into(), vec![link("abs", "/tmp/v41-out"), File("abs/evil.txt")]),
        ("under a symlinked directory inside".into(), vec![Dir("real"), link("alias", "real"), File("alias/evil.txt")]),
        ("a link to itself".into(), vec![link("self", "self/x"), File("ok.txt")]),
        ("file before the directory link".into(), vec![File("real/f.txt"), link("real", ".")]),
    ];
    if archive {
        v.extend([
            ("hard link through loop".to_string(), vec![File("a.txt"), link("loop", "."), Hard("b.txt", "loop/a.txt".into())]),
            ("hard link through loop, deeper".to_string(), vec![File("d/f.txt"), link("loop", "."), Hard("h", "loop/loop/d/f.txt".into())]),
            (
                "hard link into an escaping link".to_string(),
                vec![File("a.txt"), link("loop", "."), link("notes", &out), Hard("notes/x", "a.txt".into())],
            ),
            (
                "hard link with dotdot".to_string(),
                vec![File("a.txt"), link("loop", "."), Hard("h", format!("loop/{}outside/victim.txt", "../".repeat(depth)))],
            ),
            ("hard link to an absolute path".to_string(), vec![Hard("h", "/tmp/v41-out/victim".into())]),
            ("absolute entry".to_string(), vec![File("/tmp/v41-out/abs.txt")]),
        ]);
    }
    v
}

fn data_of(path: &str) -> Vec<u8> {
    format!("contents of {path}").into_bytes()
}

/// The entries as a raw tar (entries in this order, nothing normalised).
fn archive(entries: &[Ent]) -> Vec<u8> {
    let mut t = Vec::new();
    for e in entries {
        match e {
            File(p) => raw_entry(&mut t, p, EntryType::Regular, None, &data_of(p)),
            Dir(p) => raw_entry(&mut t, &format!("{p}/"), EntryType::Directory, None, b""),
            Link(p, target) => raw_entry(&mut t, p, EntryType::Symlink, Some(target), b""),
            Hard(p, target) => raw_entry(&mut t, p, EntryType::Link, Some(target), b""),
        }
    }
    finish_tar_zst(t)
}

/// The entries as a snapshot manifest (in this order) and its one layer.
fn manifest(entries: &[Ent]) -> (Value, Vec<u8>) {
    let mut layer = Vec::new();
    let mut list = Vec::new();
    for e in entries {
        match e {
            File(p) => {
                raw_entry(&mut layer, p, EntryType::Regular, None, &data_of(p));
                list.push(file_entry(p, &data_of(p)));
            }
            Dir(p) => list.push(json!({"path": p, "kind": "dir", "mode": 0o755, "mtime_ns": 0})),
            Link(p, target) => list.push(json!({"path": p, "kind": "symlink", "mode": 0o777, "mtime_ns": 0, "target": target})),
            Hard(..) => unreachable!("a manifest has no hard links"),
        }
    }
    (Value::Array(list), finish_tar_zst(layer))
}

fn names_of(entries: &[Ent]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match e {
            File(p) | Dir(p) | Link(p, _) | Hard(p, _) => p.to_string(),
        })
        .collect()
}

/// Everything about a directory a broken restore could change: its entries (contents, modes,
/// times) and its own mode and time.
fn state(dir: &Path) -> (BTreeMap<String, Node>, u32, i64, i64) {
    let md = std::fs::symlink_metadata(dir).unwrap();
    (tree(dir), md.permissions().mode(), md.mtime(), md.mtime_nsec())
}

/// The places outside every home that the variants aim at.
struct Outside {
    dir: PathBuf,
    v41_out: PathBuf,
    tmp_root: PathBuf,
    before: Vec<(BTreeMap<String, Node>, u32, i64, i64)>,
    tmp_names: Vec<String>,
}

impl Outside {
    fn new(tv: &TestVolume) -> Outside {
        let dir = tv.dir("outside");
        write(&dir.join("victim.txt"), b"victim");
        std::fs::set_permissions(dir.join("victim.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
        // The case's own target: made if missing, so a broken restore would write into it
        // rather than fail on a missing directory.
        let v41_out = PathBuf::from("/tmp/v41-out");
        let _ = std::fs::create_dir(&v41_out);
        let mut o = Outside { dir, v41_out, tmp_root: tv.tmp.path().to_path_buf(), before: Vec::new(), tmp_names: Vec::new() };
        o.before = o.now();
        o.tmp_names = names(&o.tmp_root);
        o
    }

    fn now(&self) -> Vec<(BTreeMap<String, Node>, u32, i64, i64)> {
        vec![state(&self.dir), state(&self.v41_out)]
    }

    fn unchanged(&self, what: &str) {
        assert_eq!(self.now(), self.before, "{what}: something outside the home was created or changed");
        assert_eq!(names(&self.tmp_root), self.tmp_names, "{what}: something appeared beside the volume");
        assert_eq!(std::fs::read(self.dir.join("victim.txt")).unwrap(), b"victim");
    }
}

fn assert_refused<T: std::fmt::Debug>(r: Result<T, VolumeError>, what: &str, entries: &[Ent]) {
    match r {
        Err(VolumeError::Unsafe { entry, why }) => {
            let names = names_of(entries);
            assert!(names.contains(&entry), "{what}: refused entry {entry:?} ({why}) is not one of {names:?}");
        }
        other => panic!("{what}: expected a refusal naming an entry, got {other:?}"),
    }
}

#[tokio::test]
async fn case_v41_restore_and_export_refuse_links_resolving_outside_in_any_order() {
    let tv = TestVolume::new(Backend::Local);
    let store = tv.store_dir.clone().unwrap();
    let parent = tv.dir("restore");
    let target = parent.join("home");
    write(&target.join("previous.txt"), b"previous");
    let exports = tv.dir("x");
    let outside = Outside::new(&tv);
    let home_before = tree(&target);
    // Staging lies at <tmp>/restore/.home.restore-N and <tmp>/x/.v41.tar.zst.export-N: 2 levels.
    for (i, (what, entries)) in variants(2, false).into_iter().enumerate() {
        let home = format!("v41-{i}");
        let (m, layer) = manifest(&entries);
        plant(&store, &home, 1, m, &layer);
        assert_refused(tv.volume.restore(&home, None, &target, &NoProgress).await, &format!("restore, {what}"), &entries);
        outside.unchanged(&format!("restore, {what}"));
        assert_eq!(tree(&target), home_before, "restore, {what}: the previous home changed");
        assert_eq!(names(&parent), ["home"], "restore, {what}: staging left behind");

        let file = exports.join("v41.tar.zst");
        assert_refused(tv.volume.export(&home, None, &file, &NoProgress).await, &format!("export, {what}"), &entries);
        outside.unchanged(&format!("export, {what}"));
        assert_eq!(names(&exports), Vec::<String>::new(), "export, {what}: a file or staging left behind");

        // Restoring into a fresh directory (a new run's home) is refused the same way.
        let fresh = parent.join("fresh");
        assert_refused(tv.volume.restore(&home, None, &fresh, &NoProgress).await, &format!("fresh restore, {what}"), &entries);
        assert!(!fresh.exists(), "fresh restore, {what}: the home was created");
        outside.unchanged(&format!("fresh restore, {what}"));
    }
    // Every one of them is still listed (without a snapshot to show), so each can be deleted.
    let homes = tv.volume.homes().await.unwrap();
    assert_eq!(homes.len(), variants(2, false).len());
    assert!(homes.iter().all(|h| h.latest.is_none() && h.snapshots == 1), "{homes:?}");
    let lease = tv.lease("v41-0").await;
    tv.volume.delete(lease).await.unwrap();
    assert_eq!(tv.volume.homes().await.unwrap().len(), variants(2, false).len() - 1);
}

#[tokio::test]
async fn case_v41_import_refuses_links_and_hard_links_resolving_outside_in_any_order() {
    let tv = TestVolume::new(Backend::Local);
    let archives = tv.dir("archives");
    let outside = Outside::new(&tv);
    let lease = tv.lease("v41-import").await;
    // Import staging lies at <tmp>/cache-a/tmp/.import.import-N: 3 levels.
    for (i, (what, entries)) in variants(3, true).into_iter().enumerate() {
        let file = archives.join(format!("{i}.tar.zst"));
        std::fs::write(&file, archive(&entries)).unwrap();
        assert_refused(tv.volume.import(&lease, &file, Value::Null, &NoProgress).await, &format!("import, {what}"), &entries);
        outside.unchanged(&format!("import, {what}"));
        assert_eq!(names(&tv.tmp.path().join("cache-a/tmp")), Vec::<String>::new(), "import, {what}: staging left behind");
    }
    assert!(matches!(tv.volume.snapshots("v41-import").await, Err(VolumeError::HomeNotFound { .. })));
}

/// Links that stay inside, however they get there, still save, restore, export and import; the
/// ones that only read as inside are listed as skipped by the save, so the snapshot restores.
#[tokio::test]
async fn case_v41_links_that_stay_inside_round_trip_and_escaping_ones_are_skipped_on_save() {
    let tv = TestVolume::new(Backend::Local);
    let home = tv.dir("home");
    let (restored, exports) = (tv.dir("r"), tv.dir("x"));
    let outside = Outside::new(&tv);
    write(&home.join("sub/file.txt"), b"inside");
    let ln = |t: &str, p: &str| std::os::unix::fs::symlink(t, home.join(p)).unwrap();
    ln(".", "loop");
    ln("loop/loop/sub/file.txt", "deep");
    ln("../loop/sub", "sub/back");
    ln("loop/..", "up");
    ln(&up(4, "tmp/v41-out"), "notes");
    ln("up", "via-up");
    ln("cycle-b", "cycle-a");
    ln("cycle-a", "cycle-b");
    let lease = tv.lease("v41-ok").await;
    let r = tv.volume.save(&lease, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
    let mut skipped: Vec<(String, String)> = r.snapshot.skipped.iter().map(|s| (s.path.clone(), s.kind.clone())).collect();
    skipped.sort();
    let s = |p: &str| (p.to_string(), "symlink_outside".to_string());
    assert_eq!(skipped, [s("cycle-a"), s("cycle-b"), s("notes"), s("up"), s("via-up")]);

    let target = restored.join("v41-ok");
    tv.volume.restore("v41-ok", None, &target, &NoProgress).await.unwrap();
    let mut want = tree(&home);
    want.retain(|k, _| !["up", "notes", "via-up", "cycle-a", "cycle-b"].contains(&k.as_str()));
    assert_eq!(tree(&target), want);
    assert_eq!(std::fs::read(target.join("deep")).unwrap(), b"inside");

    let file = exports.join("ok.tar.zst");
    tv.volume.export("v41-ok", None, &file, &NoProgress).await.unwrap();
    let lease2 = tv.lease("v41-ok-copy").await;
    tv.volume.import(&lease2, &file, Value::Null, &NoProgress).await.unwrap();
    let copy = restored.join("copy");
    tv.volume.restore("v41-ok-copy", None, &copy, &NoProgress).await.unwrap();
    assert_eq!(tree(&copy), want);
    outside.unchanged("round trip");
}
