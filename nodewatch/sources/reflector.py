"""One resource's list-then-watch loop, in the shape of client-go's reflector.

- List (paged, ``limit``), hand every item over as a listing item, then DELETED for each object
  known before a relist but absent now (so no stale and no duplicate objects), then SYNCED.
- Watch from the list's resourceVersion with bookmarks requested (never relied upon), a jittered
  server ``timeoutSeconds`` and a client read timeout; the resourceVersion is tracked from every
  event, bookmarks included, so a re-watch resumes exactly where the last stream stopped.
- ``410 Gone`` (as an HTTP status or an ERROR event) -> relist. 429 (Retry-After honoured), 5xx,
  refused or reset connections -> exponential backoff with jitter (0.8s..30s, reset after a
  healthy minute), then watch again from the last resourceVersion *without* relisting.
- A stream that sends nothing (no event, no bookmark) for ``stall_timeout`` is dead: reconnect.
- A truncated or garbled JSON line is reported and the stream restarted from the last good
  resourceVersion.

Lines are split and decoded with orjson straight from the urllib3 stream: the official client's
``Watch`` builds model objects (slow) and, with ``deserialize=False``, stops tracking the
resourceVersion.
"""

from __future__ import annotations

import gc
import random
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

import orjson
import urllib3

from .kubeconfig import ApiError, Connection

PAGE_SIZE = 500
BACKOFF_INITIAL = 0.8
BACKOFF_CAP = 30.0
BACKOFF_RESET_AFTER = 60.0
READ_CHUNK = 256 * 1024
QUICK_END = 1.0
"""A stream that ends sooner than this without any event counts as a failure (backoff)."""

