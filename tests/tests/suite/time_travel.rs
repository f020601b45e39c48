//! Issue 34: time travel for runs, on the real CLIs against the scripted model.
//!
//! - Turn 1 edits a file with the CLI's own edit tool, turn 2 writes one through the shell:
//!   both show in their turn's `turn_diff` event and in `agent_diff` (HTTP, CLI).
//! - `agent_rewind ... both` to turn 1 gives the folder back byte for byte (turn 2's file gone,
//!   turn 1's content and mode back), and the next turn's model request holds turn 1's
//!   conversation and not turn 2's (Claude Code `--resume-session-at`, Codex app-server
//!   `thread/fork`).
//! - A bad `to_turn` and a rewind mid-turn are refused with clear typed errors.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use spaces_sdk::{
    AgentDiffRequest, AgentForkRequest, AgentMergeRequest, AgentRewindRequest, AgentStartRequest, ErrorCode, EventKind, FileChangeKind,
    RewindWhat, SpaceAgentOptions,
};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::{CLAUDE, CODEX_APP_SERVER, H};
use crate::support::{describe, require_cli, settled, TestDaemon};

const TURN: Duration = Duration::from_secs(120);

fn refusal<T: std::fmt::Debug>(r: Result<T, spaces_sdk::client::ClientError>) -> spaces_sdk::ApiError {
    match r {
        Err(spaces_sdk::client::ClientError::Api(e)) => e,
        other => panic!("expected a typed refusal, got {other:?}"),
    }
}

/// Every file under `dir` but forks' worktrees and git's own: path -> (mode, contents).
fn tree(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if rel == ".spaces-worktrees" || rel == ".git" {
                continue;
            }
            let md = p.symlink_metadata().unwrap();
            if md.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, (md.permissions().mode() & 0o7777, std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out
}

fn start_request(h: H, server: &ScriptedServer, prompt: &str) -> AgentStartRequest {
    AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    }
}

/// The text of every model request after the first `skip`, as JSON.
fn requests_after(server: &ScriptedServer, skip: usize) -> Vec<String> {
    server.model_calls().into_iter().skip(skip).map(|c| c.json.map(|j| j.to_string()).unwrap_or_default()).collect()
}

/// A run whose turn 1 ("PROMPT-ONE") and turn 2 ("PROMPT-TWO") ran to their ends: its id and
/// the Space's folder after turn 1.
async fn two_turns(d: &TestDaemon, h: H, server: &ScriptedServer, root: &Path) -> (String, BTreeMap<String, (u32, Vec<u8>)>) {
    let run = d.client.agent_start(&start_request(h, server, "PROMPT-ONE write a file")).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_status("s", &run, TURN, settled).await;
    let after_one = tree(root);
    d.client.space("s").agent_message(&run, "PROMPT-TWO run a command", None).await.unwrap();
    d.wait_turn_end("s", &run, 2, TURN).await;
    d.wait_status("s", &run, TURN, settled).await;
    (run, after_one)
}

