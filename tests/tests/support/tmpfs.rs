//! A daemon whose state dir is a small file system of its own (a `tmpfs`), so a test can fill
//! its disk: [`TestDaemon::start_on_tmpfs`] and the [`Tmpfs`] guard that unmounts it.
//!
//! Mounting needs root. A test that needs it fails when not run as root (the test gate forbids
//! silent skips): run the suite as root, as CI does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use spaces_sdk::client::{Client, Endpoint};

use super::{TestDaemon, NOBODY};

/// A `tmpfs` mounted at `path`; unmounted (lazily: the daemon or a shim may still hold files
/// there) when dropped.
pub struct Tmpfs {
    path: PathBuf,
    /// The file [`Tmpfs::fill`] wrote, while it is there.
    filler: Option<PathBuf>,
    /// A temp dir holding the mount point, removed after the unmount: its own removal (the
    /// daemon's `TempDir`, dropped first) fails on the busy mount point and would leave it.
    cleanup: Option<PathBuf>,
}

impl Tmpfs {
    /// Mount a `tmpfs` of `size_kib` KiB at `path` (made if missing), mode 0700, owned by
    /// `owner` (uid and gid; root when `None`). Panics when not root, or when the mount fails.
    pub fn mount(path: &Path, size_kib: u64, owner: Option<u32>) -> Tmpfs {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test mounts a small tmpfs as the daemon's state dir and must run as root (uid {})",
            nix::unistd::geteuid()
        );
        std::fs::create_dir_all(path).expect("the mount point");
        let id = owner.unwrap_or(0);
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kib}k,mode=0700,uid={id},gid={id}"), "tmpfs"])
            .arg(path)
            .output()
            .expect("run mount");
        assert!(out.status.success(), "mount a tmpfs at {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        Tmpfs { path: path.to_owned(), filler: None, cleanup: None }
    }

    /// Fill the file system: a file written until the disk refuses more (`ENOSPC`, which the
    /// call checks). Returns the bytes written.
    pub fn fill(&mut self) -> u64 {
        let path = self.path.join("filler");
        let mut file = std::fs::File::create(&path).expect("the filler");
        self.filler = Some(path);
        let chunk = vec![0x5au8; 64 * 1024];
        let mut written = 0u64;
        let mut piece = chunk.len();
        loop {
            match file.write(&chunk[..piece]) {
                Ok(0) => panic!("the filler's write returned 0 before the disk was full"),
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) && piece > 1 => piece = 1,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => return written,
                Err(e) => panic!("filling {}: {e}", self.path.display()),
            }
        }
    }

    /// Remove the filler: the disk has room again.
    pub fn free(&mut self) {
        if let Some(path) = self.filler.take() {
            std::fs::remove_file(path).expect("remove the filler");
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        if let Some(dir) = &self.cleanup {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl TestDaemon {
    /// A daemon whose state dir is a `tmpfs` of `size_kib` KiB (see [`Tmpfs`]), its stderr (its
    /// log) in `<temp dir>/spacesd.log`, outside that file system ([`TestDaemon::log_text`]).
    /// With `unprivileged`, the daemon runs as `nobody`, as [`TestDaemon::start_unprivileged`]
    /// starts it, and the file system is that user's. Drop the [`Tmpfs`] after the daemon.
    pub async fn start_on_tmpfs(extra_env: Vec<(String, String)>, size_kib: u64, unprivileged: bool) -> (TestDaemon, Tmpfs) {
        let dir = tempfile::Builder::new().prefix("spaces-test-").tempdir().expect("tempdir");
        let user = unprivileged.then_some(NOBODY);
        if let Some(uid) = user {
            let owner = Some(nix::unistd::Uid::from_raw(uid));
            nix::unistd::chown(dir.path(), owner, Some(nix::unistd::Gid::from_raw(uid))).expect("chown the temp dir");
        }
        let state = dir.path().join("state");
        let mut tmpfs = Tmpfs::mount(&state, size_kib, user);
        tmpfs.cleanup = Some(dir.path().to_owned());
        let client = Client::new(Endpoint::Unix(state.join("spacesd.sock")));
        let log = Some(dir.path().join("spacesd.log"));
        let mut d = TestDaemon {
            dir,
            child: None,
            client,
            extra_env,
            extra_args: Vec::new(),
            binary: None,
            nofile: None,
            leak_fd: false,
            user,
            log,
        };
        d.spawn().await;
        (d, tmpfs)
    }

    /// What the daemon wrote to its log so far, when started with one
    /// ([`TestDaemon::start_on_tmpfs`], [`TestDaemon::keep_log`]); empty otherwise.
    pub fn log_text(&self) -> String {
        self.log.as_ref().and_then(|p| std::fs::read(p).ok()).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
    }
}
