//! Small file helpers: private directories and atomic private writes.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Create `dir` (and parents) and set it to 0700.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Runs `f`, which waits (on the disk, or on the event writer), as a blocking call: on a worker of a multi-thread tokio
/// runtime the wait is announced (`block_in_place`), so the worker's other tasks (a quiet run's
/// readers among them) move to another thread meanwhile; anywhere else `f` just runs. Under
/// load one `fsync` on ext4 waits for the file system's other dirty data too (tens of ms, and
/// more), and a task woken last on a blocked worker cannot be taken by another worker.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    if spaces_os::process::bulk::on_multi_thread_runtime() {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Write `bytes` to `path` atomically with mode 0600: a temp file in the same directory, fsync,
/// then rename over `path`. A crash leaves the old file or the new one, never half of either.
/// A blocking call ([`blocking`]).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    blocking(|| write_private_here(path, bytes))
}

fn write_private_here(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o600))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::time::Duration;

    /// One worker: a blocking call that waits for another task returns only if that task could
    /// run on another thread meanwhile (without the announcement, the wait times out).
    #[test]
    fn a_blocking_call_on_the_only_worker_lets_the_other_tasks_run() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let got = rt.block_on(async {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let (started_tx, started) = tokio::sync::oneshot::channel();
            let waiter = tokio::spawn(async move {
                let _ = started_tx.send(());
                // From here to its end this task holds the worker: it never yields.
                super::blocking(|| rx.recv_timeout(Duration::from_secs(10)))
            });
            started.await.unwrap();
            let sender = tokio::spawn(async move { tx.send(()) });
            sender.await.unwrap().unwrap();
            waiter.await.unwrap()
        });
        assert_eq!(got, Ok(()));
    }

    #[test]
    fn a_private_write_from_a_runtime_worker_or_a_plain_thread_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("f");
        super::write_private(&path, b"one").unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let p = path.clone();
        rt.block_on(async move { tokio::spawn(async move { super::write_private(&p, b"two") }).await.unwrap() }).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
