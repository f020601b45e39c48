//! Case V46 and its kind: a listing tolerates a broken entry and names it. One home's unreadable
//! object (its newest manifest truncated, its lease record garbled, an older manifest corrupt)
//! never hides the others, which restore and save as before. On both backends.

use spaces_volumes::{ListedSnapshot, NoProgress};

use super::support::*;

fn snapshot_key(home: &str, id: &str) -> String {
    format!("homes/{home}/snapshots/{id}.json")
}

/// The object `key` cut to half its length: JSON that ends mid-value.
fn truncate(tv: &TestVolume, key: &str) {
    let whole = tv.get_raw(key);
    assert!(whole.len() > 20, "{key} is {} bytes", whole.len());
    tv.put_raw(key, &whole[..whole.len() / 2]);
}

/// Three homes, each saved twice; the newest manifest of `b` truncated. `homes()` lists all three,
/// `b` without a latest snapshot and with `broken` naming its manifest; `a` and `c` restore,
/// save a new snapshot and list it; `b`'s listing of snapshots names the broken one and keeps
/// the older, readable one, which still restores.
#[tokio::test]
async fn case_v46_one_truncated_manifest_leaves_the_other_homes_listed_restorable_and_savable_local() {
    truncated_manifest(Backend::Local).await
}

#[tokio::test]
async fn case_v46_one_truncated_manifest_leaves_the_other_homes_listed_restorable_and_savable_s3() {
    truncated_manifest(Backend::S3).await
}

async fn truncated_manifest(backend: Backend) {
    let tv = TestVolume::new(backend);
    let v = &tv.volume;
    let mut newest = Vec::new();
    for name in ["a", "b", "c"] {
        let home = tv.dir(&format!("src-{name}"));
        sample_home(&home);
        let lease = tv.lease(name).await;
        tv.save(&lease, &home).await;
        write(&home.join("settings.json"), format!("{{\"home\":\"{name}\"}}").as_bytes());
        newest.push(tv.save(&lease, &home).await.snapshot);
        lease.release().await.unwrap();
    }
    truncate(&tv, &snapshot_key("b", &newest[1].id));

    let homes = v.homes().await.unwrap();
    let names: Vec<&str> = homes.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"], "{homes:#?}");
    let b = &homes[1];
    assert_eq!((b.snapshots, b.latest.as_ref()), (2, None), "{b:#?}");
    let why = b.broken.as_deref().expect("b is marked broken");
    assert!(why.contains(&snapshot_key("b", &newest[1].id)) && why.contains("corrupt"), "{why}");
    for (h, snap) in [(&homes[0], &newest[0]), (&homes[2], &newest[2])] {
        assert_eq!((h.latest.as_ref(), h.broken.as_deref(), h.snapshots), (Some(snap), None, 2), "{h:#?}");
    }

    // The other two restore and save as before.
    for name in ["a", "c"] {
        let target = tv.dir(&format!("restored-{name}")).join("home");
        let r = v.restore(name, None, &target, &NoProgress).await.unwrap();
        assert_eq!(std::fs::read_to_string(target.join("settings.json")).unwrap(), format!("{{\"home\":\"{name}\"}}"));
        write(&target.join("notes.txt"), b"after V46");
        let lease = tv.lease(name).await;
        let saved = tv.save(&lease, &target).await;
        assert!(!saved.unchanged && saved.snapshot.id > r.snapshot.id, "{saved:?}");
        lease.release().await.unwrap();
        let listed = v.homes().await.unwrap().into_iter().find(|h| h.name == name).unwrap();
        assert_eq!((listed.latest, listed.snapshots), (Some(saved.snapshot), 3));
    }

    // b: the listing of its snapshots names the broken one and keeps the readable one, which
    // restores; a restore of the latest is refused naming the manifest, and the strict listing
    // fails the same way.
    let listing = v.snapshot_listing("b").await.unwrap();
    assert_eq!(listing.len(), 2, "{listing:#?}");
    assert!(matches!(&listing[0], ListedSnapshot::Readable(s) if s.id.ends_with('1')), "{listing:#?}");
    match &listing[1] {
        ListedSnapshot::Broken { id, why } => {
            assert_eq!(id, &newest[1].id);
            assert!(why.contains("corrupt"), "{why}");
        }
        other => panic!("the truncated manifest reads as {other:?}"),
    }
    let older = tv.dir("restored-b-older").join("home");
    v.restore("b", Some(listing[0].id()), &older, &NoProgress).await.unwrap();
    let latest = tv.dir("restored-b").join("home");
    let e = v.restore("b", None, &latest, &NoProgress).await.unwrap_err().to_string();
    assert!(e.contains(&snapshot_key("b", &newest[1].id)), "{e}");
    assert!(!latest.exists(), "a refused restore made the target");
    assert!(v.snapshots("b").await.is_err());
}

/// The same kind with other broken objects: a home whose lease record is garbage and one whose
/// older manifest is not JSON at all. Every home is listed; the broken parts are named; the
/// healthy home is untouched.
#[tokio::test]
async fn a_garbled_lease_record_or_older_manifest_is_named_and_hides_nothing_local() {
    other_objects(Backend::Local).await
}

#[tokio::test]
async fn a_garbled_lease_record_or_older_manifest_is_named_and_hides_nothing_s3() {
    other_objects(Backend::S3).await
}

async fn other_objects(backend: Backend) {
    let tv = TestVolume::new(backend);
    let v = &tv.volume;
    let mut live = None;
    for name in ["healthy", "leased", "old-broken"] {
        let home = tv.dir(&format!("src-{name}"));
        sample_home(&home);
        let lease = tv.lease(name).await;
        tv.save(&lease, &home).await;
        write(&home.join("settings.json"), b"{\"second\":true}");
        tv.save(&lease, &home).await;
        if name == "leased" {
            live = Some(lease.info().epoch);
        } else {
            lease.release().await.unwrap();
        }
    }
    // The live lease of "leased" is its newest record: garble it.
    let lease_key = format!("homes/leased/lease/{:020}.json", live.unwrap());
    assert!(!tv.get_raw(&lease_key).is_empty());
    tv.put_raw(&lease_key, b"\x00\x01 not a lease");
    tv.put_raw(&snapshot_key("old-broken", "00000000000000000001"), b"<html>gateway timeout</html>");

    let homes = v.homes().await.unwrap();
    let by_name = |n: &str| homes.iter().find(|h| h.name == n).unwrap_or_else(|| panic!("{n} not listed: {homes:#?}"));
    assert_eq!(homes.len(), 3, "{homes:#?}");
    let leased = by_name("leased");
    assert!(leased.lease.is_none() && leased.latest.is_some(), "{leased:#?}");
    let why = leased.broken.as_deref().expect("the garbled lease is named");
    assert!(why.contains(&lease_key) && why.contains("corrupt"), "{why}");
    // An older broken manifest leaves the home whole in the list (its newest reads) ...
    let old = by_name("old-broken");
    assert!(old.latest.is_some() && old.broken.is_none(), "{old:#?}");
    let healthy = by_name("healthy");
    assert!(healthy.latest.is_some() && healthy.broken.is_none() && healthy.lease.is_none(), "{healthy:#?}");
    // ... and its snapshot listing names it while keeping the newest.
    let listing = v.snapshot_listing("old-broken").await.unwrap();
    assert!(matches!(&listing[0], ListedSnapshot::Broken { id, why } if id.ends_with('1') && why.contains("corrupt")), "{listing:#?}");
    assert!(matches!(&listing[1], ListedSnapshot::Readable(s) if s.id.ends_with('2')), "{listing:#?}");
}
