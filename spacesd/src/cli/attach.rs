//! `spacesd agent attach RUN_ID`: a live terminal view of one run (crossterm).
//!
//! The screen (the terminal's alternate screen, raw mode) is the run's transcript, newest at the
//! bottom, then a status bar and a prompt line:
//! - the transcript is the CLI's event lines ([`super::print::event_lines`], the same as `agent
//!   events`), from the first event, then live from the daemon's event stream
//!   ([`spaces_sdk::follow`]); a tool call is one entry that its updates replace, so it shows
//!   once with its latest status (and, finished, its first output lines);
//! - the answer of the turn in flight streams in: its pieces (`message_delta` events, see
//!   `spaces_harnesses::wording::text_delta`) grow one live line at the bottom of the
//!   transcript, which the visible `message` with the whole text replaces (as does a tool call
//!   or the turn's end);
//! - a line typed at the prompt is sent as a follow-up (queued by the daemon mid-turn; the
//!   answer's reason shows in the status bar); `/interrupt`, `/stop` and `/detach` are
//!   commands, and `/expand` unfolds the last tool call with output to its whole output (as the
//!   event carries it) and folds it again;
//! - Ctrl-C interrupts the turn in flight; a second Ctrl-C in a row, or `/detach`, leaves: the
//!   run goes on;
//! - every resize redraws the whole screen at the new size (lines wrap at its width).

use std::collections::HashMap;
use std::io::Write;

