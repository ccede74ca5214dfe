"""The hub: one source, one FleetState, any number of viewers.

Three kinds of threads, and who owns what:

- the source's own threads (the live source's watches, or the demo's feeder) feed the state, and
  the flight recorder (``segments.py``) when there is one;
- the *ticker* evaluates the fleet once per ``tick_seconds`` at the source clock's ``now`` and
  builds one delta frame (``publisher.py``), plus one details frame per node some viewer drills
  into; it never writes to a socket;
- the *loop* thread (asyncio) accepts viewers, reads their requests and writes frames.

A viewer never slows the hub or another viewer: the ticker hands each frame to the loop, which
appends it to each viewer's bounded queue (the same bytes object for all: encoded once). A viewer
whose queue is over ``max_queue_frames`` frames or ``max_queue_bytes`` has its queue dropped and
gets a fresh snapshot when it drains, followed by the deltas after that snapshot (the loop keeps
the last few).

Hostile or broken peers cost little and hold up no one (limits, all per hub): a connection is a
viewer only once it has said ``hello`` (with the token over TCP) within ``hello_seconds``; until
then it gets nothing (no snapshot), and at most ``MAX_PENDING`` such connections wait at once
(one more closes the oldest waiting: an honest newcomer says hello at once, so a flood of idle
connections only churns itself). A TLS handshake has ``HANDSHAKE_SECONDS``. At most ``max_viewers``
viewers at once; one more is told ``bye`` (it retries later). A frame that is not the protocol
(garbage, over ``protocol.MAX_REQUEST``) closes its connection. Every refusal is logged, one line
per kind and ``REFUSAL_LOG_SECONDS`` with the count. Memory per viewer is its queue (frames are
shared bytes, bounded by ``max_queue_frames``/``max_queue_bytes``); file descriptors are one per
connection: at most ``MAX_PENDING + max_viewers`` (+ handshakes in progress, each ended after
``HANDSHAKE_SECONDS``).

Viewers are read-only: the only requests are ``hello``, ``focus`` (a node for the drill-down, by
its key: ``cluster/name`` when the hub watches several clusters; the hub asks its source to watch
that node's pods and events, within the source's cap) and ``ping``.
Nothing of the source's credentials is in any frame: frames carry evaluated views only.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import collections
import contextlib
import hmac
import logging
import os
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any

from ..core.clock import is_virtual
from ..core.source import Source
from ..core.views import Problem
from ..loop_thread import LoopThread, keep
from ..sources.live import MAX_SCOPED_NODES
from . import protocol
from .codec import to_wire
from .publisher import Publisher, Snapshot

RECENT_PROBLEMS = 50
"""How many of the newest problems every frame carries, for the viewers' problems pane."""

log = logging.getLogger("nodewatch.hub")

TICK_SECONDS = 1.0
MAX_QUEUE_FRAMES = 30
"""A viewer this many frames behind (30 s at one frame a second) is dropped to a fresh snapshot."""
MAX_QUEUE_BYTES = 64 * 1024 * 1024
RECENT_DELTAS = 16
"""Deltas kept to follow a snapshot that was built while they were being sent."""
MAX_DETAILS_PODS = 200
MAX_DETAILS_EVENTS = 50
MAX_VIEWERS = 256
"""Viewers at once (past their hello); one more is told ``bye`` and tries again later."""
MAX_PENDING = 1024
"""Connections at once that have not said hello yet (idle, slow or hostile)."""
HELLO_SECONDS = 10.0
"""How long a new connection has to say hello (with the token over TCP)."""
HANDSHAKE_SECONDS = 10.0
"""How long a TLS handshake may take (asyncio's default is 60 s per half-open connection)."""
TLS_READ_BUFFER = 16 * 1024
"""The read buffer of each TLS connection (one TLS record). asyncio allocates 256 KiB for every
accepted TLS connection before its handshake (``sslproto.SSLProtocol.max_size``): 1,000 idle or
half-open connections cost the hub 300 MB (tests/hub/test_hub_hostile.py measured it); with one
record's worth, ~64 MB (the rest is OpenSSL's own, per connection until its handshake ends). Set on asyncio's class when the hub opens its TCP listener: the
only asyncio TLS server in a hub's process (its API client is urllib3)."""
REFUSAL_LOG_SECONDS = 10.0
MAX_NODE_KEY = 253 + 1 + 253
"""A drill-down names a node by its key: a node name (at most 253 characters), or ``cluster/name``."""


