"""Round trip of the Python SDK beside plain HTTP from Python, in one run, interleaved.

    python bindings/python/bench.py [--n 1000]

Starts a daemon in a temp state dir through the SDK, the test kit's scripted model
(target/debug/scripted-model) and one Claude Code run (SPACES_TOOLS_DIR) to its idle state, then
times, N times each and interleaved: `agent_status` and an empty `agent_events` page (cursor at the
end) through `Space` (awaited on asyncio), and the same two GETs with http.client over the daemon's
Unix socket, once on a new connection per request and once on one kept-alive connection (what the
SDK's client does since it keeps its connections). Prints p50/p99 in µs and the SDK's median as a
ratio of the kept-alive raw call's, idle and then with one core spinning (a shell busy loop); the
figures go to docs/benchmarks.md. Kills the daemon and the model at the end."""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spaces import Spaces

REPO = Path(__file__).resolve().parents[2]


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost")
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def http_get(sock: str, url: str) -> bytes:
    conn = UnixHTTPConnection(sock)
    conn.request("GET", url)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200, body
    return body


class KeptAlive:
    """One HTTP/1.1 connection to the daemon's Unix socket, reused for every GET."""

    def __init__(self, sock: str) -> None:
        self.conn = UnixHTTPConnection(sock)

    def get(self, url: str) -> bytes:
        self.conn.request("GET", url)
        resp = self.conn.getresponse()
        body = resp.read()
        assert resp.status == 200, body
        return body


def pct(xs: list, p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] / 1000.0


async def main(n: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="spaces-bench-"))
    (root / "proj").mkdir()
    script = root / "model.json"
    script.write_text(json.dumps({"replies": [], "fallback": {"text": "hello"}}))
    model = subprocess.Popen([str(REPO / "target/debug/scripted-model"), "--wire", "anthropic", "--script", str(script)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert model.stdout is not None
    url = model.stdout.readline().decode().split()[-1]
    spaces = Spaces(state_dir=root / "state")
    try:
        await spaces.add_space("bench", root / "proj")
        space = spaces.space("bench")
        run = await space.agent_start("claude-code", "Say hello.", options={"base_url": url})
        deadline = time.monotonic() + 120
        while not (st := await space.agent_status(run.run_id)).accepts_message:
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.1)
        cursor = json.loads(await space.agent_events(run.run_id, cursor=0, max=1000))["cursor"]
        sock = str(root / "state" / "spacesd.sock")
        status_url = f"/v1/spaces/bench/agents/{run.run_id}"
        events_url = f"/v1/spaces/bench/agents/{run.run_id}/events?cursor={cursor}"
        for condition in ("idle", "busy"):
            busy = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if condition == "busy" else None
            try:
                await measure(space, run.run_id, sock, status_url, events_url, cursor, n, condition)
            finally:
                if busy:
                    busy.kill()
                    busy.wait()
        await space.agent_stop(run.run_id)
    finally:
        if spaces.daemon_pid:
            os.kill(spaces.daemon_pid, signal.SIGTERM)
        model.terminate()
        model.wait()
        time.sleep(0.5)
        shutil.rmtree(root, ignore_errors=True)


async def measure(space, run_id: str, sock: str, status_url: str, events_url: str, cursor: int, n: int, condition: str) -> None:
    kept = KeptAlive(sock)
    names = ("sdk status", "http status", "kept status", "sdk events", "http events", "kept events")
    t: dict = {k: [] for k in names}
    for i in range(n + 50):
        a = time.perf_counter_ns(); await space.agent_status(run_id); b = time.perf_counter_ns()
        http_get(sock, status_url); c = time.perf_counter_ns()
        kept.get(status_url); d = time.perf_counter_ns()
        page = await space.agent_events(run_id, cursor=cursor); e = time.perf_counter_ns()
        http_get(sock, events_url); f = time.perf_counter_ns()
        kept.get(events_url); g = time.perf_counter_ns()
        assert json.loads(page)["events"] == []
        if i >= 50:  # warm-up
            for k, v in zip(names, (b - a, c - b, d - c, e - d, f - e, g - f)):
                t[k].append(v)
    print(f"== {condition}: n={n} per call, interleaved; Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    print(f"{'call':<14}{'p50 µs':>10}{'p99 µs':>10}")
    for k, xs in t.items():
        print(f"{k:<14}{pct(xs, 0.5):>10.0f}{pct(xs, 0.99):>10.0f}")
    for what in ("status", "events"):
        sdk, new, kept_ = (pct(t[f"{k} {what}"], 0.5) for k in ("sdk", "http", "kept"))
        print(f"{condition} {what}: SDK p50 {sdk / kept_:.2f}x a kept-alive raw call, {sdk / new:.2f}x a raw call on a new connection")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1000)
    asyncio.run(main(p.parse_args().n))
