"""``Spaces`` and ``Space``, built from the operation catalogue of the native module.

Every operation of ``spaces_sdk::op::catalogue()`` becomes a method here without code written for
it: the agent operations of one Space and every CodeSpace tool are ``Space`` methods, with the
field naming the Space (``space``, ``workspace_id``) filled by the Space's name when the request
has one; every other operation (``space_add``, ``inbox_*``, ...) is a ``Spaces`` method. Keyword arguments are the contract's
request fields; ``None`` means "not given". Generated methods return the decoded JSON result.
On top of them, the seed's agent signatures (``agent_start`` ... ``agent_stop``,
``add_space``, ``list_spaces``, ``agent_capabilities``) are thin wrappers that return the records
of ``spaces._records``. Every method is async; every failure is a ``SpacesError``."""

from __future__ import annotations

import asyncio
import atexit
import inspect
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple, Union

from . import _native
from ._native import UnavailableError
from ._records import AgentActionReport, AgentRunStatus, AgentStartReport, SpaceAgentOptions
from ._transport import UnixTransport

#: Every operation: ``{name, doc, method, path, read_only, audience, request}`` (``request`` is
#: the JSON Schema of its request).
CATALOGUE: List[Dict[str, Any]] = json.loads(_native.catalogue())

_log = logging.getLogger("spaces")

# At exit, no tokio thread may still be handing a result to Python (see src/bridge.rs).
atexit.register(_native.drain)



def _fields(op: Dict[str, Any]) -> Dict[str, bool]:
    """The request fields of ``op`` -> required."""
    required = set(op["required"])
    return {name: name in required for name in op["fields"]}


def on_space(op: Dict[str, Any]) -> bool:
    """True for a ``Space`` method: an agent operation of one Space, or a CodeSpace tool (the
    catalogue says, ``spaces_sdk::methods``; the Node SDK reads the same)."""
    return bool(op["on_space"])


def scope_of(op: Dict[str, Any]) -> Optional[str]:
    """The field a ``Space`` fills with its name (``space``, ``workspace_id``), if any."""
    return op["space_field"]


def _generated(op: Dict[str, Any], owner: str, fill: bool) -> Any:
    """The method of ``op`` on ``owner``; ``fill``: the owner is a ``Space`` and fills the
    operation's Space field with its name."""
    name, scope = op["name"], scope_of(op) if fill else None
    fields = {k: req for k, req in _fields(op).items() if k != scope}

    async def method(self: Any, **kwargs: Any) -> Any:
        args = {k: v for k, v in kwargs.items() if v is not None}
        if scope is not None:
            args[scope] = self.name
        return await self._spaces._call(name, args)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=inspect.Parameter.empty if req else None)
        for k, req in fields.items()
    ]
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    method.__name__ = name
    method.__qualname__ = f"{owner}.{name}"
    method._generated = True  # type: ignore[attr-defined]
    method.__doc__ = f"{op['doc']}\n\n``{name}``: {op['method']} ``{op['path']}``. Raises SpacesError."
    return method


def _install(cls: type, owner: str, space_side: bool) -> None:
    """Adds the catalogue operations ``cls`` does not define itself: every one on ``Spaces``
    (the caller names the Space), the Space's own on ``Space`` (its name filled in). The Node
    SDK's ``Spaces`` and ``Space`` carry the same sets (bindings/node/test/parity.test.js)."""
    for op in CATALOGUE:
        if (not space_side or on_space(op)) and op["name"] not in cls.__dict__:
            setattr(cls, op["name"], _generated(op, owner, space_side))


def _loads(name: str, raw: Union[str, bytes]) -> Any:
    try:
        return json.loads(raw)
    except ValueError as e:
        raise _native.transport_error("protocol", "spacesd", f"{name}: the answer is not JSON: {e}") from None


def _options(options: Union[SpaceAgentOptions, Dict[str, Any], None]) -> Optional[Dict[str, Any]]:
    if options is None or isinstance(options, dict):
        return options
    return options._wire()


