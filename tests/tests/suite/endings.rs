//! How a turn ends when its agent dies mid-tool after a daemon restart (issue 30: "error or
//! crashed?"). The decision: one rule for every harness, with or without a restart in between
//! (`harnesses/src/ending.rs`): an agent that exits with a code, even 0, without its final
//! result line ends the turn `error`; one killed by a signal nobody asked for ends it
//! `crashed`. `crashed` without any exit status is kept for a turn whose process the daemon
//! never saw end at all (its shim died too, case R35). Either way the open tool call is closed
//! `failed` first. Each wire of a harness is driven by a small fake CLI that opens a tool call
//! and waits for the test's signal to die, so the death falls after the restart's re-adoption
//! or while no daemon is up, as the test chooses.

use std::path::Path;
use std::time::Duration;

use spaces_sdk::{AgentStartRequest, Event, EventKind, SpaceAgentOptions, StopReason, ToolStatus};

use super::fake_agents::fake;
use crate::support::{describe, wait_until, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

/// How the fake agent dies once told to.
#[derive(Clone, Copy, Debug)]
enum Death {
    /// `exit 1`: the turn ends `error`.
    Exit,
    /// `kill -9` of itself: the turn ends `crashed`.
    Signal,
}

impl Death {
    fn shell(self) -> &'static str {
        match self {
            Death::Exit => "exit 1",
            Death::Signal => "kill -9 $$",
        }
    }

    fn stop_reason(self) -> StopReason {
        match self {
            Death::Exit => StopReason::Error,
            Death::Signal => StopReason::Crashed,
        }
    }
}

/// Whether the test lets the agent die while the new daemon is up (after re-adoption), or while
/// no daemon is up (the next one reads the exit from the journal).
#[derive(Clone, Copy, Debug)]
enum When {
    AfterRestart,
    WhileDown,
}

/// The lines of a fake CLI of `agent` that start a turn and open a tool call.
fn opening(agent: &str) -> &'static str {
    match agent {
        "claude-code" => concat!(
            r#"echo '{"type":"system","subtype":"init","session_id":"fake-session","tools":["Bash"],"model":"fake"}'"#,
            "\n",
            r#"echo '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make"}}],"id":"m1","model":"fake","role":"assistant"},"session_id":"fake-session"}'"#,
        ),
        _ => concat!(
            r#"echo '{"type":"thread.started","thread_id":"fake-thread"}'"#,
            "\n",
            r#"echo '{"type":"turn.started"}'"#,
            "\n",
            r#"echo '{"type":"item.started","item":{"id":"c1","type":"command_execution","command":"make","aggregated_output":"","status":"in_progress"}}'"#,
        ),
    }
}

/// A run of `agent` (a fake CLI) whose agent opens a tool call, the daemon killed with -9, the
/// agent told to die as `death` at `when`: the turn ends as the rule says, once, with its tool
/// call closed `failed` before it.
async fn dies_mid_tool_after_a_restart(agent: &str, death: Death, when: When) {
    let bin_dir = tempfile::tempdir().unwrap();
    // The agent waits in its cwd (the Space root) for `go-<run>`, says it is going, and dies.
    let script = format!(
        "{}\nwhile [ ! -e \"go-$SPACES_RUN_ID\" ]; do sleep 0.05; done\ntouch \"going-$SPACES_RUN_ID\"\n{}",
        opening(agent),
        death.shell()
    );
    let bin = fake(bin_dir.path(), "fake-agent", &script);
    let var = format!("SPACES_HARNESS_BIN_{}", agent.to_uppercase().replace('-', "_"));
    let mut d = TestDaemon::start_with_env(vec![(var, bin.display().to_string())]).await;
    let root = d.space("s").await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: agent.into(),
        prompt: "build it".into(),
        show: None,
        options: Some(SpaceAgentOptions::default()),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::ToolCall).await;
    d.kill();
    let go = |root: &Path| std::fs::write(root.join(format!("go-{run}")), b"").unwrap();
    let going = root.join(format!("going-{run}"));
    match when {
        When::WhileDown => {
            go(&root);
            wait_until("the agent to be told", WAIT, || going.exists()).await;
            d.start_again().await;
        }
        When::AfterRestart => {
            d.start_again().await;
            go(&root);
        }
    }
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(death.stop_reason()), "{agent} {death:?} {when:?}:\n{}", describe(&events));
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::TurnEnded).count(), 1, "{}", describe(&events));
    let closed: Vec<&Event> =
        events.iter().filter(|e| e.kind == EventKind::ToolUpdate && e.tool_status == Some(ToolStatus::Failed)).collect();
    assert_eq!(closed.len(), 1, "the open tool call is closed failed:\n{}", describe(&events));
    assert!(closed[0].seq < ended.seq, "the tool is closed before the turn ends:\n{}", describe(&events));
}

#[tokio::test]
async fn claude_code_exit_after_a_restart_ends_the_turn_error() {
    dies_mid_tool_after_a_restart("claude-code", Death::Exit, When::AfterRestart).await;
}

#[tokio::test]
async fn openai_codex_exit_after_a_restart_ends_the_turn_error() {
    dies_mid_tool_after_a_restart("openai-codex-exec", Death::Exit, When::AfterRestart).await;
}

#[tokio::test]
async fn claude_code_exit_while_the_daemon_is_down_ends_the_turn_error() {
    dies_mid_tool_after_a_restart("claude-code", Death::Exit, When::WhileDown).await;
}

#[tokio::test]
async fn openai_codex_kill_while_the_daemon_is_down_ends_the_turn_crashed() {
    dies_mid_tool_after_a_restart("openai-codex-exec", Death::Signal, When::WhileDown).await;
}

#[tokio::test]
async fn claude_code_kill_after_a_restart_ends_the_turn_crashed() {
    dies_mid_tool_after_a_restart("claude-code", Death::Signal, When::AfterRestart).await;
}
