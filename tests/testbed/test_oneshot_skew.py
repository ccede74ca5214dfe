"""A one-shot ``nodewatch status`` on a node whose clock is 95 s behind, against the real controller.

On a list, a lease's age comes from renewTime, on the node's clock: 95 s behind, the node looked
overdue while the real node lifecycle controller (which times a renewal by seeing renewTime change)
kept it Ready. The API server's ``managedFields[].time`` is on its own clock, but the real v1.20.2
server moves it only when a manager's set of fields changes (the Lease's creation), not on a
renewal that changes a value (that came with v1.25): measured here. So the one-shot answer waits,
at most one renewal interval, to see such a lease renew on the watch. The campaign runs
``nodewatch status`` once, mid-campaign, as a user would.
"""

from __future__ import annotations

import pytest
from campaign import ONESHOT_AT, Observed, nodes_in_role, ready_condition

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(900)]


WRITE_TIME_FOLLOWS_RENEWALS_FROM = 25
"""kubernetes PR #110058 (v1.25): managedFields times move on every write that changes a value."""


def test_the_kubelets_write_time_follows_renewals_only_from_v1_25(obs: Observed):
    (t0, before), (t1, after) = obs.kubelet_write_times
    assert t1 - t0 > 60  # several renewals in between (every 10 s)
    healthy = [n for n in obs.zone_of if n not in obs.roles]
    assert healthy
    minor = int(obs.testbed_version.split(".")[1])
    for n in healthy:
        assert len(before[n]) == 1, before[n]  # the field manager "kubelet" (its User-Agent), one Update entry
        if minor < WRITE_TIME_FOLLOWS_RENEWALS_FROM:
            assert after[n] == before[n], n  # renewTime changed six times; the time did not move
        else:
            assert after[n] != before[n], n  # the server's time of a later renewal


def test_status_on_a_node_clock_behind_says_ready_as_the_controller_does(obs: Observed):
    one = obs.oneshot
    assert one and one["doc"] is not None, one.get("stderr")
    assert one["started"] >= obs.start + ONESHOT_AT - 1
    (skewed,) = nodes_in_role(obs, "clock -95s")
    shown = next(n for n in one["doc"]["nodes"] if n["name"] == skewed)
    assert ready_condition(one["real_nodes"][skewed])["status"] == "True"
    assert shown["state"] == "Ready", shown
    assert shown["lease_age_seconds"] <= 10 + 2  # seen renewing on the watch: at most one interval ago
    print(f"status on the clock-behind node: {shown['state']}, lease age {shown['lease_age_seconds']:.1f}s, "
          f"answered in {one['ended'] - one['started']:.1f}s")
    # and the node whose clock is ahead, and the healthy ones, are Ready in the same answer
    for n in [*nodes_in_role(obs, "clock +40s"), *(n for n in obs.zone_of if n not in obs.roles)]:
        assert next(x for x in one["doc"]["nodes"] if x["name"] == n)["state"] == "Ready", n
