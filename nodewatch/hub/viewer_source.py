"""A hub as the dashboard's Source: ``nodewatch attach``.

The connection runs on an asyncio loop in a thread of its own (``LoopThread``: one socket, read
and written from one thread, TLS or not). Frames go into a ``ViewerState``; the clock is the hub's (the ``now`` of the
last frame), so lease ages are the hub's and every screen attached to one hub agrees.

When the hub goes away the state says so at once (the dashboard turns blind, with a banner that
says since when) and the connection is retried, with a short backoff, for ``reconnect_for``
seconds; after that ``gone`` is set and ``on_gone`` called, so ``attach`` exits instead of showing
a dead screen forever. A refused token is final at once.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Callable

from ..loop_thread import LoopThread
from ..sources.heap import fix_mmap_threshold
from . import protocol
from .address import SOCKET_NAME as SOCKET_NAME  # re-exported: where callers found them before
from .address import HubAddress
from .address import parse_address as parse_address
from .codec import WireError
from .viewer_state import ViewerState

CONNECT_TIMEOUT = 5.0
BACKOFF = (0.1, 0.25, 0.5, 1.0, 2.0)


class HubClock:
    """The hub's clock as last heard: the ``now`` of the newest frame."""

    def __init__(self, state: ViewerState) -> None:
        self._state = state

    def now(self) -> float:
        t = self._state.hub_now
        return time.time() if t is None else t

    @property
    def virtual(self) -> bool:
        """The hub's clock is a replay's or the simulator's (its hello says; a live hub's is the wall)."""
        return self._state.hub_virtual


