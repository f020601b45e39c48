//! Saves, incremental layers, restores, export/import and compaction, on both backends.

use std::time::Duration;

use serde_json::json;
use spaces_volumes::{NoProgress, SaveOptions, VolumeError, VolumeKind};

use super::support::*;

/// Runs an async scenario once per backend.
macro_rules! both {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test]
            async fn local() {
                $body(Backend::Local).await
            }
            #[tokio::test]
            async fn s3() {
                $body(Backend::S3).await
            }
        }
    };
}

both!(incremental_saves_and_point_in_time_restore, incremental);
async fn incremental(backend: Backend) {
    let tv = TestVolume::new(backend);
    let v = &tv.volume;
    assert_eq!(
        v.kind(),
        match backend {
            Backend::Local => VolumeKind::Local,
            Backend::S3 => VolumeKind::S3,
        }
    );
    let home = tv.dir("home");
    sample_home(&home);
    let original = tree(&home);
    let lease = tv.lease("agent-1").await;

    let first = tv.save(&lease, &home).await;
    assert!(!first.unchanged);
    assert_eq!(first.snapshot.id, "00000000000000000001");
    assert_eq!(first.snapshot.files, 4);
    assert_eq!(first.snapshot.bytes, 16 + 11 + 200_000 + 4);
    assert_eq!(first.snapshot.layers, 1);
    assert_eq!(first.snapshot.host, "host-a");
    assert!(first.uploaded_bytes > 0);

    // Unchanged: no snapshot, nothing sent, nothing hashed (the stat-cache knows every file).
    tokio::time::sleep(Duration::from_millis(60)).await; // past the stat-cache's racy window
    let again = tv.save(&lease, &home).await;
    let again2 = tv.save(&lease, &home).await;
    assert!(again.unchanged && again2.unchanged);
    assert_eq!((again2.uploaded_bytes, again2.hashed), (0, 0));
    assert_eq!(again2.snapshot, first.snapshot);
    assert_eq!(v.snapshots("agent-1").await.unwrap().len(), 1);

    // One changed file: only it goes into the new layer.
    write(&home.join("settings.json"), b"{\"theme\":\"light\"}");
    let changed = tv.save(&lease, &home).await;
    assert!(!changed.unchanged);
    assert_eq!(changed.hashed, 1);
    assert_eq!(changed.snapshot.layers, 2);
    assert!(changed.uploaded_bytes < 4_000, "sent {} bytes for a 17-byte change", changed.uploaded_bytes);

    // A deletion restores as absent.
    std::fs::remove_file(home.join("sessions/one.jsonl")).unwrap();
    std::fs::remove_file(home.join("current")).unwrap();
    let deleted = tv.save(&lease, &home).await;
    assert_eq!(deleted.snapshot.files, 3);
    assert_eq!(deleted.snapshot.layers, 2, "a deletion adds no layer");

    let target = tv.dir("restored").join("home");
    let r = v.restore("agent-1", None, &target, &NoProgress).await.unwrap();
    assert_eq!(r.snapshot.id, deleted.snapshot.id);
    assert_eq!(tree(&target), tree(&home));
    assert!(!target.join("sessions/one.jsonl").exists());

    // Point in time: the first snapshot, over the existing copy.
    v.restore("agent-1", Some(&first.snapshot.id), &target, &NoProgress).await.unwrap();
    assert_eq!(tree(&target), original);

    let ids: Vec<String> = v.snapshots("agent-1").await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["00000000000000000001", "00000000000000000002", "00000000000000000003"]);
    assert_eq!(v.latest("agent-1").await.unwrap().unwrap().id, "00000000000000000003");
    let homes = v.homes().await.unwrap();
    assert_eq!(homes.len(), 1);
    assert_eq!(homes[0].name, "agent-1");
    assert_eq!(homes[0].snapshots, 3);
    assert_eq!(homes[0].lease.as_ref().unwrap().holder, "host-a/run-1");

    // A second host restores the same snapshot; saving it right back is unchanged.
    let b = tv.other_host("host-b");
    let on_b = tv.dir("host-b").join("home");
    b.restore("agent-1", None, &on_b, &NoProgress).await.unwrap();
    assert_eq!(tree(&on_b), tree(&home));
    lease.release().await.unwrap();
    let lb = b.acquire("agent-1", "host-b/run-9", Duration::from_secs(60)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let back = b.save(&lb, &on_b, &SaveOptions::default(), &NoProgress).await.unwrap();
    assert!(back.unchanged, "{back:?}");
    assert_eq!(back.uploaded_bytes, 0);
}

