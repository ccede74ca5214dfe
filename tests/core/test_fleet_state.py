"""FleetState: watch events in, node views out, at chosen ``now`` values."""

from __future__ import annotations

import pytest

from nodewatch.core.causes import CauseKind, checks_for
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import TAINT_NOT_READY, TAINT_UNREACHABLE, NodeState, ZoneState
from nodewatch.core.settings import Settings
from support.factories import T0, csr, event, lease, node, pod, taint


def fleet(*objs, settings: Settings | None = None, received: float = T0) -> FleetState:
    s = FleetState(settings or Settings())
    for resource, obj in objs:
        assert s.apply(resource, "ADDED", obj, received, listing=True)
    for r in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
        s.apply(r, "SYNCED", None, received)
    return s


UP_ELSEWHERE = (("nodes", node("up", zone="z2")), ("leases", lease("up", T0)))
"""A Ready node in another zone: with every zone down the controller is in master disruption mode
and takes the NoExecute taints off (``rules.effective_taints``)."""


def state_of(s: FleetState, name: str, now: float) -> NodeState:
    v = s.evaluate(now).node(name)
    assert v is not None
    return v.state


def test_lease_age_uses_receive_time_of_the_renewal_not_renew_time():
    # the node's clock is 30s behind: renewTime says T0-30, but we received it at T0
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 100)))
    s.apply("leases", "MODIFIED", lease("a", T0 - 30), received_at=T0)
    v = s.evaluate(T0 + 5).node("a")
    assert v.lease_age(T0 + 5) == pytest.approx(5.0, abs=1e-6)
    assert v.skew == pytest.approx(30.0, abs=1e-6)
    assert v.state is NodeState.READY  # now - renewTime would be 35s: Late. It is not.


def test_first_list_uses_renew_time():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 15)), received=T0)
    assert s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(15.0, abs=1e-6)


def test_lease_without_receive_time_uses_renew_time():
    s = FleetState()
    s.apply("nodes", "ADDED", node("a"), None)
    s.apply("leases", "ADDED", lease("a", T0 - 12), None)
    assert s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(12.0, abs=1e-6)


def test_an_older_renew_time_does_not_move_the_lease_back():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)))
    s.apply("leases", "MODIFIED", lease("a", T0 - 50), received_at=T0 + 10)
    assert s.evaluate(T0 + 10).node("a").lease_age(T0 + 10) == pytest.approx(10.0, abs=1e-6)


def test_a_kubelet_whose_clock_stepped_back_renews_but_is_not_heard_and_says_why():
    """Seen on the v1.20.2 testbed: a kubelet's renewTime stepped back 95 s; the controller counts
    only a newer renewTime, took the node for silent and marked it Unknown while it renewed every
    10 s. nodewatch counts the same and says why, and when its renewals count again."""
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)), *UP_ELSEWHERE)
    for k in range(1, 5):  # the watch's renewals, every 10 s, 95 s behind the last counted
        s.apply("leases", "MODIFIED", lease("a", T0 - 95 + 10 * k), received_at=T0 + 10 * k)
    v = s.evaluate(T0 + 15).node("a")
    assert v.state is NodeState.READY and v.lease_age(T0 + 15) == pytest.approx(15.0, abs=1e-6)
    assert [c.kind for c in v.causes] == [CauseKind.CLOCK_STEPPED_BACK]  # a warning before the grace
    v = s.evaluate(T0 + 45).node("a")
    assert v.state is NodeState.OVERDUE and v.causes[0].kind is CauseKind.CLOCK_STEPPED_BACK
    assert "55s older than the last one counted" in v.cause and "until about" in v.cause  # T0 - 55 at T0 + 40
    assert "chronyc tracking   # or: timedatectl timesync-status" in checks_for(list(v.causes), "a")
    # the controller marks it Unknown; the kubelet posts Ready again at once, its heartbeat on its
    # own clock: the controller counts that post at receipt (a changed heartbeat), so does nodewatch
    s.apply("nodes", "MODIFIED", node("a", "Unknown", reason="NodeStatusUnknown", transition=T0 + 45,
                                      heartbeat=T0 - 3600), received_at=T0 + 45)
    assert state_of(s, "a", T0 + 46) is NodeState.UNKNOWN
    s.apply("nodes", "MODIFIED", node("a", transition=T0 + 50 - 95, heartbeat=T0 + 50 - 95), received_at=T0 + 50)
    v = s.evaluate(T0 + 51).node("a")  # heard again (Late: its lease still is not)
    assert v.state is NodeState.LATE and v.causes[0].kind is CauseKind.CLOCK_STEPPED_BACK
    assert v.next_change == pytest.approx(T0 + 50 + 40, abs=1e-6)
    assert state_of(s, "a", T0 + 50 + 40.5) is NodeState.OVERDUE  # no renewal counted since, no post
    s.apply("leases", "MODIFIED", lease("a", T0 + 1), received_at=T0 + 96)  # caught up: counted again
    v = s.evaluate(T0 + 97).node("a")
    assert v.state is NodeState.READY and v.lease_age(T0 + 97) == pytest.approx(1.0, abs=1e-6) and v.causes == ()
    assert s.snapshot().leases["a"].unrenewed is None


