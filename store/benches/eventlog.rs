//! Event log throughput: events/s appended through the Claude Code normalizer into the durable
//! log, beside a raw batched rusqlite insert of the same rows.
//!
//! Workload: the recorded Claude Code stream-json output in
//! `harnesses/tests/fixtures/claude_code/*.stdout.jsonl`, each file replayed as one turn of one run
//! (`begin_turn`, then every line through `stdout_line`), repeated until one iteration holds about
//! [`TARGET_EVENTS`] events. Every iteration is a fresh run id in the same database file.
//!
//! Variants (each on its own database file in a temp dir, opened like the daemon opens it: WAL,
//! `synchronous=NORMAL`):
//! - `actor_path`: normalizer + `EventLog::append` once per line, as the run actor does;
//! - `store_append`: the same batches, pre-normalized, through `Store::events_append`;
//! - `raw_rusqlite`: the same rows (same JSON bodies, same `raw`), same table shape, same batch
//!   boundaries, one transaction per batch, plain prepared INSERTs (no `MAX(seq)` read, no serde);
//! - `raw_rusqlite_rowid_table`: the same raw inserts into the same columns in an ordinary rowid
//!   table (not the daemon's shape; shows what `WITHOUT ROWID` costs with rows this large);
//! - `normalize_only`: the normalizer alone (no storage), to show where the time goes;
//! - `actor_path_turn_batches`: normalizer + `EventLog::append` once per turn instead of per line,
//!   to show what batching lines would buy.
//!
//! Besides criterion's own report (`thrpt:` in elements/s = events/s), each variant prints one
//! plain `summary:` line with the mean events/s over every iteration criterion ran.
//!
//! Run: `cargo bench -p spaces-store --bench eventlog` (criterion flags after `--`, e.g.
//! `-- --measurement-time 10`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use rusqlite::{params, Connection};
use spaces_harnesses::claude_code::ClaudeCode;
use spaces_harnesses::{EventDraft, Harness};
use spaces_sdk::Event;
use spaces_store::eventlog::EventLog;
use spaces_store::Store;

/// Events per iteration, roughly (the fixture replay is repeated until it reaches this).
const TARGET_EVENTS: usize = 1000;
const PROMPT: &str = "benchmark prompt: list the files and explain them";

/// The events table as `spaces_store` created it before lean rows (`WITHOUT ROWID`, the raw line
/// as text): the shape these variants were first measured on. The store now keeps one row per
/// appended batch (`event_chunks`, `store/src/events.rs`); `scripts/bench load` measures
/// that (`scripts/bench-rowid.py` measured the one-row-per-event shapes before it).
const EVENTS_TABLE: &str = "CREATE TABLE IF NOT EXISTS events (
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    body    TEXT NOT NULL,
    raw     TEXT,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;";

/// The recorded stdout of every Claude Code fixture, one `Vec` of lines per file (sorted by name).
fn fixture_turns() -> Vec<Vec<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../harnesses/tests/fixtures/claude_code");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read fixtures in {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".stdout.jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.stdout.jsonl fixtures in {}", dir.display());
    files.iter().map(|p| std::fs::read_to_string(p).unwrap().lines().map(str::to_owned).collect()).collect()
}

/// The workload: fixture turns repeated `repeat` times.
struct Workload {
    turns: Vec<Vec<String>>,
    repeat: usize,
}

impl Workload {
    fn new() -> Self {
        let turns = fixture_turns();
        let per_pass: usize = Self { turns: turns.clone(), repeat: 1 }.batches_per_line().iter().map(Vec::len).sum();
        let repeat = TARGET_EVENTS.div_ceil(per_pass).max(1);
        Self { turns, repeat }
    }

    /// Drive a fresh normalizer over the workload, handing each line's drafts (and each
    /// `begin_turn`'s) to `sink` as the actor does; `end_turn` is called after each turn.
    fn drive(&self, mut sink: impl FnMut(Vec<EventDraft>), mut end_turn: impl FnMut()) {
        let mut norm = ClaudeCode.normalizer();
        let mut turn = 0;
        for _ in 0..self.repeat {
            for lines in &self.turns {
                turn += 1;
                sink(norm.begin_turn(turn, PROMPT));
                for line in lines {
                    sink(norm.stdout_line(line));
                }
                end_turn();
            }
        }
    }

