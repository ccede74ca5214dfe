"""The fleet over time: how many nodes were in each state, and the moments worth jumping to.

The dashboard's timeline strip, ``nodewatch report`` and (later) the hub all ask the same
questions of the past: what did the fleet look like a minute ago, when did a zone change state,
when did the controller taint a node NoExecute, when was a pod evicted. ``HistoryRecorder``
answers them by *sampling* the one ``FleetState`` a source feeds, about once a second: each sample
evaluates the state (incremental, so cheap) and walks only the nodes that are not Ready (the worst-
first order puts them first), so a quiet 65,000-node fleet costs a few counters per sample.

A recording is sampled in one pass over a scratch state (``sample_recording``), in the background
for the dashboard; a live or demo source is sampled on the dashboard's own ticks. Memory is bounded
either way: past ``MAX_SAMPLES`` samples, neighbours are merged (keeping the worse of the two, so
a short outage never disappears from the picture) and the sampling step doubles; the lists of
marks and node changes keep their newest entries (the report's window is sampled with room).
"""

from __future__ import annotations

import bisect
import enum
import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .causes import CauseKind
from .rules import EVICTION_TAINTS, NodeState, ZoneState
from .settings import Settings
from .views import AT_RISK_STATES, FleetView, zone_key

if TYPE_CHECKING:
    from .objects import PodRecord
    from .source import FleetReader

STATE_ORDER: tuple[NodeState, ...] = tuple(sorted(NodeState, key=lambda s: s.rank))
"""Worst first: the order of a sample's counts."""
SKIPPED = CauseKind.CONTROLLER_SKIPS.value
"""The cause kind of a node the controller skips rather than mark Unknown (1.37+): down, Late as it stays."""
DOWN_STATES = frozenset(s for s in NodeState if s.rank <= NodeState.OVERDUE.rank)
"""Past the grace or worse: the states a report calls "down" (Late is a slow renewal, not an outage)."""
SAMPLE_SECONDS = 1.0
MAX_SAMPLES = 8192
MAX_MARKS = 5000
MAX_CHANGES = 20000
MAX_PODS = 5000


class MarkKind(enum.Enum):
    """What a mark on the timeline stands for; ``letter`` reads without colour."""

    ZONE = ("zone", "Z", "zone state changed")
    TAINT = ("taint", "T", "NoExecute taint added")
    EVICTION = ("eviction", "E", "pod evicted")

    def __init__(self, word: str, letter: str, meaning: str) -> None:
        self.word = word
        self.letter = letter
        self.meaning = meaning


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    counts: tuple[int, ...]
    """Nodes per state, in ``STATE_ORDER``."""

    def count(self, state: NodeState) -> int:
        return self.counts[state.rank]

    @property
    def not_ready(self) -> int:
        return sum(self.counts[:-1])

    @property
    def down(self) -> int:
        return sum(self.counts[: NodeState.OVERDUE.rank + 1])


@dataclass(frozen=True, slots=True)
class Mark:
    at: float
    """When nodewatch saw it: the sample time (seek here and the change is on screen)."""
    kind: MarkKind
    subject: str
    """The zone, node or ``namespace/pod`` (untrusted: cluster strings)."""
    text: str
    """What happened, plain words (cluster strings inside it are untrusted too)."""
    happened: float | None = None
    """The API's own time for it when it has one (a taint's ``timeAdded``), else None."""


@dataclass(frozen=True, slots=True)
class NodeChange:
    """A node entered a state (``before`` None: first seen in it, at the start of the sampling)."""

    at: float
    node: str
    zone: str
    before: NodeState | None
    after: NodeState | None
    """None: the node was deleted."""
    cause: str
    cause_kinds: tuple[str, ...]
    """The ``CauseKind`` values of the cause, most telling first."""
    since: float | None
    """The view's ``state_since``: when the API says the state began (it can precede ``at``)."""
    stopped_renewing: float | None
    """The last lease renewal seen, when the node is past its grace (else None)."""


@dataclass(frozen=True, slots=True)
class ZoneChange:
    at: float
    zone: str
    before: ZoneState | None
    after: ZoneState
    taint_rate: float
    """The controller's NoExecute tainting rate in this zone from then on (nodes/s)."""
    nodes: int
    not_ready: int
    at_start: bool = False
    """Found so in a first look (the lists coming in): the zone was in this state before the window."""


