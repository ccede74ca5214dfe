"""Scenarios: the incident shows every state, every scenario runs, the fleet is deterministic."""

from __future__ import annotations

import orjson
import pytest

from nodewatch.core.causes import CauseKind
from nodewatch.core.rules import NodeState, ZoneState
from nodewatch.core.timeutil import parse_time
from nodewatch.core.views import RESOURCES
from nodewatch.sim.fleet import SimFleet, scenario_names
from nodewatch.sources.demo import DemoSource


def test_incident_shows_every_state_within_its_first_minute() -> None:
    demo = DemoSource()
    start = demo.fleet.start
    first_seen: dict[NodeState, float] = {}
    for k in range(0, 121):
        demo.advance_to(start + k)
        view = demo.state.evaluate(start + k)
        for state, n in view.counts.items():
            if n and state not in first_seen:
                first_seen[state] = k
    assert set(first_seen) == set(NodeState), {s.word: k for s, k in first_seen.items()}
    assert max(first_seen.values()) <= 60, {s.word: k for s, k in first_seen.items()}  # the first minute
    view = demo.state.evaluate(start + 120)
    assert any(z.state is ZoneState.PARTIAL for z in view.zones)
    assert view.statefulset_at_risk >= 1


def test_incident_starts_with_history_already_consistent() -> None:
    demo = DemoSource()
    start = demo.fleet.start
    demo.advance_to(start)
    view = demo.state.evaluate(start)
    assert view.counts[NodeState.EVICTED] >= 1 and view.counts[NodeState.EVICTING] >= 1
    evicted = next(v for v in view.nodes if v.state is NodeState.EVICTED)
    pods = demo.state.pods_on(evicted.name, start)
    stuck = [p for p in pods if p.owner_kind == "StatefulSet"]
    assert stuck and all(p.terminating and p.statefulset_risk for p in stuck)
    assert all(p.disruption_target for p in pods if p.terminating)
    csrs = demo.fleet.objects("certificatesigningrequests")
    assert len(csrs) >= 2 and all(c["status"].get("certificate") for c in csrs)


def test_expired_cert_node_shows_the_cert_cause() -> None:
    demo = DemoSource()
    start = demo.fleet.start
    demo.advance_to(start + 5)
    view = demo.state.evaluate(start + 5)
    expired = [v for v in view.nodes if v.cert_level(start + 5) == "expired"]
    assert len(expired) == 1
    assert expired[0].state in (NodeState.UNKNOWN, NodeState.EVICTING, NodeState.EVICTED)
    assert expired[0].causes[0].kind is CauseKind.CERT_EXPIRED
    assert any(v.cert_level(start + 5) == "critical" for v in view.nodes)


def test_same_seed_same_stream_other_seed_other_stream() -> None:
    def stream(seed: int) -> bytes:
        fleet = SimFleet(nodes=15, scenario="incident", seed=seed)
        out = [(r, fleet.objects(r)) for r in RESOURCES]
        fleet.subscribe(lambda r, e, o, t: out.append((t, r, e, o)))
        fleet.step_to(fleet.now + 120)
        return orjson.dumps(out)

    assert stream(5) == stream(5)
    assert stream(5) != stream(6)


@pytest.mark.parametrize("name", scenario_names())
def test_every_scenario_runs(name: str) -> None:
    fleet = SimFleet(nodes=20, scenario=name, seed=2)
    seen: list[tuple[float, str]] = []
    fleet.subscribe(lambda r, e, o, t: seen.append((t, r)))
    fleet.step_to(fleet.now + 300)
    assert seen and all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))  # time order
    for resource in RESOURCES:
        for obj in fleet.objects(resource):
            assert "resourceVersion" not in obj["metadata"]
            assert obj["metadata"]["name"] and obj["metadata"].get("uid")
            assert parse_time(obj["metadata"]["creationTimestamp"]) is not None


def test_composed_scenarios_and_unknown_names() -> None:
    fleet = SimFleet(nodes=20, scenario="kubelet-stop+pressure", seed=3)
    fleet.step_to(fleet.now + 120)
    states = [n.ready() for n in fleet.nodes.values()]
    assert states.count("Unknown") == 1
    assert sum(bool(n.pressure) for n in fleet.nodes.values()) == 3
    with pytest.raises(ValueError, match="unknown scenario"):
        SimFleet(nodes=5, scenario="kubelet-stop+nope")


