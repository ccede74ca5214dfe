"""The simulated fleet served as a read-only Kubernetes API on 127.0.0.1.

``SimServer`` runs an asyncio event loop in a background thread (HTTP/1.1 with keep-alive, chunked
watch streams, TLS), an ``ObjectStore`` fed by the fleet, and optionally a thread that advances the
fleet's virtual clock at ``speed`` times wall time. Tests can instead drive ``fleet.step_to`` or
``server.store.emit`` themselves (``run_fleet=False``). A ``FaultPlan`` makes it misbehave on
demand. Every request is logged (method, path, status, bytes, duration; never a token) and kept in
``request_log`` so tests can check what clients asked for.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import datetime as dt
import math
import os
import socket
import ssl
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from . import http_discovery as discovery
from .faults import FaultPlan, TokenAuth
from .http_protocol import (
    LAST_CHUNK,
    BadRequest,
    Request,
    chunk,
    read_request,
    response_head,
    status_bytes,
    status_object,
)
from .http_tables import TABLE_RESOURCES, table_bytes, wants_table
from .kubeconfig import ServerIdentity, load_or_create_identity, read_existing, write_kubeconfig
from .selectors import Predicate, SelectorError, combine, parse_field_selector, parse_label_selector
from .store import RESOURCES, Change, Entry, Gone, ObjectStore, ResourceInfo, watch_line

DEFAULT_KUBECONFIG = "nodewatch-sim.kubeconfig"
WATCH_BATCH = 5000
SNAPSHOT_CACHE = 16
STREAM_WRITE_LIMIT = 4 * 1024 * 1024


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


class _Conn:
    __slots__ = ("reader", "writer", "closed", "wake", "peer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.closed = False
        self.wake: asyncio.Event | None = None
        self.peer = writer.get_extra_info("peername")


class _StreamEnded(Exception):
    """The watch stream ended on purpose (fault) and the connection must not be reused."""


class _Route:
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


class SimServer:
    """A Kubernetes-compatible, read-only API server for a simulated fleet.

    ``fleet`` is a SimFleet (``now``, ``server_version``, ``subscribe``, ``objects``, ``step_to``) or
    None for a store-only server fed by ``store.emit``. ``port=None`` reuses the port written in an
    existing ``kubeconfig_out`` (else any free port). ``bookmark_clock`` is "wall" (bookmarks every
    ``bookmark_interval`` real seconds) or "virtual" (every ``bookmark_interval`` seconds of the
    store's virtual time).
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
    ) -> None:
        if bookmark_clock not in ("wall", "virtual"):
            raise ValueError("bookmark_clock must be 'wall' or 'virtual'")
        self.fleet = fleet
        self.host = host
        self.tls = tls
        self.kubeconfig_path: Path | None = Path(kubeconfig_out) if kubeconfig_out else None
        self.bookmark_interval = bookmark_interval
        self.bookmark_clock = bookmark_clock
        self.faults = faults or FaultPlan()
        self.run_fleet = run_fleet and fleet is not None
        self.speed = speed
        self.step_interval = step_interval
        self.store = store or ObjectStore(history_limit=history_limit)
        self.log = log
        self.server_version = server_version or getattr(fleet, "server_version", None) or "v1.33.2"
        self.request_log: collections.deque[RequestRecord] = collections.deque(maxlen=10_000)
        self.fleet_lag = 0.0
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
        self._loop_thread: threading.Thread | None = None
        self._fleet_thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[_Conn] = set()
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
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(_quiet_exceptions)
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="sim-server-loop", daemon=True)
        self._loop_thread.start()
        self.store.add_listener(self._on_store_change)
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self._monitor_future = asyncio.run_coroutine_threadsafe(self._monitor(), self._loop)
        if self.kubeconfig_path:
            write_kubeconfig(self.kubeconfig_path, self.url, self.identity)
        if self.run_fleet:
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
        if self._loop and self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._loop_thread:
            self._loop_thread.join(10)
        if self._loop and not self._loop.is_running():
            self._loop.close()

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

    def virtual_now(self) -> float:
        return self.store.now

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

    def _table_now(self) -> float:
        """"Now" for the AGE columns: the fleet's virtual time (wall time for a store-only server)."""
        return self.store.now or time.time()

    async def _unlisten(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self._conns):
            _abort(conn)
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
        conn = _Conn(reader, writer)
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
                keep = await self._serve(conn, req)
                if not keep or not req.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError, _StreamEnded,
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

    # ---- request handling -----------------------------------------------------------------------

    async def _serve(self, conn: _Conn, req: Request) -> bool:
        """Answer one request; False when the connection must close."""
        began = time.monotonic()
        sent = 0
        code = 500
        is_watch = False
        try:
            route = None
            try:
                self._authenticate(req)
                if req.method not in ("GET",):
                    raise HTTPError(405, f"the server does not allow this method on the requested resource ({req.method})")
                route = self._route(req.path)
                is_watch = route is not None and (route.watch or req.flag("watch"))
                failure = self.faults.take_request_failure(route.info.name if route else None)
                if failure is not None:
                    headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
                    msg = "too many requests, please try again later" if failure.code == 429 else "injected failure"
                    raise HTTPError(failure.code, msg, headers=headers)
                if route is None:
                    code, sent = await self._serve_static(conn, req)
                    return True
                if self.faults.is_forbidden(route.info.name):
                    verb = "watch" if is_watch else ("get" if route.name else "list")
                    scope = f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
                    raise HTTPError(
                        403,
                        f'{route.info.name} is forbidden: User "system:serviceaccount:nodewatch:nodewatch" cannot '
                        f'{verb} resource "{route.info.name}" in API group "{route.info.group}" {scope}',
                        details={"group": route.info.group, "kind": route.info.name},
                    )
                if is_watch:
                    code = 200
                    sent = await self._serve_watch(conn, req, route)
                    return not conn.closed
                code, sent = await self._serve_read(conn, req, route)
                return True
            except HTTPError as e:
                code = e.code
                body = status_bytes(e.code, e.message, e.reason, e.details)
                headers = dict(e.headers)
                if e.code == 401:
                    headers["Www-Authenticate"] = 'Bearer realm="kubernetes"'
                await self._send(conn, response_head(e.code, headers, len(body)) + body)
                sent = len(body)
                return True
        finally:
            self._record(req, code, sent, time.monotonic() - began, is_watch)

    def _authenticate(self, req: Request) -> None:
        header = req.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else None
        if token is None and req.path in ("/version", "/healthz", "/livez", "/readyz") and not header:
            return  # anonymous public info, as a real cluster allows
        if not self.auth.check(token):
            raise HTTPError(401, "Unauthorized")

    def _route(self, path: str) -> _Route | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return None
        watch = False
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        namespace = name = sub = ""
        if rest and rest[0] == "namespaces" and len(rest) >= 3:
            namespace, resource = rest[1], rest[2]
            name = rest[3] if len(rest) > 3 else ""
            sub = rest[4] if len(rest) > 4 else ""
            extra = rest[5:]
        elif rest and rest[0] == "namespaces" and len(rest) == 2:
            resource, name, extra = "namespaces", rest[1], []
        else:
            resource = rest[0] if rest else ""
            name = rest[1] if len(rest) > 1 else ""
            sub = rest[2] if len(rest) > 2 else ""
            extra = rest[3:]
        info = RESOURCES.get(resource)
        if info is None or info.group != group or info.version != version or extra:
            raise HTTPError(404, "the server could not find the requested resource", details={})
        if namespace and not info.namespaced:
            raise HTTPError(404, "the server could not find the requested resource", details={})
        if sub and sub != "status":
            raise HTTPError(404, "the server could not find the requested resource", details={})
        return _Route(info, namespace, name, watch, sub)

    async def _serve_static(self, conn: _Conn, req: Request) -> tuple[int, int]:
        path = req.path.rstrip("/") or "/"
        doc: Any
        if path in ("/healthz", "/livez", "/readyz"):
            body = b"ok"
            await self._send(conn, response_head(200, {"Content-Type": "text/plain"}, len(body)) + body)
            return 200, len(body)
        if path == "/version":
            doc = discovery.version_info(self.server_version)
        elif path == "/api":
            doc = discovery.api_versions(f"{self.host}:{self.port}")
        elif path == "/api/v1":
            doc = discovery.api_resource_list("", "v1")
        elif path == "/apis":
            doc = discovery.api_group_list()
        elif path.startswith("/apis/") and path.count("/") == 2:
            doc = discovery.api_group(path.split("/")[2])
        elif path.startswith("/apis/") and path.count("/") == 3:
            _, _, group, version = path.split("/")
            doc = discovery.api_resource_list(group, version)
        else:
            doc = None
        if doc is None:
            raise HTTPError(404, "the server could not find the requested resource", details={})
        body = orjson.dumps(doc)
        await self._send(conn, response_head(200, {}, len(body)) + body)
        return 200, len(body)

    def _predicate(self, req: Request, route: _Route) -> Predicate | None:
        try:
            field_pred = parse_field_selector(route.info.name, req.param("fieldSelector"))
            label_pred = parse_label_selector(req.param("labelSelector"))
        except SelectorError as e:
            raise HTTPError(400, str(e)) from None
        ns_pred = None
        if route.namespace:
            ns = route.namespace
            ns_pred = lambda slim: slim.fields["metadata.namespace"] == ns  # noqa: E731
        if route.name:
            name = route.name
            name_pred = lambda slim: slim.fields["metadata.name"] == name  # noqa: E731
            return combine(ns_pred, name_pred, field_pred, label_pred)
        return combine(ns_pred, field_pred, label_pred)

    async def _serve_read(self, conn: _Conn, req: Request, route: _Route) -> tuple[int, int]:
        info = route.info
        table = wants_table(req.headers.get("accept", "")) and info.name in TABLE_RESOURCES
        if route.name:
            entry = self.store.get(info.name, route.namespace, route.name)
            if entry is None:
                raise HTTPError(
                    404, f'{info.name}{"." + info.group if info.group else ""} "{route.name}" not found',
                    details={"name": route.name, "group": info.group, "kind": info.name},
                )
            if table:
                obj = entry.obj
                body = table_bytes(info, [obj], obj["metadata"]["resourceVersion"], None, req.param("includeObject"),
                                   self._table_now())
            else:
                body = entry.data
            await self._send(conn, response_head(200, {}, len(body)) + body)
            return 200, len(body)
        pred = self._predicate(req, route)
        limit = _int_param(req, "limit", 0)
        token = req.param("continue")
        if token:
            rv, offset = _decode_continue(token)
            entries = self._snapshots.get((info.name, rv))
            if entries is None:
                raise HTTPError(
                    410,
                    "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter, or use the continue token in this response to "
                    "retrieve the remainder of the results. Continuing with the provided token results in an "
                    "inconsistent list - objects that were created, modified, or deleted between the time the first "
                    "chunk was returned and now may show up in the list.",
                    reason="Expired",
                )
        else:
            rv, entries, _ = self.store.snapshot(info.name)
            offset = 0
        items: list[Entry] = []
        i = offset
        n = len(entries)
        while i < n and (not limit or len(items) < limit):
            e = entries[i]
            i += 1
            if pred is None or pred(e.slim):
                items.append(e)
        more = False
        if limit and i < n:
            if pred is None:
                more = True
            else:
                more = any(pred(e.slim) for e in entries[i:])
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if more:
            self._snapshots[(info.name, rv)] = entries
            self._snapshots.move_to_end((info.name, rv))
            while len(self._snapshots) > SNAPSHOT_CACHE:
                self._snapshots.popitem(last=False)
            meta["continue"] = _encode_continue(rv, i)
            if pred is None:
                meta["remainingItemCount"] = n - i
        if table:
            body = table_bytes(info, [e.obj for e in items], str(rv), meta, req.param("includeObject"), self._table_now())
        else:
            head = orjson.dumps({"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta})
            body = head[:-1] + b',"items":[' + b",".join(e.data for e in items) + b"]}"
        await self._send(conn, response_head(200, {}, len(body)) + body)
        return 200, len(body)

    # ---- watch ----------------------------------------------------------------------------------

    async def _serve_watch(self, conn: _Conn, req: Request, route: _Route) -> int:
        info = route.info
        pred = self._predicate(req, route)
        table = wants_table(req.headers.get("accept", "")) and info.name in TABLE_RESOURCES
        bookmarks = req.flag("allowWatchBookmarks")
        timeout = _int_param(req, "timeoutSeconds", 0)
        rv_param = req.param("resourceVersion")
        initial = req.flag("sendInitialEvents") or rv_param in ("", "0")
        if rv_param and not initial:
            try:
                start_rv = int(rv_param)
            except ValueError:
                raise HTTPError(400, f'invalid resource version "{rv_param}"') from None
        await self._send(conn, response_head(200, {}))
        sent = 0
        if self.faults.take_gone():
            return sent + await self._send_gone(conn, 1, self.store.oldest_rv(info.name) + 1)
        initial_lines: list[bytes] = []
        if initial:
            rv_now, entries, cursor = self.store.snapshot(info.name)
            for e in entries:
                if pred is None or pred(e.slim):
                    initial_lines.append(
                        _table_line(info, "ADDED", e.obj, req, self._table_now()) if table else watch_line("ADDED", e.data)
                    )
            if req.flag("sendInitialEvents") and bookmarks:
                initial_lines.append(_bookmark(info, rv_now, initial_end=True))
        else:
            try:
                cursor = self.store.cursor_after(info.name, start_rv)
            except Gone as g:
                return sent + await self._send_gone(conn, g.rv, g.oldest)
        close_after, reset_after = self.faults.stream_limits()
        events_sent = 0
        limits = [n for n in (close_after, reset_after) if n is not None]
        if limits and min(limits) < len(initial_lines):
            del initial_lines[min(limits):]
            await self._send(conn, chunk(b"".join(initial_lines)))
            if close_after is not None and close_after == min(limits):
                self.faults.note("closed_after")
                await self._send(conn, LAST_CHUNK)
                conn.closed = True
            else:
                self.faults.note("reset")
                _abort(conn)
            raise _StreamEnded()
        if initial_lines:
            for i in range(0, len(initial_lines), WATCH_BATCH):
                part = initial_lines[i : i + WATCH_BATCH]
                data = b"".join(part)
                await self._send(conn, chunk(data))
                sent += len(data)
                events_sent += len(part)

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

    async def _stream_changes(self, conn: _Conn, req: Request, info: ResourceInfo, pred: Predicate | None,
                              table: bool, bookmarks: bool, timeout: int, cursor: int, events_sent: int,
                              close_after: int | None, reset_after: int | None, wake: asyncio.Event,
                              sent: int) -> tuple[int, bytes]:
        """Send changes from ``cursor`` until the stream ends; returns (bytes sent, the bytes that end
        the stream cleanly: the last chunk, maybe after an ERROR event)."""
        reset_gen = self.faults.reset_generation
        loop_time = asyncio.get_running_loop().time
        deadline = loop_time() + timeout if timeout > 0 else math.inf
        interval = self.bookmark_interval
        virtual = self.bookmark_clock == "virtual"
        next_bookmark = (self.store.now if virtual else loop_time()) + interval
        while True:
            wake.clear()
            if conn.closed or self._stopping.is_set():
                return sent, b""
            if self.faults.reset_generation != reset_gen:
                self.faults.note("reset")
                _abort(conn)
                raise _StreamEnded()
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
                    raise _StreamEnded()
                if reset_after is not None and events_sent >= reset_after:
                    self.faults.note("reset")
                    _abort(conn)
                    raise _StreamEnded()
                if len(batch) == WATCH_BATCH:
                    continue
            now_t = self.store.now if virtual else loop_time()
            if bookmarks and now_t >= next_bookmark:
                line = _bookmark(info, rv_now)
                await self._send(conn, chunk(line))
                sent += len(line)
                next_bookmark = now_t + interval
            remaining = deadline - loop_time()
            if remaining <= 0:
                return sent, LAST_CHUNK
            wait = remaining
            if bookmarks and not virtual:
                wait = min(wait, max(0.0, next_bookmark - loop_time()))
            if self.faults.reset_generation != reset_gen:
                continue
            try:
                await asyncio.wait_for(wake.wait(), timeout=min(wait, 0.5))
            except asyncio.TimeoutError:
                pass

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
        if faults._oversize:  # noqa: SLF001 - fast path without the lock
            size = faults.take_oversize()
            if size:
                obj = orjson.loads(ch.data)
                obj["metadata"].setdefault("annotations", {})["nodewatch.sim/padding"] = "x" * size
                return watch_line(etype, orjson.dumps(obj))
        if table:
            return _table_line(info, etype, ch.obj, req, self._table_now())
        return ch.line if etype == ch.type else watch_line(etype, ch.data)

    async def _send_lines(self, conn: _Conn, lines: list[bytes]) -> int:
        faults = self.faults
        if faults._truncate and faults.take_truncate():  # noqa: SLF001
            first = lines[0]
            cut = first[: max(1, len(first) // 2)]
            await self._send(conn, chunk(cut) + LAST_CHUNK)
            _abort(conn, rst=False)
            raise _StreamEnded()
        data = b"".join(lines)
        await self._send(conn, chunk(data))
        return len(data)

    async def _send_gone(self, conn: _Conn, rv: int, oldest: int) -> int:
        data = _gone_chunk(rv, oldest)
        await self._send(conn, data)
        return len(data)

    async def _send(self, conn: _Conn, data: bytes) -> None:
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


# ---- helpers ------------------------------------------------------------------------------------


def _abort(conn: _Conn, rst: bool = True) -> None:
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


def _quiet_exceptions(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    exc = context.get("exception")
    if isinstance(exc, (ConnectionError, ssl.SSLError, OSError, asyncio.CancelledError)):
        return
    msg = context.get("message", "")
    if "SSL" in msg or "handshake" in msg.lower():
        return
    loop.default_exception_handler(context)


def _int_param(req: Request, name: str, default: int) -> int:
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


def _encode_continue(rv: int, offset: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "o": offset})).decode()


def _decode_continue(token: str) -> tuple[int, int]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(data["rv"]), int(data["o"])
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise HTTPError(400, "continue key is not valid: incorrect encoded start resourceVersion") from None


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