both!(meta_and_excludes, meta_excludes);
async fn meta_excludes(backend: Backend) {
    let tv = TestVolume::new(backend);
    let home = tv.dir("home");
    sample_home(&home);
    write(&home.join("cache/big.bin"), &[7u8; 10_000]);
    write(&home.join("x.tmp"), b"t");
    let lease = tv.lease("h").await;
    tokio::time::sleep(Duration::from_millis(60)).await; // files older than the stat-cache racy window
    let opts =
        SaveOptions { meta: json!({"session": "s1"}), exclude: vec!["cache/**".into(), "**/*.tmp".into()], ..SaveOptions::default() };
    let r = tv.volume.save(&lease, &home, &opts, &NoProgress).await.unwrap();
    assert_eq!(r.snapshot.meta, json!({"session": "s1"}));
    let mut skipped: Vec<(String, String)> = r.snapshot.skipped.iter().map(|s| (s.path.clone(), s.kind.clone())).collect();
    skipped.sort();
    assert_eq!(skipped, [("cache".to_string(), "excluded".to_string()), ("x.tmp".to_string(), "excluded".to_string())]);
    // Same files, new meta: a new snapshot, but no new layer.
    tokio::time::sleep(Duration::from_millis(60)).await; // past the stat-cache racy window
    let opts2 = SaveOptions { meta: json!({"session": "s2"}), ..opts.clone() };
    let r2 = tv.volume.save(&lease, &home, &opts2, &NoProgress).await.unwrap();
    assert!(!r2.unchanged);
    assert_eq!(r2.snapshot.layers, 1);
    assert_eq!(r2.hashed, 0);
    let target = tv.dir("out").join("h");
    tv.volume.restore("h", None, &target, &NoProgress).await.unwrap();
    assert!(!target.join("cache").exists() && !target.join("x.tmp").exists());
    // A new record alone (set_meta): a new snapshot of the same entries and layers, nothing read.
    let r3 = tv.volume.set_meta(&lease, json!({"session": "s2", "space": "other"})).await.unwrap();
    assert!(r3.id > r2.snapshot.id);
    assert_eq!((r3.files, r3.bytes, r3.layers, &r3.skipped), (r2.snapshot.files, r2.snapshot.bytes, 1, &r2.snapshot.skipped));
    assert_eq!(tv.volume.latest("h").await.unwrap().unwrap().meta, json!({"session": "s2", "space": "other"}));
    let moved = tv.dir("out").join("moved");
    tv.volume.restore("h", None, &moved, &NoProgress).await.unwrap();
    assert_eq!(tree(&moved), tree(&target));
    // Only under the current lease.
    let stale = tv.lease("h").await;
    assert!(matches!(tv.volume.set_meta(&lease, json!(null)).await, Err(VolumeError::LeaseLost { .. })));
    drop(stale);
}

both!(export_import_round_trip, export_import);
async fn export_import(backend: Backend) {
    let tv = TestVolume::new(backend);
    let home = tv.dir("home");
    sample_home(&home);
    let lease = tv.lease("src").await;
    let saved = tv.save(&lease, &home).await;
    let file = tv.dir("exports").join("src.tar.zst");
    let info = tv.volume.export("src", None, &file, &NoProgress).await.unwrap();
    assert_eq!(info, saved.snapshot);
    assert_eq!(names(&tv.tmp.path().join("exports")), ["src.tar.zst"]);

    let lease2 = tv.lease("copy").await;
    let imported = tv.volume.import(&lease2, &file, json!({"from": "src"}), &NoProgress).await.unwrap();
    assert_eq!((imported.files, imported.bytes, imported.layers), (saved.snapshot.files, saved.snapshot.bytes, 1));
    assert_eq!(imported.meta, json!({"from": "src"}));
    let target = tv.dir("out").join("copy");
    tv.volume.restore("copy", None, &target, &NoProgress).await.unwrap();
    assert_eq!(tree(&target), tree(&home));

    // A plain `tar -I zstd` of a home directory imports too.
    let plain = tv.tmp.path().join("plain.tar.zst");
    let st = std::process::Command::new("tar").args(["-I", "zstd", "-cf"]).arg(&plain).arg("-C").arg(&home).arg(".").status().unwrap();
    assert!(st.success());
    let lease3 = tv.lease("plain").await;
    tv.volume.import(&lease3, &plain, json!(null), &NoProgress).await.unwrap();
    let target3 = tv.dir("out3").join("plain");
    tv.volume.restore("plain", None, &target3, &NoProgress).await.unwrap();
    assert_eq!(tree(&target3), tree(&home));
}

