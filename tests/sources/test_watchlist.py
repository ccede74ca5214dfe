"""Streaming lists (``sendInitialEvents``) through real HTTPS against the simulated API server: used
where offered; refused as 1.20, a gate-off server (1.33's default) and a server on old etcd refuse
them, or ignored as an old or aggregated server ignores them: then paged lists at once, asked once
per connection, never a "disconnected"; a broken one falls back once; a relist names the last
resourceVersion; and the first frame from the Leases alone while the Nodes are still listing."""

from __future__ import annotations

import time

import pytest

from nodewatch.core.causes import CauseKind
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.sources.live import MAIN_STREAMS
from support.factories import T0, lease, node, taint
from support.simserver import ApiClient, TinyFleet, running_server, wait_until

MAIN = tuple(spec.resource for spec in MAIN_STREAMS)
"""The live source's main streams (nodes, leases, CSRs): a fault aimed at them, not at the registrations'."""


def _requests(srv, resource: str) -> list:
    return [r for r in srv.request_log if f"/{resource}" in r.target]


def _paged(reqs) -> list:
    return [r for r in reqs if "watch=true" not in r.target]


def _streaming(reqs) -> list:
    return [r for r in reqs if "sendInitialEvents=true" in r.target]


def test_a_server_that_offers_streaming_lists_lists_through_one_watch(tmp_path, start_live, monkeypatch):
    from nodewatch.sources import reflector

    monkeypatch.setattr(reflector, "WORKER_MIN", 0)  # the Node list in the child, as for a large fleet
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
        for resource in ("leases", "nodes"):
            # a request is logged when it ends: the list can be in the state before it is in the log
            reqs = wait_until(lambda: _paged(_requests(srv, resource)) and _requests(srv, resource))
            refused = _streaming(reqs)
            # asked once on the connection, refused as 1.20 refuses: the Leases list first, and the
            # Nodes after them (``live.NODES_AFTER_LEASES``) know the answer already
            assert [r.status for r in refused] == ([422] if resource == "leases" else [])
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


STREAMING = "/api/v1/nodes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


@pytest.mark.parametrize("version,offered", [
    ("v1.20.15", None), ("v1.31.4", False), ("v1.32.6", True), ("v1.33.2", False), ("v1.34.1", True), ("v1.37.0", True),
])
def test_the_simulator_follows_the_real_default_of_the_watchlist_gate(tmp_path, version, offered):
    """``default-gates``: alpha (off) through 1.31, beta on in 1.32, off in 1.33, on from 1.34;
    1.20 refuses ``resourceVersionMatch`` on a watch before it looks at the gate."""
    with running_server(tmp_path, fleet=TinyFleet(nodes=1, start=time.time(), version=version),
                        watch_list="default-gates") as srv:
        if offered:
            with ApiClient(srv).stream(STREAMING + "&timeoutSeconds=1") as st:
                events = st.events(deadline=5)
            assert st.status == 200 and events[-1]["type"] == "BOOKMARK"
            assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
            return
        status, body = ApiClient(srv).get_json(STREAMING)
        assert (status, body["reason"]) == (422, "Invalid")
        field = "resourceVersionMatch" if offered is None else "sendInitialEvents"
        assert body["details"]["causes"][0]["field"] == field