Batch = list[tuple[str, str, Any, float, bool]]
"""(resource, type, object, received_at, listing) tuples, as FleetState.apply takes them."""


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = True


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while lists are decoded.

    A list of 65,000 nodes allocates millions of short-lived, acyclic objects; the collector would
    walk the growing state about 80 times for nothing (measured: the 65k-node sync took 20.8 s with
    it, 9.0 s without). Several reflectors list at once, so the pause is reference counted; when
    the last list ends, the collector resumes and what survived (the state) is frozen out of its
    way (``gc.freeze``), so later collections do not walk it again.
    """
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()
                gc.freeze()


@dataclass(frozen=True)

class ResourceSpec:
    """What to watch: the API path, an optional field selector, and the RBAC rule it needs."""

    resource: str
    path: str
    permission: str
    field_selector: str | None = None
    label: str = ""
    """For messages: ``pods on node-7``; defaults to the resource name."""

    @property
    def what(self) -> str:
        return self.label or self.resource


NODES = ResourceSpec("nodes", "/api/v1/nodes", "list/watch on nodes")
LEASES = ResourceSpec("leases", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                      "list/watch on leases.coordination.k8s.io in namespace kube-node-lease")
CSRS = ResourceSpec("certificatesigningrequests", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                    "list/watch on certificatesigningrequests.certificates.k8s.io")


def pods_on(node: str) -> ResourceSpec:
    return ResourceSpec("pods", "/api/v1/pods", "list/watch on pods", f"spec.nodeName={node}", f"pods on {node}")


def events_of(node: str) -> ResourceSpec:
    return ResourceSpec("events", "/api/v1/events", "list/watch on events",
                        f"involvedObject.kind=Node,involvedObject.name={node}", f"events of {node}")


class Gone(Exception):
    """410: the resourceVersion is too old; relist."""


class StreamBroken(Exception):
    """The stream delivered bytes that are not a JSON watch event."""


class Backoff:
    """Exponential backoff with jitter, reset after a healthy period (client-go's shape)."""

    def __init__(self, initial: float = BACKOFF_INITIAL, cap: float = BACKOFF_CAP,
                 reset_after: float = BACKOFF_RESET_AFTER, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.initial, self.cap, self.reset_after = initial, cap, reset_after
        self._rng = rng or random.Random()
        self._clock = clock
        self._failures = 0
        self._healthy_since: float | None = None

    def healthy(self) -> None:
        """A request succeeded; a long enough healthy run resets the backoff."""
        if self._healthy_since is None:
            self._healthy_since = self._clock()

    def next_delay(self) -> float:
        now = self._clock()
        if self._healthy_since is not None and now - self._healthy_since >= self.reset_after:
            self._failures = 0
        self._healthy_since = None
        base = min(self.cap, self.initial * (2 ** self._failures))
        self._failures = min(self._failures + 1, 32)
        return min(self.cap, base * (1.0 + self._rng.random()))  # jitter factor 1.0, like client-go


class Reflector:
    """Runs one resource's loop in a thread; hands batches of events to ``sink``."""

    def __init__(self, conn: Connection, spec: ResourceSpec,
                 sink: Callable[[Batch], None],
                 on_health: Callable[..., None],
                 on_problem: Callable[[str, str], None],
                 *, watch_timeout: float = 300.0, stall_timeout: float = 60.0,
                 page_size: int = PAGE_SIZE, wall: Callable[[], float] = time.time,
                 rng: random.Random | None = None) -> None:
        self.conn = conn
        self.spec = spec
        self.sink = sink
        self.on_health = on_health
        self.on_problem = on_problem
        self.watch_timeout = watch_timeout
        self.stall_timeout = stall_timeout
        self.page_size = page_size
        self.wall = wall
        self._rng = rng or random.Random()
        self.backoff = Backoff(rng=self._rng)
        self.resource_version: str | None = None
        self.known: dict[tuple[str, str], None] = {}
        """Keys (namespace, name) of the objects handed over and not deleted: what a relist reconciles."""
        self.relists = 0
        self.events = 0
        self.connected = False
        self.forbidden = False
        """The last failure was 403: retrying will not help until someone changes the RBAC rules."""
        self.down_since: float | None = None
        self._need_list = True
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread: threading.Thread | None = None
        self._life = threading.Lock()
        """Makes start() and stop() atomic towards each other, so a stop can come at any moment."""

    # --- thread ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop's thread; does nothing once stopped (a stop may come before the start)."""
        with self._life:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self.run, name=f"watch {self.spec.what}", daemon=True)
            self._thread.start()

    def stop(self, join: bool = True) -> None:
        """Stop the loop; safe before start, during start (it waits for it) and more than once."""
        with self._life:
            self._stop.set()
            thread = self._thread
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()  # unblocks a read in the thread
            except Exception:  # noqa: BLE001
                pass
        if join and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def alive(self) -> bool:
        """The loop's thread is running."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def listed(self) -> bool:
        """The resource has been listed at least once: what it holds is in the sink."""
        return self.relists > 0

    @property
    def watching(self) -> bool:
        """A watch stream is open right now."""
        return self._resp is not None

    def run(self) -> None:
        self._need_list = True
        while not self._stop.is_set():
            try:
                if self._need_list:
                    self._list()
                    self._need_list = False
                started = time.monotonic()
                got = self._watch()
                if not got and time.monotonic() - started < QUICK_END:
                    self._sleep(self.backoff.next_delay())
            except Gone:
                self._need_list = True
                self._health(synced=False, last_error="410 Gone: resourceVersion too old, relisting")
            except StreamBroken as exc:
                self.on_problem(self.spec.what, f"{exc}; watching again from resourceVersion "
                                                f"{self.resource_version}")
                self._health(last_error=str(exc))
            except ApiError as exc:
                if self._stop.is_set():
                    return
                self._failed(exc)
            except Exception as exc:  # noqa: BLE001 - never let the thread die
                if self._stop.is_set():
                    return
                self._failed(ApiError(0, f"{type(exc).__name__}: {str(exc)[:200]}"))

    def _failed(self, exc: ApiError) -> None:
        delay = self.backoff.next_delay()
        if exc.status == 403:
            self._disconnected(f"forbidden: needs {self.spec.permission}", forbidden=True)
            self._sleep(max(delay, 5.0))
            return
        if exc.status == 401:
            self._disconnected(f"{exc.message}; reloading credentials")
            if self.conn.reload_credentials():
                self._sleep(min(delay, 1.0))
                return
        elif exc.status == 410:  # as an HTTP status: on a watch, or an expired continue token
            self._need_list = True
            self._health(synced=False, last_error="410 Gone: resourceVersion too old, relisting")
            return
        else:
            self._disconnected(str(exc))
        if exc.status == 429 and exc.retry_after is not None:
            delay = max(delay, min(exc.retry_after, BACKOFF_CAP * 2))
        self._sleep(delay)

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    # --- health -----------------------------------------------------------------------------------

    def _health(self, **changes: Any) -> None:
        self.on_health(self, **changes)

    def _connected(self) -> None:
        self.backoff.healthy()
        if not self.connected:
            self.connected = True
            self.forbidden = False
            self.down_since = None
            self._health(connected=True, down_since=None, forbidden=False, last_error="")

    def _disconnected(self, error: str, forbidden: bool = False) -> None:
        if self.connected or self.down_since is None:
            self.down_since = self.wall()
        self.connected = False
        self.forbidden = forbidden
        self._health(connected=False, down_since=self.down_since, last_error=error[:300], forbidden=forbidden)

    # --- list -------------------------------------------------------------------------------------

    def _query(self) -> dict[str, Any]:
        q: dict[str, Any] = {}
        if self.spec.field_selector:
            q["fieldSelector"] = self.spec.field_selector
        return q

    def _list(self) -> None:
        with gc_paused():
            self._list_pages()

    def _list_pages(self) -> None:
        seen: dict[tuple[str, str], None] = {}
        cont: str | None = None
        rv = ""
        first_page = True
        while True:
            q = self._query()
            q["limit"] = self.page_size
            if cont:
                q["continue"] = cont
            resp = self.conn.get(self.spec.path, q, timeout=(10.0, max(30.0, self.stall_timeout)))
            try:
                data = resp.read()
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise ApiError(0, f"list interrupted: {type(exc).__name__}") from None
            finally:
                resp.release_conn()
            if first_page:
                self._connected()
                first_page = False
            try:
                page = orjson.loads(data)
            except orjson.JSONDecodeError:
                raise ApiError(0, f"list of {self.spec.what}: answer is not JSON") from None
            if not isinstance(page, dict):
                raise ApiError(0, f"list of {self.spec.what}: answer is not an object")
            now = self.wall()
            batch: Batch = []
            for item in page.get("items") or ():
                key = _key(item)
                if key is None:
                    continue
                seen[key] = None
                batch.append((self.spec.resource, "ADDED", item, now, True))
            if batch:
                self.sink(batch)
            meta = page.get("metadata") if isinstance(page.get("metadata"), dict) else {}
            rv = str(meta.get("resourceVersion") or rv)
            cont = meta.get("continue") or None
            if not cont or self._stop.is_set():
                break
        now = self.wall()
        gone = [k for k in self.known if k not in seen]
        tail: Batch = [(self.spec.resource, "DELETED", deleted_stub(k), now, False) for k in gone]
        tail.append((self.spec.resource, "SYNCED", None, now, False))
        self.known = seen
        self.sink(tail)
        self.relists += 1
        self.resource_version = rv
        self._health(synced=True, relists=self.relists - 1, last_error="")

    # --- watch ------------------------------------------------------------------------------------

    def _watch(self) -> bool:
        """One watch stream until it ends. True if it delivered anything."""
        q = self._query()
        q.update({"watch": "true", "allowWatchBookmarks": "true",
                  "timeoutSeconds": int(self.watch_timeout * (1.0 + self._rng.random()))})
        if self.resource_version:
            q["resourceVersion"] = self.resource_version
        resp = self.conn.get(self.spec.path, q, timeout=(10.0, self.stall_timeout))
        self._resp = resp
        got = False
        try:
            self._connected()
            buf = b""
            while not self._stop.is_set():
                try:
                    chunk = resp.read1(READ_CHUNK)
                except urllib3.exceptions.ReadTimeoutError:
                    raise ApiError(0, f"no data for {self.stall_timeout:g}s (no event, no bookmark): "
                                      "stream presumed dead, reconnecting") from None
                except (urllib3.exceptions.ProtocolError, urllib3.exceptions.HTTPError, OSError) as exc:
                    if self._stop.is_set():
                        return got
                    raise ApiError(0, f"stream broken: {_short(exc)}") from None
                if not chunk:
                    if buf.strip():
                        raise StreamBroken(f"{self.spec.what}: truncated JSON line at the end of the stream "
                                           f"({len(buf)} bytes)")
                    return got
                buf += chunk
                if b"\n" not in chunk:
                    continue
                lines = buf.split(b"\n")
                buf = lines.pop()
                batch = self._decode(lines)
                if batch:
                    got = True
                    self.sink(batch)
        finally:
            self._resp = None
            try:
                resp.release_conn()
            except Exception:  # noqa: BLE001
                pass
        return got

    def _decode(self, lines: list[bytes]) -> Batch:
        now = self.wall()
        batch: Batch = []
        resource = self.spec.resource
        known = self.known
        try:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    ev = orjson.loads(line)
                    etype = ev["type"]
                    obj = ev["object"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    raise StreamBroken(f"{self.spec.what}: garbled or truncated JSON line in the watch stream "
                                       f"({len(line)} bytes)") from None
                if etype == "ERROR":
                    code = obj.get("code") if isinstance(obj, dict) else None
                    if code == 410:
                        raise Gone()
                    msg = obj.get("message") if isinstance(obj, dict) else None
                    raise ApiError(code if isinstance(code, int) else 0, str(msg or "watch error")[:300])
                meta = obj.get("metadata") if isinstance(obj, dict) else None
                if isinstance(meta, dict):
                    rv = meta.get("resourceVersion")
                    if rv:
                        self.resource_version = str(rv)
                if etype == "BOOKMARK":
                    batch.append((resource, "BOOKMARK", obj, now, False))
                    continue
                key = _key(obj)
                if key is None:
                    continue
                if etype == "DELETED":
                    known.pop(key, None)
                else:
                    known[key] = None
                batch.append((resource, etype, obj, now, False))
                self.events += 1
        except BaseException:
            if batch:
                self.sink(batch)  # what came before the bad line is good
            raise
        return batch


def _key(obj: Any) -> tuple[str, str] | None:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    ns = meta.get("namespace")
    return (ns if isinstance(ns, str) else "", name)


def deleted_stub(key: tuple[str, str]) -> dict:
    """The object of a DELETED event nodewatch makes up for a key it stops knowing (name, namespace)."""
    meta = {"name": key[1]}
    if key[0]:
        meta["namespace"] = key[0]
    return {"metadata": meta}


def _short(exc: BaseException) -> str:
    text = str(exc)
    if "Connection reset" in text or "ConnectionResetError" in text:
        return "connection reset"
    return f"{type(exc).__name__}: {text[:160]}"
