"""The control plane of the simulated cluster, emulating the real controllers' timing.

- ``NodeLifecycleController``: kube-controller-manager's node lifecycle controller (monitor pass every
  ``--node-monitor-period``; probe timestamps on its own clock; Ready/pressure -> Unknown after the
  grace; NoSchedule taints at once; NoExecute taints through a per-zone token-bucket queue swept
  every 100ms; zone states and "all zones in full disruption" mode).
- ``TaintEvictionController``: deletes pods when their toleration of a NoExecute taint runs out.
- ``Workloads``: ReplicaSet / StatefulSet / DaemonSet controllers, the scheduler and PodGC, enough to
  show that a Deployment gets replacements while a StatefulSet waits for its Terminating pod.
- ``EventRecorder``: core/v1 Events with the real reasons and components, aggregated, with the
  API server's 1h TTL.
- ``CSRController``: the kubelet client CSR auto-approver, the signer and the hourly CSR cleaner.

Every decision about the rules (zone state, tainting rate, eviction time, which taints follow which
conditions) is taken by ``nodewatch.core.rules``; this module only supplies the timing machinery.
Work is O(what changed): nodes whose probe may expire sit in a heap, and the per-pass taint work
only visits nodes that are not Ready or still tainted.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core import rules
from . import pki
from .shapes import (
    SimNode,
    SimPod,
    SimTaint,
    Workload,
    fmt_time,
    make_uid,
    new_pod_name,
    pod_ip,
    rand_suffix,
)

if TYPE_CHECKING:
    from .fleet import SimFleet

TAINT_PASS_PERIOD = 0.1
"""scheduler.NodeEvictionPeriod: how often the NoExecute tainting queues are swept."""
PRIO_KUBELET = 0
PRIO_CONTROLLER = 1
EVENT_TTL = 3600.0
CSR_CLEANER_PERIOD = 3600.0
CSR_ISSUED_TTL = 3600.0
UNKNOWN_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
CONTROLLER_NOSCHEDULE_KEYS = frozenset({
    rules.TAINT_NOT_READY, rules.TAINT_UNREACHABLE, rules.TAINT_UNSCHEDULABLE, rules.TAINT_MEMORY_PRESSURE,
    rules.TAINT_DISK_PRESSURE, rules.TAINT_PID_PRESSURE, rules.TAINT_NETWORK_UNAVAILABLE,
})
_COUNTDOWN_START = (rules.Toleration(operator="Exists", seconds=0.0),)
"""A toleration that makes ``rules.pod_eviction_at`` return the countdown start itself."""


# --- node lifecycle controller --------------------------------------------------------------------


class TokenBucket:
    """client-go's ``NewTokenBucketRateLimiter(qps, burst=1)``; qps <= 0 is the never-accepting limiter."""

    __slots__ = ("qps", "tokens", "last")

    def __init__(self, qps: float, now: float, full: bool = True) -> None:
        self.qps = qps
        self.tokens = 1.0 if (full and qps > 0) else 0.0
        self.last = now

    def try_accept(self, now: float) -> bool:
        if self.qps <= 0:
            return False
        self.tokens = min(1.0, self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1.0 - 1e-9:
            self.tokens -= 1.0
            return True
        return False


@dataclass(slots=True)
class Zone:
    key: str
    ready: int = 0
    not_ready: int = 0
    state: rules.ZoneState | None = None
    limiter: TokenBucket | None = None
    queue: deque = field(default_factory=deque)
    queued: set = field(default_factory=set)
    """The UniqueQueue's set: a node stays in it after being tainted, until it is Ready again."""

    @property
    def size(self) -> int:
        return self.ready + self.not_ready


class NodeLifecycleController:
    def __init__(self, fleet: "SimFleet", t0: float) -> None:
        self.fleet = fleet
        s = fleet.settings
        self.period = s.monitor_period_seconds
        self.grace = s.grace
        self.startup_grace = s.startup_grace_seconds
        self.t0 = t0
        self.probe_floor = t0
        self.zones: dict[str, Zone] = {}
        self.deadlines: list[tuple[float, int, str]] = []
        self.attention: set[str] = set()
        """Nodes the per-pass taint work must visit: not Ready, tainted, or queued."""
        self.all_full = False
        self._seq = 0
        self._ticking = False
        self._noschedule_pending: set[str] = set()
        self.passes = 0

    # probe timestamps ----------------------------------------------------------------------------

    def pass_time(self, k: int) -> float:
        return self.t0 + k * self.period

    def probe(self, node: SimNode) -> float:
        """The controller's probeTimestamp: the first pass that saw the node's last change."""
        k = math.ceil((node.last_change - self.t0) / self.period - 1e-9)
        return max(self.pass_time(max(k, 0)), self.probe_floor)

    def node_grace(self, node: SimNode) -> float:
        return self.grace if node.ever_ready else self.startup_grace

    def observe_change(self, node: SimNode) -> None:
        """A lease renewal or a Ready heartbeat change reached the API server now."""
        node.last_change = self.fleet.now
        if not node.armed:
            self._arm(node)

    def _arm(self, node: SimNode) -> None:
        self._seq += 1
        heapq.heappush(self.deadlines, (self.probe(node) + self.node_grace(node), self._seq, node.name))
        node.armed = True

    # zones ------------------------------------------------------------------------------------------

    def zone(self, key: str) -> Zone:
        z = self.zones.get(key)
        if z is None:
            z = self.zones[key] = Zone(key)
            z.limiter = TokenBucket(self.fleet.settings.eviction_rate, self.fleet.now)
        return z

    def count(self, node: SimNode, status: str | None, delta: int) -> None:
        if rules.LABEL_EXCLUDE_DISRUPTION in node.labels:
            return
        z = self.zone(node.zone_key)
        if status == "True":
            z.ready += delta
        else:
            z.not_ready += delta

    def ready_changed(self, node: SimNode, old: str | None, new: str | None) -> None:
        """Keep the zone tallies and the attention set in step with a Ready status change."""
        if old == new:
            return
        self.count(node, old, -1)
        self.count(node, new, +1)
        if new != "True":
            self.attention.add(node.name)

    def node_added(self, node: SimNode) -> None:
        self.count(node, node.ready(), +1)
        if node.ready() != "True":
            self.attention.add(node.name)
        node.last_change = self.fleet.now
        self._arm(node)

    def _dequeue(self, node: SimNode) -> None:
        """Forget the node in its zone's NoExecute tainting queue."""
        z = self.zones.get(node.zone_key)
        if z is not None and node.name in z.queued:
            z.queued.discard(node.name)
            try:
                z.queue.remove(node.name)
            except ValueError:
                pass

    def node_deleted(self, node: SimNode) -> None:
        self.count(node, node.ready(), -1)
        self.attention.discard(node.name)
        self._dequeue(node)

    # the monitor pass -------------------------------------------------------------------------------

    def start(self) -> None:
        self.fleet.at(self.t0, self.monitor_pass, prio=PRIO_CONTROLLER)

    def monitor_pass(self) -> None:
        fleet = self.fleet
        now = fleet.now
        self.passes += 1
        # processTaintBaseEviction looks at the Ready condition as it was before this pass updated it
        observed = [(fleet.nodes[n], fleet.nodes[n].ready()) for n in sorted(self.attention) if n in fleet.nodes]
        heap = self.deadlines
        while heap and heap[0][0] < now:
            _, _, name = heapq.heappop(heap)
            node = fleet.nodes.get(name)
            if node is None or node.deleted:
                continue
            node.armed = False
            deadline = self.probe(node) + self.node_grace(node)
            if rules.probe_expired(self.probe(node), self.node_grace(node), now):
                self.mark_unknown(node)
            else:
                self._seq += 1
                heapq.heappush(heap, (deadline, self._seq, name))
                node.armed = True
        for node, status in observed:
            if not node.deleted:
                self.process_taint_based_eviction(node, status)
        self.handle_disruption()
        fleet.at(now + self.period, self.monitor_pass, prio=PRIO_CONTROLLER)

    def mark_unknown(self, node: SimNode) -> None:
        """tryUpdateNodeHealth after the grace: Ready and the pressure conditions go Unknown."""
        fleet = self.fleet
        now = fleet.now
        old_ready = node.ready()
        changed = False
        for ctype in UNKNOWN_CONDITIONS:
            c = node.conditions.get(ctype)
            if c is None or c.status == "Unknown":
                continue
            c.status = "Unknown"
            c.reason = rules.UNKNOWN_REASON
            c.message = rules.UNKNOWN_MESSAGE
            c.transition = now
            changed = True
        if not changed:
            return
        fleet.emit_node(node)
        self.ready_changed(node, old_ready, "Unknown")
        self.request_noschedule_sync(node)
        if old_ready == "True":
            fleet.events.node_event(node, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady",
                                    component="node-controller", controller=True)
            fleet.workloads.mark_pods_not_ready(node)

    def process_taint_based_eviction(self, node: SimNode, observed: str | None) -> None:
        if observed == "False":
            if node.has_taint(rules.TAINT_UNREACHABLE, "NoExecute"):
                self.swap_eviction_taint(node, rules.TAINT_NOT_READY)
            else:
                self.mark_for_tainting(node)
        elif observed == "True":
            self.mark_reachable(node)
            if node.ready() == "True":
                self.attention.discard(node.name)
        else:
            if node.has_taint(rules.TAINT_NOT_READY, "NoExecute"):
                self.swap_eviction_taint(node, rules.TAINT_UNREACHABLE)
            else:
                self.mark_for_tainting(node)

    def mark_for_tainting(self, node: SimNode) -> None:
        z = self.zone(node.zone_key)
        if node.name in z.queued:
            return
        z.queued.add(node.name)
        z.queue.append(node.name)
        self.ensure_ticking()

    def mark_reachable(self, node: SimNode) -> None:
        """Remove the NoExecute not-ready/unreachable taints and forget the node in its zone queue."""
        self._dequeue(node)
        before = len(node.taints)
        node.taints = [t for t in node.taints if not (t.effect == "NoExecute" and t.key in rules.EVICTION_TAINTS)]
        if len(node.taints) != before:
            self.fleet.emit_node(node)
            self.fleet.taint_eviction.node_taints_changed(node)

    def swap_eviction_taint(self, node: SimNode, key: str) -> None:
        """SwapNodeControllerTaint: the new taint is stamped now, the opposite one removed."""
        node.taints = [t for t in node.taints if not (t.effect == "NoExecute" and t.key in rules.EVICTION_TAINTS)]
        node.taints.append(SimTaint(key, "NoExecute", self.fleet.now))
        self.fleet.emit_node(node)
        self.fleet.taint_eviction.node_taints_changed(node)

    # NoExecute tainting queue, swept every 100ms ------------------------------------------------------

    def ensure_ticking(self) -> None:
        if self._ticking or self.all_full:
            return
        if not any(z.queue and z.limiter is not None and z.limiter.qps > 0 for z in self.zones.values()):
            return
        now = self.fleet.now
        k = math.floor((now - self.t0) / TAINT_PASS_PERIOD + 1e-6) + 1
        while self.t0 + k * TAINT_PASS_PERIOD <= now:
            k += 1
        self._ticking = True
        self.fleet.at(self.t0 + k * TAINT_PASS_PERIOD, self.tainting_pass, prio=PRIO_CONTROLLER)

    def tainting_pass(self) -> None:
        """doNoExecuteTaintingPass: each zone's queue, as fast as its limiter allows."""
        self._ticking = False
        now = self.fleet.now
        for key in sorted(self.zones):
            z = self.zones[key]
            while z.queue and z.limiter is not None and z.limiter.try_accept(now):
                name = z.queue.popleft()  # RemoveFromQueue: it stays in ``queued``
                node = self.fleet.nodes.get(name)
                if node is None or node.deleted:
                    z.queued.discard(name)
                    continue
                want = rules.wanted_eviction_taint(node.ready())
                if want is None:
                    continue  # Ready again: no taint (the token is spent all the same)
                self.swap_eviction_taint(node, want)
        self.ensure_ticking()

    # zones and the "all zones down" mode ------------------------------------------------------------------

    def zone_rate(self, z: Zone) -> float:
        s = self.fleet.settings
        assert z.state is not None
        return rules.zone_taint_rate(z.state, z.size, all_full=False, eviction_rate=s.eviction_rate,
                                     secondary_eviction_rate=s.secondary_eviction_rate,
                                     large_cluster_threshold=s.large_cluster_threshold)

    def swap_limiter(self, z: Zone, qps: float) -> None:
        """RateLimitedTimedQueue.SwapLimiter: a new bucket, drained if the old one was empty."""
        old = z.limiter
        now = self.fleet.now
        if old is not None and old.qps == qps:
            return
        new = TokenBucket(qps, now)
        if old is None or not old.try_accept(now):
            new.try_accept(now)
        z.limiter = new

    def handle_disruption(self) -> None:
        now = self.fleet.now
        thr = self.fleet.settings.unhealthy_zone_threshold
        new_states = {k: rules.zone_state(z.ready, z.not_ready, thr) for k, z in self.zones.items() if z.size > 0}
        all_full = rules.all_zones_full(new_states.values())
        if all_full and not self.all_full:
            # "Controller detected that all Nodes are not-Ready. Entering master disruption mode."
            for name in sorted(self.attention):
                node = self.fleet.nodes.get(name)
                if node is not None:
                    self.mark_reachable(node)
            for z in self.zones.values():
                self.swap_limiter(z, 0.0)
        elif not all_full and self.all_full:
            # "Controller detected that some Nodes are Ready. Exiting master disruption mode."
            self.probe_floor = now
            for k, z in self.zones.items():
                z.state = new_states.get(k, rules.ZoneState.NORMAL)
                self.swap_limiter(z, self.zone_rate(z))
        elif not all_full:
            for k, state in new_states.items():
                z = self.zones[k]
                if z.state is not state:
                    z.state = state
                    self.swap_limiter(z, self.zone_rate(z))
        for k, state in new_states.items():
            self.zones[k].state = state
        self.all_full = all_full
        self.ensure_ticking()

    # NoSchedule taints follow the conditions at once ---------------------------------------------------

    def request_noschedule_sync(self, node: SimNode) -> None:
        if node.name in self._noschedule_pending:
            return
        self._noschedule_pending.add(node.name)
        self.fleet.at(self.fleet.now + 0.02, self.noschedule_sync, node.name, prio=PRIO_CONTROLLER)

    def noschedule_sync(self, name: str) -> None:
        self._noschedule_pending.discard(name)
        node = self.fleet.nodes.get(name)
        if node is None or node.deleted:
            return
        statuses = {c.type: c.status for c in node.conditions.values()}
        want = rules.condition_taints(statuses, node.unschedulable)
        have = {t.key for t in node.taints if t.effect == "NoSchedule" and t.key in CONTROLLER_NOSCHEDULE_KEYS}
        if want == have:
            return
        kept = [t for t in node.taints if not (t.effect == "NoSchedule" and t.key in CONTROLLER_NOSCHEDULE_KEYS)]
        added = [SimTaint(k, "NoSchedule") for k in sorted(want)]
        node.taints = added + kept
        self.fleet.emit_node(node)


# --- taint-eviction controller -----------------------------------------------------------------------


def _tolerations(wl: Workload) -> tuple[rules.Toleration, ...]:
    out = []
    for t in wl.tolerations:
        secs = t.get("tolerationSeconds")
        out.append(rules.Toleration(key=t.get("key", ""), operator=t.get("operator", "Equal"),
                                    value=t.get("value", ""), effect=t.get("effect", ""),
                                    seconds=float(secs) if secs is not None else None))
    return tuple(out)


class TaintEvictionController:
    def __init__(self, fleet: "SimFleet") -> None:
        self.fleet = fleet
        self._tol_cache: dict[int, tuple[rules.Toleration, ...]] = {}
        self.evictions = 0

    def tolerations(self, wl: Workload) -> tuple[rules.Toleration, ...]:
        key = id(wl)
        tol = self._tol_cache.get(key)
        if tol is None:
            tol = self._tol_cache[key] = _tolerations(wl)
        return tol

    def node_taints_changed(self, node: SimNode) -> None:
        taints = [rules.Taint(t.key, t.effect, t.value, t.time_added) for t in node.taints]
        now = self.fleet.now
        for key in sorted(node.pods):
            pod = self.fleet.pods.get(key)
            if pod is None or pod.deletion_at is not None:
                continue
            at = rules.pod_eviction_at(taints, self.tolerations(pod.wl), taint_seen_at=now)
            if at is None:
                self.cancel(pod)
                continue
            if pod.evict_due is not None:
                continue  # a scheduled eviction keeps its original start (processPodOnNode)
            start = rules.pod_eviction_at(taints, _COUNTDOWN_START, taint_seen_at=now)
            pod.evict_created = start if start is not None else now
            pod.evict_due = max(at, now)
            pod.evict_token += 1
            self.fleet.at(pod.evict_due, self.evict, pod.key, pod.evict_token, prio=PRIO_CONTROLLER)

    def cancel(self, pod: SimPod) -> None:
        if pod.evict_due is not None:
            pod.evict_due = None
            pod.evict_created = None
            pod.evict_token += 1

    def evict(self, key: tuple[str, str], token: int) -> None:
        fleet = self.fleet
        pod = fleet.pods.get(key)
        if pod is None or pod.evict_token != token or pod.deletion_at is not None:
            return
        pod.evict_due = None
        self.evictions += 1
        pod.disruption_at = fleet.now
        fleet.emit_pod(pod)
        fleet.events.pod_event(pod, "TaintManagerEviction", f"Marking for deletion Pod {key[0]}/{key[1]}",
                               component="taint-eviction-controller")
        fleet.workloads.delete_pod(pod)


# --- workloads, scheduler, PodGC ------------------------------------------------------------------------


class Workloads:
    def __init__(self, fleet: "SimFleet") -> None:
        self.fleet = fleet
        self.by_key: dict[tuple[str, str], Workload] = {}

    def add(self, wl: Workload) -> None:
        self.by_key[(wl.kind, wl.name + "/" + wl.namespace)] = wl

    def mark_pods_not_ready(self, node: SimNode) -> None:
        """MarkPodsNotReady: the node controller flips the pods' Ready condition to False."""
        fleet = self.fleet
        for key in sorted(node.pods):
            p = fleet.pods.get(key)
            if p is None or not p.ready:
                continue
            p.ready = False
            p.not_ready_since = fleet.now
            fleet.emit_pod(p)
            fleet.events.pod_event(p, "NodeNotReady", "Node is not ready", component="node-controller",
                                   type_="Warning")

    def pods_ready_again(self, node: SimNode) -> None:
        """The kubelet reports its pods Ready again once it is back."""
        fleet = self.fleet
        for key in sorted(node.pods):
            p = fleet.pods.get(key)
            if p is None or p.ready or p.deletion_at is not None or p.phase != "Running":
                continue
            p.ready = True
            p.ready_since = fleet.now
            p.not_ready_since = None
            fleet.emit_pod(p)

    def delete_pod(self, pod: SimPod) -> None:
        """A graceful delete: deletionTimestamp now + grace; the kubelet must confirm it."""
        fleet = self.fleet
        pod.deletion_at = fleet.now
        fleet.emit_pod(pod)
        wl = pod.wl
        if wl.kind == "Deployment":
            fleet.at(fleet.now + 0.05, self.create_pod, wl, None, prio=PRIO_CONTROLLER)
        node = fleet.nodes.get(pod.node)
        if node is not None:
            fleet.kubelet.pod_deleted(node, pod)

    def remove_pod(self, key: tuple[str, str], force: bool = False) -> None:
        """The object goes away (kubelet confirmed, or PodGC force-deleted it)."""
        fleet = self.fleet
        pod = fleet.pods.pop(key, None)
        if pod is None:
            return
        node = fleet.nodes.get(pod.node)
        if node is not None:
            node.pods.discard(key)
        pod.wl.pods.discard(pod.name)
        fleet.emit_pod(pod, "DELETED")
        wl = pod.wl
        if wl.kind == "StatefulSet":
            ordinal = int(pod.name.rsplit("-", 1)[-1])
            fleet.at(fleet.now + fleet.rng.uniform(0.5, 2.0), self.create_pod, wl, ordinal, prio=PRIO_CONTROLLER)
        elif wl.kind == "Deployment" and pod.deletion_at is None:
            fleet.at(fleet.now + 0.05, self.create_pod, wl, None, prio=PRIO_CONTROLLER)

    def pick_node(self, wl: Workload) -> SimNode | None:
        """The scheduler, cheaply: a few random candidates, the first that fits wins."""
        fleet = self.fleet
        names = fleet.node_order
        if not names:
            return None
        for _ in range(64):
            node = fleet.nodes.get(fleet.rng.choice(names))
            if node is None or node.deleted or node.ready() != "True":
                continue
            if any(t.effect in ("NoSchedule", "NoExecute") and not wl.tolerates_noschedule(t.key)
                   for t in node.taints):
                continue
            return node
        return None

    def create_pod(self, wl: Workload, ordinal: int | None, node: SimNode | None = None) -> None:
        fleet = self.fleet
        now = fleet.now
        if wl.kind == "StatefulSet" and ordinal is not None and f"{wl.name}-{ordinal}" in wl.pods:
            return
        if node is None:
            node = self.pick_node(wl)
        if node is None:
            fleet.events.record({"kind": wl.owner_kind, "namespace": wl.namespace, "name": wl.owner_name,
                                 "uid": wl.owner_uid, "apiVersion": "apps/v1"}, "FailedScheduling", "0/%d nodes are available: no node fits." % len(fleet.nodes),
                                component="default-scheduler", namespace=wl.namespace, type_="Warning")
            fleet.at(now + 30.0, self.create_pod, wl, ordinal, prio=PRIO_CONTROLLER)
            return
        name = new_pod_name(fleet.rng, wl, ordinal)
        while (wl.namespace, name) in fleet.pods:
            name = new_pod_name(fleet.rng, wl, ordinal)
        node.pod_seq += 1
        pod = SimPod(wl, name, make_uid(fleet.rng), node.name, now, pod_ip(node, node.pod_seq),
                     phase="Pending", ready=False, start_time=now)
        fleet.pods[pod.key] = pod
        node.pods.add(pod.key)
        wl.pods.add(name)
        fleet.emit_pod(pod, "ADDED")
        owner = {"kind": wl.owner_kind, "namespace": wl.namespace, "name": wl.owner_name, "uid": wl.owner_uid,
                 "apiVersion": "apps/v1"}
        ctrl = {"ReplicaSet": "replicaset-controller", "StatefulSet": "statefulset-controller",
                "DaemonSet": "daemonset-controller"}[wl.owner_kind]
        fleet.events.record(owner, "SuccessfulCreate", f"create Pod {name} in StatefulSet {wl.name} successful"
                            if wl.kind == "StatefulSet" else f"Created pod: {name}", component=ctrl,
                            namespace=wl.namespace)
        fleet.events.pod_event(pod, "Scheduled", f"Successfully assigned {wl.namespace}/{name} to {node.name}",
                               component="default-scheduler")
        fleet.at(now + fleet.rng.uniform(2.0, 6.0), fleet.kubelet.start_pod, pod.key)

    def node_gone(self, node: SimNode) -> None:
        """PodGC force-deletes the pods of a node that no longer exists (after its quarantine)."""
        self.fleet.at(self.fleet.now + 40.0, self._gc, sorted(node.pods), prio=PRIO_CONTROLLER)

    def _gc(self, keys: list) -> None:
        for key in keys:
            self.remove_pod(key, force=True)

    def node_added(self, node: SimNode) -> None:
        for wl in self.by_key.values():
            if wl.kind == "DaemonSet":
                self.fleet.at(self.fleet.now + self.fleet.rng.uniform(0.1, 1.0), self.create_pod, wl, None, node,
                              prio=PRIO_CONTROLLER)


# --- events ---------------------------------------------------------------------------------------------


class EventRecorder:
    """core/v1 Events, aggregated like client-go's correlator, deleted by the 1h TTL."""

    def __init__(self, fleet: "SimFleet") -> None:
        self.fleet = fleet
        self.objects: dict[tuple[str, str], dict] = {}
        self._by_key: dict[tuple, tuple[str, str]] = {}
        self._names: set[str] = set()
        self.ttl = EVENT_TTL

    def node_event(self, node: SimNode, reason: str, message: str, *, component: str, controller: bool = False,
                   type_: str = "Normal") -> None:
        # kubelet events name the node with UID = its name; controller events carry the real UID
        inv = {"kind": "Node", "name": node.name, "uid": node.uid if controller else node.name, "apiVersion": "v1"}
        self.record(inv, reason, message, component=component, host=None if controller else node.name,
                    namespace="default", type_=type_)

    def pod_event(self, pod: SimPod, reason: str, message: str, *, component: str, type_: str = "Normal",
                  host: str | None = None) -> None:
        inv = {"kind": "Pod", "namespace": pod.wl.namespace, "name": pod.name, "uid": pod.uid, "apiVersion": "v1"}
        self.record(inv, reason, message, component=component, host=host, namespace=pod.wl.namespace, type_=type_)

    def record(self, involved: dict, reason: str, message: str, *, component: str, host: str | None = None,
               namespace: str = "default", type_: str = "Normal") -> None:
        fleet = self.fleet
        now = fleet.now
        agg = (namespace, involved.get("kind"), involved.get("name"), involved.get("uid"), reason, message,
               component, host, type_)
        existing = self._by_key.get(agg)
        if existing is not None and existing in self.objects:
            ev = self.objects[existing]
            ev["count"] += 1
            ev["lastTimestamp"] = fmt_time(now)
            ev["_updated"] = now
            fleet.emit("events", "MODIFIED", _public(ev))
            fleet.at(now + self.ttl, self.expire, existing, now, prio=PRIO_CONTROLLER)
            return
        ns_time = int(now * 1e9)
        name = f"{involved.get('name')}.{ns_time:x}"
        while name in self._names:
            ns_time += 1
            name = f"{involved.get('name')}.{ns_time:x}"
        self._names.add(name)
        source: dict = {"component": component}
        if host:
            source["host"] = host
        ev = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace, "uid": make_uid(fleet.rng),
                         "creationTimestamp": fmt_time(now)},
            "involvedObject": dict(involved),
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": fmt_time(now),
            "lastTimestamp": fmt_time(now),
            "count": 1,
            "type": type_,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or "",
            "_updated": now,
        }
        key = (namespace, name)
        self.objects[key] = ev
        self._by_key[agg] = key
        fleet.emit("events", "ADDED", _public(ev))
        fleet.at(now + self.ttl, self.expire, key, now, prio=PRIO_CONTROLLER)

    def expire(self, key: tuple[str, str], written: float) -> None:
        ev = self.objects.get(key)
        if ev is None or ev["_updated"] != written:
            return  # updated since: a later TTL timer owns it
        del self.objects[key]
        self._names.discard(key[1])
        self.fleet.emit("events", "DELETED", _public(ev))

    def listing(self) -> list[dict]:
        return [_public(ev) for ev in self.objects.values()]


