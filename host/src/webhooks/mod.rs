//! Webhooks (issue 33): the operator's endpoints, told of run events without polling.
//!
//! Two loops, started by [`Webhooks::spawn`]:
//! - the **scanner** follows every run's event log ([`EventLog::follow_all`]): the log hands it
//!   each published event of a chosen type (`kinds.rs`), so the output lines in between are never
//!   read back. For each one stored after an endpoint was registered it writes one delivery row
//!   per endpoint in the outbox, with the run's scan cursor, in one transaction
//!   (`spaces_store::webhooks`). At start it scans every run from its stored cursor in the
//!   database, so events stored while no daemon ran (a shim's turn ending) are not lost.
//! - the **sender** posts each run's deliveries to each endpoint in order (the next one only
//!   once the one before was taken or given up), signed (`sign.rs`), and retries a failed try
//!   with backoff (1 s doubling to 10 min, at most [`MAX_ATTEMPTS`] tries). A try counts as
//!   taken on any 2xx answer. What was sent but not yet marked when the daemon died is sent
//!   again: at least once, the same `webhook-id`, which receivers use to drop repeats.

mod kinds;
mod sign;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use spaces_sdk::{ApiError, ErrorCode, WebhookAddRequest, WebhookDeliveriesRequest, WebhookDelivery, WebhookRecord, WebhookRemoved};
use spaces_store::eventlog::EventLog;
use spaces_store::webhooks::{DeliveryRow, RunDeliveries, Tried, WebhookRow};
use spaces_store::{now_ms, Store};
use tokio::sync::Notify;

/// Most tries of one delivery before it is given up (`failed`).
pub const MAX_ATTEMPTS: u32 = 12;
/// The wait before the first retry; it doubles with each try, to at most [`RETRY_MAX`].
pub const RETRY_BASE: Duration = Duration::from_secs(1);
/// Longest wait between two tries.
pub const RETRY_MAX: Duration = Duration::from_secs(600);
/// How long one try may take.
const TRY_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest secret, bytes.
const SECRET_MIN: usize = 16;
/// Deliveries in flight at once.
const PARALLEL: usize = 8;

/// The endpoints and their two loops.
pub struct Webhooks {
    store: Arc<Store>,
    log: Arc<EventLog>,
    client: reqwest::Client,
    /// Wakes the sender: new deliveries were written.
    wake: Notify,
    /// Wakes the scanner: an endpoint was added (start following).
    added: Notify,
    /// The endpoints as stored, read once and again only after `webhook_add` or
    /// `webhook_remove` (this struct is their only writer): the loops ask at every pass.
    hooks: std::sync::Mutex<Option<Arc<Vec<WebhookRow>>>>,
}

type Result<T> = std::result::Result<T, ApiError>;

fn invalid(field: &str, why: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidArgument, why).with_field(field)
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("webhooks: {e}"))
}

impl Webhooks {
    /// Webhooks over `store` and `log`; nothing runs until [`Self::spawn`].
    pub fn new(store: Arc<Store>, log: Arc<EventLog>) -> Self {
        let client = reqwest::Client::builder().timeout(TRY_TIMEOUT).build().unwrap_or_default();
        Self { store, log, client, wake: Notify::new(), added: Notify::new(), hooks: std::sync::Mutex::new(None) }
    }

