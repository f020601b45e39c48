//! Webhooks (issue 33): the operator's endpoints, the outbox of deliveries made from run events,
//! and the scan cursor of each run (how far its events were turned into deliveries). A delivery
//! row is written before it is sent and marked when the endpoint answered 2xx (or it gave up),
//! so a daemon killed at any point sends every chosen event at least once, in order per run.

use rusqlite::{params, OptionalExtension, Row};

use super::{now_ms, Store};
use crate::error::Result;

/// One registered endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRow {
    pub webhook_id: String,
    pub url: String,
    /// The webhook event types it wants (`turn.ended`, ...); empty: all.
    pub events: Vec<String>,
    pub secret: String,
    pub created_ms: u64,
}

/// One delivery: an event of a run for one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    /// `<webhook_id>:<run_id>:<seq>:<type>`: the same on every try and after a restart.
    pub delivery_id: String,
    pub webhook_id: String,
    pub run_id: String,
    pub seq: u64,
    /// The webhook event type.
    pub kind: String,
    /// The JSON body sent.
    pub payload: String,
    /// `pending`, `delivered` or `failed` (gave up).
    pub status: String,
    pub attempts: u32,
    /// When the next try is due, Unix ms.
    pub next_ms: u64,
    /// Why the last try failed (the endpoint's status or the connection error).
    pub last_error: Option<String>,
    pub created_ms: u64,
    /// When it was delivered or given up, Unix ms.
    pub done_ms: Option<u64>,
}

/// The deliveries one run's events made, and how far its events were scanned (`seq`).
#[derive(Debug, Clone)]
pub struct RunDeliveries {
    pub run_id: String,
    pub seq: u64,
    pub deliveries: Vec<DeliveryRow>,
}

/// How one try of a delivery ended: `status` `delivered`, `failed`, or `pending` again at
/// `next_ms` (ms since the epoch), after `attempts` tries, with `error` for a failed try.
#[derive(Debug, Clone)]
pub struct Tried {
    pub delivery_id: String,
    pub status: &'static str,
    pub attempts: u32,
    pub next_ms: u64,
    pub error: Option<String>,
}

const DELIVERY_COLUMNS: &str =
    "delivery_id, webhook_id, run_id, seq, kind, payload, status, attempts, next_ms, last_error, created_ms, done_ms";

fn delivery(r: &Row<'_>) -> rusqlite::Result<DeliveryRow> {
    let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
    Ok(DeliveryRow {
        delivery_id: r.get(0)?,
        webhook_id: r.get(1)?,
        run_id: r.get(2)?,
        seq: n(3)?,
        kind: r.get(4)?,
        payload: r.get(5)?,
        status: r.get(6)?,
        attempts: n(7)? as u32,
        next_ms: n(8)?,
        last_error: r.get(9)?,
        created_ms: n(10)?,
        done_ms: r.get::<_, Option<i64>>(11)?.map(|v| v.max(0) as u64),
    })
}

