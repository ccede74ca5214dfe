"""The evaluation's fast path for plain Ready nodes and placeholders builds the same view as the
full judgement (``Evaluation._plain_view`` against ``Evaluation._judged_view``), field by field, for
a fleet that visits every branch either path takes."""

from __future__ import annotations

import pytest

from nodewatch.core.fleet import FleetState
from nodewatch.core.objects import AWAITED, LABEL_EXCLUDE_DISRUPTION
from nodewatch.core.rules import TAINT_UNREACHABLE, NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.views import NodeView
from support.factories import T0, lease, node, taint

FIELDS = list(NodeView.__struct_fields__)
NOW = T0 + 1.0


def _fleet(*, nodes_listing: bool) -> FleetState:
    """Nodes of every kind the two paths tell apart; with ``nodes_listing`` half of them have only
    their Lease in (placeholders), as on the first frame of a live start."""
    st = FleetState(Settings())
    objs: list[tuple[str, dict, float | None]] = []  # (name, node, renew)
    ages = (1.0, 9.0, 12.0, 21.0, 39.0, 41.0, 300.0)  # Ready, Late (> 2 renew intervals), Overdue (> grace)
    for i, age in enumerate(ages):
        objs.append((f"plain-{i}", node(f"plain-{i}"), NOW - age))
        objs.append((f"excluded-{i}", node(f"excluded-{i}", labels={LABEL_EXCLUDE_DISRUPTION: ""}), NOW - age))
        objs.append((f"zoneless-{i}", node(f"zoneless-{i}", zone="", region=""), NOW - age))
        objs.append((f"cert-{i}", node(f"cert-{i}"), NOW - age))
        objs.append((f"cert-expired-{i}", node(f"cert-expired-{i}"), NOW - age))
        objs.append((f"cordoned-{i}", node(f"cordoned-{i}", unschedulable=True), NOW - age))
        objs.append((f"pressure-{i}", node(f"pressure-{i}", conditions={"MemoryPressure": "True"}), NOW - age))
        objs.append((f"calm-{i}", node(f"calm-{i}", conditions={"MemoryPressure": "False", "DiskPressure": "False"}),
                     NOW - age))
        objs.append((f"network-{i}", node(f"network-{i}", conditions={"NetworkUnavailable": "True"}), NOW - age))
        objs.append((f"notready-{i}", node(f"notready-{i}", "False", reason="KubeletNotReady",
                                           message="container runtime is down"), NOW - age))
        objs.append((f"unknown-{i}", node(f"unknown-{i}", "Unknown"), NOW - age))
        objs.append((f"never-posted-{i}", node(f"never-posted-{i}", None), NOW - age))
        objs.append((f"tainted-{i}", node(f"tainted-{i}", taints=[taint(TAINT_UNREACHABLE, "NoExecute", NOW - 30)]),
                     NOW - age))
        objs.append((f"soft-taint-{i}", node(f"soft-taint-{i}", taints=[taint("dedicated", "NoSchedule")]), NOW - age))
    objs.append(("no-lease", node("no-lease"), None))
    objs.append(("lease-no-renew", node("lease-no-renew"), None))
    for resource in ("nodes", "leases"):
        st.update_health(resource, connected=True, synced=False, last_error="")
    assert st.apply("leases", "ADDED", lease("lease-no-renew", None), NOW - 1, listing=True)
    st.apply("leases", "SYNCED", None, NOW - 1)
    st.update_health("leases", synced=True)
    # renewals seen on the watch, timed by their receipt (a listed age the server did not date
    # waits for one: core/evidence.py, tests/test_evidence.py)
    for name, _, renew in objs:
        if renew is not None:
            assert st.apply("leases", "ADDED", lease(name, renew), renew, listing=False)
    st.update_health("leases", last_activity=NOW - 1)  # the stream heard from since: not silent
    for k, (_name, obj, _) in enumerate(objs):
        if not nodes_listing or k % 2:
            assert st.apply("nodes", "ADDED", obj, NOW - 1, listing=True)
    if not nodes_listing:
        st.apply("nodes", "SYNCED", None, NOW - 1)
        st.update_health("nodes", synced=True)
    for i in range(len(ages)):
        st.remember_cert(f"cert-{i}", NOW + 3.0, "test")  # expires before the lease is late: next_change
        st.remember_cert(f"cert-expired-{i}", NOW - 60, "test")
    return st


@pytest.mark.parametrize("nodes_listing", [False, True])
@pytest.mark.parametrize("blind", [False, True])
@pytest.mark.parametrize("dt", [0.0, 2.5, 7.0, 45.0])
def test_plain_path_gives_the_judged_view(nodes_listing: bool, blind: bool, dt: float) -> None:
    st = _fleet(nodes_listing=nodes_listing)
    now, grace = NOW + dt, st.settings.grace
    names = sorted(set(st.leases) | set(st.nodes))
    for name in names:
        v = st.evaluator._view(name, now, blind, grace)
        rec = st.nodes.get(name) or st.evaluator._record(name)
        assert v is not None and rec is not None, name
        judged = st.evaluator._judged_view(name, rec, st.leases.get(name), now, blind, grace)
        for f in FIELDS:
            assert getattr(v, f) == getattr(judged, f), (name, f, getattr(v, f), getattr(judged, f))
    if nodes_listing:
        assert any(st.evaluator._record(n) is AWAITED for n in names)


