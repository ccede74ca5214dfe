"""Several clusters: twenty simulated clusters of 3,000 nodes in one nodewatch and in one hub,
beside twenty separate nodewatch processes, in the same run.

Each cluster is a ``nodewatch sim-server`` (scenario ``steady``: kubelets renew their leases every
10 s) in its own process on loopback, logging every request it serves. One kubeconfig has a
context per server. Three rounds, each on freshly started servers (so each server's log holds one
round's requests only):

- one nodewatch: a child process runs the headless dashboard (``NodewatchApp``, 200x60) over a
  ``MultiSource`` of every context. First frame: from ``start()`` until every cluster has listed
  its nodes and leases and the table shows every node of every cluster. Frame time: the median of
  ``frames`` ticks (evaluate + paint), one a second, while the leases renew. Memory: its peak RSS
  (``VmHWM``) plus the largest peak of the child processes that read Node lists for it
  (``sources/list_worker``; an upper bound).
- twenty nodewatch: twenty such children at once, each over one context (``LiveSource``): the
  slowest first frame, the median of their frame times, the sum of their peak RSS.
- one hub: ``nodewatch hub --all-contexts`` (a process, recording as a hub does) and one viewer, a
  child running the same headless dashboard over ``ViewerSource`` (what ``nodewatch attach``
  runs), started with the hub. First frame: from the hub's launch until the viewer's table shows
  every node of every cluster. Frame time: the viewer's, as above. Memory: the hub's peak RSS with
  its list workers' (read from /proc while it runs, ``process_memory.TreePeak``) and the viewer's.
- API load per server, from the servers' logs once they stopped: requests and watches each round
  made to each server. One nodewatch, or one hub, of several clusters should cost each server
  exactly what one watcher of that cluster costs.

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
from .process_memory import TreePeak, _status

ROOT = Path(__file__).resolve().parent.parent
SIZE = (200, 60)
TARGET_FIRST_FRAME = 30.0
"""Seconds to the first complete frame of all clusters in one nodewatch (60,000 nodes)."""


# --- the nodewatch child ------------------------------------------------------------------------


async def _child(kubeconfig: str, contexts: list[str], nodes: int, frames: int, hub: str | None = None,
                 since: float | None = None) -> dict:
    """``hub``: a hub's socket to attach to (``since``: when the hub was launched, the epoch
    time the first frame is measured from)."""
    from nodewatch.core.settings import Settings
    from nodewatch.hub.viewer_source import ViewerSource, parse_address
    from nodewatch.sources.live import LiveSource
    from nodewatch.sources.multi import MultiSource
    from nodewatch.sources.multi_config import specs_from_contexts
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    if hub is not None:
        src = ViewerSource(parse_address(hub), reconnect_for=600.0)
        listed = lambda: True  # noqa: E731 - a viewer applies the hub's frames when the dashboard ticks
    elif len(contexts) == 1:
        src = LiveSource(Settings(), kubeconfig=kubeconfig, context=contexts[0])
        listed = lambda: not src.not_listed()  # noqa: E731
    else:
        src = MultiSource(specs_from_contexts(contexts, kubeconfig), Settings())
        listed = lambda: all(src.settled().values())  # noqa: E731
    app = NodewatchApp(src, refresh_seconds=3600)  # ticks only when told: the frames measured are ours
    t0 = time.perf_counter() - (time.time() - since if since is not None else 0.0)
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
            times, cpu = [], []
            for _ in range(frames):
                await asyncio.sleep(1.0)
                t, c = time.perf_counter(), time.thread_time()
                app.tick()
                await pilot.pause()
                times.append(time.perf_counter() - t)
                cpu.append(time.thread_time() - c)
    finally:
        src.stop()
    from nodewatch.sources import list_worker

    # with the largest child that read a Node list (an upper bound: the two peaks need not coincide)
    return {"first": first, "frame": statistics.median(times), "frame_cpu": statistics.median(cpu),
            "rss": _peak_rss() + max(list_worker.peaks, default=0)}


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig")
    ap.add_argument("--context", action="append", default=[])
    ap.add_argument("--hub", metavar="SOCKET", help="attach to the hub on this socket instead (a viewer)")
    ap.add_argument("--since", type=float, help="with --hub: when the hub was launched (epoch seconds)")
    ap.add_argument("--nodes", type=int, required=True, help="nodes expected on screen")
    ap.add_argument("--frames", type=int, default=10)
    args = ap.parse_args(argv)
    print(json.dumps(asyncio.run(_child(args.kubeconfig, args.context, args.nodes, args.frames, args.hub,
                                        args.since))), flush=True)
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
            out.append(_served(lines))
        return out


def _nodewatch(kubeconfig: str, contexts: list[str], nodes: int, frames: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.multi", "child", "--kubeconfig", kubeconfig, "--nodes", str(nodes),
         "--frames", str(frames), *[a for c in contexts for a in ("--context", c)]],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)


def _hub(kubeconfig: str, directory: str, log: Path) -> subprocess.Popen:
    """``nodewatch hub`` over every context of ``kubeconfig``, serving ``directory``: its banner on
    ``stdout`` (a pipe), its errors in ``log``."""
    with open(log, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "nodewatch", "hub", "--dir", directory, "--kubeconfig", kubeconfig,
             "--all-contexts"],
            stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)


def _viewer(directory: str, nodes: int, frames: int, since: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.multi", "child", "--hub", os.path.join(directory, "hub.sock"),
         "--since", repr(since), "--nodes", str(nodes), "--frames", str(frames)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)


def _peak_rss(pid: int | str = "self") -> int:
    """Peak resident size (``VmHWM``) of a running process, or of this one."""
    return _status(pid)["VmHWM"]


def _one_hub(kubeconfig: str, directory: str, nodes: int, frames: int) -> tuple[dict, float, int]:
    """The hub round: (the viewer's result, seconds from the hub's launch until it serves, its peak RSS)."""
    since = time.time()
    log = Path(directory + ".log")
    hub = _hub(kubeconfig, directory, log)
    tree = TreePeak(hub)  # the hub with its list workers' child processes
    try:
        child = _viewer(directory, nodes, frames, since)
        hub.stdout.readline()  # type: ignore[union-attr] - the banner's first line: its socket accepts viewers
        serving = time.time() - since
        viewer = _result(child)
        if hub.poll() is not None:
            raise RuntimeError(f"the hub exited with {hub.returncode}: {log.read_text()[-2000:]}")
        rss = max(_peak_rss(hub.pid), tree.together)
    finally:
        hub.send_signal(signal.SIGTERM)
        try:
            hub.wait(60)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait()
        hub.stdout.close()  # type: ignore[union-attr]
    return viewer, serving, rss


def _result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"nodewatch child exited with {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def _served(lines: list[str]) -> tuple[int, int]:
    """(requests, watches) of one sim-server's log, a Node list read by a child process counted as
    the one stream it replaces: the child's streaming list ends at the end of the initial events
    and the dashboard's watch of the Nodes goes on from there, two requests where a list read in
    the dashboard's process goes on as the watch on the same one (``sources/list_worker``)."""
    requests = len(lines)
    watches = sum(1 for line in lines if line.endswith("(watch)"))
    node_lists = sum(1 for line in lines if " /api/v1/nodes?" in line and "sendInitialEvents=true" in line)
    node_watches = sum(1 for line in lines if " /api/v1/nodes?" in line and line.endswith("(watch)")
                       and "sendInitialEvents" not in line and "fieldSelector" not in line)
    split = min(node_lists, node_watches)
    return requests - split, watches - split


