"""Streaming lists (``sendInitialEvents``, Kubernetes 1.27+) through real HTTPS against the simulated
API server: used where offered, refused as 1.20 refuses them (then paged lists), a broken one
falls back once; and the first frame from the Leases alone while the Nodes are still listing."""

from __future__ import annotations

import time

from factories import T0, lease, node, taint
from simserver import ApiClient, TinyFleet, running_server, wait_until

from nodewatch.core.settings import Settings
from nodewatch.core.causes import CauseKind
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import NodeState


def _requests(srv, resource: str) -> list:
    return [r for r in srv.request_log if f"/{resource}" in r.target]


def _paged(reqs) -> list:
    return [r for r in reqs if "watch=true" not in r.target]


def _streaming(reqs) -> list:
    return [r for r in reqs if "sendInitialEvents=true" in r.target]


def test_a_server_that_offers_streaming_lists_lists_through_one_watch(tmp_path, start_live):
    fleet = TinyFleet(nodes=7, start=time.time())  # reports v1.33.2
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert sorted(src.state.nodes) == fleet.names and sorted(src.state.leases) == fleet.names
        renewals = src.state.leases["node-003"].renewals
        fleet.step_to(fleet.now + 10)  # every kubelet renews: on the same stream
        wait_until(lambda: src.state.leases["node-003"].renewals > renewals)
        for resource in ("nodes", "leases"):
            assert src.reflector(resource).watch_list is True
        assert src.reflector("nodes").lists_in_worker == 1 and src.reflector("leases").lists_in_worker == 0
        wait_until(lambda: src.reflector("nodes").watching)  # the watch after the list
        src.stop()  # a request is logged when it ends
        # Leases: one request, the list and then the watch on the same stream. Nodes: the list
        # read by the list worker's child process, which stops at the end of the initial events;
        # then a plain watch from the bookmark's resourceVersion, in the dashboard's process.
        for resource, count in (("leases", 1), ("nodes", 2)):
            reqs = wait_until(lambda: len(_requests(srv, resource)) == count and _requests(srv, resource))
            assert _paged(reqs) == []  # no paged list at all
            assert "sendInitialEvents=true" in reqs[0].target and "resourceVersionMatch=NotOlderThan" in reqs[0].target
        watch = _requests(srv, "nodes")[1]
        assert "sendInitialEvents" not in watch.target and "resourceVersion=" in watch.target
        assert len(_requests(srv, "nodes")) == 2


def test_a_1_20_server_refuses_them_and_paged_lists_are_used(tmp_path, start_live):
    fleet = TinyFleet(nodes=5, start=time.time(), version="v1.20.15")
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert sorted(src.state.nodes) == fleet.names and sorted(src.state.leases) == fleet.names
        for resource in ("nodes", "leases"):
            # a request is logged when it ends: the list can be in the state before it is in the log
            reqs = wait_until(lambda: _paged(_requests(srv, resource)) and _requests(srv, resource))
            refused = _streaming(reqs)
            assert [r.status for r in refused] == [422]  # asked once, refused as 1.20 refuses
            assert len(_paged(reqs)) == 1  # then listed the old way
            assert src.reflector(resource).watch_list is False
        assert src.state.problem_count() == 0  # a refused offer is not a problem to report
        src.stop()
        wait_until(lambda: len(_requests(srv, "leases")) == 3)  # the plain watch (logged when it ended)
        assert "resourceVersion=" in _requests(srv, "leases")[-1].target


