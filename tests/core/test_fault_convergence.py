"""Under each injected fault the live source keeps running, says what is wrong, recovers
once the fault ends, and converges to exactly what a fresh start sees (no node lost, none
duplicated, no stale pod). Real HTTPS to the simulated API server; no patched client code."""

from __future__ import annotations

import socket
import time

import pytest

from nodewatch.core.rules import NodeState
from nodewatch.sources.live import LiveSource
from support.simserver import TinyFleet, running_server, wait_until

BLAMING = (NodeState.LATE, NodeState.OVERDUE)


def start_focused(start_live, srv, name: str, **kw) -> LiveSource:
    src = start_live(srv, cache=name, synced=20, **kw)
    src.focus_node("node-001")
    return src


def fingerprint(src: LiveSource) -> tuple:
    s = src.state
    with s.lock:
        return (
            sorted(s.nodes),
            sorted((n, t.renew_time) for n, t in s.leases.items()),
            sorted((k, p.node_name, p.deletion_timestamp) for k, p in s.pods.items()),
        )


def churn(fleet: TinyFleet, srv) -> None:
    """What happens in the cluster while the dashboard struggles: renewals, a node and a pod go away."""
    fleet.step_to(fleet.now + 30)
    srv.store.emit("nodes", "DELETED", fleet.node("node-003"), fleet.now)
    srv.store.emit("pods", "DELETED", fleet.pod("node-001", 0), fleet.now)
    fleet.step_to(fleet.now + 10)


FAULTS = {
    "reset mid-stream": lambda srv: srv.faults.reset_streams_after(3),
    "slow trickle": lambda srv: srv.faults.trickle(2.0, chunk=64, delay=0.01),
    "oversized object": lambda srv: srv.faults.oversize_next(2, size=2 * 1024 * 1024),
    "truncated line": lambda srv: srv.faults.truncate_next(1),
    "410 burst": lambda srv: (srv.faults.gone_next_watches(3), srv.faults.reset_now()),
    "500s": lambda srv: (srv.faults.fail_next(3, 500), srv.faults.reset_now()),
    "429 with Retry-After": lambda srv: (srv.faults.throttle_next(2, retry_after=1), srv.faults.reset_now()),
    "server down, then back": lambda srv: srv.faults.down(3.0),
    "TCP stall": lambda srv: srv.faults.stall(2.5),
}


def _accepts(host: str, port: int) -> bool:
    """Does the server take a TCP connection now?"""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_then_convergence_to_a_fresh_start(tmp_path, fault, start_live):
    fleet = TinyFleet(nodes=5, start=time.time())
    with running_server(tmp_path, fleet=fleet, run_fleet=False, bookmark_interval=0.5) as srv:
        live = start_focused(start_live, srv, "a", stall_timeout=1.5)
        wait_until(live.watching, timeout=15)
        FAULTS[fault](srv)
        churn(fleet, srv)
        # While the fault lasts the dashboard may be blind, but it never blames a node for it:
        # a blind view has no lease ages, so nobody turns Late or Overdue.
        view = live.state.evaluate(time.time() + 60)
        if view.leases_blind:
            assert not [v.name for v in view.nodes if v.state in BLAMING]
        srv.faults.clear()
        # The fresh source starts once the server listens again (its fault monitor re-listens at
        # its next look): a first connection refused is a permanent failure to a new source
        # (``LiveSource.fatal``), and a loaded machine delays that look (seen failing in CI).
        wait_until(lambda: _accepts(srv.host, srv.port), timeout=15)
        fresh = start_focused(start_live, srv, "b")
        # both with the drill-down node's pods: its watch starts after the lists, and two fingerprints
        # without them were equal too (the wait ended before either had its pods: seen in CI)
        wait_until(lambda: fingerprint(live) == fingerprint(fresh) and bool(fingerprint(fresh)[2]), timeout=40)
        nodes, leases, pods = fingerprint(live)
        assert nodes == ["node-000", "node-001", "node-002", "node-004"]
        assert len(leases) == 5  # node-003's lease still exists in the API (only the Node went)
        # only the drill-down node's pods are watched; the deleted one is gone
        assert [k for k, _, _ in pods] == [("kube-system", "web-node-001-1")]
        assert not live.state.evaluate(time.time()).leases_blind
