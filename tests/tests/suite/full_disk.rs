//! Issue 30, "A full disk is a state, not a panic": the daemon's state dir on a disk that fills
//! up while an agent prints. The turn ends with an error naming the disk, nothing panics (shim
//! or daemon), what was stored stays, and the next turn works once space is freed.
//!
//! The state dir is a small `tmpfs` (`support::tmpfs`); mounting it needs root, so these tests
//! fail, loudly, when not run as root.

use std::time::Duration;

use spaces_sdk::{EventKind, Status, StopReason};

use crate::support::{describe, settled, start_request, TestDaemon};

const WAIT: Duration = Duration::from_secs(90);
/// How a full disk is named in the turn's error and the run's reason.
const NAMED: &str = "no space left on device";
/// The state dir's size: the database, the daemon's reserve (4 MiB) and the run's files fit.
const TMPFS_KIB: u64 = 32 * 1024;
const ANSWER: &str = "answered after the disk was freed";

/// A Codex-like agent: for a prompt with `noisy`, a turn that prints 1 KB lines until it is
/// ended (a thousand a second or so); for any other, a turn that answers [`ANSWER`].
fn fake_codex() -> String {
    let line = format!(r#"{{"type":"item.completed","item":{{"id":"r","type":"reasoning","text":"{}"}}}}"#, "x".repeat(1000));
    format!(
        r#"prompt=$(cat)
echo '{{"type":"thread.started","thread_id":"fake-thread"}}'
echo '{{"type":"turn.started"}}'
case "$prompt" in
*noisy*)
  while :; do
    i=0
    while [ $i -lt 10 ]; do echo '{line}'; i=$((i+1)); done
    sleep 0.01
  done ;;
esac
echo '{{"type":"item.completed","item":{{"id":"m","type":"agent_message","text":"{ANSWER}"}}}}'
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}}}'"#
    )
}

/// The logs of the run's shims still on disk (`<state>/runs/<run>/shim-<g>/shim.log`).
fn shim_logs(d: &TestDaemon, run: &str) -> String {
    let dir = d.state_dir().join("runs").join(run);
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("shim-") {
            text += &String::from_utf8_lossy(&std::fs::read(entry.path().join("shim.log")).unwrap_or_default());
        }
    }
    text
}

/// The whole scenario, with the daemon root or `unprivileged` (as `nobody`, on a file system of
/// that user's).
async fn a_full_disk_ends_the_turn_and_the_next_works_once_freed(unprivileged: bool) {
    let bin_dir = tempfile::tempdir().unwrap();
    // `nobody` runs it too.
    std::fs::set_permissions(bin_dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = super::fake_agents::fake(bin_dir.path(), "fake-codex", &fake_codex());
    let env = vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), bin.display().to_string())];
    let (d, mut tmpfs) = TestDaemon::start_on_tmpfs(env, TMPFS_KIB, unprivileged).await;
    d.space("s").await;
    let run = d.client.agent_start(&start_request("s", "openai-codex-exec", "be noisy")).await.unwrap().run_id;
    // The agent prints; then the disk fills up under it.
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Thought).await;
    tmpfs.fill();

    // The turn ends with an error naming the disk, and the run does not stay `running`.
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{}", describe(&events));
    let text = ended.text.clone().unwrap_or_default();
    assert!(text.contains(NAMED), "the turn's error names the disk: {text:?}\n{}", describe(&events));
    assert!(
        events.iter().any(|e| e.kind == EventKind::Notice && e.summary.as_deref().unwrap_or("").contains(NAMED)),
        "a notice says the disk is full:\n{}",
        describe(&events)
    );
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.status, Status::Failed, "{st:#?}");
    assert!(st.reason.contains(NAMED), "the run's reason names the disk: {}", st.reason);
    assert!(st.accepts_message, "a follow-up is taken: {st:#?}");
    let thoughts = events.iter().filter(|e| e.kind == EventKind::Thought).count();
    assert!(thoughts > 0, "{}", describe(&events));

    // Nothing panicked: not the daemon (it still answers, its log says no panic), not a shim
    // (a shim that died would end the turn as "gone", not for the disk).
    let pid = d.pid().expect("the daemon runs");
    assert!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok(), "the daemon is alive");
    assert!(!d.log_text().contains("panicked"), "the daemon panicked:\n{}", d.log_text());
    assert!(!text.contains("gone"), "the shim died: {text}");
    let logs = shim_logs(&d, &run);
    assert!(!logs.contains("panicked"), "a shim panicked:\n{logs}");

    // Space returns: the next turn works, and what was stored stays.
    tmpfs.free();
    let r = d.client.space("s").agent_message(&run, "answer now", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    let ended = d.wait_turn_end("s", &run, 2, WAIT).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!((st.status, st.result_text.as_deref()), (Status::Idle, Some(ANSWER)), "{st:#?}");
    assert!(events.iter().filter(|e| e.kind == EventKind::Thought).count() >= thoughts, "what was stored stays");
    assert!(!d.log_text().contains("panicked"), "the daemon panicked:\n{}", d.log_text());
    drop(d);
    drop(tmpfs);
}

