//! The event log: durable appends (through the store's one writer) plus wake-ups for long-poll
//! readers.
//!
//! Each run has a `watch` channel holding its last stored seq. The writer thread publishes a
//! batch's last seq there right after the batch's transaction commits, before its caller hears
//! back, so a waiting reader wakes as soon as the events are readable. A reader compares the
//! channel's value with its cursor: it queries the database (on a read-only connection, off the
//! async runtime) only when there is something past its cursor, and otherwise waits for the
//! value to change. It subscribes before looking, so it can never miss an append. Right before
//! it publishes, the writer thread keeps the batch's newest events in memory (`recent.rs`): a
//! reader at the tail gets its page from there, without a database read.

mod recent;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spaces_harnesses::EventDraft;
use spaces_sdk::Event;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::{JournalPos, Store};

/// What the writer thread publishes and readers look at: each run's last-seq channel and its
/// newest events.
#[derive(Default)]
struct Shared {
    watchers: Mutex<HashMap<String, watch::Sender<u64>>>,
    recent: Mutex<recent::Recent>,
    /// While someone follows every run ([`EventLog::follow_all`]: the webhook scanner), what
    /// was published since the last [`EventLog::take_changed`]; `None` otherwise.
    changed: Mutex<Option<Following>>,
    /// Bumped with every kept event while following.
    any: std::sync::OnceLock<watch::Sender<u64>>,
}

/// What the follower of every run wants, and what it was handed so far.
struct Following {
    /// Which events it wants (the webhook scanner: the few kinds that make deliveries).
    wants: fn(&Event) -> bool,
    /// By run: the last seq published, and the wanted events among them, in order.
    runs: HashMap<String, (u64, Vec<Event>)>,
}

/// Durable, cursor-readable event logs of every run.
pub struct EventLog {
    store: Arc<Store>,
    shared: Arc<Shared>,
}

