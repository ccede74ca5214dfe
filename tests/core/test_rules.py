"""Table-driven tests of the lifecycle rules, boundaries included."""

from __future__ import annotations

import math

import pytest

from nodewatch.core import rules
from nodewatch.core.rules import NodeState, Taint, Toleration, ZoneState
from nodewatch.core.settings import Settings, default_grace_for_version

GRACE = 40.0


@pytest.mark.parametrize(
    "ready, age, taint, deadline_offset, expected",
    [
        ("True", 5.0, False, None, NodeState.READY),
        ("True", 20.0, False, None, NodeState.READY),           # exactly 2 x renew interval: not yet Late
        ("True", 20.001, False, None, NodeState.LATE),
        ("True", 40.0, False, None, NodeState.LATE),            # exactly at grace: not yet Overdue
        ("True", 40.001, False, None, NodeState.OVERDUE),
        (None, 41.0, False, None, NodeState.OVERDUE),           # no Ready condition at all
        ("False", 1.0, False, None, NodeState.NOT_READY),       # runtime down, lease fresh
        ("Unknown", 100.0, False, None, NodeState.UNKNOWN),
        ("Unknown", 100.0, True, 10.0, NodeState.EVICTING),
        ("Unknown", 100.0, True, 0.0, NodeState.EVICTED),       # exactly at the deadline
        ("False", 1.0, True, -1.0, NodeState.EVICTED),
        ("True", None, False, None, NodeState.READY),           # blind: cannot claim Late/Overdue
        ("True", 999.0, True, None, NodeState.EVICTING),        # taint without timeAdded: no deadline
    ],
)
def test_node_state(ready, age, taint, deadline_offset, expected):
    now = 1000.0
    deadline = None if deadline_offset is None else now + deadline_offset
    got = rules.node_state(ready=ready, lease_age=age, grace=GRACE, lease_duration=40.0,
                           eviction_taint=taint, eviction_deadline=deadline, now=now)
    assert got is expected


def test_states_are_ranked_worst_first():
    ranks = [s.rank for s in NodeState]
    assert ranks == sorted(ranks) and NodeState.EVICTED.rank < NodeState.READY.rank


def test_renew_interval_follows_lease_duration():
    assert rules.renew_interval(40) == 10
    assert rules.renew_interval(60) == 15


@pytest.mark.parametrize("version, grace", [
    ("v1.31.9", 40.0), ("v1.32.0", 50.0), ("v1.33.2-eks-abc", 50.0), ("v2.0.0", 50.0),
    (None, 40.0), ("garbage", 40.0), ("v1.9.0", 40.0),
])
def test_default_grace_follows_server_version(version, grace):
    assert default_grace_for_version(version) == grace
    assert Settings(server_version=version).grace == grace


def test_user_grace_wins_over_server_version():
    s = Settings().override(grace_seconds=45.0).with_server_version("v1.33.0")
    assert s.grace == 45.0 and s.origin("grace_seconds") == "flag"
    assert Settings().with_server_version("v1.33.0").origin("grace_seconds") == "server v1.33.0"
    assert Settings().origin("toleration_seconds") == "default"


def test_unknown_due_window():
    assert rules.unknown_due(100.0, 40.0, 5.0) == (140.0, 145.0)
    assert not rules.probe_expired(100.0, 40.0, 140.0)
    assert rules.probe_expired(100.0, 40.0, 140.001)


UNREACH = Taint(rules.TAINT_UNREACHABLE, "NoExecute", time_added=1000.0)
NOTREADY = Taint(rules.TAINT_NOT_READY, "NoExecute", time_added=1010.0)


@pytest.mark.parametrize(
    "tolerations, expected",
    [
        ((), 1000.0),                                                          # none matching: at once
        ((Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 300.0),), 1300.0),
        ((Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 30.0),), 1030.0),
        ((Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", None),), None),  # DaemonSet: never
        ((Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 0.0),), 1000.0),
        ((Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", -5.0),), 1000.0),
        ((Toleration("", "Exists", "", "", None),), None),                    # tolerate everything
        ((Toleration(rules.TAINT_NOT_READY, "Exists", "", "NoExecute", 300.0),), 1000.0),  # wrong key
        ((Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoSchedule", 300.0),), 1000.0),  # wrong effect
        ((Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 600.0),
          Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 60.0)), 1600.0),  # the first
        # matching toleration counts (GetMatchingTolerations stops at it), not the smallest
        ((Toleration(rules.TAINT_UNREACHABLE, "Equal", "x", "NoExecute", 60.0),), 1000.0),  # value mismatch
    ],
)
def test_pod_eviction_at(tolerations, expected):
    assert rules.pod_eviction_at([UNREACH], list(tolerations)) == expected


def test_pod_eviction_needs_every_noexecute_taint_tolerated():
    """processPodOnNode at each taint's arrival: the untolerated not-ready taint (added at 1010)
    deletes the pod when it comes; a tolerated one does not move the deletion scheduled at 1000."""
    tol = [Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 300.0)]
    assert rules.pod_eviction_at([UNREACH, NOTREADY], tol) == 1010.0
    both = tol + [Toleration(rules.TAINT_NOT_READY, "Exists", "", "NoExecute", 100.0)]
    assert rules.pod_eviction_at([UNREACH, NOTREADY], both) == 1300.0


