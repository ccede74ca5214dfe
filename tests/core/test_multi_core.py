"""Several clusters as one fleet (core/multi.py): no Textual, time as a parameter."""

from __future__ import annotations

import inspect

import pytest

from nodewatch.core.fleet import FleetState
from nodewatch.core.multi import ClusterState, Member, MultiFleet
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.source import FleetReader
from nodewatch.core.views import HEALTH_BAD, HEALTH_OK, HEALTH_WARN
from support.factories import T0, lease, node, pod


def _cluster(name: str, settings: Settings, nodes: dict[str, float], *, zone: str = "z1",
             sts_on: str | None = None) -> ClusterState:
    """``nodes``: name -> seconds since its last renewal at T0 (its Ready stays True)."""
    st = ClusterState(name, settings)
    for n, age in nodes.items():
        st.apply("nodes", "ADDED", node(n, zone=zone), T0 - 100)
        st.apply("leases", "ADDED", lease(n, T0 - age), T0 - age)
    if sts_on:
        st.apply("pods", "ADDED", pod("db-0", sts_on, owner_kind="StatefulSet", owner_name="db"), T0 - 100)
    return st


def _fleet() -> tuple[MultiFleet, ClusterState, ClusterState]:
    # The same node names in both; a 45 s old lease is Overdue under a 40 s grace, Late under 50 s.
    a = _cluster("prod-eu", Settings().with_server_version("v1.31.4"), {"node-1": 45, "node-2": 1})
    b = _cluster("prod-us", Settings().with_server_version("v1.33.1"), {"node-1": 45, "node-2": 1, "node-3": 1})
    return MultiFleet([Member("prod-eu", a), Member("prod-us", b, lambda: None)]), a, b


def test_each_cluster_is_judged_by_its_own_grace_and_views_carry_their_cluster():
    multi, _, _ = _fleet()
    view = multi.evaluate(T0)
    by_key = {v.key: v for v in view.nodes}
    assert set(by_key) == {"prod-eu/node-1", "prod-eu/node-2", "prod-us/node-1", "prod-us/node-2", "prod-us/node-3"}
    assert by_key["prod-eu/node-1"].state is NodeState.OVERDUE and by_key["prod-eu/node-1"].grace == 40
    assert by_key["prod-us/node-1"].state is NodeState.LATE and by_key["prod-us/node-1"].grace == 50
    assert by_key["prod-eu/node-1"].cluster == "prod-eu" and by_key["prod-eu/node-1"].name == "node-1"
    # worst first across both clusters, counts summed
    assert [v.key for v in view.nodes[:2]] == ["prod-eu/node-1", "prod-us/node-1"]
    assert view.counts[NodeState.READY] == 3 and view.counts[NodeState.OVERDUE] == 1
    assert sum(view.counts.values()) == len(view.nodes) == multi.node_count() == 5


def test_zones_are_named_by_cluster_and_each_cluster_is_summarised():
    multi, _, _ = _fleet()
    view = multi.evaluate(T0)
    assert sorted(z.name for z in view.zones) == ["prod-eu/r1/z1", "prod-us/r1/z1"]
    eu, us = view.clusters
    assert (eu.name, eu.nodes, eu.not_ready, eu.settings.grace) == ("prod-eu", 2, 1, 40)
    assert (us.name, us.nodes, us.not_ready, us.settings.grace) == ("prod-us", 3, 1, 50)
    assert eu.health == HEALTH_OK and eu.error == ""


def test_a_one_cluster_fleet_state_has_no_cluster_and_its_key_is_the_name():
    st = FleetState()
    st.apply("nodes", "ADDED", node("n1"), T0)
    v = st.evaluate(T0)
    assert v.clusters == () and v.nodes[0].cluster == "" and v.nodes[0].key == "n1"


def test_questions_about_one_node_take_its_cluster_key():
    multi, a, b = _fleet()
    b.apply("nodes", "MODIFIED", node("node-2", labels={"team": "storage"}), T0)
    assert multi.has_node("prod-us/node-3") and not multi.has_node("prod-eu/node-3")
    assert not multi.has_node("node-1")  # a bare name is no node of a multi-cluster fleet
    assert multi.node_labels("prod-us/node-2")["team"] == "storage"
    assert "team" not in multi.node_labels("prod-eu/node-2")
    d = multi.node_details("prod-us/node-1", T0)
    assert d.cluster == "prod-us" and d.view is not None and d.view.grace == 50
    missing = multi.node_details("elsewhere/node-1", T0)
    assert missing.view is None and missing.record is None


