"""One resource's list-then-watch loop, in the shape of client-go's reflector.

- List (paged, ``limit``), hand every item over as a listing item, then DELETED for each object
  known before a relist but absent now (so no stale and no duplicate objects), then SYNCED.
- Watch from the list's resourceVersion with bookmarks requested (never relied upon), a jittered
  server ``timeoutSeconds`` (5-10 min) and a client read timeout past it: the server ends every
  watch, so only a stream dead without a word is cut by the client (a quiet one is not: real
  servers bookmark every ~60 s, 1.20 never on an unchanged resource); TCP keepalive finds a dead
  peer sooner. The resourceVersion is tracked from every event, bookmarks included, so a re-watch
  resumes exactly where the last stream stopped.
- Streaming lists where the server offers them; every answer that says it does not (422, an
  ERROR event naming RequestWatchProgress, a stream that is not one) falls back to a paged list at
  once, without a disconnect or a backoff, and is remembered for the connection
  (``sources/watchlist.py``).
- ``410 Gone`` (as an HTTP status or an ERROR event) -> relist. 429 (Retry-After honoured), 5xx,
  refused or reset connections -> exponential backoff with jitter (0.8s..30s, reset after a
  healthy minute), then watch again from the last resourceVersion *without* relisting.
- A stream that sends nothing at all past its ``timeoutSeconds`` (or for ``stall_timeout``, when
  one is given) is dead: reconnect.
- A truncated or garbled JSON line is reported and the stream restarted from the last good
  resourceVersion.

Lines are split and decoded with orjson straight from the urllib3 stream: the official client's
``Watch`` builds model objects (slow) and, with ``deserialize=False``, stops tracking the
resourceVersion.

Why one file of ~600 lines: list, streaming list, watch, resume, relist and backoff are one state
machine around one resourceVersion and one set of known keys; split, each part would reach into
the others' state. The pieces that stand alone live elsewhere (decoding in ``core/wire.py``,
connections and errors in ``sources/kubeconfig.py``).
"""

from __future__ import annotations

import gc
import math
import random
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

import orjson
import urllib3

from ..core.evidence import StreamFrontier
from ..core.wire import DECODERS, TypedDecoder, WireError, watched_write_time
from . import list_worker
from .chunked import BodyReader, keep_alive, set_read_timeout
from .kubeconfig import ApiError, Connection, api_error
from .watchlist import REFUSED_STATUS, StreamingOffer, lasting_error

PAGE_SIZE = 500
BACKOFF_INITIAL = 0.8
BACKOFF_CAP = 30.0
BACKOFF_RESET_AFTER = 60.0
READ_CHUNK = 256 * 1024
WATCH_LIST_REFUSED = REFUSED_STATUS
"""Answers to a ``sendInitialEvents`` watch that mean "not offered here": a 1.20 server rejects
``resourceVersionMatch`` on a watch (422 Invalid), a 1.27+ server without the WatchList feature
rejects ``sendInitialEvents`` (422 Invalid); then paged lists, as client-go falls back."""
READ_MARGIN = 30.0
"""A watch's client read timeout is its ``timeoutSeconds`` plus this: the server ends the stream at
``timeoutSeconds`` (with a bookmark 2 s before, since 1.16); no byte for longer means no server."""
INITIAL_SILENCE = 10.0
"""A streaming list silent this long before its initial events end is not one: the server ignored
``sendInitialEvents`` (a real one sends the initial events and the end bookmark in one go, after at
most ~3 s of waiting for a fresh watch cache)."""
LIST_READ_TIMEOUT = 60.0
"""The read timeout of a paged list's page."""
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the BOOKMARK that ends a streaming list's initial events."""
WORKER_RESOURCES = frozenset({"nodes"})
"""Resources whose streaming list a child process reads (``sources/list_worker``): the big one.
(Leases are ~0.5 KB each and the first frame waits for them: a child's start would only delay it.)"""
WORKER_MIN = 2_000
"""A list expected to hold fewer objects than this is read in this process: a relist (known from
the last list) and a first list whose size was foretold (``expected``: the Nodes by the Lease list
that came before them). Starting the child costs more than it saves there: a 3-node ``status``
took 0.44 s with the child and 0.32 s without (farm-bench, 8 pairs), and the child, running below
the dashboard's priority, starts late on a busy machine (a ``status --wait 3`` blamed the API server
for a Node list its own child had not begun)."""
FRONTIER_EVERY = 0.05
"""At most this often (seconds) the reader looks whether it has read its stream to the end
(``chunked.BodyReader.drained``, a few system calls) for the stream's frontier (``core/evidence.py``):
a busy lease stream (6,500 renewals/s at 65k) is read in thousands of blocks a second."""
QUICK_END = 1.0
"""A stream that ends sooner than this without any event counts as a failure (backoff)."""