both!(compact_keeps_kept_snapshots_restorable, compact);
async fn compact(backend: Backend) {
    let tv = TestVolume::new(backend);
    let v = &tv.volume;
    let home = tv.dir("home");
    sample_home(&home);
    let lease = tv.lease("c").await;
    let mut trees = Vec::new();
    for i in 0..4 {
        write(&home.join(format!("turn-{i}.txt")), format!("turn {i}").as_bytes());
        tv.save(&lease, &home).await;
        trees.push(tree(&home));
    }
    assert_eq!(v.latest("c").await.unwrap().unwrap().layers, 4);
    let compacted = v.compact(&lease, 2).await.unwrap();
    assert_eq!(compacted.layers, 1);
    assert_eq!(compacted.id, "00000000000000000005");
    let ids: Vec<String> = v.snapshots("c").await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["00000000000000000004", "00000000000000000005"]);
    for (id, want) in [("00000000000000000004", &trees[3]), ("00000000000000000005", &trees[3])] {
        let t = tv.dir(&format!("r-{id}")).join("c");
        v.restore("c", Some(id), &t, &NoProgress).await.unwrap();
        assert_eq!(&tree(&t), want, "snapshot {id}");
    }
    let gone = v.restore("c", Some("00000000000000000001"), &tv.dir("gone").join("c"), &NoProgress).await;
    assert!(matches!(gone, Err(VolumeError::SnapshotNotFound { .. })), "{gone:?}");
    // After compaction an unchanged home is still an unchanged save.
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(tv.save(&lease, &home).await.unchanged);
    if let Some(dir) = &tv.store_dir {
        // Only the layers the two kept snapshots need remain: the compacted one and those of 4.
        let layers = names(&dir.join("homes/c/layers"));
        assert_eq!(layers.len(), 5, "{layers:?}");
    }
    // keep = 1: only the compacted snapshot and its one layer stay.
    v.compact(&lease, 1).await.unwrap();
    assert_eq!(v.snapshots("c").await.unwrap().len(), 1);
    if let Some(dir) = &tv.store_dir {
        assert_eq!(names(&dir.join("homes/c/layers")).len(), 1);
    }
    let t = tv.dir("r-last").join("c");
    v.restore("c", None, &t, &NoProgress).await.unwrap();
    assert_eq!(tree(&t), trees[3]);
}

both!(delete_removes_every_object_and_frees_the_lease, delete);
async fn delete(backend: Backend) {
    let tv = TestVolume::new(backend);
    let home = tv.dir("home");
    sample_home(&home);
    let lease = tv.lease("d").await;
    tv.save(&lease, &home).await;
    write(&home.join("more"), b"more");
    tv.save(&lease, &home).await;
    let report = tv.volume.delete(lease).await.unwrap();
    assert_eq!(report.home, "d");
    assert!(report.objects >= 4, "{report:?}");
    assert!(matches!(tv.volume.snapshots("d").await, Err(VolumeError::HomeNotFound { .. })));
    assert_eq!(tv.volume.lease_info("d").await.unwrap(), None);
    assert_eq!(tv.volume.homes().await.unwrap(), vec![]);
    // Another holder can take it at once.
    tv.volume.acquire("d", "someone-else", Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn names_and_urls_are_checked() {
    let tv = TestVolume::new(Backend::Local);
    for bad in ["", ".hidden", "a/b", "x".repeat(65).as_str(), "sp ace"] {
        assert!(matches!(tv.volume.acquire(bad, "h", Duration::from_secs(1)).await, Err(VolumeError::InvalidName { .. })), "{bad:?}");
    }
    let env = std::collections::HashMap::new();
    let cache = tv.dir("c");
    for bad in ["relative/dir", "ftp://x/y", "s3://", "s3://user:secret@bucket/p"] {
        match spaces_volumes::Volume::open(bad, &env, &cache, "h") {
            Err(VolumeError::InvalidUrl { url, .. }) => assert!(!url.contains("secret"), "{url}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    let remote_http: std::collections::HashMap<String, String> =
        [("AWS_ENDPOINT_URL".to_string(), "http://example.com:9000".to_string())].into();
    assert!(matches!(spaces_volumes::Volume::open("s3://b/p", &remote_http, &cache, "h"), Err(VolumeError::InvalidUrl { .. })));
    let v = spaces_volumes::Volume::open("s3://bucket/a/b/", &env, &cache, "h").unwrap();
    assert_eq!(v.url(), "s3://bucket/a/b");
    let f = tv.tmp.path().join("vol2");
    let v = spaces_volumes::Volume::open(&format!("file://{}", f.display()), &env, &cache, "h").unwrap();
    assert_eq!(v.url(), format!("file://{}", f.display()));
    assert!(f.is_dir());
}

both!(big_layer_goes_up_in_parts_and_streams_back, big_layer);
async fn big_layer(backend: Backend) {
    let tv = TestVolume::new(backend);
    let home = tv.dir("home");
    // 20 MiB that zstd cannot shrink: the layer is uploaded in parts (multipart above 16 MiB).
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let noise: Vec<u8> = (0..20 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    write(&home.join("model.bin"), &noise);
    write(&home.join("small.txt"), b"small");
    let lease = tv.lease("big").await;
    let r = tv.save(&lease, &home).await;
    assert!(r.uploaded_bytes > 20 << 20);
    let target = tv.dir("out").join("big");
    let r2 = tv.volume.restore("big", None, &target, &NoProgress).await.unwrap();
    assert_eq!(r2.bytes, (20 << 20) + 5);
    assert!(std::fs::read(target.join("model.bin")).unwrap() == noise);
}
