"""Where a Lease is written without a newer renewTime: the testbed's kubelets, the real controller
of each release, and nodewatch.

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

Then what a clock stepped back (and an annotation of a dead node's Lease) does to each release's
controller, and what nodewatch says of it (``causes.lease_not_renewed``,
``evaluation.controller_skips``). Each test's nodes are in a zone of their own, without pods,
deleted afterwards (``campaign.zone_of_its_own``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from campaign import GRACE, LATENCY, MONITOR, SAMPLE, ready_condition, watching, zone_of_its_own

from nodewatch.core.causes import CauseKind
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import lease_circuit_breaker
from nodewatch.core.timeutil import parse_time
from nodewatch.core.views import NodeView
from nodewatch.sim.kubelet import RENEW_INTERVAL
from nodewatch.sources.live import LiveSource
from nodewatch.testbed.api import STRATEGIC
from nodewatch.testbed.kubelets import SYNC_PERIOD, start_fleet
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


def _ready(admin, name: str) -> str:
    return ready_condition(admin.get(f"/api/v1/nodes/{name}"))["status"]


def _view(src: LiveSource, name: str) -> Callable[[], NodeView]:
    def view() -> NodeView:
        v = src.state.evaluate(time.time()).node(name)
        assert v is not None
        return v
    return view


def _renewed_on_the_watch(src: LiveSource, name: str, more: int) -> None:
    before = src.state.snapshot().leases[name].renewals
    wait_until(lambda: src.state.snapshot().leases[name].renewals > before + more - 1, timeout=30, interval=0.5)


def test_skewed_clocks_hold_from_registration_and_a_controllers_unknown_is_put_back(testbed):
    with zone_of_its_own(testbed, ("ap-east-1", "ap-east-1a"), 3, seed=52) as (admin, fleet):
        start_fleet(fleet, "clock-skew")
        registered = time.time()
        names = list(fleet.node_order)
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
        assert _ready(admin, plain) == "Unknown"
        wait_until(lambda: _ready(admin, plain) == "True", timeout=2 * SYNC_PERIOD + 5, interval=0.5)
        back = time.time() - marked
        assert ready_condition(admin.get(f"/api/v1/nodes/{plain}"))["reason"] == "KubeletReady"

        # the skewed nodes renew on their own clocks from the start: never silent for the controller,
        # so never Unknown (a flip would last until the next status sync, 10 s: sampled every 0.5 s)
        seen: dict[str, set[str]] = {n: set() for n in skewed}
        while time.time() < registered + GRACE + 3 * MONITOR:
            for n in skewed:
                seen[n].add(_ready(admin, n))
            time.sleep(0.5)
        assert seen == {n: {"True"} for n in skewed}, seen
    print(f"testbed {testbed.version}: a controller's Unknown put back by the kubelet's sync in {back:.1f}s; "
          f"clocks {[fleet.nodes[n].clock_offset for n in skewed]} s held Ready past grace {GRACE:g}s")


BACK = 90.0
"""How far the kubelet's clock steps back: its renewals count again after that long, well after
the controller's Unknown (grace + a monitor period) and the kubelet's status post that follows."""


def test_a_kubelet_clock_stepped_back_is_unheard_by_the_controller_and_by_nodewatch(testbed):
    """The real controller counts only a renewTime newer than the last it saw: a kubelet whose clock
    steps back renews every 10 s and goes Unknown. nodewatch says why before it happens, is Overdue
    or Unknown with the controller, and once the kubelet has posted Ready again (its heartbeat on its
    new clock, counted at receipt by the controller) is neither. From 1.37 the controller skips the
    node instead (``settings.lease_circuit_breaker``): never Unknown; nodewatch says Late, and why."""
    with zone_of_its_own(testbed, ("ap-east-1", "ap-east-1b"), 2, seed=53) as (admin, fleet):
        start_fleet(fleet, "steady")
        victim = fleet.node_order[0]
        with watching(testbed, "certcache-clock") as src:
            view = _view(src, victim)
            down: list[float] = []  # when nodewatch first said Overdue or worse, sampled as the test waits

            def sampled(cond: Callable[[], bool]) -> Callable[[], bool]:
                def check() -> bool:
                    if not down and view().state in (NodeState.OVERDUE, NodeState.UNKNOWN, NodeState.EVICTING):
                        down.append(time.time())
                    return cond()
                return check

            _renewed_on_the_watch(src, victim, 2)
            assert view().state is NodeState.READY
            fleet.nodes[victim].clock_offset = -BACK  # an NTP step
            wait_until(lambda: any(c.kind is CauseKind.CLOCK_STEPPED_BACK for c in view().causes),
                       timeout=2 * SYNC_PERIOD, interval=SAMPLE)
            assert _ready(admin, victim) == "True"  # said before the controller acts
            stepped = time.time()
            if lease_circuit_breaker(testbed.version):  # 1.37+: the controller skips the node, pass after pass
                ready: set[str] = set()
                wait_until(sampled(lambda: ready.add(_ready(admin, victim)) or time.time() > stepped + GRACE
                                   + 4 * MONITOR), timeout=GRACE + 4 * MONITOR + 10, interval=SAMPLE)
                assert ready == {"True"} and not down, (ready, down)
                v = view()
                assert v.state is NodeState.LATE and v.causes[1].kind is CauseKind.CONTROLLER_SKIPS, v
                log = (testbed.dir / "logs" / "kube-controller-manager.log").read_bytes().decode(errors="replace")
                assert any("Skipping - no pods will be evicted" in line and victim in line for line in log.splitlines())
                return
            wait_until(sampled(lambda: _ready(admin, victim) == "Unknown"), timeout=GRACE + 4 * MONITOR,
                       interval=SAMPLE)
            flipped = time.time()
            wait_until(sampled(lambda: bool(down)), timeout=LATENCY + 2 * SAMPLE, interval=SAMPLE)
            assert down[0] <= flipped + LATENCY + 2 * SAMPLE, (down[0] - flipped)
            wait_until(lambda: _ready(admin, victim) == "True", timeout=2 * SYNC_PERIOD + 5, interval=SAMPLE)
            wait_until(lambda: view().state in (NodeState.LATE, NodeState.READY), timeout=MONITOR + 10,
                       interval=SAMPLE)
            v = view()
            assert v.causes[0].kind is CauseKind.CLOCK_STEPPED_BACK, v.causes
            assert v.skew == pytest.approx(BACK, abs=5.0)  # the node's clock, learned anew from the write


def test_a_dead_kubelets_lease_written_by_another_is_judged_as_the_controller_does(testbed):
    """A kubelet stops; its Lease is annotated after (an operator, a tool). Up to 1.36 the controller
    marks the node Unknown at the grace as always; from 1.37 it skips the node at every pass (its
    Lease is not the one it last counted) and never marks it: nodewatch says Late, and why."""
    with zone_of_its_own(testbed, ("ap-east-1", "ap-east-1c"), 2, seed=54) as (admin, fleet):
        start_fleet(fleet, "steady")
        victim = fleet.node_order[0]
        with watching(testbed, "certcache-annotated") as src:
            _renewed_on_the_watch(src, victim, 1)
            fleet.renew_now(fleet.nodes[victim])
            fleet.stop_kubelet(fleet.nodes[victim])
            stopped = time.time()
            time.sleep(MONITOR + 1)  # a monitor pass counted the last renewal (``evaluation.controller_skips``)
            admin.patch(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{victim}",
                        {"metadata": {"annotations": {"example.com/note": "looked at it"}}})
            wait_until(lambda: src.state.snapshot().leases[victim].unrenewed is not None, timeout=10, interval=SAMPLE)
            seen: set[str] = set()
            wait_until(lambda: seen.add(_ready(admin, victim)) or time.time() > stopped + GRACE + 4 * MONITOR,
                       timeout=GRACE + 4 * MONITOR + 10, interval=SAMPLE)
            v = _view(src, victim)()
            if lease_circuit_breaker(testbed.version):
                assert seen == {"True"}, seen
                assert v.state is NodeState.LATE, v
                assert [c.kind for c in v.causes] == [CauseKind.LEASE_REWRITTEN, CauseKind.CONTROLLER_SKIPS], v
            else:
                assert "Unknown" in seen, seen
                assert v.state in (NodeState.UNKNOWN, NodeState.EVICTING), v