def _load(served: list[tuple[int, int]]) -> str:
    req = [r for r, _ in served]
    watches = [w for _, w in served]
    return (f"requests {min(req)}-{max(req)} (median {statistics.median(req):g}), "
            f"watches {min(watches)}-{max(watches)} per server")


def run(clusters: int = 20, nodes: int = 3_000, frames: int = 10) -> list[Figure]:
    total = clusters * nodes
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-multi-") as d:

        def round_(what: str, measure):
            """(``measure(sims)`` on freshly started sim-servers, the load each server logged): fresh
            servers, so that their logs hold this round's requests only."""
            print(f"  multi: {clusters} sim-servers of {nodes:,} nodes (setup)", file=sys.stderr, flush=True)
            sims = Clusters(clusters, nodes, d)
            try:
                print(f"  multi: {what}", file=sys.stderr, flush=True)
                result = measure(sims)
            finally:
                load = sims.stop()
            return result, load

        one, one_load = round_(f"one nodewatch over {clusters} clusters",
                               lambda sims: _result(_nodewatch(sims.kubeconfig, sims.names, total, frames)))
        many, many_load = round_(f"{clusters} separate nodewatch processes", lambda sims: [
            _result(p) for p in [_nodewatch(sims.kubeconfig, [name], nodes, frames) for name in sims.names]])
        (viewer, serving, hub_rss), hub_load = round_(
            f"one hub over {clusters} clusters, one viewer",
            lambda sims: _one_hub(sims.kubeconfig, os.path.join(d, "hub"), total, frames))
    slowest = max(m["first"] for m in many)
    frame_many = statistics.median(m["frame"] for m in many)
    cpu_many = statistics.median(m["frame_cpu"] for m in many)
    rss_many = sum(m["rss"] for m in many)
    ref = f"{clusters} nodewatch processes"
    same_load = one_load == many_load
    hub_same_load = hub_load == one_load
    return [
        Figure(f"multi: {clusters}x{nodes:,} nodes, one nodewatch -> first frame", f"{one['first']:.1f} s",
               f"<= {TARGET_FIRST_FRAME:g} s", f"{ref}: slowest {slowest:.1f} s", one["first"] <= TARGET_FIRST_FRAME,
               f"from start() to a frame with every node of every cluster; the {clusters} processes start at once"),
        Figure(f"multi: {clusters}x{nodes:,} nodes, one nodewatch -> frame time",
               f"{one['frame_cpu'] * 1000:.0f} ms CPU ({one['frame'] * 1000:.0f} ms wall)", "<= 1000 ms CPU",
               f"{ref}: median {cpu_many * 1000:.0f} ms CPU ({frame_many * 1000:.0f} ms wall) each",
               one["frame_cpu"] <= 1.0,
               f"median of {frames} ticks (evaluate + paint), one a second, leases renewing; CPU: the UI "
               f"thread's own time, wall: with the {clusters} sim-servers sharing this machine's cores"),
        Figure(f"multi: {clusters}x{nodes:,} nodes, one nodewatch -> peak RSS", f"{one['rss'] / 2**20:.0f} MB",
               "-", f"{ref}: {rss_many / 2**20:.0f} MB in all", None),
        Figure(f"multi: API load per server, one nodewatch of {clusters}", _load(one_load),
               "one watcher's worth", f"{ref}: {_load(many_load)}", same_load,
               "requests and watches each sim-server logged in the round; the same as one LiveSource's"
               + ("" if same_load else f" (NOT the same: {one_load} vs {many_load})")),
        Figure(f"multi: {clusters}x{nodes:,} nodes, one hub -> viewer first frame", f"{viewer['first']:.1f} s",
               f"<= {TARGET_FIRST_FRAME:g} s", f"one nodewatch: {one['first']:.1f} s; {ref}: slowest {slowest:.1f} s",
               viewer["first"] <= TARGET_FIRST_FRAME,
               f"from the hub's launch to a viewer frame with every node of every cluster (the viewer started with "
               f"it); {serving:.1f} s of it until the hub served (its interpreter start and imports, which the "
               "nodewatch figures do not include: they count from start())"),
        Figure(f"multi: {clusters}x{nodes:,} nodes, one hub -> viewer frame time",
               f"{viewer['frame_cpu'] * 1000:.0f} ms CPU ({viewer['frame'] * 1000:.0f} ms wall)", "<= 1000 ms CPU",
               f"one nodewatch: {one['frame_cpu'] * 1000:.0f} ms CPU", viewer["frame_cpu"] <= 1.0,
               f"median of {frames} viewer ticks (apply the hub's frames + paint), one a second"),
        Figure(f"multi: {clusters}x{nodes:,} nodes, one hub -> peak RSS", f"hub {hub_rss / 2**20:.0f} MB, "
               f"viewer {viewer['rss'] / 2**20:.0f} MB", "-",
               f"one nodewatch: {one['rss'] / 2**20:.0f} MB; {ref}: {rss_many / 2**20:.0f} MB in all", None,
               "the hub records as it always does (flight recorder on)"),
        Figure(f"multi: API load per server, one hub of {clusters}", _load(hub_load),
               "one watcher's worth", f"one nodewatch: {_load(one_load)}", hub_same_load,
               "requests and watches each sim-server logged in the round; the same as one nodewatch's"
               + ("" if hub_same_load else f" (NOT the same: {hub_load} vs {one_load})")),
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
