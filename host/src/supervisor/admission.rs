//! Admission (issue 33): caps on turns running at once, per host and per Space, set by the
//! operator (`max_running_turns`, `space_max_running_turns`). A turn over a cap is not refused:
//! its run waits with status `queued` and its place, and its turn starts, first come first
//! served, when a slot frees. Only a full queue (`admission_queue_max`) refuses a start or a
//! message (`RESOURCE_QUEUE_FULL`).
//!
//! A run holds a slot while its status is `running` (taken by [`Admission::try_take`] as its
//! turn starts, given back by [`Admission::release`] when its status becomes anything else).
//! The waiting order is kept in the store (`spaces_store::admission`), so a restarted daemon
//! starts the waiting runs in the same order; the slots are those of the runs stored
//! `running` ([`Admission::restore`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use spaces_store::admission::WaitingRow;
use spaces_store::Store;
use tokio::sync::watch;

/// Default most runs waiting for a slot, host-wide.
pub const DEFAULT_QUEUE_MAX: usize = 1000;

/// The caps, from the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caps {
    /// Most turns running at once on the host; `None`: no cap.
    pub host: Option<usize>,
    /// Most turns running at once per Space, by name.
    pub spaces: BTreeMap<String, usize>,
    /// Most runs waiting for a slot.
    pub queue_max: usize,
}

impl Caps {
    fn of_space(&self, space: &str) -> Option<usize> {
        self.spaces.get(space).copied()
    }
}

/// What [`Admission::try_take`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// The run holds a slot: its turn starts.
    Taken,
    /// The run waits at `place` (1-based) of `waiting`; `why` names the cap.
    Wait { place: usize, waiting: usize, why: String },
}

#[derive(Debug, Default)]
struct State {
    /// Runs holding a slot, with their Space.
    running: HashMap<String, String>,
    /// Runs waiting, first first.
    waiting: Vec<WaitingRow>,
    next_seq: u64,
}

/// The host's slots and its queue.
pub struct Admission {
    caps: Caps,
    state: Mutex<State>,
    /// Bumped whenever a slot frees: waiting actors look again.
    freed: watch::Sender<u64>,
}

impl Admission {
    /// No slot taken, nobody waiting.
    pub fn new(caps: Caps) -> Self {
        Self { caps, state: Mutex::new(State::default()), freed: watch::channel(0).0 }
    }

    /// True when the operator set any cap.
    pub fn capped(&self) -> bool {
        self.caps.host.is_some() || !self.caps.spaces.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a restart: `running` (run id, Space) hold slots, `waiting` wait in their order.
    pub fn restore(&self, running: impl IntoIterator<Item = (String, String)>, waiting: Vec<WaitingRow>) {
        let mut s = self.lock();
        s.running = running.into_iter().collect();
        s.next_seq = waiting.iter().map(|w| w.seq + 1).max().unwrap_or(0);
        s.waiting = waiting;
    }

    /// Whether a new turn of a run that does not wait yet would be refused: the queue is full
    /// and no slot is free for it. Errors name the figures.
    pub fn full_for(&self, run_id: &str, space: &str) -> Option<usize> {
        let s = self.lock();
        if s.running.contains_key(run_id) || s.waiting.iter().any(|w| w.run_id == run_id) {
            return None;
        }
        (s.waiting.len() >= self.caps.queue_max && !self.free_for(&s, space)).then_some(s.waiting.len())
    }

    fn free_for(&self, s: &State, space: &str) -> bool {
        let host = self.caps.host.is_none_or(|cap| s.running.len() < cap);
        let in_space = s.running.values().filter(|sp| *sp == space).count();
        host && self.caps.of_space(space).is_none_or(|cap| in_space < cap)
    }

    /// Whether [`Self::try_take`] would give `run_id` a slot now (no change made).
    pub fn would_take(&self, run_id: &str, space: &str) -> bool {
        if !self.capped() {
            return true;
        }
        let s = self.lock();
        s.running.contains_key(run_id) || self.is_next(&s, run_id, space)
    }

    /// Whether the next free slot is `run_id`'s: it is the first waiting run a slot is free
    /// for, in order (a run of a full Space does not hold up the others), or none waits for
    /// one and a slot is free for its Space.
    fn is_next(&self, s: &State, run_id: &str, space: &str) -> bool {
        match s.waiting.iter().find(|w| self.free_for(s, &w.space)) {
            Some(first) => first.run_id == run_id,
            None => self.free_for(s, space),
        }
    }

    /// Take a slot for a turn of `run_id` in `space`: at once when a cap allows it and no run
    /// that could take it waits ahead; otherwise the run waits (recorded in `store`, keeping
    /// its place if it already waits).
    pub fn try_take(&self, store: &Store, run_id: &str, space: &str) -> Take {
        if !self.capped() {
            return Take::Taken;
        }
        let mut s = self.lock();
        if s.running.contains_key(run_id) {
            return Take::Taken;
        }
        if self.is_next(&s, run_id, space) {
            s.waiting.retain(|w| w.run_id != run_id);
            s.running.insert(run_id.to_owned(), space.to_owned());
            if let Err(e) = store.admission_leave(run_id) {
                tracing::warn!("run {run_id}: its place in the queue stays stored: {e}");
            }
            return Take::Taken;
        }
        if !s.waiting.iter().any(|w| w.run_id == run_id) {
            // A turn reaching here was accepted (the queue's limit is checked at the door,
            // [`Self::full_for`]): it waits, whatever the queue's length.
            let row = WaitingRow { run_id: run_id.to_owned(), space: space.to_owned(), seq: s.next_seq };
            s.next_seq += 1;
            if let Err(e) = store.admission_wait(&row) {
                tracing::warn!("run {run_id}: its place in the queue is kept in memory only: {e}");
            }
            s.waiting.push(row);
        }
        let place = s.waiting.iter().position(|w| w.run_id == run_id).map_or(0, |p| p + 1);
        let why = match (self.caps.host, self.caps.of_space(space)) {
            (Some(h), _) if s.running.len() >= h => format!("the host runs {h} turns at once, its limit"),
            (_, Some(c)) => format!("Space {space:?} runs at most {c} turns at once"),
            _ => "runs ahead of it wait for the same slots".to_owned(),
        };
        Take::Wait { place, waiting: s.waiting.len(), why }
    }

    /// `run_id` no longer runs a turn: its slot frees, and waiting runs look again.
    pub fn release(&self, run_id: &str) {
        if self.lock().running.remove(run_id).is_some() {
            self.freed.send_modify(|n| *n += 1);
        }
    }

    /// `run_id` no longer waits (stopped, or removed).
    pub fn leave(&self, store: &Store, run_id: &str) {
        let mut s = self.lock();
        let before = s.waiting.len();
        s.waiting.retain(|w| w.run_id != run_id);
        if s.waiting.len() != before {
            drop(s);
            if let Err(e) = store.admission_leave(run_id) {
                tracing::warn!("run {run_id}: its place in the queue stays stored: {e}");
            }
            // Those behind it move up.
            self.freed.send_modify(|n| *n += 1);
        }
    }

    /// A receiver that changes whenever a slot frees.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.freed.subscribe()
    }