/// The operator's report, as a test: a daemon (root) whose state dir fills up while its agent
/// prints. The turn ends `error` naming the disk (in the `turn_ended` text, a `notice` and the
/// run's reason), the run is `failed` and takes a follow-up, nothing panics, the events stored
/// before stay, and once the filler is removed the follow-up's turn completes.
#[tokio::test]
async fn a_full_disk_ends_the_turn_with_an_error_naming_the_disk_and_the_next_turn_works_once_freed() {
    a_full_disk_ends_the_turn_and_the_next_works_once_freed(false).await;
}

/// The same with the daemon as `nobody` on a state dir of its own (the default install is not
/// root): no reserve of root's, no privilege, the same outcome.
#[tokio::test]
async fn an_unprivileged_daemon_on_a_full_disk_ends_the_turn_naming_the_disk_and_recovers_once_freed() {
    a_full_disk_ends_the_turn_and_the_next_works_once_freed(true).await;
}

/// A Codex-like agent whose turn waits for the file `gate` in its working folder (the Space),
/// then prints five numbered messages and ends its turn; a prompt with `free` answers [`ANSWER`]
/// at once.
fn gated_codex() -> String {
    format!(
        r#"prompt=$(cat)
echo '{{"type":"thread.started","thread_id":"gated-thread"}}'
echo '{{"type":"turn.started"}}'
case "$prompt" in
*free*) echo '{{"type":"item.completed","item":{{"id":"m","type":"agent_message","text":"{ANSWER}"}}}}' ;;
*)
  while [ ! -e gate ]; do sleep 0.02; done
  for i in 1 2 3 4 5; do
    echo '{{"type":"item.completed","item":{{"id":"m'$i'","type":"agent_message","text":"gated m'$i'"}}}}'
  done ;;
esac
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}}}'"#
    )
}

/// The kind behind the soak's lost `exited` event: the disk fills before the agent's first line,
/// then the agent prints and exits. Whatever write finds the disk full first, no event the
/// daemon had is lost: the turn's messages that were stored are its first ones, once each, in
/// order; its `turn_ended` and its process's `exited` are stored; seqs run 1..n without a gap;
/// and once space returns a follow-up completes.
async fn events_a_full_disk_held_back_are_stored_once_it_has_room(unprivileged: bool) {
    let bin_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin_dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = super::fake_agents::fake(bin_dir.path(), "gated-codex", &gated_codex());
    let env = vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), bin.display().to_string())];
    let (d, mut tmpfs) = TestDaemon::start_on_tmpfs(env, TMPFS_KIB, unprivileged).await;
    let gate = d.space("s").await.join("gate");
    let run = d.client.agent_start(&start_request("s", "openai-codex-exec", "wait for the gate")).await.unwrap().run_id;
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Session).await;
    tmpfs.fill();
    std::fs::write(&gate, "").unwrap();
    // The turn ends while the disk is full (its end is stored in the room the daemon keeps).
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    tmpfs.free();
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Exited && e.turn == 1).await;

    let events = d.events("s", &run).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "seqs 1..n, no gap:\n{}", describe(&events));
    let said: Vec<String> = events.iter().filter(|e| e.kind == EventKind::Message && e.turn == 1).filter_map(|e| e.text.clone()).collect();
    let first: Vec<String> = (1..=said.len()).map(|i| format!("gated m{i}")).collect();
    assert_eq!(said, first, "the turn's first messages, once each, in order:\n{}", describe(&events));
    if ended.stop_reason == Some(StopReason::EndTurn) {
        assert_eq!(said.len(), 5, "a turn that ended end_turn holds all its messages:\n{}", describe(&events));
    }
    let ends = events.iter().filter(|e| e.kind == EventKind::TurnEnded && e.turn == 1).count();
    let exits = events.iter().filter(|e| e.kind == EventKind::Exited && e.turn == 1).count();
    assert_eq!((ends, exits), (1, 1), "one turn_ended and one exited:\n{}", describe(&events));

    let r = d.client.space("s").agent_message(&run, "free answer", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    let ended = d.wait_turn_end("s", &run, 2, WAIT).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", &run).await));
    assert!(!d.log_text().contains("panicked"), "the daemon panicked:\n{}", d.log_text());
    drop(d);
    drop(tmpfs);
}

/// Issue 30 (the soak's full-disk fault lost a turn's `exited`): root daemon.
#[tokio::test]
async fn events_a_full_disk_held_back_are_stored_once_space_returns() {
    events_a_full_disk_held_back_are_stored_once_it_has_room(false).await;
}

/// The same with the daemon as `nobody`.
#[tokio::test]
async fn an_unprivileged_daemons_events_a_full_disk_held_back_are_stored_once_space_returns() {
    events_a_full_disk_held_back_are_stored_once_it_has_room(true).await;
}
