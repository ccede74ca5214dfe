"""Simulated fleet in real time: can ``nodewatch sim-server`` keep a 65,000-node fleet (about
6,500 Lease renewals a second) flowing to one client?

The server is the real command (``nodewatch sim-server --scenario steady --speed 1``) in its own
process; the client is nodewatch's live source in this one. After the initial list, for
``seconds`` of wall time: the lease events the client receives per second, against the fleet's
own renewal rate (nodes / 10 s, the reference), and how many nodes the client sees as Late or
worse (a server or client that falls behind shows up as Late nodes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .harness import Figure


def run(nodes: int = 65_000, seconds: float = 20.0) -> list[Figure]:
    from nodewatch.core.rules import NodeState
    from nodewatch.core.settings import Settings
    from nodewatch.sources.live import LiveSource

    with tempfile.TemporaryDirectory(prefix="nodewatch-simrt-") as tmp:
        kc = Path(tmp) / "kubeconfig"
        t_build = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "nodewatch", "sim-server", "--nodes", str(nodes), "--scenario", "steady",
             "--speed", "1", "--quiet", "--port", "0", "--kubeconfig-out", str(kc)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                if line.startswith("Ctrl-C"):
                    break
            else:
                raise RuntimeError("sim-server exited before serving")
            build_s = time.perf_counter() - t_build
            src = LiveSource(Settings(), kubeconfig=str(kc), cert_cache_dir=str(Path(tmp) / "cache"))
            src.start()
            try:
                if not src.wait_synced(600):
                    raise RuntimeError("the live source did not sync")
                state = src.state
                with state.lock:
                    before = sum(t.renewals for t in state.leases.values())
                t0 = time.perf_counter()
                time.sleep(seconds)
                with state.lock:
                    after = sum(t.renewals for t in state.leases.values())
                elapsed = time.perf_counter() - t0
                view = state.evaluate(time.time())
                behind = sum(view.counts[s] for s in NodeState if s is not NodeState.READY)
            finally:
                src.stop()
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    rate = (after - before) / elapsed
    fleet_rate = nodes / 10.0
    return [Figure(f"sim-server: {nodes:,}-node fleet in real time to one client",
                   f"{rate:,.0f} lease events/s, {behind} nodes not Ready", "~ fleet rate, 0 behind",
                   f"fleet renews {fleet_rate:,.0f}/s (every 10 s + jitter)", rate >= 0.9 * fleet_rate and behind == 0,
                   note=f"server built and listening after {build_s:.1f} s")]
