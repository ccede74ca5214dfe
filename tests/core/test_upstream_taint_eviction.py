"""The taint-eviction controller's own unit tests, ported: their facts (taints, tolerations,
expected deletions) judged by nodewatch's rules and by ``FleetState.pods_on`` (the drill-down's pod
rows).

Source: kubernetes/kubernetes ``pkg/controller/tainteviction/taint_eviction_test.go`` (before 1.29:
``pkg/controller/nodelifecycle/scheduler/taint_manager_test.go``, the same cases), and the code they
test, ``taint_eviction.go``: ``processPodOnNode``, ``getMinTolerationTime``, ``handlePodUpdate``,
``handleNodeUpdate``, with ``GetMatchingTolerations`` (``pkg/apis/core/v1/helper``). Each case is
named ``TestFunction/description`` as upstream names it. The upstream helpers: ``createNoExecuteTaint(i)``
is key ``testTaint<i>``, value ``test<i>``, NoExecute, ``timeAdded`` now; ``addToleration(pod, i, d)``
tolerates it for ``d`` seconds (``d < 0``: no ``tolerationSeconds``, forever). "expectDelete" upstream
means deleted within the test's wait (5 s): here an eviction time at the taint's (or the update's)
time; "not deleted" with a finite toleration means deletion scheduled that many seconds on.

What cannot be expressed through nodewatch (a read-only dashboard that sees objects, not the
controller's queue):
- ``TestDeletePod``, ``TestDeleteNode``: "nothing panics" and the controller's own map; no fact to judge.
- ``TestPodDeletionEvent``: the events' wording ("Marking for deletion Pod ns/name") is the
  simulator's (``sim/pod_controllers.py``), not a rule.
- ``TestEventualConsistency`` in part: the controller counts a pod that arrives on an already
  tainted node from when it sees the pod; nodewatch has no time for a pod's binding and counts
  from the taint's ``timeAdded``. The cases' facts (a pod without tolerations goes at once) are
  ported; a tolerating latecomer's countdown would read earlier than the controller's by the gap.
- "not scheduled - ignore" is ported as "on no node's list": pods are shown per node.
"""

from __future__ import annotations

import math

import pytest

from nodewatch.core import rules
from nodewatch.core.rules import Taint, Toleration
from nodewatch.sim import objects
from support.factories import T0, lease, node, pod
from tests.core.test_fleet_state import fleet

T = T0 - 100
"""When the upstream taints are added (``metav1.Now()`` in ``createNoExecuteTaint``)."""


def taint(i: int, at: float = T) -> dict:
    return objects.taint(f"testTaint{i}", "NoExecute", at, value=f"test{i}")


def tol(i: int, seconds: int) -> dict:
    """``addToleration``'s toleration (Equal, value ``test<i>``; seconds < 0: forever)."""
    t = {"key": f"testTaint{i}", "value": f"test{i}", "effect": "NoExecute"}
    if seconds >= 0:
        t["tolerationSeconds"] = seconds
    return t


UP = (("nodes", node("up", zone="z2")), ("leases", lease("up", T0)))
"""A Ready node elsewhere: the node under test is Ready too, so no master disruption either way."""


def eviction(taints: list[dict], tolerations: list[dict], pod_node: str = "node1") -> float | None:
    s = fleet(("nodes", node("node1", taints=taints)), ("leases", lease("node1", T0)),
              ("pods", pod("pod1", pod_node, tolerations=tolerations)), *UP)
    rows = s.pods_on("node1", T0)
    if pod_node != "node1":
        assert rows == []
        return None
    (row,) = rows
    return row.eviction_at


NEVER = None


