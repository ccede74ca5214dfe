"""The simulated node lifecycle controller against what the real v1.20.2 controllers did.

Each test replays one observation of the real kube-controller-manager (docs/kubernetes-rules.md,
"What the real controllers did") in virtual time: the Unknown flip on the first monitor pass after
the grace, the NoExecute taint one pass later, no tainting while every node is not ready, and the
reasons written into conditions the kubelet never posted.
"""

from __future__ import annotations

import pytest

from nodewatch.core import rules
from nodewatch.sim.fleet import SimFleet
from support.sim_tape import Tape


def _stop_after_renewal(fleet: SimFleet, tape: Tape, node_name: str) -> float:
    """Stop the node's kubelet just after its next lease renewal; returns that renewal's time."""
    before = len(tape.renewals(node_name))
    while len(tape.renewals(node_name)) == before:
        fleet.step_to(fleet.now + 0.5)
    fleet.stop_kubelet(fleet.nodes[node_name])
    return tape.renewals(node_name)[-1]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_unknown_on_the_first_monitor_pass_after_the_grace(seed: int) -> None:
    fleet = SimFleet(nodes=8, scenario="steady", seed=seed, version="v1.20.2")
    tape = Tape(fleet)
    name = fleet.node_order[seed % 8]
    last = _stop_after_renewal(fleet, tape, name)
    grace, period = fleet.settings.grace, fleet.settings.monitor_period_seconds
    assert grace == 40.0
    lc = fleet.lifecycle
    flip = lc.first_pass_from(lc.first_pass_from(last) + grace)
    assert last + grace < flip <= last + grace + period + 0.01
    # the boundary: still Ready an instant before that pass, Unknown at it
    fleet.step_to(flip - 1e-6)
    assert fleet.nodes[name].ready() == "True"
    fleet.step_to(flip)
    assert fleet.nodes[name].ready() == "Unknown"
    assert tape.ready_became(name, "Unknown") == flip


def test_noexecute_taint_one_pass_after_the_unknown_flip_then_the_pod_goes() -> None:
    # "two nodes in one zone, the other renewing": node 0 and node 6 share eu-west-1a
    fleet = SimFleet(nodes=7, scenario="steady", seed=5, version="v1.20.2", pods_per_node=4)
    tape = Tape(fleet)
    victim = fleet.node_order[0]
    assert fleet.nodes[victim].zone_key == fleet.nodes[fleet.node_order[6]].zone_key
    _stop_after_renewal(fleet, tape, victim)
    fleet.step_to(fleet.now + 120)
    period = fleet.settings.monitor_period_seconds
    unknown = tape.ready_became(victim, "Unknown")
    no_schedule = tape.taint_added(victim, rules.TAINT_UNREACHABLE, "NoSchedule")
    no_execute = tape.taint_added(victim, rules.TAINT_UNREACHABLE, "NoExecute")
    assert unknown is not None and no_schedule is not None and no_execute is not None
    assert 0 <= no_schedule - unknown < 0.1  # the same pass
    # from the zone's queue on the next pass (swept every 100ms), not in the flip's pass
    assert period <= no_execute - unknown <= period + 0.1 + 0.01
    assert fleet.lifecycle.zones[fleet.nodes[victim].zone_key].state is rules.ZoneState.NORMAL


def test_one_node_alone_is_never_tainted_noexecute_master_disruption() -> None:
    fleet = SimFleet(nodes=1, scenario="steady", seed=6, version="v1.20.2")
    tape = Tape(fleet)
    name = fleet.node_order[0]
    _stop_after_renewal(fleet, tape, name)
    fleet.step_to(fleet.now + 400)  # past every toleration of its pods
    assert fleet.nodes[name].ready() == "Unknown"
    assert tape.taint_added(name, rules.TAINT_UNREACHABLE, "NoSchedule") is not None
    assert tape.taint_added(name, rules.TAINT_UNREACHABLE, "NoExecute") is None
    assert fleet.lifecycle.all_full
    assert not [o for _, e, o in tape.of("events") if o["reason"] == "TaintManagerEviction"]
    assert not [o for _, e, o in tape.of("pods") if o["metadata"].get("deletionTimestamp")]


