"""The node lifecycle controller's own unit tests, ported: their facts (nodes, Leases, times,
settings, expected status, taints and evictions) judged by nodewatch's ``FleetState`` and rules.

Source: kubernetes/kubernetes ``pkg/controller/nodelifecycle/node_lifecycle_controller_test.go`` and
the code it tests, ``node_lifecycle_controller.go``: ``tryUpdateNodeHealth``, ``monitorNodeHealth``,
``processTaintBaseEviction``, ``handleDisruption``, ``doNoExecuteTaintingPass``,
``markNodeForTainting``. Each case is named ``TestFunction/description`` as upstream names it.
Upstream settings: grace 40 s (``testNodeMonitorGracePeriod``), startup grace 60 s
(``testNodeStartupGracePeriod``), monitor period 5 s; node creation 2012-01-01, ``fakeNow``
2015-01-01 12:00, ``timeToPass`` one hour.

nodewatch does not write: where the controller "posts Unknown" nodewatch says the node is Overdue
(the controller flips it at its next pass); where it "takes no action" nodewatch says Ready (no
flip predicted); where it "evicts", a countdown to the deletion; where it stops, none.

What cannot be expressed through nodewatch:
- Request counts (``expectedRequestCount``: List+Update) and the Node objects the controller writes:
  nodewatch is read-only; the simulator's controller is held to them in tests/sim/test_sim_controllers.py
  and against the real controller in tests/testbed.
- ``expectedPodStatusUpdate`` (``MarkPodsNotReady``): the simulator's (``Workloads.mark_pods_not_ready``).
- TestMonitorNodeHealthEvictPodsWithDisruption/"Zone is partially disrupted - eviction should take
  place.": the zone state is ported; the eviction is not, because the test overrides
  ``enterPartialDisruptionFunc`` to the normal rate, while the real rate for a zone of 5 nodes (at
  most ``--large-cluster-size-threshold``) is 0 (``rules.zone_taint_rate``).
- .../"NetworkDisruption: eviction should stop, only -master Node is healthy": that table's
  controller left a node named ``*-master`` out of the zone count; current releases leave out
  nodes labelled ``node.kubernetes.io/exclude-disruption``, which is what is ported.
- TestApplyNoExecuteTaintsToUnreachableNode (PR #120816, 1.34): ported as the version input
  ``settings.taint_queued_in_the_flip_pass`` and the outlook's queue time for the node the pass flips.
- TestApplyNoExecuteTaintsToNodesEnqueueTwice (PR #96876): the queue's duplicate entries are a
  fact about the controller's heap, not about objects; ported as the version input that says
  which releases have them (``settings.taint_queue_keeps_duplicates``) and tests/core/test_outlook.py.
"""

from __future__ import annotations

import calendar

import pytest

from nodewatch.core import rules
from nodewatch.core import settings as nw_settings
from nodewatch.core.causes import CauseKind
from nodewatch.core.rules import NodeState, ZoneState
from nodewatch.core.settings import Settings, default_grace_for_version
from support.factories import lease, node, pod, taint
from tests.core.test_fleet_state import fleet

CREATED = float(calendar.timegm((2012, 1, 1, 0, 0, 0)))
F = float(calendar.timegm((2015, 1, 1, 12, 0, 0)))
HOUR = 3600.0
UPSTREAM = Settings().override(grace_seconds=40.0, startup_grace_seconds=60.0, monitor_period_seconds=5.0)


def judged(*objs, now: float, settings: Settings = UPSTREAM):
    return fleet(*objs, settings=settings, received=now).evaluate(now)


# --- tryUpdateNodeHealth: the probe time and the startup grace ---------------------------------------

WITH_LEASE = "TestMonitorNodeHealthUpdateNodeAndPodStatusWithLease/"