    /// The registered endpoints (see `hooks`); empty when they cannot be read (read again next
    /// time).
    fn hooks(&self) -> Arc<Vec<WebhookRow>> {
        let mut cached = self.hooks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hooks) = cached.as_ref() {
            return hooks.clone();
        }
        match self.store.webhook_list() {
            Ok(rows) => cached.insert(Arc::new(rows)).clone(),
            Err(e) => {
                tracing::warn!("webhooks: endpoints not read: {e}");
                Arc::new(Vec::new())
            }
        }
    }

    /// The endpoints changed: read them again at the next ask.
    fn hooks_changed(&self) {
        *self.hooks.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// `webhook_add`. Errors: `INVALID_ARGUMENT` naming `url` (not http/https), `events` (an
    /// unknown type) or `secret` (shorter than 16 bytes).
    pub fn add(&self, req: &WebhookAddRequest) -> Result<WebhookRecord> {
        let scheme_ok = req.url.starts_with("http://") || req.url.starts_with("https://");
        if !scheme_ok || reqwest::Url::parse(&req.url).is_err() {
            return Err(invalid("url", format!("url {:?} is not an http or https URL", spaces_sdk::bounded(&req.url))));
        }
        for e in &req.events {
            if !spaces_sdk::WEBHOOK_EVENTS.iter().any(|(name, _)| name == e) {
                let known: Vec<&str> = spaces_sdk::WEBHOOK_EVENTS.iter().map(|(n, _)| *n).collect();
                return Err(invalid("events", format!("unknown webhook event {e:?}; known: {}", known.join(", "))));
            }
        }
        if sign::key(&req.secret).len() < SECRET_MIN {
            return Err(invalid("secret", format!("the secret must be at least {SECRET_MIN} bytes")));
        }
        let row = WebhookRow {
            webhook_id: format!("wh-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
            url: req.url.clone(),
            events: req.events.clone(),
            secret: req.secret.clone(),
            created_ms: now_ms(),
        };
        self.store.webhook_insert(&row).map_err(internal)?;
        self.hooks_changed();
        self.added.notify_one();
        Ok(record(&row, (0, 0, 0)))
    }

    /// `webhook_list`.
    pub fn list(&self) -> Result<Vec<WebhookRecord>> {
        let rows = self.store.webhook_list().map_err(internal)?;
        rows.iter().map(|r| Ok(record(r, self.store.webhook_counts(&r.webhook_id).map_err(internal)?))).collect()
    }

    /// `webhook_remove`.
    pub fn remove(&self, webhook_id: &str) -> Result<WebhookRemoved> {
        let removed = self.store.webhook_delete(webhook_id).map_err(internal)?;
        self.hooks_changed();
        Ok(WebhookRemoved { webhook_id: webhook_id.to_owned(), removed })
    }

    /// `webhook_deliveries`. Errors: `INVALID_ARGUMENT` naming `status` (not pending,
    /// delivered or failed).
    pub fn deliveries(&self, req: &WebhookDeliveriesRequest) -> Result<Vec<WebhookDelivery>> {
        if let Some(s) = req.status.as_deref().filter(|s| !["pending", "delivered", "failed"].contains(s)) {
            return Err(invalid("status", format!("status {s:?} is not pending, delivered or failed")));
        }
        let max = req.max.unwrap_or(100).clamp(1, 1000);
        let rows = self.store.webhook_deliveries(req.webhook_id.as_deref(), req.status.as_deref(), max).map_err(internal)?;
        Ok(rows.into_iter().map(delivery).collect())
    }

    /// Start the scanner and the sender (on the current runtime).
    pub fn spawn(self: &Arc<Self>) {
        tokio::spawn(self.clone().scan_loop());
        tokio::spawn(self.clone().send_loop());
    }

    async fn scan_loop(self: Arc<Self>) {
        // Nothing to follow until an endpoint exists (no cost on the event path before).
        while self.hooks().is_empty() {
            self.added.notified().await;
        }
        // From here on every event of a chosen kind is handed over as it is published (the
        // thousands of output lines in between are not read back).
        let mut changes = self.log.follow_all(kinds::wanted);
        // Everything stored before, since the first endpoint was registered, from each run's
        // stored cursor (events stored while no daemon ran, or before a restart).
        let first = self.hooks().iter().map(|w| w.created_ms).min().unwrap_or(0);
        let mut cursors: HashMap<String, u64> = HashMap::new();
        for run_id in self.store.runs_since(first).unwrap_or_default() {
            let (store, id, hooks) = (self.store.clone(), run_id.clone(), self.hooks());
            match tokio::task::spawn_blocking(move || scan_run(&store, &hooks, &id)).await {
                Ok(Ok(seq)) => drop(cursors.insert(run_id, seq)),
                Ok(Err(e)) => tracing::warn!("webhooks: events of run {run_id} not scanned: {e}"),
                Err(e) => tracing::warn!("webhooks: the scan of run {run_id} failed: {e}"),
            }
        }
        self.wake.notify_one();
        loop {
            let handed = self.log.take_changed();
            if handed.iter().any(|(_, _, events)| !events.is_empty()) {
                let (store, known, hooks) = (self.store.clone(), std::mem::take(&mut cursors), self.hooks());
                match tokio::task::spawn_blocking(move || enqueue_handed(&store, &hooks, known, handed)).await {
                    Ok(known) => cursors = known,
                    Err(e) => tracing::warn!("webhooks: deliveries not made: {e}"),
                }
                self.wake.notify_one();
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                _ = self.added.notified() => {}
            }
        }
    }

    async fn send_loop(self: Arc<Self>) {
        // Tries in flight, by delivery id: a slow endpoint holds up only its own runs' queues.
        let mut tries = tokio::task::JoinSet::new();
        let mut in_flight: std::collections::HashSet<String> = std::collections::HashSet::new();
        loop {
            let room = PARALLEL.saturating_sub(in_flight.len()) as u32;
            if room > 0 {
                let due = self.store.webhook_due(now_ms(), PARALLEL as u32 * 2).unwrap_or_default();
                let hooks = self.hooks();
                let fresh: Vec<DeliveryRow> = due.into_iter().filter(|d| !in_flight.contains(&d.delivery_id)).take(room as usize).collect();
                for d in fresh {
                    let Some(hook) = hooks.iter().find(|h| h.webhook_id == d.webhook_id).cloned() else { continue };
                    in_flight.insert(d.delivery_id.clone());
                    let me = self.clone();
                    tries.spawn(async move { me.try_once(&hook, d).await });
                }
            }
            let wait = match self.store.webhook_next_due() {
                Ok(Some(at)) => Duration::from_millis(at.saturating_sub(now_ms()).max(10)),
                _ => Duration::from_secs(60),
            };
            tokio::select! {
                Some(done) = tries.join_next(), if !tries.is_empty() => {
                    // Every try ended by now is stored in one write (the store's one writer is
                    // what the runs' events wait behind).
                    let mut ended: Vec<Tried> = done.into_iter().collect();
                    while let Some(more) = tries.try_join_next() {
                        ended.extend(more);
                    }
                    let ids: Vec<String> = ended.iter().map(|t| t.delivery_id.clone()).collect();
                    if let Err(e) = self.store.webhook_tried(ended) {
                        tracing::warn!("webhooks: the outcomes of {} tries were not stored (they are sent again): {e}", ids.len());
                    }
                    for id in ids {
                        in_flight.remove(&id);
                    }
                }
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One try of `d` to `hook`; its outcome, for the send loop to store.
    async fn try_once(&self, hook: &WebhookRow, d: DeliveryRow) -> Tried {
        let ts = now_ms() / 1000;
        let signature = sign::signature(&hook.secret, &d.delivery_id, ts, &d.payload);
        let sent = self
            .client
            .post(&hook.url)
            .header("content-type", "application/json")
            .header("user-agent", concat!("spacesd/", env!("CARGO_PKG_VERSION")))
            .header("webhook-id", &d.delivery_id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .body(d.payload.clone())
            .send()
            .await;
        let error = match sent {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("HTTP {}", r.status())),
            Err(e) => Some(format!("{e}")),
        };
        let attempts = d.attempts + 1;
        let (status, next) = match &error {
            None => ("delivered", now_ms()),
            Some(_) if attempts >= MAX_ATTEMPTS => ("failed", now_ms()),
            Some(_) => ("pending", now_ms() + backoff(attempts).as_millis() as u64),
        };
        if let Some(why) = &error {
            tracing::info!("webhook {}: delivery {} try {attempts} failed: {why}", hook.webhook_id, d.delivery_id);
        }
        Tried { delivery_id: d.delivery_id, status, attempts, next_ms: next, error }
    }
}

/// The wait after try `attempts` failed.
fn backoff(attempts: u32) -> Duration {
    RETRY_BASE.saturating_mul(1 << attempts.saturating_sub(1).min(20)).min(RETRY_MAX)
}

/// Scan `run_id` from its stored cursor (blocking: database reads, one write per page with
/// deliveries): at start, for what was stored before the scanner followed the log. Returns the
/// seq scanned to.
fn scan_run(store: &Store, hooks: &[WebhookRow], run_id: &str) -> spaces_store::Result<u64> {
    let mut cursor = store.webhook_scanned(run_id)?;
    let Some(run) = store.run_get(run_id)? else { return Ok(cursor) };
    loop {
        let events = store.events_after(run_id, cursor, 500, false)?;
        let Some(last) = events.last().map(|e| e.seq) else { return Ok(cursor) };
        let rows = deliveries_of(hooks, run_id, &run.space, &run.agent, &events);
        if !rows.is_empty() || events.len() < 500 {
            store.webhook_enqueue(run_id, last, rows)?;
        }
        cursor = last;
    }
}

/// The events handed over since the last call ([`EventLog::take_changed`]: by run, its last
/// seq and its events of a chosen kind) made deliveries, written with each run's cursor (only
/// for runs with deliveries: a cursor left behind costs a re-read at the next start, never a
/// loss). `known`: each run's cursor so far; returned updated.
fn enqueue_handed(
    store: &Store,
    hooks: &[WebhookRow],
    mut known: HashMap<String, u64>,
    handed: Vec<(String, u64, Vec<spaces_sdk::Event>)>,
) -> HashMap<String, u64> {
    let (mut batch, mut moved) = (Vec::new(), Vec::new());
    for (run_id, last, events) in handed {
        let cursor = match known.get(&run_id) {
            Some(c) => *c,
            None => store.webhook_scanned(&run_id).unwrap_or(0),
        };
        let fresh: Vec<spaces_sdk::Event> = events.into_iter().filter(|e| e.seq > cursor).collect();
        if fresh.is_empty() {
            known.insert(run_id, cursor.max(last));
            continue;
        }
        let made = store.run_get(&run_id).ok().flatten().map(|run| deliveries_of(hooks, &run_id, &run.space, &run.agent, &fresh));
        moved.push((run_id.clone(), cursor.max(last)));
        batch.push(RunDeliveries { run_id, seq: last, deliveries: made.unwrap_or_default() });
    }
    // All runs' deliveries in one write.
    match store.webhook_enqueue_runs(batch) {
        Ok(()) => known.extend(moved),
        Err(e) => tracing::warn!("webhooks: deliveries of {} runs not stored (made again at the next start): {e}", moved.len()),
    }
    known
}

/// One delivery per chosen event of `events` and endpoint that wants it (and existed when the
/// event was stored).
fn deliveries_of(hooks: &[WebhookRow], run_id: &str, space: &str, agent: &str, events: &[spaces_sdk::Event]) -> Vec<DeliveryRow> {
    let mut rows = Vec::new();
    for e in events {
        for kind in kinds::kinds_of(e) {
            let wants = |h: &&WebhookRow| e.ts_ms >= h.created_ms && (h.events.is_empty() || h.events.iter().any(|k| k == kind));
            for hook in hooks.iter().filter(wants) {
                rows.push(DeliveryRow {
                    delivery_id: format!("{}:{}:{}:{kind}", hook.webhook_id, run_id, e.seq),
                    webhook_id: hook.webhook_id.clone(),
                    run_id: run_id.to_owned(),
                    seq: e.seq,
                    kind: kind.to_owned(),
                    payload: kinds::body(kind, run_id, space, agent, e),
                    status: "pending".into(),
                    attempts: 0,
                    next_ms: 0,
                    last_error: None,
                    created_ms: now_ms(),
                    done_ms: None,
                });
            }
        }
    }
    rows
}

fn record(r: &WebhookRow, (pending, delivered, failed): (u64, u64, u64)) -> WebhookRecord {
    WebhookRecord {
        webhook_id: r.webhook_id.clone(),
        url: r.url.clone(),
        events: r.events.clone(),
        created_ms: r.created_ms,
        pending,
        delivered,
        failed,
    }
}

fn delivery(d: DeliveryRow) -> WebhookDelivery {
    WebhookDelivery {
        next_ms: (d.status == "pending").then_some(d.next_ms),
        delivery_id: d.delivery_id,
        webhook_id: d.webhook_id,
        run_id: d.run_id,
        seq: d.seq,
        event: d.kind,
        status: d.status,
        attempts: d.attempts,
        last_error: d.last_error,
        created_ms: d.created_ms,
        done_ms: d.done_ms,
    }
}