class Spaces:
    """A connection to a Spaces daemon.

    ``Spaces()`` uses the local daemon of the default state dir (``SPACES_HOME``, else
    ``<user data dir>/spaces``), ``Spaces(state_dir=DIR)`` that of DIR; either is started detached
    (``python -m spaces._daemon --state-dir DIR serve --exit-when-unused``, logging to
    ``DIR/spacesd.log``) when none answers. ``Spaces(url="http://127.0.0.1:7700", token=TOKEN)``
    reaches a daemon over TCP.

    A daemon this SDK started ends a few seconds after the last client is gone (``close()``,
    the end of an ``async with``, or the process exiting), once no turn is in flight; agent
    processes of idle runs live on and the next daemon takes them back. ``keep_daemon=True``
    keeps it running after the script (also one another client started). A daemon started some
    other way (``spacesd serve``, systemd) is never stopped by a client."""

    def __init__(self, state_dir: Union[str, os.PathLike, None] = None, url: Optional[str] = None,
                 token: Optional[str] = None, keep_daemon: bool = False) -> None:
        self.daemon_pid: Optional[int] = None
        self.keep_daemon = keep_daemon
        self._hold: Optional[_native.DaemonHold] = None
        # Calls to a local daemon go from the asyncio loop's thread (spaces._transport); a
        # remote one's, and every event follow, through the native client.
        self._transport: Optional[UnixTransport] = None
        self._starting: Optional["asyncio.Future[None]"] = None
        if url is not None:
            addr = url.split("://", 1)[-1].rstrip("/")
            self.state_dir: Optional[Path] = None
            self._native = _native.NativeClient.tcp(addr, token or "")
        else:
            self.state_dir = Path(state_dir) if state_dir is not None else Path(_native.default_state_dir())
            socket = str(_native.socket_path(str(self.state_dir)))
            self._native = _native.NativeClient.unix(socket)
            self._transport = UnixTransport(socket)
        self._ready = url is not None

    def __repr__(self) -> str:
        return f"Spaces({self._native.endpoint()!r})"

    async def __aenter__(self) -> "Spaces":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    @property
    def _spaces(self) -> "Spaces":
        # Generated methods call ``self._spaces._call``: a ``Space`` reaches its ``Spaces``,
        # and ``Spaces``' own generated methods (``inbox_*``, ``home_*``, ...) reach itself.
        return self

    async def connect(self) -> "Spaces":
        """Connects now (starting the local daemon if needed) instead of at the first call;
        returns this ``Spaces``."""
        if not self._ready:
            await self._ensure_once()
        return self

    def close(self) -> None:
        """Lets the daemon go: one this SDK started ends once no client holds it (unless
        ``keep_daemon=True``). Runs go on. A later call connects (and holds) again."""
        if self._hold is not None:
            self._hold.release()
            self._hold = None
        if self._transport is not None:
            self._transport.close()
        if self.state_dir is not None:
            self._ready = False

    def daemon_command(self) -> List[str]:
        """What starts this state dir's daemon: this package's spacesd under this interpreter,
        ending when unused unless ``keep_daemon``."""
        command = [sys.executable, "-m", "spaces._daemon", "--state-dir", str(self.state_dir), "serve"]
        return command if self.keep_daemon else command + ["--exit-when-unused"]

    async def _ensure(self) -> None:
        assert self.state_dir is not None
        pid = await _native.ensure_daemon(str(self.state_dir), self.daemon_command())
        if pid is not None:
            self.daemon_pid = pid
            if self.keep_daemon:
                _log.info("started spacesd (pid %d) for %s; it keeps running after this script "
                          "(keep_daemon=True): stop it with kill %d", pid, self.state_dir, pid)
            else:
                _log.info("started spacesd (pid %d) for %s; it ends when its last client is gone "
                          "(keep_daemon=True keeps it)", pid, self.state_dir)
        if self._hold is not None:
            self._hold.release()
        # A daemon that counts its clients (--exit-when-unused) is held while this client is
        # open; one that does not is left as it is.
        self._hold = _native.hold_daemon(str(self.state_dir), self.keep_daemon)
        self._ready = True

    async def _call_raw(self, name: str, args: Dict[str, Any]) -> Union[str, bytes]:
        """The result's JSON as the daemon sent it (bytes from the loop's transport, text from
        the native client)."""
        if not self._ready:
            await self._ensure_once()
        if self._transport is None:
            return await self._native.call(name, json.dumps(args))
        # Made once: a call sent again after a restart carries the same idempotency key.
        exchange = _native.Exchange(name, json.dumps(args))
        try:
            return await self._transport.call(exchange)
        except UnavailableError as e:
            # A local daemon that went away is started again, once.
            if getattr(e, "code", None) != "DAEMON_UNREACHABLE":
                raise
            await self._ensure_once()
            return await self._transport.call(exchange)

    async def _ensure_once(self) -> None:
        """``_ensure``, once for the calls of this loop that need it at the same time (a
        ``gather`` of first calls starts one daemon, not one each)."""
        task = self._starting
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = self._starting = asyncio.ensure_future(self._ensure())
        await asyncio.shield(task)

    async def _call_text(self, name: str, args: Dict[str, Any]) -> str:
        raw = await self._call_raw(name, args)
        return raw if isinstance(raw, str) else raw.decode()

    async def _call_wire(self, name: str, args: Dict[str, Any]) -> Tuple[Any, str]:
        """The result and its JSON text (a record's ``json``, as sent: no second encoding)."""
        text = await self._call_text(name, args)
        return _loads(name, text), text

    async def _call(self, name: str, args: Dict[str, Any]) -> Any:
        return _loads(name, await self._call_raw(name, args))

    async def call(self, name: str, **args: Any) -> Any:
        """Runs any operation of the catalogue by name with its request fields."""
        return await self._call(name, {k: v for k, v in args.items() if v is not None})

    def space(self, name: str) -> "Space":
        """The Space ``name`` (not checked until a call: unknown is WORKSPACE_NOT_FOUND then)."""
        return Space(self, name)

    async def add_space(self, name: str, path: Union[str, os.PathLike]) -> Dict[str, Any]:
        """Registers the directory ``path`` as the Space ``name`` (the same again is a no-op). A
        relative ``path`` is made absolute here, against this process's working directory: the
        daemon refuses relative roots (its own working directory is not the caller's)."""
        return await self._call("space_add", {"name": name, "root": os.path.abspath(os.fspath(path))})

    async def list_spaces(self) -> List[Dict[str, Any]]:
        """Every Space of this host."""
        return await self._call("space_list", {})

    async def agent_capabilities(self) -> str:
        """What every agent harness is and cannot do, as JSON."""
        return await self._call_text("agent_capabilities", {})