def _public(obj: dict) -> dict:
    """A fresh copy without the simulator's private fields (keys starting with '_')."""
    import orjson

    return orjson.loads(orjson.dumps({k: v for k, v in obj.items() if not k.startswith("_")}))


# --- CSRs -------------------------------------------------------------------------------------------------


class CSRController:
    """Kubelet client CSRs: created by the kubelet, auto-approved, signed, cleaned an hour later."""

    def __init__(self, fleet: "SimFleet", t0: float) -> None:
        self.fleet = fleet
        self.objects: dict[str, dict] = {}
        self.t0 = t0
        self._ca: pki.CA | None = None
        self.issued = 0

    @property
    def ca(self) -> pki.CA:
        if self._ca is None:
            self._ca = pki.make_ca("kubernetes", now=self.fleet.start, seed=self.fleet.seed)
        return self._ca

    def start(self) -> None:
        self.fleet.at(self.t0 + CSR_CLEANER_PERIOD, self.clean, prio=PRIO_CONTROLLER)

    def submit(self, node: SimNode, bootstrap: bool = False) -> str:
        fleet = self.fleet
        now = fleet.now
        name = f"csr-{rand_suffix(fleet.rng)}"
        while name in self.objects:
            name = f"csr-{rand_suffix(fleet.rng)}"
        key = pki.node_key(fleet.seed, node.name)
        cn = f"{rules.NODE_USER_PREFIX}{node.name}"
        request = pki.make_csr_pem(key, cn, ("system:nodes",))
        if bootstrap:
            username = f"system:bootstrap:{hashlib.sha1(node.name.encode()).hexdigest()[:6]}"
            groups = ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                      "system:authenticated"]
        else:
            username = cn
            groups = ["system:nodes", "system:authenticated"]
        obj = {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": name, "generateName": "csr-", "uid": make_uid(fleet.rng),
                         "creationTimestamp": fmt_time(now)},
            "spec": {"request": pki.b64(request), "signerName": rules.KUBELET_CLIENT_SIGNER,
                     "usages": ["digital signature", "client auth"], "username": username, "groups": groups,
                     "uid": make_uid(fleet.rng)},
            "status": {},
            "_node": node.name,
        }
        self.objects[name] = obj
        fleet.emit("certificatesigningrequests", "ADDED", _public(obj))
        fleet.at(now + fleet.rng.uniform(0.02, 0.2), self.approve, name, bootstrap, prio=PRIO_CONTROLLER)
        return name

    def approve(self, name: str, bootstrap: bool) -> None:
        obj = self.objects.get(name)
        if obj is None:
            return
        now = self.fleet.now
        msg = ("Auto approving kubelet client certificate after SubjectAccessReview." if bootstrap
               else "Auto approving self kubelet client certificate after SubjectAccessReview.")
        obj["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved",
                                         "message": msg, "lastUpdateTime": fmt_time(now),
                                         "lastTransitionTime": fmt_time(now)}]}
        obj["_approved"] = now
        self.fleet.emit("certificatesigningrequests", "MODIFIED", _public(obj))
        self.fleet.at(now + self.fleet.rng.uniform(0.01, 0.1), self.sign, name, prio=PRIO_CONTROLLER)

    def sign(self, name: str) -> None:
        obj = self.objects.get(name)
        if obj is None:
            return
        fleet = self.fleet
        now = fleet.now
        node_name = obj["_node"]
        key = pki.node_key(fleet.seed, node_name)
        not_before = now - 300.0  # the signer backdates by 5 minutes
        not_after = now + fleet.cert_lifetime
        cert = pki.issue_cert(self.ca, key.public_key(), f"{rules.NODE_USER_PREFIX}{node_name}",
                              organizations=("system:nodes",), not_before=not_before, not_after=not_after)
        obj["status"]["certificate"] = pki.b64(pki.cert_pem(cert))
        self.issued += 1
        fleet.emit("certificatesigningrequests", "MODIFIED", _public(obj))
        node = fleet.nodes.get(node_name) or fleet.joining.get(node_name)
        if node is not None:
            fleet.kubelet.cert_issued(node, float(int(not_before)), float(int(not_after)))

    def clean(self) -> None:
        """The CSR cleaner (hourly): issued requests approved more than an hour ago go away."""
        now = self.fleet.now
        for name in sorted(self.objects):
            obj = self.objects[name]
            approved = obj.get("_approved")
            if approved is not None and now - approved > CSR_ISSUED_TTL:
                del self.objects[name]
                self.fleet.emit("certificatesigningrequests", "DELETED", _public(obj))
        self.fleet.at(now + CSR_CLEANER_PERIOD, self.clean, prio=PRIO_CONTROLLER)

    def listing(self) -> list[dict]:
        return [_public(o) for o in self.objects.values()]