@dataclass(frozen=True, slots=True)
class PodAtRisk:
    """A pod seen terminating on a tainted node (evicted), or a StatefulSet pod on a node gone dark."""

    at: float
    namespace: str
    name: str
    node: str
    owner_kind: str
    owner_name: str
    at_start: bool = False
    """At risk already when the window began (a StatefulSet pod found on a node found down)."""


@dataclass(frozen=True, slots=True)
class BlindPeriod:
    start: float
    end: float | None
    """None: still blind at the last sample."""
    reason: str
    cluster: str = ""
    """Whose lease stream, when several clusters are watched ("": the only one)."""


class HistoryRecorder:
    """Samples of one state's fleet; see the module docstring. Thread-safe: one writer (the sampler)
    and readers on other threads (the dashboard's paint)."""

    def __init__(self, *, max_samples: int = MAX_SAMPLES, step: float = SAMPLE_SECONDS) -> None:
        self.lock = threading.Lock()
        self.max_samples = max(16, max_samples)
        self.step = step
        self.samples: list[Sample] = []
        self.marks: deque[Mark] = deque(maxlen=MAX_MARKS)
        self.changes: deque[NodeChange] = deque(maxlen=MAX_CHANGES)
        self.zone_changes: deque[ZoneChange] = deque(maxlen=MAX_MARKS)
        self.evictions: deque[PodAtRisk] = deque(maxlen=MAX_PODS)
        self.statefulset_at_risk: deque[PodAtRisk] = deque(maxlen=MAX_PODS)
        self.blind: deque[BlindPeriod] = deque(maxlen=MAX_MARKS)
        self.nodes_seen = 0
        self.health_tracked = False
        """Did the source report its streams' health (a live source, a recording with health lines)?"""
        self.complete = False
        """True once a recording's sampling reached its end (live histories never complete)."""
        self._bucket_end = -math.inf
        self._states: dict[str, tuple[NodeState, str]] = {}
        self._zones: dict[str, ZoneState] = {}
        self._taints: set[tuple[str, str, float | None]] = set()
        self._terminating: set[tuple[str, str]] = set()
        self._pods_seen: set[tuple[str, str]] = set()
        self._risk_seen: dict[str, tuple[float, bool]] = {}
        """The pods on nodes at risk in the previous sample, and those nodes. An eviction is a pod
        seen there and now terminating, or a pod of a node that has just come to be at risk (its
        NoExecute taint is new: a toleration of 0 s evicts at once); a pod first seen terminating on
        a node at risk before (its pod list came in late) was evicted at a time nodewatch never saw.
        Each node with when it came to be at risk, and whether it was so in the first look."""
        self._sts: set[tuple[str, str]] = set()
        self._blind_open: dict[str, BlindPeriod] = {}
        """The blind periods still open, by cluster ("" for a one-cluster fleet)."""
        self._first = True
        self._lists_in = False
        self._looking_since: float | None = None
        self._last_at: float | None = None

    # --- reading ---------------------------------------------------------------------------------

    @property
    def start(self) -> float | None:
        with self.lock:
            return self.samples[0].at if self.samples else None

    @property
    def end(self) -> float | None:
        with self.lock:
            return self._last_at

    def samples_between(self, a: float, b: float) -> list[Sample]:
        """The samples in [a, b], with the last one before ``a`` (what the fleet was at ``a``)."""
        with self.lock:
            times = [s.at for s in self.samples]
            i = max(0, bisect.bisect_right(times, a) - 1)
            j = bisect.bisect_right(times, b)
            return self.samples[i:j]

    def all_samples(self) -> list[Sample]:
        with self.lock:
            return list(self.samples)

    def all_marks(self) -> list[Mark]:
        with self.lock:
            return list(self.marks)

    def next_mark(self, after: float) -> Mark | None:
        """The first mark later than ``after`` (by at least half a sample: the one at ``after`` is
        where a previous jump landed)."""
        with self.lock:
            for m in self.marks:
                if m.at > after + self.step / 2:
                    return m
        return None

    def peak(self) -> Sample | None:
        """The first sample with the most nodes down (past the grace or worse); when none was down,
        the first with the most not Ready. The first: the report says the peak came "at" its time,
        which is where its timeline (a row each time the count of nodes down changed) shows that
        count first; a Late node later beside the same count (not down, not in that table) made it
        name a later time than any row."""
        with self.lock:
            if not self.samples:
                return None
            most = max(s.down for s in self.samples)
            if most:
                return next(s for s in self.samples if s.down == most)
            return max(self.samples, key=lambda s: (s.not_ready, -s.at))

    # --- sampling ----------------------------------------------------------------------------------

    def observe(self, state: FleetReader, view: FleetView) -> None:
        """One sample of ``view`` (``state.evaluate(t)``), and the marks since the previous sample.
        ``state`` is asked only for the pods of nodes at risk."""
        t = view.at
        with self.lock:
            if self._last_at is not None and t < self._last_at:
                self._reset()  # time went backwards (a new run): start over
            if self._first and not view.nodes:
                return  # no node known yet (a recording's first lines): "0 down" would be no statement
            first = self._first
            # until the Node and Lease lists are in, each sample is a first look: a node first seen
            # in a list that spans samples (seconds at 65,000 nodes) was down before, not going down
            if self._looking_since is None:
                self._looking_since = t
            self._lists_in = self._lists_in or _lists_in(view) or t - self._looking_since >= FIRST_LOOK_MAX
            self._first = not self._lists_in
            self._last_at = t
            self.nodes_seen = max(self.nodes_seen, len(view.nodes))
            self.health_tracked = self.health_tracked or bool(view.health)
            self._add_sample(t, tuple(view.counts.get(s, 0) for s in STATE_ORDER))
            self._observe_zones(view, first)
            self._observe_blind(view)
            at_risk = self._observe_nodes(view, first)
        # Pods are read outside our lock (the state takes its own).
        pods = state.pod_records_on(at_risk)
        with self.lock:
            self._observe_pods(t, pods, at_risk, first)

    def finish(self) -> None:
        """The sampled run is over (a recording's end)."""
        with self.lock:
            self.complete = True

    def _reset(self) -> None:
        self.samples.clear()
        for d in (self.marks, self.changes, self.zone_changes, self.evictions, self.statefulset_at_risk, self.blind):
            d.clear()
        self._bucket_end = -math.inf
        self._states, self._zones, self._taints = {}, {}, set()
        self._terminating, self._sts, self._pods_seen, self._risk_seen = set(), set(), set(), {}
        self._blind_open = {}
        self._first = True
        self._lists_in = False
        self._looking_since = None

    def _add_sample(self, t: float, counts: tuple[int, ...]) -> None:
        s = Sample(t, counts)
        if self.samples and t < self._bucket_end:
            last = self.samples[-1]
            if _worse(s, last):
                self.samples[-1] = Sample(last.at, counts)
            return
        self.samples.append(s)
        self._bucket_end = t + self.step * 0.999
        if len(self.samples) > self.max_samples:
            self._halve()

    def _halve(self) -> None:
        """Merge neighbours, keeping the worse of each pair, and sample half as often."""
        old = self.samples
        merged = []
        for i in range(0, len(old) - 1, 2):
            a, b = old[i], old[i + 1]
            merged.append(Sample(a.at, b.counts if _worse(b, a) else a.counts))
        if len(old) % 2:
            merged.append(old[-1])
        self.samples = merged
        self.step *= 2
        self._bucket_end = merged[-1].at + self.step * 0.999

    def _observe_zones(self, view: FleetView, first: bool) -> None:
        seen = {}
        for z in view.zones:
            seen[z.name] = z.state
            before = self._zones.get(z.name)
            if before is z.state:
                continue
            if first or before is not None or z.state is not ZoneState.NORMAL:
                self.zone_changes.append(ZoneChange(view.at, z.name, before, z.state, z.taint_rate, z.nodes,
                                                    z.not_ready, first and before is None))
            if not first and (before is not None or z.state is not ZoneState.NORMAL):
                was = before.value if before is not None else "new"
                self.marks.append(Mark(view.at, MarkKind.ZONE, z.name, f"{was} -> {z.state.value}"))
        self._zones = seen

    def _observe_blind(self, view: FleetView) -> None:
        """Blind periods: of the fleet, or of each cluster when several are watched."""
        if view.clusters:
            now = {c.name: c.blind_reason for c in view.clusters if c.blind_reason}
        else:
            now = {"": view.blind_reason} if view.leases_blind else {}
        for cluster, reason in now.items():
            if cluster not in self._blind_open:
                period = self._blind_open[cluster] = BlindPeriod(view.at, None, reason, cluster)
                self.blind.append(period)
        for cluster in [c for c in self._blind_open if c not in now]:
            period = self._blind_open.pop(cluster)
            for i in range(len(self.blind) - 1, -1, -1):
                if self.blind[i] is period:
                    self.blind[i] = BlindPeriod(period.start, view.at, period.reason, cluster)
                    break

    def _observe_nodes(self, view: FleetView, first: bool) -> list[str]:
        """Node changes and NoExecute taints, from the nodes that are not Ready; returns the nodes
        whose pods are at risk."""
        t = view.at
        now_states: dict[str, tuple[NodeState, str]] = {}
        taints: set[tuple[str, str, float | None]] = set()
        at_risk = []
        for v in view.nodes:
            if v.state is NodeState.READY:
                break  # worst first: the rest are Ready
            key = v.key  # cluster/name when several clusters meet
            now_states[key] = (v.state, v.cause)
            if v.state in AT_RISK_STATES:
                at_risk.append(key)
            for taint in v.taints:
                if taint.effect == "NoExecute" and taint.key in EVICTION_TAINTS:
                    tk = (key, taint.key, taint.time_added)
                    taints.add(tk)
                    if not first and tk not in self._taints:
                        self.marks.append(Mark(t, MarkKind.TAINT, key,
                                               f"{taint.key.rsplit('/', 1)[-1]}:NoExecute", taint.time_added))
            prev = self._states.get(key)
            if prev is None or prev[0] is not v.state:
                age = v.lease_age(t)
                kinds = tuple(c.kind.value for c in v.causes)
                # past the grace, or Late with renewals the controller will never count: it skips the
                # node (1.37+), which never goes past Late however long the kubelet has been silent
                stopped = (v.lease_observed_at if age is not None and (age > v.grace or SKIPPED in kinds)
                           else None)
                self.changes.append(NodeChange(t, key, zone_key(v), prev[0] if prev else (None if first else NodeState.READY),
                                               v.state, v.cause, kinds, v.state_since, stopped))
        gone = [name for name in self._states if name not in now_states]
        if gone:
            ready = {v.key: v for v in view.nodes[len(now_states):]}
            for name in gone:
                now_ready = ready.get(name)
                self.changes.append(NodeChange(t, name, zone_key(now_ready) if now_ready else "", self._states[name][0],
                                               NodeState.READY if now_ready else None, "", (),
                                               now_ready.state_since if now_ready else None, None))
        self._states = now_states
        self._taints = taints
        return at_risk

    def _observe_pods(self, t: float, pods: dict[str, list[PodRecord]], at_risk: list[str], first: bool) -> None:
        terminating: set[tuple[str, str]] = set()
        sts: set[tuple[str, str]] = set()
        seen: set[tuple[str, str]] = set()
        before, risk_before = self._pods_seen, self._risk_seen
        risk_now = {node: risk_before.get(node) or (t, first) for node in at_risk}
        tainted = {name for name, _, _ in self._taints}
        for node in at_risk:
            for p in pods.get(node, ()):
                key = (p.namespace, p.name)
                seen.add(key)
                item = PodAtRisk(t, p.namespace, p.name, node, p.owner_kind, p.owner_name)
                sts_risk = p.owner_kind == "StatefulSet"  # on a node at risk: the rule of ``Queries.pods_on``
                if p.terminating and node in tainted:
                    terminating.add(key)
                    if not first and key not in self._terminating and (key in before or node not in risk_before):
                        self.evictions.append(item)
                        self.marks.append(Mark(t, MarkKind.EVICTION, f"{p.namespace}/{p.name}", f"evicted from {node}"))
                if sts_risk:
                    sts.add(key)
                    if key not in self._sts:
                        if node in risk_before and key not in before:  # its pod list came in late
                            at, at_start = risk_now[node]
                            item = PodAtRisk(at, p.namespace, p.name, node, p.owner_kind, p.owner_name, at_start)
                        elif first:
                            item = PodAtRisk(t, p.namespace, p.name, node, p.owner_kind, p.owner_name, True)
                        self.statefulset_at_risk.append(item)
        self._terminating = terminating
        self._sts = sts
        self._pods_seen = seen
        self._risk_seen = risk_now