@pytest.mark.parametrize("version, held", [("v1.36.4", False), ("v1.37.2", True), ("v1.38.0", True)])
def test_from_1_37_the_controller_skips_a_node_whose_lease_changed_since_the_last_renewal_it_counted(version, held):
    """NodeControllerLeaseCircuitBreaker (1.37, on by default): with the probe expired the
    controller reads the live Lease; another resourceVersion than the last counted renewal's skips
    the node for the pass. On the v1.37.2 testbed a kubelet whose clock stepped back 95 s was
    skipped at every pass, never marked Unknown; nodewatch must not call it Overdue there."""
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)), *UP_ELSEWHERE,
              settings=Settings().with_server_version(version))
    s.apply("leases", "MODIFIED", lease("a", T0 - 85), received_at=T0 + 10)
    v = s.evaluate(T0 + 200).node("a")
    assert v.state is (NodeState.LATE if held else NodeState.OVERDUE)
    assert v.causes[0].kind is CauseKind.CLOCK_STEPPED_BACK
    assert ([c.kind for c in v.causes][1:] == [CauseKind.CONTROLLER_SKIPS]) is held
    assert "no eviction" in v.causes[-1].text if held else len(v.causes) == 1
    timeline = [text for _, text in s.timeline_for("a", T0 + 200)]
    assert any(text.startswith("grace ends") for text in timeline) is not held
    s.apply("leases", "MODIFIED", lease("a", T0 + 100), received_at=T0 + 200)  # caught up: counted
    assert state_of(s, "a", T0 + 200 + 50.5) is NodeState.OVERDUE  # a stop after that is judged as always (grace 50)


@pytest.mark.parametrize("version, held", [("v1.36.4", False), ("v1.37.2", True)])
def test_from_1_37_a_dead_nodes_lease_written_by_another_keeps_the_controller_off(version, held):
    """v1.37.2 testbed: a kubelet stopped, then its Lease annotated: Ready 85 s past the 50 s grace,
    'Skipping - no pods will be evicted' at every pass; v1.20.2 marked it Unknown at the grace."""
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)), *UP_ELSEWHERE,
              settings=Settings().with_server_version(version))
    annotated = lease("a", T0)
    annotated["metadata"]["annotations"] = {"ops/note": "looked at it"}
    s.apply("leases", "MODIFIED", annotated, received_at=T0 + 6)  # a monitor pass (5 s) has counted T0's
    v = s.evaluate(T0 + 120).node("a")
    assert v.state is (NodeState.LATE if held else NodeState.OVERDUE)
    assert v.lease_age(T0 + 120) == pytest.approx(120.0, abs=1e-6)  # the write is not a renewal
    if held:
        assert [c.kind for c in v.causes] == [CauseKind.LEASE_REWRITTEN, CauseKind.CONTROLLER_SKIPS]
        assert "no eviction" in v.causes[1].text
    else:
        assert [c.kind for c in v.causes] == [CauseKind.LEASE_STALE]
    soon = fleet(("nodes", node("a")), ("leases", lease("a", T0)), *UP_ELSEWHERE,
                 settings=Settings().with_server_version(version))
    soon.apply("leases", "MODIFIED", annotated, received_at=T0 + 1)  # the pass may have kept this one
    assert state_of(soon, "a", T0 + 120) is NodeState.OVERDUE


@pytest.mark.parametrize("offset, expected", [
    (0, NodeState.READY), (20, NodeState.READY), (20.5, NodeState.LATE), (40, NodeState.LATE),
    (40.5, NodeState.OVERDUE), (500, NodeState.OVERDUE),
])
def test_states_advance_with_time_alone(offset, expected):
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)))
    assert state_of(s, "a", T0 + offset) is expected


def test_the_grace_period_follows_the_setting():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)), settings=Settings().with_server_version("v1.33.0"))
    assert state_of(s, "a", T0 + 45) is NodeState.LATE      # grace 50 since v1.32
    assert state_of(s, "a", T0 + 50.5) is NodeState.OVERDUE
    s.set_settings(Settings().override(grace_seconds=44.0))
    assert state_of(s, "a", T0 + 45) is NodeState.OVERDUE


def test_cached_views_move_forward_and_back_in_time():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)))
    assert state_of(s, "a", T0 + 100) is NodeState.OVERDUE
    s.apply("leases", "MODIFIED", lease("a", T0 + 101), received_at=T0 + 101)
    assert state_of(s, "a", T0 + 102) is NodeState.READY


def test_eviction_countdown_and_evicted_at_deadline():
    added = T0 - 100
    n = node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoSchedule", added),
                                     taint(TAINT_UNREACHABLE, "NoExecute", added)])
    # another zone up: not master disruption mode, which takes the taints off (test_upstream_node_lifecycle)
    s = fleet(("nodes", n), ("leases", lease("a", T0 - 150)), *UP_ELSEWHERE)
    v = s.evaluate(T0).node("a")
    assert v.state is NodeState.EVICTING
    assert v.eviction_in(T0) == pytest.approx(200.0, abs=1e-6)
    assert state_of(s, "a", added + 300 - 0.001) is NodeState.EVICTING
    assert state_of(s, "a", added + 300) is NodeState.EVICTED
    custom = fleet(("nodes", n), *UP_ELSEWHERE, settings=Settings().override(toleration_seconds=60.0))
    assert state_of(custom, "a", added + 60) is NodeState.EVICTED


def test_not_ready_with_fresh_lease_is_the_kubelets_own_report():
    n = node("a", "False", reason="KubeletNotReady",
             message="container runtime is down, PLEG is not healthy: pleg was last seen active 3m0s ago")
    s = fleet(("nodes", n), ("leases", lease("a", T0 - 2)))
    v = s.evaluate(T0).node("a")
    assert v.state is NodeState.NOT_READY
    assert v.causes[0].kind is CauseKind.PLEG
    assert "container runtime is down" in v.cause
    assert "crictl ps -a" in checks_for(list(v.causes))


