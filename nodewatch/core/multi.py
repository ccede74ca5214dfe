"""Several clusters as one fleet: "every node that is not Ready, anywhere".

Each cluster keeps its own ``FleetState`` (its own settings: the grace its own API server's
version implies, or its own override), judged by its own node lifecycle controller's rules; nothing
of one cluster ever changes the verdict on another. ``MultiFleet`` answers the ``FleetReader``
questions over all of them:

- ``evaluate(now)`` is one ``FleetView``: nodes worst first across every cluster (by state, then
  the nearest deadline; equal deadlines, and Ready nodes, grouped by cluster, each cluster's by
  name), states counted over all, zones named
  ``cluster/zone`` (the controller judges each cluster's zones apart), the watch health of each
  resource the worst of any cluster, and one ``ClusterView`` per cluster for the cluster strip.
- Node names may repeat across clusters: every question about one node takes its key,
  ``cluster/name`` (``NodeView.key``).

A cluster that cannot be read at all (credentials rejected, refused, no kubeconfig entry) is not
left out: its ``ClusterView`` carries the error, so it is a red cell, never a blank.

A replay of a recording of several clusters rebuilds a ``MultiFleet`` too: it seeks with
``snapshot``/``restore`` (one keyframe per cluster) and applies each line to its cluster's state
(``state_of``).
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from .fleet import FleetState
from .keyframe import Keyframe
from .objects import PodRecord
from .rules import NodeState, ZoneState
from .settings import Settings
from .text import duration
from .views import (
    HEALTH_BAD,
    HEALTH_OK,
    HEALTH_WARN,
    ClusterView,
    FleetView,
    NodeDetails,
    NodeView,
    Problem,
    WatchHealth,
)

STATES_BY_RANK = tuple(sorted(NodeState, key=lambda s: s.rank))
_MERGE_KEY = operator.attrgetter("sort_deadline")
"""Within one state, across clusters: the nearest deadline first. The sort is stable and each
cluster's part is already in its fleet order, so ties keep cluster order, then name: a float key
sorts 60,000 views several times faster than the tuple of ``fleet_data.sort_key``."""
REQUIRED_STREAMS = ("nodes", "leases")
"""Without these a cluster's fleet cannot be judged: their trouble is the cluster's health."""


class ClusterState(FleetState):
    """A ``FleetState`` whose views say which cluster they belong to."""

    def __init__(self, cluster: str, settings: Settings | None = None, **kw: object) -> None:
        super().__init__(settings, cluster=cluster, **kw)  # type: ignore[arg-type]
        self.cluster = cluster
        """Every view of this state names it (built in: views are frozen, never set after)."""


def _no_error() -> str | None:
    return None


@dataclass
class Member:
    """One cluster of a ``MultiFleet``: its name (the context, or the fleet file's name for it),
    its state, and how to learn why it cannot be read (the source knows; the state does not)."""

    name: str
    state: FleetState
    error: Callable[[], str | None] = _no_error
    context: str | None = None
    """Its kubeconfig context, when known (``status`` says it)."""


def cluster_health(view: FleetView, error: str | None, now: float) -> tuple[str, str]:
    """(level, words) for one cluster's watch: an error first, then the required streams
    (forbidden, down, listing), then a blind lease stream, then the optional ones."""
    if error:
        return HEALTH_BAD, error
    health = view.health
    for res in REQUIRED_STREAMS:
        h = health.get(res)
        if h is None:
            continue
        if h.forbidden:
            return HEALTH_BAD, f"{res} forbidden"
        if not h.connected and h.down_since is None and h.last_error in ("", "connecting"):
            return HEALTH_WARN, "connecting"
        if not h.connected:
            since = f" {duration(now - h.down_since)}" if h.down_since is not None else ""
            why = f": {h.last_error}" if h.last_error else ""
            return HEALTH_BAD, f"{res} down{since}{why}"
    for res in REQUIRED_STREAMS:
        h = health.get(res)
        if h is not None and not h.synced:
            return HEALTH_WARN, f"{res} listing"
    if view.leases_blind:
        return HEALTH_WARN, view.blind_reason
    for res in sorted(health):
        h = health[res]
        if h.forbidden or not h.connected:
            return HEALTH_WARN, f"{res} {'forbidden' if h.forbidden else 'down'}"
    return HEALTH_OK, "ok"


def cluster_view(name: str, view: FleetView, error: str | None, now: float) -> ClusterView:
    level, words = cluster_health(view, error, now)
    return ClusterView(
        name=name, settings=view.settings, nodes=len(view.nodes),
        not_ready=len(view.nodes) - view.counts.get(NodeState.READY, 0),
        zones_disrupted=sum(1 for z in view.zones if z.state is not ZoneState.NORMAL),
        statefulset_at_risk=view.statefulset_at_risk, all_zones_full=view.all_zones_full,
        controller_suspect=view.controller_suspect, health=level, health_text=words, error=error or "",
        blind_reason=(view.blind_reason or "lease stream blind") if view.leases_blind and view.nodes else "",
    )


def worst_health(resource: str, hs: list[WatchHealth]) -> WatchHealth:
    """One resource's health over several clusters: connected and synced only if every cluster's
    stream is; the earliest outage; the first error."""
    down = [h for h in hs if not h.connected]
    errors = [h.last_error for h in hs if h.last_error]
    return WatchHealth(
        resource=resource,
        connected=not down,
        synced=all(h.synced for h in hs),
        last_activity=min((h.last_activity for h in hs if h.last_activity is not None), default=None),
        down_since=min((h.down_since for h in down if h.down_since is not None), default=None),
        relists=sum(h.relists for h in hs),
        last_error=errors[0] if errors else "",
        forbidden=any(h.forbidden for h in hs),
    )


def merge_views(named: list[tuple[str, FleetView]], clusters: list[ClusterView], now: float,
                seq: int = 0) -> FleetView:
    """One fleet view of several: see the module docstring. ``seq``: which publication of the
    merged fleet this is (the members' own snapshots keep theirs)."""
    nodes: list[NodeView] = []
    starts = [0] * len(named)
    counts = {s: 0 for s in NodeState}
    for s in STATES_BY_RANK:
        part: list[NodeView] = []
        for i, (_, v) in enumerate(named):
            n = v.counts.get(s, 0)
            part.extend(v.nodes[starts[i]:starts[i] + n])
            starts[i] += n
        counts[s] = len(part)
        if s is not NodeState.READY and len(named) > 1:
            part.sort(key=_MERGE_KEY)
        nodes.extend(part)
    zones = [dataclasses.replace(z, name=f"{name}/{z.name}") for name, v in named for z in v.zones]
    resources = sorted({r for _, v in named for r in v.health})
    health = {r: worst_health(r, [v.health[r] for _, v in named if r in v.health]) for r in resources}
    blind = [(name, v.blind_reason) for name, v in named if v.leases_blind and v.nodes]
    first = named[0][1].settings if named else Settings()
    return FleetView(
        at=now, settings=first, nodes=tuple(nodes), zones=tuple(zones), counts=counts,
        all_zones_full=any(v.all_zones_full for _, v in named),
        leases_blind=bool(blind), blind_reason="; ".join(f"{name}: {why}" for name, why in blind),
        health=health, generation=sum(v.generation for _, v in named),
        statefulset_at_risk=sum(v.statefulset_at_risk for _, v in named),
        controller_suspect=any(v.controller_suspect for _, v in named), clusters=tuple(clusters), seq=seq,
        awaiting_renewals=sum(v.awaiting_renewals for _, v in named), cordoned=sum(v.cordoned for _, v in named),
    )


def merged_order(cluster_names: list[str]) -> Callable[[NodeView], tuple[int | float | str, ...]]:
    """The sort key of ``merge_views``'s order, for a reader that keeps the merged views sorted
    itself (a hub's viewer): within a state that is not Ready, the nearest deadline, then cluster
    order, then name; Ready nodes by cluster, then as their cluster orders them."""
    index = {name: i for i, name in enumerate(cluster_names)}
    last = len(index)
    ready = NodeState.READY.rank

    def key(v: NodeView) -> tuple[int | float | str, ...]:
        rank, i = v.state.rank, index.get(v.cluster, last)
        return (rank, i, v.sort_deadline, v.name) if rank == ready else (rank, v.sort_deadline, i, v.name)

    return key


class MultiFleet:
    """Every ``FleetReader`` question over several clusters; see the module docstring."""

    def __init__(self, members: list[Member]) -> None:
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise ValueError(f"two clusters have the same name: {names}")
        self.members = list(members)
        self._by_name = {m.name: m for m in members}
        self._longest_first = sorted(members, key=lambda m: len(m.name), reverse=True)
        self._publish_lock = threading.Lock()
        """Two evaluations at once (the UI's tick, a hub's ticker) publish one after the other."""
        self._seq = 0
        self._published: FleetView | None = None

    @property
    def cluster_names(self) -> list[str]:
        return [m.name for m in self.members]

    def member(self, name: str) -> Member | None:
        return self._by_name.get(name)

    def split(self, key: str) -> tuple[Member, str] | None:
        """The cluster and node name of a node key (``NodeView.key``), or None for no cluster of ours."""
        for m in self._longest_first:
            if key.startswith(m.name) and key[len(m.name):len(m.name) + 1] == "/":
                return m, key[len(m.name) + 1:]
        return None

    def state_of(self, cluster: str) -> FleetState | None:
        """The state of the cluster called ``cluster`` (a recorded line's), or None."""
        m = self._by_name.get(cluster)
        return None if m is None else m.state

    def empty_copy(self) -> "MultiFleet":
        """The same clusters with the same settings, and nothing applied (a replay's scratch)."""
        return MultiFleet([Member(m.name, ClusterState(m.name, m.state.settings,
                                                       silence_seconds=m.state.silence_seconds), m.error,
                                  m.context)
                           for m in self.members])

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every cluster's ``batch`` at once: readers see a run of events whole."""
        with ExitStack() as stack:
            for m in self.members:
                stack.enter_context(m.state.batch())
            yield

    def snapshot(self, prev: tuple[Keyframe, ...] | None = None) -> tuple[Keyframe, ...]:
        """One keyframe per cluster, in cluster order (``prev``: the previous one, to share with)."""
        return tuple(m.state.snapshot(prev[i] if prev else None) for i, m in enumerate(self.members))

    def restore(self, kf: tuple[Keyframe, ...] | None) -> None:
        """Every cluster becomes its keyframe (None: empty), in place."""
        for i, m in enumerate(self.members):
            m.state.restore(kf[i] if kf else None)

    def node_view(self, name: str, now: float) -> NodeView | None:
        """One node's view by its key (``cluster/name``)."""
        hit = self.split(name)
        return None if hit is None else hit[0].state.node_view(hit[1], now)

    def evaluate_each(self, now: float) -> list[tuple[Member, FleetView]]:
        """Each cluster's own view at ``now`` (``status`` answers per cluster)."""
        return [(m, m.state.evaluate(now)) for m in self.members]

    def evaluate(self, now: float) -> FleetView:
        """Every cluster evaluated at ``now`` and merged: published as one snapshot (``published()``),
        built only of the members' published snapshots."""
        each = self.evaluate_each(now)
        clusters = [cluster_view(m.name, v, m.error(), now) for m, v in each]
        with self._publish_lock:
            self._seq += 1
            fv = merge_views([(m.name, v) for m, v in each], clusters, now, self._seq)
            self._published = fv
        return fv

    def published(self) -> FleetView | None:
        """The latest merged snapshot ``evaluate`` published (None before the first); see
        ``FleetState.published``."""
        return self._published

    # --- the rest of FleetReader ---------------------------------------------------------------

    def lists_completed(self) -> int:
        """Lists completed, every cluster's together."""
        return sum(m.state.lists_completed() for m in self.members)

    def node_count(self) -> int:
        return sum(m.state.node_count() for m in self.members)

    def first_lease_list(self) -> int | None:
        """The leases received so far of the clusters whose first lease list is coming in (None: none is)."""
        listing = [n for n in (m.state.first_lease_list() for m in self.members) if n is not None]
        return sum(listing) if listing else None

    def has_node(self, name: str) -> bool:
        hit = self.split(name)
        return hit is not None and hit[0].state.has_node(hit[1])

    def problem_count(self) -> int:
        return sum(m.state.problem_count() for m in self.members)

    def problem_counts(self) -> tuple[int, int]:
        errors = notices = 0
        for m in self.members:
            e, n = m.state.problem_counts()
            errors, notices = errors + e, notices + n
        return errors, notices

    def recent_problems(self, n: int) -> list[Problem]:
        """The last ``n`` problems of every cluster, oldest first, each saying which cluster."""
        out = [Problem(p.at, f"{m.name}: {p.where}", p.message, p.kind)
               for m in self.members for p in m.state.recent_problems(n)]
        out.sort(key=lambda p: -1e300 if p.at is None else p.at)
        return out[-n:] if n > 0 else []

    def node_details(self, name: str, now: float, *, max_pods: int | None = None,
                     max_events: int | None = None) -> NodeDetails:
        hit = self.split(name)
        if hit is None:
            return NodeDetails(name=name, now=now, view=None, record=None, lease=None, cert=None)
        m, node = hit
        d = m.state.node_details(node, now, max_pods=max_pods, max_events=max_events)
        d.cluster = m.name
        return d

    def details_not_watched(self, name: str) -> str | None:
        hit = self.split(name)
        return None if hit is None else hit[0].state.details_not_watched(hit[1])

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        hit = self.split(name)
        return None if hit is None else hit[0].state.node_labels(hit[1])

    def pod_records_on(self, nodes: list[str]) -> dict[str, list[PodRecord]]:
        wanted: dict[str, list[tuple[str, str]]] = {}
        for key in nodes:
            hit = self.split(key)
            if hit is not None:
                wanted.setdefault(hit[0].name, []).append((key, hit[1]))
        out: dict[str, list[PodRecord]] = {}
        for cluster, pairs in wanted.items():
            got = self._by_name[cluster].state.pod_records_on([n for _, n in pairs])
            for key, n in pairs:
                out[key] = got.get(n, [])
        return out