def test_the_other_answers_are_given_as_real_servers_give_them(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time()), watch_list="gate-off") as srv:
        status, body = ApiClient(srv).get_json(STREAMING)
        assert status == 422 and body["message"] == (
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is '
            "forbidden for watch unless the WatchList feature gate is enabled")
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time()), watch_list="old-etcd") as srv:
        with ApiClient(srv).stream(STREAMING) as st:
            events = st.events(deadline=5)  # one ERROR, then the stream ends (the cacher's errWatcher)
        assert st.status == 200 and [e["type"] for e in events] == ["ERROR"]
        assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (500, "InternalError")
        assert "required storage feature RequestWatchProgress is disabled" in events[0]["object"]["message"]
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time()), watch_list="ignored",
                        bookmark_interval=0.2) as srv:
        with ApiClient(srv).stream(STREAMING + "&timeoutSeconds=1") as st:
            events = st.events(deadline=5)  # a plain watch: synthetic ADDED, then plain bookmarks
        assert [e["type"] for e in events[:2]] == ["ADDED", "ADDED"] and events[2]["type"] == "BOOKMARK"
        assert all("annotations" not in e["object"]["metadata"] for e in events[2:])
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time()), bookmarks_when_unchanged=False,
                        bookmark_interval=0.1) as srv:
        with ApiClient(srv).stream("/api/v1/nodes?watch=true&allowWatchBookmarks=true&timeoutSeconds=1"
                                   "&resourceVersion=2") as st:
            assert st.events(deadline=5) == []  # 1.20: no bookmark on a resource unchanged since the start
        srv.fleet.stop_kubelet("node-001")  # a change: from now on the cacher bookmarks
        with ApiClient(srv).stream("/api/v1/nodes?watch=true&allowWatchBookmarks=true&timeoutSeconds=1"
                                   f"&resourceVersion={srv.store.resource_version}") as st:
            assert {e["type"] for e in st.events(deadline=5)} == {"BOOKMARK"}
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time()), bookmark_interval=3600) as srv:
        t0 = time.monotonic()
        with ApiClient(srv).stream("/api/v1/nodes?watch=true&allowWatchBookmarks=true&timeoutSeconds=3"
                                   f"&resourceVersion={srv.store.resource_version}") as st:
            first = st.next_event()
            at = time.monotonic() - t0
            rest = st.events(deadline=5)
        assert first is not None and first["type"] == "BOOKMARK" and 0.5 < at < 2.9  # 2 s before the end (at 3 s)
        assert rest == []