def test_the_checks_name_the_node_they_are_for():
    """A check that names its node gets the node's name, shell-quoted (it comes from the cluster),
    not ``<node>`` (seen in the drill-down of a drained node on the v1.37.2 testbed)."""
    v = fleet(("nodes", node("w-1", unschedulable=True)), ("leases", lease("w-1", T0))).evaluate(T0).node("w-1")
    assert v.causes[0].kind is CauseKind.CORDONED
    assert checks_for(list(v.causes), v.name) == ["kubectl describe node w-1   # who cordoned it, and why?"]
    assert checks_for(list(v.causes), "a b;rm") == ["kubectl describe node 'a b;rm'   # who cordoned it, and why?"]
    assert checks_for(list(v.causes)) == ["kubectl describe node <node>   # who cordoned it, and why?"]


def test_network_plugin_cause():
    n = node("a", "False", reason="KubeletNotReady",
             message="container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                     "message:Network plugin returns error: cni plugin not initialized")
    v = fleet(("nodes", n), ("leases", lease("a", T0))).evaluate(T0).node("a")
    assert v.causes[0].kind is CauseKind.NETWORK


def test_overdue_cause_is_the_stale_lease():
    v = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 60))).evaluate(T0).node("a")
    assert v.state is NodeState.OVERDUE
    assert v.causes[0].kind is CauseKind.LEASE_STALE


def test_a_node_without_a_lease_is_not_said_to_have_stopped_renewing_one():
    """No Lease at all (the leases listed, none of this node's): the controller's probe is its status
    heartbeat alone, and the cause says that, not "lease not renewed"."""
    s = fleet(("nodes", node("a", "Unknown", heartbeat=T0 - 120)), ("leases", lease("b", T0 - 1)))
    v = s.evaluate(T0).node("a")
    assert v.causes[0].kind is CauseKind.LEASE_STALE
    assert v.causes[0].text.startswith("no Lease, and no status posted within the")
    with_lease = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 60))).evaluate(T0).node("a")
    assert with_lease.causes[0].text.startswith("lease not renewed within the")


def test_expired_client_certificate_is_the_cause():
    s = fleet(("nodes", node("a", "Unknown")), ("leases", lease("a", T0 - 600)),
              ("certificatesigningrequests", csr("csr-1", "a", T0 - 86400)))
    v = s.evaluate(T0).node("a")
    assert v.cert_not_after == pytest.approx(T0 - 86400, abs=1)
    assert v.cert_level(T0) == "expired"
    assert v.causes[0].kind is CauseKind.CERT_EXPIRED


def test_newest_csr_not_after_wins_and_survives_csr_deletion():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)),
              ("certificatesigningrequests", csr("old", "a", T0 + 10 * 86400)),
              ("certificatesigningrequests", csr("new", "a", T0 + 300 * 86400)),
              ("certificatesigningrequests", csr("older", "a", T0 + 5 * 86400)))
    assert s.certs["a"].not_after == pytest.approx(T0 + 300 * 86400, abs=1)
    s.apply("certificatesigningrequests", "DELETED", csr("new", "a", T0 + 300 * 86400), T0)
    assert s.evaluate(T0).node("a").cert_level(T0) == "ok"


def test_csrs_of_other_signers_or_users_are_ignored():
    s = fleet(("nodes", node("a")),
              ("certificatesigningrequests", csr("x", "a", T0 + 86400, signer="kubernetes.io/kubelet-serving")),
              ("certificatesigningrequests", {"metadata": {"name": "y"}, "spec": {
                  "signerName": "kubernetes.io/kube-apiserver-client-kubelet", "username": "alice"}}),
              ("certificatesigningrequests", csr("z", "a", T0 + 86400, username="alice", subject="alice")))
    assert s.certs == {}


def test_a_nodes_first_certificate_asked_for_with_a_bootstrap_token_is_the_nodes():
    """TLS bootstrap (kubeadm): the kubelet's first CSR is created with its bootstrap token, so its
    requester is ``system:bootstrap:<token id>``; the certificate it gets names the node, and it is
    the one the kubelet uses until its first rotation, most of a year later."""
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)),
              ("certificatesigningrequests", csr("boot", "a", T0 + 365 * 86400, username="system:bootstrap:abcdef")))
    assert s.certs["a"].not_after == pytest.approx(T0 + 365 * 86400, abs=1)
    assert s.evaluate(T0).node("a").cert_not_after == pytest.approx(T0 + 365 * 86400, abs=1)


def test_the_certificate_names_the_node_not_the_requester():
    s = fleet(("nodes", node("a")), ("nodes", node("b")),
              ("certificatesigningrequests", csr("c", "a", T0 + 86400, username="system:node:b")))
    assert set(s.certs) == {"a"}


def test_zone_states_and_rates():
    objs = [("nodes", node(f"a{i}", "True", zone="a")) for i in range(2)]
    objs += [("nodes", node(f"a{i}", "Unknown", zone="a")) for i in range(2, 5)]  # 3/5 not ready
    objs += [("nodes", node(f"b{i}", "Unknown", zone="b")) for i in range(2)]     # no ready node
    objs += [("nodes", node("c0", None, zone="c"))]                                # no Ready condition
    objs += [("nodes", node("c1", "True", zone="c"))]
    view = fleet(*objs).evaluate(T0)
    zones = {z.name: z for z in view.zones}
    assert zones["r1/a"].state is ZoneState.PARTIAL and zones["r1/a"].taint_rate == 0.0
    assert zones["r1/b"].state is ZoneState.FULL and zones["r1/b"].taint_rate == 0.1
    assert zones["r1/c"].state is ZoneState.NORMAL and zones["r1/c"].not_ready == 1
    assert not view.all_zones_full