class Space:
    """One Space of a daemon: the seed's agent methods and every CodeSpace tool."""

    def __init__(self, spaces: Spaces, name: str) -> None:
        self._spaces = spaces
        self.name = name

    def __repr__(self) -> str:
        return f"Space({self.name!r})"

    async def agent_start(self, agent: str, prompt: str, show: Optional[bool] = None,
                          options: Union[SpaceAgentOptions, Dict[str, Any], None] = None,
                          request_id: Optional[str] = None, traceparent: Optional[str] = None) -> AgentStartReport:
        """Starts an agent CLI (claude-code, openai-codex, ...) with a prompt, detached.

        ``request_id``: an idempotency key (1-128 ASCII letters, digits, ``-_.:``; a UUID is sent
        when none is given): a repeat answers the first run and starts nothing. A call whose
        connection is lost before its answer is sent once more with its key.

        ``traceparent``: the caller's W3C trace context (``00-<trace id>-<span id>-<flags>``):
        the run's spans (exported when the daemon has an OTLP endpoint) join that trace."""
        args: Dict[str, Any] = {"space": self.name, "agent": agent, "prompt": prompt}
        if show is not None:
            args["show"] = show
        if options is not None:
            args["options"] = _options(options)
        if request_id is not None:
            args["request_id"] = request_id
        if traceparent is not None:
            args["traceparent"] = traceparent
        return AgentStartReport._from(*await self._spaces._call_wire("agent_start", args))

    async def agent_status(self, run_id: str, tail: Optional[int] = None) -> AgentRunStatus:
        """A run's status with the last ``tail`` lines of output."""
        args: Dict[str, Any] = {"space": self.name, "run_id": run_id}
        if tail is not None:
            args["tail"] = tail
        return AgentRunStatus._from(*await self._spaces._call_wire("agent_status", args))

    async def agent_events(self, run_id: str, cursor: Optional[int] = None, max: Optional[int] = None) -> str:
        """Normalized events after ``cursor`` as the agent_events JSON (events, cursor, caught_up, status)."""
        args: Dict[str, Any] = {"space": self.name, "run_id": run_id}
        if cursor is not None:
            args["cursor"] = cursor
        if max is not None:
            args["max"] = max
        return await self._spaces._call_text("agent_events", args)

    def agent_follow(self, run_id: str, cursor: int = 0, until: str = "turn") -> AgentFollow:
        """Follows the run's events live from ``cursor`` over the daemon's server-sent event
        stream (reconnecting with ``Last-Event-ID``; long-polls when a daemon answers no stream).
        Ends once caught up and ``until`` is reached: ``"turn"`` (the run no longer running) or
        ``"stopped"`` (across turns, until the run is stopped or done). ``async for ev in
        space.agent_follow(run_id)`` yields each event as on the wire (a dict)."""
        return AgentFollow(self._spaces, self.name, run_id, cursor, until)

    async def agent_message(self, run_id: str, text: str, force: Optional[bool] = None,
                            message_id: Optional[str] = None, traceparent: Optional[str] = None) -> AgentActionReport:
        """Sends a follow-up message to a run (queued mid-turn; ``force`` interrupts first).

        ``message_id``: an idempotency key (as ``agent_start``'s ``request_id``): a repeat answers
        the first report and delivers nothing twice. ``traceparent``: the caller's trace context,
        linked from the turn the message starts."""
        args: Dict[str, Any] = {"space": self.name, "run_id": run_id, "text": text}
        if force is not None:
            args["force"] = force
        if message_id is not None:
            args["message_id"] = message_id
        if traceparent is not None:
            args["traceparent"] = traceparent
        return AgentActionReport._from(*await self._spaces._call_wire("agent_message", args))

    async def agent_interrupt(self, run_id: str) -> AgentActionReport:
        """Cancels the run's turn in flight; the session stays open."""
        return AgentActionReport._from(*await self._spaces._call_wire("agent_interrupt", {"space": self.name, "run_id": run_id}))

    async def agent_stop(self, run_id: str) -> AgentActionReport:
        """Stops a run."""
        return AgentActionReport._from(*await self._spaces._call_wire("agent_stop", {"space": self.name, "run_id": run_id}))

    async def agent_list(self) -> List[AgentRunStatus]:
        """Every agent run in this Space."""
        return [AgentRunStatus._from(d) for d in await self._spaces._call("agent_list", {"space": self.name})]


_install(Spaces, "Spaces", space_side=False)
_install(Space, "Space", space_side=True)


class AgentFollow:
    """A live follow of one run (``Space.agent_follow``): an async iterator of its events (dicts,
    as on the wire), with ``transport`` (``"sse"``, ``"long_poll"``, ``"unopened"``) and
    ``cursor`` (the seq of the last event returned)."""

    def __init__(self, spaces: Spaces, space: str, run_id: str, cursor: int, until: str) -> None:
        self._spaces = spaces
        self._native = spaces._native.follow(space, run_id, cursor, until)

    @property
    def transport(self) -> str:
        return self._native.transport

    @property
    def cursor(self) -> int:
        return self._native.cursor

    def __aiter__(self) -> "AgentFollow":
        return self

    async def __anext__(self) -> Dict[str, Any]:
        if not self._spaces._ready:
            await self._spaces._ensure_once()
        text = await self._native.next()
        if text is None:
            raise StopAsyncIteration
        return json.loads(text)
