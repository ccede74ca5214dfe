"""Memory of the whole program: peak RSS of the real processes against a 65,000-node simulated
cluster in an incident (``nodewatch sim-server --scenario incident``, its own process).

- the dashboard: ``NodewatchApp`` headless (200x60) on a ``LiveSource``, in a child process that
  runs until every list is in and the scoped pod/event watches of the not-Ready nodes are open,
  then ``seconds`` more at 1 refresh/s;
- ``nodewatch status --kubeconfig`` (the real command).

Each is measured with its children (``TreePeak``): the Node list is read by a child process
(``sources/list_worker``), and the program's memory is both processes' together.

Reference: kube-state-metrics' published sizing (``harness.ksm_sizing_mb``). Until issue 29 it was
``kubectl get nodes -o json`` on the same server, a one-shot printer holding the whole list as
JSON: a straw man.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .harness import Figure, ksm_reference

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


class TreePeak:
    """Peak memory of a process and its children together (the list worker's child process is part
    of the program): the process's ``VmRSS`` plus its descendants' private memory (``_private``),
    read from /proc every 20 ms while the process runs, and the process's own ``VmHWM`` (exact; a
    sampled sum can miss a peak shorter than 20 ms).

    Not ``wait4``'s ``ru_maxrss``: Python starts a child with vfork, and Linux carries the parent's
    high-water mark into the child's ``maxrss`` at exec, so a command started by this (large) bench
    process was reported at the bench's own peak (846 MB for a ``status`` that peaked at 202 MB under
    ``/usr/bin/time``)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.own = 0
        """The process's own peak (``VmHWM``), bytes."""
        self.together = 0
        """The peak of the sum of the process's and its descendants' RSS, bytes."""
        self.children = 0
        """The peak of its descendants' private memory alone, bytes."""
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        root = self.proc.pid
        while self.proc.poll() is None:
            fields = _status(root)
            if fields:
                self.own = max(self.own, fields.get("VmHWM", 0))
                kids = sum(_private(pid) for pid in _descendants(root))
                self.children = max(self.children, kids)
                self.together = max(self.together, fields.get("VmRSS", 0) + kids)
            time.sleep(0.02)

    def peak(self) -> int:
        """Once the process has ended: its peak with its children's, never below its own."""
        self._thread.join()
        return max(self.own, self.together)


def _status(pid: int | str) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def _private(pid: int) -> int:
    """A process's private memory (``Private_Clean`` + ``Private_Dirty``, bytes): what it adds to
    its parent's. The pages of the interpreter and of the shared libraries (libpython, OpenSSL,
    msgspec...) a child maps are the parent's too, and already in the parent's RSS."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
    except OSError:
        pass
    return total


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def _peak_of(cmd: list[str], env: dict[str, str]) -> tuple[int, int]:
    """(peak bytes of a command run to its end, with its children's; its children's alone)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = TreePeak(proc)
    proc.wait()
    if proc.returncode not in (0, 1):  # status: 1 = some node not Ready
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited with {proc.returncode}")
    return peak.peak(), peak.children


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
            proc = subprocess.Popen([sys.executable, "-c", _DASHBOARD, str(kc), str(Path(tmp) / "cache"), str(seconds)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            tree = TreePeak(proc)
            stdout, stderr = proc.communicate(timeout=1200)
            if proc.returncode != 0:
                raise RuntimeError(f"dashboard child failed: {stderr[-500:]}")
            own, shown, scoped = (int(x) for x in stdout.split())
            dash, dash_children = max(own, tree.peak()), tree.children
            dash_s = time.perf_counter() - t
            print("  process memory: nodewatch status --kubeconfig", file=sys.stderr, flush=True)
            status, status_children = _peak_of([sys.executable, "-m", "nodewatch", "status", "--kubeconfig", str(kc),
                                                "--format", "json", "--wait", "300"], env)
        finally:
            stop(server)
    return [
        Figure(f"memory: dashboard process, {nodes:,}-node incident", f"{dash / 1e6:,.0f} MB peak", f"<= {TARGET_MB} MB",
               ksm_reference(nodes), dash / 1e6 <= TARGET_MB,
               f"headless 200x60, {shown:,} nodes, {scoped} nodes with pod/event watches, {seconds:g} s after "
               f"they opened ({dash_s:.0f} s in all); with its list worker's child process (its private "
               f"memory: {dash_children / 1e6:,.0f} MB peak); the process alone {own / 1e6:,.0f} MB"),
        Figure(f"memory: status --kubeconfig, {nodes:,}-node incident", f"{status / 1e6:,.0f} MB peak",
               f"<= {TARGET_MB} MB", ksm_reference(nodes), status / 1e6 <= TARGET_MB,
               f"with its list worker's child process (its private memory: {status_children / 1e6:,.0f} MB peak)"),
    ]


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 2_000, seconds=3.0))
