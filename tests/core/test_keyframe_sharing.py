"""A keyframe taken after another shares the copies of what did not change, and only those: a
restore from either gives the state that was fed (``core/keyframe.py``)."""

from __future__ import annotations

import dataclasses

from nodewatch.core import keyframe
from nodewatch.core.fleet import FleetState
from nodewatch.core.views import LeaseTrack
from support.factories import T0, event, lease, node, pod


def fed(n: int = 6) -> FleetState:
    s = FleetState()
    for i in range(n):
        s.apply("nodes", "ADDED", node(f"n{i}"), T0, listing=True)
        s.apply("leases", "ADDED", lease(f"n{i}", T0 - 5), T0, listing=True)
        s.apply("pods", "ADDED", pod(f"p{i}", f"n{i}"), T0, listing=True)
        s.apply("events", "ADDED", event(f"e{i}", f"n{i}", "NodeReady", "ready", T0 - 1), T0)
    for r in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
        s.apply(r, "SYNCED", None, T0)
    return s


def views(s: FleetState, now: float) -> list:
    return [(v.name, v.state, v.lease_observed_at, v.skew) for v in s.evaluate(now).nodes]


def test_a_track_copy_holds_every_field():
    """``_copy_track`` names LeaseTrack's fields one by one (ten times faster than ``copy.copy``):
    a field added to the class and not to the copy would be lost at every keyframe."""
    values = {f.name: f"value-{i}" for i, f in enumerate(dataclasses.fields(LeaseTrack))}
    track = LeaseTrack(**values)
    copied = keyframe._copy_track(track)
    assert copied is not track
    assert {f.name: getattr(copied, f.name) for f in dataclasses.fields(LeaseTrack)} == values


def test_what_did_not_change_is_shared_and_what_changed_is_copied():
    s = fed()
    first = s.snapshot()
    s.apply("leases", "MODIFIED", lease("n1", T0 + 3), T0 + 3)  # a renewal changes its track in place
    s.apply("pods", "ADDED", pod("q2", "n2"), T0 + 3)  # n2's set of pods grows
    second = s.snapshot(first)
    assert second.leases["n1"] is not first.leases["n1"]
    assert second.leases["n1"] == s.store.leases["n1"] and second.leases["n1"] is not s.store.leases["n1"]
    assert all(second.leases[k] is first.leases[k] for k in first.leases if k != "n1")
    assert second.pods_by_node["n2"] is not first.pods_by_node["n2"]
    assert second.pods_by_node["n2"] == frozenset(s.store.pods_by_node["n2"])
    assert all(second.pods_by_node[k] is first.pods_by_node[k] for k in first.pods_by_node if k != "n2")
    assert all(second.events_by_node[k] is first.events_by_node[k] for k in first.events_by_node)
    # the sharing is counted: a keyframe that shares everything adds its dictionaries only
    third = s.snapshot(second)
    dicts = sum(map(__import__("sys").getsizeof, (third.nodes, third.leases, third.pods, third.pods_by_node,
                                                 third.events, third.events_by_node, third.certs, third.health,
                                                 third.timelines)))
    assert keyframe.added_bytes(third, second) == dicts
    assert keyframe.added_bytes(second, first) > dicts
    assert keyframe.added_bytes(first, None) > keyframe.added_bytes(second, first)


def test_a_shared_copy_is_never_the_states_own_and_restores_exactly():
    """Renewals after a keyframe change the state's tracks in place; the keyframes' copies, shared
    or not, keep the instant they were taken at, and a restore from each gives that instant again."""
    s = fed()
    first = s.snapshot()
    at_first = views(s, T0 + 30)
    for i in range(6):
        s.apply("leases", "MODIFIED", lease(f"n{i}", T0 + 10 + i), T0 + 10 + i)
    second = s.snapshot(first)
    at_second = views(s, T0 + 30)
    s.apply("leases", "MODIFIED", lease("n0", T0 + 25), T0 + 25)
    s.apply("nodes", "MODIFIED", node("n3", "Unknown"), T0 + 25)
    third = s.snapshot(second)
    at_third = views(s, T0 + 30)
    assert len({id(third.leases[k]) for k in third.leases} & {id(second.leases[k]) for k in second.leases}) == 5
    for kf, want in ((first, at_first), (third, at_third), (second, at_second), (first, at_first)):
        s.restore(kf)
        assert views(s, T0 + 30) == want
        s.apply("leases", "MODIFIED", lease("n5", T0 + 29), T0 + 29)  # the restored state's own, in place
    assert [first.leases[k].renew_time for k in sorted(first.leases)] == [T0 - 5] * 6
