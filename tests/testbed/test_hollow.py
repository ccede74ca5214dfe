"""Hollow kubelets (the real kubelet's code: ``kubemark --morph=kubelet`` on a fake runtime) on every
release built: registration, renewals every 10 s as the real lease controller makes them, the
field manager nodewatch must recognise, and a SIGKILLed kubelet flipped and tainted by the real
controller after the grace. A control plane of its own per release, grace 20 s.
"""

from __future__ import annotations

import threading
import time

import pytest
from test_latest import GRACE, LEASES, MONITOR, SLACK, _ready_status, _wait, parse_micro

from nodewatch.core.objects import lease_from_dict
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.sources.live import LiveSource
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


TRUNC = 1.0
"""Ready's lastTransitionTime has whole seconds."""
LATENCY = 2.0
"""Watch delivery and a loaded machine's scheduling."""
DOWN = (NodeState.OVERDUE, NodeState.UNKNOWN, NodeState.NOT_READY, NodeState.EVICTING, NodeState.EVICTED)


def test_frozen_cut_off_and_restarted_real_kubelets_as_nodewatch_predicted(hollow_testbed, tmp_path):
    """The real kubelet's code, frozen (SIGSTOP), cut off (its link holds every byte) and restarted
    (a new process), each in a zone of its own beside a healthy one; nodewatch on the viewer's RBAC.
    The frozen and the cut-off node: the real Ready -> Unknown in nodewatch's window (lease seen +
    grace, one monitor pass more), shown as it came; back (thawed, reconnected): Ready again in
    both, the NoExecute taint gone. The restarted node renews again within the grace: the
    controller never flips it, and nodewatch never called it overdue."""
    tb, binaries = hollow_testbed
    layout = [("hollow-2", f"hollow-2{z}") for z in "abcd"]
    fleet = HollowFleet(tb, binaries, layout, prefix="agree", progress=print)
    admin = tb.admin()
    settings = Settings().override(grace_seconds=GRACE, monitor_period_seconds=MONITOR)
    src = LiveSource(settings, kubeconfig=str(tb.viewer_kubeconfig), cert_cache_dir=str(tmp_path / "certs"))
    samples: dict[str, list[tuple[float, NodeState, float | None]]] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            now = time.time()
            for v in src.state.evaluate(now).nodes:
                samples.setdefault(v.name, []).append((now, v.state, v.lease_observed_at))

    try:
        fleet.start()
        fleet.wait_ready()
        frozen, cut, restarted, healthy = fleet.node_order
        src.start()
        assert src.wait_synced(30)
        _wait(lambda: all((v := src.state.node_view(n, time.time())) is not None and v.state is NodeState.READY
                          for n in fleet.node_order), 30, "every hollow node Ready in nodewatch")
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.time()
        fleet.freeze(frozen)
        fleet.disconnect(cut)
        fleet.restart(restarted)
        flips = {n: _wait(lambda n=n: (s := _ready_status(admin, n))[0] == "Unknown" and s[1],
                          GRACE + 3 * MONITOR + 20, f"{n} Ready=Unknown") for n in (frozen, cut)}
        time.sleep(MONITOR + LATENCY)
        fleet.thaw(frozen)
        fleet.reconnect(cut)
        for n in (frozen, cut):
            _wait(lambda n=n: _ready_status(admin, n)[0] == "True"
                  and not [t for t in admin.get(f"/api/v1/nodes/{n}")["spec"].get("taints", [])
                           if t["effect"] == "NoExecute"], GRACE + 2 * MONITOR, f"{n} Ready again, untainted")
        _wait(lambda: all((v := src.state.node_view(n, time.time())) is not None and v.state is NodeState.READY
                          for n in fleet.node_order), 20, "every hollow node Ready again in nodewatch")
        real = {n: _ready_status(admin, n) for n in fleet.node_order}
    finally:
        stop.set()
        src.stop()
        fleet.close()
        admin.close()
    for n in (frozen, cut):
        ss = samples[n]
        seen = next(s for s in ss if s[0] >= started and s[1] in DOWN and s[1] is not NodeState.OVERDUE)
        before = [s for s in ss if s[0] < seen[0] and s[2] is not None]
        predicted = before[-1][2] + GRACE
        assert predicted - TRUNC - LATENCY <= flips[n] <= predicted + MONITOR + SLACK, (n, predicted, flips[n])
        assert flips[n] <= seen[0] <= flips[n] + TRUNC + LATENCY + 0.2, (n, flips[n], seen)
    assert real[restarted][0] == "True" and real[restarted][1] <= started, real[restarted]
    assert not [s for s in samples[restarted] if s[0] >= started and s[1] in DOWN], "never overdue, never down"
    assert all(s[1] is NodeState.READY for s in samples[healthy] if s[0] >= started)
