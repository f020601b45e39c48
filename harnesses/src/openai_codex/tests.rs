//! Edge cases (CASES.md E11, E12, E14) with synthetic lines, and the launch plan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use spaces_sdk::{Category, EventKind, StopReason, ToolStatus};

use super::*;
use crate::draft::EventDraft;
use crate::plan::{ExitInfo, StdinMode};

const THREAD: &str = r#"{"type":"thread.started","thread_id":"t-1"}"#;
const TURN: &str = r#"{"type":"turn.started"}"#;
const MSG: &str = r#"{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"done"}}"#;
const DONE: &str = r#"{"type":"turn.completed","usage":{"input_tokens":3,"output_tokens":1}}"#;
const CMD_STARTED: &str = r#"{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'sleep 9'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#;

fn feed(n: &mut dyn Normalizer, lines: &[&str]) -> Vec<EventDraft> {
    lines.iter().flat_map(|l| n.stdout_line(l)).collect()
}

fn exit(code: i32) -> ExitInfo {
    ExitInfo { code: Some(code), ..ExitInfo::default() }
}

fn ends(events: &[EventDraft]) -> Vec<StopReason> {
    events.iter().filter(|e| e.kind == EventKind::TurnEnded).filter_map(|e| e.stop_reason).collect()
}

#[test]
fn a_normal_turn_ends_once_with_the_final_message() {
    let mut n = OpenAiCodex.normalizer();
    let mut ev = n.begin_turn(1, "hi");
    ev.extend(feed(n.as_mut(), &[THREAD, TURN, MSG, DONE]));
    assert!(!n.turn_in_flight());
    ev.extend(n.process_exited(&exit(0)));
    assert_eq!(ends(&ev), [StopReason::EndTurn]);
    let ended = ev.iter().find(|e| e.kind == EventKind::TurnEnded).unwrap();
    assert_eq!(ended.text.as_deref(), Some("done"));
    assert_eq!(n.session_id().as_deref(), Some("t-1"));
    let last = ev.last().unwrap();
    assert_eq!(
        (last.kind, last.category, last.summary.as_deref()),
        (EventKind::Exited, Category::Activity, Some("the agent exited with code 0"))
    );
}

#[test]
fn case_e11_big_output_then_an_unterminated_line_and_exit_0_is_an_error() {
    let mut n = OpenAiCodex.normalizer();
    let mut ev = n.begin_turn(1, "go");
    ev.extend(feed(n.as_mut(), &[THREAD, TURN]));
    let filler = format!(r#"{{"type":"item.completed","item":{{"id":"r","type":"reasoning","text":"{}"}}}}"#, "x".repeat(1000));
    for _ in 0..200 {
        ev.extend(n.stdout_line(&filler));
    }
    // The last line had no newline; the daemon still hands it over.
    ev.extend(n.stdout_line(r#"{"type":"item.completed","item":{"id":"item_9","type":"agent_message","text":"tail"}}"#));
    ev.extend(n.process_exited(&exit(0)));
    assert_eq!(ev.iter().filter(|e| e.kind == EventKind::Thought).count(), 200);
    assert!(ev.iter().any(|e| e.kind == EventKind::Message && e.text.as_deref() == Some("tail")));
    assert_eq!(ends(&ev), [StopReason::Error], "no turn.completed: not a success");
    assert_eq!(ev.last().unwrap().kind, EventKind::Exited);
}

#[test]
fn case_e11_json_cut_in_half_becomes_other_and_the_turn_errors() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    feed(n.as_mut(), &[THREAD, TURN]);
    let full = format!(r#"{{"type":"item.completed","item":{{"id":"m","type":"agent_message","text":"{}"}}}}"#, "y".repeat(70_000));
    let cut = &full[..65_536];
    let ev = n.stdout_line(cut);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kind, EventKind::Other);
    assert_eq!(ev[0].text.as_deref(), Some(cut));
    let ev = n.process_exited(&exit(0));
    assert_eq!(ends(&ev), [StopReason::Error]);
}

#[test]
fn case_e12_lines_ending_in_cr_parse() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "hi");
    let thread = format!("{THREAD}\r");
    let ev = n.stdout_line(&thread);
    assert_eq!(ev[0].kind, EventKind::Session);
    assert_eq!(ev[0].raw.as_deref(), Some(THREAD));
    assert_eq!(n.session_id().as_deref(), Some("t-1"));
    let ev = n.stdout_line(&format!("{MSG}\r"));
    assert_eq!(ev[0].kind, EventKind::Message);
    let ev = n.stdout_line("not json at all\r");
    assert_eq!((ev[0].kind, ev[0].text.as_deref()), (EventKind::Other, Some("not json at all")));
}