    /// The place (1-based) of `run_id` among the waiting runs, and how many wait.
    pub fn place(&self, run_id: &str) -> Option<(usize, usize)> {
        let s = self.lock();
        s.waiting.iter().position(|w| w.run_id == run_id).map(|p| (p + 1, s.waiting.len()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        (dir, store)
    }

    #[test]
    fn a_host_cap_of_two_runs_two_and_queues_the_rest_in_order() {
        let (_dir, st) = store();
        let a = Admission::new(Caps { host: Some(2), queue_max: 10, ..Caps::default() });
        assert_eq!(a.try_take(&st, "r1", "s"), Take::Taken);
        assert_eq!(a.try_take(&st, "r2", "s"), Take::Taken);
        for (i, r) in ["r3", "r4", "r5"].into_iter().enumerate() {
            assert!(matches!(a.try_take(&st, r, "s"), Take::Wait { place, waiting, .. } if place == i + 1 && waiting == i + 1));
        }
        // Not its turn: r4 stays second, even once a slot is free.
        a.release("r1");
        assert!(matches!(a.try_take(&st, "r4", "s"), Take::Wait { place: 2, .. }));
        assert_eq!(a.try_take(&st, "r3", "s"), Take::Taken);
        assert_eq!(a.place("r4"), Some((1, 2)));
        // A restarted daemon keeps the order.
        let b = Admission::new(Caps { host: Some(2), queue_max: 10, ..Caps::default() });
        b.restore([("r2".to_owned(), "s".to_owned()), ("r3".to_owned(), "s".to_owned())], st.admission_waiting().unwrap());
        assert_eq!(b.place("r5"), Some((2, 2)));
        b.release("r2");
        assert!(matches!(b.try_take(&st, "r5", "s"), Take::Wait { .. }));
        assert_eq!(b.try_take(&st, "r4", "s"), Take::Taken);
    }

    #[test]
    fn a_full_space_does_not_hold_up_another_and_a_full_queue_refuses() {
        let (_dir, st) = store();
        let mut spaces = BTreeMap::new();
        spaces.insert("busy".to_owned(), 1);
        let a = Admission::new(Caps { host: None, spaces, queue_max: 1 });
        assert_eq!(a.try_take(&st, "r1", "busy"), Take::Taken);
        assert!(matches!(a.try_take(&st, "r2", "busy"), Take::Wait { place: 1, .. }));
        assert!(a.would_take("r3", "other") && !a.would_take("r4", "busy"));
        assert_eq!(a.try_take(&st, "r3", "other"), Take::Taken);
        // The door refuses a new turn once the queue is full; one accepted before waits.
        assert_eq!(a.full_for("r4", "busy"), Some(1));
        assert!(matches!(a.try_take(&st, "r4", "busy"), Take::Wait { place: 2, .. }));
        a.leave(&st, "r2");
        assert_eq!(a.place("r2"), None);
        assert_eq!(a.place("r4"), Some((1, 1)), "those behind move up");
        assert_eq!(st.admission_waiting().unwrap().len(), 1);
    }

    #[test]
    fn without_caps_every_turn_starts() {
        let (_dir, st) = store();
        let a = Admission::new(Caps { queue_max: 0, ..Caps::default() });
        assert!((0..10).all(|i| a.try_take(&st, &format!("r{i}"), "s") == Take::Taken));
    }
}
