"""What the fleet state hands its readers: per-node views, zones, pods, and the stream health.

Plain data, no behaviour beyond small derived values: the dashboard and ``status`` read these and
nothing else of the state's internals.

The published snapshot (``FleetView``, its ``NodeView`` s, ``ZoneView`` s and ``ClusterView`` s) is
frozen: the evaluator replaces a view when its node changes and never writes into one a reader may
hold (docs/snapshots.md). ``NodeView`` is a frozen ``msgspec.Struct``, not a frozen dataclass: a
frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, measured 1.9 us a
view against 0.08 us for the Struct (0.16 us for the mutable dataclass it replaces), and 65,000 are
built on each of the first two frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from .causes import Cause
from .objects import EventRecord, NodeRecord
from .rules import NodeState, Taint, ZoneState, cert_level
from .settings import Settings

RESOURCES = ("nodes", "leases", "pods", "events", "certificatesigningrequests")
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "SYNCED")
MAX_EVENTS_PER_NODE = 200
MAX_TIMELINE = 64
MAX_BEATS = 32
"""Receive times of a node's last lease renewals kept for its heartbeat history (per node: 32
doubles in an ``array``, ~0.3 KB; ~20 MB at 65,000 nodes)."""
AT_RISK_STATES = (NodeState.UNKNOWN, NodeState.EVICTING, NodeState.EVICTED)


@dataclass(slots=True)
class LeaseTrack:
    """One node's Lease as nodewatch saw it arrive. The state updates its own in place on each
    renewal (the hot path); readers get a copy (``NodeDetails.lease``)."""

    renew_time: float | None
    observed_at: float | None
    """Receive time of the event that advanced ``renew_time`` (or ``renew_time`` when unknown)."""
    skew: float | None
    """Receive time minus renewTime at the last observed renewal: the node's clock offset plus delay."""
    duration: float
    holder: str
    renewals: int = 0
    age_from: str = "receipt"
    """Where ``observed_at`` came from: one of ``AGE_FROM``'s keys."""
    unrenewed: tuple[float, float] | None = None
    """(receive time, renewTime) of the Lease's last write on the synced watch since the renewal
    counted last that did not move renewTime on: the controller counts only a renewTime newer than
    the last it saw. An older renewTime: the kubelet renews, but its clock stepped back (``skew`` is
    then that write's); the same: another writer (an annotation, a label). From 1.37 the
    controller skips such a node rather than mark it Unknown (``causes.lease_not_renewed``).
    None once a renewal counts, or none was seen."""


AGE_FROM = {
    "receipt": "when nodewatch received the renewal",
    "server": "the API server's write time",
    "server-bound": "the API server's write time (an upper bound of the age: before v1.25 that "
                    "time moves only when the kubelet's fields change)",
    "renewTime": "renewTime: node clock",
}
"""How a lease's age was measured. A renewal received on the watch is timed by its receipt; one
that arrived in a list happened at some earlier moment, told by the API server's own write time
(``LeaseRecord.written_at``) or else by renewTime, which is on the node's clock."""


@dataclass(slots=True)
class WatchHealth:
    """How one resource's stream is doing. Part of the state so the UI can say when it is blind."""

    resource: str
    connected: bool = False
    synced: bool = False
    last_activity: float | None = None
    """Receive time of the last event or bookmark."""
    down_since: float | None = None
    relists: int = 0
    last_error: str = ""
    forbidden: bool = False


PROBLEM_ERROR = "error"
PROBLEM_NOTICE = "notice"


@dataclass(slots=True)
class Problem:
    """Something nodewatch could not use, said where and why; or (``kind`` notice) a limit it works
    within that the operator should know of (only 50 of 4,338 nodes' pods watched, TLS unverified)."""

    at: float | None
    where: str
    message: str
    kind: str = PROBLEM_ERROR
    """``error``: data or a request that failed; ``notice``: nothing failed, but something is limited."""


class NodeView(msgspec.Struct, frozen=True, gc=False):
    """A node judged by the rules. Absolute times, so one view serves every ``now`` until
    ``next_change``. Frozen: a new view replaces it when the node changes (``msgspec.structs.replace``
    for a renewal). Not tracked by the garbage collector (``gc=False``: a view holds only strings,
    numbers, enums and tuples of frozen records, never a cycle), so 65,000 of them add nothing to a
    collection's pause. Fields in this order: the evaluator and the hub's codec build views
    positionally (tests/core/test_evaluation_paths.py keeps the order)."""

    name: str
    zone: str
    state: NodeState
    ready: str | None
    lease_observed_at: float | None
    """Ages are ``now - lease_observed_at``; None when unknown or while the dashboard is blind."""
    lease_duration: float
    grace: float
    skew: float | None
    eviction_at: float | None
    taints: tuple[Taint, ...]
    cordoned: bool
    pressure: tuple[str, ...]
    network_unavailable: bool
    cert_not_after: float | None
    kubelet_version: str
    causes: tuple[Cause, ...]
    state_since: float | None
    """When the current state began, as far as the API shows (Ready transition, taint, lease)."""
    next_change: float
    """The next time at which the rules could give a different state (inf: only a new object can)."""
    sort_deadline: float
    excluded: bool = False
    """Labelled node.kubernetes.io/exclude-disruption: not counted in its zone."""
    cluster: str = ""
    """The cluster the node belongs to when several are watched at once ("": the only one)."""

    @property
    def key(self) -> str:
        """What names this node wherever several clusters meet (rows, drill-down, search): its name
        alone in a one-cluster run, ``cluster/name`` otherwise (see ``node_key``)."""
        return node_key(self.cluster, self.name)

    def lease_age(self, now: float) -> float | None:
        return None if self.lease_observed_at is None else now - self.lease_observed_at

    def grace_remaining(self, now: float) -> float | None:
        age = self.lease_age(now)
        return None if age is None else self.grace - age

    def eviction_in(self, now: float) -> float | None:
        return None if self.eviction_at is None else self.eviction_at - now

    def cert_level(self, now: float) -> str:
        return cert_level(self.cert_not_after, now)

    @property
    def cause(self) -> str:
        return "; ".join(c.text for c in self.causes)