def test_every_zone_down_stops_evictions():
    view = fleet(("nodes", node("a", "Unknown", zone="a")), ("nodes", node("b", "Unknown", zone="b"))).evaluate(T0)
    assert view.all_zones_full
    assert all(z.taint_rate == 0.0 for z in view.zones)


def test_excluded_nodes_do_not_count_in_zones():
    view = fleet(("nodes", node("a", "True")),
                 ("nodes", node("x", "Unknown", labels={"node.kubernetes.io/exclude-disruption": ""}))).evaluate(T0)
    assert view.zones[0].nodes == 1


def test_statefulset_pods_at_risk_and_per_pod_countdowns():
    added = T0 - 100
    n = node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoExecute", added)])
    ds_tol = [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]
    short = [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]
    s = fleet(("nodes", n), ("nodes", node("b")),
              ("pods", pod("db-0", "a", owner_kind="StatefulSet", owner_name="db", deleting=T0 - 10)),
              ("pods", pod("web-1", "a")),
              ("pods", pod("agent-x", "a", owner_kind="DaemonSet", owner_name="agent", tolerations=ds_tol)),
              ("pods", pod("fast", "a", tolerations=short)),
              ("pods", pod("db-1", "b", owner_kind="StatefulSet", owner_name="db")))
    pods = {p.name: p for p in s.pods_on("a", T0)}
    assert pods["db-0"].statefulset_risk and pods["db-0"].terminating
    assert not pods["web-1"].statefulset_risk
    assert pods["web-1"].eviction_at == pytest.approx(added + 300, abs=1e-6)
    assert pods["agent-x"].eviction_at is None
    assert pods["fast"].eviction_at == pytest.approx(added + 30, abs=1e-6)
    assert not s.pods_on("b", T0)[0].statefulset_risk
    assert s.evaluate(T0).statefulset_at_risk == 1


def test_pod_moves_between_nodes_and_is_deleted():
    s = fleet(("nodes", node("a")), ("nodes", node("b")), ("pods", pod("p", "a")))
    s.apply("pods", "MODIFIED", pod("p", "b"), T0)
    assert [p.name for p in s.pods_on("b", T0)] == ["p"] and s.pods_on("a", T0) == []
    s.apply("pods", "DELETED", pod("p", "b"), T0)
    assert s.pods_on("b", T0) == []


def test_events_by_node_newest_first_and_deleted():
    s = fleet(("nodes", node("a")),
              ("events", event("e1", "a", "NodeNotReady", "Node a status is now: NodeNotReady", T0 - 10,
                               component="node-controller")),
              ("events", event("e2", "a", "Starting", "Starting kubelet.", T0 - 5)))
    assert [e.reason for e in s.events_for("a")] == ["Starting", "NodeNotReady"]
    s.apply("events", "DELETED", event("e2", "a", "Starting", "", T0), T0)
    assert [e.reason for e in s.events_for("a")] == ["NodeNotReady"]


def test_deleted_node_disappears():
    s = fleet(("nodes", node("a")), ("nodes", node("b")))
    s.apply("nodes", "DELETED", node("a"), T0)
    assert [v.name for v in s.evaluate(T0).nodes] == ["b"]


def test_worst_first_then_deadline():
    objs = [("nodes", node("ok")), ("leases", lease("ok", T0)),
            ("nodes", node("late", )), ("leases", lease("late", T0 - 25)),
            ("nodes", node("ev2", "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 - 10)])),
            ("nodes", node("ev1", "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 - 50)])),
            ("nodes", node("nr", "False"))]
    assert [v.name for v in fleet(*objs).evaluate(T0).nodes] == ["ev1", "ev2", "nr", "late", "ok"]


@pytest.mark.parametrize("bad", [
    None, 42, "node", [], {}, {"metadata": None}, {"metadata": {"name": ""}}, {"metadata": {"name": 5}},
])
def test_unusable_objects_are_reported_not_raised(bad):
    s = FleetState()
    assert s.apply("nodes", "ADDED", bad, T0) is False
    assert s.problems and "nodes" in s.problems[-1].where


def test_odd_fields_are_tolerated():
    weird = {"metadata": {"name": "w", "labels": {"a": None, 1: 2}}, "spec": {"taints": [None, {"key": "k"}, "x"]},
             "status": {"conditions": [None, {"type": "Ready"}, {"status": "True"}, {"type": "DiskPressure",
                        "status": "True", "lastTransitionTime": "not a time"}], "nodeInfo": "nope",
                        "daemonEndpoints": {"kubeletEndpoint": {"Port": "x"}}}}
    s = FleetState()
    assert s.apply("nodes", "ADDED", weird, T0)
    assert s.apply("leases", "ADDED", {"metadata": {"name": "w", "namespace": "kube-node-lease"},
                                       "spec": {"renewTime": 12, "leaseDurationSeconds": "forty"}}, T0)
    v = s.evaluate(T0).node("w")
    assert v.ready == "Unknown" and v.pressure == ("DiskPressure",)


def test_unknown_resource_and_type_are_problems():
    s = FleetState()
    assert not s.apply("secrets", "ADDED", {"metadata": {"name": "x"}}, T0)
    assert not s.apply("nodes", "EXPLODED", node("a"), T0)
    assert len(s.problems) == 2


def test_blind_lease_stream_never_blames_nodes():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)))
    s.update_health("leases", connected=True, synced=True, last_activity=T0)
    assert state_of(s, "a", T0 + 15) is NodeState.READY
    s.update_health("leases", connected=False, down_since=T0 + 15, last_error="connection refused")
    view = s.evaluate(T0 + 100)
    assert view.leases_blind and "connection refused" in view.blind_reason
    assert view.node("a").state is NodeState.READY and view.node("a").lease_age(T0 + 100) is None
    s.update_health("leases", connected=True)
    s.apply("leases", "MODIFIED", lease("a", T0 + 101), received_at=T0 + 101)
    assert not s.evaluate(T0 + 102).leases_blind


def test_silent_lease_stream_is_blindness_until_a_bookmark_proves_it_alive():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)))
    s.update_health("leases", connected=True, synced=True, last_activity=T0)
    view = s.evaluate(T0 + 30)
    assert view.leases_blind and "silent" in view.blind_reason
    s.apply("leases", "BOOKMARK", {"metadata": {"resourceVersion": "9"}}, received_at=T0 + 30)
    assert state_of(s, "a", T0 + 31) is NodeState.LATE


