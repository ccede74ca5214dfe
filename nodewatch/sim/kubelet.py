"""Kubelet behaviour: the Lease heartbeat, Node status reports, pod lifecycle and cert rotation.

Timings follow the kubelet defaults (see ``docs/kubernetes-rules.md``):
the Lease is renewed every 10s with up to 4% jitter and ``renewTime`` is written on the node's own
clock; Node status is computed every 10s but PATCHed only on change or every 5 minutes; a kubelet
that cannot reach (or authenticate to) the API server writes nothing and retries, catching up
within its 7s backoff once it can; the client certificate is rotated through a CSR at 70-90% of its
life.

A dead or cut-off kubelet costs nothing: it simply stops scheduling work, and whatever restores it
(``resume``) schedules its next renewal. One heap entry per node is all the steady state needs.
"""

from __future__ import annotations

from .csrs import CSRController
from .events import EventRecorder
from .node_lifecycle import NodeLifecycleController
from .pod_controllers import Workloads
from .shapes import Cond, SimNode, SimPod, container_name
from .world import SimWorld

RENEW_INTERVAL = 10.0
"""0.25 x nodeLeaseDurationSeconds (40s)."""
RENEW_JITTER = 0.04
REPORT_PERIOD = 300.0
"""nodeStatusReportFrequency: a quiet node PATCHes its status every 5 minutes."""
SYNC_PERIOD = 10.0
"""nodeStatusUpdateFrequency: a change is noticed within 10s."""
RETRY_BACKOFF_MAX = 7.0

MSG_RUNTIME_DOWN = ("container runtime is down, PLEG is not healthy: pleg was last seen active 3m4.512s ago; "
                    "threshold is 3m0s")
MSG_CNI_DOWN = ("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                "message:Network plugin returns error: cni plugin not initialized")

PRESSURE = {
    # condition: (pressure key, (True reason, message, event), (False reason, message, event))
    "MemoryPressure": ("memory", ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
                                  "NodeHasInsufficientMemory"),
                       ("KubeletHasSufficientMemory", "kubelet has sufficient memory available",
                        "NodeHasSufficientMemory")),
    "DiskPressure": ("disk", ("KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure"),
                     ("KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure")),
    "PIDPressure": ("pid", ("KubeletHasInsufficientPID", "kubelet has insufficient PID available",
                            "NodeHasInsufficientPID"),
                    ("KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID")),
}


def desired_conditions(node: SimNode) -> dict[str, tuple[str, str, str, str]]:
    """What the kubelet would report now: type -> (status, reason, message, event reason)."""
    out: dict[str, tuple[str, str, str, str]] = {}
    for ctype, (key, on, off) in PRESSURE.items():
        r, m, e = on if key in node.pressure else off
        out[ctype] = ("True" if key in node.pressure else "False", r, m, e)
    if node.runtime_down:
        out["Ready"] = ("False", "KubeletNotReady", MSG_RUNTIME_DOWN, "NodeNotReady")
    elif node.cni_down:
        out["Ready"] = ("False", "KubeletNotReady", MSG_CNI_DOWN, "NodeNotReady")
    else:
        out["Ready"] = ("True", "KubeletReady", "kubelet is posting ready status", "NodeReady")
    return out