async fn edit_shell_rewind_both(h: H) {
    require_cli(h.tools, h.binary);
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    std::fs::write(root.join("notes.txt"), "before\n").unwrap();
    let script = Script::new([
        h.create_file(&root, "edited.txt", "written by the edit tool\n"),
        Reply::Text("TURN-ONE-DONE".into()),
        h.command("echo from-the-shell > shell.txt && chmod 600 notes.txt"),
        Reply::Text("TURN-TWO-DONE".into()),
        Reply::Text("TURN-THREE-DONE".into()),
    ]);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let (run, after_one) = two_turns(&d, h, &server, &root).await;

    // Each turn's diff, stored before its end.
    let events = d.events("s", &run).await;
    let diffs: Vec<&spaces_sdk::Event> = events.iter().filter(|e| e.kind == EventKind::TurnDiff).collect();
    assert_eq!(diffs.len(), 2, "{}", describe(&events));
    let files = |e: &spaces_sdk::Event| e.files.clone().unwrap_or_default().into_iter().map(|f| (f.path, f.change)).collect::<Vec<_>>();
    assert!(files(diffs[0]).contains(&("edited.txt".into(), FileChangeKind::Added)), "{:?}\n{}", diffs[0], describe(&events));
    assert_eq!(files(diffs[1]), [("notes.txt".into(), FileChangeKind::Changed), ("shell.txt".into(), FileChangeKind::Added)]);
    let end_two = events.iter().position(|e| e.kind == EventKind::TurnEnded && e.turn == 2).unwrap();
    let diff_two = events.iter().position(|e| e.kind == EventKind::TurnDiff && e.turn == 2).unwrap();
    assert!(diff_two < end_two, "the diff comes before the turn's end");

    // agent_diff over the client, HTTP and the CLI.
    let req = AgentDiffRequest { space: "s".into(), run_id: run.clone(), turn: Some(2), ..Default::default() };
    let report = d.client.agent_diff(&req).await.unwrap();
    assert_eq!((report.from_turn, report.to_turn), (1, 2));
    assert!(report.diff.contains("+++ b/shell.txt\n@@ -0,0 +1 @@\n+from-the-shell\n"), "{}", report.diff);
    assert!(report.diff.contains("old mode 100644\nnew mode 100600\n"), "{}", report.diff);
    let (code, body) = d.raw("GET", &format!("/v1/spaces/s/agents/{run}/diff?from_turn=0&to_turn=2"), None);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("edited.txt") && body.contains("shell.txt"), "{body}");
    let (ok, out) = d.cli(&["agent", "diff", &run, "--space", "s", "--turn", "1"]);
    assert!(ok && out.contains("A edited.txt (+1 -0)") && out.contains("+written by the edit tool"), "{out}");

    // Back to turn 1: the folder byte for byte, and the conversation.
    let calls_before = server.model_calls().len();
    let rewind = AgentRewindRequest { space: "s".into(), run_id: run.clone(), to_turn: 1, what: Some(RewindWhat::Both) };
    let r = d.client.agent_rewind(&rewind).await.unwrap();
    assert_eq!((r.to_turn, r.conversation.as_str()), (1, "native"), "{r:?}");
    assert_eq!(tree(&root), after_one, "the folder is turn 1's, byte for byte with modes");
    d.client.space("s").agent_message(&run, "PROMPT-THREE what now", None).await.unwrap();
    d.wait_turn_end("s", &run, 3, TURN).await;
    let events = d.events("s", &run).await;
    let asked = requests_after(&server, calls_before);
    assert!(!asked.is_empty(), "{}", describe(&events));
    let first = &asked[0];
    assert!(
        first.contains("PROMPT-THREE") && first.contains("PROMPT-ONE") && first.contains("TURN-ONE-DONE"),
        "turn 1's conversation goes on: {first}"
    );
    assert!(!first.contains("PROMPT-TWO") && !first.contains("TURN-TWO-DONE"), "turn 2 is rewound: {first}");
    assert!(events.iter().any(|e| e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("rewound to turn 1"))));
    // Turn 3 started from checkpoint 1: its diff is against it.
    let three = d
        .client
        .agent_diff(&AgentDiffRequest { space: "s".into(), run_id: run.clone(), turn: Some(3), ..Default::default() })
        .await
        .unwrap();
    assert_eq!((three.from_turn, three.files.len()), (1, 0), "{three:?}");
    d.client.space("s").agent_stop(&run).await.unwrap();
}

