"""A node controller that restarts counts every node's grace from its first pass over it.

The controller keeps each node's probe time in memory; a new process (a restart, a new leader)
starts with none, takes "now" for every node at its first pass ("Missing timestamp for Node.
Assuming now as a timestamp", ``tryUpdateNodeHealth``) and writes a ``RegisteredNode`` event for
each. Measured on the v1.37.2 testbed: a kubelet stopped at +0 s, the controller manager restarted
at +15 s, Ready=Unknown at +36 s (grace 20 s) where the last renewal said +20..25 s
(docs/real-control-plane.md; ``tests/testbed/test_controller_restart.py``).
"""

from __future__ import annotations

import pytest

from nodewatch.core.causes import CauseKind
from nodewatch.core.fleet import FleetState
from nodewatch.core.keyframe import take
from nodewatch.core.rules import TAINT_UNREACHABLE, NodeState
from support.factories import T0, event, lease, node, pod, taint

GRACE = 40.0


def _stopped_at(t: float) -> FleetState:
    """Node ``a`` renewed last at ``t`` (seen on the watch), its status posted long before."""
    s = FleetState()
    s.apply("nodes", "ADDED", node("a", heartbeat=T0 - 300), T0 - 300, listing=True)
    s.apply("leases", "ADDED", lease("a", T0 - 300), T0 - 300, listing=True)
    for r in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
        s.apply(r, "SYNCED", None, T0 - 300)
    s.apply("leases", "MODIFIED", lease("a", t), received_at=t)
    return s


def _registered(s: FleetState, t: float, received: float | None = None, listing: bool = False,
                component: str = "node-controller", name: str = "reg-a") -> None:
    ev = event(name, "a", "RegisteredNode", "Node a event: Registered Node a in Controller", t, component=component)
    s.apply("events", "ADDED", ev, t if received is None else received, listing=listing)


def test_the_grace_counts_from_the_controllers_registration_after_the_last_renewal():
    s = _stopped_at(T0 - 30)
    assert s.evaluate(T0 + 11).node("a").state is NodeState.OVERDUE  # 41 s since the renewal
    _registered(s, T0 - 15)  # the controller manager restarted 15 s after the kubelet's last renewal
    v = s.evaluate(T0 + 11).node("a")
    assert v.state is NodeState.LATE
    assert v.lease_age(T0 + 11) == pytest.approx(41.0, abs=1e-6)  # the renewal's age is what it is
    assert v.grace_remaining(T0 + 11) == pytest.approx(GRACE - 26, abs=1e-6)  # the controller's count: from its registration
    assert v.next_change == pytest.approx(T0 - 15 + GRACE, abs=1e-6)
    assert "restarted" in v.causes[0].text and v.causes[0].kind is CauseKind.LEASE_LATE
    over = s.evaluate(T0 + 26).node("a")
    assert over.state is NodeState.OVERDUE and "counted from the node controller's restart" in over.causes[0].text
    timeline = dict((w, t) for t, w in s.node_details("a", T0 + 11).timeline)
    assert timeline["grace ends: the controller marks Ready=Unknown at its next pass"] == pytest.approx(T0 - 15 + GRACE, abs=1e-6)


def test_a_registration_before_the_last_renewal_changes_nothing():
    s = _stopped_at(T0 - 30)
    _registered(s, T0 - 200)
    v = s.evaluate(T0 + 11).node("a")
    assert v.state is NodeState.OVERDUE and v.grace == GRACE


@pytest.mark.parametrize("listing", [True, False])
def test_a_registration_is_dated_by_the_event_and_other_sources_count_for_nothing(listing):
    """Listed later, or delivered late on the watch (the controller writes its events asynchronously,
    rate-limited): the event's own time says when the controller registered the node."""
    s = _stopped_at(T0 - 30)
    _registered(s, T0 - 45, component="kubelet", name="other")  # not the node controller's
    _registered(s, T0 - 20, received=T0 + 5, listing=listing)
    v = s.evaluate(T0 + 5).node("a")
    assert v.grace_remaining(T0 + 5) == pytest.approx(GRACE - 25, abs=1e-6)
    _registered(s, T0 - 35, received=T0 + 6, listing=listing, name="reg-old")  # an old one again: before the renewal
    assert s.evaluate(T0 + 6).node("a").grace_remaining(T0 + 6) == pytest.approx(GRACE - 26, abs=1e-6)