FIRST_LOOK_MAX = 120.0
"""Seconds a first look may last while the lists do not come in (a stream that keeps failing): after
them, what changes is a change again."""


def _lists_in(view: FleetView) -> bool:
    """The Node and Lease lists are in, or will not come (forbidden), or no stream health says (a
    kubectl log)."""
    nodes, leases = view.health.get("nodes"), view.health.get("leases")
    return nodes is None or leases is None or ((nodes.synced or nodes.forbidden) and (leases.synced or leases.forbidden))


def _worse(a: Sample, b: Sample) -> bool:
    return (a.down, a.not_ready) > (b.down, b.not_ready)


class EventRun(Protocol):
    """A recording's events in time order, applied by index (the replay's ``EventIndex``)."""

    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def times(self) -> object: ...
    def __len__(self) -> int: ...
    def apply_range(self, state: Any, a: int, b: int) -> None:
        """Apply events ``a`` to ``b`` to ``state``: the scratch state ``sample_recording`` was
        given or built (a ``FleetState``, or the caller's ``MultiFleet``), whatever its type."""


def sample_recording(events: EventRun, settings: Settings | None, *, start: float | None = None,
                     end: float | None = None, recorder: HistoryRecorder | None = None,
                     step: float = SAMPLE_SECONDS, stop: threading.Event | None = None,
                     state: Any = None,
                     progress: Callable[[float, float], None] | None = None) -> HistoryRecorder:
    """Sample a recording in one pass over a scratch state: every ``step`` seconds of virtual time
    from ``start`` to ``end`` (default: the whole recording), each sample after applying every
    event up to that time. ``stop`` ends it early (the dashboard closed); ``recorder.complete``
    says whether it ran to the end. ``state``: the empty scratch state (a recording of several
    clusters needs one per cluster, ``core/multi.py``); default a ``FleetState(settings)``.
    ``progress(t, end)``: called at each sample (a command's progress line)."""
    from .fleet import FleetState  # the state is built here; the recorder only reads views

    rec = recorder or HistoryRecorder(step=step)
    start = events.start if start is None else start
    # an index still being built (a replay's, in the background): follow it to its end
    growing = end is None and not getattr(events, "complete", True) and hasattr(events, "wait_for")
    end = math.inf if growing else events.end if end is None else end
    scratch = state if state is not None else FleetState(settings)
    times = events.times
    i = 0
    t = start
    while True:
        if stop is not None and stop.is_set():
            return rec
        if growing:
            while not events.wait_for(t, 0.5):  # type: ignore[attr-defined]  # every event up to t indexed
                if stop is not None and stop.is_set():
                    return rec
            times = events.times
            if events.complete:  # type: ignore[attr-defined]
                growing = False
                end = events.end
                t = min(t, end)
        j = bisect.bisect_right(times, t, 0, len(events))  # type: ignore[call-overload]
        if j > i:
            events.apply_range(scratch, i, j)
            i = j
        rec.observe(scratch, scratch.evaluate(t))
        if progress is not None:
            progress(t, end)
        if t >= end:
            break
        t = min(end, t + rec.step)
    rec.finish()
    return rec


class BackgroundHistory:
    """A recording's history sampled by a daemon thread; readable (partly) at once."""

    def __init__(self, events: EventRun, settings: Settings | None, state: Any = None) -> None:
        """``state``: the empty scratch state, as for ``sample_recording``."""
        self.recorder = HistoryRecorder()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(events, settings, state), name="history",
                                        daemon=True)
        self._thread.start()

    def _run(self, events: EventRun, settings: Settings | None, state: Any) -> None:
        try:
            sample_recording(events, settings, recorder=self.recorder, stop=self._stop, state=state)
        except (OSError, ValueError):
            return  # the replay was closed, and its file with it

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