#[test]
fn case_e14a_completion_without_a_final_message_after_an_interrupt_is_interrupted() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    feed(n.as_mut(), &[THREAD, TURN]);
    let ev = n.interrupt_requested();
    assert_eq!(ev[0].kind, EventKind::CancelRequested);
    let ev = feed(n.as_mut(), &[DONE]);
    assert_eq!(ends(&ev), [StopReason::Interrupted]);
    assert!(ends(&n.process_exited(&exit(0))).is_empty(), "a turn ends exactly once");
}

#[test]
fn case_e14a_sigint_exit_after_an_interrupt_is_interrupted() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    feed(n.as_mut(), &[THREAD, TURN]);
    n.interrupt_requested();
    let ev = n.process_exited(&exit(1));
    assert_eq!(ends(&ev), [StopReason::Interrupted]);
}

#[test]
fn case_e14b_auth_error_on_stderr_and_exit_52_is_an_error_with_code_and_tail() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    n.stderr_line("Reading additional input from stdin...");
    n.stderr_line("Error: 401 Unauthorized: invalid api key");
    let ev = n.process_exited(&ExitInfo {
        code: Some(52),
        stderr_tail: "Reading additional input from stdin...\nError: 401 Unauthorized: invalid api key\n".into(),
        ..ExitInfo::default()
    });
    assert_eq!(ends(&ev), [StopReason::Error]);
    let ended = ev.iter().find(|e| e.kind == EventKind::TurnEnded).unwrap();
    let text = ended.text.as_deref().unwrap();
    assert!(text.contains("exit code 52"), "{text}");
    assert!(text.contains("401 Unauthorized: invalid api key"), "{text}");
    assert!(!text.contains("Reading additional input"), "{text}");
    assert!(ended.summary.as_deref().unwrap().contains("exit code 52"));
}

#[test]
fn case_e14b_stderr_tail_from_exit_info_alone_is_used() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    let ev = n.process_exited(&ExitInfo { code: Some(52), stderr_tail: "auth failed".into(), ..ExitInfo::default() });
    let ended = ev.iter().find(|e| e.kind == EventKind::TurnEnded).unwrap();
    assert!(ended.text.as_deref().unwrap().ends_with("stderr:\nauth failed"));
}

#[test]
fn case_e14c_a_tool_open_at_turn_end_is_closed_failed() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    let ev = feed(n.as_mut(), &[THREAD, TURN, CMD_STARTED, DONE]);
    let updates: Vec<_> = ev.iter().filter(|e| e.kind == EventKind::ToolUpdate).collect();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].tool_status, Some(ToolStatus::Failed));
    assert_eq!(updates[0].tool_id.as_deref(), Some("item_0"));
    let pos_update = ev.iter().position(|e| e.kind == EventKind::ToolUpdate).unwrap();
    let pos_end = ev.iter().position(|e| e.kind == EventKind::TurnEnded).unwrap();
    assert!(pos_update < pos_end, "closed before the turn ends");
}

#[test]
fn case_e14c_a_tool_open_when_the_process_dies_is_closed_failed() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    feed(n.as_mut(), &[THREAD, TURN, CMD_STARTED]);
    let ev = n.process_exited(&ExitInfo { signal: Some(9), ..ExitInfo::default() });
    let kinds: Vec<_> = ev.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::ToolUpdate, EventKind::TurnEnded, EventKind::Exited]);
    assert_eq!(ev[0].tool_status, Some(ToolStatus::Failed));
    // Killed by a signal nobody asked for: a crash, as for every harness (crate::ending).
    assert_eq!(ev[1].stop_reason, Some(StopReason::Crashed));
    assert!(ev[1].text.as_deref().unwrap().contains("signal 9"));
}

#[test]
fn case_e14d_unknown_event_types_pass_through_as_other() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    let line = r#"{"type":"thread.renamed","title":"x"}"#;
    let ev = n.stdout_line(line);
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].kind, ev[0].text.as_deref(), ev[0].raw.as_deref()), (EventKind::Other, Some(line), Some(line)));
    let item = r#"{"type":"item.completed","item":{"id":"i","type":"hologram","x":1}}"#;
    let ev = n.stdout_line(item);
    assert_eq!(ev[0].kind, EventKind::Other);
    assert_eq!(ev[0].raw.as_deref(), Some(item));
}