@pytest.mark.parametrize("case, created, ready, heartbeat, renewed, now, expected", [
    (WITH_LEASE + "Node created recently, without status. Node lease is missing.",
     F, None, None, None, F, NodeState.UNKNOWN),
    (WITH_LEASE + "Node created recently, without status. Node lease is renewed recently.",
     F, None, None, F, F, NodeState.UNKNOWN),
    (WITH_LEASE + "Node created long time ago, without status. Node lease is missing.",
     CREATED, None, None, None, F, NodeState.UNKNOWN),
    (WITH_LEASE + "Node created long time ago, without status. Node lease is renewed recently.",
     CREATED, None, None, F + HOUR, F + HOUR, NodeState.UNKNOWN),
    (WITH_LEASE + "Node created long time ago, without status. Node lease is expired.",
     CREATED, None, None, F, F + HOUR, NodeState.UNKNOWN),
    (WITH_LEASE + "Node created long time ago, with status updated by kubelet exceeds grace period. "
     "Node lease is renewed.", CREATED, "True", F, F + HOUR, F + HOUR, NodeState.READY),
    (WITH_LEASE + "Node created long time ago, with status updated by kubelet recently. Node lease is expired.",
     CREATED, "True", F + HOUR, F, F + HOUR, NodeState.LATE),  # Late: nodewatch's word for the Lease alone
    (WITH_LEASE + "Node created long time ago, with status updated by kubelet exceeds grace period. "
     "Node lease is also expired.", CREATED, "True", F, F, F + HOUR, NodeState.OVERDUE),
    ("TestMonitorNodeHealthUpdateStatus/Node created long time ago, with status updated by kubelet exceeds "
     "grace period. (no Lease)", CREATED, "True", F, None, F + HOUR, NodeState.OVERDUE),
    ("TestMonitorNodeHealthUpdateStatus/Node created long time ago, with status updated recently. (no Lease)",
     CREATED, "True", F + HOUR - 10, None, F + HOUR, NodeState.READY),
])
def test_the_probe_is_the_newer_of_lease_and_heartbeat_and_a_new_node_gets_the_startup_grace(
        case, created, ready, heartbeat, renewed, now, expected):
    objs = [("nodes", node("node0", ready, transition=F, heartbeat=heartbeat, created=created, zone="z1")),
            ("nodes", node("other", zone="z2")), ("leases", lease("other", now))]
    if renewed is not None:
        objs.append(("leases", lease("node0", renewed)))
    v = judged(*objs, now=now).node("node0")
    assert v.state is expected, case
    if ready is None:  # never posted: kubectl's Unknown, judged by the startup grace
        # Without a Ready condition nodewatch says Unknown whatever the probe (the real v1.20.2
        # controller is the judge: tests/testbed/test_default_grace.py); whether the controller
        # writes NodeStatusNeverUpdated at this pass (upstream: the cases "lease missing/expired",
        # long ago) or leaves the node alone ("renewed recently") is the startup grace's, said in
        # the cause.
        assert v.ready == "Unknown" and v.grace == 60.0
        assert CauseKind.NEVER_POSTED in [c.kind for c in v.causes]
    if expected in (NodeState.READY, NodeState.LATE):
        assert v.next_change > now  # no flip predicted now


def test_a_node_with_an_hour_old_lease_and_fresh_status_predicts_no_flip():
    """Issue 22, class 1: the heartbeat carries the node: not Overdue (the controller keeps it
    Ready), Late by its Lease alone (nodewatch's own word: the kubelet's renewals are not coming),
    and the next step is the heartbeat's grace, not a flip an hour overdue."""
    objs = [("nodes", node("node0", "True", transition=F, heartbeat=F + HOUR, created=CREATED)),
            ("leases", lease("node0", F)), ("nodes", node("other", zone="z2")), ("leases", lease("other", F + HOUR))]
    v = judged(*objs, now=F + HOUR + 1).node("node0")
    assert v.state is NodeState.LATE
    assert v.next_change == pytest.approx(F + HOUR + 40.0, abs=1e-6)
    assert [c.kind for c in v.causes][:1] == [CauseKind.LEASE_LATE]


@pytest.mark.parametrize("version, grace", [("v1.31.9", 40.0), ("v1.32.0", 50.0), ("v1.20.2", 40.0), (None, 40.0)])
def test_the_default_grace_follows_the_version(version, grace):
    """--node-monitor-grace-period: 40 s up to 1.31, 50 s from 1.32 (kubernetes PR #126287)."""
    assert default_grace_for_version(version) == grace
    objs = [("nodes", node("node0", "True", transition=F, heartbeat=F, created=CREATED)), ("leases", lease("node0", F))]
    v = judged(*objs, now=F + 45, settings=Settings().with_server_version(version)).node("node0")
    assert v.state is (NodeState.OVERDUE if grace < 45 else NodeState.LATE)


# --- processTaintBaseEviction, handleDisruption: taints that come off --------------------------------


def test_a_node_ready_again_loses_its_noexecute_taint_at_that_pass():
    """TestApplyNoExecuteTaints (node2 Ready again: its not-ready:NoExecute taint removed;
    processTaintBaseEviction → markNodeAsReachable): no countdown for the node or its pods."""
    objs = [("nodes", node("node2", "True", transition=F - 5, heartbeat=F,
                           taints=[taint(rules.TAINT_NOT_READY, "NoExecute", F - 250)])),
            ("leases", lease("node2", F)), ("pods", pod("pod0", "node2")),
            ("nodes", node("other", zone="z2")), ("leases", lease("other", F))]
    s = fleet(*objs, settings=UPSTREAM, received=F)
    v = s.evaluate(F).node("node2")
    assert v.state is NodeState.READY and v.eviction_at is None
    assert s.pods_on("node2", F)[0].eviction_at is None


