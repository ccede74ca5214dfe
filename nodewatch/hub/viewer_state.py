"""The fleet as a hub's viewer holds it: the hub's evaluated views, not watch events.

``ViewerState`` implements ``core.source.FleetReader``, the questions the dashboard asks a
``FleetState``, from the frames of a hub. It never runs a rule: every view, count and zone is the
hub's, evaluated at the hub's ``now``, so every screen attached to one hub shows the same thing.

Frames are decoded by the connection thread and merged into ``_pending``; they are applied when the
dashboard next calls ``evaluate`` (on its own thread), as the core applies its own changes inside
``evaluate``: a view handed to the dashboard is never changed while it is being drawn.

A snapshot comes worst first in parts (``hub/publisher.py``): the first part is enough for the
first screen, and the dashboard shows it while the rest is decoded, one part at a time (the hub's
stream says "syncing" until the last part is in).

A hub of several clusters names its nodes by key (``cluster/name``, ``NodeView.key``) and sends the
cluster strip with every frame: the viewer keeps its views by key, in the hub's merged order
(``core.multi.merged_order``), so it answers the same questions with the same keys as a
``MultiFleet`` does, and the drill-down of a key is the hub's, from that node's cluster.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from sys import intern
from typing import Any

from msgspec.structs import replace

from ..core.fleet_data import sort_key
from ..core.format import clock_time
from ..core.multi import merged_order
from ..core.objects import PodRecord
from ..core.rules import NodeState
from ..core.settings import Settings
from ..core.views import PROBLEM_NOTICE, ClusterView, FleetView, NodeDetails, NodeView, Problem, WatchHealth, ZoneView
from .codec import WireError, from_wire, shared_float, view_from_wire

BULK = 500
"""Views changed at once above which the order is rebuilt (one sort) rather than edited in place."""
HUB_STREAM = "hub"
"""The pseudo-stream in the header's health list that says whether the hub is connected."""


@dataclass
class _Pending:
    """Frames received and not yet applied, merged (a slow dashboard does not pile them up)."""

    snapshot: bool = False
    up: dict[str, NodeView] = field(default_factory=dict)
    renew: dict[str, tuple] = field(default_factory=dict)
    """Renewals of views already applied: the node's ``RENEW_FIELDS`` values by key."""
    gone: set[str] = field(default_factory=set)
    labels: dict[str, LabelSet] = field(default_factory=dict)