#[test]
fn retry_notices_and_error_lines_do_not_end_the_turn_twice() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    let ev = feed(
        n.as_mut(),
        &[
            THREAD,
            TURN,
            r#"{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}"#,
            r#"{"type":"error","message":"unexpected status 500"}"#,
            r#"{"type":"turn.failed","error":{"message":"unexpected status 500"}}"#,
        ],
    );
    let kinds: Vec<_> = ev.iter().map(|e| e.kind.as_str()).collect();
    // `turn.started` is a control line (hidden `notice`); the retry is the one visible notice.
    assert_eq!(kinds, ["session", "notice", "notice", "error", "turn_ended"]);
    assert_eq!(ev[1].category, Category::Hidden);
    assert_eq!(ev[2].category, Category::Activity);
    let ev2 = n.process_exited(&exit(1));
    assert_eq!(ends(&ev), [StopReason::Error]);
    assert!(ends(&ev2).is_empty());
}

#[test]
fn an_error_line_then_exit_without_turn_failed_ends_with_that_error() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    feed(n.as_mut(), &[THREAD, TURN, r#"{"type":"error","message":"stream error: boom"}"#]);
    let ev = n.process_exited(&exit(1));
    let ended = ev.iter().find(|e| e.kind == EventKind::TurnEnded).unwrap();
    assert_eq!(ended.stop_reason, Some(StopReason::Error));
    assert!(ended.text.as_deref().unwrap().contains("stream error: boom"));
}

#[test]
fn stop_requested_ends_the_turn_stopped() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    let ev = n.process_exited(&ExitInfo { signal: Some(15), stop_requested: true, ..ExitInfo::default() });
    assert_eq!(ends(&ev), [StopReason::Stopped]);
}

#[test]
fn an_idle_interrupt_is_not_remembered() {
    let mut n = OpenAiCodex.normalizer();
    assert!(n.interrupt_requested().is_empty());
    n.begin_turn(1, "go");
    let ev = n.process_exited(&exit(1));
    assert_eq!(ends(&ev), [StopReason::Error]);
}

#[test]
fn todo_lists_are_plans_and_mcp_calls_are_tools() {
    let mut n = OpenAiCodex.normalizer();
    n.begin_turn(1, "go");
    let ev = feed(
        n.as_mut(),
        &[
            r#"{"type":"item.started","item":{"id":"p","type":"todo_list","items":[{"text":"a","completed":false}]}}"#,
            r#"{"type":"item.started","item":{"id":"m","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{},"result":null,"error":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{},"result":{"content":[{"type":"text","text":"hit"}],"structured_content":null},"error":null,"status":"completed"}}"#,
        ],
    );
    assert_eq!(ev[0].kind, EventKind::Plan);
    assert_eq!(ev[0].text.as_deref(), Some("[ ] a"));
    assert_eq!(ev[1].kind, EventKind::ToolCall);
    assert_eq!(ev[1].tool_title.as_deref(), Some("docs: search"));
    assert_eq!(ev[2].tool_status, Some(ToolStatus::Completed));
    assert_eq!(ev[2].text.as_deref(), Some("hit"));
}

fn ctx<'a>(
    env: &'a BTreeMap<String, String>,
    session: Option<&'a str>,
    model: Option<&'a str>,
    base_url: Option<&'a str>,
) -> LaunchContext<'a> {
    LaunchContext {
        run_id: "run-1",
        turn: if session.is_some() { 2 } else { 1 },
        prompt: "-fix the bug",
        session_id: session,
        binary: Path::new("/tools/codex"),
        cwd: Path::new("/space/work"),
        home: Path::new("/runs/r1/home"),
        run_dir: Path::new("/runs/r1"),
        model,
        base_url,
        env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    }
}

#[test]
fn launch_plan_turn_1_with_a_custom_endpoint() {
    let env = BTreeMap::from([("EXTRA".to_owned(), "1".to_owned())]);
    let plan = OpenAiCodex.launch(&ctx(&env, None, None, Some("http://127.0.0.1:4000/")));
    assert_eq!(plan.argv, ["/tools/codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-",]);
    // The prompt (even one that starts with `-`) travels on stdin, never on the command line.
    assert_eq!(plan.stdin, StdinMode::Once);
    assert_eq!(plan.initial_stdin.as_deref(), Some("-fix the bug".as_bytes()));
    let want_env = BTreeMap::from([
        ("CODEX_HOME".to_owned(), "/runs/r1/home/.codex".to_owned()),
        ("EXTRA".to_owned(), "1".to_owned()),
        ("HOME".to_owned(), "/runs/r1/home".to_owned()),
        ("OPENAI_API_KEY".to_owned(), launch::PLACEHOLDER_KEY.to_owned()),
    ]);
    assert_eq!(plan.env, want_env);
    assert_eq!(
        plan.files,
        [(
            PathBuf::from("/runs/r1/home/.codex/config.toml"),
            "# Written by spacesd for this run; rewritten at every launch.\n\
             check_for_update_on_startup = false\n\
             model = \"gpt-5.5\"\n\
             model_provider = \"spaces_endpoint\"\n\
             mcp_optional_startup_grace_ms = 30000\n\
             \n\
             [analytics]\n\
             enabled = false\n\
             \n\
             [feedback]\n\
             enabled = false\n\
             \n\
             [features]\n\
             plugins = false\n\
             remote_plugin = false\n\
             apps = false\n\
             in_app_updates = false\n\
             \n\
             [model_providers.spaces_endpoint]\n\
             name = \"Spaces endpoint\"\n\
             base_url = \"http://127.0.0.1:4000/v1\"\n\
             wire_api = \"responses\"\n\
             env_key = \"OPENAI_API_KEY\"\n\
             request_max_retries = 0\n\
             stream_max_retries = 0\n"
                .to_owned()
        )]
    );
}

