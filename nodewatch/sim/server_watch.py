"""The simulated API server's watch streams: initial events, changes, bookmarks, 410 Gone, faults.

A stream reads the store from a cursor, filters with the request's selectors (a MODIFIED object
that enters or leaves the selection becomes ADDED or DELETED, as the real API server does), sends
bookmarks on a wall or virtual clock, and ends by ``timeoutSeconds``, by the client going away, or
by the fault plan (clean close or TCP reset after N events, truncated or oversized events).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from typing import Any

import orjson

from ..core.settings import parse_minor
from .http_protocol import LAST_CHUNK, Request, chunk, response_head, status_object
from .http_tables import TABLE_RESOURCES, table_bytes, wants_table
from .selectors import Predicate
from .server_conn import Conn, HTTPError, Route, ServerParts, StreamEnded, abort, int_param
from .store import Change, Gone, ResourceInfo, watch_line

WATCH_BATCH = 5000
"""Changes read from the store (and sent as one chunk) at a time."""
EVENT_CHUNKS = os.environ.get("NW_SIM_EVENT_CHUNKS") == "1"
"""Each watch event its own HTTP chunk, as the API server writes them (it flushes whenever its
queue of events runs empty: under a steady stream, event by event), where this server sends what
it has in one chunk. A client reading a chunk at a time then reads an event at a time
(``bench.steady_live --event-chunks``)."""
INITIAL_CHUNK_BYTES = 1 << 20
"""Initial events are sent in chunks of about this size: a client decodes one while the next is on
the way (one 50 MB write of 5,000 production-sized Nodes made the client wait for all of it)."""
WATCH_LIST_SINCE = (1, 27)
"""Streaming lists (``sendInitialEvents=true``) exist from this version on (the version the server
reports, ``--server-version``); an older server refuses them as 1.20 does."""
WATCH_LIST_MODES = ("auto", "default-gates", "on", "gate-off", "old-etcd", "ignored")
"""How a streaming list is answered, each as a kind of real server answers it:

- ``auto``: refused as 1.20 refuses it below 1.27 (422: ``resourceVersionMatch`` is forbidden
  for a watch), offered from 1.27 on (as if the WatchList gate were on: the simulator's default,
  so its v1.33.2 streams).
- ``default-gates``: the real default of the WatchList gate by version: alpha (off) 1.27-1.31,
  beta on in 1.32, off again in 1.33, on from 1.34; below 1.27 as 1.20.
- ``on``: offered, whatever the version.
- ``gate-off``: ``--feature-gates=WatchList=false``: 422 Invalid, "sendInitialEvents is forbidden
  for watch unless the WatchList feature gate is enabled" (apimachinery's ``validateWatchOptions``).