def test_timeline_has_transitions_and_what_comes_next():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0)))
    n = node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 + 50)], transition=T0 + 45)
    s.apply("nodes", "MODIFIED", n, T0 + 50)
    texts = [t for _, t in s.timeline_for("a", T0 + 60)]
    assert any("Ready True -> Unknown" in t for t in texts)
    assert any(TAINT_UNREACHABLE in t for t in texts)
    assert any("eviction due" in t for t in texts)


def test_not_ready_taint_swap_keeps_deadline_from_earliest():
    n = node("a", "Unknown", taints=[taint(TAINT_NOT_READY, "NoExecute", T0 - 200),
                                     taint(TAINT_UNREACHABLE, "NoExecute", T0 - 10)])
    v = fleet(("nodes", n), *UP_ELSEWHERE).evaluate(T0).node("a")
    assert v.eviction_at == pytest.approx(T0 + 100, abs=1e-6)


def test_listed_lease_from_a_node_clock_ahead_is_never_in_the_future():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0 + 30)), received=T0)  # node clock 30s ahead
    assert s.evaluate(T0 + 1).node("a").lease_age(T0 + 1) == pytest.approx(1.0, abs=1e-6)


def test_a_listed_lease_teaches_no_skew_but_a_watched_renewal_does():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 170)), received=T0)
    assert s.leases["a"].skew is None
    s.apply("leases", "MODIFIED", lease("a", T0 - 160), received_at=T0 + 10.5)  # node clock 170.5s behind
    assert s.leases["a"].skew == pytest.approx(170.5, abs=1e-6)


def test_node_details_is_one_copy_of_everything_about_the_node():
    s = fleet(("nodes", node("a", labels={"team": "storage"})), ("leases", lease("a", T0 - 5)),
              ("nodes", node("b")), ("leases", lease("b", T0)),
              ("certificatesigningrequests", csr("csr-1", "a", T0 + 30 * 86400)),
              *[("pods", pod(f"web-{i}", "a")) for i in range(3)],
              ("events", event("e1", "a", "NodeReady", "ready", T0 - 60)),
              ("events", event("e2", "a", "Rebooted", "rebooted", T0 - 30)))
    d = s.node_details("a", T0, max_pods=2)
    assert d.view is not None and d.view.name == "a" and d.view.state is NodeState.READY
    assert d.record is not None and d.record.labels["team"] == "storage"
    assert d.cert is not None and d.cert.not_after == pytest.approx(T0 + 30 * 86400, abs=1)
    assert [p.name for p in d.pods] == ["web-0", "web-1"]
    assert [e.reason for e in d.events] == ["Rebooted", "NodeReady"]
    assert any("last lease renewal seen" in what for _, what in d.timeline)
    assert d.lease is not None and d.lease.renew_time == pytest.approx(T0 - 5, abs=1e-6) and d.lease.renewals == 1
    # the copy does not move when the state takes the next renewal
    s.apply("leases", "MODIFIED", lease("a", T0 + 5), T0 + 5)
    assert d.lease.renew_time == pytest.approx(T0 - 5, abs=1e-6) and d.lease.renewals == 1
    assert s.node_details("a", T0 + 5).lease.renewals == 2
    gone = s.node_details("nope", T0)
    assert (gone.view, gone.record, gone.lease, gone.cert, gone.pods) == (None, None, None, None, [])


def test_the_queries_the_sources_and_status_ask():
    s = fleet(("nodes", node("a")), ("nodes", node("c", "Unknown")), ("nodes", node("b", "False")),
              ("certificatesigningrequests", csr("csr-1", "a", T0 + 86400)))
    assert s.node_count() == 3 and s.has_node("b") and not s.has_node("z")
    assert s.not_ready_nodes() == ["b", "c"]
    assert set(s.node_records()) == {"a", "b", "c"}
    assert list(s.cert_dates()) == ["a"]
    assert s.is_synced("nodes", "leases") and not FleetState().is_synced("nodes")
    assert s.problem_count() == 0 and s.recent_problems(10) == []
    for i in range(3):
        s.apply("nodes", "ADDED", {"metadata": "not a dict", "n": i}, T0)
    assert s.problem_count() == 3 and len(s.recent_problems(2)) == 2 and s.recent_problems(0) == []
    with s.batch():
        s.apply("nodes", "DELETED", node("c"), T0)
        s.apply("nodes", "DELETED", node("b"), T0)
    assert s.node_count() == 1 and s.not_ready_nodes() == []


def test_a_keyframe_restores_exactly_what_was_fed():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 5)), ("pods", pod("web-0", "a")))
    kf = s.snapshot()
    s.apply("nodes", "MODIFIED", node("a", "Unknown"), T0 + 60)
    s.apply("pods", "DELETED", pod("web-0", "a"), T0 + 60)
    assert s.evaluate(T0 + 60).node("a").state is NodeState.UNKNOWN
    s.restore(kf)
    assert s.evaluate(T0).node("a").state is NodeState.READY
    assert [p.name for p in s.pods_on("a", T0)] == ["web-0"]
    s.restore(None)
    assert s.node_count() == 0 and s.evaluate(T0).nodes == ()


