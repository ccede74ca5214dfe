"""The node lifecycle rules, as the Kubernetes controllers apply them.

One module for every rule: the dashboard judges nodes with it and the simulator's controllers
act with it, so the two cannot drift apart. Each function is pure and takes ``now`` (and every
setting) as arguments. Sources for each rule: ``docs/kubernetes-rules.md``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# --- names the API uses ---------------------------------------------------------------------

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
TAINT_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
EVICTION_TAINTS = (TAINT_NOT_READY, TAINT_UNREACHABLE)

PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
CONDITION_TAINTS = {
    "MemoryPressure": TAINT_MEMORY_PRESSURE,
    "DiskPressure": TAINT_DISK_PRESSURE,
    "PIDPressure": TAINT_PID_PRESSURE,
    "NetworkUnavailable": TAINT_NETWORK_UNAVAILABLE,
}

LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"

KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
NODE_USER_PREFIX = "system:node:"
NODE_CONTROLLER = "node-controller"
"""The node lifecycle controller's events' source."""
REGISTERED_NODE = "RegisteredNode"
"""Its event for a node at its first pass over it: the node's probe time starts there."""

UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_UPDATED_REASON = "NodeStatusNeverUpdated"
NEVER_UPDATED_MESSAGE = "Kubelet never posted node status."
"""What the controller writes into a condition the kubelet never posted, when the grace runs out."""


# --- node state --------------------------------------------------------------------------------


class NodeState(enum.Enum):
    """A node's state, worst first. ``rank`` orders the fleet table; ``word`` reads without color."""

    EVICTED = ("Evicted", 0, "✖")
    EVICTING = ("Evicting", 1, "»")
    UNKNOWN = ("Unknown", 2, "?")
    NOT_READY = ("NotReady", 3, "✗")
    OVERDUE = ("Overdue", 4, "!")
    LATE = ("Late", 5, "~")
    READY = ("Ready", 6, "✓")

    def __init__(self, word: str, rank: int, symbol: str) -> None:
        self.word = word
        self.rank = rank
        self.symbol = symbol


def renew_interval(lease_duration: float) -> float:
    """The kubelet renews its Lease every ``nodeLeaseRenewIntervalFraction`` (0.25) of its duration."""
    return 0.25 * lease_duration


def node_state(
    *,
    ready: str | None,
    lease_age: float | None,
    grace: float,
    lease_duration: float,
    eviction_taint: bool,
    eviction_deadline: float | None,
    now: float,
    probe_age: float | None | bool = False,
) -> NodeState:
    """The first match wins: Evicted, Evicting, Unknown, NotReady, Overdue, Late, Ready.

    ``ready`` is the Ready condition's status ("True", "False", "Unknown", or None when absent).
    ``lease_age`` is None when the age cannot be trusted (no lease, or the dashboard is blind):
    then Late cannot be claimed. ``probe_age`` is the age of the controller's probe time
    (``probe_time``: the newer of the renewal and the Ready heartbeat; not given: the lease's),
    which alone decides Overdue (the controller flips it): a node whose status was just posted is
    not Overdue however old its Lease, only Late.
    """
    if probe_age is False:
        probe_age = lease_age
    if eviction_taint:
        if eviction_deadline is not None and now >= eviction_deadline:
            return NodeState.EVICTED
        return NodeState.EVICTING
    if ready == "Unknown":
        return NodeState.UNKNOWN
    if ready == "False":
        return NodeState.NOT_READY
    if probe_age is not None and probe_age > grace:
        return NodeState.OVERDUE
    if lease_age is not None and lease_age > 2 * renew_interval(lease_duration):
        return NodeState.LATE
    return NodeState.READY


def unknown_due(last_probe: float, grace: float, monitor_period: float) -> tuple[float, float]:
    """When the controller flips Ready to Unknown: after ``grace``, at its next monitor pass.

    Returns the window ``(earliest, latest)``: strictly after ``last_probe + grace`` and no later
    than one monitor period after that.
    """
    return last_probe + grace, last_probe + grace + monitor_period


def probe_expired(last_probe: float, grace: float, now: float) -> bool:
    """The controller's test (``now > probeTimestamp + grace``), on its own clock."""
    return now > last_probe + grace


