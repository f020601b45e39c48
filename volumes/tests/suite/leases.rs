//! Leases on both backends: held, renew, release, takeover only after expiry, fencing.

use std::time::Duration;

use spaces_volumes::{NoProgress, SaveOptions, VolumeError};

use super::support::*;

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

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

both!(acquire_held_renew_release, held_renew_release);
async fn held_renew_release(backend: Backend) {
    let tv = TestVolume::new(backend);
    let a = &tv.volume;
    let b = tv.other_host("host-b");
    assert_eq!(a.lease_info("agent").await.unwrap(), None);
    let la = a.acquire("agent", "host-a/run-1", Duration::from_secs(30)).await.unwrap();
    let info = la.info();
    assert_eq!((info.home.as_str(), info.holder.as_str(), info.epoch), ("agent", "host-a/run-1", 1));
    assert_eq!(b.lease_info("agent").await.unwrap(), Some(info.clone()));

    match b.acquire("agent", "host-b/run-7", Duration::from_secs(30)).await {
        Err(VolumeError::LeaseHeld { home, holder, expires_ms }) => {
            assert_eq!((home.as_str(), holder.as_str(), expires_ms), ("agent", "host-a/run-1", info.expires_ms));
        }
        other => panic!("expected LeaseHeld, got {other:?}"),
    }

    tokio::time::sleep(Duration::from_millis(20)).await;
    la.renew().await.unwrap();
    assert_eq!(la.info().epoch, 2);
    assert!(la.info().expires_ms > info.expires_ms);
    assert_eq!(b.lease_info("agent").await.unwrap(), Some(la.info()));

    // The same holder takes it again (a restarted daemon); the older Lease is then superseded.
    let la2 = a.acquire("agent", "host-a/run-1", Duration::from_secs(30)).await.unwrap();
    assert_eq!(la2.info().epoch, 3);
    assert!(matches!(la.renew().await, Err(VolumeError::LeaseLost { .. })));

    la2.release().await.unwrap();
    assert_eq!(a.lease_info("agent").await.unwrap(), None);
    let lb = b.acquire("agent", "host-b/run-7", Duration::from_secs(30)).await.unwrap();
    assert_eq!(lb.info().holder, "host-b/run-7");
    assert_eq!(lb.info().epoch, 5);
    if let Some(dir) = &tv.store_dir {
        // Old epoch records are pruned: the current one and the one before it stay.
        assert_eq!(names(&dir.join("homes/agent/lease")), ["00000000000000000004.json", "00000000000000000005.json"]);
    }
}

both!(takeover_only_after_expiry_and_fencing, takeover_and_fencing);
async fn takeover_and_fencing(backend: Backend) {
    let tv = TestVolume::new(backend);
    let a = &tv.volume;
    let b = tv.other_host("host-b");
    let home = tv.dir("home");
    sample_home(&home);
    let la = a.acquire("agent", "host-a/run-1", Duration::from_millis(1500)).await.unwrap();
    let first = a.save(&la, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
    let expires = la.info().expires_ms;

    // Host A "dies" (stops renewing). B is refused until the expiry, never sooner.
    loop {
        match b.acquire("agent", "host-b/run-2", Duration::from_secs(30)).await {
            Err(VolumeError::LeaseHeld { holder, expires_ms, .. }) => {
                assert_eq!((holder.as_str(), expires_ms), ("host-a/run-1", expires));
                assert!(now_ms() < expires + 50, "still refused after expiry");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(lb) => {
                assert!(now_ms() >= expires, "taken over {} ms before expiry", expires - now_ms());
                assert_eq!(lb.info().epoch, 2);
                // Fencing: A's save with the superseded lease commits nothing.
                write(&home.join("late.txt"), b"written by a host that lost its lease");
                let late = a.save(&la, &home, &SaveOptions::default(), &NoProgress).await;
                assert!(matches!(late, Err(VolumeError::LeaseLost { .. })), "{late:?}");
                let ids: Vec<String> = b.snapshots("agent").await.unwrap().into_iter().map(|s| s.id).collect();
                assert_eq!(ids, std::slice::from_ref(&first.snapshot.id));
                assert!(matches!(a.compact(&la, 1).await, Err(VolumeError::LeaseLost { .. })));
                assert!(matches!(a.import(&la, &home, serde_json::Value::Null, &NoProgress).await, Err(VolumeError::LeaseLost { .. })));
                assert!(matches!(a.delete(la).await, Err(VolumeError::LeaseLost { .. })));
                assert_eq!(b.snapshots("agent").await.unwrap().len(), 1);
                // B, the live holder, saves fine.
                let bs = b.save(&lb, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
                assert_eq!(bs.snapshot.id, "00000000000000000002");
                return;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[tokio::test]
async fn an_expired_lease_cannot_save_even_if_nobody_took_it() {
    let tv = TestVolume::new(Backend::Local);
    let home = tv.dir("home");
    sample_home(&home);
    let la = tv.volume.acquire("x", "h/1", Duration::from_millis(200)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = tv.volume.save(&la, &home, &SaveOptions::default(), &NoProgress).await;
    assert!(matches!(r, Err(VolumeError::LeaseLost { .. })), "{r:?}");
    assert!(matches!(tv.volume.snapshots("x").await, Err(VolumeError::HomeNotFound { .. })));
}
