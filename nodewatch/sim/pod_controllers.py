"""What happens to pods: taint-based eviction, the workload controllers, the scheduler and PodGC.

- ``TaintEvictionController`` deletes pods when their toleration of a NoExecute taint runs out
  (``nodewatch.core.rules.process_pod_on_node`` decides when, as the real ``processPodOnNode``).
- ``Workloads``: ReplicaSet / StatefulSet / DaemonSet controllers, the scheduler and PodGC, enough
  to show that a Deployment gets replacements while a StatefulSet waits for its Terminating pod.
"""

from __future__ import annotations

from typing import Protocol

from ..core import rules
from .events import EventRecorder
from .schedule import PRIO_CONTROLLER
from .shapes import SimNode, SimPod, Workload, make_uid, new_pod_name, pod_ip
from .world import SimWorld


class PodRuntime(Protocol):
    """What the workload controllers need of the kubelets (``kubelet.Kubelets``): they call back
    (``remove_pod``), so this is a cycle of calls, wired by ``fleet.SimFleet``, not of imports."""

    def pod_deleted(self, node: SimNode, pod: SimPod) -> None: ...

    def start_pod(self, key: tuple[str, str]) -> None: ...


def _tolerations(wl: Workload) -> tuple[rules.Toleration, ...]:
    out = []
    for t in wl.tolerations:
        secs = t.get("tolerationSeconds")
        out.append(rules.Toleration(key=t.get("key", ""), operator=t.get("operator", "Equal"),
                                    value=t.get("value", ""), effect=t.get("effect", ""),
                                    seconds=float(secs) if secs is not None else None))
    return tuple(out)


class TaintEvictionController:
    def __init__(self, world: SimWorld, events: EventRecorder, workloads: "Workloads") -> None:
        self.world = world
        self.events = events
        self.workloads = workloads
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
        now = self.world.now
        for key in sorted(node.pods):
            pod = self.world.pods.get(key)
            if pod is None or pod.deletion_at is not None:
                continue
            self.process(pod, taints, now)

    def process(self, pod: SimPod, taints: list[rules.Taint], now: float) -> None:
        """``processPodOnNode`` at ``now``: a scheduled eviction stays where it is while every
        taint is tolerated for a while (so a lengthened toleration would not move it), a taint no
        toleration matches deletes the pod at once, tolerating forever cancels."""
        at = rules.process_pod_on_node(pod.evict_due, taints, self.tolerations(pod.wl), now)
        if at is None:
            self.cancel(pod)
            return
        if at == pod.evict_due:
            return  # kept: its CreatedAt is earlier
        pod.evict_created = now
        pod.evict_due = max(at, now)
        pod.evict_token += 1
        self.world.at(pod.evict_due, self.evict, pod.key, pod.evict_token, prio=PRIO_CONTROLLER)

    def restart(self) -> None:
        """A new process (``NodeLifecycleController.restart``): no eviction is scheduled; each pod on
        a node with a NoExecute taint is timed from now (``processPodOnNode``: ``now``)."""
        now = self.world.now
        for name in list(self.world.node_order):
            node = self.world.nodes.get(name)
            if node is None or not any(t.effect == "NoExecute" for t in node.taints):
                continue
            taints = [rules.Taint(t.key, t.effect, t.value, t.time_added) for t in node.taints]
            for key in sorted(node.pods):
                pod = self.world.pods.get(key)
                if pod is None or pod.deletion_at is not None:
                    continue
                self.cancel(pod)
                self.process(pod, taints, now)

    def cancel(self, pod: SimPod) -> None:
        if pod.evict_due is not None:
            pod.evict_due = None
            pod.evict_created = None
            pod.evict_token += 1

    def evict(self, key: tuple[str, str], token: int) -> None:
        world = self.world
        pod = world.pods.get(key)
        if pod is None or pod.evict_token != token or pod.deletion_at is not None:
            return
        pod.evict_due = None
        self.evictions += 1
        pod.disruption_at = world.now
        world.emit_pod(pod)
        self.events.pod_event(pod, "TaintManagerEviction", f"Marking for deletion Pod {key[0]}/{key[1]}",
                               component="taint-eviction-controller")
        self.workloads.delete_pod(pod)


# --- workloads, scheduler, PodGC ------------------------------------------------------------------------


