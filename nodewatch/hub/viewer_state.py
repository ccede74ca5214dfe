"""The fleet as a hub's viewer holds it: the hub's evaluated views, not watch events.

``ViewerState`` implements ``core.source.FleetReader``, the questions the dashboard asks a
``FleetState``, from the frames of a hub. It never runs a rule: every view, count and zone is the
hub's, evaluated at the hub's ``now``, so every screen attached to one hub shows the same thing.

Frames are decoded by the connection thread and merged into ``_pending``; they are applied when the
dashboard next calls ``evaluate`` (on its own thread), as the core applies its own changes inside
``evaluate``: a view handed to the dashboard is never changed while it is being drawn.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedKeyList

from ..core.fleet_data import sort_key
from ..core.format import clock_time
from ..core.rules import NodeState
from ..core.settings import Settings
from ..core.objects import PodRecord
from ..core.views import PROBLEM_NOTICE, FleetView, NodeDetails, NodeView, Problem, WatchHealth, ZoneView
from .codec import from_wire, view_from_wire

HUB_STREAM = "hub"
"""The pseudo-stream in the header's health list that says whether the hub is connected."""


class LabelRecord:
    """What the label search needs of a node record: its labels, as shared (key, value) pairs."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self.pairs = pairs

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.pairs)


@dataclass
class _Pending:
    """Frames received and not yet applied, merged (a slow dashboard does not pile them up)."""

    snapshot: bool = False
    up: dict[str, NodeView] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    labels: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


class ViewerState:
    """See the module docstring. Thread-safe: the connection thread feeds, the UI reads."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.nodes: dict[str, LabelRecord] = {}
        """Labels by node name, for ``core.search.LabelSearch``."""
        self.settings = Settings()
        self._views: dict[str, NodeView] = {}
        self._order: SortedKeyList = SortedKeyList(key=sort_key)
        self._pairs: list[tuple[str, str]] = []
        self._pending = _Pending()
        self._meta: dict[str, Any] = {}
        self._zones: list[ZoneView] = []
        self._health: dict[str, WatchHealth] = {}
        self._counts: dict[NodeState, int] = {s: 0 for s in NodeState}
        self.hub_now: float | None = None
        """The hub's clock in the last frame received (None: nothing received yet)."""
        self.name = ""
        self.seq = 0
        self.connected = False
        self.last_error = "connecting"
        self._lost_at_wall: float | None = None
        self._lost_at_hub: float | None = None
        self._details: tuple[str, NodeDetails, bool] | None = None
        self._problems: list[Problem] = []
        self._label_dicts: dict[str, tuple[LabelRecord, dict[str, str]]] = {}
        self.frames = 0

    # --- fed by the connection thread -------------------------------------------------------------

    def receive(self, msg: dict[str, Any]) -> None:
        """One decoded frame (``snap``, ``delta`` or ``details``). Raises codec.WireError."""
        kind = msg["k"]
        if kind == "details":
            node = str(msg.get("node"))
            d = from_wire(NodeDetails, msg.get("d"))
            with self.lock:
                self._details = (node, d, bool(msg.get("watched", True)))
            return
        if kind == "snap":
            pairs = [(str(k), str(v)) for k, v in msg.get("pairs", [])]
            views = {v.name: v for v in (view_from_wire(w) for w in msg.get("nodes", []))}
            labels = {n: tuple(pairs[i] for i in idx) for n, idx in (msg.get("labels") or {}).items()}
            with self.lock:
                self._pairs = pairs
                self._pending = _Pending(snapshot=True, up=views, labels=labels)
                self._take_meta(msg)
            return
        if kind == "delta":
            up = [view_from_wire(w) for w in msg.get("up", [])]
            with self.lock:
                if msg.get("pairs"):
                    start = int(msg.get("pairs_from", len(self._pairs)))
                    del self._pairs[start:]
                    self._pairs.extend((str(k), str(v)) for k, v in msg["pairs"])
                pairs = self._pairs
                p = self._pending
                for v in up:
                    p.up[v.name] = v
                    p.gone.discard(v.name)
                for n in msg.get("del", []):
                    p.up.pop(n, None)
                    p.labels.pop(n, None)
                    p.gone.add(n)
                for n, idx in (msg.get("labels") or {}).items():
                    p.labels[n] = tuple(pairs[i] for i in idx)
                self._take_meta(msg)

    def _take_meta(self, msg: dict[str, Any]) -> None:
        self.hub_now = float(msg["now"])
        self.seq = int(msg.get("seq", 0))
        self.name = str(msg.get("name", self.name))
        meta = msg.get("meta") or {}
        self._meta = meta
        if "settings" in meta:
            self.settings = from_wire(Settings, meta["settings"])
        self._zones = from_wire(list[ZoneView], meta.get("zones", []))
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
        if p.snapshot:
            self._views = dict(p.up)
            self._order = SortedKeyList(self._views.values(), key=sort_key)
            self.nodes = {n: LabelRecord(pairs) for n, pairs in p.labels.items()}
        else:
            views, order = self._views, self._order
            for n in p.gone:
                old = views.pop(n, None)
                if old is not None:
                    order.remove(old)
                self.nodes.pop(n, None)
            for n, v in p.up.items():
                old = views.get(n)
                if old is not None:
                    order.remove(old)
                views[n] = v
                order.add(v)
            for n, pairs in p.labels.items():
                self.nodes[n] = LabelRecord(pairs)
        self._pending = _Pending()

    def evaluate(self, now: float) -> FleetView:
        """The fleet as the hub evaluated it last (``now`` is the hub's, from the clock of the
        viewer source); blind while the hub is not connected."""
        with self.lock:
            self._apply_pending()
            m = self._meta
            health = dict(self._health)
            health[HUB_STREAM] = WatchHealth(HUB_STREAM, connected=self.connected, synced=self.hub_now is not None,
                                             last_activity=self.hub_now, down_since=self._lost_at_hub,
                                             last_error=self.last_error)
            blind, reason = bool(m.get("leases_blind")), str(m.get("blind_reason", ""))
            if not self.connected:
                blind, reason = True, self._lost_reason()
            return FleetView(
                at=now, settings=self.settings, nodes=list(self._order), zones=list(self._zones),
                counts=dict(self._counts), all_zones_full=bool(m.get("all_zones_full")), leases_blind=blind,
                blind_reason=reason, health=health, generation=int(m.get("generation", 0)),
                statefulset_at_risk=int(m.get("statefulset_at_risk", 0)),
                controller_suspect=bool(m.get("controller_suspect")),
            )

    def _lost_reason(self) -> str:
        if self.hub_now is None:
            return f"not connected to the hub yet ({self.last_error or 'connecting'})"
        gone = time.monotonic() - (self._lost_at_wall or time.monotonic())
        at = clock_time(self._lost_at_hub) if self._lost_at_hub is not None else "?"
        return (f"hub connection lost {gone:.0f}s ago ({self.last_error or 'closed'}); reconnecting. "
                f"The screen shows the fleet as of {at}")

    def node_count(self) -> int:
        with self.lock:
            return len(self._views) if not self._pending.snapshot else len(self._pending.up)

    def has_node(self, name: str) -> bool:
        with self.lock:
            return name in self._views

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
            rec = self.nodes.get(name)
            if rec is None:
                return None
            labels = self._label_dicts.get(name)
            if labels is None or labels[0] is not rec:
                labels = self._label_dicts[name] = (rec, rec.labels)
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
            view = self._views.get(name)
            got = self._details
        if got is None or got[0] != name:
            return NodeDetails(name=name, now=now, view=view, record=None, lease=None, cert=None)
        d = got[1]
        return NodeDetails(name=name, now=now, view=view, record=d.record, lease=d.lease, cert=d.cert,
                           pods=d.pods[:max_pods], events=d.events[:max_events], timeline=d.timeline)

    def details_watched(self, name: str) -> bool | None:
        """Does the hub watch the pods and events of ``name`` (its cap on scoped watches)? None: unknown."""
        with self.lock:
            got = self._details
        return got[2] if got is not None and got[0] == name else None
