"""The default toleration learned from the pods (``core/pod_tolerations.py``): a node row's eviction
countdown counts with what the API server's admission plugin wrote into the pods, not with 300 s
when the API server was started with other defaults (seen on the v1.37.2 testbed with
``--default-unreachable-toleration-seconds=60``: pods Terminating, the node row "evict in 3m56s")."""

from __future__ import annotations

import pytest

from nodewatch.core import pod_tolerations
from nodewatch.core.objects import pod_from_dict
from nodewatch.core.rules import TAINT_NOT_READY, TAINT_UNREACHABLE, NodeState, Toleration
from nodewatch.core.settings import Settings
from support.factories import T0, lease, node, pod, taint

from .test_fleet_state import UP_ELSEWHERE, fleet, state_of

ADDED = T0 - 100


def defaults(seconds: float) -> list[dict]:
    """The two tolerations the DefaultTolerationSeconds plugin writes, with ``seconds``."""
    return [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
            for key in (TAINT_NOT_READY, TAINT_UNREACHABLE)]


FOREVER = [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"},
           {"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute"}]
"""A DaemonSet pod's: tolerated forever, not counted."""


def unreachable_node(name: str = "a") -> dict:
    return node(name, "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoSchedule", ADDED),
                                         taint(TAINT_UNREACHABLE, "NoExecute", ADDED)])


def test_seconds_of_takes_the_first_toleration_that_tolerates_each_taint():
    own = (Toleration(TAINT_UNREACHABLE, "Exists", "", "NoExecute", 30.0),
           Toleration(TAINT_UNREACHABLE, "Exists", "", "NoExecute", 300.0),
           Toleration(TAINT_NOT_READY, "Exists", "", "NoExecute", 300.0))
    assert pod_tolerations.seconds_of(own) == ((TAINT_NOT_READY, 300.0), (TAINT_UNREACHABLE, 30.0))
    # "Exists" with no key tolerates everything forever: nothing counted for either taint
    anything = (Toleration("", "Exists", "", "", None),) + own
    assert pod_tolerations.seconds_of(anything) == ()
    # a negative tolerationSeconds evicts at once (``min_toleration_seconds``): 0
    assert pod_tolerations.seconds_of((Toleration(TAINT_UNREACHABLE, "Exists", "", "NoExecute", -5.0),)) == (
        (TAINT_UNREACHABLE, 0.0),)


def test_learned_needs_more_than_half_of_the_pods_counted_and_outlives_them():
    tally = pod_tolerations.Tally()
    seconds = pod_tolerations.seconds_of
    sixty = seconds(pod_from_dict(pod("p1", "a", tolerations=defaults(60))).tolerations)
    three_hundred = seconds(pod_from_dict(pod("p2", "a")).tolerations)
    forever = seconds(pod_from_dict(pod("ds", "a", owner_kind="DaemonSet", tolerations=FOREVER)).tolerations)
    assert forever == ()
    both = ((TAINT_NOT_READY, 60.0), (TAINT_UNREACHABLE, 60.0))
    assert tally.change((), sixty) and tally.learned == both
    assert not tally.change((), forever)
    assert tally.change((), three_hundred) and tally.learned == ()  # one against one: no default shows
    assert tally.change((), three_hundred) and tally.learned == ((TAINT_NOT_READY, 300.0), (TAINT_UNREACHABLE, 300.0))
    assert tally.change(three_hundred, ()) and tally.change(three_hundred, ()) and tally.learned == both
    # the last pod gone (force-deleted off an out-of-service node): what it showed stays
    assert not tally.change(sixty, ()) and tally.counts == {} and tally.learned == both
    restored = pod_tolerations.Tally(both)
    assert restored.learned == both and restored.counts == {}