#[test]
fn launch_plan_resume_with_model_and_caller_key() {
    let env = BTreeMap::from([("OPENAI_API_KEY".to_owned(), "sk-caller".to_owned()), ("HOME".to_owned(), "/elsewhere".to_owned())]);
    let plan = OpenAiCodex.launch(&ctx(&env, Some("t-1"), Some("gpt-5.4"), Some("http://h:1/v1")));
    assert_eq!(
        plan.argv,
        [
            "/tools/codex",
            "exec",
            "resume",
            "t-1",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            "gpt-5.4",
            "-",
        ]
    );
    assert_eq!(plan.env["OPENAI_API_KEY"], "sk-caller");
    assert_eq!(plan.env["HOME"], "/elsewhere", "ctx.env wins");
    let config = &plan.files[0].1;
    assert!(config.contains("base_url = \"http://h:1/v1\"\n"), "{config}");
    assert!(!config.contains("model = "), "-m names the model: {config}");
}

#[test]
fn launch_plan_without_an_endpoint_writes_no_provider() {
    let env = BTreeMap::new();
    let plan = OpenAiCodex.launch(&ctx(&env, None, None, None));
    assert!(!plan.env.contains_key("OPENAI_API_KEY"));
    let config = &plan.files[0].1;
    assert!(!config.contains("model_provider"), "{config}");
    assert!(config.contains("check_for_update_on_startup = false"));
}

#[test]
fn mcp_servers_become_config_toml_tables() {
    let env = BTreeMap::new();
    let servers: Vec<spaces_sdk::McpServer> = serde_json::from_value(serde_json::json!([
        {"name": "echo", "command": "/opt/bin/mcp-echo", "args": ["--loud", "say \"hi\""], "env": {"ECHO_TOKEN": "secret-123456"}},
        {"name": "docs", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abcdefgh"}},
        {"name": "bare", "command": "npx"}
    ]))
    .unwrap();
    let mut c = ctx(&env, None, None, Some("http://127.0.0.1:4000"));
    c.mcp_servers = &servers;
    let plan = OpenAiCodex.launch(&c);
    let config = &plan.files[0].1;
    assert!(
        config.ends_with(
            "\n[mcp_servers.echo]\n\
             command = \"/opt/bin/mcp-echo\"\n\
             args = [\"--loud\", \"say \\\"hi\\\"\"]\n\
             env = { \"ECHO_TOKEN\" = \"secret-123456\" }\n\
             \n[mcp_servers.docs]\n\
             url = \"https://mcp.example.com/mcp\"\n\
             http_headers = { \"Authorization\" = \"Bearer abcdefgh\" }\n\
             \n[mcp_servers.bare]\n\
             command = \"npx\"\n\
             args = []\n"
        ),
        "{config}"
    );
    insta::assert_snapshot!(plan.render());
}

#[test]
fn harness_facts() {
    let h = OpenAiCodex;
    assert_eq!(h.id(), "openai-codex-exec");
    assert_eq!(h.process_model(), ProcessModel::PerTurn);
    assert_eq!(h.interrupt(), InterruptRecipe::SignalGroup(2));
    assert_eq!(h.install_spec().packages, ["@openai/codex@0.171.0"]);
    assert!(h.install_spec().binary.ends_with("/bin/codex"));
    assert_eq!(crate::by_id("openai-codex-exec").map(|h| h.id()), Some("openai-codex-exec"));
    assert_eq!(crate::by_id("openai-codex").map(|h| h.followups()), Some("app-server"), "openai-codex is the app-server");
    assert_eq!(crate::by_id("openai-codex-app-server").map(|h| h.id()), Some("openai-codex"), "the old id of the app-server");
}