    /// The non-empty batches the actor would append (one per line / `begin_turn`).
    fn batches_per_line(&self) -> Vec<Vec<EventDraft>> {
        let mut out = Vec::new();
        self.drive(
            |d| {
                if !d.is_empty() {
                    out.push(d)
                }
            },
            || {},
        );
        out
    }

    fn events(&self) -> usize {
        self.batches_per_line().iter().map(Vec::len).sum()
    }
}

/// One stored row: (seq, body, raw), serialized as `Store::events_append` does.
type Row = (i64, String, Option<String>);

fn rows_of(batches: &[Vec<EventDraft>]) -> Vec<Vec<Row>> {
    let mut seq = 0i64;
    let ts_ms = 1_760_000_000_000;
    batches
        .iter()
        .map(|batch| {
            batch
                .iter()
                .map(|d| {
                    seq += 1;
                    let event = Event {
                        seq: seq as u64,
                        ts_ms,
                        turn: d.turn,
                        kind: d.kind,
                        category: d.category,
                        text: d.text.clone(),
                        tool_id: d.tool_id.clone(),
                        tool_title: d.tool_title.clone(),
                        tool_kind: d.tool_kind.clone(),
                        tool_status: d.tool_status,
                        stop_reason: d.stop_reason,
                        summary: d.summary.clone(),
                        usage: d.usage.clone(),
                        files: d.files.clone(),
                        raw: None,
                    };
                    (seq, serde_json::to_string(&event).unwrap(), d.raw.clone())
                })
                .collect()
        })
        .collect()
}

/// A WAL database at `path` holding the events table as `table_sql` creates it.
fn raw_connection(path: &Path, table_sql: &str) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch(table_sql).unwrap();
    conn
}

/// Times [`insert_rows`] of the same rows under a fresh run id per iteration.
fn bench_raw(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut conn: Connection,
    rows: &[Vec<Row>],
) -> Tally {
    let mut tally = Tally::default();
    let mut run = 0u64;
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            let mut n = 0;
            for _ in 0..iters {
                run += 1;
                let run_id = format!("run-{run}");
                n += insert_rows(&mut conn, &run_id, rows);
            }
            let t = start.elapsed();
            tally.add(n, t);
            t
        })
    });
    tally
}

/// Insert `rows` for `run_id`, one transaction per batch; returns the number of rows.
fn insert_rows(conn: &mut Connection, run_id: &str, rows: &[Vec<Row>]) -> usize {
    let mut n = 0;
    for batch in rows {
        let tx = conn.transaction().unwrap();
        {
            let mut stmt = tx.prepare_cached("INSERT INTO events (run_id, seq, body, raw) VALUES (?1, ?2, ?3, ?4)").unwrap();
            for (seq, body, raw) in batch {
                stmt.execute(params![run_id, seq, body, raw]).unwrap();
            }
        }
        tx.commit().unwrap();
        n += batch.len();
    }
    n
}

/// Events and time accumulated over every iteration criterion ran (warm-up included).
#[derive(Default)]
struct Tally {
    events: u64,
    time: Duration,
}

impl Tally {
    fn add(&mut self, events: usize, time: Duration) {
        self.events += events as u64;
        self.time += time;
    }

    fn print(&self, name: &str, batches: usize, events_per_iter: usize) {
        let secs = self.time.as_secs_f64();
        let rate = if secs > 0.0 { self.events as f64 / secs } else { 0.0 };
        println!(
            "summary: eventlog/{name}: {rate:.0} events/s ({} events in {secs:.2} s; {events_per_iter} events in {batches} transactions per iteration)",
            self.events
        );
    }
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::Builder::new().prefix("spaces-bench-eventlog-").tempdir().unwrap();
    let work = Workload::new();
    let n_events = work.events();
    let per_line = work.batches_per_line();
    let n_batches = per_line.len();
    let rows = rows_of(&per_line);
    let mut turns = 0usize;
    work.drive(|_| {}, || turns += 1);
    println!(
        "eventlog workload: {} fixture turns x {} = {turns} turns, {n_events} events in {n_batches} per-line batches per iteration (avg {:.2} events/batch)",
        work.turns.len(),
        work.repeat,
        n_events as f64 / n_batches as f64
    );