DISRUPTION = "TestMonitorNodeHealthEvictPodsWithDisruption/"


def zone_node(name: str, zone: str, ready: str, *, tainted: bool = False, region: str = "region1", labels=None):
    taints = [taint(rules.TAINT_UNREACHABLE, "NoExecute", F - 100)] if tainted else []
    return ("nodes", node(name, ready, zone=zone, region=region, transition=F - 3600, heartbeat=F - 3600,
                          created=CREATED, taints=taints, labels=labels))


@pytest.mark.parametrize("case, nodes, zones, evicts", [
    (DISRUPTION + "Network Disruption: Only zone is down - eviction shouldn't take place.",
     [("node0", "zone1", "Unknown", "region1"), ("node1", "zone1", "Unknown", "region1")],
     {"region1/zone1": ZoneState.FULL}, False),
    (DISRUPTION + "Network Disruption: Both zones down - eviction shouldn't take place.",
     [("node0", "zone1", "Unknown", "region1"), ("node1", "zone2", "Unknown", "region2")],
     {"region1/zone1": ZoneState.FULL, "region2/zone2": ZoneState.FULL}, False),
    (DISRUPTION + "Network Disruption: One zone is down - eviction should take place.",
     [("node0", "zone1", "Unknown", "region1"), ("node1", "zone2", "True", "region1")],
     {"region1/zone1": ZoneState.FULL, "region1/zone2": ZoneState.NORMAL}, True),
    (DISRUPTION + "Initially both zones down, one comes back - eviction should take place",
     [("node0", "zone1", "Unknown", "region1"), ("node1", "zone2", "True", "region1")],
     {"region1/zone1": ZoneState.FULL, "region1/zone2": ZoneState.NORMAL}, True),
    (DISRUPTION + "Zone is partially disrupted - eviction should take place. (zone state only)",
     [("node0", "zone1", "Unknown", "region1"), ("node1", "zone1", "Unknown", "region1"),
      ("node2", "zone1", "Unknown", "region1"), ("node3", "zone1", "True", "region1"),
      ("node4", "zone1", "True", "region1")],
     {"region1/zone1": ZoneState.PARTIAL}, None),
])
def test_zone_states_and_whether_node0s_pods_are_evicted(case, nodes, zones, evicts):
    """node0 carries the unreachable NoExecute taint (as after the first pass) and pod0. With every
    zone in FullDisruption the controller enters master disruption mode and marks every node
    reachable: the taint comes off and pod0's countdown stops; with one zone up it stays."""
    objs = [zone_node(n, z, r, region=reg, tainted=(n == "node0")) for n, z, r, reg in nodes]
    objs += [("leases", lease(n, F if r == "True" else F - 3600)) for n, _, r, _ in nodes]
    objs.append(("pods", pod("pod0", "node0")))
    s = fleet(*objs, settings=UPSTREAM, received=F)
    view = s.evaluate(F)
    assert {z.name: z.state for z in view.zones} == zones, case
    if evicts is None:
        return
    v = view.node("node0")
    countdown = s.pods_on("node0", F)[0].eviction_at
    if evicts:
        assert v.state is NodeState.EVICTING and countdown == F - 100 + 300
    else:
        assert view.all_zones_full and v.state is NodeState.UNKNOWN and v.eviction_at is None and countdown is None


def test_a_node_excluded_from_disruption_does_not_keep_its_zone_up():
    """.../NetworkDisruption: eviction should stop, only -master Node is healthy, with today's
    exclusion: the healthy node is labelled node.kubernetes.io/exclude-disruption, so the zone is
    FullDisruption, every zone is, and the eviction stops."""
    objs = [zone_node("node0", "zone1", "Unknown", tainted=True),
            zone_node("node-master", "zone1", "True", labels={rules.LABEL_EXCLUDE_DISRUPTION: ""}),
            ("leases", lease("node0", F - 3600)), ("leases", lease("node-master", F)), ("pods", pod("pod0", "node0"))]
    s = fleet(*objs, settings=UPSTREAM, received=F)
    view = s.evaluate(F)
    assert view.all_zones_full and s.pods_on("node0", F)[0].eviction_at is None


def test_leaving_master_disruption_puts_the_countdowns_back():
    """handleDisruption on exit ("some Nodes are Ready. Exiting master disruption mode"): the
    taints are the controller's to add again; a node still carrying one counts down again."""
    objs = [zone_node("node0", "zone1", "Unknown", tainted=True), ("leases", lease("node0", F - 3600)),
            zone_node("node1", "zone2", "Unknown"), ("leases", lease("node1", F - 3600)), ("pods", pod("pod0", "node0"))]
    s = fleet(*objs, settings=UPSTREAM, received=F)
    assert s.evaluate(F).node("node0").eviction_at is None
    s.apply("nodes", "MODIFIED", zone_node("node1", "zone2", "True")[1], F + 1)
    s.apply("leases", "MODIFIED", lease("node1", F + 1), F + 1)
    assert s.evaluate(F + 1).node("node0").eviction_at == F + 200
    assert s.pods_on("node0", F + 1)[0].eviction_at == F + 200


