//! Every transition of the run actor's machine, with a fake process in place of a shim: no
//! daemon, no store, no clock (times are given).

use std::time::Duration;

use spaces_harnesses::ProcessModel;
use spaces_sdk::{Phase, Status, StopReason};
use tokio::time::Instant;

use super::*;

/// The process a test's machine holds: a name where the actor holds a shim client.
#[derive(Debug, PartialEq)]
struct FakeProcess(&'static str);

const LIMIT: Duration = Duration::from_secs(10);

fn setup(model: ProcessModel) -> Setup {
    Setup { model, exit_when_idle: false, persistent: false, stall_limit: LIMIT, resumes: true }
}

fn machine(model: ProcessModel) -> (Machine<FakeProcess>, Instant) {
    let now = Instant::now();
    (Machine::new(setup(model), 0, now), now)
}

/// A long-lived agent's machine with a live process.
fn live() -> (Machine<FakeProcess>, Instant) {
    let (mut m, now) = machine(ProcessModel::LongLived);
    m.spawned(FakeProcess("agent"), None);
    (m, now)
}

fn queue(m: &mut Machine<FakeProcess>, texts: &[&str]) {
    m.queue.extend(texts.iter().map(|t| Queued::from((*t).to_owned())));
}

fn texts(m: &Machine<FakeProcess>) -> Vec<&str> {
    m.queue.iter().map(|q| q.text.as_str()).collect()
}

fn set(status: Status, phase: Phase, reason: &str) -> AfterExit {
    AfterExit::Set(Some(Change { status, phase, reason: reason.to_owned() }))
}

/// The machine's process ends and the plan for its exit, mid-turn or not.
fn exit(m: &mut Machine<FakeProcess>, code: Option<i32>, signal: Option<i32>, was_in_turn: bool, status: Status) -> ExitPlan {
    let ended = m.process_ended().expect("a live process");
    m.exit_plan(&ended, code, signal, was_in_turn, status)
}

// ----- messages -----

#[test]
fn a_message_with_no_turn_in_flight_starts_the_next_turn_now() {
    let (m, _) = machine(ProcessModel::LongLived);
    assert_eq!(m.admit(Status::Idle, false, false), Admit::StartNow);
    let (m, _) = live();
    assert_eq!(m.admit(Status::Idle, false, false), Admit::StartNow);
}

#[test]
fn a_message_mid_turn_is_queued_behind_it_at_its_position() {
    let (mut m, _) = live();
    assert_eq!(m.admit(Status::Running, false, true), Admit::Queue(1));
    queue(&mut m, &["first"]);
    assert_eq!(m.admit(Status::Running, false, true), Admit::Queue(2));
}

#[test]
fn a_forced_message_mid_turn_interrupts_the_turn_and_runs_next() {
    let (m, _) = live();
    assert_eq!(m.admit(Status::Running, true, true), Admit::InterruptFirst);
}

#[test]
fn a_message_beyond_the_queue_limit_is_refused() {
    let (mut m, _) = live();
    let full: Vec<String> = (0..MAX_QUEUED_MESSAGES).map(|i| i.to_string()).collect();
    queue(&mut m, &full.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(m.admit(Status::Running, false, true), Admit::QueueFull(MAX_QUEUED_MESSAGES));
    assert_eq!(m.admit(Status::Running, true, true), Admit::QueueFull(MAX_QUEUED_MESSAGES));
}

#[test]
fn a_message_to_a_stopped_run_is_answered_and_one_while_stopping_is_refused() {
    let (mut m, _) = live();
    assert_eq!(m.admit(Status::Stopped, false, false), Admit::Stopped);
    m.stop();
    assert_eq!(m.admit(Status::Running, false, true), Admit::Stopping);
    assert_eq!(m.admit(Status::Idle, false, false), Admit::Stopping);
}

#[test]
fn a_per_turn_process_that_has_not_exited_yet_queues_the_next_message() {
    let (mut m, _) = machine(ProcessModel::PerTurn);
    m.spawned(FakeProcess("exec"), None);
    // Its turn ended (none in flight), its process has not exited: the message is the next
    // turn, started once it has (not "queued behind a running turn").
    assert_eq!(m.admit(Status::Idle, false, false), Admit::AfterExit);
    // A force with no turn in flight interrupts nothing: the same.
    assert_eq!(m.admit(Status::Idle, true, false), Admit::AfterExit);
    // A second message waits behind the first.
    queue(&mut m, &["a"]);
    assert_eq!(m.admit(Status::Running, false, false), Admit::Queue(2));
}

#[test]
fn only_a_message_that_starts_a_process_has_its_folder_checked_first() {
    let (m, _) = machine(ProcessModel::LongLived);
    assert!(m.message_starts_process(), "no process: a message starts one");
    let (m, _) = live();
    assert!(!m.message_starts_process(), "a live long-lived agent takes it on its stdin");
    let (mut m, _) = machine(ProcessModel::PerTurn);
    m.spawned(FakeProcess("exec"), None);
    assert!(m.message_starts_process(), "a per-turn CLI starts a process for every turn");
}

// ----- interrupts -----

#[test]
fn an_interrupt_with_no_turn_in_flight_does_nothing_and_is_not_remembered() {
    let (mut m, _) = live();
    assert!(!m.interrupt(false));
    assert!(!m.live().unwrap().interrupted);
}

#[test]
fn an_interrupt_mid_turn_marks_the_process_so_its_exit_is_not_a_failure() {
    let (mut m, _) = live();
    assert!(m.interrupt(true));
    assert!(m.live().unwrap().interrupted);
    // Codex exits 1 on SIGINT: the run waits for a follow-up, no failure is counted.
    let plan = exit(&mut m, Some(1), None, true, Status::Running);
    assert_eq!(plan.then, set(Status::Idle, Phase::Waiting, INTERRUPTED));
    assert_eq!(m.fast_failures, 0);
}

#[test]
fn an_interrupted_exit_with_a_forced_message_queued_lets_it_run_next() {
    let (mut m, _) = live();
    m.interrupt(true);
    queue(&mut m, &["forced"]);
    let plan = exit(&mut m, Some(1), None, true, Status::Running);
    assert_eq!(plan, ExitPlan { save_home: false, dropped: 0, then: AfterExit::Set(None) });
    assert!(matches!(m.advance(false, 1), Advance::Start(q) if q.text == "forced"));
}

#[test]
fn a_turn_start_clears_the_interrupt_and_the_stall_notice() {
    let (mut m, now) = live();
    m.interrupt(true);
    m.stall.noticed = Some(now);
    let later = now + Duration::from_secs(30);
    m.turn_started("next".to_owned(), later);
    assert!(!m.live().unwrap().interrupted);
    assert_eq!((m.stall.last_output, m.stall.noticed), (later, None));
    assert_eq!(m.turn_text, "next");
}

// ----- stops -----

#[test]
fn a_stop_drops_the_queue_and_refuses_every_turn_after() {
    let (mut m, _) = live();
    queue(&mut m, &["a", "b"]);
    assert_eq!(m.stop(), 2);
    assert!(m.queue.is_empty());
    assert!(m.stop_requested());
    assert!(m.process().is_some(), "the process stays until its exit is seen");
    queue(&mut m, &["c"]);
    assert!(matches!(m.advance(false, 1), Advance::Nothing));
}

#[test]
fn a_clean_stop_of_a_live_process_awaits_its_exit_until_the_drain_deadline() {
    let (mut m, now) = live();
    m.stop();
    assert_eq!(m.stop_ended(true, now), StopEnd::AwaitExit);
    assert_eq!(m.deadline(false, false), Some((now + EXIT_AFTER_STOP, Timer::Drain)));
    // Its exit arrives: the run is stopped (the actor then calls `stopped`).
    let plan = exit(&mut m, Some(143), None, true, Status::Running);
    assert_eq!(plan.then, AfterExit::Stopped);
    assert_eq!(m.deadline(false, false), None, "no drain once the exit is in");
    m.stopped();
    assert!(matches!(m.state, State::Stopped));
}

#[test]
fn a_clean_stop_with_no_process_finishes_at_once() {
    let (mut m, now) = machine(ProcessModel::LongLived);
    assert_eq!(m.stop(), 0);
    assert_eq!(m.stop_ended(true, now), StopEnd::Finish);
    m.stopped();
    assert!(m.stop_requested());
    assert!(m.is_dormant(false));
}

#[test]
fn a_stop_that_left_processes_alive_fails_and_the_run_stays_stopping() {
    let (mut m, now) = live();
    m.stop();
    assert_eq!(m.stop_ended(false, now), StopEnd::Failed);
    assert!(matches!(m.state, State::Stopping { live: Some(_), drain: None }));
    // A later exit still ends the stop.
    assert_eq!(exit(&mut m, None, Some(9), true, Status::Running).then, AfterExit::Stopped);
}

#[test]
fn the_drain_deadline_ends_the_stop_without_the_exit() {
    let (mut m, now) = live();
    m.stop();
    m.stop_ended(true, now);
    assert_eq!(m.fire(Timer::Drain, now + EXIT_AFTER_STOP, false), Fired::DrainExpired);
    let ended = m.process_ended().expect("the stopped process");
    assert!(ended.stop_requested);
    assert_eq!(m.exit_plan(&ended, None, None, true, Status::Running).then, AfterExit::Stopped);
}

// ----- processes -----

#[test]
fn a_spawned_process_is_live_and_replaces_one_whose_stdin_was_closed() {
    let (mut m, _) = live();
    m.live_mut().unwrap().closing = true;
    m.live_mut().unwrap().out_closed = Some(Instant::now());
    m.spawned(FakeProcess("new"), Some("s1".to_owned()));
    let live = m.live().unwrap();
    assert_eq!(live.handle, FakeProcess("new"));
    assert!(!live.closing && live.out_closed.is_none() && live.ended_by.is_none());
    assert_eq!(live.resuming.as_deref(), Some("s1"));
}

#[test]
fn an_adopted_process_that_closed_its_stdout_is_given_the_grace_then_ended() {
    let (mut m, now) = machine(ProcessModel::LongLived);
    m.adopted(FakeProcess("adopted"), true, now);
    assert_eq!(m.deadline(false, false), Some((now + OUTPUT_CLOSED_GRACE, Timer::OutputClosed)));
    let (mut m, now) = machine(ProcessModel::LongLived);
    m.adopted(FakeProcess("adopted"), false, now);
    assert_eq!(m.deadline(false, false), None);
    assert_eq!(m.stall.last_output, now);
}

#[test]
fn output_resets_the_stall_rule_and_a_session_event_ends_the_resume_watch() {
    let (mut m, now) = machine(ProcessModel::LongLived);
    m.spawned(FakeProcess("agent"), Some("s1".to_owned()));
    m.stall.noticed = Some(now);
    let later = now + Duration::from_secs(3);
    m.output(false, false, later);
    assert_eq!(m.stall.noticed, Some(now), "records without lines are not output");
    m.output(true, false, later);
    assert_eq!((m.stall.last_output, m.stall.noticed), (later, None));
    assert!(m.live().unwrap().resuming.is_some());
    m.output(false, true, later);
    assert_eq!(m.live().unwrap().resuming, None, "the CLI opened the session: a failure now is its own");
}

#[test]
fn a_closed_stdout_arms_its_deadline_once_and_it_ends_the_process_naming_the_closed_output() {
    let (mut m, now) = live();
    m.stdout_closed(now);
    m.stdout_closed(now + Duration::from_secs(2));
    let at = now + OUTPUT_CLOSED_GRACE;
    assert_eq!(m.deadline(false, false), Some((at, Timer::OutputClosed)));
    assert_eq!(m.fire(Timer::OutputClosed, at, false), Fired::EndOutputClosed);
    assert_eq!(m.deadline(false, false), None);
    // Ended by the daemon's rule: an error naming it, never a crash, whatever signal ended it.
    let ended = m.process_ended().unwrap();
    assert_eq!(ended.live.ended_by.as_deref(), Some(OUTPUT_CLOSED));
    assert_eq!(ended.signal(Some(15)), None);
    assert_eq!(m.exit_plan(&ended, None, Some(15), true, Status::Running).then, AfterExit::Failed { crashed: false });
}

#[test]
fn the_output_closed_deadline_with_no_process_does_nothing() {
    let (mut m, now) = machine(ProcessModel::LongLived);
    assert_eq!(m.fire(Timer::OutputClosed, now, false), Fired::Nothing);
}

// ----- the stall rule -----

#[test]
fn no_stall_deadline_without_a_turn_in_flight_or_a_process() {
    let (m, _) = live();
    assert_eq!(m.deadline(false, false), None);
    let (m, _) = machine(ProcessModel::LongLived);
    assert_eq!(m.deadline(true, false), None);
}

#[test]
fn a_silent_turn_gets_a_notice_at_the_stall_limit() {
    let (mut m, now) = live();
    assert_eq!(m.deadline(true, false), Some((now + LIMIT, Timer::Stall)));
    assert_eq!(m.fire(Timer::Stall, now + LIMIT, false), Fired::StallNotice { silent: LIMIT, tool: false });
    assert_eq!(m.deadline(true, false), Some((now + LIMIT * 2, Timer::Stall)), "next: twice the limit of silence");
}

#[test]
fn a_turn_silent_for_twice_the_limit_has_its_process_ended_as_an_error() {
    let (mut m, now) = live();
    m.fire(Timer::Stall, now + LIMIT, false);
    let at = now + LIMIT * 2;
    let why = "no output for 20 s (stall limit)".to_owned();
    assert_eq!(m.fire(Timer::Stall, at, false), Fired::EndStalled { silent: LIMIT * 2, why: why.clone() });
    assert_eq!(m.live().unwrap().ended_by.as_ref(), Some(&why));
    assert_eq!(m.stall.last_output, at);
    let plan = exit(&mut m, None, Some(15), true, Status::Running);
    assert_eq!(plan.then, AfterExit::Failed { crashed: false });
}

#[test]
fn a_silent_turn_with_a_tool_call_running_only_gets_notices_one_per_limit() {
    let (mut m, now) = live();
    assert_eq!(m.fire(Timer::Stall, now + LIMIT, true), Fired::StallNotice { silent: LIMIT, tool: true });
    assert_eq!(m.deadline(true, true), Some((now + LIMIT * 2, Timer::Stall)));
    assert_eq!(m.fire(Timer::Stall, now + LIMIT * 2, true), Fired::StallNotice { silent: LIMIT * 2, tool: true });
    assert_eq!(m.deadline(true, true), Some((now + LIMIT * 3, Timer::Stall)));
    assert!(m.live().unwrap().ended_by.is_none());
}

// ----- a process's end -----

#[test]
fn a_process_that_fails_resuming_a_session_resets_it_once_and_runs_the_turn_again() {
    let (mut m, _) = machine(ProcessModel::LongLived);
    m.turn_started("hello".to_owned(), Instant::now());
    m.spawned(FakeProcess("resume"), Some("s1".to_owned()));
    let plan = exit(&mut m, Some(1), None, true, Status::Running);
    assert_eq!(plan.then, AfterExit::ResetSession { session: "s1".to_owned() });
    assert_eq!(texts(&m), ["hello"]);
    assert_eq!(m.dropped_session.as_deref(), Some("s1"));
    assert_eq!(m.fast_failures, 0);
    // The retry resumes nothing; were it to resume and fail again, it is not reset twice.
    m.queue.clear();
    m.spawned(FakeProcess("again"), Some("s2".to_owned()));
    assert_eq!(exit(&mut m, Some(1), None, true, Status::Running).then, AfterExit::Failed { crashed: false });
}

#[test]
fn a_session_is_not_reset_by_a_clean_exit_an_interrupt_or_a_stop() {
    for how in ["clean", "interrupt", "stop"] {
        let (mut m, now) = machine(ProcessModel::LongLived);
        m.spawned(FakeProcess("resume"), Some("s1".to_owned()));
        match how {
            "clean" => {}
            "interrupt" => assert!(m.interrupt(true)),
            _ => {
                m.stop();
                assert_eq!(m.stop_ended(true, now), StopEnd::AwaitExit);
            }
        }
        let code = if how == "clean" { Some(0) } else { Some(1) };
        let plan = exit(&mut m, code, None, true, Status::Running);
        assert!(!matches!(plan.then, AfterExit::ResetSession { .. }), "{how}: {plan:?}");
        assert_eq!(m.dropped_session, None, "{how}");
    }
}

#[test]
fn the_exit_of_an_agent_whose_stdin_was_closed_after_answering_is_done() {
    let (mut m, _) = machine(ProcessModel::LongLived);
    m.setup.exit_when_idle = true;
    m.spawned(FakeProcess("agent"), None);
    assert!(matches!(m.advance(false, 1), Advance::CloseStdin));
    assert!(matches!(m.advance(false, 1), Advance::Nothing), "closed once");
    let plan = exit(&mut m, Some(0), None, false, Status::Idle);
    assert_eq!(plan.then, set(Status::Done, Phase::Exited, DONE_REASON));
}

#[test]
fn a_cli_that_cannot_resume_says_a_follow_up_starts_fresh_when_its_run_is_done() {
    let (mut m, _) = machine(ProcessModel::LongLived);
    (m.setup.exit_when_idle, m.setup.resumes) = (true, false);
    m.spawned(FakeProcess("agent"), None);
    assert!(matches!(m.advance(false, 1), Advance::CloseStdin));
    let plan = exit(&mut m, Some(0), None, false, Status::Idle);
    assert_eq!(plan.then, set(Status::Done, Phase::Exited, ends::DONE_FRESH_REASON));
}

/// A follow-up sent while an `exit_when_idle` agent is closing (its stdin closed, it has not
/// exited: Gemini CLI runs on until its grace ends) waits for that exit, never starts a second
/// process beside it: the closing process is ended at once, and the message starts after.
#[test]
fn a_message_for_a_closing_agent_waits_for_its_exit_and_hurries_it() {
    let (mut m, t0) = machine(ProcessModel::LongLived);
    m.setup.exit_when_idle = true;
    m.spawned(FakeProcess("agent"), None);
    assert!(matches!(m.advance(false, 1), Advance::CloseStdin));
    m.stdin_closed(t0);
    assert_eq!(m.admit(Status::Idle, false, false), Admit::AfterExit);
    queue(&mut m, &["again"]);
    assert!(matches!(m.advance(false, 1), Advance::Nothing), "not on the closing process");
    m.hurry_close(t0);
    assert_eq!(m.deadline(false, false), Some((t0, Timer::StdinClosed)), "ended now, not after the grace");
    let plan = exit(&mut m, Some(0), None, false, Status::Running);
    assert_eq!(plan.then, AfterExit::Set(None), "the run stays running for the message");
    assert!(matches!(m.advance(false, 1), Advance::Start(_)));
}

#[test]
fn a_failed_process_drops_the_queue_and_counts_a_failure_for_the_back_off() {
    let (mut m, _) = live();
    queue(&mut m, &["a", "b"]);
    let plan = exit(&mut m, Some(2), None, true, Status::Running);
    assert_eq!(plan, ExitPlan { save_home: false, dropped: 2, then: AfterExit::Failed { crashed: false } });
    assert!(m.queue.is_empty());
    assert_eq!(m.fast_failures, 1);
    assert_eq!(m.backoff(), Some(Duration::from_millis(1000)));
    m.fast_failures = 9;
    assert_eq!(m.backoff(), Some(Duration::from_millis(16_000)), "capped at 2^5 half-seconds");
    m.fast_failures = 0;
    assert_eq!(m.backoff(), None);
}

#[test]
fn a_process_killed_by_a_signal_mid_turn_is_a_crash() {
    let (mut m, _) = live();
    assert_eq!(exit(&mut m, None, Some(9), true, Status::Running).then, AfterExit::Failed { crashed: true });
}

#[test]
fn a_clean_exit_between_turns_waits_for_a_follow_up_or_starts_the_queued_one() {
    let (mut m, _) = machine(ProcessModel::PerTurn);
    m.spawned(FakeProcess("exec"), None);
    assert_eq!(exit(&mut m, Some(0), None, false, Status::Running).then, set(Status::Idle, Phase::Waiting, WAITING));
    assert_eq!(m.fast_failures, 0);
    m.spawned(FakeProcess("exec"), None);
    assert_eq!(exit(&mut m, Some(0), None, false, Status::Idle).then, AfterExit::Set(None), "already idle");
    m.spawned(FakeProcess("exec"), None);
    queue(&mut m, &["next"]);
    assert_eq!(exit(&mut m, Some(0), None, false, Status::Idle).then, AfterExit::Set(None));
    assert!(matches!(m.advance(false, 1), Advance::Start(q) if q.text == "next"));
}

#[test]
fn a_clean_exit_between_turns_of_an_exit_when_idle_run_is_done() {
    let (mut m, _) = machine(ProcessModel::PerTurn);
    m.setup.exit_when_idle = true;
    m.spawned(FakeProcess("exec"), None);
    assert_eq!(exit(&mut m, Some(0), None, false, Status::Idle).then, set(Status::Done, Phase::Exited, DONE_REASON));
}

#[test]
fn a_failed_exit_of_a_run_already_failed_or_idle_between_turns_keeps_its_state() {
    for status in [Status::Failed, Status::Idle] {
        let (mut m, _) = live();
        assert_eq!(exit(&mut m, Some(1), None, false, status).then, AfterExit::Set(None), "{status:?}");
        assert_eq!(m.fast_failures, 1);
    }
}

#[test]
fn a_persistent_agents_home_is_saved_after_an_exit_but_not_a_stop_or_a_close() {
    let (mut m, now) = live();
    m.setup.persistent = true;
    assert!(exit(&mut m, Some(0), None, false, Status::Idle).save_home);
    m.spawned(FakeProcess("agent"), None);
    m.live_mut().unwrap().closing = true;
    assert!(!exit(&mut m, Some(0), None, false, Status::Idle).save_home);
    m.spawned(FakeProcess("agent"), None);
    m.stop();
    m.stop_ended(true, now);
    assert!(!exit(&mut m, Some(0), None, false, Status::Idle).save_home);
}

#[test]
fn an_end_with_nothing_live_is_ignored() {
    let (mut m, _) = machine(ProcessModel::LongLived);
    assert!(m.process_ended().is_none());
    m.stop();
    assert!(m.process_ended().is_none());
    assert!(m.stop_requested(), "a stop without a process stays a stop");
}

#[test]
fn a_failure_names_its_exit_code_and_stderr_its_signal_or_the_rule_that_ended_it() {
    let tail = "1\n2\n3\n4\n5\n6";
    assert_eq!(
        exit_reason(Some(2), None, tail, None),
        "the agent exited with code 2: 2 | 3 | 4 | 5 | 6; a follow-up restarts it and resumes the session"
    );
    assert!(exit_reason(Some(2), None, "", None).starts_with("the agent exited with code 2;"));
    assert!(exit_reason(None, Some(9), "", None).starts_with("the agent was killed by signal 9;"));
    assert!(exit_reason(None, None, "", Some("no output for 20 s (stall limit)")).starts_with("no output for 20 s (stall limit);"));
    assert!(exit_reason(None, None, "", None).starts_with("the agent process ended;"));
}

// ----- turns that end -----

#[test]
fn a_turn_that_ended_its_turn_goes_idle_and_forgets_failures_and_the_resume_watch() {
    let (mut m, _) = machine(ProcessModel::LongLived);
    m.spawned(FakeProcess("agent"), Some("s1".to_owned()));
    m.fast_failures = 3;
    assert_eq!(
        m.turn_ended(StopReason::EndTurn, Some("done")),
        (false, Some(Change { status: Status::Idle, phase: Phase::Waiting, reason: WAITING.to_owned() }))
    );
    assert_eq!(m.fast_failures, 0);
    assert_eq!(m.live().unwrap().resuming, None);
}

#[test]
fn an_interrupted_or_step_limited_turn_goes_idle_saying_why() {
    let (mut m, _) = live();
    assert_eq!(m.turn_ended(StopReason::Interrupted, None).1.unwrap().reason, INTERRUPTED);
    let change = m.turn_ended(StopReason::MaxTurns, None).1.unwrap();
    assert_eq!((change.status, change.phase), (Status::Idle, Phase::Waiting));
    assert!(change.reason.contains("step limit"));
    assert_eq!(m.turn_ended(StopReason::Stopped, None).1, None);
}

#[test]
fn a_failed_turn_fails_the_run_waiting_while_its_process_lives() {
    let (mut m, _) = live();
    let change = m.turn_ended(StopReason::Error, Some("rate limited")).1.unwrap();
    assert_eq!((change.status, change.phase), (Status::Failed, Phase::Waiting));
    assert!(change.reason.contains("rate limited"));
    m.process_ended();
    let change = m.turn_ended(StopReason::Crashed, None).1.unwrap();
    assert_eq!((change.status, change.phase), (Status::Failed, Phase::Failed));
    assert!(change.reason.contains("the turn failed"));
}

#[test]
fn a_turn_ending_while_stopping_changes_nothing_and_saves_no_home() {
    let (mut m, _) = live();
    m.setup.persistent = true;
    assert!(m.turn_ended(StopReason::EndTurn, None).0, "a persistent agent's home is saved after a turn");
    m.fast_failures = 2;
    m.stop();
    assert_eq!(m.turn_ended(StopReason::EndTurn, None), (false, None));
    assert_eq!(m.fast_failures, 2);
}

// ----- what comes next -----

#[test]
fn the_next_queued_turn_starts_once_the_turn_ended_and_a_per_turn_process_is_gone() {
    let (mut m, _) = live();
    queue(&mut m, &["a", "b"]);
    assert!(matches!(m.advance(true, 1), Advance::Nothing), "mid-turn");
    assert!(matches!(m.advance(false, 1), Advance::Start(q) if q.text == "a"), "a long-lived agent takes it on stdin");
    assert_eq!(texts(&m), ["b"]);
    let (mut m, _) = machine(ProcessModel::PerTurn);
    m.spawned(FakeProcess("exec"), None);
    queue(&mut m, &["a"]);
    assert!(matches!(m.advance(false, 1), Advance::Nothing), "its process has not exited");
    m.process_ended();
    assert!(matches!(m.advance(false, 1), Advance::Start(_)));
}

#[test]
fn an_idle_agent_is_closed_only_for_exit_when_idle_after_a_turn() {
    let (mut m, _) = live();
    assert!(matches!(m.advance(false, 1), Advance::Nothing), "not exit_when_idle");
    m.setup.exit_when_idle = true;
    assert!(matches!(m.advance(false, 0), Advance::Nothing), "no turn answered yet");
    assert!(matches!(m.advance(true, 1), Advance::Nothing), "mid-turn");
    assert!(matches!(m.advance(false, 1), Advance::CloseStdin));
    assert!(m.live().unwrap().closing);
}

#[test]
fn an_agent_that_runs_on_after_its_stdin_closed_is_ended_and_its_exit_is_done() {
    let (mut m, t0) = live();
    m.setup.exit_when_idle = true;
    assert!(matches!(m.advance(false, 1), Advance::CloseStdin));
    assert_eq!(m.deadline(false, false), None, "no deadline until the close is done");
    m.stdin_closed(t0);
    assert_eq!(m.deadline(false, false), Some((t0 + STDIN_CLOSED_GRACE, Timer::StdinClosed)));
    assert_eq!(m.fire(Timer::StdinClosed, t0 + STDIN_CLOSED_GRACE, false), Fired::EndStdinClosed);
    assert_eq!(m.deadline(false, false), None, "fired once");
    let ended = m.process_ended().unwrap();
    assert!(ended.live.closing && ended.live.ended_by.is_none(), "ended by the close, not a rule");
}

#[test]
fn the_actor_may_retire_with_no_process_no_turn_and_nothing_queued() {
    let (mut m, _) = machine(ProcessModel::LongLived);
    assert!(m.is_dormant(false));
    assert!(!m.is_dormant(true));
    queue(&mut m, &["a"]);
    assert!(!m.is_dormant(false));
    let (m, _) = live();
    assert!(!m.is_dormant(false));
}

/// Issue 33: a turn the provider refused for a limit leaves the run waiting for the reset, also
/// when its process exits after it (Codex's `exec` exits 1), cleanly or not, with or without
/// `exit_when_idle`: never `failed` or `done`.
#[test]
fn a_quota_wait_outlives_the_process_that_ended_after_it() {
    let (mut m, _) = machine(ProcessModel::PerTurn);
    assert_eq!(
        m.turn_ended(StopReason::QuotaWaiting, Some("usage limit")).1,
        Some(Change { status: Status::QuotaWaiting, phase: Phase::Waiting, reason: "usage limit".into() })
    );
    m.spawned(FakeProcess("exec"), None);
    assert_eq!(exit(&mut m, Some(1), None, false, Status::QuotaWaiting).then, AfterExit::Set(None));
    m.spawned(FakeProcess("exec"), None);
    assert_eq!(exit(&mut m, Some(0), None, false, Status::QuotaWaiting).then, AfterExit::Set(None));
    let mut done = Machine::new(Setup { exit_when_idle: true, ..setup(ProcessModel::PerTurn) }, 0, Instant::now());
    done.spawned(FakeProcess("exec"), None);
    assert_eq!(exit(&mut done, Some(0), None, false, Status::QuotaWaiting).then, AfterExit::Set(None), "not done");
}
