"""Start: from ``LiveSource.start()`` to the first full frame of the dashboard, at 65k nodes.

The simulated API server (a child process, see ``bench.live_path``) holds ``nodes`` production-
shaped Nodes (about 10 KB of JSON each: images, managedFields...) and their Leases. Measured:
the paged lists of nodes and leases over HTTPS into the core (until both are synced), then the
dashboard (``NodewatchApp``, headless, 200x60) evaluating the whole fleet and painting it.

Reference: ``kubectl get nodes`` on the same server (wall time, default table output).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from .harness import Figure
from .live_path import ServerChild, kubectl_path

SIZE = (200, 60)


async def _first_frame(kubeconfig: str, nodes: int) -> tuple[float, float]:
    """(seconds to the first full frame, of which listing until synced)."""
    from nodewatch.core.settings import Settings
    from nodewatch.sources.live import LiveSource
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    src = LiveSource(Settings(), kubeconfig=kubeconfig)
    app = NodewatchApp(src, refresh_seconds=3600)  # ticks only when told: the first full one is timed
    t0 = time.perf_counter()
    src.start()
    try:
        async with app.run_test(size=SIZE) as pilot:
            while True:
                with src.state.lock:
                    if {"nodes", "leases"} <= src.state.synced:
                        break
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError("nodes and leases not synced after 300s")
                await asyncio.sleep(0.01)
            synced = time.perf_counter() - t0
            app.tick()
            await pilot.pause()
            took = time.perf_counter() - t0
            shown = len(app.query_one("#table", FleetTable).rows)
            if shown != nodes:
                raise RuntimeError(f"first frame shows {shown} nodes, expected {nodes}")
            return took, synced
    finally:
        src.stop()


def kubectl_get_nodes(server: ServerChild) -> float:
    t = time.perf_counter()
    out = subprocess.run([str(kubectl_path()), "get", "nodes"], capture_output=True, env=server.env(), timeout=600)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"kubectl get nodes failed: {out.stderr[:300]!r}")
    return took


def run(nodes: int = 65_000) -> list[Figure]:
    print(f"  start: simulated API server with {nodes:,} production-shaped nodes (setup)", file=sys.stderr, flush=True)
    with ServerChild(nodes, realistic=True, history=10) as server:
        print("  start: nodewatch list -> first frame", file=sys.stderr, flush=True)
        took, synced = asyncio.run(_first_frame(server.kubeconfig, nodes))
        print("  start: kubectl get nodes", file=sys.stderr, flush=True)
        ref = kubectl_get_nodes(server)
    return [Figure(f"start: list {nodes:,} nodes + leases -> first full frame", f"{took:.2f} s", "<= 5 s",
                   f"kubectl get nodes {ref:.2f} s", took <= 5.0,
                   f"lists until synced {synced:.2f} s, then evaluate + first paint {took - synced:.2f} s; "
                   f"nodes are ~10 KB each as served")]


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 2_000))
