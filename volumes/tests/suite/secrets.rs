//! A save refuses to store the caller's secret values (`SaveOptions::refuse`): a file holding
//! one (in memory or spooled), a path or a symlink target naming one. The save fails naming the
//! file and the secret's name (never its value), and nothing is stored: no snapshot, no layer.

use spaces_volumes::{NoProgress, SaveOptions, SecretValue, VolumeError};

use super::support::*;

const KEY: &[u8] = b"sk-test-9f8e7d6c5b4a";

fn opts() -> SaveOptions {
    SaveOptions {
        refuse: vec![
            SecretValue { name: "ANTHROPIC_API_KEY".into(), value: KEY.to_vec() },
            SecretValue { name: "DB_PASSWORD".into(), value: b"hunter2-hunter2".to_vec() },
        ],
        ..SaveOptions::default()
    }
}

fn assert_secret<T: std::fmt::Debug>(r: Result<T, VolumeError>, path: &str, name: &str) {
    match r {
        Err(e @ VolumeError::Secret { .. }) => {
            let shown = e.to_string();
            assert!(!shown.contains(std::str::from_utf8(KEY).unwrap()) && !shown.contains("hunter2"), "{shown}");
            let VolumeError::Secret { path: p, name: n } = e else { unreachable!() };
            assert_eq!((p.as_str(), n.as_str()), (path, name));
        }
        other => panic!("expected a refusal naming {path:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_save_refuses_a_home_holding_a_secret_value_naming_the_file() {
    let tv = TestVolume::new(Backend::Local);
    let home = tv.dir("home");
    sample_home(&home);
    let lease = tv.lease("secrets").await;
    let first = tv.volume.save(&lease, &home, &opts(), &NoProgress).await.unwrap();
    let layers = tv.store_dir.as_ref().unwrap().join("homes/secrets/layers");
    let stored = names(&layers);

    // In a small file (read into memory), whatever surrounds it.
    let leak = [b"{\"primaryApiKey\":\"".as_slice(), KEY, b"\"}"].concat();
    write(&home.join("sessions/leak.json"), &leak);
    assert_secret(tv.volume.save(&lease, &home, &opts(), &NoProgress).await, "sessions/leak.json", "ANTHROPIC_API_KEY");
    std::fs::remove_file(home.join("sessions/leak.json")).unwrap();

    // In a big file (spooled), across the boundary of a read.
    let mut big = vec![b'x'; 9 << 20];
    let at = (1 << 20) - 5;
    big[at..at + 15].copy_from_slice(b"hunter2-hunter2");
    write(&home.join("big.bin"), &big);
    assert_secret(tv.volume.save(&lease, &home, &opts(), &NoProgress).await, "big.bin", "DB_PASSWORD");
    std::fs::remove_file(home.join("big.bin")).unwrap();

    // In a file name, and in a symlink's target.
    let named = format!("notes-{}", std::str::from_utf8(KEY).unwrap());
    write(&home.join(&named), b"x");
    // (named with the value itself hidden)
    assert_secret(tv.volume.save(&lease, &home, &opts(), &NoProgress).await, "notes-[redacted]", "ANTHROPIC_API_KEY");
    std::fs::remove_file(home.join(&named)).unwrap();
    std::os::unix::fs::symlink(format!("x/{}", std::str::from_utf8(KEY).unwrap()), home.join("link")).unwrap();
    assert_secret(tv.volume.save(&lease, &home, &opts(), &NoProgress).await, "link", "ANTHROPIC_API_KEY");
    std::fs::remove_file(home.join("link")).unwrap();

    // Nothing was stored by the refused saves; once the files are gone the home saves again.
    let snaps = tv.volume.snapshots("secrets").await.unwrap();
    assert_eq!(snaps.len(), 1);
    assert_eq!(names(&layers), stored);
    let again = tv.volume.save(&lease, &home, &opts(), &NoProgress).await.unwrap();
    assert!(again.snapshot.id > first.snapshot.id, "{again:?}");
    // Without secrets to refuse, the same file saves (the caller decides what is secret).
    write(&home.join("sessions/leak.json"), &leak);
    tv.volume.save(&lease, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
}