    let mut summaries: Vec<(String, Tally, usize)> = Vec::new();
    let mut group = c.benchmark_group("eventlog");
    group.throughput(Throughput::Elements(n_events as u64));

    // Normalizer + EventLog::append per line: the run actor's path.
    {
        let store = Arc::new(Store::open(&tmp.path().join("actor.db")).unwrap());
        let log = EventLog::new(store);
        let mut tally = Tally::default();
        let mut run = 0u64;
        group.bench_function("actor_path", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut n = 0;
                for _ in 0..iters {
                    run += 1;
                    let run_id = format!("run-{run}");
                    work.drive(|d| n += log.append(&run_id, d).unwrap().len(), || {});
                }
                let t = start.elapsed();
                tally.add(n, t);
                t
            })
        });
        summaries.push(("actor_path".into(), tally, n_batches));
    }

    // Store::events_append with pre-normalized batches.
    {
        let store = Store::open(&tmp.path().join("store.db")).unwrap();
        let mut tally = Tally::default();
        let mut run = 0u64;
        group.bench_function("store_append", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut n = 0;
                for _ in 0..iters {
                    run += 1;
                    let run_id = format!("run-{run}");
                    let batches = per_line.clone();
                    let start = Instant::now();
                    for batch in batches {
                        n += store.events_append(&run_id, batch, None).unwrap().len();
                    }
                    total += start.elapsed();
                }
                tally.add(n, total);
                total
            })
        });
        summaries.push(("store_append".into(), tally, n_batches));
    }

    // Raw rusqlite: the same rows, same batches, one transaction per batch.
    let conn = raw_connection(&tmp.path().join("raw.db"), EVENTS_TABLE);
    summaries.push(("raw_rusqlite".into(), bench_raw(&mut group, "raw_rusqlite", conn, &rows), n_batches));

    // Raw rusqlite again, into the same columns in an ordinary rowid table (PRIMARY KEY as a
    // separate index): shows what the `WITHOUT ROWID` shape costs with rows this large.
    let conn = raw_connection(&tmp.path().join("raw_rowid.db"), &EVENTS_TABLE.replace(" WITHOUT ROWID", ""));
    let tally = bench_raw(&mut group, "raw_rusqlite_rowid_table", conn, &rows);
    summaries.push(("raw_rusqlite_rowid_table".into(), tally, n_batches));

    // The normalizer alone.
    {
        let mut tally = Tally::default();
        group.bench_function("normalize_only", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut n = 0;
                for _ in 0..iters {
                    work.drive(|d| n += black_box(d).len(), || {});
                }
                let t = start.elapsed();
                tally.add(n, t);
                t
            })
        });
        summaries.push(("normalize_only".into(), tally, 0));
    }

    // Normalizer + EventLog::append once per turn (what batching lines would buy).
    {
        let store = Arc::new(Store::open(&tmp.path().join("turns.db")).unwrap());
        let log = EventLog::new(store);
        let mut tally = Tally::default();
        let mut run = 0u64;
        group.bench_function("actor_path_turn_batches", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut n = 0;
                for _ in 0..iters {
                    run += 1;
                    let run_id = format!("run-{run}");
                    let pending = std::cell::RefCell::new(Vec::new());
                    work.drive(|d| pending.borrow_mut().extend(d), || n += log.append(&run_id, pending.take()).unwrap().len());
                }
                let t = start.elapsed();
                tally.add(n, t);
                t
            })
        });
        summaries.push(("actor_path_turn_batches".into(), tally, turns));
    }
    group.finish();

    println!();
    for (name, tally, batches) in &summaries {
        tally.print(name, *batches, n_events);
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
}