def probe_time(lease_observed: float | None, heartbeat: float | None) -> float | None:
    """The controller's ``probeTimestamp``: reset whenever the Ready condition's
    ``lastHeartbeatTime`` changes or the Lease's ``renewTime`` moves on (``tryUpdateNodeHealth``),
    so the newer of the two signs of life. None when neither is known.

    A node without a Lease whose status heartbeat is older than the grace is turned Unknown; a
    node whose Lease is an hour old but whose status was just posted stays Ready
    (``TestMonitorNodeHealthUpdateNodeAndPodStatusWithLease``)."""
    if lease_observed is None:
        return heartbeat
    if heartbeat is None:
        return lease_observed
    return max(lease_observed, heartbeat)


def node_grace(has_ready_condition: bool, grace: float, startup_grace: float) -> float:
    """``tryUpdateNodeHealth``: a node without a Ready condition (its kubelet never posted status)
    is judged with ``--node-startup-grace-period``, from its creation or its Lease's renewals; a
    node that posted one (even Ready=False) with ``--node-monitor-grace-period``."""
    return grace if has_ready_condition else startup_grace


def taint_queue_delay(ready: str | None, monitor_period: float, in_the_flip_pass: bool = False) -> float:
    """How long after the Ready transition the NoExecute taint can be queued at the earliest.

    Up to 1.33 ``processTaintBaseEviction`` is handed the Ready condition the pass *observed* before
    its own update: Ready=False is posted by the kubelet, so the first pass that sees it queues the
    node (the taint can land within a second of the transition); Ready=Unknown is written by the
    pass itself, which saw True, so the next pass queues it, one monitor period later. From 1.34 it
    is handed the condition after the update (``in_the_flip_pass``,
    ``settings.taint_queued_in_the_flip_pass``): the pass that writes Unknown queues the node too."""
    return 0.0 if ready == "False" or in_the_flip_pass else monitor_period


def controller_removes_eviction_taints(ready: str | None, all_zones_down: bool) -> bool:
    """Whether the node lifecycle controller takes the node's ``not-ready``/``unreachable``
    NoExecute taints off at its next pass: the node is Ready again (``processTaintBaseEviction``:
    ``markNodeAsReachable``), or every zone is in FullDisruption ("Entering master disruption
    mode": ``handleDisruption`` marks every node reachable; not the taints added since its
    entering pass began, ``master_disruption_kept``). The taint manager then cancels the pods'
    scheduled evictions."""
    return ready == "True" or all_zones_down


def effective_taints(taints: Sequence[Taint], ready: str | None, all_zones_down: bool,
                     kept: tuple[float, float] | None = None, flipped_at: float | None = None) -> Sequence[Taint]:
    """``taints`` without the eviction taints the controller is about to remove
    (``controller_removes_eviction_taints``): what the pods' countdowns are judged by.
    ``kept``: while every zone is down, the eviction taints added within this span stay
    (``master_disruption_kept``); ``flipped_at`` (1.34+, ``settings.taint_queued_in_the_flip_pass``):
    every one of a node whose Ready transition is that late stays too: the entering pass flipped
    it, so whatever eviction taint it has that pass wrote (a not-ready one swapped for unreachable
    keeps its first ``timeAdded`` here, ``keep_eviction_start``, yet was written then); None: every
    one comes off."""
    if not controller_removes_eviction_taints(ready, all_zones_down):
        return taints
    if ready != "True" and kept is not None and flipped_at is not None and flipped_at >= kept[0]:
        return taints
    if ready == "True" or kept is None:
        return tuple(t for t in taints if not (t.effect == "NoExecute" and t.key in EVICTION_TAINTS))
    since, until = kept
    return tuple(t for t in taints if not (t.effect == "NoExecute" and t.key in EVICTION_TAINTS
                                           and (t.time_added is None or not since <= t.time_added <= until)))


MARKING_SECONDS = 60.0
"""How long the entering pass's marking may run after its last flip before it swaps the limiters
(``master_disruption_kept``): a call per listed tainted node, 1,200 at 20 a second."""


