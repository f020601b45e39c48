#!/usr/bin/env python3
"""The events table's shape, measured (issue 12): the same rows into three tables, interleaved.

Rows are the load bench's (spacesd/benches/load.rs): an event JSON body of about 1.6 KB and the
harness's raw line of about the same size. Variants, each into a fresh database (WAL,
synchronous=NORMAL, 1,000 rows a transaction, as the daemon opens its own):
- `without_rowid_body_raw`: the old shape, `WITHOUT ROWID`, the text twice (body + raw);
- `rowid_body_raw`: the same columns in a plain rowid table;
- `rowid_lean`: what the daemon stores now, a rowid table with the body and the raw line
  compressed (zlib level 1 here, standing in for zstd level 1: both shrink this line to a few
  dozen bytes).
Prints rows/s and bytes per row on disk (db + wal) per round, then min / median over rounds and
the ratios to the old shape. Usage: scripts/bench-rowid.py [rounds] [rows]
"""
import json, os, sqlite3, statistics, sys, tempfile, time, zlib

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000
PAD = "x" * (1600 - 330)


def row(i):
    text = f"noise {i} {PAD}"
    raw = json.dumps({"type": "assistant", "message": {"id": f"msg_{i}", "type": "message", "role": "assistant",
                      "model": "fake-load-model", "content": [{"type": "text", "text": text}], "stop_reason": None,
                      "usage": {"input_tokens": 1, "output_tokens": 1}}, "parent_tool_use_id": None,
                      "session_id": "00000000-0000-4000-8000-0000000bload"})
    body = json.dumps({"seq": 0, "ts_ms": 1764500000000 + i, "turn": 1, "kind": "message", "category": "assistant",
                       "text": text, "summary": text[:80]})
    return body, raw


def run(variant, rows):
    d = tempfile.mkdtemp(prefix="spaces-rowid-")
    path = os.path.join(d, "e.db")
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")
    if variant == "without_rowid_body_raw":
        c.execute("CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, raw TEXT, PRIMARY KEY (run_id, seq)) WITHOUT ROWID")
    elif variant == "rowid_body_raw":
        c.execute("CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, raw TEXT, PRIMARY KEY (run_id, seq))")
    else:
        c.execute("CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, raw_z BLOB, PRIMARY KEY (run_id, seq))")
    lean = variant == "rowid_lean"
    start = time.perf_counter()
    c.execute("BEGIN")
    for i, (body, raw) in enumerate(rows):
        # 50 runs, interleaved as the daemon's group commits interleave them.
        run_id, seq = f"run-{i % 50:032x}", i // 50 + 1
        c.execute("INSERT INTO events VALUES (?, ?, ?, ?)", (run_id, seq, body, zlib.compress(raw.encode(), 1) if lean else raw))
        if (i + 1) % 1000 == 0:
            c.execute("COMMIT")
            c.execute("BEGIN")
    c.execute("COMMIT")
    secs = time.perf_counter() - start
    c.close()
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    os.rmdir(d)
    return len(rows) / secs, size / len(rows)


def main():
    rows = [row(i) for i in range(ROWS)]
    row_bytes = sum(len(b) + len(r) for b, r in rows) / len(rows)
    variants = ["without_rowid_body_raw", "rowid_body_raw", "rowid_lean"]
    got = {v: [] for v in variants}
    for r in range(ROUNDS):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            rate, per = run(v, rows)
            got[v].append((rate, per))
            print(f"rowid-raw: round={r + 1} {v} {rate:.0f} rows/s {per:.0f} disk bytes/row")
    base = statistics.median(x for x, _ in got[variants[0]])
    print(f"rowid: {ROWS} rows of {row_bytes:.0f} bytes (body + raw), {ROUNDS} rounds, load average {os.getloadavg()[0]:.2f}")
    for v in variants:
        rates = sorted(x for x, _ in got[v])
        per = statistics.median(p for _, p in got[v])
        med = statistics.median(rates)
        print(f"rowid: {v}: rows/s min {rates[0]:.0f} median {med:.0f} ({med / base:.2f}x the old shape); "
              f"disk {per:.0f} bytes/row ({per / row_bytes:.2f}x the row)")


main()
