"""The simulated fleet served as a read-only Kubernetes API on 127.0.0.1.

``SimServer`` runs an asyncio event loop in a background thread (HTTP/1.1 with keep-alive, chunked
watch streams, TLS), an ``ObjectStore`` fed by the fleet, and optionally a thread that advances the
fleet's virtual clock at ``speed`` times wall time. Tests can instead drive ``fleet.step_to`` or
``server.store.emit`` themselves (``run_fleet=False``). A ``FaultPlan`` makes it misbehave on
demand. Every request is logged (method, path, status, bytes, duration; never a token) and kept in
``request_log`` so tests can check what clients asked for.

This module holds the server's lifecycle, the fleet thread, the fault monitor ("server down") and
the connection loop; ``server_reads`` routes and answers requests, ``server_watch`` streams.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import os
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..loop_thread import LoopThread
from .faults import FaultPlan, TokenAuth
from .http_protocol import BadRequest, Request, read_request, response_head, status_bytes
from .kubeconfig import ServerIdentity, load_or_create_identity, read_existing, write_kubeconfig
from .server_conn import Conn, StreamEnded, abort
from .server_reads import ReadHandlers
from .server_watch import WATCH_LIST_MODES, WatchStreaming
from .store import RESOURCES, Entry, ObjectStore

DEFAULT_KUBECONFIG = "nodewatch-sim.kubeconfig"


@dataclass(frozen=True)
class RequestRecord:
    """One logged request (no header values, so no token)."""

    method: str
    target: str
    status: int
    bytes: int
    duration: float
    user_agent: str
    watch: bool


class SimServer(ReadHandlers, WatchStreaming):
    """A Kubernetes-compatible, read-only API server for a simulated fleet.

    ``fleet`` is a SimFleet (``now``, ``server_version``, ``subscribe``, ``objects``, ``step_to``) or
    None for a store-only server fed by ``store.emit``. ``port=None`` reuses the port written in an
    existing ``kubeconfig_out`` (else any free port). ``bookmark_clock`` is "wall" (bookmarks every
    ``bookmark_interval`` real seconds) or "virtual" (every ``bookmark_interval`` seconds of the
    store's virtual time); ``bookmark_jitter`` spreads each gap by up to that many seconds either
    way (a real API server's come every 59-61 s: a one-minute timer checked every 1 s +-25 %).
    ``bookmarks_when_unchanged=False`` imitates 1.20's watch cache: no bookmark at all on a
    resource that has not changed since the server started. ``watch_list`` says how streaming
    lists (``sendInitialEvents``) are answered, as each kind of real server answers them
    (``server_watch.WATCH_LIST_MODES``).
    """

    def __init__(
        self,
        fleet: Any = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = 0,
        tls: bool = True,
        kubeconfig_out: str | os.PathLike | None = None,
        token: str | None = None,
        bookmark_interval: float = 10.0,
        bookmark_clock: str = "wall",
        faults: FaultPlan | None = None,
        run_fleet: bool = True,
        speed: float = 1.0,
        step_interval: float = 0.1,
        store: ObjectStore | None = None,
        history_limit: int = 200_000,
        log: TextIO | None = None,
        server_version: str | None = None,
        watch_list: str = "auto",
        bookmark_jitter: float = 0.0,
        bookmarks_when_unchanged: bool = True,
    ) -> None:
        if bookmark_clock not in ("wall", "virtual"):
            raise ValueError("bookmark_clock must be 'wall' or 'virtual'")
        if watch_list not in WATCH_LIST_MODES:
            raise ValueError(f"watch_list must be one of {', '.join(WATCH_LIST_MODES)}")
        self.fleet = fleet
        self.host = host
        self.tls = tls
        self.kubeconfig_path: Path | None = Path(kubeconfig_out) if kubeconfig_out else None
        self.bookmark_interval = bookmark_interval
        self.bookmark_clock = bookmark_clock
        self.watch_list = watch_list
        self.bookmark_jitter = bookmark_jitter
        self.bookmarks_when_unchanged = bookmarks_when_unchanged
        self._changes_at_start: dict[str, int] = {}
        self.faults = faults or FaultPlan()
        self.run_fleet = run_fleet and fleet is not None
        self.speed = speed
        self.step_interval = step_interval
        self.store = store or ObjectStore(history_limit=history_limit)
        self.log = log
        self.server_version = server_version or getattr(fleet, "server_version", None) or "v1.33.2"
        self.request_log: collections.deque[RequestRecord] = collections.deque(maxlen=10_000)
        self.requests_started = 0
        """Requests read so far; each is in ``request_log`` once it has ended (a test waits for both
        to agree: every request, watches included, has ended)."""
        self.fleet_lag = 0.0
        self.follow_wall = False
        """The fleet's clock is the wall's (``nodewatch sim-server``: built from ``time.time()``):
        the fleet thread first catches it up to the wall, which moved on while the fleet was built
        and loaded (else every kubelet stamps renewTime that much behind: issue 29)."""
        """How far (virtual seconds) the fleet thread was behind its target clock at its last step."""
        self.fleet_error: BaseException | None = None

        existing = read_existing(self.kubeconfig_path) if self.kubeconfig_path else None
        self._port_from_config = port is None
        if port is None:
            port = (existing.port if existing else None) or 0
        self._requested_port = port
        self.identity: ServerIdentity = load_or_create_identity(self.kubeconfig_path if tls else None)
        if not tls and existing and existing.token:
            self.identity.token = existing.token
        if token:
            self.identity.token = token
        self.auth = TokenAuth({self.identity.token: None})
        self.port = 0
        self._ssl: ssl.SSLContext | None = self.identity.ssl_context() if tls else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: LoopThread | None = None
        self._fleet_thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[Conn] = set()
        self._wakes: set[asyncio.Event] = set()
        self._wake_pending = False
        self._stopping = threading.Event()
        self._snapshots: collections.OrderedDict[tuple[str, int], list[Entry]] = collections.OrderedDict()
        self._log_lock = threading.Lock()
        self._listening = threading.Event()

    # ---- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def token(self) -> str:
        return self.identity.token

    @property
    def ca_cert_pem(self) -> bytes:
        return self.identity.ca_cert_pem

    def start(self) -> "SimServer":
        """Load the fleet into the store, start listening and (if asked) advancing the fleet."""
        if self.fleet is not None:
            self.store.load(self.fleet)
            self.fleet.subscribe(self.store.emit)
            now = getattr(self.fleet, "now", None)
            if now is not None:
                self.store.advance(now)
        self._changes_at_start = {r: self.store.snapshot(r)[2] for r in RESOURCES}
        self._loop_thread = LoopThread("sim-server-loop", exception_handler=_quiet_exceptions)
        self._loop = self._loop_thread.loop
        self.store.add_listener(self._on_store_change)
        self._loop_thread.run(self._listen(), 10)
        self._monitor_future = self._loop_thread.submit(self._monitor())
        if self.kubeconfig_path:
            write_kubeconfig(self.kubeconfig_path, self.url, self.identity)
        if self.run_fleet:
            while self.follow_wall and time.time() - self.fleet.now > self.step_interval:
                self.fleet.step_to(time.time())  # before anyone is told the address: no list sees it behind
                self.store.advance(self.fleet.now)
            self._fleet_thread = threading.Thread(target=self._fleet_loop, name="sim-fleet", daemon=True)
            self._fleet_thread.start()
        return self

    def stop(self) -> None:
        """Stop the fleet thread, close every connection and the listener; idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.store.remove_listener(self._on_store_change)
        if self._fleet_thread:
            self._fleet_thread.join(10)
        if self._loop_thread is not None:
            if self._loop_thread.running:
                try:
                    self._loop_thread.run(self._shutdown(), 10)
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
            self._loop_thread.stop(10)

    def __enter__(self) -> "SimServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def go_down(self, seconds: float | None = None, timeout: float = 5.0) -> None:
        """Stop listening and drop every connection (for ``seconds``, or until ``go_up``); returns
        once connections are refused."""
        self.faults.down(seconds)
        self._wait_listening(False, timeout)

    def go_up(self, timeout: float = 5.0) -> None:
        """Listen again on the same port; returns once connections are accepted."""
        self.faults.up()
        self._wait_listening(True, timeout)

    def _wait_listening(self, want: bool, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._listening.is_set() != want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"server did not go {'up' if want else 'down'} in {timeout}s")
            time.sleep(0.01)

    def rotate_token(self, new_token: str | None = None, old_valid_for: float = 0.0) -> str:
        """Accept a new token (returned), let the old one work ``old_valid_for`` more seconds, and
        rewrite the kubeconfig (if any) with the new token."""
        from .kubeconfig import new_token as make_token

        old = self.identity.token
        new = new_token or make_token()
        self.auth.accept(new)
        self.auth.expire(old, time.time() + old_valid_for)
        self.identity.token = new
        if self.kubeconfig_path:
            write_kubeconfig(self.kubeconfig_path, self.url, self.identity)
        return new

    # ---- fleet thread ---------------------------------------------------------------------------

    def _fleet_loop(self) -> None:
        fleet = self.fleet
        t0_wall = time.monotonic()
        t0_virtual = float(fleet.now)
        while not self._stopping.is_set():
            began = time.monotonic()
            target = t0_virtual + (began - t0_wall) * self.speed
            try:
                fleet.step_to(target)
            except BaseException as e:  # noqa: BLE001 - report, do not kill the server
                self.fleet_error = e
                print(f"nodewatch sim-server: fleet failed: {e!r}", file=sys.stderr)
                return
            self.store.advance(target)
            done = time.monotonic()
            self.fleet_lag = (t0_virtual + (done - t0_wall) * self.speed) - target
            self._stopping.wait(max(0.0, self.step_interval - (done - began)))

    # ---- event loop side ------------------------------------------------------------------------

    def _on_store_change(self) -> None:
        """Called in the emitting thread after each change: wake watchers once per loop turn."""
        if self._wake_pending or self._loop is None:
            return
        self._wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._wake_all)
        except RuntimeError:  # loop closed
            pass

    def _wake_all(self) -> None:
        self._wake_pending = False
        for wake in self._wakes:
            wake.set()

    async def _listen(self) -> None:
        port = self.port or self._requested_port
        try:
            self._server = await asyncio.start_server(
                self._handle, self.host, port, ssl=self._ssl, reuse_address=True, limit=64 * 1024,
                backlog=256,
            )
        except OSError:
            if not (self._port_from_config and not self.port):
                raise
            # the port the previous server used is taken: any free port will do
            self._server = await asyncio.start_server(
                self._handle, self.host, 0, ssl=self._ssl, reuse_address=True, limit=64 * 1024
            )
        self.port = self._server.sockets[0].getsockname()[1]
        self._listening.set()

    async def _unlisten(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self._conns):
            abort(conn)
        self._listening.clear()

    async def _monitor(self) -> None:
        """Apply the plan's "server down" fault: stop listening, later listen again."""
        while not self._stopping.is_set():
            down = self.faults.should_be_down()
            if down and self._server is not None:
                self.faults.note("down")
                await self._unlisten()
            elif not down and self._server is None:
                try:
                    await self._listen()
                except OSError:
                    pass  # port still busy: try again shortly
            await asyncio.sleep(0.02)

    async def _shutdown(self) -> None:
        await self._unlisten()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        for wake in self._wakes:
            wake.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Conn(reader, writer)
        self._conns.add(conn)
        try:
            while not conn.closed:
                try:
                    req = await read_request(reader)
                except BadRequest as e:
                    body = status_bytes(400, str(e))
                    writer.write(response_head(400, {"Connection": "close"}, len(body)) + body)
                    await writer.drain()
                    break
                if req is None:
                    break
                self.requests_started += 1
                keep = await self._serve(conn, req)
                if not keep or not req.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError, StreamEnded,
                asyncio.CancelledError):
            pass
        except Exception as e:  # noqa: BLE001 - one bad connection must not take the server down
            print(f"nodewatch sim-server: connection error: {e!r}", file=sys.stderr)
        finally:
            self._conns.discard(conn)
            conn.closed = True
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    # ---- logging --------------------------------------------------------------------------------

    def _record(self, req: Request, code: int, sent: int, duration: float, watch: bool) -> None:
        rec = RequestRecord(req.method, req.target, code, sent, duration, req.headers.get("user-agent", ""), watch)
        self.request_log.append(rec)
        if self.log is not None:
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
            line = f"{stamp} {rec.method} {rec.target} {rec.status} {rec.bytes}B {rec.duration * 1000:.1f}ms"
            if watch:
                line += " (watch)"
            with self._log_lock:
                try:
                    self.log.write(line + "\n")
                    self.log.flush()
                except (OSError, ValueError):
                    pass


def _quiet_exceptions(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    exc = context.get("exception")
    if isinstance(exc, (ConnectionError, ssl.SSLError, OSError, asyncio.CancelledError)):
        return
    msg = context.get("message", "")
    if "SSL" in msg or "handshake" in msg.lower():
        return
    loop.default_exception_handler(context)
