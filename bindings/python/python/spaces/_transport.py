"""Calls to a local daemon sent from the asyncio loop's own thread.

A call through the native client runs on a tokio thread and hands its result back to the loop:
two thread hops that cost more than the daemon's own work on a small call (issue 32: about 1.6x
a kept-alive raw HTTP call). Here the loop's thread writes the request and reads the answer on a
kept-alive Unix socket connection, and the native module does everything but the I/O
(``spaces_sdk::exchange``): the route, the idempotency key, the request bytes, the answer's head
(``httparse``) and its decoding into the result or the typed error. So the routes, keys, error
classes and codes are the native client's, and a call answers alike either way. Remote daemons
(TCP, with a token) and event follows keep the native client.

Connections: up to ``POOL_MAX`` idle ones are kept for ``POOL_IDLE_S`` (as the native client);
one the daemon closed meanwhile is dropped before use. A call whose connection is lost before its
answer raises ``CONNECTION_LOST``, except a keyed call (``agent_start``, ``agent_message``), which
is sent once more with the same key when the daemon is back (within ``RECONNECT_WITHIN_S``): the
daemon answers a repeated key with the first result. A cancelled call closes its connection.
At the Landlock level the daemon takes only the operator's token on its socket: an answer of 401
or 403 to a call sent without one is sent again with the token beside the socket, and later calls
carry it."""

from __future__ import annotations

import asyncio
import time
import weakref
from pathlib import Path
from typing import List, Optional, Tuple

from . import _native

#: Most idle kept-alive connections kept (sdk-core's client::POOL_MAX).
POOL_MAX = 4
#: How long an idle connection is kept, in seconds (sdk-core's client::POOL_IDLE).
POOL_IDLE_S = 2.0
#: How long a keyed call waits for the daemon to come back before its one retry, in seconds.
RECONNECT_WITHIN_S = 10.0
#: An answer's head larger than this is refused as not the daemon's (bytes).
HEAD_LIMIT = 64 * 1024
#: A connection idle longer than this is looked at once more (one turn of the loop, so a close
#: by the daemon is seen) before a call is written on it, in seconds.
RECHECK_AFTER_S = 0.05


class _Conn:
    __slots__ = ("reader", "writer", "since", "loop")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.since = reader, writer, time.monotonic()
        # A connection belongs to the loop that made it (a script may run several in turn).
        self.loop = asyncio.get_running_loop()

    def usable(self) -> bool:
        return (not self.reader.at_eof() and not self.writer.is_closing()
                and time.monotonic() - self.since < POOL_IDLE_S)

    def close(self) -> None:
        if not self.loop.is_closed():
            self.writer.close()


class _Lost(Exception):
    """The connection closed before the whole answer arrived."""


class _Garbled(Exception):
    """The answer is not HTTP/1.1 as the daemon speaks it."""


class UnixTransport:
    """The calls of one ``Spaces`` to the daemon on the Unix socket ``socket``."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        # Idle connections per event loop: a connection belongs to the loop that made it (a
        # script may run several loops in turn, or in threads); a closed loop's go with it.
        self._idle: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, List[_Conn]]" = weakref.WeakKeyDictionary()
        self._token_needed = False

    def close(self) -> None:
        """Closes the idle connections of the running loop, if any (a call in flight closes its
        own when it ends; other loops' are dropped and closed when collected)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        for owner, conns in list(self._idle.items()):
            while conns:
                conn = conns.pop()
                if owner is loop:
                    conn.close()
        self._idle.clear()

    async def call(self, exchange: "_native.Exchange") -> bytes:
        """Runs the call ``exchange`` (``_native.Exchange(name, args_json)``: made once by the
        caller, so a retry after a daemon restart carries the same idempotency key); returns the
        result's JSON as the daemon sent it (a 2xx body: the caller decodes it once), or raises
        the typed error (``SpacesError`` and its families, client codes as the native client)."""
        token = self._token() if self._token_needed else None
        status, body = await self._send(exchange, token)
        if status in (401, 403) and token is None:
            token = self._token()
            if token is not None:
                self._token_needed = True
                status, body = await self._send(exchange, token)
        if 200 <= status < 300:
            return body
        raise _native.answer_error(status, body)

    def _token(self) -> Optional[str]:
        try:
            token = (Path(self.socket).parent / "token").read_text().strip()
        except OSError:
            return None
        return token or None

    async def _send(self, exchange: "_native.Exchange", token: Optional[str]) -> Tuple[int, bytes]:
        request = exchange.request(token)
        try:
            return await self._once(request)
        except _Lost as lost:
            if not exchange.keyed:
                raise _native.transport_error("lost", self.socket, str(lost)) from None
            await self._await_daemon()
            try:
                return await self._once(request)
            except _Lost as again:
                raise _native.transport_error("lost", self.socket, str(again)) from None

    async def _once(self, request: bytes) -> Tuple[int, bytes]:
        conn = await self._take_idle() or await self._connect()
        done = False
        try:
            conn.writer.write(request)
            status, body, keep = await self._read_answer(conn.reader)
            done = True
        except (ConnectionError, asyncio.IncompleteReadError, EOFError) as e:
            raise _Lost(str(e) or type(e).__name__) from None
        except (_Garbled, asyncio.LimitOverrunError, ValueError) as e:
            raise _native.transport_error("protocol", self.socket, f"the answer is not HTTP/1.1 as spacesd speaks it: {e}") from None
        finally:
            if not done:
                conn.close()
        if keep:
            self._keep(conn)
        else:
            conn.close()
        return status, body

    async def _read_answer(self, reader: asyncio.StreamReader) -> Tuple[int, bytes, bool]:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise _Garbled(f"a head longer than {HEAD_LIMIT} bytes") from None
        status, length, keep = _native.parse_head(head)
        if length >= 0:
            body = await reader.readexactly(length) if length else b""
        else:
            body = await self._read_chunked(reader)
        return status, body, keep

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                # Trailers (none expected), then the blank line.
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)

    async def _take_idle(self) -> Optional[_Conn]:
        idle = self._idle.get(asyncio.get_running_loop())
        while idle:
            conn = idle.pop()
            if time.monotonic() - conn.since > RECHECK_AFTER_S:
                # The loop may not have run since the daemon closed it (blocking code between
                # calls): one turn of the loop delivers that close.
                await asyncio.sleep(0)
            if conn.usable():
                return conn
            conn.close()
        return None

    def _keep(self, conn: _Conn) -> None:
        conn.since = time.monotonic()
        idle = self._idle.setdefault(conn.loop, [])
        idle.append(conn)
        if len(idle) > POOL_MAX:
            idle.pop(0).close()

    async def _connect(self) -> _Conn:
        try:
            reader, writer = await asyncio.open_unix_connection(self.socket, limit=HEAD_LIMIT)
        except OSError as e:
            raise _native.transport_error("unreachable", self.socket, str(e)) from None
        return _Conn(reader, writer)

    async def _await_daemon(self) -> None:
        deadline = time.monotonic() + RECONNECT_WITHIN_S
        while time.monotonic() < deadline:
            try:
                _, writer = await asyncio.open_unix_connection(self.socket)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            return