@pytest.mark.parametrize("case, taints, tolerations, expected", [
    ("TestCreatePod/scheduled on untainted Node", [], [], NEVER),
    ("TestCreatePod/schedule on tainted Node", [taint(1)], [], T),
    ("TestCreatePod/schedule on tainted Node with finite toleration", [taint(1)], [tol(1, 100)], T + 100),
    ("TestCreatePod/schedule on tainted Node with infinite toleration", [taint(1)], [tol(1, -1)], NEVER),
    ("TestCreatePod/schedule on tainted Node with infinite invalid toleration", [taint(1)], [tol(2, -1)], T),
    ("TestCreateNode/Creating Node matching already assigned Pod", [], [], NEVER),
    ("TestCreateNode/Creating tainted Node matching already assigned Pod", [taint(1)], [], T),
    ("TestCreateNode/Creating tainted Node matching already assigned tolerating Pod", [taint(1)], [tol(1, -1)], NEVER),
    ("TestUpdateNode/Added taint, expect node patched and deleted", [taint(1)], [], T),
    ("TestUpdateNode/Added tolerated taint", [taint(1)], [tol(1, 100)], T + 100),
    ("TestUpdateNode/Only one added taint tolerated", [taint(1), taint(2)], [tol(1, 100)], T),
    ("TestUpdateNode/Taint removed", [], [tol(1, 1)], NEVER),
    ("TestUpdateNode/Pod with multiple tolerations are evicted when first one runs out",
     [taint(1), taint(2)], [tol(1, 1), tol(2, 100)], T + 1),
    ("TestUpdateNodeWithMultiplePods/Pods with different toleration times are evicted appropriately (pod1)",
     [taint(1)], [], T),
    ("TestUpdateNodeWithMultiplePods/Pods with different toleration times are evicted appropriately (pod2)",
     [taint(1)], [tol(1, 1)], T + 1),
    ("TestUpdateNodeWithMultiplePods/Pods with different toleration times are evicted appropriately (pod3)",
     [taint(1)], [tol(1, -1)], NEVER),
    ("TestUpdateNodeWithMultiplePods/Evict all pods not matching all taints instantly (pod1)",
     [taint(1), taint(2)], [], T),
    ("TestUpdateNodeWithMultiplePods/Evict all pods not matching all taints instantly (pod2)",
     [taint(1), taint(2)], [tol(1, 1)], T),
    ("TestUpdateNodeWithMultiplePods/Evict all pods not matching all taints instantly (pod3)",
     [taint(1), taint(2)], [tol(1, -1)], T),
    ("TestEventualConsistency/existing pod2 scheduled onto tainted Node (pod1)", [taint(1)], [], T),
])
def test_the_pods_eviction_as_the_controller_deletes_it(case, taints, tolerations, expected):
    assert eviction(taints, tolerations) == expected, case


def test_create_pod_not_scheduled_is_on_no_nodes_list():
    """TestCreatePod/not scheduled - ignore."""
    assert eviction([taint(1)], [], pod_node="") is None


def test_update_pod_scheduling_onto_tainted_node_goes_when_seen():
    """TestUpdatePod/scheduling onto tainted Node; .../with toleration (forever: stays);
    TestEventualConsistency/new pod2 created on tainted Node: a pod without tolerations goes at once."""
    s = fleet(("nodes", node("node1", taints=[taint(1)])), ("leases", lease("node1", T0)), *UP)
    s.apply("pods", "ADDED", pod("pod1", "node1", tolerations=[]), T0)
    s.apply("pods", "ADDED", pod("pod2", "node1", tolerations=[tol(1, -1)]), T0)
    at = {r.name: r.eviction_at for r in s.pods_on("node1", T0)}
    assert at["pod1"] is not None and at["pod1"] <= T0 and at["pod2"] is None


def test_update_pod_removing_toleration_deletes_at_once():
    """TestUpdatePod/removing toleration: scheduled at T+100, the toleration removed at T+10: deleted then."""
    s = fleet(("nodes", node("node1", taints=[taint(1)])), ("leases", lease("node1", T0)),
              ("pods", pod("pod1", "node1", tolerations=[tol(1, 100)])), *UP)
    assert s.pods_on("node1", T + 5)[0].eviction_at == T + 100
    s.apply("pods", "MODIFIED", pod("pod1", "node1", tolerations=[]), T + 10)
    assert s.pods_on("node1", T + 10)[0].eviction_at == T + 10


def test_update_pod_lengthening_toleration_shouldnt_work():
    """TestUpdatePod/lengthening toleration shouldn't work: tolerated 1 s (scheduled at T+1), then
    100 s: still deleted at T+1 (processPodOnNode keeps the work: its CreatedAt is earlier)."""
    s = fleet(("nodes", node("node1", taints=[taint(1)])), ("leases", lease("node1", T0)),
              ("pods", pod("pod1", "node1", tolerations=[tol(1, 1)])), *UP, received=T)
    assert s.pods_on("node1", T)[0].eviction_at == T + 1
    s.apply("pods", "MODIFIED", pod("pod1", "node1", tolerations=[tol(1, 100)]), T + 0.5)
    assert s.pods_on("node1", T + 0.5)[0].eviction_at == T + 1
    s.restore(s.snapshot())  # a replay seeking back to a keyframe keeps it too
    assert s.pods_on("node1", T + 0.5)[0].eviction_at == T + 1
    # ... the rule itself, at the controller's own call
    taints = [Taint("testTaint1", "NoExecute", "test1", T)]
    longer = [Toleration("testTaint1", "Equal", "test1", "NoExecute", 100.0)]
    assert rules.process_pod_on_node(T + 1, taints, longer, T + 0.5) == T + 1
    assert rules.process_pod_on_node(None, taints, longer, T + 0.5) == T + 100.5