def test_plain_path_covers_ready_placeholders_and_plain_nodes() -> None:
    """The fleet above exercises the fast path on both kinds of node it takes, and leaves it for a
    Late placeholder (the rules, not the path, decide the state)."""
    st = _fleet(nodes_listing=True)
    grace = st.settings.grace
    kinds = set()
    for name in st.leases:
        rec = st.nodes.get(name) or st.evaluator._record(name)
        track = st.leases[name]
        if track.observed_at is None or rec.taints or rec.unschedulable:
            continue
        if not rec.awaited and rec.conditions.true != {"Ready"}:
            continue
        v = st.evaluator._plain_view(name, rec, track, track.observed_at, None if rec.awaited else "True", NOW, grace)
        judged = st.evaluator._judged_view(name, rec, track, NOW, False, grace)
        if v is None:
            assert judged.state is not NodeState.READY
            kinds.add(("late or overdue", rec.awaited))
        else:
            assert v.state is NodeState.READY
            kinds.add(("ready", rec.awaited))
    assert kinds == {("ready", True), ("ready", False), ("late or overdue", True), ("late or overdue", False)}


def test_views_are_built_positionally_in_the_field_order_they_declare():
    """``_plain_view``, ``_judged_view`` and the hub's ``view_from_wire`` pass a NodeView's fields
    by position (faster than keywords): a field moved in ``views.py`` must move in those calls
    too. (Until this session an import-time guard in evaluation.py checked it.)"""
    assert NodeView.__struct_fields__ == (
        "name", "zone", "state", "ready", "lease_observed_at", "lease_duration", "grace", "skew", "eviction_at",
        "taints", "cordoned", "pressure", "network_unavailable", "cert_not_after", "kubelet_version", "causes",
        "state_since", "next_change", "sort_deadline", "excluded", "cluster")
    st = _fleet(nodes_listing=False)
    v = st.evaluate(NOW).node("plain-0")
    assert (v.name, v.state, v.ready, v.lease_observed_at, v.grace, v.cluster) == (
        "plain-0", NodeState.READY, "True", NOW - 1.0, st.settings.grace, "")


def test_the_cordoned_count_is_kept_through_every_path_a_view_takes():
    """``FleetView.cordoned`` is kept incrementally (``_place``/``_unplace``, the in-place swap of a
    renewed node, the full rebuild): after cordoning and uncordoning a Ready node (same place in the
    order), cordoning a Late one (it moves), deleting a cordoned node, it equals a recount."""
    st = _fleet(nodes_listing=False)

    def check(now: float) -> int:
        view = st.evaluate(now)
        assert view.cordoned == sum(v.cordoned for v in view.nodes)
        return view.cordoned

    first = check(NOW)
    assert first == 7  # one cordoned node per age
    st.apply("nodes", "MODIFIED", node("plain-0", unschedulable=True), NOW + 1)  # Ready: swapped in place
    assert check(NOW + 1) == first + 1
    st.apply("nodes", "MODIFIED", node("plain-0"), NOW + 2)
    assert check(NOW + 2) == first
    st.apply("nodes", "MODIFIED", node("plain-5", unschedulable=True), NOW + 3)  # Overdue: moves
    assert check(NOW + 3) == first + 1
    st.apply("nodes", "DELETED", node("cordoned-0", unschedulable=True), NOW + 4)
    st.apply("leases", "DELETED", lease("cordoned-0", NOW), NOW + 4)
    assert check(NOW + 4) == first
    assert check(NOW + 60) == first  # time alone moves views (Late, Overdue): the count follows


@pytest.mark.parametrize("dt", [0.0, 2.5])
def test_a_placeholder_awaiting_its_evidence_is_judged_once_for_all_alike(dt: float) -> None:
    """At a live start every node is a placeholder whose listed lease age is not evidence yet
    (``_awaiting_view``); those alike (lease duration, skew) share one judgement at a ``now``, each
    view the full judgement's but for its name. A placeholder with a certificate, and a node whose
    Node is in, are judged on their own."""
    st = FleetState(Settings())
    for resource in ("nodes", "leases"):
        st.update_health(resource, connected=True, synced=False, last_error="")
    names = []
    for i in range(24):
        name = f"p-{i:02d}"
        names.append(name)
        assert st.apply("leases", "ADDED", lease(name, NOW - 1 - i % 12, duration=(40, 15, 60)[i % 3]),
                        NOW - 1, listing=True)
    st.apply("leases", "SYNCED", None, NOW - 1)
    st.update_health("leases", synced=True, last_activity=NOW - 1)
    assert st.apply("nodes", "ADDED", node("p-00"), NOW - 1, listing=True)  # its Node is in
    st.remember_cert("p-01", NOW + 3.0, "test")
    now, grace = NOW + dt, st.settings.grace
    ev = st.evaluator
    for name in names:
        v = ev._view(name, now, False, grace)
        rec = st.nodes.get(name) or ev._record(name)
        assert v is not None and rec is not None
        assert name in ev._awaiting_now, name  # (the path under test)
        judged = ev._judged_view(name, rec, st.leases.get(name), now, True, grace)
        for f in FIELDS:
            assert getattr(v, f) == getattr(judged, f), (name, f, getattr(v, f), getattr(judged, f))
    assert 0 < len(ev._placeholder_views) <= 3  # one judgement per lease duration
