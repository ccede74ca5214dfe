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

from typing import TYPE_CHECKING

from .shapes import Cond, SimNode, container_name

if TYPE_CHECKING:
    from .fleet import SimFleet

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
    """Every kubelet of the fleet (state lives on each ``SimNode``; behaviour lives here)."""

    def __init__(self, fleet: "SimFleet") -> None:
        self.fleet = fleet
        self.renewals = 0
        self.status_posts = 0

    # the Lease heartbeat ---------------------------------------------------------------------------

    def schedule_renewal(self, node: SimNode, at: float) -> None:
        node.lease_token += 1
        self.fleet.at(at, self.renew, node, node.lease_token)

    def renew(self, node: SimNode, token: int) -> None:
        if token != node.lease_token or node.deleted:
            return
        fleet = self.fleet
        now = fleet.now
        if not node.can_talk(now):
            return  # nothing reaches the API server; ``resume`` restarts the loop
        node.renew_time = now + node.clock_offset
        self.renewals += 1
        fleet.lifecycle.observe_change(node)
        fleet.emit_lease(node)
        interval = RENEW_INTERVAL * (1.0 + RENEW_JITTER * fleet.rng.random())
        if node.slow_lease:
            interval += fleet.rng.uniform(12.0, 22.0)  # renewals failing on a congested link
        node.lease_token += 1
        fleet.at(now + interval, self.renew, node, node.lease_token)

    # Node status -------------------------------------------------------------------------------------

    def request_sync(self, node: SimNode) -> None:
        """Something the kubelet reports changed: it notices at its next 10s status sync."""
        if node.sync_pending:
            return
        node.sync_pending = True
        fleet = self.fleet
        fleet.at(fleet.now + fleet.rng.uniform(0.5, SYNC_PERIOD), self.post_status, node, -1)

    def post_status(self, node: SimNode, token: int) -> None:
        if node.deleted or (token >= 0 and token != node.status_token):
            return
        fleet = self.fleet
        now = fleet.now
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
        fleet.emit_node(node)
        for reason in events:
            fleet.events.node_event(node, reason, f"Node {node.name} status is now: {reason}", component="kubelet")
        lc = fleet.lifecycle
        lc.observe_change(node)  # the Ready heartbeat moved
        new_ready = node.ready()
        lc.ready_changed(node, old_ready, new_ready)
        if changed:
            lc.request_noschedule_sync(node)
        if new_ready == "True" and old_ready != "True":
            fleet.workloads.pods_ready_again(node)
        node.status_token += 1
        fleet.at(now + REPORT_PERIOD, self.post_status, node, node.status_token)

    # coming back ---------------------------------------------------------------------------------------

    def resume(self, node: SimNode) -> None:
        """The kubelet can talk to the API server again: heartbeat, status and pending work resume."""
        fleet = self.fleet
        if node.deleted or not node.can_talk(fleet.now):
            return
        rng = fleet.rng
        self.schedule_renewal(node, fleet.now + rng.uniform(0.2, RETRY_BACKOFF_MAX))
        node.sync_pending = True
        fleet.at(fleet.now + rng.uniform(0.3, 3.0), self.post_status, node, -1)
        for key in sorted(node.pods):
            pod = fleet.pods.get(key)
            if pod is not None and pod.deletion_at is not None:
                self.pod_deleted(node, pod)
        if node.rotation_at <= fleet.now:
            fleet.at(fleet.now + rng.uniform(1.0, 5.0), self.rotate, node, node.rotation_at)

    def start(self, node: SimNode) -> None:
        """The kubelet process starts (again)."""
        fleet = self.fleet
        node.kubelet_up = True
        if not node.can_talk(fleet.now):
            return
        fleet.events.node_event(node, "Starting", "Starting kubelet.", component="kubelet")
        for reason in ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"):
            fleet.events.node_event(node, reason, f"Node {node.name} status is now: {reason}", component="kubelet")
        fleet.events.node_event(node, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods",
                                component="kubelet")
        self.resume(node)

    # pods ------------------------------------------------------------------------------------------------

    def can_manage_pods(self, node: SimNode) -> bool:
        return node.can_talk(self.fleet.now) and not node.runtime_down

    def pod_deleted(self, node: SimNode, pod) -> None:
        """A pod on this node got a deletionTimestamp: a live kubelet kills it and confirms."""
        if not self.can_manage_pods(node):
            return  # stays Terminating: nobody confirms
        fleet = self.fleet
        container = container_name(pod.wl)
        fleet.events.pod_event(pod, "Killing", f"Stopping container {container}", component="kubelet",
                               host=node.name)
        fleet.at(fleet.now + fleet.rng.uniform(1.0, 4.0), self._confirm_delete, pod.key, pod.uid)

    def _confirm_delete(self, key: tuple[str, str], uid: str) -> None:
        pod = self.fleet.pods.get(key)
        if pod is None or pod.uid != uid:
            return
        node = self.fleet.nodes.get(pod.node)
        if node is not None and not self.can_manage_pods(node):
            return  # lost contact meanwhile
        self.fleet.workloads.remove_pod(key)

    def start_pod(self, key: tuple[str, str]) -> None:
        fleet = self.fleet
        pod = fleet.pods.get(key)
        if pod is None or pod.phase != "Pending" or pod.deletion_at is not None:
            return
        node = fleet.nodes.get(pod.node)
        if node is None or not self.can_manage_pods(node):
            return
        pod.phase = "Running"
        pod.ready = True
        pod.start_time = fleet.now
        pod.ready_since = fleet.now
        fleet.emit_pod(pod)
        container = container_name(pod.wl)
        fleet.events.pod_event(pod, "Started", f"Started container {container}", component="kubelet",
                               host=node.name)

    # client certificate rotation ---------------------------------------------------------------------------

    def schedule_rotation(self, node: SimNode) -> None:
        if node.rotation_at < float("inf"):
            self.fleet.at(max(node.rotation_at, self.fleet.now), self.rotate, node, node.rotation_at)

    def rotate(self, node: SimNode, due: float) -> None:
        if node.deleted or due != node.rotation_at:
            return
        if not node.can_talk(self.fleet.now):
            return  # retried on resume
        node.rotation_at = float("inf")  # in flight
        self.fleet.csrs.submit(node)

    def cert_issued(self, node: SimNode, not_before: float, not_after: float) -> None:
        node.cert_not_before = not_before
        node.cert_not_after = not_after
        node.rotation_at = not_before + (not_after - not_before) * (0.7 + 0.2 * self.fleet.rng.random())
        self.schedule_rotation(node)
        self.fleet.node_joined_cert(node)
