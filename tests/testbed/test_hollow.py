"""Hollow kubelets (the real kubelet's code: ``kubemark --morph=kubelet`` on a fake runtime) on every
release built: registration, renewals every 10 s as the real lease controller makes them, the
field manager nodewatch must recognise, and a SIGKILLed kubelet flipped and tainted by the real
controller after the grace. A control plane of its own per release, grace 20 s.
"""

from __future__ import annotations

import pytest
from test_latest import GRACE, LEASES, MONITOR, SLACK, _ready_status, _wait, parse_micro

from nodewatch.core.objects import lease_from_dict
from nodewatch.testbed.controlplane import down, up
from nodewatch.testbed.hollow import HollowFleet

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def hollow_testbed(binaries, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hollow")
    tb = up(folder, binaries, controller_flags=(f"--node-monitor-grace-period={GRACE:g}s",),
            progress=lambda line: print(f"testbed (hollow): {line}"))
    try:
        yield tb, binaries
    finally:
        down(folder, progress=lambda line: print(f"testbed (hollow): {line}"))


def test_hollow_kubelets_renew_as_the_real_kubelet_and_a_killed_one_flips(hollow_testbed):
    tb, binaries = hollow_testbed
    fleet = HollowFleet(tb, binaries, [("hollow-1", "hollow-1a")] * 2, progress=print)
    admin = tb.admin()
    try:
        fleet.start()
        fleet.wait_ready()
        a, b = fleet.node_order
        # The real lease controller renews every 10 s (a quarter of its 40 s lease).
        first = admin.get(f"{LEASES}/{a}")
        t1 = parse_micro(first["spec"]["renewTime"])
        second = _wait(lambda: (le := admin.get(f"{LEASES}/{a}"))["spec"]["renewTime"] != first["spec"]["renewTime"]
                       and le, 25, "a second renewal")
        t2 = parse_micro(second["spec"]["renewTime"])
        assert 9.0 <= t2 - t1 <= 11.5, t2 - t1
        managers = {m["manager"] for m in second["metadata"].get("managedFields", [])}
        # nodewatch recognises the hollow kubelet's writes as the kubelet's (the write time it reads).
        assert lease_from_dict(second).written_at is not None, managers
        # Kill it right after a renewal.
        third = _wait(lambda: (le := admin.get(f"{LEASES}/{a}"))["spec"]["renewTime"] != second["spec"]["renewTime"]
                      and le, 15, "a third renewal")
        fleet.stop_kubelet(a)
        last = parse_micro(third["spec"]["renewTime"])
        _, flipped = _wait(lambda: (s := _ready_status(admin, a))[0] == "Unknown" and s, GRACE + 3 * MONITOR + 15,
                           f"{a} Ready=Unknown")
        assert GRACE - 1.0 <= flipped - last <= GRACE + MONITOR + SLACK, flipped - last
        assert _ready_status(admin, b)[0] == "True"
        taints = _wait(lambda: [t for t in admin.get(f"/api/v1/nodes/{a}")["spec"].get("taints", [])
                                if t["key"] == "node.kubernetes.io/unreachable"], 2 * MONITOR + 5, "unreachable taints")
        assert {t["effect"] for t in taints} <= {"NoSchedule", "NoExecute"}
    finally:
        fleet.close()
        admin.close()
