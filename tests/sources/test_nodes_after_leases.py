"""The Node list starts once the Lease list is in (``live.NODES_AFTER_LEASES``): the first useful
frame is every node from its Lease, and at 130,000 nodes a Node list 13 times the size listed at
the same moment took the CPU from it. A Lease list that fails holds the Nodes back no longer."""

from __future__ import annotations

import threading
import time

from nodewatch.core.settings import Settings
from nodewatch.sources.kubeconfig import Connection
from nodewatch.sources.live import NODES_AFTER_LEASES, LiveSource
from nodewatch.sources.reflector import NODES, Reflector
from support.simserver import TinyFleet, running_server, wait_until


def _nodes_reflector(srv, got: list, after: tuple[threading.Event, float]) -> Reflector:
    return Reflector(Connection(str(srv.kubeconfig_path)), NODES, got.extend, lambda _r, **ch: None,
                     lambda *_: None, in_worker=False, after=after)


def test_a_reflector_waits_for_its_event_before_its_first_list(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=3, start=time.time())) as srv:
        event, got = threading.Event(), []
        r = _nodes_reflector(srv, got, (event, 30.0))
        r.start()
        try:
            time.sleep(1.0)
            assert got == [] and srv.requests_started == 0  # not even asked
            event.set()
            wait_until(lambda: r.listed, timeout=10)
            assert {e[2].name for e in got if e[1] == "ADDED"} == {"node-000", "node-001", "node-002"}
        finally:
            r.stop()


def test_a_reflector_lists_after_at_most_its_wait_and_a_stop_ends_the_wait(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=3, start=time.time())) as srv:
        got: list = []
        t0 = time.monotonic()
        r = _nodes_reflector(srv, got, (threading.Event(), 0.5))
        r.start()
        try:
            wait_until(lambda: r.listed, timeout=10)
            assert time.monotonic() - t0 >= 0.5
        finally:
            r.stop()
        waiting = _nodes_reflector(srv, [], (threading.Event(), 60.0))
        waiting.start()
        t0 = time.monotonic()
        waiting.stop()  # joins the thread: the wait is cut short
        assert time.monotonic() - t0 < 2.0 and not waiting.alive


def _first_batches(src: LiveSource) -> list[tuple[str, str]]:
    """(resource, event type) of the first event of each batch the source's sink receives."""
    seen: list[tuple[str, str]] = []
    sink = src._sink

    def spy(batch):
        if batch:
            seen.append((batch[0][0], batch[0][1]))
            seen.extend((e[0], e[1]) for e in batch if e[1] == "SYNCED")
        sink(batch)

    src._sink = spy  # type: ignore[method-assign]
    return seen


def test_the_node_list_comes_after_the_lease_list(tmp_path):
    """Five Nodes and 30,000 Leases: listed at the same moment, the Nodes were in long before the
    Leases (this fails without the wait)."""
    import copy

    from nodewatch.sim.store import ObjectStore

    tiny = TinyFleet(nodes=5, start=time.time())
    store = ObjectStore()
    store.emit_many([("nodes", "ADDED", tiny.node(n), None) for n in tiny.names])
    template = tiny.lease(tiny.names[0])
    leases = []
    for i in range(30_000):
        lease = copy.deepcopy(template)
        lease["metadata"]["name"] = lease["spec"]["holderIdentity"] = f"node-{i:05d}"
        leases.append(("leases", "ADDED", lease, None))
    store.emit_many(leases)
    with running_server(tmp_path, store=store) as srv:
        src = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c"))
        seen = _first_batches(src)
        src.start()
        try:
            assert src.wait_synced(30)
        finally:
            src.stop()
    leases_in = seen.index(("leases", "SYNCED"))
    first_node = next(i for i, (res, _) in enumerate(seen) if res == "nodes")
    assert first_node > leases_in, seen[:5]


def test_a_lease_list_that_fails_does_not_hold_the_nodes_back(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=5, start=time.time())) as srv:
        srv.faults.forbid("leases")
        src = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "c"))
        t0 = time.monotonic()
        src.start()
        try:
            wait_until(lambda: src.state.store.synced >= {"nodes"}, timeout=20)
            assert time.monotonic() - t0 < NODES_AFTER_LEASES  # released by the failure, not the timeout
        finally:
            src.stop()
