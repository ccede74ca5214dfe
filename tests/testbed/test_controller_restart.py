"""A restarted kube-controller-manager counts every node's grace from its first pass, and nodewatch
follows it through the ``RegisteredNode`` event that pass writes (``Store.registered``).

Found on the v1.37.2 testbed (docs/real-control-plane.md): a kubelet stopped, the controller manager
restarted 15 s later: Ready=Unknown 36 s after the last renewal (grace 20 s), where nodewatch,
counting from the renewal, had said Overdue from 21 s on.
"""

from __future__ import annotations

import time

import pytest
from campaign import GRACE, LATENCY, MONITOR, SAMPLE, TRUNC, parse_time, ready_condition, watching, zone_of_its_own

from nodewatch.core.rules import NodeState
from nodewatch.testbed.api import ApiStatus
from nodewatch.testbed.controlplane import restart_controller_manager
from nodewatch.testbed.kubelets import start_fleet
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

DOWN = (NodeState.OVERDUE, NodeState.UNKNOWN, NodeState.EVICTING, NodeState.EVICTED)


def test_a_restarted_controller_counts_the_grace_from_its_start_and_so_does_nodewatch(testbed):
    with zone_of_its_own(testbed, ("ap-east-1", "ap-east-1d"), 2, seed=71) as (admin, fleet):
        start_fleet(fleet, "steady")
        victim = fleet.node_order[0]
        with watching(testbed, "certs-restart") as src:
            wait_until(lambda: src.state.snapshot().leases[victim].renewals >= 2, timeout=30, interval=0.5)
            fleet.renew_now(fleet.nodes[victim])
            fleet.stop_kubelet(fleet.nodes[victim])
            wait_until(lambda: (src.state.evaluate(time.time()).node(victim).grace_remaining(time.time()) or 99) < 8,
                       timeout=GRACE + 10, interval=SAMPLE)
            last_renewal = src.state.evaluate(time.time()).node(victim).lease_observed_at
            restarted = restart_controller_manager(testbed)
            wait_until(lambda: src.state.store.registered.get(victim, 0.0) > restarted - TRUNC, timeout=30, interval=SAMPLE)
            registered = src.state.store.registered[victim]  # the event's second: at most TRUNC before the pass
            said_down: list[float] = []

            def flipped() -> bool:
                now = time.time()
                if not said_down and src.state.evaluate(now).node(victim).state in DOWN:
                    said_down.append(now)
                return ready_condition(admin.get(f"/api/v1/nodes/{victim}")).get("status") == "Unknown"

            wait_until(flipped, timeout=GRACE + 4 * MONITOR + 20, interval=SAMPLE)
            real = parse_time(ready_condition(admin.get(f"/api/v1/nodes/{victim}"))["lastTransitionTime"])
            # the restart mattered: without it the flip would have come a pass after grace of the renewal
            assert real > last_renewal + GRACE + MONITOR + LATENCY, (real - last_renewal)
            # the real flip: the first pass after the grace counted from the new process's first pass
            assert registered + GRACE - TRUNC - LATENCY <= real <= registered + TRUNC + GRACE + MONITOR + LATENCY, \
                (real - registered)
            # nodewatch said nothing down before the grace counted from the registration ran out (the
            # event's second, at most TRUNC before the controller's pass); counted from the last
            # renewal it would have said so at least 12 s sooner
            assert said_down and said_down[0] >= registered + GRACE - LATENCY - SAMPLE, (said_down[0] - registered)


def test_a_restart_times_a_pods_eviction_anew_and_so_does_nodewatch(testbed):
    """The taint-eviction controller starts a pod's timer when it sees the taint (``processPodOnNode``:
    ``now``): after a restart the pod goes a toleration after the restart, not after the taint's
    ``timeAdded``. Judged with a taint of the cluster's own (``example.com/drain:NoExecute``) on a Ready
    node: the restarted node controller takes its unreachable and not-ready taints off every node it
    registers and puts them back with a new ``timeAdded`` (``markNodeAsReachable``, seen on both
    releases), so those show the restart in the objects themselves; another taint does not."""
    drain = {"key": "example.com/drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    with zone_of_its_own(testbed, ("ap-east-1", "ap-east-1e"), 2, seed=73) as (admin, fleet):
        victim = fleet.node_order[0]
        fleet.add_pod(victim, "restart-0", namespace="restart", tolerations=[drain])
        start_fleet(fleet, "steady")
        with watching(testbed, "certs-restart-evict") as src:
            src.focus_node(victim)  # its pods watched

            def pod_eviction() -> float | None:
                pods = [p for p in src.state.pods_on(victim, time.time()) if p.name == "restart-0"]
                return pods[0].eviction_at if pods else None

            wait_until(lambda: any(p.name == "restart-0" for p in src.state.pods_on(victim, time.time())),
                       timeout=30, interval=SAMPLE)
            added = float(int(time.time()))
            taints = admin.get(f"/api/v1/nodes/{victim}")["spec"].get("taints") or []
            admin.patch(f"/api/v1/nodes/{victim}", {"spec": {"taints": [*taints, {
                "key": "example.com/drain", "effect": "NoExecute",
                "timeAdded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(added))}]}})
            wait_until(lambda: pod_eviction() == pytest.approx(added + 30, abs=1e-6), timeout=10, interval=SAMPLE)
            wait_until(lambda: time.time() >= added + 12, timeout=20, interval=SAMPLE)  # half its toleration gone
            restarted = restart_controller_manager(testbed)
            wait_until(lambda: src.state.store.registered.get(victim, 0.0) > restarted - TRUNC, timeout=30, interval=SAMPLE)
            registered = src.state.store.registered[victim]
            assert pod_eviction() == pytest.approx(registered + 30, abs=1e-6)

            def deleted() -> float | None:
                try:
                    meta = admin.get("/api/v1/namespaces/restart/pods/restart-0")["metadata"]
                except ApiStatus as exc:  # deleted and confirmed between two looks: as the kubelets saw it
                    if exc.status != 404:
                        raise
                    meta = fleet.deletions_seen.get(("restart", "restart-0"))
                    assert meta is not None, "restart-0 is gone, and no kubelet saw it Terminating"
                stamp = meta.get("deletionTimestamp")
                return None if stamp is None else parse_time(stamp) - meta.get("deletionGracePeriodSeconds", 0)

            real = wait_until(deleted, timeout=60, interval=SAMPLE)
            assert real > added + 30 + LATENCY + TRUNC, (real - added)  # not by the taint's time
            assert registered - TRUNC - LATENCY <= real - 30 <= registered + TRUNC + LATENCY, (real - registered)
