//! How the processes of an agent run are named on the OS: the run marker every one of them
//! carries in its environment (`SPACES_RUN_ID=<run_id>`, inherited by tools the CLI starts in
//! process groups of their own) and the per-turn process tag (`agent/<run_id>/turn-<n>`).
//!
//! The codespace process layer spawns and ends trees by whatever marker it is given; this module
//! is the one place that decides which marker means "a run". The variable name is also a contract
//! with operators and the end-to-end tests (they look for `SPACES_RUN_ID=<run>` in `/proc`).

use spaces_os::process::env_marker;

/// Environment variable holding the run id of an agent process and its descendants.
pub const RUN_ENV: &str = "SPACES_RUN_ID";

/// The environment entry (`SPACES_RUN_ID=<run_id>`) carried by every process of a run: the
/// marker that finds (and ends) all of them.
pub fn run_marker(run_id: &str) -> String {
    env_marker(RUN_ENV, run_id)
}

/// The process tag of turn `turn` of a run (`agent/<run_id>/turn-<n>`), as reported in
/// `process_tag` and stored in the agent's `SPACES_PROCESS_TAG`.
pub fn turn_tag(run_id: &str, turn: u32) -> String {
    format!("agent/{run_id}/turn-{turn}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_marked_by_its_id_and_each_turn_by_its_tag() {
        assert_eq!(run_marker("run-abc"), "SPACES_RUN_ID=run-abc");
        assert_eq!(turn_tag("run-abc", 1), "agent/run-abc/turn-1");
    }
}
