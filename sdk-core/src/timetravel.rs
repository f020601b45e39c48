//! Time travel for runs (issue 34): the checkpoint the daemon takes of a run's working folder
//! at every turn boundary, what each turn changed (`turn_diff` events, `agent_diff`), and going
//! back to a turn (`agent_rewind`).
//!
//! Checkpoint 0 is the folder before the first turn; checkpoint N is the folder when turn N
//! ended. They are taken by the daemon, not the agent's CLI, so a file written through a shell
//! command is caught as well as one written by an edit tool, and no git is needed. Paths the
//! operator excludes (`checkpoint_exclude`; by default `.git`, `node_modules`, `target`,
//! `.venv`, `__pycache__`) are neither recorded nor touched.

use serde::{Deserialize, Serialize};

/// How a path changed over a turn (or a range of turns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileChangeKind {
    /// It did not exist before.
    Added,
    /// Its contents, mode, kind or link target changed.
    Changed,
    /// It no longer exists.
    Removed,
}

/// One file (or symlink) that changed: a `turn_diff` event's `files`, `agent_diff`'s `files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileChange {
    /// Path relative to the run's working folder, `/`-separated.
    pub path: String,
    /// `added`, `changed` or `removed`.
    pub change: FileChangeKind,
    /// Lines added (0 for a binary file).
    pub added_lines: u64,
    /// Lines removed (0 for a binary file).
    pub removed_lines: u64,
    /// Not compared line by line (not UTF-8, holds a NUL byte, or over 4 MiB): named in a diff,
    /// never dumped.
    pub binary: bool,
}

/// `agent_diff`: what a run's turns changed in its working folder. Give `turn` for one turn
/// (checkpoint `turn - 1` to checkpoint `turn`), or `from_turn` and `to_turn` for a range
/// (checkpoint `from_turn` to checkpoint `to_turn`; 0 is the folder before the first turn).
/// Without any: the last ended turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentDiffRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run (`run-` + hex).
    pub run_id: String,
    /// One turn (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The checkpoint the range starts at (0: before the first turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_turn: Option<u32>,
    /// The checkpoint the range ends at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_turn: Option<u32>,
}

/// The `agent_diff` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffReport {
    /// The run.
    pub run_id: String,
    /// The checkpoint compared from.
    pub from_turn: u32,
    /// The checkpoint compared to.
    pub to_turn: u32,
    /// Every changed file, sorted by path.
    pub files: Vec<FileChange>,
    /// The unified diff, git style (3 lines of context; `Binary files ... differ` for a binary
    /// file); empty when nothing changed.
    pub diff: String,
}

/// What `agent_rewind` takes back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RewindWhat {
    /// The working folder only: every file as checkpoint `to_turn` has it.
    Files,
    /// The conversation only: the next turn's model request holds the turns up to `to_turn`.
    Conversation,
    /// Both (the default).
    #[default]
    Both,
}

/// `agent_rewind`: take a run back to the end of turn `to_turn` (0: before its first turn).
/// Only while no turn runs (`AGENT_BUSY` mid-turn: interrupt it or wait for its end first).
///
/// Files: the working folder is made what checkpoint `to_turn` holds, byte for byte with modes;
/// files made later are removed; paths the checkpoints exclude are left alone. Conversation: the
/// next turn continues the session as it was at the end of `to_turn`, natively where the CLI can
/// (Claude Code `--resume-session-at` with `--fork-session`, Codex app-server `thread/fork` with
/// `lastTurnId`); otherwise (or for `to_turn` 0) the next turn starts a fresh session, which a
/// notice says. The event log keeps every turn and records the rewind as a `notice`; turn
/// numbers go on counting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRewindRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run (`run-` + hex).
    pub run_id: String,
    /// The turn whose end to go back to (0: before the first turn); at most the run's last
    /// ended turn.
    pub to_turn: u32,
    /// `files`, `conversation` or `both` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<RewindWhat>,
}

/// The `agent_rewind` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RewindReport {
    /// The run.
    pub run_id: String,
    /// The turn it went back to.
    pub to_turn: u32,
    /// What was taken back.
    pub what: RewindWhat,
    /// Files written back (contents or mode differed) and directories made.
    pub files_written: u64,
    /// Files and directories removed (made after the checkpoint).
    pub files_removed: u64,
    /// How the conversation goes on: `native` (the CLI resumes at that turn), `fresh` (a new
    /// session) or `unchanged` (`what: files`).
    pub conversation: String,
    /// One sentence saying what was done, for people.
    pub reason: String,
}

/// `agent_fork`: a new run that starts from a run's turn `at_turn`: its working folder is a new
/// worktree holding checkpoint `at_turn` (a `git worktree` when the Space is a git repository,
/// else a plain copy; under `.spaces-worktrees/` in the Space), and its session is the native
/// fork of the parent's at the end of that turn (Claude Code `--fork-session`, Codex app-server
/// `thread/fork`; other CLIs start a fresh session, which a notice says). The fork is created
/// idle, its turns counting from 1: `agent_message` runs its first turn. The parent is not
/// touched; both go on independently. `agent_merge` brings the fork's changes back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentForkRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run to fork (`run-` + hex).
    pub run_id: String,
    /// The turn whose end the fork starts from (0: before the run's first turn).
    pub at_turn: u32,
    /// The fork's label (default: the parent's, with ` (fork)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// The `agent_fork` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForkReport {
    /// The new run.
    pub run_id: String,
    /// The run it was forked from.
    pub parent_run_id: String,
    /// The parent's turn it starts from.
    pub at_turn: u32,
    /// The fork's working folder (absolute).
    pub cwd: String,
    /// `git` (a `git worktree`) or `copy`.
    pub worktree: String,
    /// `native` (the CLI's own fork of the session) or `fresh` (a new session).
    pub conversation: String,
}

/// `agent_merge`: bring what a fork changed in its folder since its fork point into its
/// parent's folder, a three-way merge per file against the fork point's checkpoint. Both runs
/// must be idle. A path only the fork changed is taken; one both changed differently is merged
/// line by line when both are text, else (or when the same lines changed) it is a conflict.
/// With any conflict nothing is written: the answer names each conflicting file and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentMergeRequest {
    /// The Space the fork belongs to.
    pub space: String,
    /// The fork (`run-` + hex).
    pub run_id: String,
}

/// One file `agent_merge` could not merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeConflict {
    /// Path relative to the folders, `/`-separated.
    pub path: String,
    /// Why, for people (`both changed the same lines`, ...).
    pub why: String,
}

/// The `agent_merge` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeReport {
    /// The fork.
    pub run_id: String,
    /// The run merged into.
    pub parent_run_id: String,
    /// True when the fork's changes are now in the parent's folder (no conflict).
    pub merged: bool,
    /// Paths written or removed in the parent's folder (empty when `merged` is false).
    pub applied: Vec<String>,
    /// Paths that could not be merged, each with why; nothing was written when any.
    pub conflicts: Vec<MergeConflict>,
}
