//! Following a run's events from the command line: `agent events [--follow]`, `agent start
//! --follow`, `agent send --follow` and the demo. Over the daemon's event stream (SSE), or
//! long-polls when it answers none ([`spaces_sdk::follow`]); each event printed as
//! `cli/print.rs` words it.

use spaces_sdk::client::Client;
use spaces_sdk::{AgentEventsRequest, EventKind, Status, StopReason};

use super::print::{event_lines, View};

/// Long-poll wait of `--follow`, in ms.
const FOLLOW_WAIT_MS: u64 = 20_000;

/// How long `agent events --follow` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    /// Until the run is no longer running (the turn ended).
    Turn,
    /// Across turns, until the run is stopped or done.
    Stopped,
}

/// Where a follow ended.
#[derive(Debug, Clone, Copy)]
pub struct Followed {
    /// The cursor reached.
    pub cursor: u64,
    /// The stop reason of the last `turn_ended` seen, if any.
    pub last_stop: Option<StopReason>,
}

/// A followed turn that ended `error`, `crashed` or `max_turns`: the command exits with
/// [`TurnFailed::EXIT_CODE`] (documented in `spacesd agent --help`).
#[derive(Debug, thiserror::Error)]
#[error("the turn ended {}", .0.as_str())]
pub struct TurnFailed(pub StopReason);

impl TurnFailed {
    /// The exit code of a command whose followed turn failed.
    pub const EXIT_CODE: u8 = 2;
}

pub(super) fn turn_outcome(followed: Followed) -> anyhow::Result<()> {
    match followed.last_stop {
        Some(reason @ (StopReason::Error | StopReason::Crashed | StopReason::MaxTurns)) => Err(TurnFailed(reason).into()),
        _ => Ok(()),
    }
}

/// Print the run's events from `cursor`: every page up to now (or, with `follow`, until the
/// run stops running), at most `max` events; when `max` cuts the list, say on stderr where it
/// stopped and how to go on.
#[allow(clippy::too_many_arguments)]
pub(super) async fn list_events(
    client: &Client,
    space: &str,
    run_id: &str,
    mut cursor: u64,
    max: Option<u64>,
    follow: bool,
    json: bool,
    raw: bool,
    view: View,
) -> anyhow::Result<()> {
    let mut printed: u64 = 0;
    loop {
        let left = max.map(|m| m.saturating_sub(printed));
        if left == Some(0) {
            eprintln!("-- stopped after {printed} events at cursor {cursor}; go on with --cursor {cursor}");
            return Ok(());
        }
        let page_size = left.map(|l| l.min(u64::from(AgentEventsRequest::MAX_LIMIT)) as u32).or(Some(AgentEventsRequest::MAX_LIMIT));
        let q = events(space, run_id, cursor, page_size, follow.then_some(FOLLOW_WAIT_MS), Some(raw));
        let page = client.agent_events(&q).await?;
        if json {
            println!("{}", serde_json::to_string(&page)?);
        } else {
            page.events.iter().filter_map(|e| event_lines(e, view)).for_each(|l| println!("{l}"));
        }
        printed += page.events.len() as u64;
        cursor = page.cursor;
        let done = if follow { page.caught_up && page.status != Status::Running } else { page.caught_up };
        if done {
            return Ok(());
        }
    }
}

/// The seq of the run's last event now.
pub(super) async fn last_cursor(client: &Client, space: &str, run_id: &str) -> anyhow::Result<u64> {
    let mut cursor = 0;
    loop {
        let page = client.agent_events(&events(space, run_id, cursor, Some(1000), None, None)).await?;
        cursor = page.cursor;
        if page.caught_up {
            return Ok(cursor);
        }
    }
}

/// The cursor just before the run's last `user_message` event whose text is `text` (the turn a
/// message started), else the run's last cursor now.
pub(super) async fn before_message(client: &Client, space: &str, run_id: &str, text: &str) -> anyhow::Result<u64> {
    let (mut cursor, mut found) = (0, None);
    loop {
        let page = client.agent_events(&events(space, run_id, cursor, Some(1000), None, None)).await?;
        for e in &page.events {
            if e.kind == EventKind::UserMessage && e.text.as_deref() == Some(text) {
                found = Some(e.seq.saturating_sub(1));
            }
        }
        cursor = page.cursor;
        if page.caught_up {
            return Ok(found.unwrap_or(cursor));
        }
    }
}

/// Print events from `cursor` until the run is no longer running and the log is caught up;
/// returns the cursor reached and the stop reason of the last `turn_ended` seen.
pub async fn follow_events(client: &Client, space: &str, run_id: &str, cursor: u64) -> anyhow::Result<Followed> {
    follow_with(client, space, run_id, cursor, View::default(), Until::Turn).await
}

/// [`follow_events`] shown as `view`, until `until`: the daemon's event stream (SSE), or
/// long-polls when it answers none ([`spaces_sdk::follow`]).
pub(super) async fn follow_with(
    client: &Client,
    space: &str,
    run_id: &str,
    cursor: u64,
    view: View,
    until: Until,
) -> anyhow::Result<Followed> {
    let mut last_stop = None;
    let until = match until {
        Until::Turn => spaces_sdk::follow::Until::Turn,
        Until::Stopped => spaces_sdk::follow::Until::Stopped,
    };
    let mut follow = client.follow(space, run_id, cursor, until);
    if std::env::var_os("SPACES_FOLLOW_LONG_POLL").is_some() {
        follow = follow.long_poll_only();
    }
    while let Some(e) = follow.next().await? {
        if let Some(line) = event_lines(&e, view) {
            println!("{line}");
        }
        if e.kind == EventKind::TurnEnded {
            last_stop = e.stop_reason;
        }
    }
    let st = client.space(space).agent_status(run_id, Some(0)).await?;
    println!("-- status: {} ({}): {}", st.status.as_str(), st.phase.as_str(), st.reason);
    Ok(Followed { cursor: follow.cursor(), last_stop })
}

/// The `agent_events` request of `run_id` from `cursor`.
fn events(space: &str, run_id: &str, cursor: u64, max: Option<u32>, wait_ms: Option<u64>, raw: Option<bool>) -> AgentEventsRequest {
    AgentEventsRequest { space: space.to_owned(), run_id: run_id.to_owned(), cursor: Some(cursor), max, wait_ms, raw }
}