class ViewerSource:
    """A ``Source`` fed by a hub; see the module docstring."""

    def __init__(self, address: HubAddress, *, token: str | None = None, ca_file: str | None = None,
                 reconnect_for: float = 120.0, first_frame_timeout: float = 5.0,
                 on_gone: Callable[[str], None] | None = None) -> None:
        if address.host is not None and not token:
            raise ValueError("a hub over TCP needs a token (--token-file)")
        self.address = address
        self.state = ViewerState()
        self.clock = HubClock(self.state)
        self.replay = None
        self.token = token
        self.ca_file = ca_file
        self.reconnect_for = reconnect_for
        self.first_frame_timeout = first_frame_timeout
        self.on_gone = on_gone
        self.gone = threading.Event()
        self.gone_reason = ""
        self.connections = 0
        self._focus: str | None = None
        self._first = threading.Event()
        self._stop = threading.Event()
        self._ended = threading.Event()
        """The connection task has ended (given up, failed, or cancelled by ``stop``)."""
        self._loop_thread: LoopThread | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        """For the header: the hub's own source (``context prod @ https://...``), and the hub."""
        hub_source = self.state.name
        return f"{hub_source} · via {self.address.display}" if hub_source else self.address.display

    # --- Source -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, and wait (up to ``first_frame_timeout``) for the first snapshot, so that the
        dashboard's first frame shows the fleet rather than an empty table."""
        if self._loop_thread is not None:
            return
        # A snapshot comes in parts of a megabyte or more, decoded and freed one after the other among
        # the views that stay: with glibc's dynamic threshold they are carved from the heap and its
        # holes stay (a headless viewer of 130,000 nodes: 149-150 MB, against 123-127 MB fixed).
        fix_mmap_threshold()
        self._loop_thread = LoopThread("hub-viewer")
        self._loop_thread.submit(self._run())
        self._first.wait(self.first_frame_timeout)

    def stop(self) -> None:
        """Cancel the connection task, wait for it to end (up to 5 s), stop its loop. Idempotent;
        from the loop's own thread (``on_gone``) it only asks."""
        self._stop.set()
        lt = self._loop_thread
        if lt is None:
            return
        lt.call(self._cancel)
        if threading.current_thread() is not lt.thread:
            self._ended.wait(5)
        lt.stop(5)

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def focus_node(self, node: str | None) -> None:
        self._focus = node
        self._send({"k": "focus", "node": node})

    def open_history(self):
        """The hub's last hour as a started ReplaySource, for the dashboard's history key (``h``).
        Raises ``viewer_history.HistoryUnavailable`` (over TCP, or when the hub records nothing)."""
        from .viewer_history import open_history

        return open_history(self.address)

    # --- the connection thread ----------------------------------------------------------------------

    def _send(self, msg: dict) -> None:
        lt, writer = self._loop_thread, self._writer
        if lt is None or writer is None:
            return
        frame = protocol.encode(msg, compress=False)

        def write() -> None:
            if self._writer is writer and not writer.is_closing():
                writer.write(frame)

        lt.call(write)

    async def _run(self) -> None:
        """The connection task: connect, reconnect, until it gives up or ``stop`` cancels it."""
        self._task = asyncio.current_task()
        try:
            if not self._stop.is_set():
                await self._connect_forever()
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - never a dead connection thread behind a live-looking screen
            self._give_up(f"the viewer's connection failed ({type(exc).__name__}: {str(exc)[:120]})")
        finally:
            self._ended.set()
            self._first.set()

    async def _connect_forever(self) -> None:
        failing_since: float | None = None
        attempt = 0
        while not self._stop.is_set():
            try:
                reader, writer = await asyncio.wait_for(self._open(), CONNECT_TIMEOUT)
            except (OSError, asyncio.TimeoutError, ssl.SSLError, ValueError) as exc:
                self.state.set_connected(False, _why(exc))
            else:
                attempt = 0
                failing_since = None
                final = await self._session(reader, writer)
                if final:
                    self._give_up(final)
                    return
            now = time.monotonic()
            failing_since = failing_since if failing_since is not None else now
            if now - failing_since >= self.reconnect_for:
                self._give_up(f"the hub has been unreachable for {self.reconnect_for:g}s "
                              f"({self.state.last_error})")
                return
            await asyncio.sleep(BACKOFF[min(attempt, len(BACKOFF) - 1)])
            attempt += 1

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        a = self.address
        limit = 2 ** 20
        if a.path is not None:
            return await asyncio.open_unix_connection(a.path, limit=limit)
        ctx = ssl.create_default_context(cafile=self.ca_file)
        return await asyncio.open_connection(a.host, a.port, ssl=ctx, limit=limit)

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str | None:
        """One connection, until it ends. Returns a reason to stop trying, or None to try again."""
        self._writer = writer
        self.connections += 1
        try:
            hello = {"k": "hello", "v": protocol.VERSION}
            if self.token:
                hello["token"] = self.token
            writer.write(protocol.encode(hello, compress=False))
            if self._focus is not None:
                writer.write(protocol.encode({"k": "focus", "node": self._focus}, compress=False))
            while True:
                msg = await protocol.read_frame(reader)
                if msg is None:
                    self.state.set_connected(False, "the hub closed the connection")
                    return None
                kind = msg["k"]
                if kind == "error":
                    error = str(msg.get("error", "refused"))[:200]
                    self.state.set_connected(False, error)
                    return f"the hub refused the connection: {error}"
                if kind == "bye":
                    self.state.set_connected(False, str(msg.get("reason", "the hub is shutting down"))[:200])
                    return None
                if kind == "hello":
                    if msg.get("v") != protocol.VERSION:
                        return f"the hub speaks protocol {msg.get('v')!r}, this viewer {protocol.VERSION}"
                    self.state.hub_virtual = msg.get("virtual") is True
                    continue
                if kind in ("snap", "part", "delta", "details"):
                    self.state.receive(msg)
                    if kind == "snap":
                        self.state.set_connected(True)
                        self._first.set()
        except (protocol.ProtocolError, WireError, OSError, ssl.SSLError) as exc:
            self.state.set_connected(False, _why(exc))
            return None
        except Exception as exc:  # noqa: BLE001 - any frame this viewer cannot take: not live any more
            # A bad frame (or a bug in taking one) must never leave the last screen marked live:
            # the banner says the connection is lost, and a new connection brings a fresh snapshot.
            self.state.set_connected(False, f"bad frame from the hub ({type(exc).__name__}: {str(exc)[:120]})")
            return None
        finally:
            self._writer = None
            if self._stop.is_set():  # the loop stops next: a TLS goodbye would never finish, and
                writer.transport.abort()  # its socket would be left open: closed at once instead
            else:
                writer.close()

    def _give_up(self, reason: str) -> None:
        self.gone_reason = reason
        self.state.set_connected(False, reason)
        self.gone.set()
        self._first.set()
        if self.on_gone is not None:
            self.on_gone(reason)


def _why(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no hub socket"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, asyncio.TimeoutError):
        return "connection timed out"
    return (str(exc) or type(exc).__name__)[:200]