@dataclass(eq=False)
class Viewer:
    """One attached viewer, as the loop sees it."""

    id: int
    peer: str
    writer: asyncio.StreamWriter
    queue: collections.deque = field(default_factory=collections.deque)
    queued_bytes: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    seq: int = -1
    """The seq of the last fleet frame (snapshot or delta) queued for it; -1: waiting for a snapshot."""
    focus: str | None = None
    authenticated: bool = False
    snapshots: int = 0
    dropped: int = 0
    sent_bytes: int = 0
    closed: bool = False


class Hub:
    """See the module docstring. ``start()`` returns once the socket accepts viewers."""

    def __init__(self, source: Source, socket_path: str | None, *, tcp: tuple[str, int] | None = None,
                 ssl_context: ssl.SSLContext | None = None, token: str | None = None,
                 tick_seconds: float | None = TICK_SECONDS, max_queue_frames: int = MAX_QUEUE_FRAMES,
                 max_queue_bytes: int = MAX_QUEUE_BYTES, max_viewers: int = MAX_VIEWERS,
                 max_pending: int = MAX_PENDING, hello_seconds: float = HELLO_SECONDS,
                 handshake_seconds: float = HANDSHAKE_SECONDS) -> None:
        """``tick_seconds`` None: no ticker thread; the caller calls ``tick()`` (tests)."""
        if tcp is not None and (ssl_context is None or not token):
            raise ValueError("a TCP listener needs TLS and a token")
        self.source = source
        self.socket_path = socket_path
        self.tcp = tcp
        self.tcp_port: int | None = None
        self.ssl_context = ssl_context
        self.token = token
        self.tick_seconds = tick_seconds
        self.max_queue_frames = max_queue_frames
        self.max_queue_bytes = max_queue_bytes
        self.max_viewers = max_viewers
        self.max_pending = max_pending
        self.hello_seconds = hello_seconds
        self.handshake_seconds = handshake_seconds
        self._pending: collections.OrderedDict[int, asyncio.StreamWriter] = collections.OrderedDict()
        """Connections waiting for their hello now, oldest first."""
        self.refused: collections.Counter[str] = collections.Counter()
        """Connections refused since start, by why."""
        self._refusals_unlogged: collections.Counter[str] = collections.Counter()
        self._refusal_logged_at: dict[str, float] = {}
        self.publisher = Publisher(source.name)
        self._pub_lock = threading.Lock()
        self._viewers: dict[int, Viewer] = {}
        self._next_id = 0
        self._recent: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=RECENT_DELTAS)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._loop_thread: LoopThread | None = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self.ticks = 0
        self.last_tick_seconds = 0.0
        self.last_frame_bytes = 0
        """The size of the last delta frame (for bench/hub.py and the status line)."""
        self.recording_stopped = ""
        """What the flight recorder says while it cannot record (``recording stopped: disk full``)."""
        self._recording_since: float | None = None
        self.last_health: dict = {}
        """The streams' health at the last tick (the recorder's keyframes write it)."""

    # --- life -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.source.start()
        self.tick()  # a first frame, so the first viewer gets a snapshot at once
        self._loop_thread = LoopThread("hub-loop")
        try:
            self._loop_thread.run(self._listen(), 30)
        except BaseException:
            self._loop_thread.stop(5)
            self.source.stop()
            raise
        self._loop = self._loop_thread.loop
        if self.tick_seconds is not None:
            self._ticker = threading.Thread(target=self._tick_loop, name="hub-ticker", daemon=True)
            self._ticker.start()

    def stop(self) -> None:
        """Say goodbye to every viewer, close the sockets, stop the source; idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        lt = self._loop_thread
        if lt is not None:
            if self._loop is not None and lt.running:
                try:
                    lt.run(self._shutdown(), 5)
                except Exception:  # noqa: BLE001 - shutting down regardless
                    pass
            lt.stop(5)
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self.source.stop()
        if self.socket_path:
            try:
                os.unlink(self.socket_path)
            except OSError:
                pass

    # --- the ticker ---------------------------------------------------------------------------------

    def _tick_loop(self) -> None:
        """A tick every ``tick_seconds`` on the clock, not ``tick_seconds`` after the last one ended:
        at 130,000 nodes a tick takes hundreds of ms, which viewers saw added to every interval."""
        import time

        assert self.tick_seconds is not None
        due = time.monotonic()
        while True:
            due += self.tick_seconds
            wait = due - time.monotonic()
            if wait < 0:  # (a tick overran its interval: the next one now, and the cadence from there)
                due, wait = time.monotonic(), 0.0
            if self._stop.wait(wait):
                return
            try:
                self.tick()
            except Exception:  # a failed tick is logged; the next one tries again
                log.exception("hub tick failed")

    def tick(self) -> int:
        """Evaluate the fleet at the source's ``now`` and send the change to every viewer; returns
        the frame's sequence number. Called by the ticker thread, or by a test."""
        import time

        started = time.perf_counter()
        state = self.source.state
        now = self.source.clock.now()
        view = state.evaluate(now)
        fleet_records = getattr(self.source, "fleet_records", None)  # several clusters: by node key
        records = fleet_records() if fleet_records is not None else state.node_records()
        self.last_health = view.health
        name, problems, recent = self.source.name, state.problem_count(), state.recent_problems(RECENT_PROBLEMS)
        stopped = self._recording_status(now)
        if stopped:  # on every screen: in the header, and the newest of the problems
            name = f"{name} · {stopped}"
            problems += 1
            recent = [*recent, Problem(self._recording_since, "recording", f"{stopped} (the fleet is still "
                                       "watched and judged; recording resumes by itself when there is room)")]
        with self._pub_lock:
            frame = self.publisher.update(view, records, now, problems=problems, name=name, recent=recent)
            seq = self.publisher.seq
        details = self._details_frames(now)
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self._broadcast, seq, frame, details)
        self.ticks += 1
        self.last_frame_bytes = len(frame)
        self.last_tick_seconds = time.perf_counter() - started
        return seq

    def _recording_status(self, now: float) -> str:
        """The flight recorder's ``stopped`` (a full disk), logged when it changes."""
        stopped = str(getattr(getattr(self.source, "recorder", None), "stopped", "") or "")
        if stopped != self.recording_stopped:
            if stopped:
                log.error("%s: viewers are told; the fleet is still watched and served", stopped)
                self._recording_since = now
            else:
                log.warning("recording resumed")
                self._recording_since = None
            self.recording_stopped = stopped
        return stopped

    def _details_frames(self, now: float) -> dict[str, bytes]:
        """One details frame per node that some viewer drills into."""
        foci = {v.focus for v in list(self._viewers.values()) if v.focus}
        return {node: self._details_frame(node, now) for node in foci}

    def _details_frame(self, node: str, now: float) -> bytes:
        d = self.source.state.node_details(node, now, max_pods=MAX_DETAILS_PODS, max_events=MAX_DETAILS_EVENTS)
        scoped = getattr(self.source, "scoped_nodes", None)
        watched = True if scoped is None else node in scoped()
        return protocol.encode({"k": "details", "now": now, "node": node, "d": to_wire(d), "watched": watched,
                                "cap": MAX_SCOPED_NODES})

    def snapshot(self) -> tuple[int, bytes]:
        """The last tick's snapshot frames and its seq (built once per tick, shared)."""
        snap = self._snapshot()
        return snap.seq, bytes(snap)

    def _snapshot(self) -> Snapshot:
        with self._pub_lock:
            return self.publisher.snapshot()

    def _set_foci(self) -> None:
        foci = [v.focus for v in sorted(self._viewers.values(), key=lambda v: -v.id) if v.focus]
        focus_many = getattr(self.source, "focus_nodes", None)
        if focus_many is not None:
            focus_many(list(dict.fromkeys(foci)))
        else:
            self.source.focus_node(foci[0] if foci else None)

    # --- the loop ---------------------------------------------------------------------------------

    async def _listen(self) -> None:
        if self.socket_path:
            if os.path.exists(self.socket_path):
                os.unlink(self.socket_path)  # a stale socket of a hub that died (the caller holds the lock)
            old = os.umask(0o177)
            try:
                srv = await asyncio.start_unix_server(self._serve_unix, path=self.socket_path)
            finally:
                os.umask(old)
            os.chmod(self.socket_path, 0o600)
            self._servers.append(srv)
        if self.tcp is not None:
            host, port = self.tcp
            asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
            srv = await asyncio.start_server(self._serve_tcp, host, port, ssl=self.ssl_context,
                                             ssl_handshake_timeout=self.handshake_seconds, backlog=1024)
            self.tcp_port = srv.sockets[0].getsockname()[1]
            self._servers.append(srv)

    async def _shutdown(self) -> None:
        for srv in self._servers:
            srv.close()
        me = asyncio.current_task()
        serving = [t for t in asyncio.all_tasks() if t is not me]
        bye = protocol.encode({"k": "bye", "now": self.source.clock.now(), "reason": "the hub is shutting down"})
        for v in list(self._viewers.values()):
            try:
                v.writer.write(bye)
                v.writer.close()
            except (OSError, RuntimeError):
                pass
            v.closed = True
            v.wake.set()
        if serving:  # each ends on its closed connection (cancelling them upsets asyncio's streams)
            _, left = await asyncio.wait(serving, timeout=2)
            for task in left:  # a TLS handshake still in progress, a hello still awaited
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=1)

    async def _serve_unix(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._serve(reader, writer, authenticated=True)

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._serve(reader, writer, authenticated=False)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, authenticated: bool) -> None:
        self._next_id += 1
        peer = str(writer.get_extra_info("peername") or "unix")
        v = Viewer(self._next_id, peer, writer, authenticated=authenticated)
        sender = None
        try:
            if not await self._hello(reader, v, authenticated):
                return
            if len(self._viewers) >= self.max_viewers:
                self._refuse(f"{self.max_viewers} viewers already")
                writer.write(protocol.encode({"k": "bye", "now": self.source.clock.now(),
                                              "reason": f"the hub serves {self.max_viewers} viewers already"}))
                return
            self._viewers[v.id] = v
            hello = {"k": "hello", "v": protocol.VERSION, "now": self.source.clock.now(), "name": self.source.name,
                     "virtual": is_virtual(self.source.clock),
                     "tick_seconds": self.tick_seconds, "max_queue_frames": self.max_queue_frames}
            writer.write(protocol.encode(hello))
            sender = asyncio.ensure_future(self._send_loop(v))
            await self._resnapshot(v)
            while not v.closed:
                msg = await protocol.read_frame(reader, protocol.MAX_REQUEST)
                if msg is None:
                    break
                await self._request(v, msg)
        except (protocol.ProtocolError, ConnectionError, OSError) as exc:
            log.info("viewer %s: %s", v.peer, exc)
        except Exception as exc:  # noqa: BLE001 - one connection's trouble, never the hub's
            log.warning("viewer %s: %s: %s", v.peer, type(exc).__name__, exc)
        finally:
            v.closed = True
            v.wake.set()
            had_focus = self._viewers.pop(v.id, None) is not None and v.focus is not None
            if sender is not None:
                await asyncio.gather(sender, return_exceptions=True)
            try:
                writer.close()
            except (OSError, RuntimeError):
                pass
            if had_focus:
                self._set_foci()

    async def _hello(self, reader: asyncio.StreamReader, v: Viewer, authenticated: bool) -> bool:
        """Wait for the connection's hello (and, over TCP, its token); True makes it a viewer."""
        while len(self._pending) >= self.max_pending:  # the oldest waiting goes: a newcomer says hello at once
            _, oldest = self._pending.popitem(last=False)
            self._refuse(f"{self.max_pending} connections waiting for their hello: the oldest closed")
            with contextlib.suppress(OSError, RuntimeError):
                oldest.transport.abort()
        self._pending[v.id] = v.writer
        try:
            msg = await asyncio.wait_for(protocol.read_frame(reader, protocol.MAX_REQUEST), self.hello_seconds)
        except asyncio.TimeoutError:
            self._refuse(f"no hello within {self.hello_seconds:g}s")
            return False
        except (protocol.ProtocolError, ConnectionError, OSError) as exc:
            self._refuse("not the protocol" if isinstance(exc, protocol.ProtocolError) else "closed before its hello")
            log.debug("connection %s: %s", v.peer, exc)
            return False
        finally:
            self._pending.pop(v.id, None)
        if msg is None:
            return False
        if msg["k"] != "hello":
            self._refuse("no hello first")
            return False
        if authenticated:
            return True
        token = msg.get("token")
        if not (isinstance(token, str) and self.token and hmac.compare_digest(token.encode(), self.token.encode())):
            self._refuse("bad token")
            v.writer.write(protocol.encode({"k": "error", "now": self.source.clock.now(), "error": "bad token"}))
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                await asyncio.wait_for(v.writer.drain(), 5)
            return False
        v.authenticated = True
        return True

    @property
    def pending(self) -> int:
        """Connections waiting for their hello now."""
        return len(self._pending)

    def _refuse(self, why: str) -> None:
        """Count a refused connection; log each kind at most once per ``REFUSAL_LOG_SECONDS``."""
        import time

        self.refused[why] += 1
        self._refusals_unlogged[why] += 1
        now = time.monotonic()
        if now - self._refusal_logged_at.get(why, -REFUSAL_LOG_SECONDS) >= REFUSAL_LOG_SECONDS:
            log.warning("refused %d connection(s): %s (%d since start)", self._refusals_unlogged[why], why,
                        self.refused[why])
            self._refusals_unlogged[why] = 0
            self._refusal_logged_at[why] = now

    async def _request(self, v: Viewer, msg: dict[str, Any]) -> None:
        kind = msg["k"]
        if kind == "focus":
            node = msg.get("node")
            if node is not None and (not isinstance(node, str) or not node or len(node) > MAX_NODE_KEY):
                raise protocol.ProtocolError("focus: not a node name")
            v.focus = node
            self._set_foci()
            if node is not None:
                loop = asyncio.get_running_loop()
                frame = await loop.run_in_executor(None, self._details_frame, node, self.source.clock.now())
                if v.focus == node:
                    self._enqueue(v, frame)
        elif kind == "ping":
            self._enqueue(v, protocol.encode({"k": "pong", "now": self.source.clock.now()}))
        elif kind == "hello":
            pass  # a viewer on the Unix socket may say hello too; nothing to check
        else:
            raise protocol.ProtocolError(f"unknown request {kind[:40]!r}")

    def _drop_to_snapshot(self, v: Viewer) -> None:
        """Forget what ``v`` has not been sent yet; it gets a fresh snapshot instead."""
        v.seq = -1
        v.queue.clear()
        v.queued_bytes = 0
        keep(asyncio.ensure_future(self._resnapshot(v)))

    async def _resnapshot(self, v: Viewer) -> None:
        """Queue a fresh snapshot for ``v`` (built off the loop), then the deltas after it."""
        v.seq = -1
        loop = asyncio.get_running_loop()

        def build() -> tuple[Snapshot, bytes]:  # (one job: the pool's threads are as many as before)
            snap = self._snapshot()
            loop.call_soon_threadsafe(self._first_part, v, snap)  # the first rows, on their way
            return snap, snap.rest()  # while the rest is encoded

        snap, rest = await loop.run_in_executor(None, build)
        if v.closed:  # (no other snapshot can start meanwhile: a viewer waiting for one gets no deltas)
            return
        self._enqueue(v, rest)
        seq = v.seq = snap.seq
        for s, frame in self._recent:
            if s > seq:
                self._enqueue(v, frame)
                v.seq = s

    def _first_part(self, v: Viewer, snap: Snapshot) -> None:
        if not v.closed:
            v.snapshots += 1
            self._enqueue(v, snap.first)

    def _broadcast(self, seq: int, frame: bytes, details: dict[str, bytes]) -> None:
        self._recent.append((seq, frame))
        for v in list(self._viewers.values()):
            if v.seq < 0:
                continue  # waiting for its snapshot; it will follow with the recent deltas
            if len(v.queue) >= self.max_queue_frames or v.queued_bytes + len(frame) > self.max_queue_bytes:
                v.dropped += 1
                self._drop_to_snapshot(v)
                continue
            if seq != v.seq + 1:
                self._drop_to_snapshot(v)
                continue
            self._enqueue(v, frame)
            v.seq = seq
            if v.focus and v.focus in details:
                self._enqueue(v, details[v.focus])

    def _enqueue(self, v: Viewer, frame: bytes) -> None:
        v.queue.append(frame)
        v.queued_bytes += len(frame)
        v.wake.set()

    async def _send_loop(self, v: Viewer) -> None:
        w = v.writer
        try:
            while not v.closed:
                if not v.queue:
                    v.wake.clear()
                    await v.wake.wait()
                    continue
                frame = v.queue.popleft()
                v.queued_bytes -= len(frame)
                w.write(frame)
                v.sent_bytes += len(frame)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            v.closed = True

    # --- for tests, bench and the status line ------------------------------------------------------

    def viewer_stats(self) -> list[dict[str, Any]]:
        return [{"id": v.id, "peer": v.peer, "queued": len(v.queue), "queued_bytes": v.queued_bytes,
                 "snapshots": v.snapshots, "dropped": v.dropped, "sent_bytes": v.sent_bytes, "focus": v.focus}
                for v in list(self._viewers.values())]
