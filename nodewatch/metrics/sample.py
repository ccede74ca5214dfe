"""The one place the metrics read the fleet: ``take_sample(source)`` turns the source's latest
published snapshot into a ``FleetSample``, plain frozen values that the collector and the
Alertmanager pusher read without any lock.

A scrape reads ``published()`` (``docs/snapshots.md``): the frozen ``FleetView`` the hub's ticker
or the dashboard judged last, one per cluster of a ``MultiFleet`` (each judged by its own
settings). It never evaluates the state itself, so a scrape neither costs a judgement under the
state's lock (the hub's frame waited for it) nor moves the evaluation's clock (a reader whose
clock was read before the scrape's used to make the state judge every node again, ~0.25 s at
65k). The sample is the frame's: its time is the snapshot's ``at``, lease ages are measured to it.
Only when no frame is coming (nothing published yet, or the latest older than ``STALE_SECONDS``
on the source's clock: a headless source, a stopped screen) does a scrape evaluate, at the
source's clock, as every scrape used to. The StatefulSet pods of the nodes at risk come from
``pod_records_on``, a query.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass, field
from typing import Any

from ..core.causes import CauseKind
from ..core.multi import REQUIRED_STREAMS
from ..core.outlook import AWAITING_TAINT, window_in
from ..core.rules import NodeState, cert_level, eviction_taints
from ..core.views import AT_RISK_STATES, FleetView

NODES_ALL = "all"
NODES_NOT_READY = "not-ready"
NODE_MODES = (NODES_ALL, NODES_NOT_READY)

_ROW = operator.attrgetter("cluster", "name", "zone", "state", "ready", "lease_observed_at", "grace",
                           "eviction_at", "cert_not_after", "taints", "causes")


@dataclass(frozen=True, slots=True)
class NodeSample:
    cluster: str
    name: str
    zone: str
    state: NodeState
    ready: str | None
    lease_age: float | None
    """Seconds since the last renewal nodewatch observed, on nodewatch's clock; None when unknown
    or while the lease stream is blind."""
    grace: float
    taint_at: float | None
    """When the NoExecute taint (unreachable / not-ready) was added, or None."""
    eviction_at: float | None
    """When pods without their own toleration are evicted (taint + default toleration), or None."""
    cert_not_after: float | None
    statefulset_pods: int
    """StatefulSet pods on the node while it is at risk (Unknown, Evicting, Evicted); else 0."""
    taint_expected_at: float | None = None
    """For a node not Ready and not tainted yet: the earliest its NoExecute taint can come, by its
    zone's queue (``core/outlook.py``); None when none is coming or it cannot be told."""
    controller_skips: bool = False
    """The node controller skips the node rather than mark it Unknown (``CauseKind.CONTROLLER_SKIPS``:
    its Lease was written since the last renewal it counted, 1.37+): no Unknown, no eviction."""

    @property
    def grace_remaining(self) -> float | None:
        return None if self.lease_age is None else self.grace - self.lease_age


@dataclass(frozen=True, slots=True)
class ZoneSample:
    cluster: str
    zone: str
    state: str
    nodes: int
    ready: int
    not_ready: int
    taint_rate: float


@dataclass(frozen=True, slots=True)
class StreamSample:
    cluster: str
    resource: str
    connected: bool
    synced: bool
    forbidden: bool
    relists: int

    @property
    def up(self) -> bool:
        return self.connected and self.synced and not self.forbidden


@dataclass(frozen=True, slots=True)
class ClusterSample:
    cluster: str
    nodes: int
    counts: tuple[tuple[NodeState, int], ...]
    error: str
    leases_blind: bool
    blind_reason: str
    all_zones_full: bool
    controller_suspect: bool
    grace: float
    streams_tracked: bool
    """False for a source without watch streams (the demo, a replay): nothing to be down."""
    listed: bool = True
    """Nodes and Leases listed in full (a SYNCED applied for each)."""
    toleration: float = 300.0
    """The default ``unreachable`` toleration node evictions are counted with (``Settings.toleration``)."""


@dataclass(frozen=True, slots=True)
class RecorderSample:
    """The flight recorder's room: how fast it writes and how long its size cap holds at that rate
    (issue "Flight recorder II": the hub says it on start, and ``/metrics`` says it all along, so a
    cap that no longer holds the promised day is seen before the postmortem needs the hours it lost)."""

    bytes_per_second: float | None
    """Written a second so far (None in the first minute: the initial lists are written at once)."""
    keep_bytes: int | None
    """``--keep-bytes``, None without a size cap."""
    keep_seconds: float | None
    """``--keep``, None without an age limit."""

    @property
    def cap_holds_seconds(self) -> float | None:
        """How long the size cap holds at the rate so far (None: no cap, or no rate yet)."""
        if self.keep_bytes is None or not self.bytes_per_second:
            return None
        return self.keep_bytes / self.bytes_per_second


