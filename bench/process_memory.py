"""Memory of the whole program: peak RSS of the real processes against a 65,000-node simulated
cluster in an incident (``nodewatch sim-server --scenario incident``, its own process).

- the dashboard: ``NodewatchApp`` headless (200x60) on a ``LiveSource``, in a child process that
  runs until every list is in and the scoped pod/event watches of the not-Ready nodes are open,
  then ``seconds`` more at 1 refresh/s; it reports its own peak RSS (``VmHWM``);
- ``nodewatch status --kubeconfig`` (the real command): its peak RSS (``VmHWM``, see ``_peak_of``).

Reference in the same run: ``kubectl get nodes -o json`` on the same server (its peak RSS the same way).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .harness import Figure
from .live_path import kubectl_path

TARGET_MB = 300

_DASHBOARD = r"""
import asyncio, sys, time
from nodewatch.core.settings import Settings
from nodewatch.sources.live import LiveSource, MAX_SCOPED_NODES
from nodewatch.ui.app import NodewatchApp

kubeconfig, cache, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])

async def main():
    src = LiveSource(Settings(), kubeconfig=kubeconfig, cert_cache_dir=cache)
    app = NodewatchApp(src)
    src.start()
    try:
        async with app.run_test(size=(200, 60)) as pilot:
            t0 = time.monotonic()
            while src.not_listed() or len(src.scoped_nodes()) < min(MAX_SCOPED_NODES, len(src.wanted_scoped())):
                if time.monotonic() - t0 > 600:
                    raise SystemExit("not synced within 600 s")
                await asyncio.sleep(0.2)
            await asyncio.sleep(seconds)
            await pilot.pause()
            scoped = len(src.scoped_nodes())
    finally:
        src.stop()
    status = open("/proc/self/status").read()
    hwm = next(int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM:"))
    print(hwm * 1024, len(src.state.node_records()), scoped)

asyncio.run(main())
"""


def _peak_of(cmd: list[str], env: dict[str, str]) -> int:
    """Peak RSS in bytes of a command run to its end (output discarded): its own ``VmHWM``, read
    from /proc every 20 ms until it exits (the peak is monotonic; growth in its last 20 ms would be
    missed).

    Not ``wait4``'s ``ru_maxrss``: Python starts a child with vfork, and Linux carries the parent's
    high-water mark into the child's ``maxrss`` at exec, so a command started by this (large) bench
    process was reported at the bench's own peak (846 MB for a ``status`` that peaked at 202 MB under
    ``/usr/bin/time``)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = 0
    status_file = f"/proc/{proc.pid}/status"
    while proc.poll() is None:
        try:
            with open(status_file) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
                        break
        except OSError:
            pass
        time.sleep(0.02)
    if proc.returncode not in (0, 1):  # status: 1 = some node not Ready
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited with {proc.returncode}")
    return peak


def start_sim_server(nodes: int, scenario: str, tmp: str) -> tuple[subprocess.Popen, Path]:
    """``nodewatch sim-server`` in a child process; returns once it serves."""
    kc = Path(tmp) / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodewatch", "sim-server", "--nodes", str(nodes), "--scenario", scenario,
         "--speed", "1", "--quiet", "--port", "0", "--kubeconfig-out", str(kc)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    for line in proc.stdout:  # type: ignore[union-attr]
        if line.startswith("Ctrl-C"):
            return proc, kc
    raise RuntimeError("sim-server exited before serving")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def run(nodes: int = 65_000, seconds: float = 20.0) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="nodewatch-procmem-") as tmp:
        print(f"  process memory: sim-server with {nodes:,} nodes in an incident (setup)", file=sys.stderr, flush=True)
        server, kc = start_sim_server(nodes, "incident", tmp)
        try:
            t = time.perf_counter()
            env = {**os.environ, "KUBECONFIG": str(kc)}
            print("  process memory: the dashboard, headless", file=sys.stderr, flush=True)
            out = subprocess.run([sys.executable, "-c", _DASHBOARD, str(kc), str(Path(tmp) / "cache"), str(seconds)],
                                 capture_output=True, text=True, timeout=1200)
            if out.returncode != 0:
                raise RuntimeError(f"dashboard child failed: {out.stderr[-500:]}")
            dash, shown, scoped = (int(x) for x in out.stdout.split())
            dash_s = time.perf_counter() - t
            print("  process memory: nodewatch status --kubeconfig", file=sys.stderr, flush=True)
            status = _peak_of([sys.executable, "-m", "nodewatch", "status", "--kubeconfig", str(kc), "--format", "json",
                               "--wait", "300"], env)
            print("  process memory: kubectl get nodes -o json", file=sys.stderr, flush=True)
            ref = _peak_of([str(kubectl_path()), "get", "nodes", "-o", "json"], env)
        finally:
            stop(server)
    return [
        Figure(f"memory: dashboard process, {nodes:,}-node incident", f"{dash / 1e6:,.0f} MB peak", f"<= {TARGET_MB} MB",
               f"kubectl get nodes -o json {ref / 1e6:,.0f} MB", dash / 1e6 <= TARGET_MB,
               f"headless 200x60, {shown:,} nodes, {scoped} nodes with pod/event watches, {seconds:g} s after "
               f"they opened ({dash_s:.0f} s in all)"),
        Figure(f"memory: status --kubeconfig, {nodes:,}-node incident", f"{status / 1e6:,.0f} MB peak",
               f"<= {TARGET_MB} MB", f"kubectl get nodes -o json {ref / 1e6:,.0f} MB", status / 1e6 <= TARGET_MB),
    ]


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 2_000, seconds=3.0))