/// Mid-turn and past the last turn: typed refusals that name the field.
async fn bad_rewinds_are_refused(h: H) {
    require_cli(h.tools, h.binary);
    let d = TestDaemon::start().await;
    d.space("s").await;
    let script = Script::new([Reply::Text("one".into()), Reply::Hang]);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let run = d.client.agent_start(&start_request(h, &server, "hello")).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_status("s", &run, TURN, settled).await;
    let rewind = |to_turn| AgentRewindRequest { space: "s".into(), run_id: run.clone(), to_turn, what: None };
    let e = refusal(d.client.agent_rewind(&rewind(5)).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("to_turn")), "{e:?}");
    assert!(e.message.contains("to_turn must be 0 to 1"), "{}", e.message);
    let e = refusal(
        d.client.agent_diff(&AgentDiffRequest { space: "s".into(), run_id: run.clone(), turn: Some(7), ..Default::default() }).await,
    );
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("turn")), "{e:?}");

    d.client.space("s").agent_message(&run, "hang", None).await.unwrap();
    d.wait_status("s", &run, TURN, |s| s.status == spaces_sdk::Status::Running).await;
    let e = refusal(d.client.agent_rewind(&rewind(0)).await);
    assert_eq!(e.code, ErrorCode::AgentBusy, "{e:?}");
    assert!(e.message.contains("agent_interrupt"), "{}", e.message);
    d.client.space("s").agent_stop(&run).await.unwrap();
}