def test_leaving_master_disruption_resumes_tainting_and_evictions() -> None:
    fleet = SimFleet(nodes=3, scenario="steady", seed=7, version="v1.20.2", pods_per_node=4)
    tape = Tape(fleet)
    names = list(fleet.node_order)  # three nodes, three zones
    on_down_node = {k[1] for k in fleet.nodes[names[2]].pods}
    for n in names:
        fleet.stop_kubelet(fleet.nodes[n])
    fleet.step_to(fleet.now + 120)
    assert fleet.lifecycle.all_full
    assert all(tape.taint_added(n, rules.TAINT_UNREACHABLE, "NoExecute") is None for n in names)
    back = fleet.now
    for n in names[:2]:
        fleet.start_kubelet(fleet.nodes[n])
    fleet.step_to(fleet.now + 30)
    assert not fleet.lifecycle.all_full
    # the node still down is tainted again, through its zone's queue (drained on the swap: 10s)
    fleet.step_to(fleet.now + 60)
    added = tape.taint_added(names[2], rules.TAINT_UNREACHABLE, "NoExecute")
    assert added is not None and back < added <= back + 30 + 60
    fleet.step_to(fleet.now + 400)
    evicted = {o["involvedObject"]["name"] for t, _, o in tape.of("events")
               if o["reason"] == "TaintManagerEviction" and t > back}
    assert evicted and evicted <= on_down_node  # evictions resumed, only where the taint is


def test_conditions_never_posted_become_never_updated() -> None:
    fleet = SimFleet(nodes=6, scenario="steady", seed=8, version="v1.20.2")
    tape = Tape(fleet)
    node = fleet.nodes[fleet.node_order[1]]
    # a minimal kubelet (like the fake ones tried on the real control plane): Ready only
    for ctype in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        del node.conditions[ctype]
    _stop_after_renewal(fleet, tape, node.name)
    fleet.step_to(fleet.now + 60)
    flip = tape.ready_became(node.name, "Unknown")
    assert flip is not None
    obj = tape.of("nodes", node.name)[-1][2]
    conds = {c["type"]: c for c in obj["status"]["conditions"]}
    assert (conds["Ready"]["reason"], conds["Ready"]["message"]) == (rules.UNKNOWN_REASON, rules.UNKNOWN_MESSAGE)
    for ctype in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        c = conds[ctype]
        assert c["status"] == "Unknown"
        assert (c["reason"], c["message"]) == ("NodeStatusNeverUpdated", "Kubelet never posted node status.")
        assert c["lastHeartbeatTime"] == obj["metadata"]["creationTimestamp"]
        assert c["lastTransitionTime"] == conds["Ready"]["lastTransitionTime"]
    assert conds["NetworkUnavailable"]["status"] == "False"  # left alone


def test_startup_grace_only_while_there_is_no_ready_condition() -> None:
    fleet = SimFleet(nodes=6, scenario="steady", seed=9, version="v1.20.2")
    tape = Tape(fleet)
    node = fleet.nodes[fleet.node_order[2]]
    node.conditions.clear()  # registered, never posted any status
    fleet.lifecycle.ready_changed(node, "True", None)
    last = _stop_after_renewal(fleet, tape, node.name)
    fleet.step_to(fleet.now + 120)
    flip = tape.ready_became(node.name, "Unknown")
    startup = fleet.settings.startup_grace_seconds
    assert last + startup < flip <= last + startup + fleet.settings.monitor_period_seconds + 0.01
    obj = tape.of("nodes", node.name)[-1][2]
    assert {c["reason"] for c in obj["status"]["conditions"] if c["type"] != "NetworkUnavailable"} == {
        "NodeStatusNeverUpdated"}
