"""Simulated kubelets against the testbed's real API server: the only code in nodewatch that writes.

The fleet's shape, objects and kubelet behaviour come from the simulated fleet
(``nodewatch.sim.shapes``, ``nodewatch.sim.kubelet``, ``nodewatch.sim.scenarios``): the same
nodes (zone and region labels, capacity), the same workloads (DaemonSets, ReplicaSets,
StatefulSets; some pods with their own ``tolerationSeconds``), the same Ready/NotReady reports and
the same named scenarios. What differs is the clock (wall time: the real controllers run in real
time) and that nobody here plays controller: the kubelets only register their Node, renew their
Lease every 10 s, post status through the status subresource, create their pods (bound with
``spec.nodeName``) and keep them Running, and confirm pod deletions while they can. The real
kube-controller-manager decides Unknown, taints and evictions.

The kubelets write with the admin kubeconfig. Everything is scheduled on one real-time heap and run
by a small thread pool, so a slow request delays only itself.

Why one file of ~600 lines: it is the testbed's counterpart of the simulated fleet's kubelets and
scenario verbs (``TestbedFleet`` offers the verbs ``nodewatch.sim.scenarios`` calls), sharing one
schedule and one set of nodes; the shapes, conditions and scenarios themselves are the simulator's.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import urllib3

from ..core import rules
from ..sim import scenarios as sim_scenarios
from ..sim.catalogue import POOLS
from ..sim.kubelet import RENEW_INTERVAL, RENEW_JITTER, REPORT_PERIOD, SYNC_PERIOD, desired_conditions
from ..sim.objects import fmt_micro, fmt_time
from ..sim.shapes import (
    DAY,
    Cond,
    SimNode,
    SimPod,
    Workload,
    build_workloads,
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
from ..stop_signals import StopSignals
from .api import STRATEGIC, ApiStatus, Client

KUBERNETES_VERSION = "v1.20.2"
DELETION_POLL = 2.0
"""How often the kubelets look for pods of theirs that got a deletionTimestamp."""
LEASE_NS = "kube-node-lease"
RETRY_AFTER = 1.0
WORKERS = 4

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class RealTimeScheduler:
    """``at(t, fn, *args)`` on the wall clock: one dispatcher thread, a few workers."""

    def __init__(self, workers: int = WORKERS, on_error: Progress = _quiet) -> None:
        self._heap: list[tuple[float, int, Callable, tuple]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stop = False
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="testbed-kubelet")
        self._on_error = on_error
        self._thread = threading.Thread(target=self._dispatch, name="testbed-kubelets", daemon=True)
        self._thread.start()

    def at(self, t: float, fn: Callable, *args: Any) -> None:
        with self._cv:
            heapq.heappush(self._heap, (t, next(self._seq), fn, args))
            self._cv.notify()

    def _dispatch(self) -> None:
        while True:
            with self._cv:
                while not self._stop and (not self._heap or self._heap[0][0] > time.time()):
                    wait = None if not self._heap else max(0.0, self._heap[0][0] - time.time())
                    self._cv.wait(wait)
                if self._stop:
                    return
                _, _, fn, args = heapq.heappop(self._heap)
            try:
                self._pool.submit(self._run, fn, args)
            except RuntimeError:
                return  # shut down

    def _run(self, fn: Callable, args: tuple) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - one failed request must not stop the fleet
            self._on_error(f"{getattr(fn, '__name__', fn)}: {type(exc).__name__}: {str(exc)[:200]}")

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=True, cancel_futures=True)


def default_layout(nodes: int) -> list[tuple[str, str]]:
    """(region, zone) per node: zones of about four nodes (at most six zones), round-robin."""
    zones = zones_for(nodes)[: max(1, min(6, nodes // 4))]
    return [zones[i % len(zones)] for i in range(nodes)]


class TestbedFleet:
    """Simulated kubelets on a real API server. Offers the simulated fleet's scenario verbs.

    ``layout`` gives each node's (region, zone); by default zones of about four nodes.
    """

    __test__ = False  # not a pytest class

    def __init__(self, client: Client, nodes: int = 0, *, layout: list[tuple[str, str]] | None = None,
                 seed: int = 1, pods_per_node: int = 4, version: str = KUBERNETES_VERSION,
                 progress: Progress = _quiet, testbed: Any = None) -> None:
        layout = list(layout) if layout is not None else default_layout(nodes)
        self.testbed = testbed
        """The running ``controlplane.Testbed`` (or None): its processes, for scenario steps that
        restart one."""
        if not layout:
            raise ValueError("a fleet needs at least one node")
        self.client = client
        self.lease_agent = f"kubelet/{version} (linux/amd64) nodewatch-testbed"
        """A real kubelet's User-Agent on renewals: the Lease's field manager is then "kubelet"."""
        self.seed = seed
        self.version = version
        self.progress = progress
        self.rng = random.Random(f"nodewatch-testbed/{seed}")
        self.start = time.time()
        self.cert_lifetime = 365 * DAY
        self.nodes: dict[str, SimNode] = {}
        self.node_order: list[str] = []
        self.pods: dict[tuple[str, str], SimPod] = {}
        self.deletions_seen: dict[tuple[str, str], dict] = {}
        """Each pod's metadata as this fleet first saw it with a deletionTimestamp (namespace, name):
        what a test reads of a deletion once the pod is gone (these kubelets confirm one within
        ``DELETION_POLL``, maybe before the test's next look)."""
        self.workloads: list[Workload] = []
        self.renewed_at: dict[str, float] = {}
        """Wall time each node's last Lease renewal was acknowledged by the API server."""
        self.posted: list[tuple[float, str, str, str]] = []
        """(wall time, node, condition, status) of every condition change a kubelet posted."""
        self.errors: list[str] = []
        self._lock = threading.RLock()
        self._sched: RealTimeScheduler | None = None
        self._pending: list[tuple[float, Callable, tuple]] = []
        """Scenario steps scheduled before ``setup`` (``at``)."""
        self._build(layout, pods_per_node)

    # --- shape (from the simulated fleet) ---------------------------------------------------------

    def _build(self, layout: list[tuple[str, str]], pods_per_node: int) -> None:
        rng = self.rng
        width = max(2, len(str(len(layout))))
        for i, (region, zone) in enumerate(layout):
            pool = POOLS[i % len(POOLS)]
            node = make_node(rng, i, width, region, zone, pool, self.version, self.start)
            self.nodes[node.name] = node
            self.node_order.append(node.name)
        if pods_per_node <= 0:
            return
        wls = build_workloads(rng, len(layout), pods_per_node, self.start, self.version, 300.0)
        names = list(self.node_order)
        slots: list[str] = []
        for _ in range(math.ceil(sum(w.replicas for w in wls if w.kind != "DaemonSet") / len(names)) or 0):
            batch = list(names)
            rng.shuffle(batch)
            slots.extend(batch)
        it = iter(slots)
        for wl in wls:
            self.workloads.append(wl)
            if wl.kind == "DaemonSet":
                for name in names:
                    self._new_pod(wl, self.nodes[name], None)
            else:
                for ordinal in range(wl.replicas):
                    self._new_pod(wl, self.nodes[next(it)], ordinal if wl.kind == "StatefulSet" else None)

    def _new_pod(self, wl: Workload, node: SimNode, ordinal: int | None) -> SimPod:
        name = new_pod_name(self.rng, wl, ordinal)
        while (wl.namespace, name) in self.pods:
            name = new_pod_name(self.rng, wl, ordinal)
        node.pod_seq += 1
        pod = SimPod(wl, name, make_uid(self.rng), node.name, self.start, pod_ip(node, node.pod_seq),
                     phase="Pending", ready=False)
        self.pods[pod.key] = pod
        node.pods.add(pod.key)
        wl.pods.add(name)
        return pod

    def add_pod(self, node_name: str, name: str, *, namespace: str = "default",
                toleration_seconds: float | None = None, grace_seconds: int = 30,
                tolerations: list[dict] | None = None) -> SimPod:
        """A bare pod with its own unreachable/not-ready tolerations (None: the admission defaults),
        and ``tolerations`` besides.

        For the agreement tests: a pod whose eviction time the test chooses. Call before ``setup``
        or after it (then it is created at once).
        """
        tol = [] if toleration_seconds is None else [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int(toleration_seconds)}
            for key in rules.EVICTION_TAINTS]
        tol += tolerations or []
        wl = Workload("Pod", namespace, name, "", "registry.k8s.io/pause:3.2", 1, tol, self.start,
                      grace_seconds=grace_seconds)
        node = self.nodes[node_name]
        pod = SimPod(wl, name, make_uid(self.rng), node.name, self.start, pod_ip(node, node.pod_seq + 1),
                     phase="Pending", ready=False)
        node.pod_seq += 1
        self.pods[pod.key] = pod
        node.pods.add(pod.key)
        if self._sched is not None:
            self._ensure_namespace(namespace)
            self._create_pod(pod)
        return pod

    # --- objects as the real API server takes them --------------------------------------------------

    def _node_body(self, node: SimNode) -> dict:
        obj = node_object(node)
        for k in ("uid", "creationTimestamp"):
            obj["metadata"].pop(k, None)
        return obj

    def _pod_body(self, pod: SimPod) -> dict:
        obj = pod_object(pod, self.nodes.get(pod.node))
        meta = obj["metadata"]
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(k, None)
        wl = pod.wl
        if wl.kind == "Pod":
            meta.pop("ownerReferences", None)
            meta.pop("generateName", None)
        spec = obj["spec"]
        # The Priority admission plugin computes these from the class; it refuses them set by hand.
        spec.pop("priority", None)
        spec.pop("preemptionPolicy", None)
        if wl.kind == "DaemonSet" and wl.namespace == "kube-system":
            spec["priorityClassName"] = "system-node-critical"
        spec["automountServiceAccountToken"] = False
        if wl.kind != "DaemonSet" and all(t.get("tolerationSeconds") == 300 for t in spec["tolerations"]):
            spec["tolerations"] = []  # the DefaultTolerationSeconds admission plugin adds these
        obj.pop("status", None)
        return obj

    def _pod_status(self, pod: SimPod) -> dict:
        return pod_object(pod, self.nodes.get(pod.node))["status"]

    def _owner_body(self, wl: Workload) -> tuple[str, dict]:
        labels = {"app.kubernetes.io/name": wl.name}
        template = {"metadata": {"labels": dict(labels)},
                    "spec": {"containers": [{"name": wl.name, "image": wl.image}],
                             "tolerations": [dict(t) for t in wl.tolerations]}}
        base = f"/apis/apps/v1/namespaces/{wl.namespace}"
        if wl.kind == "DaemonSet":
            return f"{base}/daemonsets", {
                "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": wl.name, "namespace": wl.namespace},
                "spec": {"selector": {"matchLabels": labels}, "template": template,
                         "updateStrategy": {"type": "OnDelete"}}}
        if wl.kind == "StatefulSet":
            return f"{base}/statefulsets", {
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": wl.name, "namespace": wl.namespace},
                "spec": {"replicas": wl.replicas, "serviceName": wl.name, "selector": {"matchLabels": labels},
                         "template": template, "updateStrategy": {"type": "OnDelete"},
                         "podManagementPolicy": "Parallel"}}
        labels = {**labels, "pod-template-hash": wl.revision}
        template["metadata"]["labels"] = dict(labels)
        return f"{base}/replicasets", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": wl.rs_name, "namespace": wl.namespace},
            "spec": {"replicas": wl.replicas, "selector": {"matchLabels": labels}, "template": template}}

    # --- setup ------------------------------------------------------------------------------------------

    def setup(self) -> None:
        """Register every node with its Lease, create the workloads and their pods, start the kubelets."""
        c = self.client
        self._sched = RealTimeScheduler(on_error=self._error)
        namespaces = sorted({wl.namespace for wl in self.workloads} | {p.wl.namespace for p in self.pods.values()})
        for ns in namespaces:
            self._ensure_namespace(ns)
        for wl in self.workloads:
            path, body = self._owner_body(wl)
            created = c.create_or_get(path, body)
            if wl.kind == "Deployment":
                wl.rs_uid = created["metadata"]["uid"]
            else:
                wl.uid = created["metadata"]["uid"]
        now = time.time()
        for name in self.node_order:
            node = self.nodes[name]
            node.conditions = healthy_conditions(node.node_clock(now), now)
            node.last_report = now
            created = c.create_or_get("/api/v1/nodes", self._node_body(node))
            node.uid = created["metadata"]["uid"]
            node.renew_time = node.node_clock(time.time())
            lease = lease_object(node)
            for k in ("uid", "creationTimestamp"):
                lease["metadata"].pop(k, None)
            c.create_or_get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases", lease)
            self.renewed_at[name] = time.time()
        self.progress(f"registered {len(self.nodes)} nodes")
        for key in sorted(self.pods):
            self._create_pod(self.pods[key])
        self.progress(f"created {len(self.pods)} pods")
        for name in self.node_order:
            node = self.nodes[name]
            self._schedule_renewal(node, time.time() + RENEW_INTERVAL * self.rng.random())
            self._sched.at(time.time() + SYNC_PERIOD * self.rng.random(), self._sync_status, node)
        self._sched.at(time.time() + DELETION_POLL, self._confirm_deletions)
        for t, fn, args in self._pending:
            self._sched.at(t, fn, *args)
        self._pending.clear()

    def _ensure_namespace(self, ns: str) -> None:
        c = self.client
        c.create_or_get("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        deadline = time.monotonic() + 60
        while True:  # the ServiceAccount admission plugin refuses pods until "default" exists
            try:
                c.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default")
                return
            except ApiStatus as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _create_pod(self, pod: SimPod) -> None:
        wl = pod.wl
        created = self.client.create_or_get(f"/api/v1/namespaces/{wl.namespace}/pods", self._pod_body(pod))
        pod.uid = created["metadata"]["uid"]
        now = time.time()
        pod.phase, pod.ready, pod.start_time, pod.ready_since = "Running", True, now, now
        self.client.patch(f"/api/v1/namespaces/{wl.namespace}/pods/{pod.name}/status",
                          {"status": self._pod_status(pod)}, kind=STRATEGIC)

    def _error(self, message: str) -> None:
        self.errors.append(message)
        self.progress(f"error: {message}")

    # --- the kubelet loops ------------------------------------------------------------------------------

    def _schedule_renewal(self, node: SimNode, at: float) -> None:
        node.lease_token += 1
        assert self._sched is not None
        self._sched.at(at, self._renew, node, node.lease_token)

    def _renew(self, node: SimNode, token: int) -> None:
        if token != node.lease_token or node.deleted:
            return
        now = time.time()
        if not node.can_talk(now):
            return  # nothing reaches the API server; ``_resume`` restarts the loop
        node.renew_time = node.node_clock(now)
        try:
            self.client.patch(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{node.name}",
                              {"spec": {"renewTime": fmt_micro(node.renew_time), "holderIdentity": node.name}},
                              user_agent=self.lease_agent)
        except (ApiStatus, OSError, urllib3.exceptions.HTTPError) as exc:
            # The kubelet's lease controller retries soon (200 ms doubling to 7 s; one step here).
            self._error(f"renew {node.name}: {type(exc).__name__}: {str(exc)[:120]}")
            self._schedule_renewal(node, time.time() + RETRY_AFTER)
            return
        with self._lock:
            if token == node.lease_token:
                self.renewed_at[node.name] = time.time()
        interval = RENEW_INTERVAL * (1.0 + RENEW_JITTER * self.rng.random())
        if node.slow_lease:
            interval += self.rng.uniform(12.0, 22.0)  # renewals failing on a congested link
        self._schedule_renewal(node, now + interval)

    def _sync_status(self, node: SimNode, force: bool = False) -> None:
        """The 10 s status sync: post when something changed, or every 5 minutes."""
        if node.deleted:
            return
        now = time.time()
        assert self._sched is not None
        node.status_token += 1
        self._sched.at(now + SYNC_PERIOD, self._sync_status_token, node, node.status_token)
        if node.can_talk(now) and self._read_back(node):
            self._post_status(node, now, force)

    def _sync_status_token(self, node: SimNode, token: int) -> None:
        if token == node.status_token:
            self._sync_status(node)

    def _post_status(self, node: SimNode, now: float, force: bool) -> None:
        t_node = node.node_clock(now)
        changed: list[tuple[str, str]] = []
        with self._lock:
            for ctype, (status, reason, message, _event) in desired_conditions(node).items():
                c = node.conditions.get(ctype)
                if c is None:
                    c = node.conditions[ctype] = Cond(ctype, status, reason, message, t_node, t_node)
                    changed.append((ctype, status))
                elif c.status != status:
                    c.transition = t_node
                    changed.append((ctype, status))
                c.status, c.reason, c.message, c.heartbeat = status, reason, message, t_node
            if not (changed or force or now - node.last_report >= REPORT_PERIOD):
                return
            conds = [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                      "lastHeartbeatTime": fmt_time(c.heartbeat), "lastTransitionTime": fmt_time(c.transition)}
                     for c in node.conditions.values()]
        try:
            self.client.patch(f"/api/v1/nodes/{node.name}/status", {"status": {"conditions": conds}},
                              kind=STRATEGIC)
        except (ApiStatus, OSError, urllib3.exceptions.HTTPError) as exc:
            node.last_report = -math.inf  # post again at the next sync
            self._error(f"status {node.name}: {type(exc).__name__}: {str(exc)[:120]}")
            return
        node.last_report = now
        for ctype, status in changed:
            self.posted.append((now, node.name, ctype, status))

    def _read_back(self, node: SimNode) -> bool:
        """Read the Node back and take its conditions' statuses as the ones posted last. The real
        kubelet's status sync starts from the Node as the API server holds it and posts whenever
        what it would write differs (``nodeStatusHasChanged``): a Ready the controller turned
        Unknown, while the kubelet was renewing all along, is set back at the next sync, not at the
        next 5-minute report. False when the read failed (the sync posts nothing then)."""
        try:
            current = self.client.get(f"/api/v1/nodes/{node.name}")
        except (ApiStatus, OSError, urllib3.exceptions.HTTPError) as exc:
            self._error(f"status {node.name}: read back: {type(exc).__name__}: {str(exc)[:120]}")
            return False
        with self._lock:
            for cond in current.get("status", {}).get("conditions", []) or []:
                mine = node.conditions.get(cond.get("type"))
                if mine is not None:
                    mine.status = cond.get("status", mine.status)
        return True

    def _resume(self, node: SimNode) -> None:
        """The kubelet reaches the API server again: it renews at once and posts its status (its
        sync reads the Node back: the controller may have marked it Unknown meanwhile)."""
        now = time.time()
        if node.deleted or not node.can_talk(now):
            return
        self.renew_now(node)
        self._sync_status(node, force=True)

    def renew_now(self, node: SimNode) -> None:
        node.lease_token += 1
        self._renew(node, node.lease_token)

    def _confirm_deletions(self) -> None:
        """Pods of ours with a deletionTimestamp: a kubelet that can still manage pods kills them and
        confirms (a delete with grace 0); one that cannot leaves them Terminating."""
        assert self._sched is not None
        try:
            pods = self.client.get("/api/v1/pods")["items"]
        finally:
            self._sched.at(time.time() + DELETION_POLL, self._confirm_deletions)
        now = time.time()
        for obj in pods:
            meta = obj["metadata"]
            key = (meta["namespace"], meta["name"])
            pod = self.pods.get(key)
            if pod is None or meta.get("uid") != pod.uid or not meta.get("deletionTimestamp"):
                continue
            if pod.deletion_at is None:
                pod.deletion_at = now
                self.deletions_seen[key] = meta
            node = self.nodes.get(pod.node)
            if node is None or not node.can_talk(now) or node.runtime_down:
                continue
            try:
                self.client.request("DELETE", f"/api/v1/namespaces/{key[0]}/pods/{key[1]}",
                                    {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
            except ApiStatus as exc:
                if exc.status != 404:
                    raise
            with self._lock:
                self.pods.pop(key, None)
                node.pods.discard(key)

    def stop(self) -> None:
        """Stop every kubelet loop (the objects stay in the API server)."""
        if self._sched is not None:
            self._sched.stop()
        self.client.close()

    # --- the scenario verbs (the simulated fleet's names) ------------------------------------------------

    @property
    def now(self) -> float:
        return time.time()

    def at(self, t: float, fn: Callable, *args: Any) -> None:
        """Run ``fn(*args)`` at wall time ``t``; before ``setup`` the step waits for it (a scenario
        chosen first, so that what a node *is*, its clock or its certificate, holds from its
        registration on)."""
        if self._sched is None:
            self._pending.append((t, fn, args))
            return
        self._sched.at(t, fn, *args)

    def stop_kubelet(self, node: SimNode) -> None:
        node.kubelet_up = False

    def start_kubelet(self, node: SimNode) -> None:
        node.kubelet_up = True
        self._resume(node)

    def disconnect(self, node: SimNode) -> None:
        node.connected = False

    def reconnect(self, node: SimNode) -> None:
        node.connected = True
        self._resume(node)

    def set_runtime_down(self, node: SimNode, down: bool = True) -> None:
        node.runtime_down = down  # reported at the next 10 s status sync

    def set_cni_down(self, node: SimNode, down: bool = True) -> None:
        node.cni_down = down

    def set_pressure(self, node: SimNode, kind: str, on: bool = True) -> None:
        (node.pressure.add if on else node.pressure.discard)(kind)

    def cordon(self, node: SimNode, on: bool = True) -> None:
        node.unschedulable = on
        self.client.patch(f"/api/v1/nodes/{node.name}", {"spec": {"unschedulable": on or None}})

    def delete_node(self, node: SimNode) -> None:
        node.deleted = True
        self.client.delete(f"/api/v1/nodes/{node.name}")

    def rotate_cert(self, node: SimNode) -> None:
        self.progress(f"{node.name}: client certificate rotation is not simulated on the testbed")

    def restart_controller_manager(self) -> None:
        """The real one, when the fleet knows its testbed (``testbed``: the kubelets' driver's)."""
        if self.testbed is None:
            self.progress("kube-controller-manager: not restarted (this fleet does not know its testbed)")
            return
        from .controlplane import restart_controller_manager

        restart_controller_manager(self.testbed)
        self.progress("kube-controller-manager restarted")

    def add_node(self, zone_index: int | None = None) -> None:
        self.progress("joining nodes are not simulated on the testbed")

    def apply_scenario(self, name: str, speed: float = 1.0) -> list[tuple[float, str]]:
        """Schedule a named scenario of the simulated fleet from now; steps come ``speed`` times sooner.

        Steps before the start (a scenario's history) happen at once. Returns (wall time, step) pairs.
        Call it before ``setup``: a scenario sets some nodes up as they are from the start (a clock
        95 s behind, a certificate that runs out); chosen after the registration, the clock stepped
        back at the node's first renewal, and the real controller, which counts only a renewTime
        newer than the last, took the node for silent for 95 s and marked it Unknown.
        """
        if speed <= 0:
            raise ValueError("--speed must be positive")
        plan = sim_scenarios.plan(name, len(self.nodes))
        self.start = time.time()
        steps = plan.resolve(self, sim_scenarios.Picker(self))
        out = []
        for rel, fn in steps:
            t = self.start + max(0.0, rel) / speed
            self.at(t, fn)
            out.append((t, _describe(fn)))
        return out


def _describe(fn: Callable) -> str:
    func = getattr(fn, "func", fn)
    args = [getattr(a, "name", a) for a in getattr(fn, "args", ())]
    return f"{getattr(func, '__name__', func)}({', '.join(map(str, args))})"


# --- the background driver of `nodewatch testbed up --nodes N` ---------------------------------------------

READY_FILE = "kubelets.json"
STEPS_SHOWN = 12


def start_driver(tb: Any, *, nodes: int, scenario: str, speed: float, seed: int, pods_per_node: int,
                 progress: Progress, timeout: float = 120.0) -> None:
    """Run the kubelets in a background process of the testbed (stopped by ``down``)."""
    from . import processes

    sim_scenarios.plan(scenario, nodes)  # an unknown scenario fails here, not in the background
    ready = tb.dir / READY_FILE
    ready.unlink(missing_ok=True)
    processes.start(tb.dir, "kubelets", [
        sys.executable, "-m", "nodewatch.testbed.kubelets", "--dir", str(tb.dir), "--nodes", str(nodes),
        "--scenario", scenario, "--speed", str(speed), "--seed", str(seed), "--pods-per-node", str(pods_per_node)])
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if "kubelets" not in processes.running(tb.dir) or time.monotonic() > deadline:
            from .controlplane import TestbedError

            raise TestbedError(f"the kubelets did not start; see {tb.dir / 'logs' / 'kubelets.log'}")
        time.sleep(0.2)
    info = json.loads(ready.read_text())
    progress(f"{len(info['nodes'])} kubelets running, scenario {scenario}")
    steps = info["steps"]
    for t, step in steps[:STEPS_SHOWN]:
        progress(f"  at +{t - info['start']:.0f}s: {step}")
    if len(steps) > STEPS_SHOWN:
        progress(f"  ... {len(steps) - STEPS_SHOWN} more steps (all in {tb.dir / 'logs' / 'kubelets.log'})")


def start_fleet(fleet: TestbedFleet, scenario: str, speed: float = 1.0) -> list[tuple[float, str]]:
    """Register the fleet and run its kubelets under ``scenario``, chosen first (``apply_scenario``
    says why). Returns the steps' (wall time, step) pairs."""
    steps = fleet.apply_scenario(scenario, speed)
    fleet.setup()
    return steps


def main(argv: list[str] | None = None) -> int:
    from .controlplane import Testbed

    ap = argparse.ArgumentParser(prog="python -m nodewatch.testbed.kubelets")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--scenario", default="steady")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pods-per-node", type=int, default=4)
    args = ap.parse_args(argv)

    def log(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    tb = Testbed.load(args.dir.resolve())
    fleet = TestbedFleet(tb.admin(), args.nodes, seed=args.seed, pods_per_node=args.pods_per_node,
                         version=tb.version, progress=log, testbed=tb)
    signals = StopSignals((signal.SIGTERM, signal.SIGINT)).install()  # for the life of the process
    steps = start_fleet(fleet, args.scenario, args.speed)
    for t, step in steps:
        log(f"scenario step at {fmt_time(t)}: {step}")
    tmp = args.dir / (READY_FILE + ".tmp")
    tmp.write_text(json.dumps({"nodes": fleet.node_order, "start": fleet.start, "steps": steps}))
    tmp.replace(args.dir / READY_FILE)
    signals.wait()
    fleet.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