def test_zone_full_and_control_plane_cutoff() -> None:
    full = SimFleet(nodes=30, scenario="zone-full", seed=4)
    full.step_to(full.now + 120)
    assert sorted(z.state for z in full.lifecycle.zones.values() if z.state is not ZoneState.NORMAL) == [ZoneState.FULL]
    cut = SimFleet(nodes=12, scenario="control-plane-cutoff", seed=4)
    cut.step_to(cut.now + 120)
    assert cut.lifecycle.all_full
    assert all(not any(t.effect == "NoExecute" for t in n.taints) for n in cut.nodes.values())
    cut.step_to(cut.start + 300)
    assert not cut.lifecycle.all_full
    assert all(n.ready() == "True" for n in cut.nodes.values())


def test_churn_deletes_and_registers_nodes() -> None:
    fleet = SimFleet(nodes=10, scenario="churn", seed=5)
    names = set(fleet.node_order)
    kinds: list[tuple[str, str]] = []
    fleet.subscribe(lambda r, e, o, t: kinds.append((r, e)))
    fleet.step_to(fleet.now + 200)
    new = set(fleet.node_order) - names
    assert new and names - set(fleet.node_order)
    assert ("nodes", "DELETED") in kinds and ("nodes", "ADDED") in kinds and ("leases", "DELETED") in kinds
    for name in new:
        node = fleet.nodes[name]
        assert node.ready() == "True"
        assert sum(fleet.pods[k].wl.kind == "DaemonSet" for k in node.pods) == 3
    boot = [c for c in fleet.objects("certificatesigningrequests")
            if c["spec"]["username"].startswith("system:bootstrap:")]
    assert boot


def test_clock_skew_moves_renew_time_only() -> None:
    fleet = SimFleet(nodes=8, scenario="clock-skew", seed=6)
    skewed = sorted(n.clock_offset for n in fleet.nodes.values() if n.clock_offset)
    assert skewed == [-95.0, 40.0]
    for lease in fleet.objects("leases"):
        node = fleet.nodes[lease["metadata"]["name"]]
        assert parse_time(lease["spec"]["renewTime"]) - node.clock_offset <= fleet.now
    fleet.step_to(fleet.now + 120)
    assert all(n.ready() == "True" for n in fleet.nodes.values())  # the controller ignores skew


def test_large_fleet_defaults_keep_pods_moderate() -> None:
    fleet = SimFleet(nodes=6000, scenario="steady", seed=1)
    assert fleet.pods_per_node == 2
    assert len(fleet.pods) == pytest.approx(12000, rel=0.01)
    fleet.step_to(fleet.now + 20)


def test_a_controller_restart_counts_the_grace_from_it_in_the_simulator_and_in_nodewatch() -> None:
    """kube-controller-manager restarts 20 s after a kubelet stopped (``controller-restart``): the
    simulated controller flips the node a grace after the restart, as the real ones did
    (tests/testbed/test_controller_restart.py), and nodewatch, from the RegisteredNode events, says
    Late until then, not Overdue a grace after the last renewal."""
    demo = DemoSource(scenario="controller-restart", nodes=12)
    start = demo.fleet.start
    grace = demo.state.settings.grace
    demo.advance_to(start + 11)
    stopped = next(n for n in demo.fleet.nodes.values() if not n.kubelet_up)
    demo.advance_to(start + 10 + grace + 6)  # a grace and a pass after the kubelet stopped
    assert stopped.ready() == "True"
    v = demo.state.evaluate(start + 10 + grace + 6).node(stopped.name)
    assert v.state is NodeState.LATE and "restarted" in v.causes[0].text
    registered = demo.state.store.registered[stopped.name]
    assert registered == pytest.approx(start + 30, abs=0.5)  # the event, received a moment after
    flipped = None
    for k in range(int(grace) + 20):
        demo.advance_to(registered + k)
        if stopped.ready() == "Unknown":
            flipped = registered + k
            break
    assert flipped is not None and registered + grace <= flipped <= registered + grace + 7  # a pass later at most
    assert demo.state.evaluate(flipped).node(stopped.name).state is not NodeState.READY
