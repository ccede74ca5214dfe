"""The live cluster as a Source: reflectors for nodes, leases and CSRs, plus node-scoped pods/events.

Cost stays bounded at 65,000 nodes and a million pods (see ``docs/live-design.md``): nodes and
leases are watched cluster-wide (they are what the dashboard is about), CSRs too (few, and their
certificates are remembered in a local cache because the API deletes them after an hour), but pods
and events are watched only for the drill-down node and for nodes that are not Ready, with
server-side field selectors, at most ``MAX_SCOPED_NODES`` nodes at a time.

Every request is a GET (the connection object has no other verb). Watch health goes into the
state, so the dashboard never blames nodes for its own blindness.

Times: every "now" (receive times, problems, health, certificate probes, the cert cache's save
interval) comes from the injected clock, so tests can move it by hand. Only waits for the network
(``wait_synced``'s timeout, backoff) count real seconds.

Shutdown is safe at any moment: ``stop()`` before ``start()``, during it (from another thread: it
waits for the start to finish, then undoes it), while the housekeeping thread is adding node-scoped
watches, and twice.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ..core.clock import Clock, SystemClock
from ..core.fleet import FleetState
from ..core.multi import REQUIRED_STREAMS
from ..core.settings import Settings
from ..core.text import safe
from .certcache import CertCache
from .heap import fix_mmap_threshold
from .kubeconfig import ApiError, Connection, KubeconfigError
from .recording import Recorder, write_lease_watch
from .reflector import CSRS, LEASES, NODES, REGISTRATIONS, Batch, Reflector, ResourceSpec, events_of, pods_on
from .watchlist import StreamingOffer

MAX_SCOPED_NODES = 50
"""At most this many nodes get pod and event watches (2 streams each)."""
HOUSEKEEPING_INTERVAL = 1.0
REFRESH_BATCH = 500
"""A batch of listed Nodes at least this big is judged on the thread that applied it
(``FleetState.refresh``); smaller ones are left to the next frame."""
CERT_SAVE_INTERVAL = 30.0
VERSION_WAIT = 2.0
"""At most this long the Lease list waits, read but not applied, for the server's version: how a
listed Lease is dated depends on it (``ingest.listed_renewal``: from v1.25 the server's write time
is the renewal's own; before, renewTime on the node's clock). Applied before, a listed age is
dated by renewTime and judged on the undated frontier, which a server behind on its own watch
dispatch overstates (early Late at 65,000 nodes). ``/version`` answers in milliseconds, the list
takes longer: the wait is nothing unless the server is slow to answer it."""
PROBE_INTERVAL = 3600.0
MAIN_STREAMS = (NODES, LEASES, CSRS)
"""Watched cluster-wide from the start."""
NODES_AFTER_LEASES = 5.0
"""The Node list starts once the Lease list is in (or failed), and at most this many seconds after
it: the first useful frame is every node from its Lease, and a Node list 13 times the Lease list's
size (1.3 GB at 130,000 nodes) listed at the same moment took the client's and the server's CPU from
it. Measured at 130k (bench.start, one start each): first useful frame 4.85 -> 3.44 s, the complete
frame unchanged (8.90 / 8.95 s)."""

__all__ = ["KubeconfigError", "LiveSource", "MAX_SCOPED_NODES"]


class LiveSource:
    """See the module docstring."""

    def __init__(self, settings: Settings, kubeconfig: str | None = None, context: str | None = None,
                 recorder: Recorder | None = None, probe_kubelet_tls: bool = False,
                 kubelet_metrics: bool = False, cert_cache_dir: str | None = None,
                 watch_timeout: float = 300.0, stall_timeout: float | None = None, clock: Clock | None = None,
                 state: FleetState | None = None) -> None:
        self.conn = Connection(kubeconfig, context)
        self.target = self.conn.target
        self.name = self.target.display
        self.settings = settings
        self.state = FleetState(settings) if state is None else state
        """The state it feeds (``state``: one of several clusters', ``core/multi.py``)."""
        self.clock: Clock = clock or SystemClock()
        self.replay = None
        self.recorder = recorder
        self.probe_kubelet_tls = probe_kubelet_tls
        self.kubelet_metrics = kubelet_metrics
        self.watch_timeout = watch_timeout
        self.stall_timeout = stall_timeout
        """None: a watch is cut by the client only past its server-side timeout (``Reflector``)."""
        self.streaming = StreamingOffer()
        """Whether this server streams lists, learned by the first stream that asks and shared by
        all (the WatchList gate and etcd's version are the server's, not a resource's)."""
        self.cert_cache = CertCache(self.target.cluster_id, cert_cache_dir)
        self.server_version: str | None = None
        self._lock = threading.Lock()
        self._main: list[Reflector] = []
        self._scoped: dict[str, tuple[Reflector, Reflector]] = {}
        self._registrations: Reflector | None = None
        """The fleet-wide stream of the node controller's registrations (``REGISTRATIONS``)."""
        self._scoped_health: dict[Reflector, dict[str, Any]] = {}
        self._focus: str | None = None
        self._over_limit_reported = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._house: threading.Thread | None = None
        self._version_settled = threading.Event()
        self._leases_in = threading.Event()
        """The Lease list is in, or failed: the Node list waits for it (``NODES_AFTER_LEASES``)."""
        """Set once the first ``/version`` request ended (answered or not), or on stop: the Lease
        list's first batch waits for it (``VERSION_WAIT``)."""
        self._probed: dict[str, float] = {}
        self._started = False
        self._life = threading.Lock()
        """Held by start() and stop(): a stop waits for a start in progress, then undoes all of it."""
        self._stopped = False

    def _remember_cert(self, node: str, not_after: float, source: str) -> None:
        """A NotAfter learned outside the watch streams: into the state, and into the recording."""
        self.state.remember_cert(node, not_after, source)
        if self.recorder is not None:
            self.recorder.write_cert(node, not_after, source, self.clock.now())

    def recording_source(self) -> dict[str, Any]:
        """What a recording's header says about where its events came from."""
        return {"kind": "live", "name": self.name, "context": self.target.context, "server": self.target.server}

    # --- Source -----------------------------------------------------------------------------------

    def start(self) -> None:
        with self._life:
            if self._started or self._stop.is_set():
                return
            self._started = True
            fix_mmap_threshold()  # before the first list: its buffers must not fragment the heap
            cached = self.cert_cache.load()
            if self._stop.is_set():  # stop() was called from another thread while the cache was read
                return
            for node, (not_after, source) in cached.items():
                self._remember_cert(node, not_after, f"{source} (cached)" if "cached" not in source else source)
            if not self.conn.verify_tls:
                self.state.notice(self.clock.now(), "kubeconfig", "TLS verification is off "
                                                                  "(insecure-skip-tls-verify in the kubeconfig)")
            if self.cert_cache.error:
                self.state.problem(self.clock.now(), "cert cache", self.cert_cache.error)
            for spec in MAIN_STREAMS:
                self.state.update_health(spec.resource, connected=False, synced=False, down_since=None,
                                         last_error="connecting")
                r = self._reflector(spec)
                with self._lock:
                    self._main.append(r)
                r.start()
            r = self._reflector(REGISTRATIONS, self._registrations_sink)  # its health is the events'
            with self._lock:
                self._registrations = r
            r.start()
            self._house = threading.Thread(target=self._housekeeping, name="live-housekeeping", daemon=True)
            self._house.start()

    def stop(self) -> None:
        """Stop every thread and close the connection; safe at any moment (see the module docstring)."""
        self._stop.set()  # first: a start in progress sees it and starts nothing more
        self._wake.set()
        self._version_settled.set()
        self._leases_in.set()
        with self._life:
            if self._stopped:
                return
            self._stopped = True
            with self._lock:  # the housekeeping registers scoped watches under this lock, after checking _stop
                everything = list(self._main) + [r for pair in self._scoped.values() for r in pair]
                if self._registrations is not None:
                    everything.append(self._registrations)
            for r in everything:
                r.stop(join=False)
            for r in everything:
                r.stop(join=True)
            if self._house is not None:
                self._house.join(timeout=5)
            if self._started:
                self._save_certs()
            self.conn.close()

    @property
    def stopping(self) -> bool:
        """``stop()`` has been called (it may still be waiting for a ``start()`` in progress)."""
        return self._stop.is_set()

    def threads_alive(self) -> int:
        """Watch and housekeeping threads still running (0 after ``stop()``)."""
        with self._lock:
            reflectors = list(self._main) + [r for pair in self._scoped.values() for r in pair]
            if self._registrations is not None:
                reflectors.append(self._registrations)
        house = 1 if self._house is not None and self._house.is_alive() else 0
        return house + sum(r.alive for r in reflectors)

    def focus_node(self, node: str | None) -> None:
        self._focus = node
        self._wake.set()

    def not_listed(self, node: str | None = None) -> list[str]:
        """The streams an answer about the fleet (and about ``node``: its pods and events) reports on
        that have not been listed yet. A forbidden stream will not be listed: it is not waited for
        (the state's watch health says why it is missing)."""
        with self._lock:
            main = {r.spec.resource: r for r in self._main}
            pair = self._scoped.get(node) if node else None
            reg = self._registrations
        missing = [spec.what for spec in MAIN_STREAMS
                   if spec.resource not in main or not (main[spec.resource].listed or main[spec.resource].forbidden)]
        if reg is None or not (reg.listed or reg.forbidden):  # a controller restart moves every grace
            missing.append(REGISTRATIONS.what)
        if node:
            specs = (pods_on(node), events_of(node))
            if pair is None:
                missing += [spec.what for spec in specs]
            else:
                missing += [r.spec.what for r in pair if not (r.listed or r.forbidden)]
        return missing

    def pods_listed(self, nodes: list[str]) -> bool:
        """Whether the pods of each of ``nodes`` that is watched (``wanted_scoped``: the nodes not
        Ready, at most ``MAX_SCOPED_NODES``) have been listed (or may not be)."""
        watched = set(self.wanted_scoped()[:MAX_SCOPED_NODES])
        with self._lock:
            pairs = [self._scoped.get(n) for n in nodes if n in watched]
        return all(pair is not None and (pair[0].listed or pair[0].forbidden) for pair in pairs)

    def required_not_listed(self, waited: float) -> str | None:
        """Why no answer about the fleet came within ``waited`` seconds, or None: which of the Node
        and Lease lists is not in, each with what its stream last said, and which one is (the
        server may be slow, or refusing, or nodewatch's own list still going: the user is told
        which, not "the API server did not list")."""
        missing = [r for r in REQUIRED_STREAMS if r in self.not_listed()]
        if not missing:
            return None
        said = []
        for resource in missing:
            h = self.state.stream_health(resource)
            if h is not None and h.last_error and h.last_error != "connecting":
                why = safe(h.last_error, 160)
            else:
                why = "still listing" if h is not None and h.connected else "not connected yet"
            said.append(f"{resource}: {why}")
        listed = [r for r in REQUIRED_STREAMS if r not in missing]
        tail = f" (the {listed[0]} are in)" if listed else ""
        return f"not listed within {waited:g}s: {'; '.join(said)}{tail}"

    def wait_synced(self, timeout: float, node: str | None = None) -> bool:
        """True once every stream of ``not_listed(node)`` has been listed; False after ``timeout``
        real seconds (a wait for the network, not for a rule: it does not use the clock), or at
        once when ``fatal()`` says waiting cannot help."""
        deadline = time.monotonic() + timeout
        while self.not_listed(node):
            if time.monotonic() >= deadline or self._stop.is_set() or self.fatal() is not None:
                return False
            time.sleep(0.02)
        return True

    def fatal(self) -> str | None:
        """Why no answer about the fleet can come by waiting, or None: the connection's last
        permanent failure (credentials rejected, TLS verification failed, a host that does not
        resolve or refuses), or no permission to list nodes or leases (the others are optional)."""
        failure = self.conn.failure
        if failure is not None and failure.status != 403:
            return failure.message
        with self._lock:
            main = list(self._main)
        for r in main:
            if r.spec.resource in REQUIRED_STREAMS and r.forbidden:
                who = self.target.user or "?"
                return (f"forbidden (403): user {who} (context {self.target.context}) may not read "
                        f"{r.spec.what}; needs {r.spec.permission}")
        return None

    def watching(self) -> bool:
        """Every cluster-wide stream has a watch open right now (listed, and streaming)."""
        with self._lock:
            main = list(self._main)
        return len(main) == len(MAIN_STREAMS) and all(r.watching for r in main)

    def reflector(self, resource: str) -> Reflector:
        """The cluster-wide stream of ``resource`` (nodes, leases, certificatesigningrequests)."""
        with self._lock:
            return next(r for r in self._main if r.spec.resource == resource)

    # --- plumbing ---------------------------------------------------------------------------------

    def _reflector(self, spec: ResourceSpec, sink: Callable[[Batch], None] | None = None) -> Reflector:
        return Reflector(self.conn, spec, sink or self._sink, self._on_health, self._on_problem,
                         watch_timeout=self.watch_timeout, stall_timeout=self.stall_timeout, wall=self.clock.now,
                         typed=self.recorder is None, offer=self.streaming,  # a recorder writes the objects themselves
                         frontier=self.state.track_lease_stream() if spec is LEASES else None,
                         after=(self._leases_in, NODES_AFTER_LEASES) if spec is NODES else None,
                         expected=self._leases_listed if spec is NODES else None,
                         lane=self._lane if spec is LEASES else None)

    def _leases_listed(self) -> int | None:
        """How many Leases the Lease list held (a kubelet renews one per Node): the Node list's
        expected size, None before the Lease list is in."""
        with self._lock:
            leases = next((r for r in self._main if r.spec.resource == "leases"), None)
        return len(leases.known) if leases is not None and leases.listed else None

    def _sink(self, batch: Batch) -> None:
        st = self.state
        if batch and not self._version_settled.is_set() and batch[0][0] == "leases" and batch[0][4]:
            self._version_settled.wait(VERSION_WAIT)
        with st.batch():
            for resource, etype, obj, t, listing in batch:
                st.apply(resource, etype, obj, t, listing)
        if len(batch) >= REFRESH_BATCH and batch[0][0] == "nodes" and batch[0][4] and st.is_synced("leases"):
            # A big batch of a Node list, once every node has its placeholder row (the Leases are
            # in): judged here, so the next frame has only the rest to judge. (Before that, a
            # batch would insert its nodes into the order one by one: the first frame's rebuild
            # places them all at once.)
            st.refresh(self.clock.now())
        rec = self.recorder
        if rec is not None:
            for resource, etype, obj, t, listing in batch:
                rec.write(resource, etype, obj, t, listing)

    def _registrations_sink(self, batch: Batch) -> None:
        """The fleet-wide ``RegisteredNode`` events: when each node was registered, into the state
        (not the events themselves: those of a node whose events are watched come on its own stream,
        and 65,000 of them after a restart would be kept for nothing); into the recorder as events,
        which a replay reads the same way (``Ingest._on_event``)."""
        st = self.state
        with st.batch():
            for _, etype, obj, t, _listing in batch:
                if etype in ("ADDED", "MODIFIED"):
                    st.registration(obj, t)
        rec = self.recorder
        if rec is not None:
            for resource, etype, obj, t, listing in batch:
                if etype in ("ADDED", "MODIFIED"):
                    rec.write(resource, etype, obj, t, listing)

    def _lane(self, events: list[Any], received_at: float, block: bytes | memoryview) -> None:
        """The synced Lease watch's typed structs of one read, into the state in one call
        (``Reflector.take_block``); the read's lines into the recorder, if there is one (the
        flight recorder writes a plain renewal from its bytes, ``write_lease_watch``)."""
        self.state.apply_lease_watch(events, received_at)
        rec = self.recorder
        if rec is not None:
            write_lease_watch(rec, block, events, received_at)

    def _on_problem(self, where: str, message: str) -> None:
        self.state.problem(self.clock.now(), where, message)

    def _on_health(self, reflector: Reflector, **changes: Any) -> None:
        resource = reflector.spec.resource
        with self._lock:
            main = reflector in self._main
        if main and resource == "leases" and (changes.get("synced") or changes.get("connected") is False
                                               or changes.get("last_error")):
            self._leases_in.set()  # listed, or failed: the Nodes wait no longer (``NODES_AFTER_LEASES``)
        if main:
            self.state.update_health(resource, **changes)
            self._record_health(resource, changes)
            return
        with self._lock:
            mine = self._scoped_health.setdefault(reflector, {})
            mine.update(changes)
            if reflector.stopped:
                self._scoped_health.pop(reflector, None)
            agg = self._aggregate(resource)
        self.state.update_health(resource, **agg)
        self._record_health(resource, agg)

    def _aggregate(self, resource: str) -> dict[str, Any]:
        hs = [(r, h) for r, h in self._scoped_health.items() if r.spec.resource == resource]
        if not hs:
            return {"connected": True, "synced": True, "last_error": "", "forbidden": False, "down_since": None}
        down = [h for _, h in hs if not h.get("connected", False)]
        errs = [f"{r.spec.what}: {h['last_error']}" for r, h in hs if h.get("last_error")]
        return {
            "connected": not down,
            "synced": all(h.get("synced", False) for _, h in hs),
            "forbidden": any(h.get("forbidden", False) for _, h in hs),
            "last_error": errs[0] if errs else "",
            "down_since": min((h["down_since"] for h in down if h.get("down_since")), default=None),
        }

    def _record_health(self, resource: str, changes: dict[str, Any]) -> None:
        if self.recorder is not None:
            self.recorder.write_health(resource, self.clock.now(), **changes)

    # --- housekeeping: server version, node-scoped watches, cert cache, probes ---------------------

    def _housekeeping(self) -> None:
        self._fetch_version()
        last_save = self.clock.now()
        while not self._stop.is_set():
            self._wake.clear()  # before the pass: a focus change during the pass wakes the next one
            if self._stop.is_set():  # stop() sets _stop before _wake: a cleared wake-up was a stop
                return
            try:
                self._update_scoped()
                if self.clock.now() - last_save >= CERT_SAVE_INTERVAL:
                    self._save_certs()
                    last_save = self.clock.now()
                if self.probe_kubelet_tls or self.kubelet_metrics:
                    self._probe_some()
            except Exception as exc:  # noqa: BLE001 - housekeeping must not die
                self._on_problem("live source", f"{type(exc).__name__}: {str(exc)[:200]}")
            self._wake.wait(HOUSEKEEPING_INTERVAL)

    def _fetch_version(self) -> None:
        try:
            self._ask_version()
        finally:
            self._version_settled.set()

    def _ask_version(self) -> None:
        """The server's version into the settings (the grace period and the dating rules depend on
        it); retried a few times. After the first failure the Lease list is applied without it."""
        for attempt in range(5):
            if self._stop.is_set():
                return
            try:
                info = self.conn.get_json("/version", timeout=(5.0, 10.0))
            except ApiError as exc:
                if attempt == 4:
                    self._on_problem("/version", f"API server version unknown ({exc}); grace "
                                                 f"{self.settings.grace:g}s assumed")
                self._version_settled.set()
                self._stop.wait(min(5.0, 0.5 * 2 ** attempt))
                continue
            version = info.get("gitVersion") if isinstance(info, dict) else None
            if isinstance(version, str) and version:
                self.server_version = version[:64]
                self.settings = self.settings.with_server_version(self.server_version)
                self.state.set_settings(self.settings)
                if self.recorder is not None:
                    self.recorder.write_settings(self.clock.now(), self.settings)
            return

    def wanted_scoped(self) -> list[str]:
        """Nodes whose pods and events are watched: the focus first, then nodes not Ready."""
        not_ready = self.state.not_ready_nodes()
        wanted: list[str] = []
        if self._focus:
            wanted.append(self._focus)
        wanted += [n for n in not_ready if n != self._focus]
        return wanted

    def _update_scoped(self) -> None:
        wanted_all = self.wanted_scoped()
        wanted = wanted_all[:MAX_SCOPED_NODES]
        over = len(wanted_all) - len(wanted)
        if over != self._over_limit_reported:
            self._over_limit_reported = over
            if over > 0:
                self.state.notice(self.clock.now(), "pods/events",
                                  f"{len(wanted_all):,} nodes need pod and event watches; only "
                                  f"{MAX_SCOPED_NODES} are watched (the focused node first)")
        wanted_set = set(wanted)
        with self._lock:
            drop = [n for n in self._scoped if n not in wanted_set]
            add = [n for n in wanted if n not in self._scoped]
        for node in drop:
            with self._lock:
                pair = self._scoped.pop(node)
            for r in pair:
                r.stop(join=True)
                with self._lock:
                    self._scoped_health.pop(r, None)
                # the pods and events of this node are no longer kept up to date: forget them
                now = self.clock.now()
                gone: Batch = [(r.spec.resource, "DELETED", r.deleted_stub(k), now, False) for k in r.known]
                if gone:
                    self._sink(gone)
            with self._lock:
                for res in ("pods", "events"):
                    agg = self._aggregate(res)
                    self.state.update_health(res, **agg)
        for node in add:
            pair = (self._reflector(pods_on(node)), self._reflector(events_of(node)))
            with self._lock:
                if self._stop.is_set():  # checked under the lock stop() collects the watches with
                    return
                self._scoped[node] = pair
            for r in pair:
                r.start()  # a no-op when stop() got there first

    def scoped_nodes(self) -> list[str]:
        with self._lock:
            return sorted(self._scoped)

    def _save_certs(self) -> None:
        self.cert_cache.save(self.state.cert_dates())

    def _probe_some(self) -> None:
        from .probes import kubelet_client_not_after, kubelet_serving_not_after, node_address

        now = self.clock.now()
        nodes = [(n, rec) for n, rec in self.state.node_records().items()
                 if now - self._probed.get(n, 0.0) >= PROBE_INTERVAL]
        for name, rec in nodes[:20]:  # a few per pass; the rest on the next passes
            if self._stop.is_set():
                return
            self._probed[name] = now
            if self.probe_kubelet_tls:
                host = node_address(rec)
                if host:
                    t = kubelet_serving_not_after(host, rec.kubelet_port or 10250)
                    if t is not None:
                        self._remember_cert(name, t, "kubelet serving cert (TLS probe)")
            if self.kubelet_metrics:
                t = kubelet_client_not_after(self.conn, name, now)
                if t is not None:
                    self._remember_cert(name, t, "kubelet /metrics (client cert TTL)")

