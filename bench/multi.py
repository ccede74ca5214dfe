"""Several clusters: twenty simulated clusters of 3,000 nodes in one nodewatch, beside twenty
separate nodewatch processes, in the same run.

Each cluster is a ``nodewatch sim-server`` (scenario ``steady``: kubelets renew their leases every
10 s) in its own process on loopback, logging every request it serves. One kubeconfig has a
context per server. Two rounds, each on freshly started servers (so each server's log holds one
round's requests only):

- one nodewatch: a child process runs the headless dashboard (``NodewatchApp``, 200x60) over a
  ``MultiSource`` of every context. First frame: from ``start()`` until every cluster has listed
  its nodes and leases and the table shows every node of every cluster. Frame time: the median of
  ``frames`` ticks (evaluate + paint), one a second, while the leases renew. Memory: its peak RSS
  (``VmHWM``).
- twenty nodewatch: twenty such children at once, each over one context (``LiveSource``): the
  slowest first frame, the median of their frame times, the sum of their peak RSS.
- API load per server, from the servers' logs once they stopped: requests and watches each round
  made to each server. One nodewatch of several clusters should cost each server exactly what one
  watcher of that cluster costs.

``python -m bench.multi [--clusters 20] [--nodes 3000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .harness import Figure

ROOT = Path(__file__).resolve().parent.parent
SIZE = (200, 60)
TARGET_FIRST_FRAME = 30.0
"""Seconds to the first complete frame of all clusters in one nodewatch (60,000 nodes)."""


# --- the nodewatch child ------------------------------------------------------------------------


async def _child(kubeconfig: str, contexts: list[str], nodes: int, frames: int) -> dict:
    from nodewatch.core.settings import Settings
    from nodewatch.sources.live import LiveSource
    from nodewatch.sources.multi import MultiSource
    from nodewatch.sources.multi_config import specs_from_contexts
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    if len(contexts) == 1:
        src = LiveSource(Settings(), kubeconfig=kubeconfig, context=contexts[0])
        listed = lambda: not src.not_listed()  # noqa: E731
    else:
        src = MultiSource(specs_from_contexts(contexts, kubeconfig), Settings())
        listed = lambda: all(src.settled().values())  # noqa: E731
    app = NodewatchApp(src, refresh_seconds=3600)  # ticks only when told: the frames measured are ours
    t0 = time.perf_counter()
    src.start()
    try:
        async with app.run_test(size=SIZE) as pilot:
            while True:
                if time.perf_counter() - t0 > 600:
                    raise SystemExit("not listed within 600 s")
                if listed():
                    app.tick()
                    await pilot.pause()
                    if len(app.query_one("#table", FleetTable).rows) == nodes:
                        break
                await asyncio.sleep(0.01)
            first = time.perf_counter() - t0
            times = []
            for _ in range(frames):
                await asyncio.sleep(1.0)
                t = time.perf_counter()
                app.tick()
                await pilot.pause()
                times.append(time.perf_counter() - t)
    finally:
        src.stop()
    status = Path("/proc/self/status").read_text()
    hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return {"first": first, "frame": statistics.median(times), "rss": hwm * 1024}


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--context", action="append", required=True)
    ap.add_argument("--nodes", type=int, required=True, help="nodes expected on screen")
    ap.add_argument("--frames", type=int, default=10)
    args = ap.parse_args(argv)
    print(json.dumps(asyncio.run(_child(args.kubeconfig, args.context, args.nodes, args.frames))), flush=True)
    return 0


# --- the simulated clusters ---------------------------------------------------------------------


class Clusters:
    """``n`` sim-servers of ``nodes`` nodes each (own processes), and one kubeconfig for all."""

    def __init__(self, n: int, nodes: int, directory: str) -> None:
        import yaml

        self.dir = Path(directory)
        self.names = [f"c{i:02d}" for i in range(1, n + 1)]
        self.procs: list[subprocess.Popen] = []
        self.logs = [self.dir / f"{name}.log" for name in self.names]
        for name, log in zip(self.names, self.logs):
            log.unlink(missing_ok=True)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "nodewatch", "sim-server", "--nodes", str(nodes), "--scenario", "steady",
                 "--port", "0", "--kubeconfig-out", str(self.dir / f"{name}.kubeconfig"), "--log", str(log)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=self.dir))
        cfg: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                     "current-context": self.names[0], "preferences": {}}
        for name, proc in zip(self.names, self.procs):
            for line in proc.stdout:  # type: ignore[union-attr]
                if line.startswith("Ctrl-C"):
                    break
            else:
                raise RuntimeError(f"sim-server {name} exited before serving")
            one = yaml.safe_load((self.dir / f"{name}.kubeconfig").read_text())
            cfg["clusters"].append({"name": name, "cluster": one["clusters"][0]["cluster"]})
            cfg["users"].append({"name": name, "user": one["users"][0]["user"]})
            cfg["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
        self.kubeconfig = str(self.dir / "all.kubeconfig")
        Path(self.kubeconfig).write_text(yaml.safe_dump(cfg))

    def stop(self) -> list[tuple[int, int]]:
        """Stop every server; (requests, watches) each served, from its log."""
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        out = []
        for log in self.logs:
            lines = log.read_text().splitlines() if log.exists() else []
            out.append((len(lines), sum(1 for line in lines if line.endswith("(watch)"))))
        return out


def _nodewatch(kubeconfig: str, contexts: list[str], nodes: int, frames: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.multi", "child", "--kubeconfig", kubeconfig, "--nodes", str(nodes),
         "--frames", str(frames), *[a for c in contexts for a in ("--context", c)]],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)


def _result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"nodewatch child exited with {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def _load(served: list[tuple[int, int]]) -> str:
    req = [r for r, _ in served]
    watches = [w for _, w in served]
    return (f"requests {min(req)}-{max(req)} (median {statistics.median(req):g}), "
            f"watches {min(watches)}-{max(watches)} per server")


def run(clusters: int = 20, nodes: int = 3_000, frames: int = 10) -> list[Figure]:
    total = clusters * nodes
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-multi-") as d:
        print(f"  multi: {clusters} sim-servers of {nodes:,} nodes (setup)", file=sys.stderr, flush=True)
        sims = Clusters(clusters, nodes, d)
        try:
            print(f"  multi: one nodewatch over {clusters} clusters", file=sys.stderr, flush=True)
            one = _result(_nodewatch(sims.kubeconfig, sims.names, total, frames))
        finally:
            one_load = sims.stop()
        print(f"  multi: {clusters} sim-servers again (fresh logs)", file=sys.stderr, flush=True)
        sims = Clusters(clusters, nodes, d)
        try:
            print(f"  multi: {clusters} separate nodewatch processes", file=sys.stderr, flush=True)
            children = [_nodewatch(sims.kubeconfig, [name], nodes, frames) for name in sims.names]
            many = [_result(p) for p in children]
        finally:
            many_load = sims.stop()
    slowest = max(m["first"] for m in many)
    frame_many = statistics.median(m["frame"] for m in many)
    rss_many = sum(m["rss"] for m in many)
    ref = f"{clusters} nodewatch processes"
    same_load = one_load == many_load
    return [
        Figure(f"multi: {clusters}x{nodes:,} nodes, one nodewatch -> first frame", f"{one['first']:.1f} s",
               f"<= {TARGET_FIRST_FRAME:g} s", f"{ref}: slowest {slowest:.1f} s", one["first"] <= TARGET_FIRST_FRAME,
               f"from start() to a frame with every node of every cluster; the {clusters} processes start at once"),
        Figure(f"multi: {clusters}x{nodes:,} nodes, one nodewatch -> frame time", f"{one['frame'] * 1000:.0f} ms",
               "<= 1000 ms", f"{ref}: median {frame_many * 1000:.0f} ms each", one["frame"] <= 1.0,
               f"median of {frames} ticks (evaluate + paint), one a second, leases renewing"),
        Figure(f"multi: {clusters}x{nodes:,} nodes, one nodewatch -> peak RSS", f"{one['rss'] / 2**20:.0f} MB",
               "-", f"{ref}: {rss_many / 2**20:.0f} MB in all", None),
        Figure(f"multi: API load per server, one nodewatch of {clusters}", _load(one_load),
               "one watcher's worth", f"{ref}: {_load(many_load)}", same_load,
               "requests and watches each sim-server logged in the round; the same as one LiveSource's"
               + ("" if same_load else f" (NOT the same: {one_load} vs {many_load})")),
    ]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        return child_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.multi")
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=3_000)
    ap.add_argument("--frames", type=int, default=10)
    args = ap.parse_args(argv)
    from .harness import print_table

    print_table(run(args.clusters, args.nodes, args.frames))
    return 0


if __name__ == "__main__":
    sys.exit(main())
