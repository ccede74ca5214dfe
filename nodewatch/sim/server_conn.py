"""What the simulated API server's parts share: connections, routes, HTTP errors, fault-aware writes.

``SimServer`` (lifecycle, fleet thread, fault monitor) is built from ``ReadHandlers``
(``server_reads``: routing, auth, GET and LIST) and ``WatchStreaming`` (``server_watch``). Both
derive from ``ServerParts``, which names the state they use and owns the one write path, so the
plan's stall and trickle faults apply to every byte the server sends.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING

from .faults import FaultPlan, TokenAuth
from .http_protocol import Request
from .store import Entry, ObjectStore, ResourceInfo

if TYPE_CHECKING:
    from .selectors import Predicate


class Conn:
    __slots__ = ("reader", "writer", "closed", "wake", "peer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.closed = False
        self.wake: asyncio.Event | None = None
        self.peer = writer.get_extra_info("peername")


class StreamEnded(Exception):
    """The watch stream ended on purpose (fault) and the connection must not be reused."""


class Route:
    __slots__ = ("info", "namespace", "name", "watch", "subresource")

    def __init__(self, info: ResourceInfo, namespace: str, name: str, watch: bool, subresource: str) -> None:
        self.info = info
        self.namespace = namespace
        self.name = name
        self.watch = watch
        self.subresource = subresource


class HTTPError(Exception):
    def __init__(self, code: int, message: str, reason: str | None = None, details: dict | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.details = details
        self.headers = headers or {}


class ServerParts:
    """The state the server's parts share (set by ``SimServer.__init__``) and the write path."""

    faults: FaultPlan
    auth: TokenAuth
    store: ObjectStore
    host: str
    port: int
    server_version: str
    bookmark_interval: float
    bookmark_clock: str
    _stopping: threading.Event
    _wakes: set[asyncio.Event]
    _snapshots: collections.OrderedDict[tuple[str, int], list[Entry]]
    """Lists being paged (``continue``), by (resource, resourceVersion)."""

    if TYPE_CHECKING:  # each part calls the others' entry points (defined in server_reads, server_watch, server)
        def _predicate(self, req: Request, route: Route) -> Predicate | None: ...
        async def _serve_watch(self, conn: Conn, req: Request, route: Route) -> int: ...
        def _record(self, req: Request, code: int, sent: int, duration: float, watch: bool) -> None: ...

    def _table_now(self) -> float:
        """"Now" for the AGE columns: the fleet's virtual time (wall time for a store-only server)."""
        return self.store.now or time.time()

    async def _send(self, conn: Conn, data: bytes) -> None:
        """Write with the plan's stall / trickle applied, then wait for the socket to drain."""
        faults = self.faults
        writer = conn.writer
        stalled = faults.stalled_for()
        if stalled > 0:
            faults.note("stalled_write")
            while (stalled := faults.stalled_for()) > 0 and not conn.closed and not self._stopping.is_set():
                await asyncio.sleep(min(stalled, 0.05))
        trickle = faults.current_trickle()
        if trickle is not None:
            faults.note("trickled_write")
            view = memoryview(data)
            for i in range(0, len(data), trickle.chunk):
                if conn.closed:
                    raise ConnectionResetError("client went away")
                writer.write(bytes(view[i : i + trickle.chunk]))
                await writer.drain()
                if faults.current_trickle() is None:
                    writer.write(bytes(view[i + trickle.chunk :]))
                    break
                await asyncio.sleep(trickle.delay)
            await writer.drain()
            return
        writer.write(data)
        await writer.drain()


def abort(conn: Conn, rst: bool = True) -> None:
    """Close a connection at once; with ``rst`` the peer gets a TCP reset (connection reset)."""
    conn.closed = True
    if conn.wake is not None:
        conn.wake.set()
    transport = conn.writer.transport
    if rst:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
    transport.abort()


def int_param(req: Request, name: str, default: int) -> int:
    raw = req.param(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPError(400, f"invalid {name} {raw!r}: not an integer") from None
    if value < 0:
        raise HTTPError(400, f"invalid {name} {raw!r}: must not be negative")
    return value
