"""Start: from ``LiveSource.start()`` to the first useful and the complete frame, at 65k nodes.

The simulated API server (a child process, see ``bench.live_path``) holds ``nodes`` production-
shaped Nodes (about 10 KB of JSON each: images, managedFields...) and their Leases. Measured:
the paged lists of nodes and leases over HTTPS into the core (until both are synced), then the
dashboard (``NodewatchApp``, headless, 200x60) evaluating the whole fleet and painting it.

Reference: ``kubectl get nodes`` on the same server (wall time, default table output).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time

from .harness import Figure
from .live_path import ServerChild, kubectl_path

SIZE = (200, 60)
STOPPED_ONE_IN = 15
"""One node in 15 stopped renewing its Lease (an incident: 4,334 of 65,000, about the 4,331 nodes
Unknown of ``process_memory``'s incident); the others renewed within the last 10 s, as a live
fleet's kubelets do. (Before, every Lease was as old as the server's setup, so the whole fleet was
Late: a frame no live cluster shows.)"""


async def _frames(kubeconfig: str, nodes: int) -> tuple[float, float, float, float]:
    """(seconds to the first useful frame, to the complete frame, leases listed at, nodes listed at).

    First useful frame: the Leases are listed and every node is on screen with its heartbeat state
    (rows whose Node has not arrived yet say so). Complete frame: the Nodes are listed too."""
    from nodewatch.core.settings import Settings
    from nodewatch.sources.live import LiveSource
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    src = LiveSource(Settings(), kubeconfig=kubeconfig)
    # No ticks of its own within the measurement: the frames measured are the ones the app draws
    # when it sees a list completed (``NodewatchApp._tick_if_listed``), as the real dashboard does.
    app = NodewatchApp(src, refresh_seconds=3600)
    t0 = time.perf_counter()
    src.start()

    async def frame_when(resource: str) -> tuple[float, float]:
        while not src.state.is_synced(resource):
            if time.perf_counter() - t0 > 300:
                raise RuntimeError(f"{resource} not synced after 300s")
            await asyncio.sleep(0.005)
        listed = time.perf_counter() - t0
        table = app.query_one("#table", FleetTable)

        def drawn() -> bool:  # a frame evaluated once the stream said its list was in
            h = app.view.health.get(resource) if app.view is not None else None
            return h is not None and h.synced and len(table.rows) == nodes

        while not drawn():
            if time.perf_counter() - t0 > 300:
                raise RuntimeError(f"the frame after {resource} never came: it shows {len(table.rows)} nodes, "
                                   f"expected {nodes}")
            await asyncio.sleep(0.005)
        # Painted: every message queued is handled, then the screen composed and rendered, as
        # the dashboard's own screen timer does next. (A bare ``pause()`` also waits for the
        # process to go idle, up to 1 s, and the Node list being read keeps it busy: until this
        # session the first useful frame was measured up to 1 s late.)
        await pilot.pause(0)
        return time.perf_counter() - t0, listed

    try:
        async with app.run_test(size=SIZE) as pilot:
            useful, leases_at = await frame_when("leases")
            complete, nodes_at = await frame_when("nodes")
            return useful, complete, leases_at, nodes_at
    finally:
        src.stop()


def levers(kubeconfig: str, nodes: int, repeat: int = 3) -> str:
    """Seconds until nodes and leases are listed into the core (no UI), with each lever off in turn:
    the typed decoder (``core.wire``), the streaming list (``sendInitialEvents``) and the child
    process that reads the Nodes' streaming list (``sources/list_worker``; with dicts or paged
    lists it has nothing to do)."""
    import threading

    from nodewatch.core.fleet import FleetState
    from nodewatch.sources.kubeconfig import Connection
    from nodewatch.sources.reflector import LEASES, NODES, Reflector

    def once(typed: bool, watch_list: bool, in_worker: bool = True) -> float:
        state = FleetState()
        conn = Connection(kubeconfig, None)
        done = threading.Event()

        def sink(batch: list) -> None:
            with state.batch():
                for resource, etype, obj, t, listing in batch:
                    state.apply(resource, etype, obj, t, listing)
            if state.is_synced("nodes", "leases"):
                done.set()

        ignore = lambda *a, **k: None  # noqa: E731
        t0 = time.perf_counter()
        rs = [Reflector(conn, spec, sink, ignore, ignore, typed=typed, watch_list=watch_list, in_worker=in_worker)
              for spec in (LEASES, NODES)]
        for r in rs:
            r.start()
        done.wait(300)
        took = time.perf_counter() - t0
        for r in rs:
            r.stop()
        conn.close()
        if len(state.nodes) != nodes:
            raise RuntimeError(f"listed {len(state.nodes)} nodes, expected {nodes}")
        return took

    parts = []
    for typed, watch_list, in_worker, name in (
            (True, True, True, "all three"), (True, True, False, "typed, streaming list, no child process"),
            (True, False, True, "typed, paged lists"), (False, True, True, "dicts, streaming list"),
            (False, False, True, "none (before)")):
        parts.append(f"{name} {statistics.median(once(typed, watch_list, in_worker) for _ in range(repeat)):.2f} s")
    return f"lists of {nodes:,} nodes + leases into the core, median of {repeat}: " + ", ".join(parts)


def kubectl_get_nodes(server: ServerChild) -> float:
    t = time.perf_counter()
    out = subprocess.run([str(kubectl_path()), "get", "nodes"], capture_output=True, env=server.env(), timeout=600)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"kubectl get nodes failed: {out.stderr[:300]!r}")
    return took


def run(nodes: int = 65_000, lever_repeat: int = 3, starts: int = 3) -> list[Figure]:
    """The figures are the median of ``starts`` starts (this machine's noise moves one start by
    ±0.3 s); the note gives each."""
    print(f"  start: simulated API server with {nodes:,} production-shaped nodes (setup)", file=sys.stderr, flush=True)
    with ServerChild(nodes, realistic=True, history=10) as server:
        runs = []
        for k in range(starts):
            renewed = server.renew(STOPPED_ONE_IN)  # every start meets a fleet renewed within 10 s
            print(f"  start: nodewatch list -> first frames ({k + 1} of {starts})", file=sys.stderr, flush=True)
            runs.append(asyncio.run(_frames(server.kubeconfig, nodes)))
        useful, complete, leases_at, nodes_at = (statistics.median(r[i] for r in runs) for i in range(4))
        print("  start: kubectl get nodes", file=sys.stderr, flush=True)
        ref = kubectl_get_nodes(server)
        print("  start: levers", file=sys.stderr, flush=True)
        lever_note = levers(server.kubeconfig, nodes, lever_repeat)
    reference = f"kubectl get nodes {ref:.2f} s"
    each = lambda i: " / ".join(f"{r[i]:.2f}" for r in runs)  # noqa: E731
    return [
        Figure(f"start: {nodes:,} nodes -> first useful frame (from the Leases)", f"{useful:.2f} s", "<= 1.5 s",
               reference, useful <= 1.5,
               f"median of {starts} starts ({each(0)} s); leases listed at {leases_at:.2f} s; {nodes - renewed:,} "
               f"nodes stopped renewing; every node on screen with its heartbeat state, rows whose Node has not "
               f"arrived say so"),
        Figure(f"start: {nodes:,} nodes -> complete frame", f"{complete:.2f} s", "<= 3 s", reference, complete <= 3.0,
               f"median of {starts} starts ({each(1)} s); nodes listed at {nodes_at:.2f} s (~10 KB each as served); "
               f"{lever_note}"),
    ]


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 2_000))
