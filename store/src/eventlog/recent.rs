//! The newest events of each run, kept in memory for the readers at the tail of its log.
//!
//! A follower (a long-poll at its cursor, an SSE stream) wakes when the writer has committed
//! events past its cursor, and almost always wants just those. Reading them back from the
//! database costs a hop to a blocking thread and a query on a read-only connection; on a busy
//! host each hop waits for a CPU. So the writer thread, right after a commit and before it
//! wakes the readers, copies the batch's newest events (without `raw`) here, and a reader whose
//! cursor falls inside what is kept gets its page from memory.
//!
//! What is kept is always a contiguous run of seqs ending at the run's last committed event:
//! a batch that does not follow on from what is kept replaces it, and only a batch's newest
//! events are kept when it is larger than the bound. A reader is served from here only when
//! every event it asks for is here (its cursor is at most one before the first kept event);
//! anything else (an older cursor, `raw` wanted, a daemon that just started) reads the
//! database, so a page is the same whichever way it is read. Bounds: [`RUN_EVENTS`] events
//! and [`RUN_BYTES`] per run, [`TOTAL_BYTES`] over every run (the runs appended to longest ago
//! are forgotten first).

use std::collections::{HashMap, VecDeque};

use spaces_sdk::Event;

/// Most events kept per run.
pub const RUN_EVENTS: usize = 64;
/// Most bytes (about: an event's text fields plus [`EVENT_OVERHEAD`]) kept per run.
pub const RUN_BYTES: usize = 32 * 1024;
/// Most bytes kept over every run.
pub const TOTAL_BYTES: usize = 8 * 1024 * 1024;
/// Bytes counted per event on top of its text fields (seq, kinds, `usage`, the allocations).
const EVENT_OVERHEAD: usize = 160;

/// The kept events of every run.
#[derive(Default)]
pub(crate) struct Recent {
    runs: HashMap<String, Tail>,
    /// Bytes kept over every run.
    bytes: usize,
    /// Counts pushes; each run remembers when it was last pushed to.
    clock: u64,
}

/// One run's kept events: contiguous seqs, oldest first.
#[derive(Default)]
struct Tail {
    events: VecDeque<Event>,
    bytes: usize,
    pushed_at: u64,
}

/// A copy of `e` without its `raw` line (not copied: it is the largest field).
fn without_raw(e: &Event) -> Event {
    Event {
        seq: e.seq,
        ts_ms: e.ts_ms,
        turn: e.turn,
        kind: e.kind,
        category: e.category,
        text: e.text.clone(),
        tool_id: e.tool_id.clone(),
        tool_title: e.tool_title.clone(),
        tool_kind: e.tool_kind.clone(),
        tool_status: e.tool_status,
        stop_reason: e.stop_reason,
        summary: e.summary.clone(),
        usage: e.usage.clone(),
        files: e.files.clone(),
        raw: None,
    }
}

/// About how much memory `e` holds, in bytes (`raw` is never kept).
fn size_of(e: &Event) -> usize {
    let text = [&e.text, &e.tool_id, &e.tool_title, &e.tool_kind, &e.summary];
    let files = e.files.as_ref().map_or(0, |f| f.iter().map(|c| c.path.len() + 48).sum::<usize>());
    EVENT_OVERHEAD + files + text.iter().map(|t| t.as_ref().map_or(0, String::len)).sum::<usize>()
}

impl Recent {
    /// Keep the newest of `events` (just committed, in seq order) for `run_id`; they replace
    /// what was kept when they do not follow on from it.
    pub(crate) fn push(&mut self, run_id: &str, events: &[Event]) {
        let Some(first) = events.first() else { return };
        self.clock += 1;
        let tail = self.runs.entry(run_id.to_owned()).or_default();
        tail.pushed_at = self.clock;
        // The newest events that fit the run's bound, kept in order.
        let mut take = 0;
        let mut bytes = 0;
        for e in events.iter().rev() {
            let size = size_of(e);
            if take == RUN_EVENTS || bytes + size > RUN_BYTES {
                break;
            }
            take += 1;
            bytes += size;
        }
        // What was kept must end right before what is kept now: otherwise start over.
        let joins = take == events.len() && tail.events.back().is_none_or(|last| last.seq + 1 == first.seq);
        if !joins {
            self.bytes -= tail.bytes;
            tail.events.clear();
            tail.bytes = 0;
        }
        tail.events.extend(events[events.len() - take..].iter().map(without_raw));
        tail.bytes += bytes;
        self.bytes += bytes;
        while tail.events.len() > RUN_EVENTS || tail.bytes > RUN_BYTES {
            let Some(old) = tail.events.pop_front() else { break };
            let size = size_of(&old);
            tail.bytes -= size;
            self.bytes -= size;
        }
        self.evict(run_id);
    }

    /// Forget the runs pushed to longest ago while more than [`TOTAL_BYTES`] are kept (never
    /// `keep`, the run just pushed to).
    fn evict(&mut self, keep: &str) {
        while self.bytes > TOTAL_BYTES {
            let oldest = self.runs.iter().filter(|(id, _)| id.as_str() != keep).min_by_key(|(_, t)| t.pushed_at).map(|(id, _)| id.clone());
            let Some(id) = oldest else { break };
            self.forget(&id);
        }
    }

