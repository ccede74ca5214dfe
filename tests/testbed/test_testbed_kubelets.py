"""The testbed's simulated kubelets behave as kubelets do where the real controller can tell.

Found by running ``nodewatch testbed up --scenario clock-skew`` on v1.20.2: the node whose clock is
95 s behind went Unknown 45 s after it registered, and stayed Unknown while it renewed every 10 s.
Two faults of the driver, not of the controller:

- the scenario was applied after the nodes registered, so that node's clock stepped back 95 s at
  its first renewal; the controller counts only a renewTime newer than the last it saw, so it took
  the node for silent for 95 s (what a real clock stepped back does). Whether the controller saw
  the registration's renewTime before the first renewal depends on its monitor pass, so the test
  reads the Lease as registered, which is certain;
- the status sync posted only what changed against its own last post, never reading the Node
  back, so the controller's Unknown stayed until the 5-minute report. A real kubelet's sync starts
  from the Node the API server holds and posts at once when it differs.

Its nodes are in a zone of their own (ap-east-1a), without pods, deleted afterwards.
"""

from __future__ import annotations

import time

import pytest
from campaign import GRACE, MONITOR

from nodewatch.core.timeutil import parse_time
from nodewatch.sim.kubelet import RENEW_INTERVAL
from nodewatch.testbed.api import STRATEGIC
from nodewatch.testbed.kubelets import SYNC_PERIOD, TestbedFleet, start_fleet
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


def _ready(admin, name: str) -> dict:
    node = admin.get(f"/api/v1/nodes/{name}")
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


def test_skewed_clocks_hold_from_registration_and_a_controllers_unknown_is_put_back(testbed):
    admin = testbed.admin()
    fleet = TestbedFleet(testbed.admin(), layout=[("ap-east-1", "ap-east-1a")] * 3, seed=52, pods_per_node=0)
    names = list(fleet.node_order)
    try:
        start_fleet(fleet, "clock-skew")
        registered = time.time()
        skewed = sorted(n for n in names if fleet.nodes[n].clock_offset)
        (plain,) = [n for n in names if not fleet.nodes[n].clock_offset]
        assert sorted(fleet.nodes[n].clock_offset for n in skewed) == [-95.0, 40.0]
        for n in skewed:  # registered on its own clock: its renewTime never steps back at a renewal
            lease = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{n}")
            offset = parse_time(lease["spec"]["renewTime"]) - registered
            assert abs(offset - fleet.nodes[n].clock_offset) < RENEW_INTERVAL * 1.5, (n, offset)

        # what the controller writes of a node it no longer hears from (here: while it renews)
        admin.patch(f"/api/v1/nodes/{plain}/status", {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
             "message": "Kubelet stopped posting node status."}]}}, kind=STRATEGIC)
        marked = time.time()
        assert _ready(admin, plain)["status"] == "Unknown"
        wait_until(lambda: _ready(admin, plain)["status"] == "True", timeout=2 * SYNC_PERIOD + 5, interval=0.5)
        back = time.time() - marked
        assert _ready(admin, plain)["reason"] == "KubeletReady"

        # the skewed nodes renew on their own clocks from the start: never silent for the controller,
        # so never Unknown (a flip would last until the next status sync, 10 s: sampled every 0.5 s)
        seen: dict[str, set[str]] = {n: set() for n in skewed}
        while time.time() < registered + GRACE + 3 * MONITOR:
            for n in skewed:
                seen[n].add(_ready(admin, n)["status"])
            time.sleep(0.5)
        assert seen == {n: {"True"} for n in skewed}, seen
    finally:
        fleet.stop()
        for n in names:
            try:
                admin.delete(f"/api/v1/nodes/{n}")
            except Exception:  # noqa: BLE001 - best effort: a zone of its own either way
                pass
        admin.close()
    print(f"testbed {testbed.version}: a controller's Unknown put back by the kubelet's sync in {back:.1f}s; "
          f"clocks {[fleet.nodes[n].clock_offset for n in skewed]} s held Ready past grace {GRACE:g}s")
