"""The live source under faults injected by the simulated API server (real HTTPS, real sockets).

For each fault: it keeps running, says what is wrong (watch health / problems), recovers once the
fault ends, and converges to the right state (no node lost, none duplicated, none stale).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.sources.live import MAIN_STREAMS, LiveSource
from nodewatch.sources.recording import Recorder
from nodewatch.sources.recording_input import read_recording
from support.simserver import TinyFleet, running_server, wait_until

MAIN = tuple(spec.resource for spec in MAIN_STREAMS)
"""The live source's main streams (nodes, leases, CSRs): a fault aimed at them, not at the registrations'."""


def renew_all(fleet: TinyFleet, src: LiveSource, rounds: int = 1) -> None:
    """Every kubelet renews ``rounds`` more times; wait until the source has seen all of it."""
    want = {n: src.state.leases[n].renewals + rounds for n in fleet.names if n not in fleet.stopped}
    fleet.step_to(fleet.now + 10 * rounds)
    wait_until(lambda: all(src.state.leases[n].renewals >= k for n, k in want.items()), timeout=15)


def health(src: LiveSource, resource: str):
    return src.state.evaluate(time.time()).health[resource]


@contextmanager
def recorded_run(tmp_path, start_live, nodes: int) -> Iterator[tuple[TinyFleet, Any, LiveSource, str]]:
    """(fleet, server, source, recording path): a TinyFleet behind the sim server, a live source
    recording what it reads, every watch stream open. The source is stopped and the recording
    closed on leaving, so the test reads the whole recording after the block."""
    fleet = TinyFleet(nodes=nodes, start=time.time())
    path = str(tmp_path / "rec.jsonl")
    with running_server(tmp_path, fleet=fleet, bookmark_interval=0.2) as srv:
        rec = Recorder(path, {"kind": "test"}, Settings())
        src = start_live(srv, recorder=rec)
        try:
            wait_until(src.watching)  # every watch stream is open
            yield fleet, srv, src, path
        finally:
            src.stop()
            rec.close()


def test_server_closing_every_stream(tmp_path, start_live):
    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        srv.faults.close_streams_after(2)
        renew_all(fleet, src, rounds=4)  # 12 lease events through streams that end after 2
        def rewatches():
            return [r for r in srv.request_log if "watch=true" in r.target and "/leases" in r.target
                    and "sendInitialEvents" not in r.target]  # the streaming list is a list

        wait_until(lambda: len(rewatches()) >= 4)  # the streams really were closed, again and again
        assert all("resourceVersion=" in r.target for r in rewatches())
        assert src.reflector("leases").relists == 1  # resumed from the resourceVersion, never relisted
        assert len(src.state.leases) == 3
        assert health(src, "leases").connected


def test_410_gone_relists_and_reconciles(tmp_path, start_live):
    with recorded_run(tmp_path, start_live, nodes=4) as (fleet, srv, src, path):
        srv.faults.fail_next(1, 410, resource="nodes")  # the nodes re-watch: HTTP 410
        srv.faults.gone_next_watches(1, MAIN)  # another re-watch: an ERROR event with code 410
        srv.faults.reset_now()  # break the current streams
        wait_until(lambda: not health(src, "nodes").connected)
        srv.store.emit("nodes", "DELETED", fleet.node("node-001"))  # deleted during the gap
        wait_until(lambda: src.reflector("nodes").relists >= 2, timeout=15)
        wait_until(lambda: sum(src.reflector(r).relists for r in ("nodes", "leases", "certificatesigningrequests")) >= 5, timeout=15)  # both kinds of 410
        wait_until(lambda: "node-001" not in src.state.nodes)
        assert sorted(src.state.nodes) == ["node-000", "node-002", "node-003"]
        assert srv.faults.fired["gone"] == 1 and srv.faults.fired["http_410"] == 1
        wait_until(lambda: health(src, "nodes").connected and health(src, "nodes").synced)
        assert health(src, "nodes").relists >= 1
        renew_all(fleet, src)
    _, entries, _ = read_recording(path)
    deleted = [e for e in entries if e.etype == "DELETED" and e.resource == "nodes"]
    # the watch never delivered the delete (410): the relist's reconcile did, with a stub object
    assert len(deleted) >= 1
    assert all(e.obj["metadata"]["name"] == "node-001" for e in deleted)
    listings: list[list[str]] = [[]]
    for e in entries:
        if e.resource == "nodes" and e.listing:
            listings[-1].append(e.obj["metadata"]["name"])
        elif e.resource == "nodes" and e.etype == "SYNCED":
            listings.append([])
    listings = [x for x in listings if x]
    assert len(listings) >= 2
    assert listings[0] == ["node-000", "node-001", "node-002", "node-003"]
    assert all(x == ["node-000", "node-002", "node-003"] for x in listings[1:])  # no one twice, no one stale


def test_a_lease_deleted_in_a_410_gap_is_reconciled_in_its_namespace(tmp_path, start_live):
    """Leases are known by name alone (the stream lists one namespace): the made-up DELETED that
    a relist reconciles with still says which namespace the Lease was in."""
    with recorded_run(tmp_path, start_live, nodes=3) as (fleet, srv, src, path):
        assert sorted(src.reflector("leases").known) == fleet.names
        srv.faults.fail_next(1, 410, resource="leases")  # the leases re-watch: HTTP 410
        srv.faults.reset_now()
        wait_until(lambda: not health(src, "leases").connected)
        srv.store.emit("leases", "DELETED", fleet.lease("node-002"))  # deleted during the gap
        wait_until(lambda: src.reflector("leases").relists >= 2, timeout=15)
        wait_until(lambda: "node-002" not in src.state.leases)
        assert sorted(src.reflector("leases").known) == ["node-000", "node-001"]
    _, entries, _ = read_recording(path)
    deleted = [e.obj["metadata"] for e in entries if e.etype == "DELETED" and e.resource == "leases"]
    assert deleted and all(m == {"name": "node-002", "namespace": "kube-node-lease"} for m in deleted)


def test_http_500_and_429_back_off_and_resume_without_relisting(tmp_path, start_live):
    with recorded_run(tmp_path, start_live, nodes=3) as (fleet, srv, src, path):
        srv.faults.fail_next(2, 500, resource="leases")
        srv.faults.throttle_next(1, retry_after=1, resource="leases")
        srv.faults.reset_now()
        wait_until(lambda: srv.faults.fired["http_500"] == 2 and srv.faults.fired["http_429"] == 1, timeout=20)
        # the reset, 500, 500, 429: four backoffs of at most 1.6s, 3.2s, 6.4s, 12.8s (>= Retry-After)
        wait_until(lambda: health(src, "leases").connected, timeout=40)
        renew_all(fleet, src)
        assert src.reflector("leases").relists == 1  # no relist for 5xx / 429
    _, entries, _ = read_recording(path)
    errors = [e.health.get("last_error", "") for e in entries if e.etype == "HEALTH" and e.resource == "leases"]
    assert any("HTTP 500" in x for x in errors)
    assert any("HTTP 429" in x for x in errors)


def test_connection_refused_then_back_and_no_blame_meanwhile(tmp_path, start_live):
    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        renew_all(fleet, src)
        srv.go_down()
        wait_until(lambda: not health(src, "leases").connected, timeout=15)
        view = src.state.evaluate(time.time() + 120)  # even two minutes later...
        assert view.leases_blind and "lease stream down" in view.blind_reason
        assert {v.state for v in view.nodes} == {NodeState.READY}  # ...nobody is Late or Overdue
        assert all(v.lease_age(time.time()) is None for v in view.nodes)
        wait_until(lambda: "refused" in health(src, "leases").last_error
                   or "reset" in health(src, "leases").last_error
                   or "broken" in health(src, "leases").last_error, timeout=15)
        srv.go_up()
        wait_until(lambda: health(src, "leases").connected, timeout=45)
        renew_all(fleet, src)
        assert src.reflector("leases").relists == 1
        assert sorted(src.state.nodes) == fleet.names


def test_a_stall_is_detected_within_the_timeout(tmp_path, start_live):
    fleet = TinyFleet(nodes=2, start=time.time())
    with running_server(tmp_path, fleet=fleet, bookmark_interval=0.3) as srv:
        src = start_live(srv, stall_timeout=1.0)
        wait_until(src.watching)  # every watch stream is open
        srv.faults.stall(600.0)
        wait_until(lambda: "no data for 1s" in health(src, "leases").last_error, timeout=60)
        # the client gave up on its own timeout: the server was still stalling, and says so
        assert srv.faults.stalled_for() > 0
        srv.faults.clear()
        wait_until(lambda: health(src, "leases").connected, timeout=30)
        renew_all(fleet, src)


def test_a_truncated_json_line_is_a_problem_and_the_stream_restarts(tmp_path, start_live):
    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        srv.faults.truncate_next(1)
        fleet.step_to(fleet.now + 10)
        wait_until(lambda: srv.faults.fired["truncated"] == 1)
        wait_until(lambda: any("truncated JSON" in p.message for p in src.state.problems), timeout=10)
        renew_all(fleet, src)  # the stream came back from the last good resourceVersion
        assert all(t.renewals >= 2 for t in src.state.leases.values())
        assert src.reflector("leases").relists == 1


def test_403_on_csrs_leaves_the_rest_working(tmp_path, start_live):
    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.forbid("certificatesigningrequests")
        src = start_live(srv)
        wait_until(lambda: health(src, "certificatesigningrequests").forbidden)
        h = health(src, "certificatesigningrequests")
        assert "needs list/watch on certificatesigningrequests.certificates.k8s.io" in h.last_error
        renew_all(fleet, src)
        view = src.state.evaluate(time.time())
        assert {v.state for v in view.nodes} == {NodeState.READY}
        assert not view.leases_blind


def test_an_expired_token_is_reloaded_from_the_kubeconfig(tmp_path, start_live):
    fleet = TinyFleet(nodes=2, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        old = srv.token
        srv.rotate_token(old_valid_for=0)  # the old token now gets 401; the kubeconfig has the new one
        assert srv.token != old
        srv.faults.reset_now()
        wait_until(lambda: src.conn.reloads >= 1, timeout=20)
        wait_until(lambda: health(src, "leases").connected, timeout=20)
        renew_all(fleet, src)
        assert any(r.status == 401 for r in srv.request_log)