class Workloads:
    kubelets: PodRuntime
    """Set by ``fleet.SimFleet`` once the kubelets exist (they are built after these controllers)."""

    def __init__(self, world: SimWorld, events: EventRecorder) -> None:
        self.world = world
        self.events = events
        self.by_key: dict[tuple[str, str], Workload] = {}

    def add(self, wl: Workload) -> None:
        self.by_key[(wl.kind, wl.name + "/" + wl.namespace)] = wl

    def mark_pods_not_ready(self, node: SimNode) -> None:
        """MarkPodsNotReady: the node controller flips the pods' Ready condition to False."""
        world = self.world
        for key in sorted(node.pods):
            p = world.pods.get(key)
            if p is None or not p.ready:
                continue
            p.ready = False
            p.not_ready_since = world.now
            world.emit_pod(p)
            self.events.pod_event(p, "NodeNotReady", "Node is not ready", component="node-controller",
                                   type_="Warning")

    def pods_ready_again(self, node: SimNode) -> None:
        """The kubelet reports its pods Ready again once it is back."""
        world = self.world
        for key in sorted(node.pods):
            p = world.pods.get(key)
            if p is None or p.ready or p.deletion_at is not None or p.phase != "Running":
                continue
            p.ready = True
            p.ready_since = world.now
            p.not_ready_since = None
            world.emit_pod(p)

    def delete_pod(self, pod: SimPod) -> None:
        """A graceful delete: deletionTimestamp now + grace; the kubelet must confirm it."""
        world = self.world
        pod.deletion_at = world.now
        world.emit_pod(pod)
        wl = pod.wl
        if wl.kind == "Deployment":
            world.at(world.now + 0.05, self.create_pod, wl, None, prio=PRIO_CONTROLLER)
        node = world.nodes.get(pod.node)
        if node is not None:
            self.kubelets.pod_deleted(node, pod)

    def remove_pod(self, key: tuple[str, str], force: bool = False) -> None:
        """The object goes away (kubelet confirmed, or PodGC force-deleted it)."""
        world = self.world
        pod = world.pods.pop(key, None)
        if pod is None:
            return
        node = world.nodes.get(pod.node)
        if node is not None:
            node.pods.discard(key)
        pod.wl.pods.discard(pod.name)
        world.emit_pod(pod, "DELETED")
        wl = pod.wl
        if wl.kind == "StatefulSet":
            ordinal = int(pod.name.rsplit("-", 1)[-1])
            world.at(world.now + world.rng.uniform(0.5, 2.0), self.create_pod, wl, ordinal, prio=PRIO_CONTROLLER)
        elif wl.kind == "Deployment" and pod.deletion_at is None:
            world.at(world.now + 0.05, self.create_pod, wl, None, prio=PRIO_CONTROLLER)

    def pick_node(self, wl: Workload) -> SimNode | None:
        """The scheduler, cheaply: a few random candidates, the first that fits wins."""
        world = self.world
        names = world.node_order
        if not names:
            return None
        for _ in range(64):
            node = world.nodes.get(world.rng.choice(names))
            if node is None or node.deleted or node.ready() != "True":
                continue
            if any(t.effect in ("NoSchedule", "NoExecute") and not wl.tolerates_noschedule(t.key)
                   for t in node.taints):
                continue
            return node
        return None

    def create_pod(self, wl: Workload, ordinal: int | None, node: SimNode | None = None) -> None:
        world = self.world
        now = world.now
        if wl.kind == "StatefulSet" and ordinal is not None and f"{wl.name}-{ordinal}" in wl.pods:
            return
        if node is None:
            node = self.pick_node(wl)
        if node is None:
            self.events.record({"kind": wl.owner_kind, "namespace": wl.namespace, "name": wl.owner_name,
                                 "uid": wl.owner_uid, "apiVersion": "apps/v1"}, "FailedScheduling", "0/%d nodes are available: no node fits." % len(world.nodes),
                                component="default-scheduler", namespace=wl.namespace, type_="Warning")
            world.at(now + 30.0, self.create_pod, wl, ordinal, prio=PRIO_CONTROLLER)
            return
        name = new_pod_name(world.rng, wl, ordinal)
        while (wl.namespace, name) in world.pods:
            name = new_pod_name(world.rng, wl, ordinal)
        node.pod_seq += 1
        pod = SimPod(wl, name, make_uid(world.rng), node.name, now, pod_ip(node, node.pod_seq),
                     phase="Pending", ready=False, start_time=now)
        world.pods[pod.key] = pod
        node.pods.add(pod.key)
        wl.pods.add(name)
        world.emit_pod(pod, "ADDED")
        owner = {"kind": wl.owner_kind, "namespace": wl.namespace, "name": wl.owner_name, "uid": wl.owner_uid,
                 "apiVersion": "apps/v1"}
        ctrl = {"ReplicaSet": "replicaset-controller", "StatefulSet": "statefulset-controller",
                "DaemonSet": "daemonset-controller"}[wl.owner_kind]
        self.events.record(owner, "SuccessfulCreate", f"create Pod {name} in StatefulSet {wl.name} successful"
                            if wl.kind == "StatefulSet" else f"Created pod: {name}", component=ctrl,
                            namespace=wl.namespace)
        self.events.pod_event(pod, "Scheduled", f"Successfully assigned {wl.namespace}/{name} to {node.name}",
                               component="default-scheduler")
        world.at(now + world.rng.uniform(2.0, 6.0), self.kubelets.start_pod, pod.key)

    def node_gone(self, node: SimNode) -> None:
        """PodGC force-deletes the pods of a node that no longer exists (after its quarantine)."""
        self.world.at(self.world.now + 40.0, self._gc, sorted(node.pods), prio=PRIO_CONTROLLER)

    def _gc(self, keys: list) -> None:
        for key in keys:
            self.remove_pod(key, force=True)

    def node_added(self, node: SimNode) -> None:
        for wl in self.by_key.values():
            if wl.kind == "DaemonSet":
                self.world.at(self.world.now + self.world.rng.uniform(0.1, 1.0), self.create_pod, wl, None, node,
                              prio=PRIO_CONTROLLER)