class ViewerState:
    """See the module docstring. Thread-safe: the connection thread feeds, the UI reads."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.nodes: dict[str, LabelSet] = {}
        """Labels by node key: the node's label set, one object for every node of a pool (the
        hub's table, ``hub/publisher.py``). 130,000 label dicts, or a tuple each, would be much of
        a viewer's memory; ``node_labels`` makes a node's dict when asked."""
        self.settings = Settings()
        self._rows: list[NodeView] = []
        """The views in the fleet's order (worst first), a plain sorted list searched with
        ``bisect``: no sort key kept per node (a sorted container keeps one, a tuple each). A frame
        is ``tuple(self._rows)``: a copy of pointers (~1 ms at 130,000 nodes, against ~30 ms for a
        lookup of every key in order), and a renewal, which moves no view in the order, writes its
        new view in its place."""
        self._pos: dict[str, int] = {}
        """Each view's place in ``_rows`` by node key; from ``_stale`` on, out of date (``_view_positions``
        brings it up to date: after a renewal nothing moved, after a part appended only its places)."""
        self._stale: int | None = None
        """The first place in ``_rows`` whose ``_pos`` entry may be wrong (None: all are right)."""
        self._pairs: dict[int, tuple[str, str | None]] = {}
        self._sets: dict[int, LabelSet] = {}
        self._parts_left = 0
        """Parts of the last snapshot still to come."""
        self._pending = _Pending()
        self._meta: dict[str, Any] = {}
        self._zones: list[ZoneView] = []
        self._clusters: list[ClusterView] = []
        self._cluster_names: list[str] = []
        """The clusters of the last snapshot, in the hub's order (empty: a one-cluster hub)."""
        self._health: dict[str, WatchHealth] = {}
        self._counts: dict[NodeState, int] = {s: 0 for s in NodeState}
        self.hub_now: float | None = None
        """The hub's clock in the last frame received (None: nothing received yet)."""
        self.hub_virtual = False
        """The hub's clock is not the wall's (a demo hub's simulator): its hello says."""
        self.name = ""
        self.seq = 0
        self.connected = False
        self.last_error = "connecting"
        self._lost_at_wall: float | None = None
        self._lost_at_hub: float | None = None
        self._details: tuple[str, NodeDetails, bool] | None = None
        self._details_cap: int | None = None
        self._problems: list[Problem] = []
        self._label_dicts: dict[str, tuple[LabelSet, dict[str, str]]] = {}
        self.frames = 0
        self._published: FleetView | None = None

    # --- fed by the connection thread -------------------------------------------------------------

    def receive(self, msg: dict[str, Any]) -> None:
        """One decoded frame (``snap``, ``delta`` or ``details``). Raises codec.WireError."""
        kind = msg["k"]
        if kind == "details":
            node = str(msg.get("node"))
            d = from_wire(NodeDetails, msg.get("d"))
            cap = msg.get("cap")
            with self.lock:
                self._details = (node, d, bool(msg.get("watched", True)))
                self._details_cap = cap if isinstance(cap, int) and not isinstance(cap, bool) else None
            return
        if kind in ("snap", "part"):
            self._receive_part(msg)
            return
        if kind == "delta":
            up = [view_from_wire(w) for w in msg.get("up", [])]
            renew = _renewals(msg.get("renew") or [])
            with self.lock:
                self._take_tables(range(int(msg.get("pairs_from", len(self._pairs))), 1 << 62), msg.get("pairs"),
                                  range(int(msg.get("sets_from", len(self._sets))), 1 << 62), msg.get("sets"))
                p = self._pending
                for v in up:
                    key = v.key
                    p.up[key] = v
                    p.renew.pop(key, None)
                    p.gone.discard(key)
                for key, moved in renew:
                    pending = p.up.get(key)
                    if pending is not None:  # (a view not applied yet: renewed where it waits)
                        p.up[key] = _renewed(pending, moved)
                    else:
                        p.renew[key] = moved
                for n in msg.get("del", []):
                    p.up.pop(n, None)
                    p.renew.pop(n, None)
                    p.labels.pop(n, None)
                    p.gone.add(n)
                self._take_labels(msg.get("labels"), p)
                self._take_meta(msg)

    def _receive_part(self, msg: dict[str, Any]) -> None:
        """A ``snap`` frame (a new snapshot: meta and its first, worst nodes) or one of its ``part``s."""
        first = msg["k"] == "snap"
        if not first and int(msg.get("seq", -1)) != self.seq:
            raise WireError("a snapshot part of another snapshot")
        views = [view_from_wire(w) for w in msg.get("nodes", [])]
        with self.lock:
            if first:
                self._pairs, self._sets = {}, {}
                self._pending = _Pending(snapshot=True)
                self._parts_left = int(msg.get("parts", 0))
                self._take_meta(msg)
            else:
                self._parts_left -= 1
            self._take_tables(msg.get("pair_idx") or [], msg.get("pairs"), msg.get("set_idx") or [], msg.get("sets"))
            p = self._pending
            for v in views:
                p.up[v.key] = v
            self._take_labels(msg.get("labels"), p)

    def _take_tables(self, pair_idx: Iterable[Any], pairs: Any, set_idx: Iterable[Any], sets: Any) -> None:
        """New entries of the hub's pair and set tables (``hub/publisher.py``)."""
        try:
            for i, (k, v) in zip(pair_idx, pairs or []):
                self._pairs[int(i)] = (intern(str(k)), None if v is None else str(v))
            for i, idx in zip(set_idx, sets or []):
                self._sets[int(i)] = LabelSet.of([self._pairs[j] for j in idx])
        except (TypeError, ValueError, KeyError) as exc:
            raise WireError(f"malformed label table: {type(exc).__name__}: {str(exc)[:100]}") from None

    def _take_labels(self, labels: Any, p: _Pending) -> None:
        try:
            for n, sid in (labels or {}).items():
                p.labels[n] = self._sets[sid]
        except (TypeError, KeyError) as exc:
            raise WireError(f"a label set not in the table: {str(exc)[:100]}") from None

    @property
    def loading(self) -> bool:
        """A snapshot is still coming in (the dashboard shows its first part meanwhile)."""
        return self._parts_left > 0

    def _take_meta(self, msg: dict[str, Any]) -> None:
        self.hub_now = float(msg["now"])
        self.seq = int(msg.get("seq", 0))
        self.name = str(msg.get("name", self.name))
        meta = msg.get("meta") or {}
        self._meta = meta
        if "settings" in meta:
            self.settings = from_wire(Settings, meta["settings"])
        self._zones = from_wire(list[ZoneView], meta.get("zones", []))
        self._clusters = from_wire(list[ClusterView], meta.get("clusters", []))
        if msg["k"] == "snap":
            self._cluster_names = [c.name for c in self._clusters]
        self._health = from_wire(dict[str, WatchHealth], meta.get("health", {}))
        self._counts = {s: int((meta.get("counts") or {}).get(s.name, 0)) for s in NodeState}
        self._problems = from_wire(list[Problem], meta.get("recent_problems", []))
        self.frames += 1

    def set_connected(self, connected: bool, error: str = "") -> None:
        with self.lock:
            if connected == self.connected and not error:
                return
            self.connected = connected
            self.last_error = error
            if connected:
                self._lost_at_wall = self._lost_at_hub = None
            elif self._lost_at_wall is None:
                self._lost_at_wall = time.monotonic()
                self._lost_at_hub = self.hub_now

    # --- read by the dashboard ---------------------------------------------------------------------

    def _apply_pending(self) -> None:
        p = self._pending
        order_of = merged_order(self._cluster_names) if self._cluster_names else sort_key
        if p.snapshot:
            self._rows = sorted(p.up.values(), key=order_of)
            self._pos = {}
            self._stale = 0
            self.nodes = dict(p.labels)
        elif p.up or p.gone:
            rows, pos = self._rows, self._view_positions()
            out = [pos[n] for n in p.gone if n in pos] + [pos[n] for n in p.up if n in pos]
            if not out and _follows(rows, list(p.up.values()), order_of):
                # the rest of a snapshot: its parts are slices of the hub's order, each after the last
                self._stale = len(rows)  # (positions were up to date just above)
                rows.extend(p.up.values())
            elif len(out) + len(p.up) > BULK:  # (thousands at once: one sort)
                views = {v.key: v for v in rows}
                for n in p.gone:
                    views.pop(n, None)
                views.update(p.up)
                self._rows = sorted(views.values(), key=order_of)
                self._pos = {}
                self._stale = 0
            else:
                low = len(rows)
                for i in sorted(out, reverse=True):  # (from the end: the places before stay right)
                    del pos[rows[i].key]
                    del rows[i]
                    low = i
                for v in p.up.values():
                    i = bisect_left(rows, order_of(v), key=order_of)
                    rows.insert(i, v)
                    low = min(low, i)
                self._stale = low if low < len(rows) else None  # (positions were up to date just above)
            for n in p.gone:
                self.nodes.pop(n, None)
            self.nodes.update(p.labels)
        if p.renew:
            rows, pos = self._rows, self._view_positions()
            for n, moved in p.renew.items():
                at = pos.get(n)
                if at is not None:  # (the renewed fields are in no sort key: the view keeps its place)
                    rows[at] = _renewed(rows[at], moved)
        self._pending = _Pending()

    def _view_positions(self) -> dict[str, int]:
        """``_pos``, brought up to date from ``_stale`` on (only the places after an insertion or
        removal moved)."""
        start = self._stale
        if start is not None:
            rows, pos = self._rows, self._pos
            if start == 0:
                pos = self._pos = {v.key: i for i, v in enumerate(rows)}
            else:
                for i in range(start, len(rows)):
                    pos[rows[i].key] = i
            self._stale = None
        return self._pos

    def _view(self, key: str) -> NodeView | None:
        i = self._view_positions().get(key)
        return None if i is None else self._rows[i]

    def evaluate(self, now: float) -> FleetView:
        """The fleet as the hub evaluated it last (``now`` is the hub's, from the clock of the
        viewer source); blind while the hub is not connected."""
        with self.lock:
            self._apply_pending()
            m = self._meta
            health = dict(self._health)
            health[HUB_STREAM] = WatchHealth(HUB_STREAM, connected=self.connected, synced=self.hub_now is not None and not self.loading,
                                             last_activity=self.hub_now, down_since=self._lost_at_hub,
                                             last_error=self.last_error)
            blind, reason = bool(m.get("leases_blind")), str(m.get("blind_reason", ""))
            if not self.connected:
                blind, reason = True, self._lost_reason()
            fv = self._published = FleetView(
                at=now, settings=self.settings, nodes=tuple(self._rows), zones=tuple(self._zones),
                counts=dict(self._counts), all_zones_full=bool(m.get("all_zones_full")), leases_blind=blind,
                blind_reason=reason, health=health, generation=int(m.get("generation", 0)),
                statefulset_at_risk=int(m.get("statefulset_at_risk", 0)),
                controller_suspect=bool(m.get("controller_suspect")), clusters=tuple(self._clusters),
                awaiting_renewals=int(m.get("awaiting_renewals", 0)), cordoned=int(m.get("cordoned", 0)),
            )
            return fv

    def published(self) -> FleetView | None:
        """The latest snapshot ``evaluate`` returned (None before the first)."""
        return self._published

    def _lost_reason(self) -> str:
        if self.hub_now is None:
            return f"not connected to the hub yet ({self.last_error or 'connecting'})"
        gone = time.monotonic() - (self._lost_at_wall or time.monotonic())
        at = clock_time(self._lost_at_hub) if self._lost_at_hub is not None else "?"
        return (f"hub connection lost {gone:.0f}s ago ({self.last_error or 'closed'}); reconnecting. "
                f"The screen shows the fleet as of {at}")

    def lists_completed(self) -> int:
        """None here: the hub lists; its frames come at its own pace."""
        return 0

    def first_lease_list(self) -> int | None:
        """None: the hub judges; a viewer shows its frames as they come."""
        return None

    def node_count(self) -> int:
        with self.lock:
            return len(self._rows) if not self._pending.snapshot else len(self._pending.up)

    def has_node(self, name: str) -> bool:
        with self.lock:
            return name in self._view_positions()

    def problem_count(self) -> int:
        with self.lock:
            return int(self._meta.get("problems", 0))

    def recent_problems(self, n: int) -> list[Problem]:
        with self.lock:
            recent = self._problems
        return recent[-n:] if n > 0 else []

    def problem_counts(self) -> tuple[int, int]:
        """(errors, notices) of the hub's state; the split is known for the recent problems sent."""
        with self.lock:
            total = int(self._meta.get("problems", 0))
            notices = sum(1 for p in self._problems if p.kind == PROBLEM_NOTICE)
        return total - notices, notices

    def node_labels(self, name: str) -> dict[str, str] | None:
        with self.lock:
            got = self.nodes.get(name)
            if got is None:
                return None
            labels = self._label_dicts.get(name)
            if labels is None or labels[0] is not got:
                labels = self._label_dicts[name] = (got, got.labels(name.rpartition("/")[2]))
            return labels[1]

    def pod_records_on(self, nodes: list[str]) -> dict[str, list[PodRecord]]:
        """Empty: a viewer holds no pods (the hub's drill-down frames carry one node's pod views),
        so a viewer's own fleet timeline has no eviction marks."""
        return {}

    def node_details(self, name: str, now: float, *, max_pods: int | None = None,
                     max_events: int | None = None) -> NodeDetails:
        """The drill-down: the hub's last details of ``name`` (asked for with ``focus_node``), with
        the current view; until they arrive, the view alone."""
        with self.lock:
            view = self._view(name)
            got = self._details
        if got is None or got[0] != name:
            if view is None:
                return NodeDetails(name=name, now=now, view=None, record=None, lease=None, cert=None)
            return NodeDetails(name=view.name, now=now, view=view, record=None, lease=None, cert=None,
                               cluster=view.cluster)
        d = got[1]  # (named as the hub's state names it: the node's name, and its cluster)
        return NodeDetails(name=d.name, now=now, view=view, record=d.record, lease=d.lease, cert=d.cert,
                           pods=d.pods[:max_pods], events=d.events[:max_events], timeline=d.timeline,
                           cluster=d.cluster, server_version=d.server_version)

    def details_watched(self, name: str) -> bool | None:
        """Does the hub watch the pods and events of ``name`` (its cap on scoped watches)? None: unknown."""
        with self.lock:
            got = self._details
        return got[2] if got is not None and got[0] == name else None

    def details_not_watched(self, name: str) -> str | None:
        if self.details_watched(name) is not False:
            return None
        cap = self._details_cap
        at_most = f"{cap} nodes at most" if cap is not None else "a limited number of nodes"
        return (f"not watched (the hub watches the pods and events of {at_most}: the nodes its viewers "
                "drill into, newest first, then nodes not Ready)")


