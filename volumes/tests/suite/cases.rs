//! Field cases V21–V24 (../shared/cases: read-only trees, special files, live SQLite, truncated
//! archives).

use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use spaces_volumes::{NoProgress, SaveOptions, SkippedEntry, VolumeError};

use super::support::*;

fn chmod(p: &std::path::Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

async fn v21(backend: Backend) {
    let tv = TestVolume::new(backend);
    let home = tv.dir("home");
    sample_home(&home);
    let m = home.join("go/pkg/mod/example.com/lib@v1.0.0");
    write(&m.join("lib.go"), b"package lib\n");
    chmod(&m.join("lib.go"), 0o444);
    chmod(&m, 0o555);
    chmod(&home.join("go/pkg/mod/example.com"), 0o555);
    let want = tree(&home);
    let lease = tv.lease("gopher").await;
    tv.save(&lease, &home).await;

    let target = tv.dir("restore").join("gopher");
    tv.volume.restore("gopher", None, &target, &NoProgress).await.unwrap();
    assert_eq!(tree(&target), want);
    // Over an existing copy (whose read-only dirs must be removed after the swap).
    tv.volume.restore("gopher", None, &target, &NoProgress).await.unwrap();
    assert_eq!(tree(&target), want);
    assert_eq!(names(&tv.tmp.path().join("restore")), ["gopher"], "nothing half-restored left beside it");
    // Delete the agent: its snapshots and its local home.
    tv.volume.delete(lease).await.unwrap();
    spaces_volumes::remove_tree(&target).unwrap();
    assert!(!target.exists());
    make_writable(&home);
}

#[tokio::test]
async fn case_v21_read_only_tree_round_trips() {
    v21(Backend::Local).await
}

#[tokio::test]
async fn case_v21_read_only_tree_round_trips_s3() {
    v21(Backend::S3).await
}

#[tokio::test]
async fn case_v22_socket_fifo_dangling_symlink() {
    let tv = TestVolume::new(Backend::Local);
    let home = tv.dir("home");
    sample_home(&home);
    let _listener = std::os::unix::net::UnixListener::bind(home.join("agent.sock")).unwrap();
    nix::unistd::mkfifo(&home.join("deep/pipe"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::os::unix::fs::symlink("no/such/file", home.join("dangling")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", home.join("outside")).unwrap();
    let lease = tv.lease("special").await;
    let r = tv.save(&lease, &home).await;
    let mut skipped = r.snapshot.skipped.clone();
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let e = |p: &str, k: &str| SkippedEntry { path: p.into(), kind: k.into() };
    assert_eq!(skipped, [e("agent.sock", "socket"), e("deep/pipe", "fifo"), e("outside", "symlink_outside")]);

    let target = tv.dir("r").join("special");
    tv.volume.restore("special", None, &target, &NoProgress).await.unwrap();
    assert_eq!(std::fs::read_link(target.join("dangling")).unwrap().to_str(), Some("no/such/file"));
    assert!(!target.join("agent.sock").exists() && !target.join("deep/pipe").exists());
    let mut want = tree(&home);
    want.retain(|k, _| k != "outside");
    assert_eq!(tree(&target), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_v23_sqlite_wal_during_save() {
    let tv = TestVolume::new(Backend::Local);
    let home = tv.dir("home");
    sample_home(&home);
    let db = home.join("state/agent.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.pragma_update(None, "journal_mode", "wal").unwrap();
        c.execute_batch("CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT NOT NULL); PRAGMA wal_autocheckpoint = 50;").unwrap();
    }
    // A writer commits rows (and checkpoints) all through the saves.
    let stop = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let c = rusqlite::Connection::open(&db).unwrap();
            c.pragma_update(None, "wal_autocheckpoint", 50).unwrap();
            c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) || n < 200 {
                c.execute("INSERT INTO events (body) VALUES (?1)", [format!("event {n} {}", "x".repeat(500))]).unwrap();
                n += 1;
                if n == 10 {
                    started_tx.send(()).unwrap();
                }
            }
            n
        })
    };
    started_rx.recv().unwrap(); // the WAL exists and is growing
    let lease = tv.lease("sqlite").await;
    let mut reports = Vec::new();
    for _ in 0..3 {
        reports.push(tv.volume.save(&lease, &home, &SaveOptions::default(), &NoProgress).await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written >= 200);
    let kinds: Vec<&str> = reports[0].snapshot.skipped.iter().map(|s| s.kind.as_str()).collect();
    assert!(kinds.contains(&"sqlite_wal"), "{:?}", reports[0].snapshot.skipped);

    // Restore over a copy holding stale -wal/-shm beside the database.
    let target = tv.dir("r").join("sqlite");
    write(&target.join("state/agent.db"), b"old");
    write(&target.join("state/agent.db-wal"), &[0xAB; 4096]);
    write(&target.join("state/agent.db-shm"), &[0xCD; 32768]);
    for r in &reports {
        tv.volume.restore("sqlite", Some(&r.snapshot.id), &target, &NoProgress).await.unwrap();
        assert!(!target.join("state/agent.db-wal").exists() || std::fs::metadata(target.join("state/agent.db-wal")).unwrap().len() == 0);
        assert!(!target.join("state/agent.db-shm").exists());
        let c = rusqlite::Connection::open(target.join("state/agent.db")).unwrap();
        let check: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        let rows: i64 = c.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        assert!(rows >= 0);
    }
    // The final state, saved after the writer stopped, has every row.
    std::thread::sleep(std::time::Duration::from_millis(60));
    let last = tv.volume.save(&lease, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
    tv.volume.restore("sqlite", Some(&last.snapshot.id), &target, &NoProgress).await.unwrap();
    let c = rusqlite::Connection::open(target.join("state/agent.db")).unwrap();
    let rows: i64 = c.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
    assert_eq!(rows as u64, written);

    // Rows that live only in the WAL (no checkpoint yet, the writer still open) are in the
    // snapshot: the database is copied through SQLite, not byte by byte.
    let live = rusqlite::Connection::open(&db).unwrap();
    live.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    live.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); CREATE TABLE only_in_wal (n INTEGER);").unwrap();
    for n in 0..100 {
        live.execute("INSERT INTO only_in_wal (n) VALUES (?1)", [n]).unwrap();
    }
    assert!(std::fs::metadata(home.join("state/agent.db-wal")).unwrap().len() > 0);
    let walled = tv.volume.save(&lease, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
    tv.volume.restore("sqlite", Some(&walled.snapshot.id), &target, &NoProgress).await.unwrap();
    let c = rusqlite::Connection::open(target.join("state/agent.db")).unwrap();
    let n: i64 = c.query_row("SELECT count(*) FROM only_in_wal", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 100);
    let check: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    drop(live);
}

#[tokio::test]
async fn case_v24_truncated_and_half_archive_refused() {
    let tv = TestVolume::new(Backend::Local);
    let home = tv.dir("home");
    sample_home(&home);
    for i in 0..50 {
        write(&home.join(format!("files/{i}.txt")), format!("{i}").repeat(1000).as_bytes());
    }
    let lease = tv.lease("v24").await;
    tv.save(&lease, &home).await;

    // Export archive: truncated by one byte, and cut in half.
    let file = tv.dir("x").join("v24.tar.zst");
    tv.volume.export("v24", None, &file, &NoProgress).await.unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let lease2 = tv.lease("imported").await;
    for (what, cut) in [("one byte short", bytes.len() - 1), ("half", bytes.len() / 2)] {
        let bad = tv.tmp.path().join(format!("bad-{}.tar.zst", cut));
        std::fs::write(&bad, &bytes[..cut]).unwrap();
        let r = tv.volume.import(&lease2, &bad, serde_json::Value::Null, &NoProgress).await;
        assert!(matches!(r, Err(VolumeError::Corrupt { .. })), "{what}: {r:?}");
    }
    assert!(matches!(tv.volume.snapshots("imported").await, Err(VolumeError::HomeNotFound { .. })));

    // A layer in the store truncated by one byte, and cut in half: restore over an existing home.
    let layers = tv.store_dir.as_ref().unwrap().join("homes/v24/layers");
    let layer = layers.join(&names(&layers)[0]);
    let good = std::fs::read(&layer).unwrap();
    let parent = tv.dir("restore");
    let target = parent.join("v24");
    write(&target.join("previous.txt"), b"the previous home");
    let before = tree(&target);
    for (what, cut) in [("one byte short", good.len() - 1), ("half", good.len() / 2)] {
        std::fs::write(&layer, &good[..cut]).unwrap();
        let r = tv.volume.restore("v24", None, &target, &NoProgress).await;
        match r {
            Err(VolumeError::Corrupt { what: w, why }) => assert!(w.starts_with("layer "), "{what}: {w}: {why}"),
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(tree(&target), before, "{what}: the previous home changed");
        assert_eq!(names(&parent), ["v24"], "{what}: staging left behind");
    }
}
