"""What the newest release's controllers do differently from v1.20.2's, measured in the campaign.

Each test states both versions' behaviour and checks the one of the release it runs on, from the
real objects: the taint manager's events and who sends them (``taint-controller`` in 1.20, the
separate ``taint-eviction-controller`` since 1.29), the ``DisruptionTarget`` condition it patches
on a pod before deleting it (since 1.26), and whether a node waiting in a rate-limited zone is
re-tainted with a fresh ``timeAdded`` (1.20.2's ``SetRemove`` bug, fixed by kubernetes PR #96876).
"""

from __future__ import annotations

import pytest
from campaign import OWN_TOLERATION, TOLERATION, Observed, nodes_in_role, noexecute, parse_time

from nodewatch.core.rules import TAINT_UNREACHABLE

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(900)]

TAINT_EVICTION_CONTROLLER_FROM = 29
DISRUPTION_TARGET_FROM = 26
NO_RETAINT_FROM = 21


def _minor(obs: Observed) -> int:
    return int(obs.testbed_version.split(".")[1])


def _evicted(obs: Observed) -> list[dict]:
    return [p for k, p in obs.real_pods_before_master.items()
            if k[0] == "agreement" and p["metadata"].get("deletionTimestamp")]


def test_who_sends_the_eviction_events(obs: Observed):
    marking = [e for e in obs.events if e.get("reason") == "TaintManagerEviction"
               and e.get("message", "").startswith("Marking for deletion Pod")]
    assert marking, "the taint manager said nothing of its evictions"
    sources = {(e.get("source") or {}).get("component") or e.get("reportingComponent") for e in marking}
    expected = "taint-eviction-controller" if _minor(obs) >= TAINT_EVICTION_CONTROLLER_FROM else "taint-controller"
    assert sources == {expected}, sources
    print(f"{obs.testbed_version}: {len(marking)} TaintManagerEviction events from {sources}")


def test_a_pod_deleted_by_the_taint_manager_says_why(obs: Observed):
    evicted = _evicted(obs)
    assert evicted
    for p in evicted:
        conds = {c["type"]: c for c in p.get("status", {}).get("conditions") or []}
        if _minor(obs) >= DISRUPTION_TARGET_FROM:
            assert conds.get("DisruptionTarget", {}).get("reason") == "DeletionByTaintManager", p["metadata"]["name"]
            assert conds["DisruptionTarget"]["status"] == "True"
        else:
            assert "DisruptionTarget" not in conds


def test_a_node_waiting_in_a_rate_limited_zone_keeps_its_first_taint_time_only_from_v1_21(obs: Observed):
    """The whole zone cut off: its nodes are tainted one per 10 s. v1.20.2 queues a waiting node again
    at every pass, and each extra entry re-taints it with a fresh timeAdded; current releases do not."""
    moved = {}
    for n in nodes_in_role(obs, "zone-full"):
        first = min((parse_time(p["metadata"]["deletionTimestamp"]) - p["metadata"]["deletionGracePeriodSeconds"]
                     - (OWN_TOLERATION if k[1].startswith("own-") else TOLERATION))
                    for k, p in obs.real_pods_before_master.items()
                    if k[0] == "agreement" and obs.pod_node.get(k) == n and p["metadata"].get("deletionTimestamp"))
        (taint,) = [t for t in noexecute(obs.real_nodes_before_master[n]) if t["key"] == TAINT_UNREACHABLE]
        moved[n] = parse_time(taint["timeAdded"]) - first
    print(f"{obs.testbed_version}: NoExecute timeAdded minus the first taint (from the evictions): {moved}")
    if _minor(obs) >= NO_RETAINT_FROM:
        # never a later, fresh timeAdded; a negative difference is the eviction's own lag behind
        # the taint (its deletion came a second or two after timeAdded + toleration: -2.0 s seen)
        assert all(d <= 1.0 for d in moved.values()), moved
    else:
        assert any(d > 5.0 for d in moved.values()), moved