use crossterm::event::{Event as TermEvent, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::{Attribute, Print, SetAttribute};
use crossterm::terminal::{self, ClearType};
use crossterm::{cursor, execute, queue};
use futures_util::StreamExt;
use spaces_sdk::client::Client;
use spaces_sdk::follow::Until;
use spaces_sdk::{Category, Event, EventKind, ToolStatus};

use super::print::{event_lines, View};

/// What the view shows: transcript entries, the bar, the prompt.
struct Screen {
    run_id: String,
    agent: String,
    entries: Vec<String>,
    /// Transcript entry of each tool call, by `tool_id`.
    tools: HashMap<String, usize>,
    /// The whole output of each tool entry that has one (its line, then every output line).
    full: HashMap<usize, String>,
    /// The tool entry shown with its whole output (`/expand`).
    expanded: Option<usize>,
    /// The answer of the turn in flight so far (its streamed pieces), until its visible
    /// `message` lands; with its turn.
    live: Option<(u32, String)>,
    status: String,
    note: String,
    input: String,
    /// A Ctrl-C was just pressed: the next one leaves.
    armed: bool,
}

impl Screen {
    fn add(&mut self, e: &Event) {
        match e.kind {
            EventKind::TurnStarted => self.status = "running".into(),
            EventKind::TurnEnded => {
                self.status = format!("idle ({})", e.stop_reason.map(|s| s.as_str()).unwrap_or("ended"));
            }
            _ => {}
        }
        // Pieces: `message_delta`, or a hidden `message` stored by a daemon from before that kind.
        if e.kind == EventKind::MessageDelta || (e.kind == EventKind::Message && e.category == Category::Hidden) {
            let piece = e.text.as_deref().unwrap_or_default();
            match &mut self.live {
                Some((turn, text)) if *turn == e.turn => text.push_str(piece),
                live => *live = Some((e.turn, piece.to_owned())),
            }
            return;
        }
        if matches!(e.kind, EventKind::Message | EventKind::ToolCall | EventKind::TurnStarted | EventKind::TurnEnded | EventKind::Exited) {
            self.live = None;
        }
        let Some(line) = event_lines(e, View::default()) else { return };
        let tool = e.tool_id.clone().filter(|_| matches!(e.kind, EventKind::ToolCall | EventKind::ToolUpdate));
        let i = match tool.as_ref().and_then(|id| self.tools.get(id)) {
            Some(&i) => {
                self.entries[i] = line;
                i
            }
            None => {
                if let Some(id) = tool.clone() {
                    self.tools.insert(id, self.entries.len());
                }
                self.entries.push(line);
                self.entries.len() - 1
            }
        };
        let output =
            e.text.as_deref().filter(|t| !t.trim().is_empty() && matches!(e.tool_status, Some(ToolStatus::Completed | ToolStatus::Failed)));
        if let (Some(_), Some(text)) = (tool, output) {
            let head = self.entries[i].lines().next().unwrap_or_default().to_owned();
            let body: Vec<String> = text.lines().map(|l| format!("        | {l}")).collect();
            self.full.insert(i, format!("{head}\n{}", body.join("\n")));
        }
    }

    /// `/expand`: unfold the last tool entry with output, or fold the one unfolded. The note
    /// says what happened.
    fn toggle_expand(&mut self) {
        if self.expanded.take().is_some() {
            self.note = "tool output folded".into();
            return;
        }
        match self.full.keys().max().copied() {
            Some(i) => {
                self.expanded = Some(i);
                self.note = "the last tool's whole output; /expand again to fold it".into();
            }
            None => self.note = "no tool output to expand yet".into(),
        }
    }

    /// The transcript as screen lines `w` characters wide at most (an unfolded tool entry with
    /// its whole output).
    fn transcript(&self, w: usize) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let entry = match self.expanded.filter(|x| *x == i).and_then(|x| self.full.get(&x)) {
                Some(full) => full,
                None => entry,
            };
            for line in entry.lines() {
                lines.extend(wrap(line, w));
            }
        }
        if let Some((turn, text)) = self.live.as_ref().filter(|(_, t)| !t.is_empty()) {
            // Shaped like the message line that will replace it, `…` where its seq will be.
            let entry = format!("#{:<4} turn {turn:<2} {:<16} {}", "…", "message", text.trim_end());
            for line in entry.lines() {
                lines.extend(wrap(line, w));
            }
        }
        lines
    }

    /// Draw everything at the terminal's size.
    fn draw(&self, out: &mut impl Write) -> std::io::Result<()> {
        let (w, h) = terminal::size().unwrap_or((80, 24));
        let (w, h) = (usize::from(w.max(10)), usize::from(h.max(3)));
        let lines = self.transcript(w);
        let room = h - 2;
        let start = lines.len().saturating_sub(room);
        queue!(out, terminal::Clear(ClearType::All))?;
        for (row, line) in lines[start..].iter().enumerate() {
            queue!(out, cursor::MoveTo(0, row as u16), Print(line))?;
        }
        let hint = if self.armed { "Ctrl-C again or /detach: leave (the run goes on)" } else { "Ctrl-C: interrupt · /detach: leave" };
        let mut bar = format!(" {} · {} · {} · {}", self.run_id, self.agent, self.status, hint);
        if !self.note.is_empty() {
            bar = format!("{bar} · {}", self.note);
        }
        let bar: String = format!("{bar:<w$}").chars().take(w).collect();
        queue!(out, cursor::MoveTo(0, (h - 2) as u16), SetAttribute(Attribute::Reverse), Print(bar), SetAttribute(Attribute::Reset))?;
        let prompt = format!("> {}", self.input);
        let shown: String = prompt.chars().skip(prompt.chars().count().saturating_sub(w - 1)).collect();
        queue!(out, cursor::MoveTo(0, (h - 1) as u16), Print(&shown), cursor::MoveTo(shown.chars().count() as u16, (h - 1) as u16))?;
        out.flush()
    }
}

/// `line` cut into pieces of at most `w` characters.
fn wrap(line: &str, w: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(w).map(|c| c.iter().collect()).collect()
}

/// Raw mode and the alternate screen while alive; the terminal as it was after.
struct Terminal;

impl Terminal {
    fn enter() -> anyhow::Result<Terminal> {
        terminal::enable_raw_mode()?;
        let guard = Terminal;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
        Ok(guard)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
        let _ = terminal::disable_raw_mode();
    }
}

