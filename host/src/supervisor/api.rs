//! Each run's own API socket: who a caller is, by construction (issue 28).
//!
//! A run's directory holds `api/` (0700). The daemon listens on `api/spacesd.sock` for that
//! run alone while the run lives, and the run's sandbox mounts `api/` at
//! `spaces_os::sandbox::API_DIR` (`/run/spaces`), the only way out of the sandbox to the
//! daemon: the operator's socket, the token file and the rest of the state dir are not in the
//! sandbox at all. Every connection accepted on a run's socket is that run: a caller of its
//! Space with control scope, whatever it presents (`spacesd`'s `access::Access::for_run`). The
//! run's `spaces` MCP server (`spacesd mcp --state-dir /run/spaces --space NAME`) and the
//! agent's own tools use it.
//!
//! The socket is opened before a turn's process starts ([`RunSockets::open`], idempotent) and
//! again when a restarted daemon re-adopts the run; it is closed when the run stops or is done
//! ([`RunSockets::close`]). A process of the run that outlives its run finds nothing there.

use spaces_os::path_io::PathIo;
use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::future::BoxFuture;

/// `<run_dir>/api`: the directory mounted at `/run/spaces` in the run's sandbox.
pub fn dir(run_dir: &Path) -> PathBuf {
    run_dir.join("api")
}

/// Serves one run's socket: `(listener, run_id, space)` to a future that serves it until
/// dropped (set by `serve`, which owns the HTTP stack).
pub type Server = Arc<dyn Fn(tokio::net::UnixListener, String, String) -> BoxFuture<'static, ()> + Send + Sync>;

/// The open run sockets of this daemon.
#[derive(Default)]
pub struct RunSockets {
    server: OnceLock<Server>,
    open: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    /// Asked for before the server was set (runs re-adopted at start): opened when it is.
    waiting: Mutex<Vec<(String, String, PathBuf)>>,
}

impl RunSockets {
    /// From now on, run sockets are served by `server` (the first call wins); the ones asked
    /// for before open now. Call inside the runtime.
    pub fn set_server(&self, server: Server) {
        let _ = self.server.set(server);
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
        for (run_id, space, run_dir) in waiting {
            if let Err(why) = self.open(&run_id, &space, &run_dir) {
                tracing::warn!("run {run_id}: {why}");
            }
        }
    }

    /// Listen on `<run_dir>/api/spacesd.sock` for run `run_id` of `space`, unless it is already
    /// open (or no server is set: a daemon without HTTP, as in unit tests; the directory is
    /// made anyway, since the sandbox mounts it). Errors: the directory or the socket cannot be
    /// made ([`super::error::Error::Io`], naming the path).
    pub fn open(&self, run_id: &str, space: &str, run_dir: &Path) -> super::error::Result<()> {
        let dir = dir(run_dir);
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(PathIo::at("create the run's API directory", &dir))?;
        let Some(server) = self.server.get() else {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            waiting.push((run_id.to_owned(), space.to_owned(), run_dir.to_owned()));
            return Ok(());
        };
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.get(run_id).is_some_and(|h| !h.is_finished()) {
            return Ok(());
        }
        let path = dir.join(spaces_os::sandbox::API_SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = tokio::net::UnixListener::bind(&path).map_err(PathIo::at("listen on", &path))?;
        let task = tokio::spawn(server(listener, run_id.to_owned(), space.to_owned()));
        open.insert(run_id.to_owned(), task.abort_handle());
        Ok(())
    }

    /// Stop listening for run `run_id` and remove its socket file.
    pub fn close(&self, run_id: &str, run_dir: &Path) {
        if let Some(task) = self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(run_id) {
            task.abort();
        }
        let _ = std::fs::remove_file(dir(run_dir).join(spaces_os::sandbox::API_SOCKET));
    }
}