class Kubelets:
    """Every kubelet of the fleet (state lives on each ``SimNode``; behaviour lives here).

    Its inputs: the simulated cluster (``world``) and what a kubelet's writes reach: the event
    recorder, the node lifecycle controller (a renewal or a status post is a probe), the workload
    controllers (pods confirmed gone, Ready again, DaemonSets for a new node) and the CSR signer."""

    def __init__(self, world: SimWorld, events: EventRecorder, lifecycle: NodeLifecycleController,
                 workloads: Workloads, csrs: CSRController) -> None:
        self.world = world
        self.events = events
        self.lifecycle = lifecycle
        self.workloads = workloads
        self.csrs = csrs
        self.renewals = 0
        self.status_posts = 0

    # the Lease heartbeat ---------------------------------------------------------------------------

    def schedule_renewal(self, node: SimNode, at: float) -> None:
        node.lease_token += 1
        self.world.at(at, self.renew, node, node.lease_token)

    def renew(self, node: SimNode, token: int) -> None:
        if token != node.lease_token or node.deleted:
            return
        world = self.world
        now = world.now
        if not node.can_talk(now):
            return  # nothing reaches the API server; ``resume`` restarts the loop
        node.renew_time = now + node.clock_offset
        self.renewals += 1
        self.lifecycle.observe_change(node)
        world.emit_lease(node)
        interval = RENEW_INTERVAL * (1.0 + RENEW_JITTER * world.rng.random())
        if node.slow_lease:
            interval += world.rng.uniform(12.0, 22.0)  # renewals failing on a congested link
        node.lease_token += 1
        world.at(now + interval, self.renew, node, node.lease_token)

    # Node status -------------------------------------------------------------------------------------

    def request_sync(self, node: SimNode) -> None:
        """Something the kubelet reports changed: it notices at its next 10s status sync."""
        if node.sync_pending:
            return
        node.sync_pending = True
        world = self.world
        world.at(world.now + world.rng.uniform(0.5, SYNC_PERIOD), self.post_status, node, -1)

    def post_status(self, node: SimNode, token: int) -> None:
        if node.deleted or (token >= 0 and token != node.status_token):
            return
        world = self.world
        now = world.now
        if token < 0:
            node.sync_pending = False
        if not node.can_talk(now):
            node.sync_pending = False
            return  # posted again on ``resume``
        self.status_posts += 1
        t_node = now + node.clock_offset
        old_ready = node.ready()
        events: list[str] = []
        changed = False
        for ctype, (status, reason, message, event) in desired_conditions(node).items():
            c = node.conditions.get(ctype)
            if c is None:
                c = node.conditions[ctype] = Cond(ctype, status, reason, message, t_node, t_node)
                events.append(event)
                changed = True
            elif c.status != status:
                c.transition = t_node
                events.append(event)
                changed = True
            c.status, c.reason, c.message, c.heartbeat = status, reason, message, t_node
        node.last_report = now
        world.emit_node(node)
        for reason in events:
            self.events.node_event(node, reason, f"Node {node.name} status is now: {reason}", component="kubelet")
        lc = self.lifecycle
        lc.observe_change(node)  # the Ready heartbeat moved
        new_ready = node.ready()
        lc.ready_changed(node, old_ready, new_ready)
        if changed:
            lc.request_noschedule_sync(node)
        if new_ready == "True" and old_ready != "True":
            self.workloads.pods_ready_again(node)
        node.status_token += 1
        world.at(now + REPORT_PERIOD, self.post_status, node, node.status_token)

    # coming back ---------------------------------------------------------------------------------------

    def resume(self, node: SimNode) -> None:
        """The kubelet can talk to the API server again: heartbeat, status and pending work resume."""
        world = self.world
        if node.deleted or not node.can_talk(world.now):
            return
        rng = world.rng
        self.schedule_renewal(node, world.now + rng.uniform(0.2, RETRY_BACKOFF_MAX))
        node.sync_pending = True
        world.at(world.now + rng.uniform(0.3, 3.0), self.post_status, node, -1)
        for key in sorted(node.pods):
            pod = world.pods.get(key)
            if pod is not None and pod.deletion_at is not None:
                self.pod_deleted(node, pod)
        if node.rotation_at <= world.now:
            world.at(world.now + rng.uniform(1.0, 5.0), self.rotate, node, node.rotation_at)

    def start(self, node: SimNode) -> None:
        """The kubelet process starts (again)."""
        world = self.world
        node.kubelet_up = True
        if not node.can_talk(world.now):
            return
        self.events.node_event(node, "Starting", "Starting kubelet.", component="kubelet")
        for reason in ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"):
            self.events.node_event(node, reason, f"Node {node.name} status is now: {reason}", component="kubelet")
        self.events.node_event(node, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods",
                                component="kubelet")
        self.resume(node)

    # pods ------------------------------------------------------------------------------------------------

    def can_manage_pods(self, node: SimNode) -> bool:
        return node.can_talk(self.world.now) and not node.runtime_down

    def pod_deleted(self, node: SimNode, pod: SimPod) -> None:
        """A pod on this node got a deletionTimestamp: a live kubelet kills it and confirms."""
        if not self.can_manage_pods(node):
            return  # stays Terminating: nobody confirms
        world = self.world
        container = container_name(pod.wl)
        self.events.pod_event(pod, "Killing", f"Stopping container {container}", component="kubelet",
                               host=node.name)
        world.at(world.now + world.rng.uniform(1.0, 4.0), self._confirm_delete, pod.key, pod.uid)

    def _confirm_delete(self, key: tuple[str, str], uid: str) -> None:
        pod = self.world.pods.get(key)
        if pod is None or pod.uid != uid:
            return
        node = self.world.nodes.get(pod.node)
        if node is not None and not self.can_manage_pods(node):
            return  # lost contact meanwhile
        self.workloads.remove_pod(key)

    def start_pod(self, key: tuple[str, str]) -> None:
        world = self.world
        pod = world.pods.get(key)
        if pod is None or pod.phase != "Pending" or pod.deletion_at is not None:
            return
        node = world.nodes.get(pod.node)
        if node is None or not self.can_manage_pods(node):
            return
        pod.phase = "Running"
        pod.ready = True
        pod.start_time = world.now
        pod.ready_since = world.now
        world.emit_pod(pod)
        container = container_name(pod.wl)
        self.events.pod_event(pod, "Started", f"Started container {container}", component="kubelet",
                               host=node.name)

    # client certificate rotation ---------------------------------------------------------------------------

    def schedule_rotation(self, node: SimNode) -> None:
        if node.rotation_at < float("inf"):
            self.world.at(max(node.rotation_at, self.world.now), self.rotate, node, node.rotation_at)

    def rotate(self, node: SimNode, due: float) -> None:
        if node.deleted or due != node.rotation_at:
            return
        if not node.can_talk(self.world.now):
            return  # retried on resume
        node.rotation_at = float("inf")  # in flight
        self.csrs.submit(node)

    def cert_issued(self, node: SimNode, not_before: float, not_after: float) -> None:
        node.cert_not_before = not_before
        node.cert_not_after = not_after
        node.rotation_at = not_before + (not_after - not_before) * (0.7 + 0.2 * self.world.rng.random())
        self.schedule_rotation(node)
        self.register(node)

    # joining ---------------------------------------------------------------------------------------------

    def register(self, node: SimNode) -> None:
        """A joining node got its first client certificate: its kubelet registers the Node."""
        world = self.world
        if world.joining.pop(node.name, None) is None:
            return
        now = world.now
        node.created = node.lease_created = now
        world.nodes[node.name] = node
        world.node_order.append(node.name)
        world.emit_node(node, "ADDED")
        node.renew_time = now + node.clock_offset
        world.emit_lease(node, "ADDED")
        self.events.node_event(node, "Starting", "Starting kubelet.", component="kubelet")
        self.lifecycle.node_added(node)
        self.post_status(node, -1)
        self.events.node_event(node, "RegisteredNode", f"Node {node.name} event: Registered Node {node.name} in Controller",
                               component="node-controller", controller=True)
        self.schedule_renewal(node, now + 10.0 * (1 + 0.04 * world.rng.random()))
        self.workloads.node_added(node)
        world.at(now + world.rng.uniform(8.0, 20.0), self._network_ready, node)

    def _network_ready(self, node: SimNode) -> None:
        """The network plugin came up on a new node: Ready at the next status sync."""
        node.cni_down = False
        self.request_sync(node)
