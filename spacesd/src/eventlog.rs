//! The event log: durable appends (through the store's one writer) plus wake-ups for long-poll
//! readers.
//!
//! Each run has a `watch` channel holding its last stored seq. The writer thread publishes a
//! batch's last seq there right after the batch's transaction commits, before its caller hears
//! back, so a waiting reader wakes as soon as the events are readable. A reader compares the
//! channel's value with its cursor: it queries the database (on a read-only connection, off the
//! async runtime) only when there is something past its cursor, and otherwise waits for the
//! value to change. It subscribes before looking, so it can never miss an append.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spaces_harnesses::EventDraft;
use spaces_sdk::Event;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::store::{JournalPos, Store};

type Watchers = Arc<Mutex<HashMap<String, watch::Sender<u64>>>>;

/// Durable, cursor-readable event logs of every run.
pub struct EventLog {
    store: Arc<Store>,
    watchers: Watchers,
}

/// Raise the last seq of `run_id` to `seq` (never lowers it), waking its readers.
fn publish(watchers: &Watchers, run_id: &str, seq: u64) {
    let mut map = watchers.lock().unwrap_or_else(|p| p.into_inner());
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
        Self { store, watchers: Arc::new(Mutex::new(HashMap::new())) }
    }

    /// The last-seq channel of `run_id`; the first time a run is looked at, its value comes from
    /// the database (events stored by an earlier daemon).
    fn watcher(&self, run_id: &str) -> Result<watch::Sender<u64>> {
        if let Some(tx) = self.watchers.lock().unwrap_or_else(|p| p.into_inner()).get(run_id) {
            return Ok(tx.clone());
        }
        let stored = self.store.events_last_seq(run_id)?;
        publish(&self.watchers, run_id, stored);
        let map = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        map.get(run_id).cloned().ok_or_else(|| Error::Writer(format!("no watcher for run {run_id}")))
    }

    /// Store `drafts` for `run_id` (one transaction) and wake waiting readers. Blocks until the
    /// writer committed; the run actor's output path uses [`Self::append_async`].
    pub fn append(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Vec<Event>> {
        self.append_at(run_id, drafts, None)
    }

    /// [`Self::append`], storing the run's journal position `pos` in the same transaction.
    pub fn append_at(&self, run_id: &str, drafts: Vec<EventDraft>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
        if drafts.is_empty() && pos.is_none() {
            return Ok(Vec::new());
        }
        self.append_with(run_id, drafts, pos, |_| Ok(()))
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
        if let Some(last) = events.last() {
            publish(&self.watchers, run_id, last.seq);
        }
        Ok(events)
    }

    /// [`Self::append_at`] without blocking: the batch joins the writer's next group commit, and
    /// readers are woken from the writer thread as soon as it committed.
    pub async fn append_async(&self, run_id: &str, drafts: Vec<EventDraft>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
        let watchers = self.watchers.clone();
        let id = run_id.to_owned();
        let after = move |events: &Vec<Event>| {
            if let Some(last) = events.last() {
                publish(&watchers, &id, last.seq);
            }
        };
        self.store.events_append_async(run_id, drafts, pos, after).await
    }

    /// Events with `seq > cursor` (at most `max`). When there are none and `wait` is non-zero,
    /// wait up to `wait` for the next append first.
    pub async fn read(
        &self,
        run_id: &str,
        cursor: u64,
        max: u32,
        wait: Duration,
        with_raw: bool,
    ) -> Result<Vec<Event>> {
        let mut rx = self.watcher(run_id)?.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let last = *rx.borrow_and_update();
            if last > cursor {
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

    /// The last seq stored for `run_id`, read from the database (0 when none).
    pub fn stored_last_seq(&self, run_id: &str) -> Result<u64> {
        self.store.events_last_seq(run_id)
    }
}