impl Store {
    /// Register `row`.
    pub fn webhook_insert(&self, row: &WebhookRow) -> Result<()> {
        let row = row.clone();
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO webhooks (webhook_id, url, events_json, secret, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![row.webhook_id, row.url, serde_json::to_string(&row.events)?, row.secret, row.created_ms as i64],
            )?;
            Ok(())
        })
    }

    /// Every endpoint, oldest first.
    pub fn webhook_list(&self) -> Result<Vec<WebhookRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached("SELECT webhook_id, url, events_json, secret, created_ms FROM webhooks ORDER BY created_ms")?;
        let rows = stmt.query_map([], |r| {
            let events: String = r.get(2)?;
            Ok(WebhookRow {
                webhook_id: r.get(0)?,
                url: r.get(1)?,
                events: serde_json::from_str(&events).unwrap_or_default(),
                secret: r.get(3)?,
                created_ms: r.get::<_, i64>(4)?.max(0) as u64,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Remove an endpoint and its deliveries; false when there was none.
    pub fn webhook_delete(&self, webhook_id: &str) -> Result<bool> {
        let id = webhook_id.to_owned();
        self.write(move |conn| {
            conn.execute("DELETE FROM webhook_outbox WHERE webhook_id = ?1", params![id])?;
            Ok(conn.execute("DELETE FROM webhooks WHERE webhook_id = ?1", params![id])? > 0)
        })
    }

    /// How far the events of `run_id` were scanned (0: not yet).
    pub fn webhook_scanned(&self, run_id: &str) -> Result<u64> {
        let conn = self.reader()?;
        let seq: Option<i64> =
            conn.prepare_cached("SELECT seq FROM webhook_scan WHERE run_id = ?1")?.query_row(params![run_id], |r| r.get(0)).optional()?;
        Ok(seq.unwrap_or(0).max(0) as u64)
    }

    /// Store `deliveries` (one already stored keeps its state) and the run's scan cursor
    /// `seq`, in one transaction.
    pub fn webhook_enqueue(&self, run_id: &str, seq: u64, deliveries: Vec<DeliveryRow>) -> Result<()> {
        self.webhook_enqueue_runs(vec![RunDeliveries { run_id: run_id.to_owned(), seq, deliveries }])
    }

    /// [`Self::webhook_enqueue`] for several runs, all in one transaction.
    pub fn webhook_enqueue_runs(&self, runs: Vec<RunDeliveries>) -> Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        // The writer runs this in its transaction: the rows and the cursors commit together.
        self.write(move |conn| {
            for run in &runs {
                for d in &run.deliveries {
                    conn.prepare_cached(&format!(
                        "INSERT OR IGNORE INTO webhook_outbox ({DELIVERY_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)"
                    ))?
                    .execute(params![
                        d.delivery_id,
                        d.webhook_id,
                        d.run_id,
                        d.seq as i64,
                        d.kind,
                        d.payload,
                        d.status,
                        d.attempts as i64,
                        d.next_ms as i64,
                        d.last_error,
                        d.created_ms as i64,
                        d.done_ms.map(|v| v as i64),
                    ])?;
                }
                conn.prepare_cached("INSERT INTO webhook_scan (run_id, seq) VALUES (?1, ?2) ON CONFLICT(run_id) DO UPDATE SET seq = ?2")?
                    .execute(params![run.run_id, run.seq as i64])?;
            }
            Ok(())
        })
    }

    /// The deliveries due at `now`: of each endpoint and run, its first pending one (in order
    /// per run), if its next try is due; at most `max`, oldest first.
    pub fn webhook_due(&self, now: u64, max: u32) -> Result<Vec<DeliveryRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_outbox o WHERE o.status = 'pending' AND o.next_ms <= ?1
             AND o.rowid = (SELECT MIN(p.rowid) FROM webhook_outbox p
                          WHERE p.status = 'pending' AND p.webhook_id = o.webhook_id AND p.run_id = o.run_id)
             ORDER BY o.created_ms, o.seq LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![now as i64, max as i64], delivery)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The runs whose events the webhook scanner looks at after a restart: those created at or
    /// after `since_ms`, those it scanned before, and those that may still take turns.
    pub fn runs_since(&self, since_ms: u64) -> Result<Vec<String>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(
            "SELECT run_id FROM runs WHERE created_ms >= ?1 OR run_id IN (SELECT run_id FROM webhook_scan)
             OR status IN ('running', 'queued', 'quota_waiting', 'idle') ORDER BY created_ms",
        )?;
        let rows = stmt.query_map(params![since_ms as i64], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<String>>>()?)
    }

    /// When the next try is due, Unix ms: the earliest of each endpoint and run's first pending
    /// delivery (those behind it wait for it, whatever their own time), if any is pending.
    pub fn webhook_next_due(&self) -> Result<Option<u64>> {
        let conn = self.reader()?;
        let next: Option<i64> = conn
            .prepare_cached(
                "SELECT MIN(o.next_ms) FROM webhook_outbox o WHERE o.status = 'pending'
                 AND o.rowid = (SELECT MIN(p.rowid) FROM webhook_outbox p
                                WHERE p.status = 'pending' AND p.webhook_id = o.webhook_id AND p.run_id = o.run_id)",
            )?
            .query_row([], |r| r.get(0))?;
        Ok(next.map(|v| v.max(0) as u64))
    }

    /// Tries ended (see [`Tried`]), stored in one transaction.
    pub fn webhook_tried(&self, tries: Vec<Tried>) -> Result<()> {
        if tries.is_empty() {
            return Ok(());
        }
        self.write(move |conn| {
            let now = now_ms() as i64;
            for t in &tries {
                let done = (t.status != "pending").then_some(now);
                conn.prepare_cached(
                    "UPDATE webhook_outbox SET status = ?2, attempts = ?3, next_ms = ?4, last_error = ?5, done_ms = ?6 WHERE delivery_id = ?1",
                )?
                .execute(params![t.delivery_id, t.status, t.attempts as i64, t.next_ms as i64, t.error, done])?;
            }
            Ok(())
        })
    }

    /// Deliveries, newest first: of one endpoint or all, of one status or all; at most `max`.
    pub fn webhook_deliveries(&self, webhook_id: Option<&str>, status: Option<&str>, max: u32) -> Result<Vec<DeliveryRow>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_outbox WHERE (?1 IS NULL OR webhook_id = ?1) AND (?2 IS NULL OR status = ?2)
             ORDER BY created_ms DESC, seq DESC LIMIT ?3"
        ))?;
        let rows = stmt.query_map(params![webhook_id, status, max as i64], delivery)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Counts of one endpoint's deliveries by status: (pending, delivered, failed).
    pub fn webhook_counts(&self, webhook_id: &str) -> Result<(u64, u64, u64)> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached("SELECT status, COUNT(*) FROM webhook_outbox WHERE webhook_id = ?1 GROUP BY status")?;
        let mut counts = (0, 0, 0);
        for row in stmt.query_map(params![webhook_id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            let (status, n) = row?;
            let n = n.max(0) as u64;
            match status.as_str() {
                "pending" => counts.0 = n,
                "delivered" => counts.1 = n,
                _ => counts.2 += n,
            }
        }
        Ok(counts)
    }
}