@pytest.mark.parametrize("second_key", [TAINT_UNREACHABLE, TAINT_NOT_READY])
def test_a_rewritten_eviction_taint_does_not_restart_the_countdown(second_key):
    """The controller rewrites a queued node's NoExecute taint with a fresh timeAdded (and swaps
    not-ready for unreachable in one write); the taint manager keeps the first schedule, so the
    countdown must not move (seen on the real v1.20.2 controller)."""
    first = T0 - 100
    s = fleet(("nodes", node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, added=first)])),
              ("leases", lease("a", T0 - 150)), ("pods", pod("web-1", "a")), *UP_ELSEWHERE)
    assert s.pods_on("a", T0)[0].eviction_at == pytest.approx(first + 300, abs=1e-6)
    s.apply("nodes", "MODIFIED", node("a", "Unknown", taints=[taint(second_key, added=T0 - 10)]), T0)
    assert s.pods_on("a", T0)[0].eviction_at == pytest.approx(first + 300, abs=1e-6)
    assert s.evaluate(T0).node("a").eviction_at == pytest.approx(first + 300, abs=1e-6)


def test_an_eviction_taint_that_went_away_starts_a_new_countdown():
    s = fleet(("nodes", node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, added=T0 - 100)])),
              ("leases", lease("a", T0 - 150)), ("pods", pod("web-1", "a")))
    s.apply("nodes", "MODIFIED", node("a", "True"), T0 - 50)
    s.apply("nodes", "MODIFIED", node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, added=T0 - 10)]), T0)
    assert s.pods_on("a", T0)[0].eviction_at == pytest.approx(T0 - 10 + 300, abs=1e-6)


def test_evaluating_an_earlier_instant_judges_every_node_again():
    """A replay stepping back with no event in between: a node Late at t is Ready at t - 10 s."""
    s = fleet(("nodes", node("a", "True")), ("leases", lease("a", T0)))
    late_at = T0 + 25  # two renew intervals of a 40 s lease: 20 s
    assert state_of(s, "a", late_at) is NodeState.LATE
    assert state_of(s, "a", late_at - 10) is NodeState.READY
    assert state_of(s, "a", late_at) is NodeState.LATE


# --- a listed lease's age from the API server's write time (managedFields) ----------------------


def _listed(obj, version: str | None, received: float = T0) -> FleetState:
    return fleet(("nodes", node("a")), ("leases", obj), settings=Settings(server_version=version), received=received)


def test_a_listed_lease_of_a_node_clock_behind_is_timed_by_the_servers_write():
    # renewTime on a clock 95 s behind; the API server wrote the renewal 5 s before the list arrived
    s = _listed(lease("a", T0 - 100, written=T0 - 5), "v1.30.4")
    v = s.evaluate(T0).node("a")
    assert v.lease_age(T0) == pytest.approx(5.0, abs=1e-6) and v.state is NodeState.READY
    assert s.leases["a"].age_from == "server" and s.leases["a"].skew == pytest.approx(95.0, abs=1e-6)
    # without the write time it is what renewTime says: overdue
    plain = _listed(lease("a", T0 - 100), "v1.30.4")
    assert plain.evaluate(T0).node("a").state is NodeState.OVERDUE and plain.leases["a"].age_from == "renewTime"


def test_a_listed_lease_of_a_node_clock_ahead_is_not_fresh_where_the_write_time_follows_renewals():
    # a node whose clock is 60 s ahead stopped renewing 50 s ago: renewTime is "10 s in the future"
    s = _listed(lease("a", T0 - 50 + 60, written=T0 - 50), "v1.30.4")
    assert s.evaluate(T0).node("a").state is NodeState.OVERDUE and s.leases["a"].age_from == "server"
    # before v1.25 the write time does not follow renewals: it cannot say the renewal is old
    old = _listed(lease("a", T0 - 50 + 60, written=T0 - 50), "v1.20.2")
    assert old.evaluate(T0).node("a").lease_age(T0) == pytest.approx(0.0, abs=1e-6) and old.leases["a"].age_from == "renewTime"


def test_before_v1_25_the_write_time_is_only_an_upper_bound_of_the_age():
    # v1.20 stamps the kubelet's entry when its fields change (the Lease's creation), not per renewal
    s = _listed(lease("a", T0 - 100, written=T0 - 30), "v1.20.2")
    assert s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(30.0, abs=1e-6)
    assert s.leases["a"].age_from == "server-bound" and s.leases["a"].skew is None
    # a write time older than what renewTime says is no use there: renewTime as before
    s = _listed(lease("a", T0 - 8, written=T0 - 3600), "v1.20.2")
    assert s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(8.0, abs=1e-6) and s.leases["a"].age_from == "renewTime"


def test_when_the_clocks_agree_to_the_second_renew_time_is_the_finer_time():
    s = _listed(lease("a", T0 - 7.6, written=T0 - 8), "v1.30.4")
    assert s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(7.6, abs=1e-6)
    assert s.leases["a"].age_from == "server" and s.leases["a"].skew == 0.0


@pytest.mark.parametrize("manager, operation", [("kubectl-edit", "Update"), ("kubelet", "Apply"),
                                                ("python-requests", "Update")])
def test_only_the_kubelets_updates_time_a_renewal(manager, operation):
    s = _listed(lease("a", T0 - 100, written=T0 - 5, manager=manager, operation=operation), "v1.30.4")
    assert s.leases["a"].age_from == "renewTime" and s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(100.0, abs=1e-6)
    # a kubelet reporting under its node's name (the holder) counts
    held = _listed(lease("a", T0 - 100, written=T0 - 5, manager="a"), "v1.30.4")
    assert held.leases["a"].age_from == "server"


