//! Why a step of a run's turn failed: the one error type of the run path (issue 29).
//!
//! Every step between a prompt and its agent's process returns [`Error`]: the checkout or clone
//! before the first turn (`prepare`), finding or installing the CLI (`launcher`, `install`),
//! restoring a persistent home (`persist`), the launch plan and its files, the run's own API
//! socket (`api`), the start under a shim and the re-adoption after a restart (`proc`).
//!
//! Where it goes: a turn that cannot start fails with the error's text as its reason (the
//! actor's `fail_turn_before_start`: an `error` event and the run's status); a run that cannot
//! be re-adopted at daemon start is reported through [`crate::error::Error`], which the
//! operation table (`spaces-service`) maps to the wire once, as every daemon error is. A
//! refusal or a store failure met on the way ([`Error::Daemon`]) keeps its own code there.

use std::path::PathBuf;

/// A step of a run's turn that failed; its `Display` is the sentence the run's status and
/// `error` event carry (it names the path, program or Space involved).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or folder of the run (its shim directory, agent home, API socket, a harness's
    /// config file, the journal, a marker) could not be made, written or read.
    #[error(transparent)]
    Io(#[from] spaces_os::path_io::PathIo),
    /// The daemon cannot name its own command (`config::self_command`), needed to start a shim,
    /// to sandbox `git`, or to give the agent the `spaces` MCP server.
    #[error("cannot tell how to run spacesd {purpose}: {source}")]
    SelfCommand {
        /// What it was needed for ("shim", "for space_tools").
        purpose: &'static str,
        /// Why `/proc/self/exe` could not be read.
        source: std::io::Error,
    },
    /// The run's secrets (`env.json`, MCP server secrets) cannot be read: the agent does not
    /// start, since nothing of them could be redacted from its output.
    #[error("cannot read the run's secrets to redact them: {}", .0.to_api().message)]
    Secrets(#[source] crate::error::Error),
    /// The Space of the run (its name) was removed from the registry.
    #[error("the Space {0:?} of this run is no longer registered")]
    SpaceGone(String),
    /// The run (its id) is no longer in the store.
    #[error("run {0} is not in the store")]
    RunGone(String),
    /// The binary the operator set for a harness (`SPACES_<HARNESS>_BIN`) does not exist.
    #[error("the operator-set binary {} does not exist", .0.display())]
    BinaryMissing(PathBuf),
    /// `npm` could not be started to install a harness's CLI.
    #[error("cannot run npm (is Node.js installed?): {0}")]
    NpmStart(#[source] spaces_os::process::Error),
    /// `npm`'s output could not be read, or its end not waited for.
    #[error("npm {step}: {source}")]
    NpmIo {
        /// What failed ("output unreadable", "did not finish").
        step: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// `npm install` ended without the harness's binary in place.
    #[error("npm install of {packages} failed ({status}); binary {} {}: {tail}", binary.display(), if *exists { "exists" } else { "is missing" })]
    NpmFailed {
        /// The packages asked for, space separated.
        packages: String,
        /// npm's exit status.
        status: std::process::ExitStatus,
        /// Where the binary was expected.
        binary: PathBuf,
        /// Whether it is there anyway.
        exists: bool,
        /// npm's last lines, joined with ` | `.
        tail: String,
    },
    /// A persistent agent's home was saved by another harness's agent.
    #[error("the persistent agent {home:?} is a {agent} agent; its home cannot run {harness}")]
    HomeOfOtherAgent {
        /// The home's name.
        home: String,
        /// The harness that saved it.
        agent: String,
        /// The harness of this run.
        harness: String,
    },
    /// The restored home's session transcript could not be placed where the CLI looks for it.
    #[error("cannot place the session transcript for this folder: {0}")]
    Transcript(#[source] std::io::Error),
    /// `git` could not be run (not installed, or its sandbox not made) for `what`.
    #[error("cannot run git {what}: {source}")]
    GitRun {
        /// The git command ("checkout", "clone", "rev-parse").
        what: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// `git` ran and failed: `what` it did and git's last line of stderr.
    #[error("{what} failed: {reason}")]
    GitFailed {
        /// The command and its subject ("git checkout main", "git clone of URL").
        what: String,
        /// git's last line of stderr.
        reason: String,
    },
    /// A clone took longer than its limit.
    #[error("git clone of {url} took longer than {minutes} minutes")]
    CloneTimeout {
        /// The URL, its credentials cut.
        url: String,
        /// The limit, minutes.
        minutes: u64,
    },
    /// The finished clone could not be renamed onto the run's folder (something appeared there).
    #[error("the clone could not be moved to {} (is it still empty?): {source}", target.display())]
    CloneNotMoved {
        /// The run's folder.
        target: PathBuf,
        /// rename(2)'s error.
        source: std::io::Error,
    },
    /// The run's folder has no parent folder to clone beside.
    #[error("{} has no parent folder", .0.display())]
    NoParent(PathBuf),
    /// A re-adopted process generation's journal holds no start record: its shim never
    /// started the agent.
    #[error("the journal in {} holds no start of its agent", .0.display())]
    JournalWithoutStart(PathBuf),
    /// The shim did not start, or did not answer ([`spaces_os::shim::Error`]).
    #[error(transparent)]
    Shim(#[from] spaces_os::shim::Error),
    /// A refusal (a held lease, a `network: none` Space without a sandbox) or a state-dir failure
    /// met on the way; shown as its message, mapped to the wire with its own code.
    #[error("{}", .0.to_api().message)]
    Daemon(#[from] crate::error::Error),
}

impl From<spaces_store::Error> for Error {
    fn from(e: spaces_store::Error) -> Self {
        Error::Daemon(e.into())
    }
}

/// To the daemon's error: a refusal or store failure as it was; every other step `INTERNAL`
/// with this error's sentence.
impl From<Error> for crate::error::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Daemon(e) => e,
            other => crate::error::refuse(spaces_sdk::ErrorCode::Internal, other.to_string()),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A step's failure reaches the wire as `INTERNAL` with its sentence (naming the path); a
    /// refusal met on the way keeps its code and message.
    #[test]
    fn steps_go_out_internal_and_refusals_keep_their_code() {
        let e =
            Error::from(spaces_os::path_io::PathIo::at("create the agent home", "/s/runs/r1/home")(std::io::Error::from_raw_os_error(13)));
        assert!(e.to_string().starts_with("cannot create the agent home /s/runs/r1/home: "), "{e}");
        let wire = crate::error::Error::from(e).to_api();
        assert_eq!(wire.code, spaces_sdk::ErrorCode::Internal);
        assert!(wire.message.contains("/s/runs/r1/home"), "{}", wire.message);

        let held = crate::error::refuse(spaces_sdk::ErrorCode::LeaseHeld, "home h is held by host b");
        let e = Error::from(held);
        assert_eq!(e.to_string(), "home h is held by host b", "the reason is the refusal's message, without its code");
        let wire = crate::error::Error::from(e).to_api();
        assert_eq!((wire.code, wire.message.as_str()), (spaces_sdk::ErrorCode::LeaseHeld, "home h is held by host b"));
    }
}