/// Fork at turn 1 of a 2-turn run: the fork's folder is checkpoint 1, its first model request
/// carries turn 1's conversation only, the parent is untouched; a merge of a non-conflicting
/// change applies, a conflicting one is reported and writes nothing; the fork of a run whose
/// Space became read-only is refused.
async fn fork_at_turn_one_then_merge(h: H) {
    require_cli(h.tools, h.binary);
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    std::fs::write(root.join("base.txt"), "alpha\nbeta\ngamma\n").unwrap();
    // A git repository: the fork's folder is a `git worktree` (none of the repository's hooks
    // runs: this one would leave a file behind).
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false", "-C"])
            .arg(&root)
            .args(args)
            .output()
            .unwrap();
        assert!(st.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&st.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "base.txt"]);
    git(&["commit", "-q", "-m", "base"]);
    let hook = root.join(".git/hooks/post-checkout");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", root.join("HOOK-RAN").display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = Script::new([
        h.create_file(&root, "one.txt", "turn one\n"),
        Reply::Text("TURN-ONE-DONE".into()),
        h.command("echo two > two.txt"),
        Reply::Text("TURN-TWO-DONE".into()),
        // The fork's agent writes its worktree and commits there.
        h.command(
            "echo mine > in-fork.txt; git add in-fork.txt && \
             git -c user.name=f -c user.email=f@localhost -c commit.gpgsign=false commit -q -m fork-commit",
        ),
        Reply::Text("FORK-DONE".into()),
    ]);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let (run, after_one) = two_turns(&d, h, &server, &root).await;
    let parent_after_two = tree(&root);
    // What a person sees of the parent's log (an idle CLI may still print hidden lines).
    let shown = |events: &[spaces_sdk::Event]| events.iter().filter(|e| e.category != spaces_sdk::Category::Hidden).count();
    let parent_events = shown(&d.events("s", &run).await);

    let req = AgentForkRequest { space: "s".into(), run_id: run.clone(), at_turn: 1, label: Some("try another way".into()) };
    let fork = d.client.agent_fork(&req).await.unwrap();
    assert_eq!((fork.parent_run_id.as_str(), fork.at_turn, fork.conversation.as_str()), (run.as_str(), 1, "native"), "{fork:?}");
    let wt = std::path::PathBuf::from(&fork.cwd);
    assert_eq!(fork.worktree, "git", "{fork:?}");
    assert_eq!(tree(&wt), after_one, "the fork's folder is turn 1's checkpoint");
    assert!(!root.join("HOOK-RAN").exists(), "no hook of the repository ran");
    let status = std::process::Command::new("git").arg("-C").arg(&wt).args(["status", "--porcelain"]).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("one.txt") && !status.contains("base.txt"), "git status in the worktree shows turn 1's change only: {status}");
    let st = d.client.space("s").agent_status(&fork.run_id, None).await.unwrap();
    assert_eq!((st.status, st.label.as_deref()), (spaces_sdk::Status::Idle, Some("try another way")), "{st:#?}");

    let calls = server.model_calls().len();
    d.client.space("s").agent_message(&fork.run_id, "PROMPT-FORK go", None).await.unwrap();
    d.wait_turn_end("s", &fork.run_id, 1, TURN).await;
    let fork_events = d.events("s", &fork.run_id).await;
    let asked = requests_after(&server, calls);
    assert!(!asked.is_empty(), "{}", describe(&fork_events));
    let first = &asked[0];
    assert!(first.contains("PROMPT-FORK") && first.contains("PROMPT-ONE") && first.contains("TURN-ONE-DONE"), "{first}");
    assert!(!first.contains("PROMPT-TWO") && !first.contains("TURN-TWO-DONE"), "only turn 1's conversation: {first}");
    assert_eq!(tree(&root), parent_after_two, "the parent's folder is untouched");
    assert_eq!(std::fs::read_to_string(wt.join("in-fork.txt")).unwrap_or_default(), "mine\n", "{}", describe(&fork_events));
    let log = std::process::Command::new("git").arg("-C").arg(&wt).args(["log", "--format=%s", "-1"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "fork-commit", "git works in the worktree: {}", describe(&fork_events));
    let parent_now = d.events("s", &run).await;
    assert_eq!(shown(&parent_now), parent_events + 1, "the parent got one notice of the fork: {}", describe(&parent_now));
    let notice = parent_now.iter().find(|e| e.summary.as_deref().is_some_and(|s| s.starts_with("forked at turn 1 into")));
    assert_eq!(notice.map(|e| e.turn), Some(2), "the notice is of the parent's latest turn: {}", describe(&parent_now));
    assert!(parent_now.iter().all(|e| e.turn <= 2), "the parent ran no turn: {}", describe(&parent_now));
    d.wait_status("s", &fork.run_id, TURN, settled).await;

    // A change only the fork made merges into the parent.
    std::fs::write(wt.join("fork.txt"), "from the fork\n").unwrap();
    std::fs::write(wt.join("base.txt"), "alpha\nbeta\ngamma-fork\n").unwrap();
    let merge = AgentMergeRequest { space: "s".into(), run_id: fork.run_id.clone() };
    let m = d.client.agent_merge(&merge).await.unwrap();
    assert!(m.merged && m.conflicts.is_empty(), "{m:?}");
    assert_eq!(m.applied, ["base.txt", "fork.txt", "in-fork.txt"], "{m:?}");
    assert_eq!(std::fs::read_to_string(root.join("fork.txt")).unwrap(), "from the fork\n");
    // Both change the same line: a conflict, and nothing is written.
    std::fs::write(root.join("base.txt"), "alpha\nbeta-parent\ngamma-fork\n").unwrap();
    std::fs::write(wt.join("base.txt"), "alpha\nbeta-fork\ngamma-fork\n").unwrap();
    std::fs::write(wt.join("more.txt"), "not merged\n").unwrap();
    let before = tree(&root);
    let m = d.client.agent_merge(&merge).await.unwrap();
    assert!(!m.merged && m.applied.is_empty(), "{m:?}");
    assert_eq!(m.conflicts.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(), ["base.txt"], "{m:?}");
    assert_eq!(tree(&root), before, "a merge with a conflict writes nothing");
    let (ok, out) = d.cli(&["agent", "merge", &fork.run_id, "--space", "s"]);
    assert!(!ok && out.contains("base.txt: both changed the same lines"), "{out}");
    assert_eq!(tree(&root), before);
    // Not a fork: a typed refusal.
    let e = refusal(d.client.agent_merge(&AgentMergeRequest { space: "s".into(), run_id: run.clone() }).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("run_id")), "{e:?}");
    let e = refusal(d.client.agent_fork(&AgentForkRequest { at_turn: 9, ..req.clone() }).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("at_turn")), "{e:?}");

    // Removing the fork removes its worktree.
    d.client.space("s").agent_stop(&fork.run_id).await.unwrap();
    d.client.agent_remove(&spaces_sdk::AgentRunRequest { space: "s".into(), run_id: fork.run_id.clone() }).await.unwrap();
    assert!(!wt.exists(), "the worktree went with the fork");

    // The Space made read-only: no fork.
    let add = spaces_sdk::SpaceAddRequest {
        name: "s".into(),
        root: root.display().to_string(),
        read_only: true,
        approvals: Default::default(),
        network: Default::default(),
        replace: true,
    };
    d.client.space_add(&add).await.unwrap();
    let e = refusal(d.client.agent_fork(&req).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("space")), "{e:?}");
    assert!(e.message.contains("read-only"), "{}", e.message);
    d.client.space("s").agent_stop(&run).await.unwrap();
}