def test_the_node_row_counts_with_the_pods_toleration():
    pods = [("pods", pod(f"p{i}", "a", tolerations=defaults(60))) for i in range(3)]
    ds = ("pods", pod("ds", "a", owner_kind="DaemonSet", tolerations=FOREVER))
    s = fleet(("nodes", unreachable_node()), ("leases", lease("a", T0 - 150)), *UP_ELSEWHERE, *pods, ds)
    v = s.evaluate(T0).node("a")
    assert v.eviction_in(T0) is None or v.state is NodeState.EVICTED  # ADDED + 60 is long past
    assert state_of(s, "a", ADDED + 60 - 0.001) is NodeState.EVICTING
    assert state_of(s, "a", ADDED + 60) is NodeState.EVICTED
    view = s.evaluate(ADDED + 30)
    assert view.node("a").eviction_in(ADDED + 30) == pytest.approx(30.0, abs=1e-6)
    assert "toleration 60s (pods)" in view.settings.summary()
    # the user's --toleration wins over what the pods show
    flagged = fleet(("nodes", unreachable_node()), *UP_ELSEWHERE, *pods,
                    settings=Settings().override(toleration_seconds=120.0))
    assert state_of(flagged, "a", ADDED + 119) is NodeState.EVICTING
    assert "toleration 120s (flag)" in flagged.evaluate(ADDED + 1).settings.summary()


def test_the_learned_toleration_follows_the_pods_and_judges_the_nodes_again():
    s = fleet(("nodes", unreachable_node()), *UP_ELSEWHERE)
    assert s.evaluate(ADDED + 100).node("a").eviction_in(ADDED + 100) == pytest.approx(200.0, abs=1e-6)
    s.apply("pods", "ADDED", pod("p", "a", tolerations=defaults(60)), ADDED + 100)
    assert state_of(s, "a", ADDED + 100) is NodeState.EVICTED  # the cached view was judged again
    s.apply("pods", "ADDED", pod("q", "a"), ADDED + 101)
    s.apply("pods", "ADDED", pod("r", "a"), ADDED + 101)
    v = s.evaluate(ADDED + 101)  # two pods of 300 s against one of 60 s
    assert v.node("a").state is NodeState.EVICTING and "toleration 300s (pods)" in v.settings.summary()
    for name in ("p", "q", "r"):
        s.apply("pods", "DELETED", pod(name, "a"), ADDED + 101)
    # new settings (a recording's, a server version) keep what the pods showed
    s.apply("pods", "ADDED", pod("p", "a", tolerations=defaults(60)), ADDED + 102)
    s.set_settings(Settings().with_server_version("v1.37.2"))
    assert s.evaluate(ADDED + 102).settings.toleration == 60.0


def test_different_defaults_for_the_two_taints_are_both_said():
    tols = [{"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 45}]
    s = fleet(("nodes", unreachable_node()), *UP_ELSEWHERE, ("pods", pod("p", "a", tolerations=tols)))
    assert "toleration 45s, not-ready 300s (pods)" in s.evaluate(ADDED).settings.summary()
    assert state_of(s, "a", ADDED + 45) is NodeState.EVICTED


def test_a_default_the_pods_did_not_teach_is_not_said_to_come_from_them():
    only_not_ready = [{"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
    s = fleet(("nodes", unreachable_node()), *UP_ELSEWHERE, ("pods", pod("p", "a", tolerations=only_not_ready)))
    settings = s.evaluate(ADDED).settings
    assert "toleration 300s (default), not-ready 60s (pods)" in settings.summary()
    assert settings.origin("toleration_seconds") == "default"  # the unreachable one's, as ``toleration``
    given = settings.override(toleration_seconds=90)
    assert "toleration 90s (flag)" in given.summary() and "pods" not in given.summary()


def test_a_restored_keyframe_learns_from_its_own_pods():
    s = fleet(("nodes", unreachable_node()), *UP_ELSEWHERE)
    before = s.snapshot()
    s.apply("pods", "ADDED", pod("p", "a", tolerations=defaults(60)), ADDED + 1)
    after = s.snapshot()
    s.apply("pods", "DELETED", pod("p", "a", tolerations=defaults(60)), ADDED + 2)
    gone = s.snapshot()
    assert s.evaluate(ADDED + 2).settings.toleration == 60.0  # (the pod gone, what it showed stays)
    s.restore(before)
    assert s.store.tolerations.counts == {} and s.evaluate(ADDED + 1).settings.toleration == 300.0
    s.restore(after)
    assert s.evaluate(ADDED + 61).node("a").state is NodeState.EVICTED
    s.restore(before)
    s.restore(gone)
    assert not s.store.pods and s.evaluate(ADDED + 61).node("a").state is NodeState.EVICTED
