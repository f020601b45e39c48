//! The event log: durable appends (SQLite) plus wake-ups for long-poll readers.
//!
//! Each run has a `watch` channel holding its last seq; [`EventLog::append`] stores a batch and
//! then publishes the new last seq, so a reader that subscribed before querying can never miss an
//! append (subscribe, query, and only then wait).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spaces_harnesses::EventDraft;
use spaces_sdk::Event;
use tokio::sync::watch;

use crate::error::Result;
use crate::store::{JournalPos, Store};

/// Durable, cursor-readable event logs of every run.
pub struct EventLog {
    store: Arc<Store>,
    watchers: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl EventLog {
    /// A log over `store`.
    pub fn new(store: Arc<Store>) -> Self {
        Self { store, watchers: Mutex::new(HashMap::new()) }
    }

    fn sender(&self, run_id: &str) -> watch::Sender<u64> {
        let mut map = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(run_id.to_owned()).or_insert_with(|| watch::channel(0).0).clone()
    }

    /// Store `drafts` for `run_id` (one transaction) and wake waiting readers.
    pub fn append(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Vec<Event>> {
        self.append_at(run_id, drafts, None)
    }

    /// [`Self::append`], storing the run's journal position `pos` in the same transaction.
    pub fn append_at(&self, run_id: &str, drafts: Vec<EventDraft>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
        let events = self.store.events_append(run_id, drafts, pos)?;
        if let Some(last) = events.last() {
            self.sender(run_id).send_replace(last.seq);
        }
        Ok(events)
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
        let mut rx = self.sender(run_id).subscribe();
        let events = self.store.events_after(run_id, cursor, max, with_raw)?;
        if !events.is_empty() || wait.is_zero() {
            return Ok(events);
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {
                    let events = self.store.events_after(run_id, cursor, max, with_raw)?;
                    if !events.is_empty() {
                        return Ok(events);
                    }
                }
                Ok(Err(_)) | Err(_) => return Ok(Vec::new()),
            }
        }
    }

    /// The last seq stored for `run_id` (0 when none).
    pub fn last_seq(&self, run_id: &str) -> Result<u64> {
        self.store.events_last_seq(run_id)
    }
}