- ``old-etcd``: the gate on but etcd older than 3.5.13 (no RequestWatchProgress): the answer is a
  200 whose stream holds one ERROR event (500 InternalError, "a watch stream was requested by the
  client but the required storage feature RequestWatchProgress is disabled") and ends (the
  cacher's ``newErrWatcher``).
- ``ignored``: a server that does not know the parameters (before 1.19, or an aggregated API
  server that forwards its own watch): a plain watch; with no resourceVersion or 0 it starts with
  synthetic ADDED events of every object, and no bookmark ends them."""
PRE_DEADLINE_BOOKMARK = 2.0
"""Seconds before a watch's ``timeoutSeconds`` deadline that the server sends a bookmark."""
GATE_ON = {(1, 32)}
"""Minors of 1.27-1.33 whose default turns the WatchList gate on (1.34+ are on too)."""


def watch_list_gate_on_by_default(minor: tuple[int, int]) -> bool:
    """The WatchList gate's default in a release of 1.27 or later (``GATE_ON``, 1.34+): whether a
    real API server of that minor, started with its default gates, serves streaming lists."""
    return minor in GATE_ON or minor >= (1, 34)


OLD_ETCD_MESSAGE = ("a watch stream was requested by the client but the required storage feature "
                    "RequestWatchProgress is disabled")


class WatchStreaming(ServerParts):
    """Watch requests (mixed into ``SimServer``)."""

    async def _serve_watch(self, conn: Conn, req: Request, route: Route) -> int:
        info = route.info
        pred = self._predicate(req, route)
        table = wants_table(req.headers.get("accept", "")) and info.name in TABLE_RESOURCES
        bookmarks = req.flag("allowWatchBookmarks")
        timeout = int_param(req, "timeoutSeconds", 0)
        rv_param = req.param("resourceVersion")
        watch_list = self._watch_list_options(req)
        initial_wanted = watch_list or rv_param in ("", "0")
        if watch_list and bookmarks and self._watch_list_mode() == "old-etcd":
            await self._send(conn, response_head(200, {}))
            status = status_object(500, OLD_ETCD_MESSAGE, "InternalError")
            self.faults.note("watch_list_old_etcd")
            await self._send(conn, chunk(orjson.dumps({"type": "ERROR", "object": status}) + b"\n") + LAST_CHUNK)
            return 0
        if rv_param and not initial_wanted:
            try:
                start_rv = int(rv_param)
            except ValueError:
                raise HTTPError(400, f'invalid resource version "{rv_param}"') from None
        await self._send(conn, response_head(200, {}))
        sent = 0
        if not watch_list and self.faults.take_gone(info.name):  # a streaming list names no version to be too old
            return sent + await self._send_gone(conn, 1, self.store.oldest_rv(info.name) + 1)
        initial: list[Any] = []
        """The initial events: store entries (rendered only as they are sent, so the first bytes
        leave at once), then the bytes of the bookmark that ends a streaming list."""
        if initial_wanted:
            rv_now, entries, cursor = self.store.snapshot(info.name)
            initial = entries if pred is None else [e for e in entries if pred(e.slim)]
            if watch_list and bookmarks:
                initial = [*initial, _bookmark(info, rv_now, initial_end=True)]
        else:
            try:
                cursor = self.store.cursor_after(info.name, start_rv)
            except Gone as g:
                return sent + await self._send_gone(conn, g.rv, g.oldest)

        def render(x: Any) -> bytes:
            if isinstance(x, bytes):
                return x
            return _table_line(info, "ADDED", x.obj, req, self._table_now()) if table else watch_line("ADDED", x.data)

        close_after, reset_after = self.faults.stream_limits()
        events_sent = 0
        limits = [n for n in (close_after, reset_after) if n is not None]
        if limits and min(limits) < len(initial):
            await self._send(conn, chunk(b"".join(render(x) for x in initial[:min(limits)])))
            if close_after is not None and close_after == min(limits):
                self.faults.note("closed_after")
                await self._send(conn, LAST_CHUNK)
                conn.closed = True
            else:
                self.faults.note("reset")
                abort(conn)
            raise StreamEnded()
        part: list[bytes] = []
        size = 0
        last = len(initial) - 1
        for k, x in enumerate(initial):
            line = render(x)
            part.append(line)
            size += len(line)
            if size >= INITIAL_CHUNK_BYTES or len(part) >= WATCH_BATCH or k == last:
                data = b"".join(part)
                await self._send(conn, chunk(data))
                sent += len(data)
                events_sent += len(part)
                part, size = [], 0

        wake = asyncio.Event()
        conn.wake = wake
        self._wakes.add(wake)

        def on_client_input(task: asyncio.Future) -> None:
            # EOF (or, unexpectedly, a pipelined request) while streaming: the connection ends
            if not task.cancelled():
                conn.closed = True
                wake.set()

        eof_task = asyncio.ensure_future(conn.reader.read(1))
        eof_task.add_done_callback(on_client_input)
        tail = b""
        try:
            sent, tail = await self._stream_changes(conn, req, info, pred, table, bookmarks, timeout, cursor,
                                                    events_sent, close_after, reset_after, wake, sent)
        finally:
            self._wakes.discard(wake)
            conn.wake = None
            if not eof_task.done():
                eof_task.cancel()
                try:
                    await eof_task
                except (asyncio.CancelledError, ConnectionError, OSError):
                    pass
        if tail and not conn.closed:
            await self._send(conn, tail)
        return sent

    def _watch_list_mode(self) -> str:
        """``watch_list`` with ``auto`` and ``default-gates`` resolved by the version: "1.20" (the
        options refused as 1.20 refuses them), "on", "gate-off", "old-etcd" or "ignored"."""
        mode = getattr(self, "watch_list", "auto")
        minor = parse_minor(self.server_version) or WATCH_LIST_SINCE
        if mode in ("auto", "default-gates") and minor < WATCH_LIST_SINCE:
            return "1.20"
        if mode == "auto":
            return "on"
        if mode == "default-gates":
            return "on" if watch_list_gate_on_by_default(minor) else "gate-off"
        return mode

    def _watch_list_options(self, req: Request) -> bool:
        """Is this watch a streaming list? Validates its options as the real API server does:
        1.27+ (``validateWatchOptions``): ``sendInitialEvents`` needs
        ``resourceVersionMatch=NotOlderThan`` and the reverse, and the WatchList gate on; before
        1.27, ``resourceVersionMatch`` on a watch is refused and ``sendInitialEvents`` is an unknown
        parameter (ignored). Every refusal is 422 Invalid, the answer client-go falls back to a
        paged list on. A server that ignores both (``ignored``) answers a plain watch."""
        mode = self._watch_list_mode()
        if mode == "ignored":
            return False
        match = req.param("resourceVersionMatch")
        send = req.query.get("sendInitialEvents")
        if mode == "1.20":
            if match:
                raise _invalid("resourceVersionMatch", "resourceVersionMatch is forbidden for watch")
            return False
        causes: list[tuple[str, str]] = []
        if send is not None and match != "NotOlderThan":
            causes.append(("resourceVersionMatch",
                           "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if send is not None and mode == "gate-off":
            causes.append(("sendInitialEvents",
                           "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))
        if match and send is None:
            causes.append(("resourceVersionMatch",
                           "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
        if causes:
            raise _invalid_all(causes)
        return req.flag("sendInitialEvents")

    async def _stream_changes(self, conn: Conn, req: Request, info: ResourceInfo, pred: Predicate | None,
                              table: bool, bookmarks: bool, timeout: int, cursor: int, events_sent: int,
                              close_after: int | None, reset_after: int | None, wake: asyncio.Event,
                              sent: int) -> tuple[int, bytes]:
        """Send changes from ``cursor`` until the stream ends; returns (bytes sent, the bytes that end
        the stream cleanly: the last chunk, maybe after an ERROR event)."""
        reset_gen = self.faults.reset_generation
        loop_time = asyncio.get_running_loop().time
        deadline = loop_time() + timeout if timeout > 0 else math.inf
        interval = self.bookmark_interval
        jitter = getattr(self, "bookmark_jitter", 0.0)
        virtual = self.bookmark_clock == "virtual"

        def gap() -> float:
            return max(0.0, interval + (random.uniform(-jitter, jitter) if jitter else 0.0))

        next_bookmark = (self.store.now if virtual else loop_time()) + gap()
        # A real cacher also bookmarks 2 s before a watch's deadline (``nextBookmarkTime``), so
        # that the client's re-watch starts as close to now as possible.
        pre_deadline = deadline - PRE_DEADLINE_BOOKMARK if not virtual and timeout > PRE_DEADLINE_BOOKMARK else None
        while True:
            wake.clear()
            if conn.closed or self._stopping.is_set():
                return sent, b""
            if self.faults.reset_generation != reset_gen:
                self.faults.note("reset")
                abort(conn)
                raise StreamEnded()
            try:
                batch, cursor, rv_now = self.store.read(info.name, cursor, WATCH_BATCH)
            except Gone as g:
                return sent, _gone_chunk(g.rv, g.oldest)
            if batch:
                # read each time: a fault set while this stream is open applies to it too
                close_after, reset_after = self.faults.stream_limits()
                lines: list[bytes] = []
                for ch in batch:
                    line = self._render(info, ch, pred, table, req)
                    if line is None:
                        continue
                    if (close_after is not None and events_sent >= close_after) or (
                        reset_after is not None and events_sent >= reset_after
                    ):
                        break
                    lines.append(line)
                    events_sent += 1
                if lines:
                    sent += await self._send_lines(conn, lines)
                if close_after is not None and events_sent >= close_after:
                    self.faults.note("closed_after")
                    await self._send(conn, LAST_CHUNK)
                    conn.closed = True
                    raise StreamEnded()
                if reset_after is not None and events_sent >= reset_after:
                    self.faults.note("reset")
                    abort(conn)
                    raise StreamEnded()
                if len(batch) == WATCH_BATCH:
                    continue
            now_t = self.store.now if virtual else loop_time()
            if bookmarks and now_t >= next_bookmark:
                if self._bookmarks_now(info.name):
                    line = _bookmark(info, rv_now)
                    await self._send(conn, chunk(line))
                    sent += len(line)
                next_bookmark = now_t + gap()
            if bookmarks and pre_deadline is not None and loop_time() >= pre_deadline:
                if self._bookmarks_now(info.name):
                    line = _bookmark(info, rv_now)
                    await self._send(conn, chunk(line))
                    sent += len(line)
                pre_deadline = None
            remaining = deadline - loop_time()
            if remaining <= 0:
                return sent, LAST_CHUNK
            wait = remaining
            if bookmarks and not virtual:
                wait = min(wait, max(0.0, next_bookmark - loop_time()))
                if pre_deadline is not None:
                    wait = min(wait, max(0.0, pre_deadline - loop_time()))
            if self.faults.reset_generation != reset_gen:
                continue
            try:
                await asyncio.wait_for(wake.wait(), timeout=min(wait, 0.5))
            except asyncio.TimeoutError:
                pass

    def _bookmarks_now(self, resource: str) -> bool:
        """Does a watch of ``resource`` get its periodic bookmark? Always, but on a server that
        imitates 1.20's watch cache (``bookmarks_when_unchanged=False``): its cacher sends none
        until it has seen a change of the resource (``lastProcessedResourceVersion == 0``)."""
        if getattr(self, "bookmarks_when_unchanged", True):
            return True
        start = getattr(self, "_changes_at_start", {}).get(resource, 0)
        try:
            return bool(self.store.read(resource, start, 1)[0])
        except Gone:  # the changes after the start were compacted away: there were some
            return True

    def _render(self, info: ResourceInfo, ch: Change, pred: Predicate | None, table: bool, req: Request) -> bytes | None:
        etype = ch.type
        if pred is not None:
            if etype == "MODIFIED":
                now_in = pred(ch.slim)
                was_in = ch.prev is not None and pred(ch.prev)
                if now_in and not was_in:
                    etype = "ADDED"
                elif was_in and not now_in:
                    etype = "DELETED"
                elif not now_in:
                    return None
            elif not pred(ch.slim):
                return None
        faults = self.faults
        if faults.events_tampered:
            size = faults.take_oversize()
            if size:
                obj = orjson.loads(ch.data)
                obj["metadata"].setdefault("annotations", {})["nodewatch.sim/padding"] = "x" * size
                return watch_line(etype, orjson.dumps(obj))
        if table:
            return _table_line(info, etype, ch.obj, req, self._table_now())
        return ch.line if etype == ch.type else watch_line(etype, ch.data)

    async def _send_lines(self, conn: Conn, lines: list[bytes]) -> int:
        faults = self.faults
        if faults.events_tampered and faults.take_truncate():
            first = lines[0]
            cut = first[: max(1, len(first) // 2)]
            await self._send(conn, chunk(cut) + LAST_CHUNK)
            abort(conn, rst=False)
            raise StreamEnded()
        data = b"".join(lines)
        if EVENT_CHUNKS:
            await self._send(conn, b"".join(chunk(line) for line in lines))
        else:
            await self._send(conn, chunk(data))
        return len(data)

    async def _send_gone(self, conn: Conn, rv: int, oldest: int) -> int:
        data = _gone_chunk(rv, oldest)
        await self._send(conn, data)
        return len(data)


def _invalid(field: str, detail: str) -> HTTPError:
    """422 Invalid for a ListOptions field, worded as the real API server words it."""
    return _invalid_all([(field, detail)])


def _invalid_all(causes: list[tuple[str, str]]) -> HTTPError:
    """422 Invalid for one or more ListOptions fields: one message, as ``NewInvalid`` joins them
    (``[a, b]`` for more than one)."""
    parts = [f"{field}: Forbidden: {detail}" for field, detail in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return HTTPError(422, f'ListOptions.meta.k8s.io "" is invalid: {joined}', reason="Invalid",
                     details={"group": "meta.k8s.io", "kind": "ListOptions",
                              "causes": [{"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}",
                                          "field": field} for field, detail in causes]})


def _gone_chunk(rv: int, oldest: int) -> bytes:
    """An ERROR watch event with a 410 Expired Status, then the end of the stream."""
    status = status_object(410, f"too old resource version: {rv} ({oldest})", "Expired")
    return chunk(orjson.dumps({"type": "ERROR", "object": status}) + b"\n") + LAST_CHUNK


def _bookmark(info: ResourceInfo, rv: int, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return orjson.dumps({"type": "BOOKMARK", "object": {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}}) + b"\n"


def _table_line(info: ResourceInfo, etype: str, obj: dict, req: Request, now: float) -> bytes:
    table = table_bytes(info, [obj], obj["metadata"]["resourceVersion"], None, req.param("includeObject"), now)
    return b'{"type":"' + etype.encode() + b'","object":' + table + b"}\n"