/// `events` of `run_id` were just committed: keep the newest in memory, hand the wanted ones
/// to the follower of every run, then wake the readers.
fn publish_events(shared: &Shared, run_id: &str, events: &[Event]) {
    let Some(last) = events.last() else { return };
    shared.recent.lock().unwrap_or_else(|p| p.into_inner()).push(run_id, events);
    if let Some(following) = shared.changed.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        let wanted: Vec<Event> = events.iter().filter(|e| (following.wants)(e)).cloned().collect();
        let entry = match following.runs.get_mut(run_id) {
            Some(entry) => entry,
            None => following.runs.entry(run_id.to_owned()).or_default(),
        };
        entry.0 = entry.0.max(last.seq);
        if !wanted.is_empty() {
            entry.1.extend(wanted);
            if let Some(any) = shared.any.get() {
                any.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
    publish(shared, run_id, last.seq);
}

/// Raise the last seq of `run_id` to `seq` (never lowers it), waking its readers.
fn publish(shared: &Shared, run_id: &str, seq: u64) {
    let mut map = shared.watchers.lock().unwrap_or_else(|p| p.into_inner());
    let tx = match map.get(run_id) {
        Some(tx) => tx,
        None => map.entry(run_id.to_owned()).or_insert_with(|| watch::channel(0).0),
    };
    tx.send_if_modified(|v| {
        let raise = seq > *v;
        if raise {
            *v = seq;
        }
        raise
    });
}

impl EventLog {
    /// A log over `store`.
    pub fn new(store: Arc<Store>) -> Self {
        Self { store, shared: Arc::default() }
    }

    /// Follow every run's appends: from now on every published event `wants` keeps is handed
    /// to [`Self::take_changed`] with its run's last published seq, and the returned receiver
    /// changes when one is kept. The follower reads nothing back from the database for the
    /// events it does not want (the webhook scanner wants a few kinds among thousands of output
    /// lines). Only the webhook scanner calls it, once an endpoint exists.
    pub fn follow_all(&self, wants: fn(&Event) -> bool) -> watch::Receiver<u64> {
        let mut changed = self.shared.changed.lock().unwrap_or_else(|p| p.into_inner());
        changed.get_or_insert_with(|| Following { wants, runs: HashMap::new() });
        self.shared.any.get_or_init(|| watch::channel(0).0).subscribe()
    }

    /// By run: the last seq published and the wanted events among those published since the
    /// last call, in order (while [`Self::follow_all`] is on).
    pub fn take_changed(&self) -> Vec<(String, u64, Vec<Event>)> {
        let mut changed = self.shared.changed.lock().unwrap_or_else(|p| p.into_inner());
        let Some(following) = changed.as_mut() else { return Vec::new() };
        std::mem::take(&mut following.runs).into_iter().map(|(run, (last, events))| (run, last, events)).collect()
    }

    /// The last-seq channel of `run_id`; the first time a run is looked at, its value comes from
    /// the database (events stored by an earlier daemon).
    fn watcher(&self, run_id: &str) -> Result<watch::Sender<u64>> {
        if let Some(tx) = self.shared.watchers.lock().unwrap_or_else(|p| p.into_inner()).get(run_id) {
            return Ok(tx.clone());
        }
        let stored = self.store.events_last_seq(run_id)?;
        publish(&self.shared, run_id, stored);
        let map = self.shared.watchers.lock().unwrap_or_else(|p| p.into_inner());
        map.get(run_id).cloned().ok_or_else(|| Error::Writer(format!("no watcher for run {run_id}")))
    }

    /// Store `drafts` for `run_id` (one transaction) and wake waiting readers. Blocks until the
    /// writer committed; the run actor's output path uses [`Self::append_async`].
    pub fn append(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Vec<Event>> {
        self.append_at(run_id, drafts, None)
    }

    /// [`Self::append`], storing the run's journal position `pos` in the same transaction.
    pub fn append_at(&self, run_id: &str, drafts: Vec<EventDraft>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
        let events = self.store.events_append(run_id, drafts, pos)?;
        publish_events(&self.shared, run_id, &events);
        Ok(events)
    }

    /// [`Self::append_at`] with `first` run in the same transaction, before the events (see
    /// [`Store::events_append_with`]). Blocks until committed; fails whole.
    pub fn append_with(
        &self,
        run_id: &str,
        drafts: Vec<EventDraft>,
        pos: Option<JournalPos>,
        first: impl FnOnce(&rusqlite::Connection) -> Result<()> + Send + 'static,
    ) -> Result<Vec<Event>> {
        let events = self.store.events_append_with(run_id, drafts, pos, first)?;
        publish_events(&self.shared, run_id, &events);
        Ok(events)
    }

    /// [`Self::append_at`] without blocking: the batch joins the writer's next group commit, and
    /// readers are woken from the writer thread as soon as it committed.
    pub async fn append_async(&self, run_id: &str, drafts: Vec<EventDraft>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
        let shared = self.shared.clone();
        let id = run_id.to_owned();
        let after = move |events: &Vec<Event>| publish_events(&shared, &id, events);
        self.store.events_append_async(run_id, drafts, pos, after).await
    }

    /// [`Self::append_async`], but readers are not told: the caller calls [`Self::publish`] with
    /// the returned events once whatever must be visible with them is stored too (a turn's end
    /// is published after the run's state says how the turn ended).
    pub async fn append_async_unpublished(&self, run_id: &str, drafts: Vec<EventDraft>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
        self.store.events_append_async(run_id, drafts, pos, |_: &Vec<Event>| {}).await
    }

    /// Tell the readers of `run_id` about `events`, committed by
    /// [`Self::append_async_unpublished`] (in seq order, the run's newest).
    pub fn publish(&self, run_id: &str, events: &[Event]) {
        publish_events(&self.shared, run_id, events);
    }

    /// Events with `seq > cursor` (at most `max`). When there are none and `wait` is non-zero,
    /// wait up to `wait` for the next append first.
    pub async fn read(&self, run_id: &str, cursor: u64, max: u32, wait: Duration, with_raw: bool) -> Result<Vec<Event>> {
        let mut rx = self.watcher(run_id)?.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let last = *rx.borrow_and_update();
            if last > cursor {
                if !with_raw {
                    let kept = self.shared.recent.lock().unwrap_or_else(|p| p.into_inner()).after(run_id, cursor, max, last);
                    if let Some(events) = kept {
                        return Ok(events);
                    }
                }
                let events = self.fetch(run_id, cursor, max, with_raw).await?;
                if !events.is_empty() {
                    return Ok(events);
                }
            }
            if wait.is_zero() {
                return Ok(Vec::new());
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return Ok(Vec::new()),
            }
        }
    }

    /// One page from the database, on a blocking thread with a read-only connection.
    async fn fetch(&self, run_id: &str, cursor: u64, max: u32, with_raw: bool) -> Result<Vec<Event>> {
        let store = self.store.clone();
        let run_id = run_id.to_owned();
        tokio::task::spawn_blocking(move || store.events_after(&run_id, cursor, max, with_raw))
            .await
            .map_err(|e| Error::Writer(format!("event read task failed: {e}")))?
    }

    /// The last seq of `run_id` as published (0 when none). It can trail a commit by the moment
    /// the writer takes to publish; [`Self::stored_last_seq`] asks the database.
    pub fn last_seq(&self, run_id: &str) -> Result<u64> {
        Ok(*self.watcher(run_id)?.borrow())
    }

    /// Forget the events of `run_id` kept in memory (the run was deleted).
    pub fn forget(&self, run_id: &str) {
        self.shared.recent.lock().unwrap_or_else(|p| p.into_inner()).forget(run_id);
    }

    /// The last seq stored for `run_id`, read from the database (0 when none).
    pub fn stored_last_seq(&self, run_id: &str) -> Result<u64> {
        self.store.events_last_seq(run_id)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use spaces_sdk::EventKind;

    use super::*;

    fn drafts(n: usize, text_bytes: usize) -> Vec<EventDraft> {
        (0..n)
            .map(|i| EventDraft::new(1, EventKind::Message).text(format!("{i} {}", "y".repeat(text_bytes))).raw(format!("{{\"i\":{i}}}")))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_page_is_the_same_from_memory_as_from_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("spaces.db")).unwrap());
        let log = EventLog::new(store.clone());
        // Small batches, then one larger than what is kept in memory, then small ones again.
        for batch in [drafts(3, 10), drafts(1, 10), drafts(200, 900), drafts(2, 10), drafts(5, 3000)] {
            log.append_async("run-a", batch, None).await.unwrap();
        }
        log.append("run-a", drafts(2, 10)).unwrap();
        let last = log.last_seq("run-a").unwrap();
        assert_eq!(last, 213);
        let mut from_memory = 0;
        for cursor in 0..last {
            for max in [1, 7, 1000] {
                let page = log.read("run-a", cursor, max, Duration::ZERO, false).await.unwrap();
                let db = store.events_after("run-a", cursor, max, false).unwrap();
                assert_eq!(page, db, "cursor {cursor}, max {max}");
                from_memory += usize::from(log.shared.recent.lock().unwrap().after("run-a", cursor, max, last).is_some());
            }
        }
        assert!(from_memory > 0, "the tail is served from memory");
        // `raw` comes from the database.
        let page = log.read("run-a", last - 1, 10, Duration::ZERO, true).await.unwrap();
        assert_eq!(page[0].raw.as_deref(), Some("{\"i\":1}"));
        // A deleted run's events are forgotten.
        log.forget("run-a");
        assert!(log.shared.recent.lock().unwrap().after("run-a", last - 1, 10, last).is_none());
    }
}