def recorder_sample(recorder: Any) -> RecorderSample | None:
    """The room of a rotating flight recorder (``SegmentedRecorder``); None for a plain recording
    (``watch --record``: one file, no cap) or none."""
    rate = getattr(recorder, "bytes_per_second", None)
    if rate is None:
        return None
    return RecorderSample(rate(), getattr(recorder, "keep_bytes", None), getattr(recorder, "keep_seconds", None))


@dataclass(frozen=True, slots=True)
class FleetSample:
    at: float
    nodes: tuple[NodeSample, ...]
    """Every node (``all``) or only those whose state is not Ready (``not-ready``), worst first."""
    zones: tuple[ZoneSample, ...]
    streams: tuple[StreamSample, ...]
    clusters: tuple[ClusterSample, ...]
    nodes_mode: str = NODES_ALL
    certs_expiring: tuple[NodeSample, ...] = field(default_factory=tuple)
    """In ``not-ready`` mode, the Ready nodes whose kubelet certificate is within its warning
    window (``cert_level`` warn, critical, expired): the certificate alert still sees them."""
    recording: str | None = None
    """The flight recorder: None without one, "" while it records, else why it stopped
    (``recording stopped: disk full``)."""
    recorder: RecorderSample | None = None
    """A rotating flight recorder's rate and caps (a hub's); None for any other source."""

    def ready(self) -> tuple[bool, str]:
        """(every cluster listed and its required streams up, why not)."""
        for c in self.clusters:
            if c.error:
                return False, f"{c.cluster or 'cluster'}: {c.error}"
            if not c.listed:
                return False, f"{c.cluster or 'cluster'}: nodes and leases not listed yet"
        for s in self.streams:
            if s.resource in REQUIRED_STREAMS and not s.up:
                what = "forbidden" if s.forbidden else ("listing" if s.connected else "down")
                return False, f"{s.cluster or 'cluster'}: {s.resource} stream {what}"
        # A stopped recording is said, not failed: the hub still judges and serves every screen,
        # and a failed readiness probe would take it out of its Service (the alert pages instead).
        return True, f"ok; {self.recording}" if self.recording else "ok"


def cluster_label(source: Any) -> str:
    """The ``cluster`` label of a one-cluster source: its kubeconfig context, ``demo`` for the
    demo, else "" (several clusters name their own)."""
    target = getattr(source, "target", None)
    if target is not None and getattr(target, "context", None):
        return str(target.context)
    if type(source).__name__ == "DemoSource":
        return "demo"
    return ""


def take_sample(source: Any, *, nodes: str = NODES_ALL, cluster: str | None = None) -> FleetSample:
    """The fleet as its latest published snapshot shows it, in ``nodes`` mode (``NODE_MODES``)."""
    state = source.state
    multi = hasattr(state, "evaluate_each")
    each = _published(source, cluster if cluster is not None else cluster_label(source))
    now = max(fv.at for _, _, fv, _ in each)
    listed = {name: ok for name, _, _, ok in each}
    parts = [(name, error, fv, _copy(fv, nodes)) for name, error, fv, _ in each]
    expected = {(name, n): t for name, _, fv, _ in each for n, t in _taint_windows(name, fv, multi).items()}
    risky = [(name, r[1]) for name, _, _, (rows, _) in parts for r in rows if r[3] in AT_RISK_STATES]
    pods = state.pod_records_on([_key(state, c, n) for c, n in risky]) if risky else {}
    out_nodes: list[NodeSample] = []
    expiring: list[NodeSample] = []
    zones: list[ZoneSample] = []
    streams: list[StreamSample] = []
    clusters: list[ClusterSample] = []
    for name, error, fv, (rows, cert_rows) in parts:
        for r in rows:
            ss = 0
            if r[3] in AT_RISK_STATES:
                recs = pods.get(_key(state, name, r[1]), ())
                ss = sum(1 for p in recs if p.owner_kind == "StatefulSet")
            out_nodes.append(_node(name, r, fv.at, ss, expected.get((name, r[1]))))
        expiring.extend(_node(name, r, fv.at, 0) for r in cert_rows)
        zones.extend(ZoneSample(name, z.name, z.state.value, z.nodes, z.ready, z.not_ready, z.taint_rate)
                     for z in fv.zones)
        streams.extend(StreamSample(name, res, h.connected, h.synced, h.forbidden, h.relists)
                       for res, h in sorted(fv.health.items()))
        clusters.append(ClusterSample(
            name, len(fv.nodes), tuple((s, fv.counts.get(s, 0)) for s in NodeState), error, fv.leases_blind,
            fv.blind_reason, fv.all_zones_full, fv.controller_suspect, fv.settings.grace, bool(fv.health),
            listed[name], fv.settings.toleration))
    recorder = getattr(source, "recorder", None)
    recording = None if recorder is None else str(getattr(recorder, "stopped", "") or "")
    return FleetSample(now, tuple(out_nodes), tuple(zones), tuple(streams), tuple(clusters), nodes,
                       tuple(expiring), recording, recorder_sample(recorder))