def test_no_noexecute_taint_no_eviction():
    assert rules.pod_eviction_at([Taint(rules.TAINT_UNREACHABLE, "NoSchedule", time_added=1.0)], []) is None


def test_default_tolerations_are_added_only_when_missing():
    got = rules.with_default_tolerations([], 300.0)
    assert {t.key for t in got} == set(rules.EVICTION_TAINTS) and all(t.seconds == 300.0 for t in got)
    own = [Toleration(rules.TAINT_UNREACHABLE, "Exists", "", "NoExecute", 30.0)]
    got = rules.with_default_tolerations(own, 300.0)
    assert [t.seconds for t in got if t.key == rules.TAINT_UNREACHABLE] == [30.0]


def test_node_eviction_deadline_uses_earliest_eviction_taint():
    taints = [NOTREADY, UNREACH, Taint("other", "NoExecute", time_added=0.0)]
    assert rules.node_eviction_deadline(taints, lambda key: 300.0) == 1300.0
    assert rules.node_eviction_deadline([Taint("other", "NoExecute", time_added=0.0)], lambda key: 300.0) is None


@pytest.mark.parametrize(
    "ready, not_ready, expected",
    [
        (10, 0, ZoneState.NORMAL),
        (0, 1, ZoneState.FULL),
        (0, 0, ZoneState.NORMAL),
        (1, 2, ZoneState.NORMAL),        # not more than 2 not ready
        (2, 3, ZoneState.PARTIAL),       # 3/5 = 0.6 >= 0.55
        (3, 3, ZoneState.NORMAL),        # 0.5 < 0.55
        (9, 11, ZoneState.PARTIAL),      # exactly 0.55
        (10, 11, ZoneState.NORMAL),      # 0.5238
    ],
)
def test_zone_state(ready, not_ready, expected):
    assert rules.zone_state(ready, not_ready, 0.55) is expected


@pytest.mark.parametrize(
    "state, size, all_full, rate",
    [
        (ZoneState.NORMAL, 10, False, 0.1),
        (ZoneState.PARTIAL, 50, False, 0.0),     # small zone: tainting stops
        (ZoneState.PARTIAL, 51, False, 0.01),    # large zone: secondary rate
        (ZoneState.FULL, 10, False, 0.1),
        (ZoneState.FULL, 10, True, 0.0),         # every zone down: evictions stop
        (ZoneState.NORMAL, 10, True, 0.0),
    ],
)
def test_zone_taint_rate(state, size, all_full, rate):
    assert rules.zone_taint_rate(state, size, all_full=all_full, eviction_rate=0.1,
                                 secondary_eviction_rate=0.01, large_cluster_threshold=50) == rate


def test_all_zones_full():
    assert rules.all_zones_full([ZoneState.FULL, ZoneState.FULL])
    assert not rules.all_zones_full([ZoneState.FULL, ZoneState.NORMAL])
    assert not rules.all_zones_full([])


@pytest.mark.parametrize("labels, key", [
    ({}, ""),
    ({"topology.kubernetes.io/zone": "a", "topology.kubernetes.io/region": "r"}, "r/a"),
    ({"topology.kubernetes.io/zone": "a"}, "a"),
    ({"failure-domain.beta.kubernetes.io/zone": "old", "topology.kubernetes.io/zone": "new",
      "topology.kubernetes.io/region": "r"}, "r/old"),
])
def test_zone_key(labels, key):
    assert rules.zone_key(labels) == key


@pytest.mark.parametrize("left_days, level", [
    (None, "unknown"), (-1, "expired"), (0, "expired"), (3, "critical"), (6.99, "critical"),
    (7, "warn"), (29, "warn"), (30, "ok"), (365, "ok"),
])
def test_cert_level(left_days, level):
    now = 1e9
    na = None if left_days is None else now + left_days * 86400
    assert rules.cert_level(na, now) == level


def test_min_toleration_seconds_inf_when_none_set():
    assert math.isinf(rules.min_toleration_seconds([Toleration("k", "Exists", "", "NoExecute", None)]))


def test_the_settings_line_says_where_each_value_came_from():
    s = Settings(server_version="v1.33.1").override(toleration_seconds=60.0)
    assert s.summary() == "grace 50s (server v1.33.1) · toleration 60s (flag) · monitor 5s (default)"
    assert s.summary(zone_threshold=True) == s.summary() + " · zone threshold 0.55"
