"""Scaled-down soak: under churn, in virtual time, the state's containers
stay bounded by the fleet, not by how long nodewatch has been running.

200 nodes for 30 virtual minutes with scenario churn+flapping (a node replaced every 90 s, one
flapping), Event TTL shortened to 10 minutes so events expire within the run. Sizes of the
containers are asserted, not RSS (noisy on shared machines). The full-size run is
``python -m bench.soak`` (5,000 nodes, an hour).
"""

from __future__ import annotations

import pytest

from bench.soak import Sample, soak

NODES = 200
SLACK = 10


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    return soak(nodes=NODES, minutes=30, every=5, event_ttl=600)


def warm_and_later(samples: list[Sample]) -> tuple[Sample, list[Sample]]:
    return samples[1], samples[2:]


def test_the_run_really_churned(samples: list[Sample]) -> None:
    assert len(samples) == 7  # minutes 0, 5, ..., 30
    assert samples[-1].sizes["nodes_replaced"] >= 15  # one node every 90 s
    assert samples[-1].sizes["cluster_events"] > 0


def test_node_records_follow_the_cluster(samples: list[Sample]) -> None:
    for s in samples:
        z = s.sizes
        for name in ("nodes", "views", "order"):
            assert abs(z[name] - z["cluster_nodes"]) <= 2, (s.minute, name, z)
        assert z["stale_leases"] <= 2 and z["stale_views"] == 0, (s.minute, z)


def test_pods_follow_the_cluster(samples: list[Sample]) -> None:
    for s in samples:
        z = s.sizes
        assert z["pods"] <= z["cluster_pods"] + SLACK, (s.minute, z)
        assert z["pods_by_node_items"] <= z["pods"], (s.minute, z)


def test_expired_events_are_forgotten(samples: list[Sample]) -> None:
    for s in samples:
        z = s.sizes
        assert z["events"] <= z["cluster_events"] + SLACK, (s.minute, z)
        assert z["events_by_node_items"] <= z["events"] + SLACK, (s.minute, z)
    # with a 10-minute TTL the number of events plateaus instead of growing with time
    _, later = warm_and_later(samples)
    assert later[-1].sizes["events"] <= 2 * later[0].sizes["events"] + SLACK


def test_timers_and_memos_stay_bounded(samples: list[Sample]) -> None:
    for s in samples:
        z = s.sizes
        assert z["due"] <= 4 * z["cluster_nodes"] + SLACK, (s.minute, z)
        assert z["matcher_memo"] <= 2 * max(z["cluster_nodes"], 1000), (s.minute, z)
        assert z["feed_pending"] <= z["cluster_nodes"], (s.minute, z)
        assert z["problems"] <= 200


def test_timeline_entries_are_capped_per_node(samples: list[Sample]) -> None:
    for s in samples:
        z = s.sizes
        assert z["timeline_items"] <= 64 * max(z["timelines"], 1)


def test_per_node_maps_forget_deleted_nodes(samples: list[Sample]) -> None:
    warm, later = warm_and_later(samples)
    for s in later:
        for name in ("stale_pods_by_node", "stale_timelines", "stale_certs"):
            assert s.sizes[name] <= warm.sizes[name] + 3, (s.minute, name, s.sizes[name], warm.sizes[name])
    # Events about a deleted node still exist in the API until their TTL (10 minutes here) expires
    # them, so their index plateaus one TTL after the churn began instead of growing with time.
    settled = [s for s in samples if s.minute >= 10]
    for s in settled[1:]:
        assert s.sizes["stale_events_by_node"] <= settled[0].sizes["stale_events_by_node"] + 3, (s.minute, s.sizes)
