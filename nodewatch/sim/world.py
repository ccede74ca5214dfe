"""SimWorld: the simulated cluster every part of the simulator is handed, explicitly.

The objects of the cluster (nodes, pods, the machines still joining), the one event heap that is
virtual time, the one random stream, and the sinks every change goes out through. The parts that
act on it (``kubelet.Kubelets``, ``node_lifecycle.NodeLifecycleController``, ``pod_controllers``,
``csrs.CSRController``, ``events.EventRecorder``, ``operations.Operations``) each get this world
and the few other parts they call as constructor arguments; none holds the fleet that built them,
so they import this module and each other, never ``fleet`` (``fleet.SimFleet`` only wires them).

Deterministic for a seed: ``rng`` is drawn from in event order, and equal-time events run in
(priority, scheduling order).
"""

from __future__ import annotations

import heapq
import random
import threading
from typing import Any, Callable

from .schedule import PRIO_KUBELET
from .shapes import SimNode, SimPod, lease_object, node_object, pod_object

Sink = Callable[[str, str, dict, float], None]


class SimWorld:
    """See the module docstring. ``t0`` is where virtual time begins (before ``start``: warm-up
    and scenario history); ``cert_lifetime`` is how long the cluster's signer makes a kubelet
    client certificate last."""

    def __init__(self, seed: int, start: float, t0: float, cert_lifetime: float) -> None:
        self.seed = seed
        self.start = start
        self.t0 = t0
        self.now = t0
        self.cert_lifetime = cert_lifetime
        self.rng = random.Random(f"nodewatch-sim/{seed}/run")
        self.lock = threading.RLock()
        self.nodes: dict[str, SimNode] = {}
        self.node_order: list[str] = []
        self.pods: dict[tuple[str, str], SimPod] = {}
        self.joining: dict[str, SimNode] = {}
        """Machines that asked for their first client certificate and have no Node object yet."""
        self.events_emitted = 0
        self._sinks: list[Sink] = []
        self._heap: list[tuple[float, int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0

    # --- virtual time ------------------------------------------------------------------------------

    def at(self, t: float, fn: Callable[..., Any], *args: Any, prio: int = PRIO_KUBELET) -> None:
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

    # --- sinks ---------------------------------------------------------------------------------------

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