def test_update_node_with_multiple_taints():
    """TestUpdateNodeWithMultipleTaints: taint1 tolerated forever, taint2 for 60 s. No taint, or
    taint1 alone: nothing queued; taint2 added: queued, counted from taint2 (a day-old taint1
    does not start the countdown); taint2 gone again: nothing queued, nothing deleted."""
    tolerations = [{"key": "testTaint1", "operator": "Exists", "effect": "NoExecute"},
                   {"key": "testTaint2", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
    day_old = T - 86400
    assert eviction([], tolerations) is None
    assert eviction([taint(1, day_old)], tolerations) is None
    assert eviction([taint(1, day_old), taint(2)], tolerations) == T + 60
    assert eviction([taint(1, day_old)], tolerations) is None


def test_a_gpu_node_with_a_day_old_tolerated_taint_counts_from_unreachable():
    """Issue 22's case: ``dedicated=gpu:NoExecute`` a day old, tolerated forever, then
    ``unreachable:NoExecute`` with the default 300 s: the pod row says 300 s from the unreachable
    taint, as the node row does (it said due a day ago)."""
    gpu = objects.taint("dedicated", "NoExecute", T - 86400, value="gpu")
    unreach = objects.taint(rules.TAINT_UNREACHABLE, "NoExecute", T)
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"},
                   {"key": rules.TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 300}]
    s = fleet(("nodes", node("gpu-0", "Unknown", taints=[gpu, unreach])), ("leases", lease("gpu-0", T - 50)),
              ("pods", pod("train-0", "gpu-0", tolerations=tolerations)), *UP)
    assert s.pods_on("gpu-0", T0)[0].eviction_at == T + 300
    assert s.evaluate(T0).node("gpu-0").eviction_at == T + 300


def test_a_stored_pod_without_tolerations_is_deleted_at_once():
    """The 300 s default is the DefaultTolerationSeconds admission plugin's, written into a pod at
    creation; the controller adds nothing (TestCreatePod/schedule on tainted Node): a stored pod
    without it (a 1.8-era ReplicaSet pod) was evicted when the taint came."""
    unreach = objects.taint(rules.TAINT_UNREACHABLE, "NoExecute", T0 - 100)
    s = fleet(("nodes", node("old", "Unknown", taints=[unreach])), ("leases", lease("old", T0 - 150)),
              ("pods", pod("rs-1", "old", tolerations=[])), *UP)
    assert s.pods_on("old", T0)[0].eviction_at == T0 - 100


@pytest.mark.parametrize("seconds, expected", [
    ([], 0.0),
    ([None], math.inf),
    ([1.0, 2.0], 1.0),
    ([1.0, None], 1.0),
    ([None, 1.0], 1.0),
])
def test_get_min_toleration_time(seconds, expected):
    """TestGetMinTolerationTime (upstream -1, "infinite", is ``inf`` here)."""
    assert rules.min_toleration_seconds([Toleration(seconds=x) for x in seconds]) == expected


def test_filter_no_execute_taints():
    """TestFilterNoExecuteTaints."""
    got = rules.noexecute_taints([Taint("one", "NoExecute", "one"), Taint("two", "NoSchedule", "two")])
    assert [t.key for t in got] == ["one"]


def test_the_first_matching_toleration_counts_not_the_smallest():
    """GetMatchingTolerations takes each taint's first matching toleration: a pod listing a
    forever ``Exists`` before its 30 s ``unreachable`` toleration tolerates it forever."""
    taints = [Taint(rules.TAINT_UNREACHABLE, "NoExecute", "", T)]
    forever_first = [Toleration(operator="Exists"),
                     Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 30.0)]
    assert rules.pod_eviction_at(taints, forever_first) is None
    assert rules.pod_eviction_at(taints, forever_first[::-1]) == T + 30
