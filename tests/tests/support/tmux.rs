//! A real terminal for tests of what a person sees: a tmux server of its own (socket name unique
//! to the test) with one session, driven by `send-keys` and read by `capture-pane`; killed on drop.

use std::time::{Duration, Instant};

/// The one session of a [`Tmux`] server.
const SESSION: &str = "main";

/// A tmux server of its own with one session running a command.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server named after `tag` (unique per test, e.g. a run id) running `command` in a
    /// `cols`×`rows` window. Panics with the install command when tmux is missing.
    pub fn start(tag: &str, cols: u16, rows: u16, command: &str) -> Tmux {
        if std::process::Command::new("tmux").arg("-V").output().is_err() {
            panic!("tmux is needed for this test (apt-get install tmux; .ci/run installs it)");
        }
        let tmux = Tmux { socket: format!("spaces-test-{}-{tag}", std::process::id()) };
        let (cols, rows) = (cols.to_string(), rows.to_string());
        let started = tmux.cmd(&["new-session", "-d", "-x", &cols, "-y", &rows, "-s", SESSION, command]);
        assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
        tmux
    }

    /// Run a tmux command against this server.
    pub fn cmd(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux").args(["-L", &self.socket, "-f", "/dev/null"]).args(args).output().unwrap()
    }

    /// The pane as shown (each screen row a line).
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", SESSION]).stdout).into_owned()
    }

    /// The pane with wrapped lines joined back (`capture-pane -J`): a line longer than the
    /// window's width here is one the program printed too long.
    pub fn joined_screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-J", "-t", SESSION]).stdout).into_owned()
    }

    /// Type `keys` (tmux key names: `Enter`, `C-c`, or text).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend(keys);
        assert!(self.cmd(&args).status.success());
    }

    /// Resize the window to `cols`×`rows`.
    pub fn resize(&self, cols: u16, rows: u16) {
        let (cols, rows) = (cols.to_string(), rows.to_string());
        assert!(self.cmd(&["resize-window", "-t", SESSION, "-x", &cols, "-y", &rows]).status.success());
    }

    /// Wait (up to `timeout`) until the pane shows what `pred` wants; the screen then.
    pub async fn wait_screen(&self, timeout: Duration, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + super::scaled(timeout);
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; the screen:\n{s}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether the session (its command) is still running.
    pub fn alive(&self) -> bool {
        self.cmd(&["has-session", "-t", SESSION]).status.success()
    }

    /// Wait (up to `timeout`) until the session's command has exited; panics with `what` and
    /// the screen when it has not.
    pub async fn wait_exit(&self, timeout: Duration, what: &str) {
        let deadline = Instant::now() + timeout;
        while self.alive() {
            assert!(Instant::now() < deadline, "{what}:\n{}", self.screen());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}