@pytest.mark.parametrize("manager", ["kubemark", "hollow-kubelet"])
def test_a_hollow_kubelets_updates_are_the_kubelets(manager):
    """kubemark's hollow node runs the real kubelet's code; its writes carry its own manager name
    (v1.20: the binary's, ``kubemark``; current releases: ``hollow-kubelet``), seen on the testbed."""
    s = _listed(lease("a", T0 - 100, written=T0 - 5, manager=manager), "v1.30.4")
    assert s.leases["a"].age_from == "server" and s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(5.0, abs=1e-6)


def test_a_write_time_after_the_receipt_is_clamped_to_it():
    s = _listed(lease("a", T0 - 100, written=T0 + 30), "v1.30.4")  # the server's clock ahead of ours
    assert s.evaluate(T0).node("a").lease_age(T0) == pytest.approx(0.0, abs=1e-6)


def test_a_relisted_write_time_not_after_the_renewal_already_seen_is_not_that_renewal():
    s = _listed(lease("a", T0 - 100), "v1.30.4")
    s.apply("leases", "MODIFIED", lease("a", T0 - 90), received_at=T0 + 10)  # seen on the watch at T0+10
    s.apply("leases", "ADDED", lease("a", T0 - 80, written=T0 + 5), received_at=T0 + 30, listing=True)
    track = s.leases["a"]
    assert track.age_from == "renewTime" and track.observed_at == pytest.approx(T0 - 80, abs=1e-6)
    s.apply("leases", "ADDED", lease("a", T0 - 70, written=T0 + 38), received_at=T0 + 40, listing=True)
    assert s.leases["a"].age_from == "server" and s.leases["a"].observed_at == pytest.approx(T0 + 38, abs=1e-6)


def test_a_watched_renewal_is_timed_by_its_receipt_whatever_the_write_time():
    s = _listed(lease("a", T0 - 100, written=T0 - 5), "v1.30.4")
    s.apply("leases", "MODIFIED", lease("a", T0 - 90, written=T0 + 1), received_at=T0 + 10)
    assert s.leases["a"].age_from == "receipt" and s.leases["a"].observed_at == pytest.approx(T0 + 10, abs=1e-6)


def test_the_typed_decoder_and_the_dict_reader_agree_on_the_write_time():
    import json

    from nodewatch.core.objects import lease_from_dict
    from nodewatch.core.wire import DECODERS

    obj = lease("a", T0 - 100, written=T0 - 5)
    obj["metadata"]["managedFields"].insert(0, {"manager": "kubelet", "operation": "Update", "time": "2027-01-15T07:00:00Z"})
    obj["metadata"]["managedFields"].append({"manager": "kubectl-label", "operation": "Update",
                                             "time": "2027-01-15T08:30:00Z"})
    typed = DECODERS["leases"].decode_object(json.dumps(obj).encode())
    assert typed == lease_from_dict(obj)
    assert typed.written_at == pytest.approx(T0 - 5, abs=1e-6)


def test_a_node_whose_kubelet_never_posted_status_is_judged_by_its_startup_grace():
    """No Ready condition on a real Node (the kubelet never posted status): kubectl calls it Unknown
    and the controller counts it not ready, but leaves it alone while its Lease is renewed within
    the startup grace (tryUpdateNodeHealth); nothing at all known of it: Unknown."""
    s = fleet(("nodes", node("fresh", None)), ("leases", lease("fresh", T0)))
    v = s.evaluate(T0).node("fresh")
    # Ready for no one without a Ready condition (the real controller's testbed run: never called
    # Ready before it writes Unknown), judged by the startup grace
    assert v.state is NodeState.UNKNOWN and v.ready == "Unknown" and v.grace == 60.0
    assert [c.kind for c in v.causes][:1] == [CauseKind.NEVER_POSTED]
    assert s.evaluate(T0 + 61).node("fresh").state is NodeState.UNKNOWN
    blank = fleet(("nodes", node("blank", None)))
    assert blank.evaluate(T0).node("blank").state is NodeState.UNKNOWN


# --- the snapshot boundary: published views are frozen and replaced, never changed ---------------


def test_a_published_snapshot_never_changes_after_renewals_and_the_next_tick():
    """What a frame showed stays what it showed: the lease hot path (a Ready node renewing) and
    the next evaluation replace views; the snapshot a reader holds keeps its own. (Until this
    session the hot path wrote ``lease_observed_at``, ``skew`` and ``next_change`` into the very
    views the table was painting.)"""
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 1)), ("nodes", node("b")), ("leases", lease("b", T0 - 1)))
    first = s.evaluate(T0)
    a0 = first.node("a")
    held = (a0.lease_observed_at, a0.skew, a0.next_change, a0.lease_duration)
    assert s.published() is first and first.seq >= 1
    assert s.apply("leases", "MODIFIED", lease("a", T0 + 4), T0 + 4.5)  # on time: the hot path
    assert (a0.lease_observed_at, a0.skew, a0.next_change, a0.lease_duration) == held
    second = s.evaluate(T0 + 5)
    a1 = second.node("a")
    assert a1 is not a0 and a1.lease_observed_at == T0 + 4.5 and a1.skew == pytest.approx(0.5, abs=1e-6)
    assert first.node("a") is a0 and (a0.lease_observed_at, a0.skew, a0.next_change, a0.lease_duration) == held
    assert second.node("b") is first.node("b")  # unchanged views are shared, not copied
    assert s.published() is second and second.seq == first.seq + 1 and second.at == T0 + 5


