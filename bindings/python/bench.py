"""Round trip of the Python SDK beside plain HTTP from Python, in one run, interleaved.

    python bindings/python/bench.py [--n 1000]

Starts a daemon in a temp state dir through the SDK, the test kit's scripted model
(target/debug/scripted-model) and one Claude Code run (SPACES_TOOLS_DIR) to its idle state, then
times `agent_status` and an empty `agent_events` page (cursor at the end) three ways, each in a
loop of its own, pair by pair beside the same GET on one kept-alive `http.client` connection over
the daemon's Unix socket: through `Space` (awaited on asyncio; calls to a local daemon go from
the loop's thread, spaces._transport), through a `Space` whose calls go through the native
client's tokio runtime (the baseline: every call did so before spaces._transport), and as a raw
GET on a new connection per request. Prints p50/p99 in µs and each median as a ratio of its kept-alive
pair's, idle and then with one core spinning (a shell busy loop); the figures go to
docs/benchmarks.md. Kills the daemon and the model at the end."""

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


def auth(sock: str) -> dict:
    """The operator's token when the daemon's socket wants it (the Landlock level), as the SDK
    sends it; else no header."""
    token = Path(sock).with_name("token")
    return {"Authorization": f"Bearer {token.read_text().strip()}"} if token.exists() else {}


def http_get(sock: str, url: str) -> bytes:
    conn = UnixHTTPConnection(sock)
    conn.request("GET", url, headers=auth(sock))
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200, body
    return body


class KeptAlive:
    """One HTTP/1.1 connection to the daemon's Unix socket, reused for every GET."""

    def __init__(self, sock: str) -> None:
        self.conn = UnixHTTPConnection(sock)
        self.headers = auth(sock)

    def get(self, url: str) -> bytes:
        self.conn.request("GET", url, headers=self.headers)
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
        # The same SDK with its calls sent through the native client's tokio runtime (what every
        # call did before spaces._transport; TCP clients still do): the baseline, timed in a
        # loop of its own beside kept-alive raw calls (its tokio threads, waking after each
        # call, would slow whatever came next in a shared loop).
        native = Spaces(state_dir=root / "state")
        native._transport = None
        status_url = f"/v1/spaces/bench/agents/{run.run_id}"
        events_url = f"/v1/spaces/bench/agents/{run.run_id}/events?cursor={cursor}"
        for condition in ("idle", "busy"):
            busy = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if condition == "busy" else None
            try:
                await measure(space, native.space("bench"), run.run_id, sock, status_url, events_url, cursor, n, condition)
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


async def measure(sdk, native, run_id: str, sock: str, status_url: str, events_url: str, cursor: int, n: int,
                  condition: str) -> None:
    """Three loops, each timing one way of calling beside a kept-alive raw call, interleaved
    pair by pair (a way's after-effects, such as tokio threads waking or a connection being torn
    down, then land on its own pair, not on another way's figures)."""
    kept = KeptAlive(sock)

    async def via(space):
        async def status() -> None:
            await space.agent_status(run_id)

        async def events() -> None:
            assert json.loads(await space.agent_events(run_id, cursor=cursor))["events"] == []
        return status, events

    async def raw_status() -> None:
        http_get(sock, status_url)

    async def raw_events() -> None:
        http_get(sock, events_url)

    ways = [("SDK", *await via(sdk)), ("SDK through the native client", *await via(native)),
            ("raw call on a new connection", raw_status, raw_events)]
    print(f"== {condition}: n={n} pairs per call; Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    print(f"{'way':<32}{'call':<8}{'p50 µs':>9}{'p99 µs':>9}{'kept p50':>10}{'ratio':>8}")
    for label, status, events in ways:
        for what, call, url in (("status", status, status_url), ("events", events, events_url)):
            mine, base = [], []
            for i in range(n + 50):
                a = time.perf_counter_ns(); await call(); b = time.perf_counter_ns()
                kept.get(url); c = time.perf_counter_ns()
                if i >= 50:  # warm-up
                    mine.append(b - a); base.append(c - b)
            print(f"{label:<32}{what:<8}{pct(mine, 0.5):>9.0f}{pct(mine, 0.99):>9.0f}{pct(base, 0.5):>10.0f}"
                  f"{pct(mine, 0.5) / pct(base, 0.5):>7.2f}x")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1000)
    asyncio.run(main(p.parse_args().n))