    /// Forget what is kept of `run_id` (the run was deleted).
    pub(crate) fn forget(&mut self, run_id: &str) {
        if let Some(tail) = self.runs.remove(run_id) {
            self.bytes -= tail.bytes;
        }
    }

    /// Up to `max` events of `run_id` with `seq > cursor`, when every one of them is kept and
    /// what is kept reaches `last` (the run's last published seq); `None` when the database
    /// must answer.
    pub(crate) fn after(&self, run_id: &str, cursor: u64, max: u32, last: u64) -> Option<Vec<Event>> {
        let tail = self.runs.get(run_id)?;
        let first = tail.events.front()?.seq;
        let newest = tail.events.back()?.seq;
        if cursor + 1 < first || newest < last || cursor >= newest {
            return None;
        }
        let skip = (cursor + 1 - first) as usize;
        Some(tail.events.iter().skip(skip).take(max as usize).cloned().collect())
    }

    /// Bytes kept over every run (for tests and figures).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use spaces_sdk::{Category, EventKind};

    use super::*;

    /// Events `from..=to` of one run, each with `text_bytes` of text and a raw line.
    fn events(from: u64, to: u64, text_bytes: usize) -> Vec<Event> {
        (from..=to)
            .map(|seq| Event {
                seq,
                ts_ms: 1,
                turn: 1,
                kind: EventKind::Message,
                category: Category::Activity,
                text: Some(format!("{seq:06}{}", "x".repeat(text_bytes.saturating_sub(6)))),
                tool_id: None,
                tool_title: None,
                tool_kind: None,
                tool_status: None,
                stop_reason: None,
                summary: None,
                usage: None,
                files: None,
                raw: Some(format!("{{\"line\":{seq}}}")),
            })
            .collect()
    }

    fn seqs(events: &[Event]) -> Vec<u64> {
        events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn a_reader_at_the_tail_gets_the_events_past_its_cursor_without_raw() {
        let mut r = Recent::default();
        r.push("a", &events(1, 3, 10));
        r.push("a", &events(4, 5, 10));
        let page = r.after("a", 2, 100, 5).unwrap();
        assert_eq!(seqs(&page), [3, 4, 5]);
        assert!(page.iter().all(|e| e.raw.is_none()), "raw is read from the database only");
        assert_eq!(page[0].text, events(3, 3, 10)[0].text);
        assert_eq!(seqs(&r.after("a", 0, 2, 5).unwrap()), [1, 2], "at most `max`");
        assert!(r.after("b", 0, 10, 1).is_none(), "another run has nothing kept");
    }

    #[test]
    fn a_cursor_before_what_is_kept_or_a_newer_published_seq_reads_the_database() {
        let mut r = Recent::default();
        // 100 events of 1 KiB: only the newest that fit the run's bound are kept.
        r.push("a", &events(1, 100, 1024));
        assert!(r.after("a", 0, 1000, 100).is_none(), "the oldest are not kept");
        let kept = r.after("a", 99, 1000, 100).unwrap();
        assert_eq!(seqs(&kept), [100]);
        let first_kept = (1..=100).find(|c| r.after("a", *c, 1000, 100).is_some()).unwrap();
        assert!(first_kept > 60, "about {} KiB kept", RUN_BYTES / 1024);
        assert_eq!(r.after("a", first_kept, 1000, 100).unwrap().len() as u64, 100 - first_kept);
        assert!(r.after("a", 99, 1000, 101).is_none(), "a seq published but not kept: the database");
        assert!(r.after("a", 100, 1000, 100).is_none(), "nothing past the cursor");
    }

    #[test]
    fn a_batch_that_does_not_follow_on_replaces_what_was_kept() {
        let mut r = Recent::default();
        r.push("a", &events(1, 3, 10));
        r.push("a", &events(10, 11, 10));
        assert_eq!(seqs(&r.after("a", 9, 10, 11).unwrap()), [10, 11]);
        assert!(r.after("a", 2, 10, 11).is_none(), "no gap is ever served");
        // A batch larger than the bound replaces everything with its newest events.
        r.push("a", &events(12, 12 + RUN_EVENTS as u64 + 5, 10));
        let last = 12 + RUN_EVENTS as u64 + 5;
        assert!(r.after("a", 11, 1000, last).is_none());
        assert_eq!(r.after("a", last - RUN_EVENTS as u64, 1000, last).unwrap().len(), RUN_EVENTS);
    }

    #[test]
    fn over_the_total_bound_the_runs_pushed_to_longest_ago_are_forgotten() {
        let mut r = Recent::default();
        let runs = 2 * TOTAL_BYTES / RUN_BYTES;
        for i in 0..runs {
            r.push(&format!("run-{i}"), &events(1, 30, 1000));
        }
        assert!(r.bytes() <= TOTAL_BYTES, "{} bytes kept", r.bytes());
        assert!(r.after("run-0", 29, 10, 30).is_none(), "the first run pushed to is forgotten");
        assert!(r.after(&format!("run-{}", runs - 1), 29, 10, 30).is_some(), "the last one is kept");
        r.forget(&format!("run-{}", runs - 1));
        assert!(r.after(&format!("run-{}", runs - 1), 29, 10, 30).is_none());
        let kept: usize = r.runs.values().map(|t| t.bytes).sum();
        assert_eq!(kept, r.bytes(), "the total is the sum of what each run keeps");
    }
}