/// Checkpoints between turns are spared their walk when the folder's watch saw nothing (issue
/// 34's bench line): a turn that changes nothing has an empty `turn_diff`, and what comes after
/// it is still caught, whoever makes it: the agent's shell in its sandbox (in a folder made two
/// turns earlier) and a person editing the folder while the run is idle.
async fn a_turn_that_changes_nothing_then_every_edit_still_shows(h: H) {
    require_cli(h.tools, h.binary);
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    let script = Script::new([
        h.command("mkdir -p deep/er && echo one > deep/er/f.txt"),
        Reply::Text("TURN-ONE-DONE".into()),
        Reply::Text("TURN-TWO-CHANGES-NOTHING".into()),
        h.command("echo two >> deep/er/f.txt && touch deep/er/new.txt"),
        Reply::Text("TURN-THREE-DONE".into()),
    ]);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let (run, _) = two_turns(&d, h, &server, &root).await;
    std::fs::write(root.join("by-hand.txt"), "a person wrote this while the run was idle\n").unwrap();
    d.client.space("s").agent_message(&run, "PROMPT-THREE edit again", None).await.unwrap();
    d.wait_turn_end("s", &run, 3, TURN).await;
    let events = d.events("s", &run).await;
    let files = |turn: u32| {
        let diff = events.iter().find(|e| e.kind == EventKind::TurnDiff && e.turn == turn);
        let diff = diff.unwrap_or_else(|| panic!("no turn_diff for turn {turn}: {}", describe(&events)));
        diff.files.clone().unwrap_or_default().into_iter().map(|f| (f.path, f.change)).collect::<Vec<_>>()
    };
    assert_eq!(files(1), [("deep/er/f.txt".into(), FileChangeKind::Added)], "{}", describe(&events));
    assert_eq!(files(2), [], "{}", describe(&events));
    assert_eq!(
        files(3),
        [
            ("by-hand.txt".into(), FileChangeKind::Added),
            ("deep/er/f.txt".into(), FileChangeKind::Changed),
            ("deep/er/new.txt".into(), FileChangeKind::Added)
        ],
        "{}",
        describe(&events)
    );
    d.client.space("s").agent_stop(&run).await.unwrap();
}