def node_key(cluster: str, name: str) -> str:
    """``cluster/name``, or the name alone without a cluster. Node names never contain a slash (the
    API server takes them as one path segment), so the last slash separates the two; the multi-cluster
    reader splits by its known cluster names anyway (``core/multi.py``)."""
    return f"{cluster}/{name}" if cluster else name


def zone_key(v: NodeView) -> str:
    """The name of the node's zone as the fleet view lists it: prefixed by its cluster when there
    is one (two clusters may both have a zone ``eu-west-1a``; the controller judges each apart)."""
    return f"{v.cluster}/{v.zone}" if v.cluster else v.zone


@dataclass(frozen=True, slots=True)
class ZoneView:
    name: str
    state: ZoneState
    nodes: int
    ready: int
    not_ready: int
    taint_rate: float


@dataclass(slots=True)
class PodView:
    namespace: str
    name: str
    owner_kind: str
    owner_name: str
    phase: str
    terminating: bool
    eviction_at: float | None
    statefulset_risk: bool
    disruption_target: bool


HEALTH_OK = "ok"
HEALTH_WARN = "warn"
HEALTH_BAD = "bad"


@dataclass(frozen=True, slots=True)
class ClusterView:
    """One cluster of several, in a line: what the cluster strip and ``status`` say of it."""

    name: str
    settings: Settings
    nodes: int
    not_ready: int
    zones_disrupted: int
    statefulset_at_risk: int
    all_zones_full: bool
    controller_suspect: bool
    health: str
    """``HEALTH_OK``, ``HEALTH_WARN`` (listing, blind) or ``HEALTH_BAD`` (down, forbidden, an error)."""
    health_text: str
    """What is wrong with the watch, in a few words (``ok``, ``listing``, ``nodes down 2m``)."""
    error: str = ""
    """Why the cluster cannot be read at all (credentials rejected, refused, bad kubeconfig), or ""."""
    blind_reason: str = ""
    """Why its leases cannot be trusted to judge its nodes right now (``FleetView.blind_reason``), or ""."""


@dataclass(frozen=True, slots=True)
class FleetView:
    """The fleet as one evaluation published it: what one frame shows (the dashboard keeps the
    one it drew, ``NodewatchApp.view``; the table the one its rows came from, ``FleetTable.shown``).
    Frozen, and so is every view in it; its dicts and lists were built for this snapshot alone and
    nothing writes to them after it is published (readers must not either). ``FleetState.published()``
    is the latest one."""

    at: float
    """The ``now`` it was evaluated at."""
    settings: Settings
    nodes: tuple[NodeView, ...]
    """Worst first: state rank, then the next deadline, then name."""
    zones: tuple[ZoneView, ...]
    counts: dict[NodeState, int]
    all_zones_full: bool
    leases_blind: bool
    blind_reason: str
    health: dict[str, WatchHealth]
    generation: int
    statefulset_at_risk: int
    controller_suspect: bool
    """Nodes stay Overdue past grace + 2 monitor periods with Ready still True: the node controller may be down."""
    clusters: tuple[ClusterView, ...] = ()
    """One summary per cluster when several are watched at once; empty for a one-cluster fleet."""
    seq: int = 0
    """Which publication of its state this is (1, 2, ...; 0: not published by a state, e.g. a hub
    viewer's copy of the hub's frame). Two frames showed the same fleet if they hold the same seq."""
    awaiting_renewals: int = 0
    """Leases whose listed age is not evidence yet (``core/evidence.py``): their nodes are judged as
    if the lease age were unknown until they renew on the watch or one renewal interval passes."""
    cordoned: int = 0
    """How many of ``nodes`` are cordoned (``spec.unschedulable``), whatever their state: counted by
    the evaluator as it counts states, so a frame's header costs nothing per node."""

    def node(self, name: str) -> NodeView | None:
        for v in self.nodes:
            if v.name == name:
                return v
        return None


@dataclass(slots=True)
class CertInfo:
    """A kubelet client certificate's NotAfter and where nodewatch learned it. Replaced, never mutated."""

    not_after: float
    source: str


@dataclass(slots=True)
class NodeDetails:
    """Everything the state knows of one node, taken in one go under its lock (the drill-down, and
    ``status --node``): the view, the Node record, a copy of the lease track, the certificate date,
    its pods, events and timeline. Drawn later without the lock."""

    name: str
    now: float
    view: NodeView | None
    record: NodeRecord | None
    """The Node as last received. Records are replaced, never mutated, by the state: safe to keep."""
    lease: LeaseTrack | None
    """A copy of the state's track, taken with the rest."""
    cert: CertInfo | None
    pods: list[PodView] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    timeline: list[tuple[float, str]] = field(default_factory=list)
    beats: list[float] = field(default_factory=list)
    """Receive times of the node's last observed lease renewals, oldest first (at most
    ``MAX_BEATS``); NaN marks a gap (a relist: renewals in between were not seen)."""
    cluster: str = ""
    """The node's cluster when several are watched ("": the only one)."""
    server_version: str | None = None
    """The release of the node's API server (None: not known), on which some advice depends
    (``fencing.fencing_advice``)."""
