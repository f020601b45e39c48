//! Events a full disk kept out of the store, held in order until they fit (docs/operations.md,
//! "A full disk"; issue 30: a turn whose disk filled before its agent's first line lost its
//! `exited` event for good, though the daemon still had it).
//!
//! A batch whose commit found the disk full is kept, with its journal position, and so is every
//! batch after it while one is kept (a run's events are stored in order or not at all). They
//! are stored again after the state dir's reserve is given up, before each new batch, and every
//! [`RETRY`] while any is held; an actor holding some does not retire. A daemon that dies
//! meanwhile loses nothing either: the journal position of a held batch was not stored, so the
//! next daemon reads its lines again from the journal. Errors other than a full disk are not
//! retried (they would fail the same way again): the batch is logged and dropped, as before.

use std::collections::VecDeque;
use std::time::Duration;

use spaces_harnesses::EventDraft;
use spaces_store::JournalPos;

use super::Actor;

/// How often held batches are tried again while the disk stays full.
pub(super) const RETRY: Duration = Duration::from_secs(1);

/// The held batches of one run, oldest first.
#[derive(Default)]
pub(super) struct Unstored {
    batches: VecDeque<(Vec<EventDraft>, Option<JournalPos>)>,
}

impl Unstored {
    pub(super) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    pub(super) fn hold(&mut self, drafts: Vec<EventDraft>, pos: Option<JournalPos>) {
        self.batches.push_back((drafts, pos));
    }
}

impl Actor {
    /// A batch failed to store with `e`: held when the disk is full (the loop then ends the
    /// agent's process for it, `disk.rs`), else logged and dropped.
    pub(super) fn not_stored(&mut self, e: spaces_store::Error, drafts: Vec<EventDraft>, pos: Option<JournalPos>) {
        tracing::error!("run {}: events not stored: {e}", self.run.run_id);
        if e.is_disk_full() {
            self.disk_full.get_or_insert_with(|| e.to_string());
            self.unstored.hold(drafts, pos);
        }
    }

    /// Store the held batches in order, as many as fit now; readers see each once stored.
    pub(super) async fn store_unstored(&mut self) {
        while let Some((drafts, pos)) = self.unstored.batches.front() {
            match self.inner.log.append_async(&self.run.run_id, drafts.clone(), *pos).await {
                Ok(_) => {
                    self.unstored.batches.pop_front();
                }
                Err(e) if e.is_disk_full() => return,
                Err(e) => {
                    tracing::error!("run {}: held events dropped: {e}", self.run.run_id);
                    self.unstored.batches.pop_front();
                }
            }
        }
        tracing::info!("run {}: the events a full disk held are stored", self.run.run_id);
    }
}