Batch = list[tuple[str, str, Any, float, bool]]
"""(resource, type, object, received_at, listing) tuples, as FleetState.apply takes them."""
Key = str | tuple[str, str]
"""What a reflector knows an object by (``Reflector.key``): a name, or (namespace, name)."""


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = True


def pause_gc() -> None:
    """Pause the cyclic garbage collector while a list is decoded (see ``gc_paused``)."""
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1


def resume_gc() -> None:
    """Undo one ``pause_gc``; the last one resumes the collector and freezes what survived."""
    global _gc_holders
    with _gc_lock:
        _gc_holders -= 1
        if _gc_holders == 0 and _gc_was_enabled:
            gc.enable()
            gc.freeze()


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while lists are decoded.

    A list of 65,000 nodes allocates millions of short-lived, acyclic objects; the collector would
    walk the growing state about 80 times for nothing (measured: the 65k-node sync took 20.8 s with
    it, 9.0 s without). Several reflectors list at once, so the pause is reference counted; when
    the last list ends, the collector resumes and what survived (the state) is frozen out of its
    way (``gc.freeze``), so later collections do not walk it again.
    """
    pause_gc()
    try:
        yield
    finally:
        resume_gc()


@dataclass(frozen=True)

class ResourceSpec:
    """What to watch: the API path, an optional field selector, and the RBAC rule it needs."""

    resource: str
    path: str
    permission: str
    field_selector: str | None = None
    label: str = ""
    """For messages: ``pods on node-7``; defaults to the resource name."""
    namespace: str = ""
    """The one namespace ``path`` lists, if it lists one; "" for a cluster-scoped resource or all
    namespaces. An object there is known by its name alone (``Reflector.key``)."""

    @property
    def what(self) -> str:
        return self.label or self.resource


NODES = ResourceSpec("nodes", "/api/v1/nodes", "list/watch on nodes")
LEASES = ResourceSpec("leases", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                      "list/watch on leases.coordination.k8s.io in namespace kube-node-lease",
                      namespace="kube-node-lease")
CSRS = ResourceSpec("certificatesigningrequests", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                    "list/watch on certificatesigningrequests.certificates.k8s.io")


def pods_on(node: str) -> ResourceSpec:
    return ResourceSpec("pods", "/api/v1/pods", "list/watch on pods", f"spec.nodeName={node}", f"pods on {node}")


REGISTRATIONS = ResourceSpec("events", "/api/v1/events", "list/watch on events",
                             "involvedObject.kind=Node,reason=RegisteredNode", "node registrations")
"""The node controller's ``RegisteredNode`` events, fleet-wide: a controller manager that starts (a
restart, a new leader) writes one for every node and counts each node's grace from there
(``Store.registered``). Quiet but for such starts and new nodes; events last an hour."""


def events_of(node: str) -> ResourceSpec:
    return ResourceSpec("events", "/api/v1/events", "list/watch on events",
                        f"involvedObject.kind=Node,involvedObject.name={node}", f"events of {node}")


class Gone(Exception):
    """410: the resourceVersion is too old; relist. ``initial``: said by a streaming list."""

    def __init__(self, initial: bool = False) -> None:
        super().__init__("410 Gone")
        self.initial = initial


class WatchListRefused(Exception):
    """The server does not offer a streaming list (``sendInitialEvents``): use a paged list.
    ``lasting``: it never will (remembered, ``StreamingOffer``); else only this list is paged."""

    def __init__(self, why: str, lasting: bool = True) -> None:
        super().__init__(why)
        self.lasting = lasting


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
                 *, watch_timeout: float = 300.0, stall_timeout: float | None = None,
                 page_size: int = PAGE_SIZE, wall: Callable[[], float] = time.time,
                 rng: random.Random | None = None, typed: bool = True, watch_list: bool = True,
                 in_worker: bool = True, offer: StreamingOffer | None = None,
                 initial_silence: float | None = None, frontier: StreamFrontier | None = None,
                 after: tuple[threading.Event, float] | None = None,
                 expected: Callable[[], int | None] | None = None,
                 lane: Callable[[list[Any], float, bytes | memoryview], None] | None = None) -> None:
        """``typed``: hand nodes and leases over as records decoded by ``core.wire`` (fast); False:
        as parsed JSON dicts, for a sink that needs the objects themselves (a recorder).
        ``watch_list``: list through a streaming list (a watch with ``sendInitialEvents``) where
        the server offers it; False: paged lists only. ``in_worker``: the Nodes' streaming list
        is read and decoded by a child process (``sources/list_worker``) where one can be started.
        ``watch_timeout``: the server-side ``timeoutSeconds`` is drawn from [it, twice it).
        ``stall_timeout``: None (the default): a watch is cut by the client only when silent past
        its ``timeoutSeconds`` plus ``READ_MARGIN``; a number: after that many silent seconds.
        ``offer``: what the server answered to streaming lists, shared by the connection's
        reflectors (``sources/watchlist``). ``initial_silence``: None for ``INITIAL_SILENCE``.
        ``frontier``: told how far in time the stream has been read and applied (the lease
        stream's, ``core/evidence.py``): when a watch block was applied and nothing was left to
        read, and while the reader waits on an empty stream. ``after``: (an event, seconds): the
        first list waits for the event, at most that long (the Nodes for the Leases: ``LiveSource``).
        ``expected``: how many objects the first list will likely hold, None when unknown (the
        Nodes: as many as the Lease list held); a list expected to be small is read here.
        ``lane``: the synced watch's typed structs go there in one call per read, with the read's
        lines, instead of a batch to ``sink`` (the Leases: ``FleetState.apply_lease_watch``, and a
        recorder's ``write_lease_watch``)."""
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
        self.decoder: TypedDecoder | None = DECODERS.get(spec.resource) if typed else None
        self._lane_decoder: TypedDecoder | None = DECODERS.get(spec.resource) if lane is not None else None
        """The lane's decoder: a recording source has one too (its lists and other events are dicts)."""
        self.lane = lane if self._lane_decoder is not None else None
        self.backoff = Backoff(rng=self._rng)
        self.resource_version: str | None = None
        self.in_worker = in_worker
        self._streaming = watch_list
        self.offer = offer or StreamingOffer()
        self._initial_silence = initial_silence
        self.frontier = frontier
        self._frontier_checked = -math.inf
        self._after = after
        self._expected = expected
        self._rv_unavailable = False
        """The last resourceVersion was refused by a streaming list (410 or too large): the next
        one asks for the most recent state (client-go's ``isLastSyncResourceVersionUnavailable``)."""
        self._initial: dict[Key, None] | None = None
        """Keys seen so far while a streaming list sends its initial events; None outside one."""
        self._paged_next = False
        """A streaming list ended before its initial events did: the next list is a paged one
        (client-go's fallback too: a list that always breaks halfway must still make progress)."""
        self.known: dict[Key, None] = {}
        """Keys (``key``) of the objects handed over and not deleted: what a relist reconciles."""
        self.relists = 0
        self.lists_in_worker = 0
        """Lists whose initial events a child process read (``sources/list_worker``)."""
        self._worker: list_worker.ListWorker | None = None
        """The child process reading the list now, if one is."""
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
    def watch_list(self) -> bool | None:
        """Streaming lists: None until one worked on this server, True once one did, False when
        refused (paged lists)."""
        if not self._streaming or self.offer.refused:
            return False
        return True if self.offer.offered else None

    def _streams_now(self) -> bool:
        """Is the next list a streaming one?"""
        return self._streaming and not self._paged_next and self.offer.wanted()

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
        if self._after is not None:
            event, at_most = self._after
            deadline = time.monotonic() + at_most
            while not (event.is_set() or self._stop.is_set()) and time.monotonic() < deadline:
                event.wait(min(0.1, max(0.0, deadline - time.monotonic())))  # (a stop ends it within 0.1 s)
        while not self._stop.is_set():
            try:
                if self._need_list and not self._streams_now():
                    self._paged_next = False
                    self._list()
                    self._need_list = False
                started = time.monotonic()
                got = self._watch(initial=self._need_list)
                if not got and time.monotonic() - started < QUICK_END:
                    self._sleep(self.backoff.next_delay())
            except WatchListRefused as exc:
                # Not offered here (or not this time): a paged list at once, no backoff, no
                # disconnect; a lasting refusal is remembered for the connection's streams.
                if exc.lasting:
                    self.offer.refuse(str(exc))
                self._paged_next = True
            except Gone as exc:
                self._need_list = True
                if exc.initial:  # a streaming list's resourceVersion: stream again, for the latest
                    self._paged_next = False
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
        seen: dict[Key, None] = {}
        cont: str | None = None
        rv = ""
        first_page = True
        while True:
            q = self._query()
            q["limit"] = self.page_size
            if cont:
                q["continue"] = cont
            read = LIST_READ_TIMEOUT if self.stall_timeout is None else max(30.0, self.stall_timeout)
            resp = self.conn.get(self.spec.path, q, timeout=(10.0, read))
            try:
                data = resp.read()
                _count(self.conn, len(data))
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise ApiError(0, f"list interrupted: {type(exc).__name__}") from None
            finally:
                resp.release_conn()
            if first_page:
                self._connected()
                first_page = False
            batch, page_rv, cont = self._decode_page(data, seen)
            if batch:
                self.sink(batch)
            rv = page_rv or rv
            if not cont or self._stop.is_set():
                break
        self.resource_version = rv
        self._finish_list(seen, self.wall(), [])

    def _decode_page(self, data: bytes, seen: dict[Key, None]) -> tuple[Batch, str, str | None]:
        """One list page: (its items as listing ADDED events, its resourceVersion, its continue
        token); every item's key goes into ``seen``."""
        resource = self.spec.resource
        if self.decoder is not None:
            try:
                records, rv, cont = self.decoder.decode_list(data)
            except WireError:
                pass  # an unexpected type somewhere: the forgiving dict path below reads it
            else:
                now = self.wall()
                batch: Batch = []
                for rec in records:
                    seen[self._record_key(rec)] = None
                    batch.append((resource, "ADDED", rec, now, True))
                return batch, rv, cont
        try:
            page = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ApiError(0, f"list of {self.spec.what}: answer is not JSON") from None
        if not isinstance(page, dict):
            raise ApiError(0, f"list of {self.spec.what}: answer is not an object")
        now = self.wall()
        batch = []
        for item in page.get("items") or ():
            key = self._dict_key(item)
            if key is None:
                continue
            seen[key] = None
            batch.append((resource, "ADDED", item, now, True))
        meta = page.get("metadata") if isinstance(page.get("metadata"), dict) else {}
        return batch, str(meta.get("resourceVersion") or ""), meta.get("continue") or None

    # --- watch ------------------------------------------------------------------------------------

    def _watch(self, initial: bool = False) -> bool:
        """One watch stream until it ends. True if it delivered anything.

        ``initial``: a streaming list (Kubernetes 1.27+): the server first sends every object as
        ADDED, then a BOOKMARK annotated ``k8s.io/initial-events-end``; from there on the same
        stream is an ordinary watch. What the server sends before that bookmark is handed over as
        listing items, and the bookmark ends the list as the last page of a paged list does.
        Raises ``WatchListRefused`` when the server does not offer it. The Nodes' streaming list
        is read in a child process where one can be started (``_list_in_worker``).
        """
        q = self._query()
        timeout_seconds = int(self.watch_timeout * (1.0 + self._rng.random()))
        q.update({"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": timeout_seconds})
        read_timeout = self._read_timeout(timeout_seconds)
        silence = INITIAL_SILENCE if self._initial_silence is None else self._initial_silence
        first_read = min(read_timeout, silence) if initial else read_timeout
        if initial:
            q.update({"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"})
            if self.resource_version and not self._rv_unavailable:
                # A relist (after 410 on the watch): not older than what was seen, served from the
                # watch cache at once (client-go's case 2). The first list names none: a
                # consistent read (case 1), as fresh as a quorum read of etcd.
                q["resourceVersion"] = self.resource_version
            if self._worker_wanted():
                got = self._list_in_worker(q, first_read)
                if got is not None or self._stop.is_set():
                    return bool(got)
        elif self.resource_version:
            q["resourceVersion"] = self.resource_version
        try:
            resp = self.conn.get(self.spec.path, q, timeout=(10.0, first_read), stream=True)
        except ApiError as exc:
            if initial and exc.status in WATCH_LIST_REFUSED:
                raise WatchListRefused(str(exc)) from None
            if initial and exc.status == 410:
                self._rv_unavailable = True
                raise Gone(initial=True) from None
            raise
        self._resp = resp
        keep_alive(resp)
        got = False
        if initial:
            self._begin_initial()
        ended = False
        body = BodyReader(resp, READ_CHUNK)
        reading = first_read
        try:
            self._connected()
            buf = bytearray()
            while not self._stop.is_set():
                try:
                    chunk = body.read()
                    _count(self.conn, len(chunk))
                    if self.frontier is not None:
                        self.frontier.idle(None)
                except urllib3.exceptions.ReadTimeoutError:
                    if self._initial is not None:
                        raise self._silent(reading) from None
                    raise ApiError(0, f"no data for {reading:g}s (no event, no bookmark): "
                                      "stream presumed dead, reconnecting") from None
                except (urllib3.exceptions.ProtocolError, urllib3.exceptions.HTTPError, OSError) as exc:
                    if self._stop.is_set():
                        return got
                    raise ApiError(0, f"stream broken: {_short(exc)}") from None
                if not chunk:
                    ended = True
                    if buf.strip():
                        raise StreamBroken(f"{self.spec.what}: truncated JSON line at the end of the stream "
                                           f"({len(buf)} bytes)")
                    return got
                buf += chunk
                if b"\n" not in chunk:
                    continue
                cut = buf.rfind(b"\n") + 1
                with memoryview(buf) as view:
                    if self.take_block(view[:cut]):
                        got = True
                del buf[:cut]
                if reading != read_timeout and self._initial is None:
                    set_read_timeout(resp, read_timeout)  # the list is in: a watch from here on
                    reading = read_timeout
                if self.frontier is not None and self._initial is None:
                    self._mark_frontier(body)
        finally:
            if self.frontier is not None:
                self.frontier.idle(None)
            self._end_stream()
            close = not ended or body.direct
            if close:
                # A stream left before its end (a stop, an error, a stop that came while the
                # request was on its way) is closed, never handed back to the pool: the server
                # would go on writing to a connection the next request reuses, and would not see
                # this watch end. So is one whose framing ``BodyReader`` read: urllib3 does not
                # know that its body ended.
                try:
                    resp.shutdown()
                except Exception:  # noqa: BLE001
                    pass
            try:
                if close:
                    resp.close()
                resp.release_conn()
            except Exception:  # noqa: BLE001
                pass
        return got

    def _mark_frontier(self, body: BodyReader) -> None:
        """After a block of the watch was applied: if nothing is left to read, the stream is read
        to its end now (``StreamFrontier.caught_up``), and the next read waits on an empty stream
        (``idle``, until it returns). Looked at most every ``FRONTIER_EVERY``; a body this process
        cannot look into leaves the frontier untracked (judged by the clock, as before)."""
        frontier = self.frontier
        assert frontier is not None
        tick = time.monotonic()
        if tick - self._frontier_checked < FRONTIER_EVERY:
            return
        self._frontier_checked = tick
        drained = body.drained()
        if drained is None:
            frontier.untracked()
        elif drained:
            at = self.wall()
            frontier.caught_up(at)
            frontier.idle(at)

    def _read_timeout(self, timeout_seconds: int) -> float:
        """How long a watch may be silent before the client calls it dead: past the end the server
        itself gives it, or ``stall_timeout`` when one was given."""
        if self.stall_timeout is not None:
            return self.stall_timeout
        return timeout_seconds + READ_MARGIN

    def _silent(self, seconds: float) -> WatchListRefused:
        return WatchListRefused(f"no end of the initial events after {seconds:g}s of silence: the server "
                                "ignores sendInitialEvents")

    def _begin_initial(self) -> None:
        self._initial = {}
        pause_gc()

    def _end_stream(self) -> None:
        """A stream is over: if its initial events were not complete, the next list is a paged one
        (which also reconciles the objects this one handed over: their keys are known now)."""
        if self._initial is not None:  # the stream ended before its initial events did
            self.known.update(self._initial)
            self._initial = None
            self._paged_next = True
            resume_gc()
        self._resp = None

    def _worker_wanted(self) -> bool:
        """A child process for this list: Nodes, typed, and a fleet not known to be small (by the
        last list, or the first list's ``expected`` size; unknown: a child)."""
        expected = len(self.known) if self.known else (self._expected() if self._expected else None)
        return (self.in_worker and self.decoder is not None and self.spec.resource in WORKER_RESOURCES
                and (expected is None or expected >= WORKER_MIN) and list_worker.enabled())

    def _list_in_worker(self, query: dict[str, Any], read_timeout: float) -> bool | None:
        """The streaming list read and decoded by a child process (``sources/list_worker``); this
        thread hands what it sends over as ``_watch`` hands over what it reads. After the initial
        events the child stops and the next ``_watch`` goes on from the bookmark's
        resourceVersion in this process. A server that does not offer streaming lists: raises
        ``WatchListRefused`` as ``_watch`` does. None (nothing done, do it here) when the child
        cannot be started or the server answers anything else but 2xx: the request made here then
        meets the same answer and deals with it as always (401 reloads the credentials, a
        permanent failure is kept on the connection)."""
        made = self.conn.worker_request(self.spec.path, query)
        if made is None:
            return None
        url, headers, pool = made
        request = list_worker.Request(url=url, headers=headers, pool=pool, resource=self.spec.resource,
                                      connect_timeout=10.0, read_timeout=read_timeout, read_chunk=READ_CHUNK)
        try:
            worker = list_worker.ListWorker(request)
        except list_worker.Busy:
            return None
        except list_worker.WorkerFailed as exc:
            self._worker_unavailable(str(exc))
            return None
        with self._life:
            if self._stop.is_set():
                worker.close()
                return False
            self._resp = self._worker = worker  # stop() shuts it down
        got = False
        try:
            frames = worker.frames()
            try:
                first = next(frames, ("error", "no answer"))
            except list_worker.WorkerFailed as exc:
                self._worker_unavailable(str(exc))
                return None
            if first[0] == "http":
                err = api_error(*first[1:])
                if err.status in WATCH_LIST_REFUSED:
                    raise WatchListRefused(str(err))
                return None
            if first[0] != "ok":
                return None
            self._connected()
            self._begin_initial()
            for frame in frames:
                kind = frame[0]
                if kind == "events":
                    batch = self._typed_batch(frame[1])
                elif kind == "lines":
                    batch = self._decode(bytes(frame[1]).split(b"\n"))
                elif kind == "silent":  # its read timed out before the initial events ended
                    raise self._silent(read_timeout)
                elif kind == "error":
                    if self._stop.is_set():
                        return got
                    raise ApiError(0, f"stream broken: {frame[1]}")
                else:  # "end": the body ended before the initial events did
                    return got
                if batch:
                    got = True
                    self.sink(batch)
                if self._initial is None:  # the bookmark that ends the list: the child's work is done
                    return True
            return got
        except list_worker.WorkerFailed as exc:
            if self._stop.is_set():
                return got
            raise ApiError(0, f"stream broken: {exc}") from None
        finally:
            self._end_stream()
            self._worker = None
            worker.close()

    def _worker_unavailable(self, why: str) -> None:
        """The child process cannot do it here: say so once, and list in this process from now on."""
        self.in_worker = False
        self.on_problem(self.spec.what, f"{why}; listing in the dashboard's own process")

    def take_block(self, block: memoryview) -> bool:
        """Whole lines of the stream into the state: the synced Lease watch through ``lane`` (its
        typed structs applied in one call), anything else decoded into a batch for ``sink``; the
        frontier told the newest write applied. True when an event was handed over."""
        lane = self.lane
        if lane is not None and self._initial is None and self._lane_decoder is not None:
            try:
                events = self._lane_decoder.decode_watch(block)
            except WireError:
                pass  # a bookmark, an ERROR or an odd object in the block: the general way below
            else:
                now = self.wall()
                taken = self._lane_books(events)
                if taken:
                    lane(events, now, block)
                    if self.frontier is not None:
                        _lane_written(self.frontier, events, now)
                return taken
        batch = self._decode_block(block)
        if batch:
            self.sink(batch)
            if self.frontier is not None:
                _written(self.frontier, batch)
        return bool(batch)

    def _lane_books(self, events: list[Any]) -> bool:
        """What ``_hand_over`` keeps of each event (a watch's, never a list's) for the lane's
        structs: the known keys, the last resourceVersion, the count. False: no event has a name
        (nothing to hand over)."""
        known = self.known
        ns = self.spec.namespace
        taken = 0
        for ev in events:
            meta = ev.object.metadata
            if meta is None:
                continue
            rv = meta.resourceVersion
            if rv:
                self.resource_version = rv
            name = meta.name
            if not name:
                continue
            namespace = meta.namespace or ""
            key = name if namespace == ns else (namespace, name)
            if ev.type == "DELETED":
                known.pop(key, None)
            else:
                known[key] = None
            taken += 1
        self.events += taken
        return taken > 0

    def _decode_block(self, block: memoryview) -> Batch:
        """Whole lines of a watch stream: typed in one call when every line is an object event
        that fits the types (the bulk of a list or of a busy stream), else line by line."""
        decoder = self.decoder
        if decoder is not None:
            try:
                events = decoder.decode_events(block)
            except WireError:
                pass  # a bookmark, an ERROR or an odd object in the block: line by line below
            else:
                return self._typed_batch(events)
        return self._decode(bytes(block).split(b"\n"))

    def _typed_batch(self, events: list[tuple[str, Any, str]]) -> Batch:
        """Typed events (type, record, resourceVersion) handed over, in order."""
        now = self.wall()
        batch: Batch = []
        for etype, rec, rv in events:
            if rv:
                self.resource_version = rv
            if rec is not None:
                self._hand_over(etype, rec, self._record_key(rec), now, batch)
        return batch

    def _decode(self, lines: list[bytes]) -> Batch:
        now = self.wall()
        batch: Batch = []
        try:
            for line in lines:
                if line.strip():
                    self._read_line(line, now, batch)
        except BaseException:
            if batch:
                self.sink(batch)  # what came before the bad line is good
            raise
        return batch

    def _read_line(self, line: bytes, now: float, batch: Batch) -> None:
        """One watch line into ``batch``: typed when the decoder can, else as a dict."""
        resource = self.spec.resource
        obj: Any
        if self.decoder is not None:
            try:
                etype, obj, rv = self.decoder.decode_event(line)
            except WireError:
                pass  # ERROR, BOOKMARK or an unexpected type: read as a dict below
            else:
                if rv:
                    self.resource_version = rv
                if obj is not None:
                    self._hand_over(etype, obj, self._record_key(obj), now, batch)
                return
        try:
            ev = orjson.loads(line)
            etype = ev["type"]
            obj = ev["object"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise StreamBroken(f"{self.spec.what}: garbled or truncated JSON line in the watch stream "
                               f"({len(line)} bytes)") from None
        if etype == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            initial = self._initial is not None
            if code == 410:
                if initial:
                    self._rv_unavailable = True
                raise Gone(initial)
            msg = str((obj.get("message") if isinstance(obj, dict) else None) or "watch error")[:300]
            if initial:
                # The streaming list failed before its list was in: a paged list now (client-go
                # falls back on any error), remembered when it says the server cannot stream.
                if code == 504:  # too large resourceVersion: the next streaming list names none
                    self._rv_unavailable = True
                raise WatchListRefused(f"streaming list answered with an error ({code}): {msg}",
                                       lasting=lasting_error(code if isinstance(code, int) else None, msg))
            raise ApiError(code if isinstance(code, int) else 0, msg)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict):
            rv = meta.get("resourceVersion")
            if rv:
                self.resource_version = str(rv)
        if etype == "BOOKMARK":
            if self._initial is not None:
                ann = meta.get("annotations") if isinstance(meta, dict) else None
                if not (isinstance(ann, dict) and ann.get(INITIAL_EVENTS_END) == "true"):
                    # a server that ignored sendInitialEvents sends plain bookmarks: not a list
                    raise WatchListRefused("a bookmark before the end of the initial events: the server "
                                           "ignores sendInitialEvents")
                self._end_initial(now, batch)
                return
            batch.append((resource, "BOOKMARK", obj, now, False))
            return
        key = self._dict_key(obj)
        if key is not None:
            self._hand_over(etype, obj, key, now, batch)

    def key(self, namespace: str, name: str) -> Key:
        """What this reflector knows an object by: its name when it lives where the stream lists
        (cluster-scoped, or the path's one namespace: every Node and Lease), else (namespace,
        name). Names alone spare a tuple per object: 65,000 per stream at fleet size, ~3.6 MB."""
        return name if namespace == self.spec.namespace else (namespace, name)

    def _record_key(self, rec: Any) -> Key:
        """The key of a typed record (``core.wire``; Nodes have no namespace)."""
        return self.key(getattr(rec, "namespace", ""), rec.name)

    def _dict_key(self, obj: Any) -> Key | None:
        if not isinstance(obj, dict):
            return None
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return None
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            return None
        ns = meta.get("namespace")
        return self.key(ns if isinstance(ns, str) else "", name)

    def deleted_stub(self, key: Key) -> dict:
        """The object of a DELETED event nodewatch makes up for a key it stops knowing."""
        namespace, name = (self.spec.namespace, key) if isinstance(key, str) else key
        meta = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        return {"metadata": meta}

    def _hand_over(self, etype: str, obj: Any, key: Key, now: float, batch: Batch) -> None:
        """An object event into ``batch``; keeps ``known`` (or, in a streaming list, the keys seen)."""
        initial = self._initial
        if initial is not None:
            if etype != "ADDED":  # a streaming list sends nothing else before its end bookmark
                raise WatchListRefused(f"a {etype} event before the end of the initial events: the "
                                       "server ignores sendInitialEvents")
            initial[key] = None
            batch.append((self.spec.resource, etype, obj, now, True))
            return
        if etype == "DELETED":
            self.known.pop(key, None)
        else:
            self.known[key] = None
        batch.append((self.spec.resource, etype, obj, now, False))
        self.events += 1

    def _end_initial(self, now: float, batch: Batch) -> None:
        """The initial events of a streaming list are complete: end the list like a paged one
        (``batch``, the events before the bookmark, is handed over with the list's end)."""
        seen = self._initial
        assert seen is not None
        self._initial = None
        resume_gc()
        self._finish_list(seen, now, batch[:])
        batch.clear()
        self.offer.worked()
        self._rv_unavailable = False
        self._need_list = False

    def _finish_list(self, seen: dict[Key, None], now: float, before: Batch) -> None:
        """The end of a list (paged or streamed) that saw ``seen``: ``before``, then DELETED for
        every object known before and absent now (no stale objects), then SYNCED, into the sink;
        only then is the resource counted as listed (``wait_synced`` finds it in the state)."""
        gone = [k for k in self.known if k not in seen]
        tail: Batch = before + [(self.spec.resource, "DELETED", self.deleted_stub(k), now, False) for k in gone]
        tail.append((self.spec.resource, "SYNCED", None, now, False))
        self.known = seen
        if self._worker is not None:
            self.lists_in_worker += 1
        self.sink(tail)
        self.relists += 1
        self._health(synced=True, relists=self.relists - 1, last_error="")


def _written(frontier: StreamFrontier, batch: Batch) -> None:
    """The server's write time of the Leases just applied, for the stream's frontier: the last
    record's that has one (a typed record's ``written_at``, clamped to its receipt; a dict, a
    recorder's, says nothing here). A watch delivers writes in their order, so the batch's last
    write is its newest; where a Lease's kubelet time is older than an earlier one's (another
    writer touched it), the frontier moves less far, never further than the evidence. Why only one:
    ``written_at`` decodes the record's managedFields on first read, which a renewal timed by its
    receipt never needs (1.7 us a renewal, about a tenth of its ingest, measured at 13,000 a second)."""
    for _, _, obj, received, _ in reversed(batch):
        w = getattr(obj, "written_at", None)
        if w is not None:
            frontier.written(min(w, received))
            return


def _lane_written(frontier: StreamFrontier, events: list[Any], received: float) -> None:
    """``_written`` for the lane's structs: the last one's write time that has one (its record's
    ``written_at``, read without the record: ``wire.watched_write_time``)."""
    for ev in reversed(events):
        meta = ev.object.metadata
        if meta is None or not meta.managedFields:
            continue
        w = watched_write_time(ev.object)
        if w is not None:
            frontier.written(min(w, received))
            return


def _short(exc: BaseException) -> str:
    text = str(exc)
    if "Connection reset" in text or "ConnectionResetError" in text:
        return "connection reset"
    return f"{type(exc).__name__}: {text[:160]}"


def _count(conn: Any, n: int) -> None:
    """Bytes read from the API server, on the connection's counter (tests' fake connections have none)."""
    count = getattr(conn, "count_received", None)
    if count is not None:
        count(n)