def test_a_renewal_after_the_restart_is_judged_as_usual_again():
    s = _stopped_at(T0 - 30)
    _registered(s, T0 - 25)
    assert s.evaluate(T0).node("a").grace == pytest.approx(GRACE + 5, abs=1e-6)
    s.apply("leases", "MODIFIED", lease("a", T0 + 1), received_at=T0 + 1)
    v = s.evaluate(T0 + 2).node("a")
    assert v.state is NodeState.READY and v.grace == GRACE and v.grace_remaining(T0 + 2) == pytest.approx(GRACE - 1, abs=1e-6)
    s.apply("leases", "MODIFIED", lease("a", T0 + 11), received_at=T0 + 11)  # the hot path
    assert s.evaluate(T0 + 12).node("a").grace == GRACE


def test_a_keyframe_keeps_the_registrations():
    s = _stopped_at(T0 - 30)
    _registered(s, T0 - 15)
    kf = take(s.store)
    s.restore(None)
    assert s.store.registered == {} and s.evaluate(T0 + 11).node("a") is None
    s.restore(kf)
    assert s.store.registered == {"a": T0 - 15}
    assert s.evaluate(T0 + 11).node("a").state is NodeState.LATE


def test_a_healthy_node_registered_between_two_renewals_gets_its_usual_grace_at_the_next():
    s = _stopped_at(T0 - 3)
    _registered(s, T0)
    v = s.evaluate(T0 + 1).node("a")
    assert v.state is NodeState.READY and v.grace == pytest.approx(GRACE + 3, abs=1e-6)  # the controller's count, from T0
    s.apply("leases", "MODIFIED", lease("a", T0 + 7), received_at=T0 + 7)  # a Ready node's renewal: the hot path
    assert s.evaluate(T0 + 8).node("a").grace == GRACE


def fleet(*objs) -> FleetState:
    s = FleetState()
    for resource, obj in objs:
        s.apply(resource, "ADDED", obj, T0 - 300, listing=True)
    for r in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
        s.apply(r, "SYNCED", None, T0 - 300)
    return s


def _tainted(added: float) -> FleetState:
    """Node ``a`` Unknown with the unreachable taints since ``added``, a pod with the 300 s defaults and
    one with its own 30 s; a Ready node in another zone (no master disruption)."""
    n = node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoSchedule", added),
                                     taint(TAINT_UNREACHABLE, "NoExecute", added)])
    own = [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]
    return fleet(("nodes", n), ("leases", lease("a", added - 60)), ("nodes", node("up", zone="z2")),
                 ("leases", lease("up", T0)), ("pods", pod("web", "a")), ("pods", pod("own", "a", tolerations=own)))


def _pod_evictions(s: FleetState, now: float) -> dict[str, float | None]:
    return {p.name: p.eviction_at for p in s.pods_on("a", now)}


def test_a_restarted_controller_times_the_evictions_of_a_tainted_node_anew():
    """The taint-eviction controller starts each pod's timer when it sees the taint: after a restart
    at T0, the 300 s default counts from T0, not from the taint's timeAdded."""
    s = _tainted(T0 - 100)
    assert s.evaluate(T0).node("a").eviction_at == pytest.approx(T0 + 200, abs=1e-6)
    assert _pod_evictions(s, T0) == {"web": pytest.approx(T0 + 200, abs=1e-6), "own": pytest.approx(T0 - 70, abs=1e-6)}
    _registered(s, T0)
    v = s.evaluate(T0 + 1).node("a")
    assert v.state is NodeState.EVICTING and v.eviction_at == pytest.approx(T0 + 300, abs=1e-6)
    # the pod with 30 s was due before the restart: the controller that ran then deleted it
    assert _pod_evictions(s, T0 + 1) == {"web": pytest.approx(T0 + 300, abs=1e-6), "own": pytest.approx(T0 - 70, abs=1e-6)}


def test_a_taint_added_after_the_restart_is_timed_by_its_own_time():
    s = _tainted(T0 + 10)
    _registered(s, T0)
    assert s.evaluate(T0 + 11).node("a").eviction_at == pytest.approx(T0 + 310, abs=1e-6)
    assert _pod_evictions(s, T0 + 11)["own"] == pytest.approx(T0 + 40, abs=1e-6)