/// A fork of a plain folder (no git): its first turn resumes the parent's native session
/// (Claude Code finds it under the worktree's own project directory) and works in the worktree;
/// the parent's folder is untouched. Made right after the parent's turn ends, so the fork also
/// waits for the CLI to finish writing its transcript. A fork of that fork is made beside it.
async fn a_plain_folder_s_fork_resumes_natively(d: TestDaemon) {
    let h = CLAUDE;
    require_cli(h.tools, h.binary);
    let root = d.space("s").await;
    let script = Script::new([
        h.command("echo one > one.txt"),
        Reply::Text("TURN-ONE-DONE".into()),
        h.command("echo mine > in-fork.txt"),
        Reply::Text("FORK-DONE".into()),
        Reply::Text("ZERO-DONE".into()),
    ]);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let run = d.client.agent_start(&start_request(h, &server, "PROMPT-ONE write")).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_status("s", &run, TURN, settled).await;
    let before = tree(&root);
    assert!(before.contains_key("one.txt"), "{before:?}");
    let req = AgentForkRequest { space: "s".into(), run_id: run.clone(), at_turn: 1, label: None };
    let fork = d.client.agent_fork(&req).await.unwrap();
    assert_eq!((fork.worktree.as_str(), fork.conversation.as_str()), ("copy", "native"), "{fork:?}");
    assert!(!fork.cwd.ends_with('/'), "{fork:?}");
    let wt = std::path::PathBuf::from(&fork.cwd);
    let calls = server.model_calls().len();
    d.client.space("s").agent_message(&fork.run_id, "PROMPT-FORK go on", None).await.unwrap();
    d.wait_turn_end("s", &fork.run_id, 1, TURN).await;
    let events = d.events("s", &fork.run_id).await;
    let asked = requests_after(&server, calls);
    assert!(asked.first().is_some_and(|r| r.contains("PROMPT-ONE") && r.contains("TURN-ONE-DONE")), "{}", describe(&events));
    assert_eq!(std::fs::read_to_string(wt.join("in-fork.txt")).unwrap_or_default(), "mine\n", "{}", describe(&events));
    assert_eq!(tree(&root), before, "the parent's folder is untouched: {}", describe(&events));
    // A fork of the fork: its worktree is beside the first one, not nested in it.
    d.wait_status("s", &fork.run_id, TURN, settled).await;
    let again = AgentForkRequest { space: "s".into(), run_id: fork.run_id.clone(), at_turn: 1, label: None };
    let fork2 = d.client.agent_fork(&again).await.unwrap();
    let wt2 = std::path::PathBuf::from(&fork2.cwd);
    assert_eq!(wt2.parent(), wt.parent(), "{fork2:?}");
    assert_eq!(tree(&wt2), tree(&wt), "the fork of the fork holds the fork's turn 1");
    // A fork at turn 0 carries none of the conversation: no first prompt until its own.
    let zero = AgentForkRequest { space: "s".into(), run_id: run.clone(), at_turn: 0, label: None };
    let zero = d.client.agent_fork(&zero).await.unwrap();
    assert_eq!(zero.conversation, "fresh", "{zero:?}");
    let st = d.client.space("s").agent_status(&zero.run_id, None).await.unwrap();
    assert_eq!(st.prompt_excerpt, None, "a fork at turn 0 shows no prompt of its parent's: {st:?}");
    d.client.space("s").agent_message(&zero.run_id, "PROMPT-ZERO start over", None).await.unwrap();
    d.wait_turn_end("s", &zero.run_id, 1, TURN).await;
    let st = d.client.space("s").agent_status(&zero.run_id, None).await.unwrap();
    assert_eq!(st.prompt_excerpt.as_deref(), Some("PROMPT-ZERO start over"), "{st:?}");
    let listed = d.client.space("s").agent_list().await.unwrap();
    let parent = listed.iter().find(|r| r.run_id == run).map(|r| r.prompt_excerpt.clone());
    assert_eq!(parent, Some(Some("PROMPT-ONE write".to_owned())), "the parent keeps its own: {listed:?}");
    for id in [&zero.run_id, &fork2.run_id, &fork.run_id, &run] {
        d.client.space("s").agent_stop(id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_folder_s_fork_resumes_natively_root_daemon() {
    a_plain_folder_s_fork_resumes_natively(TestDaemon::start().await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_folder_s_fork_resumes_natively_unprivileged_daemon() {
    a_plain_folder_s_fork_resumes_natively(TestDaemon::start_unprivileged(Vec::new(), Vec::new()).await).await
}

macro_rules! per_harness {
    ($($name:ident),* $(,)?) => {
        mod claude_code {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::CLAUDE).await } )*
        }
        mod openai_codex {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::CODEX_APP_SERVER).await } )*
        }
    };
}

per_harness!(
    edit_shell_rewind_both,
    bad_rewinds_are_refused,
    fork_at_turn_one_then_merge,
    a_turn_that_changes_nothing_then_every_edit_still_shows
);