def master_disruption_kept(transitions: Iterable[float], monitor_period: float) -> tuple[float, float] | None:
    """When the eviction taints that stay on while every zone is down were added: from the start of
    the monitor pass that entered master disruption mode, as the Ready transitions tell it (the
    earliest of those within one monitor period of the latest: the passes run a whole period
    apart), to ``MARKING_SECONDS`` and a period after its last flip (the pass swaps every zone's
    tainting limiter to 0 once it has marked every listed tainted node reachable, an API call each
    under the controller's client rate limit: nothing is tainted later while the mode lasts, and
    whatever was tainted before the swap is not in the list, so the bound may be generous). None
    without transitions.

    Why they stay: ``handleDisruption`` marks every node reachable from the node list the pass
    began with, and ``RemoveTaintOffNode`` skips a node whose listed copy has no such taint. The
    tainting loop, every 100 ms, taints one queued node per zone with a token while the pass is
    still writing (seconds, under the client's rate limit) and until ``handleDisruption``, after
    its "Entering master disruption mode" line and the marking, swaps the limiters to 0 (so a taint
    may be added just after that line: its time is still after the pass began). Every release
    does so for nodes queued by earlier passes whose token comes then (seen once on v1.20.2: 1 of
    16 nodes); from 1.34 the pass also queues each node it flips (``processTaintBaseEviction`` with
    the current Ready condition) and swaps a not-ready taint for unreachable at once, so more stay
    (v1.37.2: 4 and 3 of 16 nodes, docs/real-control-plane.md). The taint-eviction controller
    evicts their pods. A taint older than the span came off; one younger than it was not added by
    this controller in this mode (the upstream unit tests' fixtures carry such taints)."""
    times = sorted(transitions)
    if not times:
        return None
    last = times[-1]
    return next(t for t in times if t > last - monitor_period), last + monitor_period + MARKING_SECONDS


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""
    time_added: float | None = None


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    seconds: float | None = None
    """``tolerationSeconds``; None means tolerate forever."""


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint`` from k8s.io/api/core/v1."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator in ("", "Equal"):
        return tol.value == taint.value
    return tol.operator == "Exists"


