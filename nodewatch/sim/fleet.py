"""SimFleet: a Kubernetes fleet that behaves like a real one, in virtual time.

A discrete-event simulation: every future action (a kubelet's next renewal, the controller's next
monitor pass, a pod's eviction, an event's TTL) is one entry in a heap ordered by virtual time, and
``step_to(t)`` runs them in order, sending each change through the sinks as a full Kubernetes
object. Nothing scans the fleet per second, so 65,000 nodes (6,500 renewals a second) run faster
than real time on one core.

Deterministic for a seed: one ``random.Random`` drives everything, in event order.

Sinks receive ``(resource, "ADDED"|"MODIFIED"|"DELETED", object, virtual_time)``. Each emitted object
is freshly built and shared by all sinks, which must treat it as read-only (copy before mutating).
Objects carry no resourceVersion: the API server's store assigns it.
"""

from __future__ import annotations

import heapq
import math
import random
import threading
from typing import Callable

from ..core import rules
from ..core.settings import Settings
from . import scenarios as _scenarios
from .csrs import CSRController
from .events import EventRecorder
from .node_lifecycle import NodeLifecycleController
from .pod_controllers import TaintEvictionController, Workloads
from .catalogue import POOLS
from .schedule import PRIO_KUBELET
from .kubelet import REPORT_PERIOD, Kubelets
from .shapes import (
    DAY,
    DEFAULT_START,
    SimNode,
    SimPod,
    SimTaint,
    build_workloads,
    default_pods_per_node,
    healthy_conditions,
    lease_object,
    make_node,
    make_uid,
    new_pod_name,
    node_object,
    pod_ip,
    pod_object,
    zones_for,
)

Sink = Callable[[str, str, dict, float], None]
WARMUP = 60.0
"""Virtual seconds simulated before ``start`` even for a scenario without history."""
CERT_LIFETIME = 365 * DAY


def scenario_names() -> list[str]:
    return _scenarios.scenario_names()


