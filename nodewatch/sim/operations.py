"""What is done to the simulated fleet from outside it: by scenarios, tests and the demo.

A kubelet stopped or started, a node cut off or back, a runtime or network plugin failing, node
pressure, a cordon, a node deleted or a new machine joining, a certificate rotated now. Each
operation changes the node and tells the one part that reacts (the kubelets, the node lifecycle
controller, the workloads); the reactions themselves live in those parts.
"""

from __future__ import annotations

import math

from .catalogue import POOLS
from .csrs import CSRController
from .events import EventRecorder
from .kubelet import Kubelets
from .node_lifecycle import NodeLifecycleController
from .pod_controllers import Workloads
from .shapes import SimNode, make_node, zones_for
from .world import SimWorld


class Operations:
    """See the module docstring. ``version`` is the kubelet version a joining node runs;
    ``next_index`` and ``name_width`` continue the fleet's node naming."""

    def __init__(self, world: SimWorld, kubelets: Kubelets, lifecycle: NodeLifecycleController,
                 workloads: Workloads, events: EventRecorder, csrs: CSRController, *, version: str,
                 next_index: int, name_width: int) -> None:
        self.world = world
        self.kubelets = kubelets
        self.lifecycle = lifecycle
        self.workloads = workloads
        self.events = events
        self.csrs = csrs
        self.version = version
        self._next_index = next_index
        self._width = name_width

    def stop_kubelet(self, node: SimNode) -> None:
        node.kubelet_up = False

    def start_kubelet(self, node: SimNode) -> None:
        self.kubelets.start(node)

    def disconnect(self, node: SimNode) -> None:
        node.connected = False

    def reconnect(self, node: SimNode) -> None:
        node.connected = True
        self.kubelets.resume(node)

    def set_runtime_down(self, node: SimNode, down: bool = True) -> None:
        node.runtime_down = down
        self.kubelets.request_sync(node)

    def set_cni_down(self, node: SimNode, down: bool = True) -> None:
        node.cni_down = down
        self.kubelets.request_sync(node)

    def set_pressure(self, node: SimNode, kind: str, on: bool = True) -> None:
        if on:
            node.pressure.add(kind)
        else:
            node.pressure.discard(kind)
        self.kubelets.request_sync(node)

    def cordon(self, node: SimNode, on: bool = True) -> None:
        node.unschedulable = on
        self.world.emit_node(node)
        self.lifecycle.request_noschedule_sync(node)

    def delete_node(self, node: SimNode) -> None:
        if node.deleted:
            return
        world = self.world
        node.deleted = True
        world.emit_node(node, "DELETED")
        self.lifecycle.node_deleted(node)
        self.events.node_event(node, "RemovingNode", f"Node {node.name} event: Removing Node {node.name} from Controller",
                               component="node-controller", controller=True)
        del world.nodes[node.name]
        world.node_order.remove(node.name)
        self.workloads.node_gone(node)
        world.at(world.now + world.rng.uniform(0.5, 2.0), self._lease_gc, node)

    def _lease_gc(self, node: SimNode) -> None:
        if node.renew_time is not None:
            self.world.emit_lease(node, "DELETED")

    def add_node(self, zone_index: int | None = None) -> SimNode:
        """A new machine joins: bootstrap CSR, then the kubelet registers (``Kubelets.register``)."""
        world = self.world
        zones = zones_for(len(world.node_order) + 1)
        i = self._next_index
        self._next_index += 1
        region, zone = zones[(i if zone_index is None else zone_index) % len(zones)]
        pool = POOLS[(i // len(zones)) % len(POOLS)]
        node = make_node(world.rng, i, self._width, region, zone, pool, self.version, world.now)
        node.cni_down = True
        node.cert_not_after = -math.inf  # no client certificate yet
        world.joining[node.name] = node
        node.connected = True
        self.csrs.submit(node, bootstrap=True)
        return node

    def rotate_cert(self, node: SimNode) -> None:
        """The kubelet's rotation deadline is now: it asks for a new client certificate."""
        node.rotation_at = self.world.now
        self.kubelets.rotate(node, node.rotation_at)

    def restart_controller_manager(self) -> None:
        """kube-controller-manager restarts (an upgrade, a crash, another leader): its node
        lifecycle and taint-eviction controllers start over (``NodeLifecycleController.restart``)."""
        self.lifecycle.restart()