def noexecute_taints(taints: Iterable[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect == "NoExecute"]


def eviction_taints(taints: Iterable[Taint]) -> list[Taint]:
    """The NoExecute not-ready / unreachable taints the node lifecycle controller manages."""
    return [t for t in taints if t.effect == "NoExecute" and t.key in EVICTION_TAINTS]


def keep_eviction_start(old: Sequence[Taint], new: Sequence[Taint]) -> tuple[Taint, ...]:
    """``new`` with each not-ready/unreachable NoExecute taint dated from when the first of them
    appeared, as long as one stayed on the node.

    The taint manager schedules a pod's eviction when it first sees such a taint and keeps that
    schedule while one remains (``processPodOnNode`` keeps the earlier ``CreatedAt``). The node
    lifecycle controller, meanwhile, rewrites the taint with a fresh ``timeAdded`` each time a
    duplicate of the node leaves the zone's rate-limited queue (seen on v1.20.2: every 10 s in a
    zone going down together), and swaps not-ready for unreachable in one write. Counting from the
    newest ``timeAdded`` would push the countdown back each time; the real eviction does not move
    (docs/kubernetes-rules.md, "Taints and eviction"; docs/real-control-plane.md).
    """
    before = [t.time_added for t in eviction_taints(old) if t.time_added is not None]
    if not before or not eviction_taints(new):
        return tuple(new)
    first = min(before)
    return tuple(
        Taint(t.key, t.effect, t.value, first)
        if t.effect == "NoExecute" and t.key in EVICTION_TAINTS and (t.time_added is None or t.time_added > first)
        else t
        for t in new
    )


def restarted_taints(taints: Iterable[Taint], restart: float) -> tuple[Taint, ...]:
    """The NoExecute taints as a taint-eviction controller that started at ``restart`` (a restarted
    controller manager, a new leader) times them: it starts each pod's timer when it first sees the
    taints (``processPodOnNode``: ``now``), so one added before counts from ``restart``.
    Only for a deletion that was still to come at ``restart``: one due before, the controller that
    ran then made (``evict_after_restart``)."""
    return tuple(Taint(t.key, t.effect, t.value, restart)
                 if t.effect == "NoExecute" and t.time_added is not None and t.time_added < restart else t
                 for t in taints)


def evict_after_restart(due: float | None, taints: Iterable[Taint], restart: float | None) -> bool:
    """Whether a deletion ``due`` by the taints' times is timed anew by a controller that started at
    ``restart``: it was still to come then, and a taint was there before."""
    return (due is not None and restart is not None and due > restart
            and any(t.effect == "NoExecute" and t.time_added is not None and t.time_added < restart for t in taints))


def node_eviction_deadline(taints: Iterable[Taint], toleration: Callable[[str], float]) -> float | None:
    """The earliest of the not-ready/unreachable NoExecute taints' ``timeAdded`` plus the default
    toleration of that taint (``toleration(key)``: ``Settings.toleration_for``)."""
    due = [t.time_added + toleration(t.key) for t in eviction_taints(taints) if t.time_added is not None]
    return min(due) if due else None


def min_toleration_seconds(tolerations: Sequence[Toleration]) -> float:
    """``getMinTolerationTime`` of the taint-eviction controller.

    No toleration: 0 (at once). Any ``tolerationSeconds <= 0``: 0. None set: ``inf`` (never).
    """
    if not tolerations:
        return 0.0
    best = math.inf
    for tol in tolerations:
        if tol.seconds is not None:
            if tol.seconds <= 0:
                return 0.0
            best = min(best, tol.seconds)
    return best


def matching_tolerations(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> list[Toleration] | None:
    """``GetMatchingTolerations`` (pkg/apis/core/v1/helper): for each taint the pod's FIRST
    toleration that tolerates it; None when one taint is tolerated by none (the pod goes at once).

    The first, not the smallest: a pod listing ``Exists`` (forever) before a 300 s toleration of
    ``unreachable`` tolerates it forever."""
    used: list[Toleration] = []
    for taint in taints:
        hit = next((tol for tol in tolerations if tolerates(tol, taint)), None)
        if hit is None:
            return None
        used.append(hit)
    return used


def process_pod_on_node(
    scheduled: float | None, taints: Iterable[Taint], tolerations: Sequence[Toleration], now: float
) -> float | None:
    """``processPodOnNode`` of the taint-eviction controller: what becomes of a pod's deletion when
    the controller looks at it at ``now`` (its node's NoExecute taints changed, or the pod did),
    ``scheduled`` being the deletion already scheduled (None: none). Returns the deletion time,
    None when there is none.

    No NoExecute taint: cancelled. A taint no toleration matches: at once (``now``). The first
    matching toleration of each taint tolerating forever: cancelled. Otherwise a deletion already
    scheduled stays where it is: its ``CreatedAt`` is before ``now``, so ``CreatedAt +
    minTolerationTime`` is before ``now + minTolerationTime`` and the controller returns ("lengthening
    toleration shouldn't work"; a shorter one does not bring it nearer either). Else ``now`` +
    the smallest ``tolerationSeconds`` (``getMinTolerationTime``)."""
    ne = noexecute_taints(taints)
    if not ne:
        return None
    used = matching_tolerations(ne, tolerations)
    if used is None:
        return now
    wait = min_toleration_seconds(used)
    if math.isinf(wait):
        return None
    if scheduled is not None:
        return scheduled
    return now + wait


def pod_eviction_at(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], taint_seen_at: float | None = None
) -> float | None:
    """When the taint-eviction controller deletes this pod, or None when it never will.

    ``process_pod_on_node`` replayed over the node's NoExecute taints in the order they were added
    (``timeAdded``; a taint without one counts from ``taint_seen_at``, or is judged without a time):
    the countdown starts at the first arrival after which every taint is tolerated and the smallest
    matching ``tolerationSeconds`` is finite, so taints the pod tolerates forever (a day-old
    ``dedicated=gpu:NoExecute``) do not start it and the ``unreachable`` taint that comes later does;
    a later taint no toleration matches deletes the pod when it comes. No NoExecute taint: None.

    The tolerations are the pod's own as stored: the 300 s defaults are written into a pod by the
    DefaultTolerationSeconds admission plugin when it is created (``with_default_tolerations``),
    not added by the controller; a stored pod without them goes at once.
    """
    ne = noexecute_taints(taints)
    if not ne:
        return None
    timed = sorted(((t.time_added if t.time_added is not None else taint_seen_at, i) for i, t in enumerate(ne)),
                   key=lambda x: (math.inf if x[0] is None else x[0], x[1]))
    present: list[Taint] = []
    scheduled: float | None = None
    for at, i in timed:
        if scheduled is not None and at is not None and scheduled <= at:
            return scheduled  # deleted before this taint came
        present.append(ne[i])
        if at is None:  # no time known: only whether it is tolerated at all
            if matching_tolerations(present, tolerations) is None:
                return scheduled
            continue
        scheduled = process_pod_on_node(scheduled, present, tolerations, at)
        if scheduled is not None and scheduled <= at:
            return scheduled
    return scheduled


def with_default_tolerations(tolerations: Sequence[Toleration], seconds: float) -> list[Toleration]:
    """What the DefaultTolerationSeconds admission plugin adds to a pod without its own."""
    out = list(tolerations)
    for key in EVICTION_TAINTS:
        probe = Taint(key=key, effect="NoExecute")
        if not any(tolerates(t, probe) for t in out):
            out.append(Toleration(key=key, operator="Exists", effect="NoExecute", seconds=seconds))
    return out


def condition_taints(conditions: dict[str, str], unschedulable: bool) -> set[str]:
    """NoSchedule taint keys that follow the node's conditions at once."""
    keys: set[str] = set()
    ready = conditions.get("Ready")
    if ready == "False":
        keys.add(TAINT_NOT_READY)
    elif ready == "Unknown" or ready is None:
        keys.add(TAINT_UNREACHABLE)
    for cond, key in CONDITION_TAINTS.items():
        if conditions.get(cond) == "True":
            keys.add(key)
    if unschedulable:
        keys.add(TAINT_UNSCHEDULABLE)
    return keys


def wanted_eviction_taint(ready: str | None) -> str | None:
    """The NoExecute taint the controller wants for a Ready status (None: the node is healthy)."""
    if ready == "False":
        return TAINT_NOT_READY
    if ready == "Unknown" or ready is None:
        return TAINT_UNREACHABLE
    return None


# --- zones ---------------------------------------------------------------------------------


class ZoneState(enum.Enum):
    NORMAL = "Normal"
    PARTIAL = "PartialDisruption"
    FULL = "FullDisruption"


def zone_key(labels: dict[str, str]) -> str:
    """``GetZoneKey``: region and zone, the older failure-domain labels first; '' when neither."""
    zone = labels.get(LABEL_ZONE_BETA) or labels.get(LABEL_ZONE) or ""
    region = labels.get(LABEL_REGION_BETA) or labels.get(LABEL_REGION) or ""
    if not zone and not region:
        return ""
    return f"{region}/{zone}" if region else zone


def zone_state(ready: int, not_ready: int, threshold: float) -> ZoneState:
    """``ComputeZoneState``: a node without a Ready condition counts as not ready."""
    if ready == 0 and not_ready > 0:
        return ZoneState.FULL
    if not_ready > 2 and not_ready / (not_ready + ready) >= threshold:
        return ZoneState.PARTIAL
    return ZoneState.NORMAL


def zone_taint_rate(
    state: ZoneState,
    zone_size: int,
    *,
    all_full: bool,
    eviction_rate: float,
    secondary_eviction_rate: float,
    large_cluster_threshold: int,
) -> float:
    """Nodes per second the controller may NoExecute-taint in a zone.

    Normal: the eviction rate. Partial: the secondary rate for zones over the large-cluster
    threshold, else 0. Full (not every zone): the normal rate. Every zone full: 0, evictions stop.
    """
    if all_full:
        return 0.0
    if state is ZoneState.PARTIAL:
        return secondary_eviction_rate if zone_size > large_cluster_threshold else 0.0
    return eviction_rate


def all_zones_full(states: Iterable[ZoneState]) -> bool:
    """The controller's "my own connectivity is broken" test: every zone in FullDisruption."""
    seen = False
    for s in states:
        seen = True
        if s is not ZoneState.FULL:
            return False
    return seen


# --- certificates --------------------------------------------------------------------------

CERT_WARN_DAYS = 30
CERT_CRITICAL_DAYS = 7


def cert_level(not_after: float | None, now: float) -> str:
    """'unknown', 'ok', 'warn' (< 30 days), 'critical' (< 7 days) or 'expired'."""
    if not_after is None:
        return "unknown"
    left = not_after - now
    if left <= 0:
        return "expired"
    if left < CERT_CRITICAL_DAYS * 86400:
        return "critical"
    if left < CERT_WARN_DAYS * 86400:
        return "warn"
    return "ok"