/// What a key asks for.
enum Action {
    None,
    Send(String),
    Interrupt,
    Stop,
    Expand,
    Leave,
}

fn on_key(screen: &mut Screen, key: KeyEvent) -> Action {
    if key.kind == KeyEventKind::Release {
        return Action::None;
    }
    if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
        if screen.armed {
            return Action::Leave;
        }
        screen.armed = true;
        return Action::Interrupt;
    }
    screen.armed = false;
    match key.code {
        KeyCode::Enter => {
            let line = std::mem::take(&mut screen.input);
            match line.trim() {
                "" => Action::None,
                "/detach" => Action::Leave,
                "/interrupt" => Action::Interrupt,
                "/stop" => Action::Stop,
                "/expand" => Action::Expand,
                text => Action::Send(text.to_owned()),
            }
        }
        KeyCode::Backspace => {
            screen.input.pop();
            Action::None
        }
        KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
            screen.input.push(c);
            Action::None
        }
        _ => Action::None,
    }
}

/// Attach to `run_id` of `space` until the user leaves.
pub async fn attach(client: &Client, space: &str, run_id: &str) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        anyhow::bail!("attach needs a terminal; without one, follow the run with `spacesd agent events {run_id} --follow`");
    }
    let sp = client.space(space);
    let st = sp.agent_status(run_id, Some(0)).await?;
    let mut screen = Screen {
        run_id: run_id.to_owned(),
        agent: st.agent.clone().unwrap_or_default(),
        entries: Vec::new(),
        tools: HashMap::new(),
        full: HashMap::new(),
        expanded: None,
        live: None,
        status: st.status.as_str().to_owned(),
        note: String::new(),
        input: String::new(),
        armed: false,
    };
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel::<Result<Option<Event>, String>>();
    let mut follow = client.follow(space, run_id, 0, Until::Stopped);
    let reader = tokio::spawn(async move {
        loop {
            let next = follow.next().await.map_err(|e| e.to_string());
            let end = !matches!(next, Ok(Some(_)));
            if tx.send(next).is_err() || end {
                return;
            }
        }
    });
    let _term = Terminal::enter()?;
    let mut out = std::io::stdout();
    let mut keys = EventStream::new();
    screen.draw(&mut out)?;
    let left: anyhow::Result<()> = loop {
        tokio::select! {
            got = events.recv() => {
                match got {
                    Some(Ok(Some(e))) => {
                        screen.add(&e);
                        // Draw once per burst: take what is already waiting first.
                        while let Ok(Ok(Some(e))) = events.try_recv() {
                            screen.add(&e);
                        }
                    }
                    Some(Ok(None)) | None => {
                        let st = sp.agent_status(run_id, Some(0)).await?;
                        screen.status = st.status.as_str().to_owned();
                        screen.note = "the run has ended; /detach to leave".into();
                    }
                    Some(Err(e)) => screen.note = format!("events: {e}"),
                }
            }
            key = keys.next() => {
                let action = match key {
                    Some(Ok(TermEvent::Key(k))) => on_key(&mut screen, k),
                    Some(Ok(_)) => Action::None,
                    Some(Err(e)) => break Err(e.into()),
                    None => Action::Leave,
                };
                match action {
                    Action::None => {}
                    Action::Leave => break Ok(()),
                    Action::Expand => screen.toggle_expand(),
                    Action::Send(text) => {
                        screen.note = match sp.agent_message(run_id, &text, None).await {
                            Ok(r) => r.reason,
                            Err(e) => e.to_string(),
                        };
                    }
                    Action::Interrupt => {
                        screen.note = match sp.agent_interrupt(run_id).await {
                            Ok(r) => r.reason,
                            Err(e) => e.to_string(),
                        };
                    }
                    Action::Stop => {
                        screen.note = match sp.agent_stop(run_id).await {
                            Ok(r) => r.reason,
                            Err(e) => e.to_string(),
                        };
                    }
                }
            }
        }
        screen.draw(&mut out)?;
    };
    reader.abort();
    drop(_term);
    left?;
    println!("detached from {run_id}; the run goes on (`spacesd agent attach {run_id}` to come back)");
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn screen() -> Screen {
        Screen {
            run_id: "run-1".into(),
            agent: "claude-code".into(),
            entries: Vec::new(),
            tools: HashMap::new(),
            full: HashMap::new(),
            expanded: None,
            live: None,
            status: "running".into(),
            note: String::new(),
            input: String::new(),
            armed: false,
        }
    }

    fn tool(seq: u64, status: ToolStatus, text: Option<&str>) -> Event {
        Event {
            seq,
            ts_ms: 0,
            turn: 1,
            kind: if status == ToolStatus::InProgress { EventKind::ToolCall } else { EventKind::ToolUpdate },
            category: Category::Activity,
            text: text.map(Into::into),
            tool_id: Some("t1".into()),
            tool_title: Some("Run: seq 1 12".into()),
            tool_kind: Some("execute".into()),
            tool_status: Some(status),
            stop_reason: None,
            summary: Some("Run: seq 1 12".into()),
            usage: None,
            files: None,
            raw: None,
        }
    }

    fn message(seq: u64, category: Category, text: &str) -> Event {
        Event {
            kind: EventKind::Message,
            category,
            text: Some(text.into()),
            tool_id: None,
            tool_title: None,
            tool_kind: None,
            tool_status: None,
            summary: None,
            ..tool(seq, ToolStatus::InProgress, None)
        }
    }

    fn delta(seq: u64, text: &str) -> Event {
        Event { kind: EventKind::MessageDelta, ..message(seq, Category::Hidden, text) }
    }

    #[test]
    fn streamed_pieces_grow_one_live_line_that_the_whole_message_replaces() {
        let mut s = screen();
        s.add(&delta(1, "The comma"));
        // A piece stored by a daemon from before `message_delta` (a hidden `message`) too.
        s.add(&message(2, Category::Hidden, "nd printed"));
        let mut notice = message(3, Category::Hidden, "");
        (notice.kind, notice.text, notice.summary) = (EventKind::Notice, None, Some("stream_event content_block_stop".into()));
        s.add(&notice);
        assert_eq!(s.transcript(80), ["#…    turn 1  message          The command printed"]);
        // Narrow: the live line wraps like any other.
        assert_eq!(s.transcript(20).len(), 3, "{:#?}", s.transcript(20));
        s.add(&message(4, Category::Message, "The command printed hi."));
        assert_eq!(s.transcript(80), ["#4    turn 1  message          The command printed hi."]);
        // The next answer starts a new live line.
        s.add(&delta(5, "Next"));
        assert_eq!(s.transcript(80).len(), 2);
        assert!(s.transcript(80)[1].ends_with("message          Next"), "{:?}", s.transcript(80));
    }

    #[test]
    fn expand_unfolds_the_last_tools_whole_output_and_folds_it_again() {
        let mut s = screen();
        s.toggle_expand();
        assert_eq!(s.note, "no tool output to expand yet");
        let output: String = (1..=12).map(|n| format!("{n}\n")).collect();
        s.add(&tool(1, ToolStatus::InProgress, Some("seq 1 12")));
        s.add(&tool(2, ToolStatus::Completed, Some(&output)));
        let folded = s.transcript(80);
        assert_eq!(folded.len(), 5, "one line, three of output, where the rest is: {folded:#?}");
        assert!(folded[4].contains("9 more lines"), "{folded:#?}");
        s.toggle_expand();
        let unfolded = s.transcript(80);
        assert_eq!(unfolded.len(), 13, "{unfolded:#?}");
        assert!(unfolded[12].ends_with("| 12") && unfolded[0].contains("Run: seq 1 12"), "{unfolded:#?}");
        s.toggle_expand();
        assert_eq!(s.transcript(80), folded);
    }
}