def test_a_streaming_list_that_breaks_halfway_falls_back_to_a_paged_list_once(tmp_path, start_live):
    fleet = TinyFleet(nodes=6, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.close_streams_after(3)  # every stream ends after 3 events: a streaming list never completes
        src = start_live(srv, synced=20)
        assert sorted(src.state.nodes) == fleet.names  # listed all the same
        reqs = wait_until(lambda: _paged(_requests(srv, "nodes")) and _requests(srv, "nodes"))  # logged at its end
        assert len(_streaming(reqs)) >= 1 and len(_paged(reqs)) == 1
        assert all(r.status == 200 for r in reqs)
        # not refused (the CSRs' two objects streamed in three events): tried again at the next relist
        assert src.reflector("nodes").watch_list is not False and not src.streaming.refused


def test_lease_only_rows_until_the_node_list_is_in():
    s = FleetState(Settings())
    s.update_health("nodes", connected=True, synced=False)  # a node stream is listing
    s.update_health("leases", connected=True, synced=False)
    for name, renewed in (("a", T0 - 2), ("b", T0 - 100), ("ghost", T0 - 1)):
        s.apply("leases", "ADDED", lease(name, renewed), T0, True)
    s.apply("leases", "SYNCED", None, T0)
    s.update_health("leases", connected=True, synced=True, last_activity=T0)
    assert s.evaluate(T0 + 1).awaiting_renewals == 3  # renewTime alone dates them: core/evidence.py
    view = s.evaluate(T0 + 13)  # a renewal interval later none renewed: the listed ages stand
    rows = {v.name: v for v in view.nodes}
    assert set(rows) == {"a", "b", "ghost"}  # every node listed from its heartbeat alone
    assert rows["a"].state is NodeState.READY and rows["b"].state is NodeState.OVERDUE
    assert all(v.causes[0].kind is CauseKind.NODE_AWAITED for v in rows.values())
    assert view.zones == ()  # a placeholder counts in no zone
    s.apply("nodes", "ADDED", node("a"), T0 + 1, True)
    s.apply("nodes", "ADDED", node("b", "Unknown"), T0 + 1, True)
    s.apply("nodes", "SYNCED", None, T0 + 1)
    rows = {v.name: v for v in s.evaluate(T0 + 14).nodes}
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


# --- servers that do not stream lists, as each kind of real server answers ------------------------


def _health_log(monkeypatch) -> list[tuple[str, dict]]:
    """Every health change of the main streams, in order (a "disconnected" flash is one)."""
    from nodewatch.sources.live import LiveSource

    log: list[tuple[str, dict]] = []
    original = LiveSource._on_health

    def recording(self, reflector, **changes):
        log.append((reflector.spec.resource, dict(changes)))
        return original(self, reflector, **changes)

    monkeypatch.setattr(LiveSource, "_on_health", recording)
    return log


def _flashes(log) -> list:
    return [(res, ch) for res, ch in log if ch.get("connected") is False]


@pytest.mark.parametrize("mode,version,answer", [
    ("gate-off", "v1.34.1", 422),        # --feature-gates=WatchList=false
    ("default-gates", "v1.33.2", 422),   # 1.33's default: the gate off
    ("old-etcd", "v1.34.1", 200),        # etcd < 3.5.13: an ERROR event in a 200 stream
])
def test_a_server_that_does_not_stream_is_asked_once_and_never_flashes_disconnected(
        tmp_path, start_live, monkeypatch, mode, version, answer):
    log = _health_log(monkeypatch)
    fleet = TinyFleet(nodes=6, start=time.time(), version=version)
    with running_server(tmp_path, fleet=fleet, watch_list=mode) as srv:
        src = start_live(srv)
        assert sorted(src.state.nodes) == fleet.names and sorted(src.state.leases) == fleet.names
        wait_until(src.watching)
        asked = _streaming(srv.request_log)
        assert 1 <= len(asked) <= 3 and {r.status for r in asked} == {answer}  # at most once per stream
        assert src.streaming.refused and src.reflector("nodes").watch_list is False
        if mode == "old-etcd":
            assert "RequestWatchProgress" in src.streaming.reason
        assert _flashes(log) == []  # a refusal is no disconnect
        assert all(src.reflector(r).backoff._failures == 0 for r in ("nodes", "leases"))  # and no backoff
        assert src.state.problem_count() == 0
        # a relist after 410 and the pods and events of a focused node (new streams) page at once
        srv.faults.gone_next_watches(3, MAIN)
        srv.faults.reset_now()  # the 3 open watches: watched again, 410, relisted
        wait_until(lambda: sum(src.reflector(r).relists for r in MAIN) >= 6, timeout=20)  # one per 410
        src.focus_node("node-002")
        wait_until(lambda: not src.not_listed("node-002"))
        assert len(_streaming(srv.request_log)) == len(asked)  # not asked again: remembered
        assert sorted(src.state.nodes) == fleet.names


def test_a_server_that_ignores_the_parameters_is_found_out_without_waiting(tmp_path, start_live, monkeypatch):
    """An API server that does not know ``sendInitialEvents`` (before 1.19; an aggregated server
    forwarding its own watch) answers a plain watch: synthetic ADDED events and no end bookmark;
    on 1.20 no bookmark at all on an unchanged resource. A silence of ``INITIAL_SILENCE`` with the
    list unfinished says so (the Nodes' list is read by the list worker's child: its "silent")."""
    from nodewatch.sources import reflector

    monkeypatch.setattr(reflector, "INITIAL_SILENCE", 0.5)
    log = _health_log(monkeypatch)
    fleet = TinyFleet(nodes=5, start=time.time(), version="v1.18.20")
    with running_server(tmp_path, fleet=fleet, watch_list="ignored", bookmarks_when_unchanged=False,
                        bookmark_interval=0.2) as srv:
        t0 = time.monotonic()
        src = start_live(srv, synced=10)
        assert time.monotonic() - t0 < 5  # not the minute a read timeout took, nor forever
        assert sorted(src.state.nodes) == fleet.names and sorted(src.state.leases) == fleet.names
        assert src.streaming.refused and "ignores sendInitialEvents" in src.streaming.reason
        assert _flashes(log) == []
        for resource in ("nodes", "leases"):  # (a request is logged when it ends)
            assert len(wait_until(lambda: _paged(_requests(srv, resource)))) == 1


@pytest.mark.parametrize("signal", ["modified", "plain bookmark"])
def test_an_event_no_streaming_list_sends_before_its_end_says_the_parameters_were_ignored(tmp_path, signal):
    """Since 1.32 a streaming list sends its initial ADDED events and then the annotated bookmark
    and nothing between (PR #127012): a MODIFIED or a plain bookmark first is a plain watch."""
    from nodewatch.sources.kubeconfig import Connection
    from nodewatch.sources.reflector import LEASES, Reflector

    fleet = TinyFleet(nodes=4, start=time.time(), version="v1.18.20")
    with running_server(tmp_path, fleet=fleet, watch_list="ignored",
                        bookmark_interval=0.3 if signal == "plain bookmark" else 3600) as srv:
        got: list = []
        r = Reflector(Connection(str(srv.kubeconfig_path)), LEASES, got.extend, lambda *_, **__: None,
                      lambda *_: None, initial_silence=60.0)
        r.start()
        try:
            if signal == "modified":
                wait_until(lambda: r._initial is not None and len(r._initial) == 4)  # the synthetic ADDED
                fleet.step_to(fleet.now + 10)  # a renewal: MODIFIED on the same stream
            wait_until(lambda: r.listed, timeout=10)  # long before the 60 s of silence
            assert r.offer.refused and "ignores sendInitialEvents" in r.offer.reason
            assert r.connected and r.down_since is None
            assert {o.name for res, t, o, _, listing in got if listing} == set(fleet.names)
        finally:
            r.stop()


def test_a_relist_streams_from_the_last_resource_version(tmp_path, start_live):
    """After 410 on a watch the streaming list asks for data not older than what was seen
    (client-go's case 2: served from the watch cache at once); the first list named none (case 1)."""
    fleet = TinyFleet(nodes=4, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        wait_until(src.watching)
        rv = src.reflector("leases").resource_version
        srv.faults.gone_next_watches(3, MAIN)
        srv.faults.reset_now()
        wait_until(lambda: src.reflector("leases").relists >= 2, timeout=20)
        src.stop()
        lists = wait_until(lambda: len(_streaming(_requests(srv, "leases"))) >= 2
                           and _streaming(_requests(srv, "leases")))
        assert "resourceVersion=" not in lists[0].target
        assert f"resourceVersion={rv}" in lists[1].target and "resourceVersionMatch=NotOlderThan" in lists[1].target
        assert src.reflector("leases").watch_list is True


def test_a_streaming_list_whose_resource_version_is_refused_asks_again_for_the_latest(tmp_path, start_live):
    """client-go's rule: a streaming list that names a resourceVersion the server no longer has
    (410) asks again naming none, a consistent read, and streams; no paged list, no refusal."""
    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        wait_until(src.watching)
        srv.faults.fail_next(2, 410, resource="leases")  # the re-watch, then the relist naming its RV
        srv.faults.reset_now()
        wait_until(lambda: src.reflector("leases").relists >= 2, timeout=20)
        src.stop()
        reqs = wait_until(lambda: len(_streaming(_requests(srv, "leases"))) >= 3 and _requests(srv, "leases"))
        lists = _streaming(reqs)
        assert [r.status for r in lists[:3]] == [200, 410, 200]
        assert "resourceVersion=" in lists[1].target and "resourceVersion=" not in lists[2].target
        assert _paged(reqs) == [] and not src.streaming.refused