def test_swap_unreachable_not_ready_taints_keeps_the_countdown():
    """TestSwapUnreachableNotReadyTaints: Unknown → False swaps unreachable:NoExecute for
    not-ready:NoExecute in one write; the taint manager's schedule stays (keep_eviction_start)."""
    objs = [("nodes", node("node0", "Unknown", taints=[taint(rules.TAINT_UNREACHABLE, "NoExecute", F - 100)])),
            ("leases", lease("node0", F - 150)), ("pods", pod("pod0", "node0")),
            ("nodes", node("other", zone="z2")), ("leases", lease("other", F))]
    s = fleet(*objs, settings=UPSTREAM, received=F)
    s.apply("nodes", "MODIFIED", node("node0", "False", taints=[taint(rules.TAINT_NOT_READY, "NoExecute", F + 5)]), F + 5)
    assert s.pods_on("node0", F + 5)[0].eviction_at == F + 200


# --- the rules' version inputs and the queue ------------------------------------------------------


@pytest.mark.parametrize("version, duplicates", [
    ("v1.20.2", True), ("v1.20.4", True), ("v1.19.16", True), ("v1.20", True),
    ("v1.20.5", False), ("v1.21.0", False), ("v1.33.1", False), ("v1.18.20", False), (None, False), ("junk", False),
])
def test_apply_no_execute_taints_to_nodes_enqueue_twice_by_version(version, duplicates):
    """TestApplyNoExecuteTaintsToNodesEnqueueTwice came with PR #96876 (1.21, cherry-picked to
    1.20.5): before it the zone queue kept one more entry per pass for a waiting node."""
    assert nw_settings.taint_queue_keeps_duplicates(version) is duplicates


def test_a_kubelets_ready_false_is_queued_by_the_pass_that_sees_it():
    """Up to 1.33 processTaintBaseEviction is handed the observed condition: the kubelet's
    Ready=False is queued by the first pass that sees it; the Unknown the pass writes, by the next
    one. From 1.34 (PR #120816) the current one: that pass queues the Unknown too."""
    assert rules.taint_queue_delay("False", 5.0) == 0.0
    assert rules.taint_queue_delay("Unknown", 5.0) == 5.0
    assert rules.taint_queue_delay(None, 5.0) == 5.0
    assert rules.taint_queue_delay("Unknown", 5.0, in_the_flip_pass=True) == 0.0
    assert rules.taint_queue_delay("False", 5.0, in_the_flip_pass=True) == 0.0


@pytest.mark.parametrize("version, queued_after", [
    ("v1.34.0", 0.0), ("v1.37.2", 0.0), ("v1.33.13", 5.0), ("v1.20.2", 5.0), ("v1.33", 5.0), (None, 5.0),
])
def test_apply_no_execute_taints_to_unreachable_node_by_version(version, queued_after):
    """TestApplyNoExecuteTaintsToUnreachableNode came with PR #120816 (1.34): node0's Ready
    condition older than the grace at time2, node1 heartbeating; one ``monitorNodeHealth`` pass
    (which writes node0 Unknown) and one ``doNoExecuteTaintingPass`` later node0 has the unreachable
    NoExecute taint, node1 none. Judged through nodewatch: node0 as that pass left it, flipped at
    time2, and the queue's earliest for its taint; up to 1.33 it waited for the next pass."""
    from nodewatch.core.outlook import window_in

    time2 = F + 40.0 + 1.0
    s = UPSTREAM.with_server_version(version)
    assert nw_settings.taint_queued_in_the_flip_pass(version) is (queued_after == 0.0)
    objs = [("nodes", node("node0", "Unknown", zone="zone1", region="region1", transition=time2, heartbeat=F,
                           created=CREATED)),
            ("nodes", node("node1", "True", zone="zone1", region="region1", transition=F, heartbeat=time2,
                           created=CREATED))]
    view = judged(*objs, now=time2, settings=s)
    w = window_in(view, view.node("node0"))
    assert w is not None and w.earliest == time2 + queued_after and (w.first, w.queued) == (1, 1)
    assert view.node("node1").state is NodeState.READY and window_in(view, view.node("node1")) is None


def test_the_startup_grace_is_for_a_node_without_ready_condition_only():
    """tryUpdateNodeHealth: no Ready condition → nodeStartupGracePeriod; any Ready condition, even
    the kubelet's False, → nodeMonitorGracePeriod."""
    assert rules.node_grace(False, 40.0, 60.0) == 60.0
    assert rules.node_grace(True, 40.0, 60.0) == 40.0
