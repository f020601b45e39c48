"""The calls ``Spaces`` sends to a local daemon from the asyncio loop's thread
(``spaces._transport``), against a bare HTTP/1.1 server on a Unix socket that this test scripts:
kept connections, chunked answers, typed errors, the keyed retry after a lost connection, the
token at the Landlock level, and a second event loop."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

from spaces import NotFoundError, SpacesError, UnavailableError, _native
from spaces._transport import UnixTransport

OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'


class Server:
    """Answers each request with ``answer(request_bytes, n)`` (``None``: close without answering)."""

    def __init__(self, path: Path, answer: Callable[[bytes, int], Optional[bytes]]) -> None:
        self.path, self.answer = path, answer
        self.requests: List[bytes] = []
        self.connections = 0

    async def __aenter__(self) -> "Server":
        self.server = await asyncio.start_unix_server(self.serve, str(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), 0)
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                reply = self.answer(request, len(self.requests))
                if reply is None:
                    writer.close()
                    return
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def call(t: UnixTransport, name: str, args: str = "{}") -> bytes:
    return await t.call(_native.Exchange(name, args))


@pytest.fixture
def sock() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="spaces-tr-"))
    yield d / "spacesd.sock"
    shutil.rmtree(d, ignore_errors=True)


async def test_calls_share_one_kept_connection(sock: Path) -> None:
    async with Server(sock, lambda req, n: OK) as server:
        t = UnixTransport(str(sock))
        for _ in range(5):
            assert json.loads(await call(t, "space_list", "{}")) == {"ok": True}
        assert server.connections == 1
        assert server.requests[0].startswith(b"GET /v1/spaces HTTP/1.1\r\n")
        t.close()


async def test_a_chunked_answer_and_a_typed_error_decode(sock: Path) -> None:
    chunked = b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n'
    missing = b'{"error":{"code":"RUN_NOT_FOUND","message":"no run x"}}'
    not_found = b"HTTP/1.1 404 Not Found\r\ncontent-length: %d\r\n\r\n%s" % (len(missing), missing)
    async with Server(sock, lambda req, n: chunked if n == 1 else not_found):
        t = UnixTransport(str(sock))
        assert json.loads(await call(t, "space_list", "{}")) == {"a": 1}
        with pytest.raises(NotFoundError) as e:
            await call(t, "agent_status", json.dumps({"space": "s", "run_id": "x"}))
        assert e.value.code == "RUN_NOT_FOUND"


async def test_a_lost_keyed_call_is_sent_once_more_with_its_key_and_others_are_not(sock: Path) -> None:
    # The first request of each kind is cut off, the second answered.
    async with Server(sock, lambda req, n: None if n in (1, 3) else OK) as server:
        t = UnixTransport(str(sock))
        start = json.dumps({"space": "s", "agent": "claude-code", "prompt": "hi"})
        assert json.loads(await call(t, "agent_start", start)) == {"ok": True}
        bodies = [json.loads(r.split(b"\r\n\r\n", 1)[1]) for r in server.requests[:2]]
        assert bodies[0]["request_id"] == bodies[1]["request_id"], "the retry carries the same key"
        with pytest.raises(UnavailableError) as e:
            await call(t, "agent_status", json.dumps({"space": "s", "run_id": "x"}))
        assert e.value.code == "CONNECTION_LOST"
        assert len(server.requests) == 3, "an unkeyed call is never sent twice"


async def test_no_daemon_is_daemon_unreachable(sock: Path) -> None:
    with pytest.raises(UnavailableError) as e:
        await call(UnixTransport(str(sock)), "space_list")
    assert e.value.code == "DAEMON_UNREACHABLE"
    with pytest.raises(SpacesError) as e:
        _native.Exchange("agent_statu", "{}")
    assert e.value.code == "INVALID_ARGUMENT" and "agent_status" in str(e.value)


async def test_an_answer_that_is_not_http_is_protocol_as_in_the_native_client(sock: Path) -> None:
    replies = {1: b"SSH-2.0-OpenSSH\r\n\r\n", 2: b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"}
    async with Server(sock, lambda req, n: replies[n]):
        t = UnixTransport(str(sock))
        for _ in replies:
            with pytest.raises(SpacesError) as e:
                await call(t, "space_list")
            assert e.value.code == "PROTOCOL", e.value


async def test_a_refused_uid_is_answered_with_the_token_beside_the_socket(sock: Path) -> None:
    (sock.parent / "token").write_text("sekrit\n")
    refused = b'HTTP/1.1 401 Unauthorized\r\ncontent-length: 51\r\n\r\n{"error":{"code":"UNAUTHORIZED","message":"token"}}'
    async with Server(sock, lambda req, n: OK if b"Authorization: Bearer sekrit" in req else refused) as server:
        t = UnixTransport(str(sock))
        assert json.loads(await call(t, "space_list", "{}")) == {"ok": True}
        assert json.loads(await call(t, "space_list", "{}")) == {"ok": True}
        assert [b"Bearer" in r for r in server.requests] == [False, True, True], "later calls carry it at once"


def test_a_second_event_loop_gets_connections_of_its_own(sock: Path) -> None:
    t: Optional[UnixTransport] = None

    async def once() -> None:
        nonlocal t
        async with Server(sock, lambda req, n: OK):
            t = t or UnixTransport(str(sock))
            assert json.loads(await call(t, "space_list", "{}")) == {"ok": True}

    asyncio.run(once())
    asyncio.run(once())
