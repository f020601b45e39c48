//! `spacesd serve --exit-when-unused`: the daemon an SDK starts ends when its last client is
//! gone, instead of running on after the script that started it (issue 32).
//!
//! Clients hold the daemon by keeping one connection open on `<state dir>/spacesd.hold`
//! ([`spaces_sdk::local::hold`]); the kernel closes a connection when its process exits, however
//! it exits. The daemon ends once no connection has been open for [`GRACE`] and no turn is in
//! flight on any run (a turn is never cut short for this; the agent processes of idle runs
//! live on under their shims, and the next daemon re-adopts them). A client that writes
//! `keep` ([`spaces_sdk::local::KEEP_LINE`]) turns the rule off for this daemon's life.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spaces_host::supervisor::Supervisor;
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

/// How long the daemon waits, with no client holding it, before it ends: long enough for a
/// script that closes one client and opens the next.
pub const GRACE: Duration = Duration::from_secs(3);

/// How often a daemon with no client looks again whether its turns in flight have ended.
const TURN_POLL: Duration = Duration::from_millis(500);

/// The count of clients holding the daemon, and whether one asked to keep it.
#[derive(Clone)]
pub struct Holders {
    count: Arc<watch::Sender<usize>>,
    keep: Arc<AtomicBool>,
}

impl Holders {
    /// Binds `path` (0600) and counts the connections made to it from now on. A socket file
    /// nothing answers on (a daemon killed) is replaced; one that answers is another daemon's,
    /// starting beside this one: then this one stops here, before it takes the API socket (the
    /// hold socket is bound first, so of two daemons starting at once exactly one goes on).
    /// Errors: the bind's, or `AddrInUse` naming the other daemon.
    pub fn listen(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let listener = match tokio::net::UnixListener::bind(path) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(std::io::Error::new(e.kind(), "another spacesd of this state dir holds it"));
                }
                std::fs::remove_file(path)?;
                tokio::net::UnixListener::bind(path)?
            }
            other => other?,
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let holders = Holders { count: Arc::new(watch::Sender::new(0)), keep: Arc::new(AtomicBool::new(false)) };
        let counted = holders.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                counted.count.send_modify(|n| *n += 1);
                let held = counted.clone();
                tokio::spawn(async move {
                    held.read_until_closed(conn).await;
                    held.count.send_modify(|n| *n -= 1);
                });
            }
        });
        Ok(holders)
    }

    /// Reads the client's lines until it closes the connection; `keep` keeps the daemon.
    async fn read_until_closed(&self, conn: tokio::net::UnixStream) {
        let mut lines = tokio::io::BufReader::new(conn).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim().as_bytes() == spaces_sdk::local::KEEP_LINE.trim_ascii() && !self.keep.swap(true, Ordering::SeqCst) {
                eprintln!("spacesd: a client asked to keep this daemon: it runs on after its last client");
            }
        }
    }

    /// Resolves when the daemon is unused: no client for [`GRACE`] (`grace` in tests), no turn
    /// in flight, and no client asked to keep it. Never resolves once one did.
    pub async fn unused(&self, sup: &Supervisor, grace: Duration) {
        let mut count = self.count.subscribe();
        loop {
            // Until nobody holds it...
            let _ = count.wait_for(|n| *n == 0).await;
            // ...for the whole grace period...
            let held_again = tokio::time::timeout(grace, count.wait_for(|n| *n > 0)).await;
            if self.keep.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            if held_again.is_ok() {
                continue;
            }
            // ...and no turn is in flight (a store error counts as busy: look again).
            if sup.turns_in_flight().unwrap_or(1) == 0 {
                return;
            }
            tokio::time::sleep(TURN_POLL).await;
        }
    }
}