def test_views_and_the_fleet_view_are_frozen():
    s = fleet(("nodes", node("a")), ("leases", lease("a", T0 - 1)))
    view = s.evaluate(T0)
    with pytest.raises(AttributeError):
        view.nodes[0].lease_observed_at = 0.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        view.at = 0.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        view.zones[0].ready = 0  # type: ignore[misc]
    assert isinstance(view.nodes, tuple) and isinstance(view.zones, tuple)


def test_the_order_stays_sorted_and_complete_through_renewals_and_changes():
    """Views replaced in the worst-first order (the hot path's swap, a refresh in place, a move)
    leave it sorted, with exactly the current views."""
    from nodewatch.core.fleet_data import sort_key

    objs = []
    for i in range(30):
        objs += [("nodes", node(f"n{i:02}")), ("leases", lease(f"n{i:02}", T0 - 1))]
    s = fleet(*objs)
    s.evaluate(T0)
    for step in range(1, 13):
        t = T0 + 5 * step
        for i in range(0, 30, 2):  # the even nodes renew; the odd ones go Late, then Overdue
            s.apply("leases", "MODIFIED", lease(f"n{i:02}", t), t)
        if step == 3:
            s.apply("nodes", "MODIFIED", node("n04", "Unknown"), t)
        view = s.evaluate(t + 1)
        keys = [sort_key(v) for v in view.nodes]
        assert keys == sorted(keys) and len(view.nodes) == 30
        assert {v.name: v for v in view.nodes} == {n: s.node_view(n, t + 1) for n in (v.name for v in view.nodes)}
    assert view.node("n00").state is NodeState.READY and view.node("n01").state is NodeState.OVERDUE


def test_swap_writes_in_place_and_falls_back_to_the_public_calls():
    """``evaluation._swap`` (the hot path's step in the order) leaves a list that passes
    sortedcontainers' own consistency check, by a bisect, by a hint, and by a hint gone stale (other
    views added and removed in between), and uses ``remove`` + ``add`` when the list does not look
    as it expects."""
    from msgspec.structs import replace
    from sortedcontainers import SortedKeyList

    from nodewatch.core.evaluation import _swap
    from nodewatch.core.fleet_data import sort_key

    objs = []
    for i in range(3000):
        objs += [("nodes", node(f"n{i:04}")), ("leases", lease(f"n{i:04}", T0 - 1))]
    views = list(fleet(*objs).evaluate(T0).nodes)
    order = SortedKeyList(views, key=sort_key)
    assert len(order._lists) > 1  # several sublists: the bisect of the maxes matters
    hints: dict[str, int] = {}

    def renew_every(step: int, t: float) -> None:
        for i in range(0, 3000, step):
            new = replace(views[i], lease_observed_at=t + i)
            _swap(order, views[i], new, hints)
            views[i] = new

    renew_every(7, T0)  # by bisect; leaves hints
    assert len(hints) == len(range(0, 3000, 7))
    renew_every(7, T0 + 1)  # by the hints
    extra = [replace(views[0], name=f"a{i:05}") for i in range(1500)]  # sorts first: every hint shifts
    order.update(extra)
    renew_every(3, T0 + 2)
    for v in extra[::2]:
        order.remove(v)
    renew_every(5, T0 + 3)
    order._check()
    rest = [v for v in order if not v.name.startswith("a")]
    assert len(order) == 3000 + 750 and all(a is b for a, b in zip(rest, views)) and len(rest) == 3000

    class Plain:
        """Only the public calls (and the key)."""

        def __init__(self) -> None:
            self.calls: list[str] = []
            self._key = sort_key

        def remove(self, v) -> None:
            self.calls.append("remove")

        def add(self, v) -> None:
            self.calls.append("add")

    plain = Plain()
    _swap(plain, views[0], views[0], {})  # type: ignore[arg-type]
    assert plain.calls == ["remove", "add"]


def test_the_nodes_not_ready_are_kept_as_the_records_change_and_across_a_keyframe():
    """``not_ready_nodes`` (what the live source watches pods and events of, asked every second) is a
    set kept as Nodes are applied and deleted, and rebuilt by a keyframe's restore: always what a
    scan of every record's Ready condition says (unknown, False and no condition count)."""
    from nodewatch.sources.demo import DemoSource

    def scanned(state: FleetState) -> list[str]:
        return sorted(n for n, rec in state.nodes.items() if rec.ready != "True")

    src = DemoSource(nodes=60, scenario="incident", seed=5, speed=0.0)
    state = src.state
    seen = []
    kf = state.snapshot()
    for step in range(12):
        t = src.clock.now() + 15
        src.advance_to(t)
        src.clock.seek(t)
        got = state.not_ready_nodes()
        assert got == scanned(state)
        seen.append(len(got))
        if step == 2:
            kf, kf_at = state.snapshot(), list(got)
    assert max(seen) > 0 and seen[0] < max(seen)  # the incident made some nodes not Ready
    state.restore(kf)
    assert state.not_ready_nodes() == kf_at == scanned(state)
    state.restore(None)
    assert state.not_ready_nodes() == []
    st = FleetState(Settings())
    st.apply("nodes", "ADDED", node("n1", ready="False"), T0)
    st.apply("nodes", "ADDED", node("n2"), T0)
    assert st.not_ready_nodes() == ["n1"]
    st.apply("nodes", "MODIFIED", node("n1"), T0 + 1)
    st.apply("nodes", "MODIFIED", node("n2", ready="Unknown"), T0 + 1)
    assert st.not_ready_nodes() == ["n2"]
    st.apply("nodes", "DELETED", node("n2", ready="Unknown"), T0 + 2)
    assert st.not_ready_nodes() == []