class SimFleet:
    """See the module docstring. ``pods_per_node`` None: 8, or 2 above 5,000 nodes."""

    def __init__(self, nodes: int = 30, scenario: str = "incident", seed: int = 1, start: float | None = None,
                 version: str = "v1.33.2", settings: Settings | None = None, sink: Sink | None = None,
                 pods_per_node: int | None = None) -> None:
        if nodes < 1:
            raise ValueError("a fleet needs at least one node")
        s = settings or Settings()
        if s.server_version is None:
            s = s.with_server_version(version)
        self.settings = s
        self.seed = seed
        self.server_version = version
        self.start = float(DEFAULT_START if start is None else start)
        self.scenario = scenario
        self.cert_lifetime = CERT_LIFETIME
        self.pods_per_node = default_pods_per_node(nodes) if pods_per_node is None else pods_per_node
        self.rng = random.Random(f"nodewatch-sim/{seed}/run")
        self.lock = threading.RLock()
        self._sinks: list[Sink] = []
        self._heap: list[tuple] = []
        self._seq = 0
        self.nodes: dict[str, SimNode] = {}
        self.node_order: list[str] = []
        self.pods: dict[tuple[str, str], SimPod] = {}
        self.joining: dict[str, SimNode] = {}
        self.events_emitted = 0

        plan = _scenarios.plan(scenario, nodes)
        self.t0 = self.start - max(WARMUP, plan.history)
        self.now = self.t0
        self.kubelet = Kubelets(self)
        self.lifecycle = NodeLifecycleController(self, self.t0)
        self.taint_eviction = TaintEvictionController(self)
        self.workloads = Workloads(self)
        self.events = EventRecorder(self)
        self.csrs = CSRController(self, self.t0)
        self._build(nodes)
        picker = _scenarios.Picker(self)
        steps = plan.resolve(self, picker)
        self._boot()
        for at, fn in steps:
            self.at(self.start + at, fn)
        self.lifecycle.start()
        self.csrs.start()
        self.step_to(self.start)
        if sink is not None:
            self.subscribe(sink)

    # --- the event loop --------------------------------------------------------------------------------

    def at(self, t: float, fn: Callable, *args: object, prio: int = PRIO_KUBELET) -> None:
        """Run ``fn(*args)`` at virtual time ``t`` (never before now)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(t, self.now), prio, self._seq, fn, args))

    def step_to(self, t: float) -> None:
        """Advance virtual time to ``t``, emitting every change through the sinks in time order."""
        with self.lock:
            heap = self._heap
            pop = heapq.heappop
            while heap and heap[0][0] <= t:
                et, _, _, fn, args = pop(heap)
                if et > self.now:
                    self.now = et
                fn(*args)
            if t > self.now:
                self.now = t

    # --- sinks and objects --------------------------------------------------------------------------------

    def subscribe(self, sink: Sink) -> None:
        with self.lock:
            self._sinks.append(sink)

    def emit(self, resource: str, etype: str, obj: dict) -> None:
        self.events_emitted += 1
        for s in self._sinks:
            s(resource, etype, obj, self.now)

    def emit_node(self, node: SimNode, etype: str = "MODIFIED") -> None:
        if self._sinks:
            self.emit("nodes", etype, node_object(node))

    def emit_lease(self, node: SimNode, etype: str = "MODIFIED") -> None:
        if self._sinks:
            self.emit("leases", etype, lease_object(node))

    def emit_pod(self, pod: SimPod, etype: str = "MODIFIED") -> None:
        if self._sinks:
            self.emit("pods", etype, pod_object(pod, self.nodes.get(pod.node)))

    def objects(self, resource: str) -> list[dict]:
        """The current objects of a resource (fresh dicts; for an initial list)."""
        with self.lock:
            if resource == "nodes":
                return [node_object(self.nodes[n]) for n in self.node_order]
            if resource == "leases":
                return [lease_object(self.nodes[n]) for n in self.node_order if self.nodes[n].renew_time is not None]
            if resource == "pods":
                return [pod_object(p, self.nodes.get(p.node)) for _, p in sorted(self.pods.items())]
            if resource == "events":
                return self.events.listing()
            if resource == "certificatesigningrequests":
                return self.csrs.listing()
            raise KeyError(f"unknown resource {resource!r}")

    def cert_cache(self) -> dict[str, float]:
        """Each node's current kubelet client certificate NotAfter.

        What a nodewatch that has watched this cluster's CSRs for a year would remember (the CSR
        cleaner deletes them an hour after issue), i.e. the contents of its cert cache.
        """
        with self.lock:
            return {n: self.nodes[n].cert_not_after for n in self.node_order
                    if math.isfinite(self.nodes[n].cert_not_after)}

    @property
    def ca(self):
        """The cluster CA that signs kubelet client certificates (``pki.CA``)."""
        return self.csrs.ca

    # --- building ---------------------------------------------------------------------------------------------

    def _build(self, n_nodes: int) -> None:
        rng = random.Random(f"nodewatch-sim/{self.seed}/shape")
        self.shape_rng = rng
        zones = zones_for(n_nodes)
        width = max(2, len(str(n_nodes)))
        minor_older = _older_version(self.server_version)
        for i in range(n_nodes):
            region, zone = zones[i % len(zones)]
            pool = POOLS[(i // len(zones)) % len(POOLS)]
            version = minor_older if (pool.name == "memory" and minor_older) else self.server_version
            node = make_node(rng, i, width, region, zone, pool, version, self.start - rng.uniform(40, 400) * DAY)
            self.nodes[node.name] = node
            self.node_order.append(node.name)
        self._next_index = n_nodes
        self._width = width
        wls = build_workloads(rng, n_nodes, self.pods_per_node, self.start, self.server_version,
                              self.settings.toleration_seconds)
        names = self.node_order
        slots: list[str] = []
        per_node = sum(w.replicas for w in wls if w.kind != "DaemonSet")
        if per_node:
            reps = math.ceil(per_node / n_nodes)
            for _ in range(reps):
                batch = list(names)
                rng.shuffle(batch)
                slots.extend(batch)
        si = 0
        for wl in wls:
            self.workloads.add(wl)
            if wl.kind == "DaemonSet":
                for name in names:
                    self._initial_pod(rng, wl, self.nodes[name], None)
                continue
            for ordinal in range(wl.replicas):
                node = self.nodes[slots[si]]
                si += 1
                self._initial_pod(rng, wl, node, ordinal if wl.kind == "StatefulSet" else None)

    def _initial_pod(self, rng: random.Random, wl, node: SimNode, ordinal: int | None) -> None:
        name = new_pod_name(rng, wl, ordinal)
        while (wl.namespace, name) in self.pods:
            name = new_pod_name(rng, wl, ordinal)
        created = max(node.created, wl.created) + rng.uniform(60, 20 * DAY)
        created = min(created, self.t0 - 600)
        node.pod_seq += 1
        pod = SimPod(wl, name, make_uid(rng), node.name, created, pod_ip(node, node.pod_seq),
                     start_time=created + rng.uniform(2, 8))
        pod.ready_since = pod.start_time + rng.uniform(1, 20)
        self.pods[pod.key] = pod
        node.pods.add(pod.key)
        wl.pods.add(name)

    def _boot(self) -> None:
        """Every node as it is at ``t0``: a lease renewed within the last 10s, a status posted
        within the last 5 minutes, a client certificate somewhere in its life."""
        rng = self.shape_rng
        t0 = self.t0
        life = self.cert_lifetime
        for name in self.node_order:
            node = self.nodes[name]
            off = node.clock_offset
            phase = rng.uniform(0, 10.0)
            node.renew_time = t0 - phase + off
            last_report = t0 - rng.uniform(0, REPORT_PERIOD)
            if not node.conditions:
                node.conditions = healthy_conditions(last_report + off, node.created + 95.0)
            if node.unschedulable and not node.has_taint(rules.TAINT_UNSCHEDULABLE, "NoSchedule"):
                node.taints.insert(0, SimTaint(rules.TAINT_UNSCHEDULABLE, "NoSchedule"))
            if not math.isfinite(node.cert_not_after):
                nb = float(int(self.start - rng.uniform(0.0, 0.7) * life))
                node.cert_not_before = nb
                node.cert_not_after = nb + life
                node.rotation_at = nb + life * (0.7 + 0.2 * rng.random())
            node.last_report = last_report
            self.lifecycle.node_added(node)
            self.kubelet.schedule_renewal(node, t0 - phase + 10.0 * (1 + 0.04 * rng.random()))
            node.status_token += 1
            self.at(last_report + REPORT_PERIOD, self.kubelet.post_status, node, node.status_token)
            self.kubelet.schedule_rotation(node)

    # --- what scenarios do to the fleet ---------------------------------------------------------------------------

    def stop_kubelet(self, node: SimNode) -> None:
        node.kubelet_up = False

    def start_kubelet(self, node: SimNode) -> None:
        self.kubelet.start(node)

    def disconnect(self, node: SimNode) -> None:
        node.connected = False

    def reconnect(self, node: SimNode) -> None:
        node.connected = True
        self.kubelet.resume(node)

    def set_runtime_down(self, node: SimNode, down: bool = True) -> None:
        node.runtime_down = down
        self.kubelet.request_sync(node)

    def set_cni_down(self, node: SimNode, down: bool = True) -> None:
        node.cni_down = down
        self.kubelet.request_sync(node)

    def set_pressure(self, node: SimNode, kind: str, on: bool = True) -> None:
        if on:
            node.pressure.add(kind)
        else:
            node.pressure.discard(kind)
        self.kubelet.request_sync(node)

    def cordon(self, node: SimNode, on: bool = True) -> None:
        node.unschedulable = on
        self.emit_node(node)
        self.lifecycle.request_noschedule_sync(node)

    def delete_node(self, node: SimNode) -> None:
        if node.deleted:
            return
        node.deleted = True
        self.emit_node(node, "DELETED")
        self.lifecycle.node_deleted(node)
        self.events.node_event(node, "RemovingNode", f"Node {node.name} event: Removing Node {node.name} from Controller",
                               component="node-controller", controller=True)
        del self.nodes[node.name]
        self.node_order.remove(node.name)
        self.workloads.node_gone(node)
        self.at(self.now + self.rng.uniform(0.5, 2.0), self._lease_gc, node)

    def _lease_gc(self, node: SimNode) -> None:
        if node.renew_time is not None:
            self.emit_lease(node, "DELETED")

    def add_node(self, zone_index: int | None = None) -> SimNode:
        """A new machine joins: bootstrap CSR, registration, CNI up after a few seconds."""
        zones = zones_for(len(self.node_order) + 1)
        i = self._next_index
        self._next_index += 1
        region, zone = zones[(i if zone_index is None else zone_index) % len(zones)]
        pool = POOLS[(i // len(zones)) % len(POOLS)]
        node = make_node(self.rng, i, self._width, region, zone, pool, self.server_version, self.now)
        node.cni_down = True
        node.cert_not_after = -math.inf  # no client certificate yet
        self.joining[node.name] = node
        node.connected = True
        self.csrs.submit(node, bootstrap=True)
        return node

    def node_joined_cert(self, node: SimNode) -> None:
        """A joining node got its first client certificate: it registers itself."""
        if self.joining.pop(node.name, None) is None:
            return
        now = self.now
        node.created = node.lease_created = now
        self.nodes[node.name] = node
        self.node_order.append(node.name)
        self.emit_node(node, "ADDED")
        node.renew_time = now + node.clock_offset
        self.emit_lease(node, "ADDED")
        self.events.node_event(node, "Starting", "Starting kubelet.", component="kubelet")
        self.lifecycle.node_added(node)
        self.kubelet.post_status(node, -1)
        self.events.node_event(node, "RegisteredNode", f"Node {node.name} event: Registered Node {node.name} in Controller",
                               component="node-controller", controller=True)
        self.kubelet.schedule_renewal(node, now + 10.0 * (1 + 0.04 * self.rng.random()))
        self.workloads.node_added(node)
        self.at(now + self.rng.uniform(8.0, 20.0), self.set_cni_down, node, False)

    def rotate_cert(self, node: SimNode) -> None:
        """The kubelet's rotation deadline is now: it asks for a new client certificate."""
        node.rotation_at = self.now
        self.kubelet.rotate(node, node.rotation_at)

    def node(self, name: str) -> SimNode:
        return self.nodes[name]


def _older_version(version: str) -> str | None:
    """One minor behind (a node pool that lags the control plane), e.g. v1.33.2 -> v1.32.6."""
    from ..core.settings import parse_minor

    mm = parse_minor(version)
    if mm is None or mm[1] < 1:
        return None
    return f"v{mm[0]}.{mm[1] - 1}.6"
