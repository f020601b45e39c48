//! The run's queue of follow-ups, kept in the store as well as in the machine
//! (`spaces_store::queued`): a message the caller was told is queued survives a daemon
//! restart and starts its turn once the turn before it ended (issue 30).

use spaces_store::queued::QueuedRow;

use super::super::keys::{Keyed, Queued};
use super::Actor;

impl Actor {
    /// Queue `message` behind the running turn (`first`: ahead of the others, for a message
    /// that interrupts it), stored before the caller is answered. A store that fails is
    /// logged: the message still waits in memory, as before the store kept queues.
    pub(super) fn keep_queued(&mut self, mut message: Queued, first: bool) {
        let places = self.machine.queue.iter().filter_map(|q| q.n);
        let n = if first { places.min().map_or(0, |n| n - 1) } else { places.max().map_or(1, |n| n + 1) };
        let key = message.key.as_ref().and_then(|(k, report)| k.row(&self.run.run_id, report).ok());
        match self.inner.store.queued_push(&self.run.run_id, QueuedRow { n, text: message.text.clone(), key }) {
            Ok(()) => message.n = Some(n),
            Err(e) => tracing::error!("run {}: a queued message is kept in memory only: {e}", self.run.run_id),
        }
        if first {
            self.machine.queue.push_front(message);
        } else {
            self.machine.queue.push_back(message);
        }
    }

    /// The follow-ups an earlier actor of the run (or an earlier daemon) queued, into the
    /// machine's queue, in order.
    pub(super) fn load_queue(&mut self) {
        match self.inner.store.queued_list(&self.run.run_id) {
            Ok(rows) => self.machine.queue.extend(rows.into_iter().map(|row| Queued {
                text: row.text,
                key: row.key.as_ref().and_then(Keyed::from_row),
                n: Some(row.n),
            })),
            Err(e) => tracing::error!("run {}: its queued messages cannot be read: {e}", self.run.run_id),
        }
    }

    /// The queue was dropped: its stored rows go too.
    pub(super) fn forget_queue(&mut self) {
        if let Err(e) = self.inner.store.queued_clear(&self.run.run_id) {
            tracing::error!("run {}: its dropped queue stays stored: {e}", self.run.run_id);
        }
    }
}
