"""The newest Kubernetes release the Go module proxy serves, built from Go modules, as the judge.

``nodewatch testbed up --version latest``: kube-apiserver, kube-controller-manager and etcd of
the newest release, with simulated kubelets (hollow kubelets on every release: ``test_hollow``). Shortened grace (20 s) so that a kubelet-stop takes half a
minute; the monitor period stays at its 5 s default.
"""

from __future__ import annotations

import time

import pytest
from campaign import parse_time, ready_condition

from nodewatch.testbed.build import ensure_built
from nodewatch.testbed.controlplane import down, up
from nodewatch.testbed.kubelets import TestbedFleet

pytestmark = pytest.mark.testbed

GRACE = 20.0
MONITOR = 5.0
SLACK = 3.0
"""Whole-second API timestamps (1 s) and a loaded machine's delivery and scheduling (2 s)."""
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@pytest.fixture(scope="module")
def latest(tmp_path_factory):
    binaries = ensure_built(version="latest")
    folder = tmp_path_factory.mktemp("latest")
    tb = up(folder, binaries, controller_flags=(f"--node-monitor-grace-period={GRACE:g}s",),
            progress=lambda line: print(f"testbed: {line}"))
    try:
        yield tb, binaries
    finally:
        down(folder, progress=lambda line: print(f"testbed: {line}"))


def _wait(check, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


def _ready_status(admin, name: str) -> tuple[str, float | None]:
    c = ready_condition(admin.get(f"/api/v1/nodes/{name}"))
    return c.get("status", ""), parse_time(c.get("lastTransitionTime"))


def test_latest_is_a_current_release_and_says_so(latest):
    tb, binaries = latest
    admin = tb.admin()
    try:
        v = admin.get("/version")
    finally:
        admin.close()
    assert v["gitVersion"] == binaries.version == tb.version
    assert int(v["minor"]) == binaries.minor > 20
    major, minor, patch = (int(x) for x in binaries.etcd_version.lstrip("v").split("."))
    assert (major, minor, patch) >= (3, 5, 13)  # streaming lists need RequestWatchProgress


def test_simulated_kubelets_are_ready_and_a_stopped_one_flips_after_the_grace(latest):
    tb, _ = latest
    fleet = TestbedFleet(tb.admin(), layout=[("sim-1", "sim-1a")] * 2, pods_per_node=0, seed=3, version=tb.version)
    admin = tb.admin()
    try:
        fleet.setup()
        a, b = fleet.node_order
        _wait(lambda: all(_ready_status(admin, n)[0] == "True" for n in (a, b)), 30, "both nodes Ready")
        fleet.renew_now(fleet.nodes[a])
        fleet.stop_kubelet(fleet.nodes[a])
        acked = fleet.renewed_at[a]
        _, flipped = _wait(lambda: (s := _ready_status(admin, a))[0] == "Unknown" and s, GRACE + 3 * MONITOR + 10,
                           f"{a} Ready=Unknown")
        assert GRACE - 1.0 <= flipped - acked <= GRACE + MONITOR + SLACK, flipped - acked
        assert _ready_status(admin, b)[0] == "True"
    finally:
        fleet.stop()
        admin.close()


def parse_micro(s: str) -> float:
    whole = parse_time(s)
    assert whole is not None
    frac = s[19:].rstrip("Z").lstrip(".")
    return whole + (float("0." + frac) if frac else 0.0)
