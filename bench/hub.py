"""The hub: attach to first frame, a viewer's memory, the hub's cost per viewer, bytes per viewer,
the flight recorder's bytes per hour, a replay seek across segments, and the API server's load.

``python -m bench.hub [--nodes 65000] [--api-nodes 3000]``. The hub runs in a child process over a
synthetic fleet of production-sized Nodes and Leases (``bench/objects.py``) whose leases renew
every 10 s (``nodes / 10`` renewals a second, the real traffic), recording in 20 s segments. A
viewer (``attach``: ``ViewerSource`` + the headless dashboard) runs in another child. Readers of 1,
10 and 50 viewers are raw protocol clients in this process (they read and drop frames), so the
hub's resident memory and CPU are measured per added viewer. The API server load is measured
against the simulated API server (in this process) with a real ``HubLiveSource``: requests and
bytes it served with 1, 10 and 50 viewers attached, beside a lone ``LiveSource``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SEGMENT = "20s"


# --- the hub child -------------------------------------------------------------------------------------


class SyntheticSource:
    """``nodes`` Nodes listed, then every lease renewed every 10 s, as a live cluster sends them."""

    def __init__(self, nodes: int) -> None:
        from bench.objects import raw_lease, raw_node
        from nodewatch.core.clock import SystemClock
        from nodewatch.core.fleet import FleetState
        from nodewatch.core.settings import Settings
        from nodewatch.core.views import RESOURCES

        self.name = f"bench: {nodes} nodes"
        self.state = FleetState(Settings(server_version="v1.33.2"))
        self.clock = SystemClock()
        self.replay = None
        self.recorder = None
        now = self.clock.now()
        self.names = []
        for i in range(nodes):
            obj = raw_node(i)
            self.names.append(obj["metadata"]["name"])
            self.state.apply("nodes", "ADDED", obj, now, listing=True)
            self.state.apply("leases", "ADDED", raw_lease(obj["metadata"]["name"], now - i % 10), now, listing=True)
        for r in RESOURCES:
            self.state.apply(r, "SYNCED", None, now)
        self._raw_lease = raw_lease
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def focus_node(self, node: str | None) -> None:
        pass

    def _renew(self) -> None:
        n = len(self.names)
        i = 0
        rv = 10_000
        while not self._stop.wait(0.1):
            now = self.clock.now()
            batch = []
            for _ in range(n // 100):  # n/10 a second
                name = self.names[i % n]
                i += 1
                rv += 1
                batch.append(("leases", "MODIFIED", self._raw_lease(name, now, rv), now, False))
            with self.state.batch():
                for b in batch:
                    self.state.apply(*b)
            if self.recorder is not None:
                for b in batch:
                    self.recorder.write(*b)


def hub_child(nodes: int, directory: str) -> None:
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.hub.server import Hub

    src = SyntheticSource(nodes)
    rec = SegmentedRecorder(Path(directory) / "recordings", {"kind": "bench"}, src.state.settings,
                            segment_seconds=20, clock=src.clock, records=src.state.node_records)
    src.recorder = rec
    hub = Hub(src, os.path.join(directory, "hub.sock"))
    hub.start()
    print("READY", flush=True)
    ticks = []
    while sys.stdin.readline().strip() != "quit":
        ticks.append(hub.last_tick_seconds)
    hub.stop()
    rec.close()
    print(json.dumps({"tick_seconds": hub.last_tick_seconds, "ticks": hub.ticks}), flush=True)


# --- the viewer child ----------------------------------------------------------------------------------


def viewer_child(sock: str, nodes: int, seconds: float) -> None:
    import asyncio

    from bench.harness import rss_bytes
    from nodewatch.hub.viewer_source import HubAddress, ViewerSource
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    async def run() -> dict:
        t0 = time.perf_counter()
        v = ViewerSource(HubAddress(path=sock))
        v.start()  # waits for the snapshot
        got_snapshot = time.perf_counter() - t0
        drawn: list[float] = []
        draw = FleetTable.render_line

        def render_line(table: FleetTable, y: int):  # the first node row drawn: the first frame
            if not drawn and table.id == "table" and table.rows:
                drawn.append(time.perf_counter() - t0)
            return draw(table, y)

        FleetTable.render_line = render_line  # type: ignore[method-assign]
        app = NodewatchApp(v, refresh_seconds=1.0)
        async with app.run_test(size=(200, 60)):
            table = app.query_one("#table", FleetTable)
            while not drawn:
                await asyncio.sleep(0.01)
            first = drawn[0]
            rss_first = rss_bytes()
            while len(table.rows) < nodes:
                await asyncio.sleep(0.01)
            full = time.perf_counter() - t0
            rss_full = rss_bytes()
            await asyncio.sleep(seconds)  # streaming, one tick a second
            rss_later = rss_bytes()
            tick = app.last_tick_seconds
        v.stop()
        return {"first_frame": first, "full": full, "snapshot": got_snapshot, "rss_first": rss_first,
                "rss_full": rss_full, "rss_later": rss_later, "tick": tick}

    print(json.dumps(asyncio.run(run())), flush=True)


# --- this process: readers, measurements -----------------------------------------------------------------


class Reader(threading.Thread):
    """A viewer that reads frames and drops them, counting bytes."""

    def __init__(self, sock: str) -> None:
        super().__init__(daemon=True)
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(sock)
        from nodewatch.hub import protocol

        self.s.sendall(protocol.encode({"k": "hello", "v": protocol.VERSION}))  # a viewer once it says hello
        self.bytes = 0
        self.stopped = False

    def run(self) -> None:
        buf = bytearray(1 << 20)
        while not self.stopped:
            try:
                n = self.s.recv_into(buf)
            except OSError:
                return
            if not n:
                return
            self.bytes += n


def proc_rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*") if p.is_file())


def measure_hub(nodes: int, settle: float = 10.0) -> list[str]:
    out = []
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-hub-") as d:
        t_start = time.perf_counter()
        hub = subprocess.Popen([sys.executable, "-m", "bench.hub", "--child", "hub", "--nodes", str(nodes),
                                "--dir", d], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert hub.stdout.readline().strip() == "READY"
        out.append(f"hub ready at {nodes} nodes in {time.perf_counter() - t_start:.1f}s (building the fleet)")
        sock = os.path.join(d, "hub.sock")
        rec_dir = Path(d) / "recordings"
        rec_t0, rec_b0 = time.monotonic(), dir_bytes(rec_dir)
        time.sleep(3)
        base_rss = proc_rss(hub.pid)
        v = subprocess.run([sys.executable, "-m", "bench.hub", "--child", "viewer", "--sock", sock,
                            "--nodes", str(nodes)], capture_output=True, text=True, timeout=300)
        if v.returncode != 0:
            raise RuntimeError(v.stderr[-2000:])
        vr = json.loads(v.stdout.strip().splitlines()[-1])
        out.append(f"attach to first frame ({nodes} nodes, headless 200x60, the worst rows drawn): "
                   f"{vr['first_frame']:.2f}s (target <= 1 s), of which the snapshot's first part received "
                   f"and decoded: {vr['snapshot']:.2f}s; every row in the table: {vr['full']:.2f}s")
        out.append(f"viewer resident memory: {vr['rss_first'] / 2**20:.0f} MB at the first frame, "
                   f"{vr['rss_full'] / 2**20:.0f} MB with every row, {vr['rss_later'] / 2**20:.0f} MB after "
                   f"10 s of stream (target <= 150 MB); viewer tick {vr['tick'] * 1000:.0f} ms")
        readers: list[Reader] = []
        prev_rss, prev_n = proc_rss(hub.pid), 0
        out.append(f"hub resident memory, no viewer: {base_rss / 2**20:.0f} MB")
        for k in (1, 10, 50):
            while len(readers) < k:
                r = Reader(sock)
                r.start()
                readers.append(r)
            time.sleep(3)  # snapshots delivered
            b0 = [r.bytes for r in readers]
            c0, t0 = proc_cpu(hub.pid), time.monotonic()
            time.sleep(settle)
            dt = time.monotonic() - t0
            cpu = (proc_cpu(hub.pid) - c0) / dt * 100
            rss = proc_rss(hub.pid)
            per = sum(r.bytes - b for r, b in zip(readers, b0)) / len(readers) / dt
            added = (rss - prev_rss) / max(1, k - prev_n)
            out.append(f"{k:>2} viewers: hub CPU {cpu:.0f}% of a core, RSS {rss / 2**20:.0f} MB "
                       f"(+{added / 2**20:.2f} MB per added viewer; target <= 5), "
                       f"{per / 1024:.0f} KiB/s to each viewer")
            prev_rss, prev_n = rss, k
        for r in readers:
            r.stopped = True
            r.s.close()
        elapsed = time.monotonic() - rec_t0
        rec_bytes = dir_bytes(rec_dir) - rec_b0
        segs = sorted(rec_dir.glob("*.jsonl.gz"))
        out.append(f"flight recorder: {rec_bytes / elapsed * 3600 / 2**30:.2f} GiB per hour at {nodes} nodes "
                   f"({nodes // 10} renewals/s; {len(segs)} segments of 20 s, keyframe included; "
                   f"measured over {elapsed:.0f} s)")
        hub.stdin.write("quit\n")
        hub.stdin.flush()
        hub.wait(60)
        out.append(replay_seek(str(rec_dir)))
    return out


def replay_seek(directory: str) -> str:
    from nodewatch.sources.replay import ReplaySource
    from nodewatch.sources.segments import list_segments, window

    segs = list_segments(directory)
    t = time.perf_counter()
    src = ReplaySource(directory)
    opened = time.perf_counter() - t
    src.replay.wait_indexed(600)
    indexed = time.perf_counter() - t
    target = segs[len(segs) // 2].start + 5
    t = time.perf_counter()
    src.replay.seek(target)
    seek = time.perf_counter() - t
    events = src.replay.events
    src.stop()
    t = time.perf_counter()
    w, start, _ = window(directory, f"+{target - segs[0].start}", None)
    one = ReplaySource(w, start_at=start)
    windowed = time.perf_counter() - t
    one.stop()
    return (f"replay across {len(segs)} segments ({events} events): open {opened:.1f}s, keyframes "
            f"{indexed:.1f}s, seek into segment {len(segs) // 2 + 1} {seek * 1000:.0f} ms; "
            f"opening only from that segment (--from): {windowed:.1f}s")


def measure_api(nodes: int, settle: float = 5.0) -> list[str]:
    """Requests and bytes the simulated API server served: a lone LiveSource, then a hub with 1, 10
    and 50 viewers (raw readers; three of them drill into a node each)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from simserver import make_fleet, running_server, wait_until  # type: ignore[import-not-found]

    from nodewatch.core.settings import Settings
    from nodewatch.hub.live import HubLiveSource
    from nodewatch.hub.server import Hub
    from nodewatch.sources.live import LiveSource

    def served(srv) -> tuple[int, int, int]:
        """(requests, of which watches, bytes): read after the server stopped, when every watch
        has ended and been logged."""
        log = list(srv.request_log)
        return len(log), sum(1 for r in log if r.watch), sum(r.bytes for r in log)

    out = []
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-api-") as d:
        fleet = dict(nodes=nodes, scenario="steady")  # no node goes NotReady: no scoped watches by chance
        with running_server(Path(d) / "ref", fleet=make_fleet(**fleet), run_fleet=True) as srv:
            src = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=d)
            src.start()
            src.wait_synced(120)
            wait_until(src.watching, timeout=60)
            time.sleep(settle)
            src.stop()
        req, watches, sent = served(srv)
        out.append(f"API server, one nodewatch ({nodes} nodes, {settle:.0f}s): {req} requests, "
                   f"{watches} watches, {sent / 2**20:.1f} MiB")
        for k in (1, 10, 50):
            with running_server(Path(d) / f"hub{k}", fleet=make_fleet(**fleet), run_fleet=True) as srv:
                src = HubLiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=d)
                hub = Hub(src, os.path.join(d, f"hub{k}.sock"))
                hub.start()
                src.wait_synced(120)
                wait_until(src.watching, timeout=60)
                readers = [Reader(hub.socket_path) for _ in range(k)]
                for r in readers:
                    r.start()
                time.sleep(settle)
                hub.stop()
                for r in readers:
                    r.stopped = True
                    r.s.close()
            req, watches, sent = served(srv)
            out.append(f"API server, hub with {k:>2} viewers: {req} requests, {watches} watches, "
                       f"{sent / 2**20:.1f} MiB")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.hub")
    p.add_argument("--nodes", type=int, default=65_000)
    p.add_argument("--api-nodes", type=int, default=3_000)
    p.add_argument("--child", choices=("hub", "viewer"))
    p.add_argument("--dir")
    p.add_argument("--sock")
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args(argv)
    if args.child == "hub":
        hub_child(args.nodes, args.dir)
        return 0
    if args.child == "viewer":
        viewer_child(args.sock, args.nodes, args.seconds)
        return 0
    for line in measure_hub(args.nodes):
        print(line, flush=True)
    for line in measure_api(args.api_nodes):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