def test_the_refusals_are_worded_as_the_real_server_words_them(tmp_path):
    fleet = TinyFleet(nodes=1, start=time.time(), version="v1.20.15")
    with running_server(tmp_path, fleet=fleet) as srv:
        status, body = ApiClient(srv).get_json("/api/v1/nodes?watch=true&sendInitialEvents=true"
                                               "&resourceVersionMatch=NotOlderThan")
        assert (status, body["reason"]) == (422, "Invalid")
        assert "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch" in body["message"]
    fleet = TinyFleet(nodes=1, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:  # 1.27+: half of the options is refused too
        status, body = ApiClient(srv).get_json("/api/v1/nodes?watch=true&sendInitialEvents=true")
        assert status == 422
        assert "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" in body["message"]


def test_a_streaming_list_that_breaks_halfway_falls_back_to_a_paged_list_once(tmp_path, start_live):
    fleet = TinyFleet(nodes=6, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.close_streams_after(3)  # every stream ends after 3 events: a streaming list never completes
        src = start_live(srv, synced=20)
        assert sorted(src.state.nodes) == fleet.names  # listed all the same
        reqs = wait_until(lambda: _paged(_requests(srv, "nodes")) and _requests(srv, "nodes"))  # logged at its end
        assert len(_streaming(reqs)) >= 1 and len(_paged(reqs)) == 1
        assert all(r.status == 200 for r in reqs)
        assert src.reflector("nodes").watch_list is None  # not refused: tried again at the next relist


def test_lease_only_rows_until_the_node_list_is_in():
    s = FleetState(Settings())
    s.update_health("nodes", connected=True, synced=False)  # a node stream is listing
    s.update_health("leases", connected=True, synced=False)
    for name, renewed in (("a", T0 - 2), ("b", T0 - 100), ("ghost", T0 - 1)):
        s.apply("leases", "ADDED", lease(name, renewed), T0, True)
    s.apply("leases", "SYNCED", None, T0)
    s.update_health("leases", connected=True, synced=True, last_activity=T0)
    view = s.evaluate(T0 + 1)
    rows = {v.name: v for v in view.nodes}
    assert set(rows) == {"a", "b", "ghost"}  # every node listed from its heartbeat alone
    assert rows["a"].state is NodeState.READY and rows["b"].state is NodeState.OVERDUE
    assert all(v.causes[0].kind is CauseKind.NODE_AWAITED for v in rows.values())
    assert view.zones == ()  # a placeholder counts in no zone
    s.apply("nodes", "ADDED", node("a"), T0 + 1, True)
    s.apply("nodes", "ADDED", node("b", "Unknown"), T0 + 1, True)
    s.apply("nodes", "SYNCED", None, T0 + 1)
    rows = {v.name: v for v in s.evaluate(T0 + 2).nodes}
    assert set(rows) == {"a", "b"}  # the lease without a Node is no row once the nodes are in
    assert rows["b"].state is NodeState.UNKNOWN
    assert all(c.kind is not CauseKind.NODE_AWAITED for v in rows.values() for c in v.causes)


def test_no_placeholders_without_a_node_stream():
    s = FleetState(Settings())
    s.apply("leases", "ADDED", lease("a", T0), T0, True)
    assert s.evaluate(T0 + 1).nodes == ()


def _listing_state() -> FleetState:
    s = FleetState(Settings())
    s.update_health("nodes", connected=True, synced=False)
    s.update_health("leases", connected=True, synced=False)
    for i in range(60):
        s.apply("leases", "ADDED", lease(f"n{i:02d}", T0 - (100 if i % 7 == 0 else i % 10)), T0, True)
    s.apply("leases", "ADDED", lease("ghost", T0 - 1), T0, True)  # a Lease whose Node never comes
    s.apply("leases", "SYNCED", None, T0)
    s.update_health("leases", connected=True, synced=True, last_activity=T0)
    return s


def _node_batches() -> list[list[dict]]:
    objs = [node(f"n{i:02d}", "Unknown" if i % 7 == 0 else "True",
                 taints=[taint("node.kubernetes.io/unreachable", added=T0 - 50)] if i % 14 == 0 else (),
                 zone=f"z{i % 3}", unschedulable=i == 5, conditions={"DiskPressure": "True"} if i == 9 else None)
            for i in range(60)]
    return [objs[a:a + 25] for a in range(0, 60, 25)]


def test_a_node_list_judged_batch_by_batch_ends_as_one_judged_at_once():
    """``refresh`` after each batch of a Node list (what the live source does on the reflector's
    thread) leaves the same views as a single evaluation after the list, and leaves the frame
    after the list nothing to judge but the placeholders that go."""
    at_once, by_batch = _listing_state(), _listing_state()
    assert not by_batch.refresh(T0 + 1)  # nothing to bring up to date before a first evaluation
    for s in (at_once, by_batch):
        s.evaluate(T0 + 1)  # the first frame: placeholders
    for k, objs in enumerate(_node_batches()):
        for s in (at_once, by_batch):
            for obj in objs:
                s.apply("nodes", "ADDED", obj, T0 + 2 + k, True)
        assert by_batch.refresh(T0 + 2 + k)
        assert not by_batch.evaluator.pending()  # judged on the spot
    for s in (at_once, by_batch):
        s.apply("nodes", "SYNCED", None, T0 + 5)
    assert by_batch.evaluator.pending() == {"ghost"}  # only the placeholder that goes is left for the frame
    one, other = at_once.evaluate(T0 + 6), by_batch.evaluate(T0 + 6)
    assert [v.name for v in one.nodes] == [v.name for v in other.nodes]  # the same worst-first order
    assert "ghost" not in {v.name for v in other.nodes}
    assert one.nodes == other.nodes  # and the same views, field by field
    assert (one.counts, one.zones) == (other.counts, other.zones)