STALE_SECONDS = 2.0
"""A published snapshot older than this (two frames: the hub and the dashboard publish one a second) means
no frame is coming: the scrape judges the fleet itself rather than report an old one."""


def _published(source: Any, one: str) -> list[tuple[str, str, FleetView, bool]]:
    """(cluster, error, its latest published view, nodes and leases listed) for each cluster;
    one evaluation at the source's clock first when a cluster has no fresh snapshot."""
    state = source.state
    members = [(m.name, m.error, m.state) for m in state.members] if hasattr(state, "evaluate_each") \
        else [(one, _no_error, state)]
    now = source.clock.now()
    if any(_stale(st.published(), now) for _, _, st in members):
        state.evaluate(now)
    out = []
    for name, error, st in members:
        fv = st.published()
        assert fv is not None  # just evaluated if it was missing
        out.append((name, error() or "", fv, st.is_synced(*REQUIRED_STREAMS)))
    return out


def _stale(fv: FleetView | None, now: float) -> bool:
    return fv is None or now - fv.at > STALE_SECONDS


def _no_error() -> str | None:
    return None


def _key(state: Any, cluster: str, name: str) -> str:
    """How the state names a node: ``cluster/name`` in a ``MultiFleet``, the name alone otherwise."""
    return f"{cluster}/{name}" if hasattr(state, "evaluate_each") else name


def _copy(fv: FleetView, nodes: str) -> tuple[list[tuple], list[tuple]]:
    """The fields of the views (worst first): every view, or the views not Ready plus
    (separately) the Ready nodes whose certificate nears expiry at the snapshot's time."""
    now = fv.at
    if nodes == NODES_ALL:
        return list(map(_ROW, fv.nodes)), []
    rows, certs = [], []
    for v in fv.nodes:
        if v.state is not NodeState.READY:
            rows.append(_ROW(v))
        elif v.cert_not_after is not None and cert_level(v.cert_not_after, now) not in ("ok", "unknown"):
            certs.append(_ROW(v))
    return rows, certs


MAX_TAINT_QUEUE = 500
"""Nodes awaiting their taint in one cluster beyond which no expected time is worked out: each
node's window replays its zone's queue (``taint_window``), so the cost is the square of the queue;
500 waiting nodes cost ~10 ms; a larger queue is a zone outage whose alerts say
enough (and whose taints, at 0.01 nodes/s, are hours away)."""


def _taint_windows(cluster: str, fv: FleetView, multi: bool) -> dict[str, float]:
    """Earliest NoExecute taint of each node awaiting one, by ``outlook.window_in``, on a view of
    the nodes not Ready only (the queue is made of them; the Ready ones would only be skipped)."""
    bad = [v for v in fv.nodes if v.state is not NodeState.READY]
    waiting = [v for v in bad if v.state in AWAITING_TAINT]
    if not waiting or len(waiting) > MAX_TAINT_QUEUE:
        return {}
    zones = fv.zones
    if multi:  # a cluster's own view names its zones bare; window_in looks them up by cluster/zone
        zones = tuple(dataclasses.replace(z, name=f"{cluster}/{z.name}") for z in zones)
    view = dataclasses.replace(fv, nodes=tuple(bad), zones=zones)
    out = {}
    for v in waiting:
        w = window_in(view, v)
        if w is not None:
            out[v.name] = w.earliest
    return out


def _node(cluster: str, r: tuple, now: float, statefulset_pods: int, taint_expected_at: float | None = None) -> NodeSample:
    _, name, zone, state, ready, observed, grace, eviction_at, cert, taints, causes = r
    taint_at = None
    if taints:
        times = [t.time_added for t in eviction_taints(taints) if t.time_added is not None]
        taint_at = min(times) if times else None
    age = None if observed is None else now - observed
    if age is not None and not math.isfinite(age):
        age = None
    skips = any(c.kind is CauseKind.CONTROLLER_SKIPS for c in causes)
    return NodeSample(cluster, name, zone, state, ready, age, grace, taint_at, eviction_at, cert, statefulset_pods,
                      taint_expected_at, skips)
