"""Master disruption mode (every zone in FullDisruption) and the NoExecute taints it leaves, by
release: every release keeps the taints added after its entering monitor pass began (v1.20.2 kept
one of 16, a node an earlier pass had queued); from 1.34 that pass queues the nodes it flips, so
v1.37.2 kept more (``rules.master_disruption_kept``; measured in the testbed,
docs/real-control-plane.md)."""

from __future__ import annotations

import pytest

from nodewatch.core import rules
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from support.factories import T0, lease, node, pod, taint
from tests.core.test_fleet_state import fleet

TOL = 30.0
TOLERATIONS = [{"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": TOL}
               for k in rules.EVICTION_TAINTS]


def _every_zone_down(version: str | None):
    """Zone a down since an earlier pass: a0 tainted then, a1 queued then and tainted 1 s ago (its
    token came while the entering pass was writing: any release); zone b's two nodes flipped by the
    pass that put every zone down, 2 s ago: one tainted 1 s ago (from 1.34: that pass queued it, a
    token of its zone's bucket), one not."""
    s = Settings().override(grace_seconds=40.0, toleration_seconds=TOL).with_server_version(version)
    objs = [("nodes", node("a0", "Unknown", zone="a", transition=T0 - 60,
                           taints=[taint(rules.TAINT_UNREACHABLE, "NoExecute", T0 - 55)])),
            ("nodes", node("a1", "Unknown", zone="a", transition=T0 - 60,
                           taints=[taint(rules.TAINT_UNREACHABLE, "NoExecute", T0 - 1)])),
            ("nodes", node("b0", "Unknown", zone="b", transition=T0 - 2,
                           taints=[taint(rules.TAINT_UNREACHABLE, "NoExecute", T0 - 1)])),
            ("nodes", node("b1", "Unknown", zone="b", transition=T0 - 2))]
    # c0: the kubelet's Ready=False long ago (not-ready taint then), Unknown by the entering pass,
    # which swapped the taint for unreachable (nodewatch keeps its first timeAdded: keep_eviction_start)
    objs += [("nodes", node("c0", "Unknown", zone="c", transition=T0 - 2,
                            taints=[taint(rules.TAINT_UNREACHABLE, "NoExecute", T0 - 50)]))]
    objs += [("leases", lease(n, T0 - 100)) for n in ("a0", "a1", "b0", "b1", "c0")]
    objs += [("pods", pod(f"p-{n}", n, tolerations=TOLERATIONS)) for n in ("a0", "a1", "b0", "b1", "c0")]
    state = fleet(*objs, settings=s, received=T0)
    return state, state.evaluate(T0)


@pytest.mark.parametrize("version", ["v1.34.0", "v1.37.2"])
def test_from_1_34_the_taints_of_the_entering_pass_stay_and_their_pods_are_evicted(version):
    state, view = _every_zone_down(version)
    assert view.all_zones_full
    assert view.node("a0").state is NodeState.UNKNOWN and view.node("a0").eviction_at is None  # taken off
    assert view.node("b0").state is NodeState.EVICTING and view.node("b0").eviction_at == T0 - 1 + TOL
    assert state.pods_on("b0", T0)[0].eviction_at == T0 - 1 + TOL
    assert state.pods_on("a0", T0)[0].eviction_at is None
    assert view.node("b1").state is NodeState.UNKNOWN
    assert view.node("c0").state is NodeState.EVICTED  # flipped by that pass: its taint stays
    assert view.node("a1").state is NodeState.EVICTING


@pytest.mark.parametrize("version", ["v1.20.2", "v1.33.13", None])
def test_up_to_1_33_master_disruption_takes_off_every_eviction_taint_older_than_its_pass(version):
    state, view = _every_zone_down(version)
    assert view.all_zones_full
    # b0's shape (tainted in the pass that flipped it) is 1.34+ only; a1's comes on every release
    assert {view.node(n).state for n in ("a0", "b1", "c0")} == {NodeState.UNKNOWN}
    assert all(state.pods_on(n, T0)[0].eviction_at is None for n in ("a0", "b1", "c0"))
    assert view.node("c0").eviction_at is None  # the swap of its not-ready taint waits a pass: gone
    assert view.node("a1").state is NodeState.EVICTING and view.node("a1").eviction_at == T0 - 1 + TOL
    assert state.pods_on("a1", T0)[0].eviction_at == T0 - 1 + TOL


def test_the_entering_pass_is_told_by_the_last_flips():
    """The passes run a monitor period apart: the flips within one period of the last are that
    pass's; it has swapped the tainting limiters to 0 a period after its last flip and its marking
    (``MARKING_SECONDS``)."""
    m = rules.MARKING_SECONDS
    assert rules.master_disruption_kept([100.0, 140.0, 141.0, 143.5], 5.0) == (140.0, 148.5 + m)
    assert rules.master_disruption_kept([100.0], 5.0) == (100.0, 105.0 + m)
    assert rules.master_disruption_kept([], 5.0) is None
    kept = rules.Taint(rules.TAINT_UNREACHABLE, "NoExecute", time_added=140.0)
    gone = rules.Taint(rules.TAINT_NOT_READY, "NoExecute", time_added=139.0)
    later = rules.Taint(rules.TAINT_NOT_READY, "NoExecute", time_added=148.5 + m + 1)
    other = rules.Taint("dedicated", "NoExecute", time_added=1.0)
    span = (140.0, 148.5 + m)
    assert rules.effective_taints((kept, gone, other), "Unknown", True, span) == (kept, other)
    assert rules.effective_taints((kept, gone, other), "Unknown", True) == (other,)
    assert rules.effective_taints((kept, gone, other), "True", True, span) == (other,)  # Ready again
    assert rules.effective_taints((gone,), "Unknown", True, span, flipped_at=141.0) == (gone,)  # flipped then
    # not added in the mode: the upstream tests' fixtures (a taint long after every flip) lose it
    assert rules.effective_taints((later, other), "Unknown", True, span) == (other,)