def test_statefulset_pods_at_risk_are_counted_per_cluster_and_found_by_key():
    a = _cluster("a", Settings(), {"n1": 1})
    b = _cluster("b", Settings(), {"n1": 1}, sts_on="n1")
    b.apply("nodes", "MODIFIED", node("n1", ready="Unknown"), T0)
    multi = MultiFleet([Member("a", a), Member("b", b)])
    view = multi.evaluate(T0)
    assert view.statefulset_at_risk == 1
    assert [c.statefulset_at_risk for c in view.clusters] == [0, 1]
    pods = multi.pod_records_on(["b/n1", "a/n1"])
    assert [p.name for p in pods["b/n1"]] == ["db-0"] and pods["a/n1"] == []


def test_cluster_names_that_are_prefixes_of_each_other_split_right():
    a = _cluster("prod", Settings(), {"x": 1})
    b = _cluster("prod/eu", Settings(), {"x": 1, "y": 1})
    multi = MultiFleet([Member("prod", a), Member("prod/eu", b)])
    assert multi.split("prod/eu/y")[0].name == "prod/eu"
    assert multi.split("prod/x")[0].name == "prod"
    assert multi.has_node("prod/eu/y") and not multi.has_node("prod/y")


def test_an_unreadable_cluster_is_an_error_not_a_blank_and_problems_say_which_cluster():
    multi, a, b = _fleet()
    broken = ClusterState("broken", Settings())
    broken.update_health("nodes", connected=False, synced=False, down_since=T0 - 30,
                         last_error="connection refused")
    broken.problem(T0 - 5, "nodes", "connection refused")
    multi = MultiFleet([Member("prod-eu", a), Member("broken", broken, lambda: "credentials rejected (401)")])
    view = multi.evaluate(T0)
    c = view.clusters[1]
    assert c.health == HEALTH_BAD and c.error == "credentials rejected (401)" and c.health_text == c.error
    assert not view.leases_blind  # a cluster with no nodes misjudges none
    assert view.health["nodes"].connected is False and view.health["nodes"].last_error == "connection refused"
    assert multi.recent_problems(5)[-1].where == "broken: nodes"
    assert multi.problem_counts() == (1, 0)


def test_cluster_health_words():
    st = ClusterState("c", Settings())
    multi = MultiFleet([Member("c", st)])
    st.update_health("nodes", connected=False, synced=False, last_error="connecting")
    assert (multi.evaluate(T0).clusters[0].health, multi.evaluate(T0).clusters[0].health_text) == (HEALTH_WARN, "connecting")
    st.update_health("nodes", connected=True, synced=False, last_error="")
    assert multi.evaluate(T0).clusters[0].health_text == "nodes listing"
    st.update_health("nodes", connected=False, down_since=T0 - 120, last_error="EOF")
    assert multi.evaluate(T0).clusters[0].health_text == "nodes down 2m00s: EOF"
    st.update_health("leases", connected=True, synced=True, forbidden=True, last_error="403")
    st.update_health("nodes", connected=True, synced=True, down_since=None, last_error="")
    c = multi.evaluate(T0).clusters[0]
    assert (c.health, c.health_text) == (HEALTH_BAD, "leases forbidden")


def test_multi_fleet_answers_all_of_fleet_reader():
    members = {n for n in vars(FleetReader) if not n.startswith("_")}
    for name in members:
        want = [p.name for p in inspect.signature(getattr(FleetReader, name)).parameters.values()]
        got = [p.name for p in inspect.signature(getattr(MultiFleet, name)).parameters.values()]
        assert got == want, name


def test_two_clusters_with_one_name_are_refused():
    with pytest.raises(ValueError):
        MultiFleet([Member("a", FleetState()), Member("a", FleetState())])


def test_each_cluster_learns_its_own_default_toleration_and_the_header_says_the_range():
    """Each cluster's pods carry its own API server's default (core/pod_tolerations); the header of
    several clusters says the range, as it does for the grace."""
    from nodewatch.core.rules import TAINT_NOT_READY, TAINT_UNREACHABLE
    from nodewatch.ui.header import clusters_settings

    multi, a, b = _fleet()
    tols = [{"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
            for k in (TAINT_NOT_READY, TAINT_UNREACHABLE)]
    a.apply("pods", "ADDED", pod("web-0", "node-1", tolerations=tols), T0)
    b.apply("pods", "ADDED", pod("web-0", "node-1"), T0)
    view = multi.evaluate(T0)
    assert {c.name: c.settings.toleration for c in view.clusters} == {"prod-eu": 60.0, "prod-us": 300.0}
    assert clusters_settings(view).endswith("toleration 60-300s")
    b.apply("pods", "MODIFIED", pod("web-0", "node-1", tolerations=tols), T0 + 1)
    assert clusters_settings(multi.evaluate(T0 + 1)).endswith("toleration 60s (pods)")
