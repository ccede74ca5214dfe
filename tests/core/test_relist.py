"""A list replaces (``Store.relisted``): at a list's SYNCED, the Nodes and Leases held that the list
did not give are deleted, as an informer's Replace deletes them. A live reflector sends those
deletions itself; a recording read across a restart of its recorder has only the new list."""

from __future__ import annotations

from nodewatch.core.fleet import FleetState
from nodewatch.core.keyframe import take
from support.factories import T0, lease, node


def _listed(state: FleetState, names: list[str], t: float) -> None:
    for n in names:
        state.apply("nodes", "ADDED", node(n), t, listing=True)
        state.apply("leases", "ADDED", lease(n, t - 1), t, listing=True)


def _fleet() -> FleetState:
    state = FleetState()
    _listed(state, ["a", "b", "c"], T0)
    state.apply("nodes", "SYNCED", None, T0)
    state.apply("leases", "SYNCED", None, T0)
    return state


def test_a_relist_deletes_what_it_did_not_give():
    state = _fleet()
    _listed(state, ["a", "c"], T0 + 100)
    state.apply("nodes", "SYNCED", None, T0 + 100)
    assert sorted(state.node_records()) == ["a", "c"]
    assert "b" in state.store.leases  # the Lease list is not over yet
    state.apply("leases", "SYNCED", None, T0 + 100)
    assert sorted(state.store.leases) == ["a", "c"]
    view = state.evaluate(T0 + 110)
    assert sorted(v.name for v in view.nodes) == ["a", "c"]


def test_objects_that_came_after_the_last_list_are_kept_by_the_next_only_if_it_gives_them():
    state = _fleet()
    state.apply("nodes", "ADDED", node("d"), T0 + 50)  # on the watch
    _listed(state, ["a", "b", "c", "d"], T0 + 100)
    state.apply("nodes", "SYNCED", None, T0 + 100)
    assert sorted(state.node_records()) == ["a", "b", "c", "d"]
    _listed(state, ["a"], T0 + 200)
    state.apply("nodes", "SYNCED", None, T0 + 200)
    assert sorted(state.node_records()) == ["a"]


def test_a_sync_without_a_list_deletes_nothing():
    """A SYNCED with no list item since the last (a recording that writes list items without the
    list flag, or an empty list): nothing is taken for deleted."""
    state = _fleet()
    state.apply("nodes", "SYNCED", None, T0 + 100)
    state.apply("leases", "SYNCED", None, T0 + 100)
    assert sorted(state.node_records()) == ["a", "b", "c"] and sorted(state.store.leases) == ["a", "b", "c"]


def test_a_keyframe_taken_in_the_middle_of_a_list_keeps_what_it_gave():
    state = _fleet()
    state.apply("nodes", "ADDED", node("a"), T0 + 100, listing=True)
    kf = take(state.store)
    state.apply("nodes", "ADDED", node("c"), T0 + 100, listing=True)
    state.apply("nodes", "SYNCED", None, T0 + 100)
    assert sorted(state.node_records()) == ["a", "c"]
    state.restore(kf)
    state.apply("nodes", "ADDED", node("c"), T0 + 100, listing=True)
    state.apply("nodes", "SYNCED", None, T0 + 100)
    assert sorted(state.node_records()) == ["a", "c"]


def test_a_list_item_left_out_still_counts_as_given():
    """``FleetState.listed``: a one-shot read leaves out a listed Lease a later renewal supersedes."""
    state = _fleet()
    state.apply("leases", "ADDED", lease("a", T0 + 99), T0 + 100, listing=True)
    state.listed("leases", "b")
    state.apply("leases", "SYNCED", None, T0 + 100)
    assert sorted(state.store.leases) == ["a", "b"]