class LabelSet:
    """The labels nodes have in common, and the keys whose value is the node's own name."""

    __slots__ = ("own", "shared")

    def __init__(self, shared: tuple[tuple[str, str], ...], own: tuple[str, ...]) -> None:
        self.shared = shared
        self.own = own

    @classmethod
    def of(cls, pairs: list[tuple[str, str | None]]) -> LabelSet:
        return cls(tuple((k, v) for k, v in pairs if v is not None), tuple(k for k, v in pairs if v is None))

    def labels(self, name: str) -> dict[str, str]:
        return {**dict(self.shared), **dict.fromkeys(self.own, name)}


def _follows(rows: list[NodeView], new: list[NodeView], order_of: Callable[[NodeView], Any]) -> bool:
    """Whether ``new``, in its order, is sorted and comes after every view of ``rows``: then the
    rows stay sorted with it appended, without a sort of all of them (which, once a part while a
    snapshot of 130 parts comes in, made the loading quadratic)."""
    if not new:
        return False
    keys = [order_of(v) for v in new]
    if rows and order_of(rows[-1]) > keys[0]:
        return False
    return all(a <= b for a, b in zip(keys, keys[1:]))


def _renewals(entries: list) -> list[tuple[str, tuple]]:
    """A delta's ``renew`` entries (``[key, *RENEW_FIELDS]``) as (key, values); WireError if malformed."""
    try:
        out = []
        for key, observed, duration, skew, nxt in entries:
            if not isinstance(key, str):
                raise TypeError("a key that is not a string")
            out.append((key, (observed, shared_float(duration), skew, math.inf if nxt is None else nxt)))
        return out
    except (TypeError, ValueError) as exc:
        raise WireError(f"malformed renewal: {type(exc).__name__}: {str(exc)[:100]}") from None


def _renewed(v: NodeView, moved: tuple) -> NodeView:
    observed, duration, skew, nxt = moved
    return replace(v, lease_observed_at=observed, lease_duration=duration, skew=skew, next_change=nxt)
