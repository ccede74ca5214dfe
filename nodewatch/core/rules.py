"""The node lifecycle rules, as the Kubernetes controllers apply them.

One module for every rule: the dashboard judges nodes with it and the simulator's controllers
act with it, so the two cannot drift apart. Each function is pure and takes ``now`` (and every
setting) as arguments. Sources for each rule: ``docs/kubernetes-rules.md``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
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
) -> NodeState:
    """The first match wins: Evicted, Evicting, Unknown, NotReady, Overdue, Late, Ready.

    ``ready`` is the Ready condition's status ("True", "False", "Unknown", or None when absent).
    ``lease_age`` is None when the age cannot be trusted (no lease, or the dashboard is blind):
    then neither Late nor Overdue can be claimed.
    """
    if eviction_taint:
        if eviction_deadline is not None and now >= eviction_deadline:
            return NodeState.EVICTED
        return NodeState.EVICTING
    if ready == "Unknown":
        return NodeState.UNKNOWN
    if ready == "False":
        return NodeState.NOT_READY
    if lease_age is not None:
        if lease_age > grace:
            return NodeState.OVERDUE
        if lease_age > 2 * renew_interval(lease_duration):
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


# --- taints and tolerations -------------------------------------------------------------------


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


def node_eviction_deadline(taints: Iterable[Taint], toleration_seconds: float) -> float | None:
    """Earliest not-ready/unreachable NoExecute taint's ``timeAdded`` plus the default toleration."""
    added = [t.time_added for t in eviction_taints(taints) if t.time_added is not None]
    if not added:
        return None
    return min(added) + toleration_seconds


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


def pod_eviction_at(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], taint_seen_at: float | None = None
) -> float | None:
    """When the taint-eviction controller deletes this pod, or None when it never will.

    Every NoExecute taint on the node must be tolerated, or the pod goes at once; otherwise it goes
    at the start of the countdown (the earliest ``timeAdded``, or when the taint was seen) plus the
    smallest matching ``tolerationSeconds``. No NoExecute taint: None.
    """
    ne = noexecute_taints(taints)
    if not ne:
        return None
    starts = [t.time_added for t in ne if t.time_added is not None]
    start = min(starts) if starts else taint_seen_at
    if start is None:
        return None
    matching: list[Toleration] = []
    for taint in ne:
        hits = [tol for tol in tolerations if tolerates(tol, taint)]
        if not hits:
            return start
        matching.extend(hits)
    wait = min_toleration_seconds(matching)
    if math.isinf(wait):
        return None
    return start + wait


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
