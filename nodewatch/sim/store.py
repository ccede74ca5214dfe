"""An etcd-like, in-memory object store behind the simulated API server.

The simulated fleet emits whole objects (without a resourceVersion) through a sink; the store gives
each change the next global resourceVersion, keeps the current objects per resource, and keeps a
bounded history of changes so a watch from an older version replays exactly what changed after it,
while a version older than the retained window is "too old" (410 Gone), as with a real API server.

Each change is serialized once (orjson) when it is stored; every watcher and every list shares those
bytes, which is what lets one process feed tens of thousands of events a second. The fleet steps in
one thread and HTTP handlers read in others: one lock guards the maps, and listeners (the server's
event loop) are told after each change that there is something new to read.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple

import orjson

from .selectors import Slim, slim_of


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """What the server knows about one resource type (the store's "schema")."""

    name: str
    group: str
    version: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"


RESOURCES: dict[str, ResourceInfo] = {
    r.name: r
    for r in (
        ResourceInfo("nodes", "", "v1", "Node", False, ("no",)),
        ResourceInfo("pods", "", "v1", "Pod", True, ("po",)),
        ResourceInfo("events", "", "v1", "Event", True, ("ev",)),
        ResourceInfo("namespaces", "", "v1", "Namespace", False, ("ns",)),
        ResourceInfo("leases", "coordination.k8s.io", "v1", "Lease", True, ()),
        ResourceInfo(
            "certificatesigningrequests", "certificates.k8s.io", "v1", "CertificateSigningRequest", False, ("csr",)
        ),
    )
}

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


class Gone(Exception):
    """The requested resourceVersion (or a watcher's position) is older than the retained window."""

    def __init__(self, rv: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {rv} ({oldest})")
        self.rv = rv
        self.oldest = oldest


class Entry(NamedTuple):
    """A current object: its selectable fields and its JSON (with its resourceVersion), a view into
    the line of the change that made it, so each object's JSON is held once."""

    slim: Slim
    data: memoryview | bytes

    @property
    def obj(self) -> dict:
        """The object, decoded (a fresh dict each time)."""
        return orjson.loads(self.data)


class Change(NamedTuple):
    """One stored change, as a watcher reads it."""

    rv: int
    type: str
    slim: Slim
    prev: Slim | None
    """The object's selectable fields before this change (None for ADDED): selector watches need them
    to turn a change that leaves or enters the selection into DELETED / ADDED, as the real API
    server does."""
    line: bytes
    """The whole watch line, ``{"type":...,"object":...}\\n``, serialized once for every watcher."""

    @property
    def data(self) -> memoryview:
        """The object's JSON (a view into ``line``, no copy)."""
        return memoryview(self.line)[len(self.type) + 20 : -2]

    @property
    def obj(self) -> dict:
        return orjson.loads(self.data)


def watch_line(event_type: str, data: bytes | memoryview) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + data + b"}\n"


class _History:
    __slots__ = ("items", "base", "compacted_rv", "sorted_keys")

    def __init__(self) -> None:
        self.items: list[Change] = []
        self.base = 0  # absolute index of items[0]
        self.compacted_rv = 0  # every change with rv > compacted_rv is still in items
        self.sorted_keys: list[tuple[str, str]] | None = None


Listener = Callable[[], None]


class ObjectStore:
    """Current objects + bounded change history per resource, with global resourceVersions.

    ``emit`` is the fleet's sink. ``history_limit`` is the number of changes kept per resource.
    """

    def __init__(self, history_limit: int = 200_000, auto_namespaces: bool = True) -> None:
        self.history_limit = max(1, history_limit)
        self.auto_namespaces = auto_namespaces
        self._lock = threading.Lock()
        self._rv = 0
        self._now = 0.0
        self._current: dict[str, dict[tuple[str, str], Entry]] = {r: {} for r in RESOURCES}
        self._history: dict[str, _History] = {r: _History() for r in RESOURCES}
        self._listeners: list[Listener] = []
        self.events_stored = 0

    # ---- the fleet's side -------------------------------------------------------------------------

    def emit(self, resource: str, event_type: str, obj: dict, t: float | None = None) -> int | None:
        """Store one change (the SimFleet sink). Returns its resourceVersion, or None if ignored
        (a DELETED of an object the store does not have). ADDED of an existing object is stored as
        MODIFIED and MODIFIED of an unknown object as ADDED, so watchers always see a sane stream."""
        with self._lock:
            rv = self._emit_locked(resource, event_type, obj, t)
        self._notify()
        return rv

    def emit_many(self, changes: Iterable[tuple[str, str, dict, float | None]]) -> None:
        """Store several changes under one lock and wake watchers once."""
        with self._lock:
            for resource, event_type, obj, t in changes:
                self._emit_locked(resource, event_type, obj, t)
        self._notify()

    def emit_built(self, resource: str, changes: Iterable[tuple[tuple[str, str], Callable[[int], bytes]]],
                   t: float | None = None) -> int:
        """``MODIFIED`` changes of objects the store has, each JSON built by the caller around the
        resourceVersion it is given (``build(rv)``); returns how many were stored. Why: a stand-in
        for 130,000 kubelets renews 13,000 Leases a second, and the store's own copy and
        serialization of each object (``emit``) costs more than two cores have beside the client
        measured (``bench/live_path.FastRenewer``). The caller keeps what ``emit`` checks: the
        object exists (a key the store lacks is skipped) and its selectable fields are unchanged
        (they are the current entry's)."""
        stored = 0
        with self._lock:
            current = self._current[resource]
            hist = self._history[resource]
            for key, build in changes:
                prev = current.get(key)
                if prev is None:
                    continue
                self._rv += 1
                rv = self._rv
                change = Change(rv, "MODIFIED", prev.slim, prev.slim, watch_line("MODIFIED", build(rv)))
                current[key] = Entry(prev.slim, change.data)
                hist.items.append(change)
                stored += 1
            if t is not None and t > self._now:
                self._now = t
            self.events_stored += stored
            self._compact(hist)
        self._notify()
        return stored

    def load(self, fleet: object, resources: Iterable[str] | None = None) -> None:
        """Seed the store with ``fleet.objects(resource)`` for every resource, as ADDED changes."""
        for resource in resources or RESOURCES:
            try:
                objs = fleet.objects(resource)  # type: ignore[attr-defined]
            except (KeyError, ValueError, NotImplementedError):
                continue
            now = getattr(fleet, "now", None)
            self.emit_many((resource, "ADDED", o, now) for o in objs)

    def advance(self, t: float) -> None:
        """Move the store's virtual time without a change (virtual-time bookmarks use it)."""
        with self._lock:
            if t > self._now:
                self._now = t
        self._notify()

    def _emit_locked(self, resource: str, event_type: str, obj: dict, t: float | None) -> int | None:
        info = RESOURCES.get(resource)
        if info is None:
            raise KeyError(f"unknown resource {resource!r}")
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {event_type!r}")
        meta_in = obj.get("metadata") or {}
        ns = (meta_in.get("namespace") or "") if info.namespaced else ""
        key = (ns, meta_in.get("name") or "")
        current = self._current[resource]
        prev_entry = current.get(key)
        if event_type == "DELETED" and prev_entry is None:
            return None
        if event_type == "ADDED" and prev_entry is not None:
            event_type = "MODIFIED"
        elif event_type == "MODIFIED" and prev_entry is None:
            event_type = "ADDED"
        if ns and self.auto_namespaces and resource != "namespaces" and ("", ns) not in self._current["namespaces"]:
            self._emit_locked("namespaces", "ADDED", _namespace_object(ns, meta_in.get("creationTimestamp")), t)
        self._rv += 1
        rv = self._rv
        if t is not None and t > self._now:
            self._now = t
        out = dict(obj)
        meta = dict(meta_in)
        meta["resourceVersion"] = str(rv)
        out["metadata"] = meta
        out.setdefault("apiVersion", info.api_version)
        out.setdefault("kind", info.kind)
        slim = slim_of(resource, out)
        change = Change(rv, event_type, slim, prev_entry.slim if prev_entry else None,
                        watch_line(event_type, orjson.dumps(out)))
        hist = self._history[resource]
        if event_type == "DELETED":
            del current[key]
            hist.sorted_keys = None
        else:
            current[key] = Entry(slim, change.data)
            if prev_entry is None:
                hist.sorted_keys = None
        hist.items.append(change)
        self.events_stored += 1
        self._compact(hist)
        return rv

    def _compact(self, hist: _History) -> None:
        """Keep ``history_limit`` changes (dropped in bulk, a quarter over the limit at a time)."""
        if len(hist.items) > self.history_limit + max(16, self.history_limit // 4):
            drop = len(hist.items) - self.history_limit
            hist.compacted_rv = hist.items[drop - 1].rv
            del hist.items[:drop]
            hist.base += drop

    # ---- the server's side ------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    @property
    def now(self) -> float:
        """Virtual time of the latest change (or ``advance``)."""
        return self._now

    def get(self, resource: str, namespace: str, name: str) -> Entry | None:
        with self._lock:
            return self._current[resource].get((namespace if RESOURCES[resource].namespaced else "", name))

    def snapshot(self, resource: str) -> tuple[int, list[Entry], int]:
        """Current objects sorted by (namespace, name), the resourceVersion they are at, and the
        history cursor just after it (for a watch that starts with synthetic ADDED events)."""
        with self._lock:
            hist = self._history[resource]
            current = self._current[resource]
            if hist.sorted_keys is None:
                hist.sorted_keys = sorted(current)
            entries = [current[k] for k in hist.sorted_keys]
            return self._rv, entries, hist.base + len(hist.items)

    def cursor_after(self, resource: str, rv: int) -> int:
        """History cursor for "everything after rv"; raises Gone if changes after rv were dropped."""
        with self._lock:
            hist = self._history[resource]
            if rv < hist.compacted_rv:
                raise Gone(rv, hist.compacted_rv + 1)
            return hist.base + bisect_right(hist.items, rv, key=lambda c: c.rv)

    def oldest_rv(self, resource: str) -> int:
        """The oldest resourceVersion a watch of ``resource`` may still start from."""
        with self._lock:
            return self._history[resource].compacted_rv

    def read(self, resource: str, cursor: int, max_items: int = 10_000) -> tuple[list[Change], int, int]:
        """Changes from ``cursor`` on (at most ``max_items``), the new cursor, and the global
        resourceVersion (a watcher that got everything may bookmark at it). Gone if the watcher fell
        behind the retained window."""
        with self._lock:
            hist = self._history[resource]
            start = cursor - hist.base
            if start < 0:
                raise Gone(hist.items[0].rv - 1 if hist.items else self._rv, hist.compacted_rv + 1)
            batch = hist.items[start : start + max_items]
            return batch, cursor + len(batch), self._rv

    def count(self, resource: str) -> int:
        with self._lock:
            return len(self._current[resource])

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners = [x for x in self._listeners if x is not listener]

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()


def _namespace_object(name: str, created: str | None) -> dict:
    meta: dict = {"name": name, "uid": f"ns-{name}", "labels": {"kubernetes.io/metadata.name": name}}
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": meta,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
