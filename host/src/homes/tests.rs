//! Homes on a real local volume (a temp state dir): ownership by Space, the operator's move,
//! restores that keep the owner, imports that belong to nobody, and saves that refuse the run's
//! secret values.

use serde_json::json;
use spaces_sdk::{ErrorCode, HomeExportRequest, HomeImportRequest, HomeRestoreRequest};
use spaces_volumes::SecretValue;

use super::*;

struct Fixture {
    homes: Arc<Homes>,
    dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::load(Some(dir.path().join("state"))).unwrap();
    std::fs::create_dir_all(&cfg.state_dir).unwrap();
    Fixture { homes: Homes::open(&cfg).unwrap(), dir }
}

impl Fixture {
    /// A home directory with a file, saved by run `run` of Space `space` (which then lets go).
    async fn save_run(&self, home: &str, run: &str, space: &str) -> SnapshotInfo {
        let dir = self.dir.path().join(format!("{run}-home"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("settings.json"), format!("{{\"run\": {run:?}}}")).unwrap();
        self.homes.claim(home, run, space).await.unwrap();
        let meta = json!({"agent": "claude-code", "space": space, "cwd": "sub", "run_id": run});
        let r = self.homes.save(home, run, &dir, &[], meta, Vec::new()).await.unwrap();
        self.homes.release(home, run).await;
        r.snapshot
    }

    async fn owner_space(&self, home: &str) -> Option<String> {
        let latest = self.homes.latest(home).await.unwrap().unwrap();
        space_of(&latest.meta).map(str::to_owned)
    }
}

fn code(r: Result<impl std::fmt::Debug>) -> (ErrorCode, String) {
    match r {
        Err(e) => {
            let e = e.to_api();
            (e.code, e.message)
        }
        Ok(v) => panic!("expected a refusal, got {v:?}"),
    }
}

#[tokio::test]
async fn a_home_belongs_to_the_space_that_created_it_until_the_operator_moves_it() {
    let f = fixture();
    assert_eq!(f.homes.owner("helper").await.unwrap(), Owner::New);
    f.save_run("helper", "run-a1", "alpha").await;
    assert_eq!(f.homes.owner("helper").await.unwrap(), Owner::Space("alpha".into()));

    // Another Space's run: FORBIDDEN, no lease taken, the owner not named.
    let (c, msg) = code(f.homes.claim("helper", "run-b1", "beta").await);
    assert_eq!(c, ErrorCode::Forbidden, "{msg}");
    assert!(msg.contains("another Space") && !msg.contains("alpha"), "{msg}");
    assert!(f.homes.volume().lease_info("helper").await.unwrap().is_none());
    assert_eq!(f.homes.holding_run("helper"), None);
    // Even while the owner's run holds it: the refusal, not the holder.
    f.homes.claim("helper", "run-a2", "alpha").await.unwrap();
    let (c, msg) = code(f.homes.claim("helper", "run-b2", "beta").await);
    assert_eq!(c, ErrorCode::Forbidden, "{msg}");
    assert!(!msg.contains("run-a2"), "{msg}");
    // ... and the operator cannot move it from under that run.
    assert_eq!(code(f.homes.move_to("helper", "beta").await).0, ErrorCode::LeaseHeld);
    f.homes.release("helper", "run-a2").await;

    // The operator moves it: a new snapshot of the same files, its record naming beta, no cwd.
    let before = f.homes.latest("helper").await.unwrap().unwrap();
    let moved = f.homes.move_to("helper", "beta").await.unwrap();
    assert_eq!((moved.from.as_deref(), moved.space.as_str()), (Some("alpha"), "beta"));
    assert!(moved.snapshot.id > before.id);
    assert_eq!((moved.snapshot.files, moved.snapshot.bytes), (before.files, before.bytes));
    assert_eq!(moved.snapshot.meta["agent"], "claude-code");
    assert!(moved.snapshot.meta.get("cwd").is_none(), "{}", moved.snapshot.meta);
    assert_eq!(f.homes.volume().lease_info("helper").await.unwrap(), None, "the move let go of the lease");
    assert_eq!(code(f.homes.claim("helper", "run-a3", "alpha").await).0, ErrorCode::Forbidden);
    f.homes.claim("helper", "run-b3", "beta").await.unwrap();
    f.homes.release("helper", "run-b3").await;
    // Moving it where it is changes nothing.
    let again = f.homes.move_to("helper", "beta").await.unwrap();
    assert_eq!((again.from.as_deref(), again.snapshot.id.as_str()), (Some("beta"), moved.snapshot.id.as_str()));

    // A point-in-time restore back into the volume rewinds the files, not the owner.
    let first = f.homes.snapshots("helper").await.unwrap().remove(0);
    assert_eq!(first.meta["space"], "alpha");
    f.homes.restore(&HomeRestoreRequest { name: "helper".into(), at: Some(first.id), to: None }).await.unwrap();
    assert_eq!(f.owner_space("helper").await.as_deref(), Some("beta"));

    // A run that lost its lease and finds the home moved away cannot save it back.
    f.homes.claim("helper", "run-b4", "beta").await.unwrap();
    f.homes.release("helper", "run-b4").await;
    f.homes.move_to("helper", "alpha").await.unwrap();
    let dir = f.dir.path().join("run-b4-home");
    std::fs::create_dir_all(&dir).unwrap();
    let r = f.homes.save("helper", "run-b4", &dir, &[], json!({"space": "beta"}), Vec::new()).await;
    assert_eq!(code(r).0, ErrorCode::Forbidden);
    assert_eq!(f.owner_space("helper").await.as_deref(), Some("alpha"));
}

#[tokio::test]
async fn a_home_imported_under_a_new_name_belongs_to_no_space_until_moved() {
    let f = fixture();
    f.save_run("orig", "run-1", "alpha").await;
    let file = f.dir.path().join("orig.tar.zst");
    let path = file.display().to_string();
    f.homes.export(&HomeExportRequest { name: "orig".into(), at: None, path: path.clone() }).await.unwrap();
    f.homes.import(&HomeImportRequest { name: "copy".into(), path: path.clone() }).await.unwrap();
    assert_eq!(f.homes.owner("copy").await.unwrap(), Owner::Nobody);
    for space in ["alpha", "beta"] {
        let (c, msg) = code(f.homes.claim("copy", "run-x", space).await);
        assert_eq!(c, ErrorCode::Forbidden, "{msg}");
        assert!(msg.contains("no Space") && msg.contains("spacesd home move copy"), "{msg}");
    }
    let moved = f.homes.move_to("copy", "beta").await.unwrap();
    assert_eq!(moved.from, None);
    f.homes.claim("copy", "run-y", "beta").await.unwrap();
    f.homes.release("copy", "run-y").await;
    // Importing over an owned home keeps its owner.
    f.homes.import(&HomeImportRequest { name: "orig".into(), path }).await.unwrap();
    assert_eq!(f.owner_space("orig").await.as_deref(), Some("alpha"));
    assert_eq!(code(f.homes.move_to("nope", "beta").await).0, ErrorCode::InvalidArgument);
}

fn secret(name: &str, value: &str) -> SecretValue {
    SecretValue { name: name.into(), value: value.as_bytes().to_vec() }
}

#[tokio::test]
async fn a_save_holding_a_secret_value_fails_naming_the_file_and_stores_nothing() {
    let f = fixture();
    let first = f.save_run("keeper", "run-1", "alpha").await;
    let dir = f.dir.path().join("run-1-home");
    std::fs::create_dir_all(dir.join("projects")).unwrap();
    std::fs::write(dir.join("projects/session.jsonl"), "{\"tool_result\": \"OPENAI_API_KEY=sk-live-1234567890abcdef\"}\n").unwrap();
    f.homes.claim("keeper", "run-1", "alpha").await.unwrap();
    let secrets = vec![secret("OPENAI_API_KEY", "sk-live-1234567890abcdef"), secret("OTHER", "another-secret-value")];
    let r = f.homes.save("keeper", "run-1", &dir, &[], json!({"space": "alpha"}), secrets.clone()).await;
    let (c, msg) = code(r);
    assert_eq!(c, ErrorCode::InvalidArgument, "{msg}");
    assert!(msg.contains("projects/session.jsonl") && msg.contains("OPENAI_API_KEY"), "{msg}");
    assert!(!msg.contains("sk-live"), "{msg}");
    assert_eq!(f.homes.latest("keeper").await.unwrap().unwrap().id, first.id, "nothing was committed");
    // Once the file no longer holds it, the home saves again.
    std::fs::write(dir.join("projects/session.jsonl"), "{\"tool_result\": \"[redacted]\"}\n").unwrap();
    let ok = f.homes.save("keeper", "run-1", &dir, &[], json!({"space": "alpha"}), secrets).await.unwrap();
    assert!(ok.snapshot.id > first.id);
    f.homes.release("keeper", "run-1").await;
}

/// The renewal task on a real local volume with a short TTL: the lease is renewed every third of
/// the TTL while held; when another writer's record comes after it (the same holder taking it
/// again through another handle, as a second daemon on this host id would), the run is told the
/// lease was lost and this host no longer holds it; its next save takes a fresh lease.
#[tokio::test]
async fn a_held_lease_is_renewed_and_a_lost_one_is_told_to_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::load(Some(dir.path().join("state"))).unwrap();
    cfg.lease_ttl_ms = 1200;
    std::fs::create_dir_all(&cfg.state_dir).unwrap();
    let homes = Homes::open(&cfg).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, renew::LeaseNote)>();
    homes.on_lease_news(Box::new(move |run, note| {
        let _ = tx.send((run.to_owned(), note));
    }));
    homes.claim("agent", "run-1", "alpha").await.unwrap();
    let first = homes.volume().lease_info("agent").await.unwrap().unwrap();
    let renewed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let now = homes.volume().lease_info("agent").await.unwrap().unwrap();
            if now.epoch > first.epoch {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("renewed within 10 s");
    assert_eq!(renewed.holder, homes.holder("run-1"));
    assert!(renewed.expires_ms > first.expires_ms);

    let other = Volume::open(&cfg.volume, &HashMap::new(), &dir.path().join("cache-2"), homes.host()).unwrap();
    let _theirs = other.acquire("agent", &homes.holder("run-1"), Duration::from_secs(60)).await.unwrap();
    let (run, note) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("news within 10 s").unwrap();
    assert_eq!(run, "run-1");
    assert!(note.summary.starts_with("lease of \"agent\" lost") && note.detail.contains("was lost"), "{note:?}");
    assert_eq!(homes.holding_run("agent"), None);
    drop(_theirs);

    // The run's next save takes the lease again (the other handle is its own holder id, so it
    // may) and is stored.
    let home = dir.path().join("run-1-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("settings.json"), "{}").unwrap();
    let saved = homes.save("agent", "run-1", &home, &[], json!({"space": "alpha"}), Vec::new()).await.unwrap();
    assert!(!saved.unchanged);
    assert_eq!(homes.holding_run("agent").as_deref(), Some("run-1"));
    homes.release("agent", "run-1").await;
    assert_eq!(homes.volume().lease_info("agent").await.unwrap(), None);
}

/// A save whose lease was superseded under it (found lost only at the commit) takes the lease
/// again once and is stored.
#[tokio::test]
async fn a_save_that_finds_its_lease_lost_takes_it_again_once_and_is_stored() {
    let f = fixture();
    f.homes.claim("agent", "run-1", "alpha").await.unwrap();
    let other = Volume::open(f.homes.volume().url(), &HashMap::new(), &f.dir.path().join("cache-2"), f.homes.host()).unwrap();
    let theirs = other.acquire("agent", &f.homes.holder("run-1"), Duration::from_secs(60)).await.unwrap();
    assert_eq!(f.homes.holding_run("agent").as_deref(), Some("run-1"), "not noticed yet");
    let dir = f.dir.path().join("home");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "a").unwrap();
    let saved = f.homes.save("agent", "run-1", &dir, &[], json!({"space": "alpha"}), Vec::new()).await.unwrap();
    assert_eq!(saved.snapshot.id, "00000000000000000001");
    assert!(theirs.renew().await.is_err(), "the run's new lease came after the other handle's");
    f.homes.release("agent", "run-1").await;
}
