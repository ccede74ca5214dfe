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

Composed, not mixed in: the simulated cluster is a ``world.SimWorld`` (objects, event heap, random
stream, sinks) handed explicitly to each part: the kubelets, the node lifecycle controller, taint
eviction and the workload controllers, the CSR signer and the event recorder; what scenarios do
to the fleet is ``operations.Operations``. This class builds the initial cluster and wires the
parts (the only module that knows all of them) and keeps the names callers use.
"""

from __future__ import annotations

import math
import random

from ..core import rules
from ..core.settings import Settings
from . import pki
from . import scenarios as _scenarios
from .catalogue import POOLS
from .csrs import CSRController
from .events import EventRecorder
from .kubelet import REPORT_PERIOD, Kubelets
from .node_lifecycle import NodeLifecycleController
from .operations import Operations
from .pod_controllers import TaintEvictionController, Workloads
from .shapes import (
    DAY,
    DEFAULT_START,
    SimNode,
    SimPod,
    SimTaint,
    Workload,
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
from .world import SimWorld, Sink

WARMUP = 60.0
"""Virtual seconds simulated before ``start`` even for a scenario without history."""
CERT_LIFETIME = 365 * DAY

__all__ = ["CERT_LIFETIME", "WARMUP", "SimFleet", "Sink", "scenario_names"]


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
        self.pods_per_node = default_pods_per_node(nodes) if pods_per_node is None else pods_per_node

        plan = _scenarios.plan(scenario, nodes)
        self.t0 = self.start - max(WARMUP, plan.history)
        world = self.world = SimWorld(seed, self.start, self.t0, CERT_LIFETIME)
        # the parts, each given the world and what it calls; the two calls back up the chain last
        self.events = EventRecorder(world)
        self.workloads = Workloads(world, self.events)
        self.taint_eviction = TaintEvictionController(world, self.events, self.workloads)
        self.lifecycle = NodeLifecycleController(world, s, self.events, self.taint_eviction, self.workloads)
        self.csrs = CSRController(world)
        self.kubelet = Kubelets(world, self.events, self.lifecycle, self.workloads, self.csrs)
        self.workloads.kubelets = self.kubelet
        self.csrs.on_issued = self.kubelet.cert_issued
        # the names callers use: the world's objects and clock, the operations
        self.nodes = world.nodes
        self.node_order = world.node_order
        self.pods = world.pods
        self.joining = world.joining
        self.rng = world.rng
        self.lock = world.lock
        self.at = world.at
        self.step_to = world.step_to
        self.subscribe = world.subscribe
        self.emit = world.emit

        self._build(nodes)
        ops = self.ops = Operations(world, self.kubelet, self.lifecycle, self.workloads, self.events, self.csrs,
                                    version=version, next_index=nodes, name_width=self._width)
        self.stop_kubelet = ops.stop_kubelet
        self.start_kubelet = ops.start_kubelet
        self.disconnect = ops.disconnect
        self.reconnect = ops.reconnect
        self.set_runtime_down = ops.set_runtime_down
        self.set_cni_down = ops.set_cni_down
        self.set_pressure = ops.set_pressure
        self.cordon = ops.cordon
        self.delete_node = ops.delete_node
        self.add_node = ops.add_node
        self.rotate_cert = ops.rotate_cert
        self.restart_controller_manager = ops.restart_controller_manager
        steps = plan.resolve(self, _scenarios.Picker(self))
        self._boot()
        for at, fn in steps:
            world.at(self.start + at, fn)
        self.lifecycle.start()
        self.csrs.start()
        world.step_to(self.start)
        if sink is not None:
            world.subscribe(sink)

    @property
    def now(self) -> float:
        return self.world.now

    @property
    def cert_lifetime(self) -> float:
        return self.world.cert_lifetime

    @property
    def events_emitted(self) -> int:
        return self.world.events_emitted

    # --- objects --------------------------------------------------------------------------------------

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
    def ca(self) -> pki.CA:
        """The cluster CA that signs kubelet client certificates."""
        return self.csrs.ca

    def node(self, name: str) -> SimNode:
        return self.nodes[name]

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

    def _initial_pod(self, rng: random.Random, wl: Workload, node: SimNode, ordinal: int | None) -> None:
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
        life = self.world.cert_lifetime
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


def _older_version(version: str) -> str | None:
    """One minor behind (a node pool that lags the control plane), e.g. v1.33.2 -> v1.32.6."""
    from ..core.settings import parse_minor

    mm = parse_minor(version)
    if mm is None or mm[1] < 1:
        return None
    return f"v{mm[0]}.{mm[1] - 1}.6"
