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
import math
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
    """``nodes`` Nodes listed, then every lease renewed every 10 s, as a live cluster sends them.

    On a schedule, not a pace: node ``i``'s Lease was renewed at ``t0 - 10 + 10 i / nodes`` (``t0``
    when the fleet was built) and is renewed again every 10 s from there, each batch catching up
    with the clock (``behind``: renewals late on that schedule at the last batch). Until issue 29's
    130k run it renewed ``nodes / 100`` per 0.1 s wait, which fell behind the fleet's rate as soon as
    a batch took time (at 130k the hub then judged tens of thousands of nodes Late each tick: the
    source, not the hub, was measured); and every listed Lease was up to 10 s old at the build's
    start, 30 s old after building 130,000 Nodes."""

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
        self.t0 = now = self.clock.now()
        self.names = []
        for i in range(nodes):
            obj = raw_node(i)
            self.names.append(obj["metadata"]["name"])
            self.state.apply("nodes", "ADDED", obj, now, listing=True)
        for i, name in enumerate(self.names):  # (listed after the Nodes: their ages as of now)
            now = self.clock.now()
            self.state.apply("leases", "ADDED", raw_lease(name, self.t0 - 10 + 10 * i / nodes), now, listing=True)
        for r in RESOURCES:
            self.state.apply(r, "SYNCED", None, now)
        self.behind = 0
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
        rate = n / 10  # every Lease every 10 s
        k = 0  # renewals made: the k-th renews node k % n
        rv = 10_000
        while not self._stop.wait(0.05):
            now = self.clock.now()
            due = int((now - self.t0) * rate)
            k = max(k, due - n)  # (a whole round behind: skip it)
            batch = []
            template = self._raw_lease("template", now)  # the batch's times, formatted once
            spec, meta = template["spec"], template["metadata"]
            while k < due and len(batch) < n // 20:  # (at most half a second's worth a batch)
                name = self.names[k % n]
                k += 1
                rv += 1
                # the same object ``raw_lease(name, now, rv)`` builds, from the batch's shared parts
                # (a fresh dict per event: a recorder may hold it), 1.5 us instead of 7
                lease = {**template, "spec": {**spec, "holderIdentity": name},
                         "metadata": {**meta, "name": name, "uid": f"lease-{name}", "resourceVersion": str(rv),
                                      "ownerReferences": [{**meta["ownerReferences"][0], "name": name,
                                                           "uid": f"uid-{name}"}]}}
                batch.append(("leases", "MODIFIED", lease, now, False))
            self.behind = due - k
            with self.state.batch():
                for b in batch:
                    self.state.apply(*b)
            if self.recorder is not None:
                for b in batch:
                    self.recorder.write(*b)


def hub_child(nodes: int, directory: str, segment: float = 20) -> None:
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.hub.server import Hub

    src = SyntheticSource(nodes)
    rec = SegmentedRecorder(Path(directory) / "recordings", {"kind": "bench"}, src.state.settings,
                            segment_seconds=segment, clock=src.clock, records=src.state.node_records)
    src.recorder = rec
    hub = Hub(src, os.path.join(directory, "hub.sock"))
    hub.start()
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        if line.strip() == "stats":
            vs = hub.viewer_stats()
            print(json.dumps({"ticks": hub.ticks, "tick_seconds": hub.last_tick_seconds,
                              "delta_bytes": getattr(hub, "last_frame_bytes", 0), "snapshot_bytes": len(hub.snapshot()[1]),
                              "viewers": len(vs), "source_behind": src.behind, "snapshots": sum(v["snapshots"] for v in vs),
                              "dropped": sum(v["dropped"] for v in vs)}), flush=True)
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


# --- issue 29: a hub at 130,000 nodes with 50 viewers -------------------------------------------------

SCALE_NODES = 130_000
SCALE_VIEWERS = 50
SCALE_ATTACHES = 3
"""Of the viewers, real ``nodewatch attach`` processes (in tmux); the rest run the viewer's own
connection and state code (``ViewerSource`` + ``ViewerState``) headless, ``DECODERS_PER_PROCESS``
to a child process."""
DECODERS_PER_PROCESS = 12
SCALE_SEGMENT = 900.0
"""The hub's default segment (15 min): a segment's keyframe is written by the thread that writes
the event that opens it (``flight_recorder.SegmentedRecorder.write``), and at 130k one took the
renewer seconds every 20 s segment: the scale run measured that source's lag (117,750 renewals
behind) instead of the hub's steady state."""
TARGET_ATTACH = 1.0
TARGET_VIEWER_MB = 150


def decoders_child(sock: str, k: int, nodes: int) -> None:
    """``k`` headless viewers: each a ``ViewerSource`` (the code ``nodewatch attach`` runs: its
    connection thread, the frame decoding and ``ViewerState``) and the dashboard's tick, one
    ``evaluate`` a second (applying the frames received, building the snapshot it would draw), on a
    thread of its own instead of Textual's. Commands on stdin: ``mark`` (start the measured window),
    ``report`` (print it as JSON), ``quit``."""
    from nodewatch.hub.address import HubAddress
    from nodewatch.hub.viewer_source import ViewerSource

    class Probe:
        def __init__(self) -> None:
            self.t0 = time.perf_counter()
            self.src = ViewerSource(HubAddress(path=sock), reconnect_for=600.0, first_frame_timeout=120.0)
            self.deltas: list[float] = []
            self.first = self.full = -1.0
            receive = self.src.state.receive

            def timed(msg: dict) -> None:
                receive(msg)
                if msg["k"] == "delta":
                    self.deltas.append(time.perf_counter())

            self.src.state.receive = timed  # type: ignore[method-assign]

        def start(self) -> None:
            self.src.start()  # returns once the first part of the snapshot is decoded: the first rows
            self.first = time.perf_counter() - self.t0

        def tick(self) -> None:
            view = self.src.state.evaluate(self.src.clock.now())
            if self.full < 0 and len(view.nodes) >= nodes and not self.src.state.loading:
                self.full = time.perf_counter() - self.t0

    probes = [Probe() for _ in range(k)]
    starters = [threading.Thread(target=p.start) for p in probes]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    stop = threading.Event()

    def ticker() -> None:  # as the dashboard: a tick a second (every 0.1 s until every node is in)
        while not stop.wait(1.0 if all(p.full >= 0 for p in probes) else 0.1):
            for p in probes:
                p.tick()

    threading.Thread(target=ticker, daemon=True).start()
    mark_cpu, mark_t = time.process_time(), time.perf_counter()
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "mark":
            for p in probes:
                p.deltas.clear()
            mark_cpu, mark_t = time.process_time(), time.perf_counter()
        elif cmd == "report":
            dt = time.perf_counter() - mark_t
            print(json.dumps({
                "first": [p.first for p in probes], "full": [p.full for p in probes],
                "intervals": [b - a for p in probes for a, b in zip(p.deltas, p.deltas[1:])],
                "frames": [len(p.deltas) for p in probes], "cpu": (time.process_time() - mark_cpu) / dt,
                "rss": proc_rss(os.getpid()), "connections": [p.src.connections for p in probes],
            }), flush=True)
        elif cmd == "quit":
            break
    stop.set()
    for p in probes:
        p.src.stop()


class AttachPane:
    """One real ``nodewatch attach`` in a private tmux server of its own (200x60), timed from its
    command: the first node row on its screen, and the complete frame (the header counts every node
    and the hub stream is ok, i.e. the snapshot's last part is in)."""

    def __init__(self, sock: str, nodes: int) -> None:
        from bench.start import Tmux

        self.t0 = time.perf_counter()
        self.nodes = nodes
        self.tmux = Tmux.__new__(Tmux)
        self.tmux.socket = f"nodewatch-bench-hub-{os.getpid()}-{id(self)}"
        self.tmux._tmux(["-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", "200", "-y", "60", "-c", os.getcwd(),
                         f"exec {sys.executable} -m nodewatch attach {sock}"])
        self.pid = int(self.tmux._tmux(["display", "-p", "-t", "b", "#{pane_pid}"]).strip())
        self.first_row = self.complete = -1.0

    def wait(self, timeout: float = 300) -> None:
        total = f"{self.nodes:,} nodes"
        while self.complete < 0:
            now = time.perf_counter() - self.t0
            if now > timeout:
                raise RuntimeError(f"attach: no complete frame within {timeout:.0f} s:\n{self.tmux.screen()}")
            lines = self.tmux.screen().splitlines()
            if self.first_row < 0 and any(line.lstrip("✓✗!~?»✖ ").split(" ", 1)[0] in ("Ready", "Late")
                                          and "ip-10-" in line for line in lines[5:]):
                self.first_row = now
            header = lines[1] if len(lines) > 1 else ""
            if self.first_row >= 0 and total in header and "hub:ok" in header:
                self.complete = now
            time.sleep(0.02)

    def memory(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) of the attach process, bytes."""
        from bench.process_memory import _status

        s = _status(self.pid)
        return s.get("VmRSS", 0), s.get("VmHWM", 0)

    def close(self) -> None:
        self.tmux.close()


class HubChild:
    def __init__(self, nodes: int, directory: str) -> None:
        t = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.hub", "--child", "hub", "--nodes", str(nodes),
                                      "--dir", directory, "--segment", str(SCALE_SEGMENT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "READY"
        self.built = time.perf_counter() - t
        self.sock = os.path.join(directory, "hub.sock")

    def stats(self) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def quit(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(120)


class Decoders:
    def __init__(self, sock: str, k: int, nodes: int) -> None:
        self.k = k
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.hub", "--child", "decoders", "--sock", sock,
                                      "--viewers", str(k), "--nodes", str(nodes)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def report(self) -> dict:
        self.send("report")
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def quit(self) -> None:
        self.send("quit")
        self.proc.wait(60)


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def measure_scale(nodes: int, viewers: int, attaches: int, settle: float = 15.0, full_within: float = 180.0) -> None:
    """One hub of ``nodes``: first one real attach alone (the 1-viewer reference), then ``viewers``
    at once (``attaches`` real ones, the rest headless decoders), measured over ``settle`` s. Prints
    each figure as it is measured."""

    class Out:
        def append(self, line: str) -> None:
            print(line, flush=True)

    out = Out()
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-hubscale-") as d:
        hub = HubChild(nodes, d)
        out.append(f"[{nodes:,} nodes] hub built its fleet in {hub.built:.0f} s; {_load()}")
        time.sleep(3)
        base_rss = proc_rss(hub.proc.pid)
        # the reference: one viewer, alone
        alone = []
        for _ in range(2):
            a = AttachPane(hub.sock, nodes)
            a.wait()
            time.sleep(2)
            alone.append((a.first_row, a.complete, *a.memory()))
            a.close()
            time.sleep(1)
        out.append(f"[{nodes:,} nodes, 1 viewer] attach, from the command to the first row: "
                   + ", ".join(f"{x[0]:.2f}" for x in alone) + " s; to every row: "
                   + ", ".join(f"{x[1]:.2f}" for x in alone) + " s; viewer RSS "
                   + ", ".join(f"{x[2] / 2**20:.0f}" for x in alone) + " MB (peak "
                   + ", ".join(f"{x[3] / 2**20:.0f}" for x in alone) + f" MB); {_load()}")
        # the many
        headless = viewers - attaches
        groups = [Decoders(hub.sock, min(DECODERS_PER_PROCESS, headless - i), nodes)
                  for i in range(0, headless, DECODERS_PER_PROCESS)]
        reports = [g.report() for g in groups]  # (each answers once its viewers have their first part)
        t = time.perf_counter()
        while any(min(r["full"]) < 0 for r in reports) and time.perf_counter() - t < full_within:
            time.sleep(1)
            reports = [g.report() for g in groups]
        first = [x for r in reports for x in r["first"]]
        full = [x if x >= 0 else float("inf") for r in reports for x in r["full"]]
        if math.inf in full:
            out.append(f"[{nodes:,} nodes] {full.count(math.inf)} of {headless} headless viewers still without "
                       f"every node {full_within:.0f} s after their first part")
        out.append(f"[{nodes:,} nodes, {headless} headless viewers attached at once] connect to first part "
                   f"decoded: median {_q(first, .5):.2f} s, p95 {_q(first, .95):.2f} s; to every node: median "
                   f"{_q(full, .5):.2f} s, p95 {_q(full, .95):.2f} s; {_load()}")
        panes = []
        for _ in range(attaches):
            a = AttachPane(hub.sock, nodes)
            a.wait()
            panes.append(a)
        out.append(f"[{nodes:,} nodes, {viewers} viewers] attach with {headless}+ attached, from the command "
                   f"to the first row: " + ", ".join(f"{a.first_row:.2f}" for a in panes) + " s; to every row: "
                   + ", ".join(f"{a.complete:.2f}" for a in panes) + f" s; {_load()}")
        time.sleep(3)
        for g in groups:
            g.send("mark")
        s0 = hub.stats()
        c0, t0 = proc_cpu(hub.proc.pid), time.monotonic()
        time.sleep(settle)
        dt = time.monotonic() - t0
        cpu = (proc_cpu(hub.proc.pid) - c0) / dt * 100
        s1 = hub.stats()
        rss = proc_rss(hub.proc.pid)
        reports = [g.report() for g in groups]
        mem = [a.memory() for a in panes]
        intervals = [x for r in reports for x in r["intervals"]]
        dec_cpu = sum(r["cpu"] for r in reports) / headless * 100
        dec_rss = sum(r["rss"] for r in reports) / headless
        ticks = s1["ticks"] - s0["ticks"]
        out.append(f"[{nodes:,} nodes, {viewers} viewers] viewer RSS (real attach): "
                   + ", ".join(f"{m[0] / 2**20:.0f}" for m in mem) + " MB, peak "
                   + ", ".join(f"{m[1] / 2**20:.0f}" for m in mem) + f" MB (target <= {TARGET_VIEWER_MB}); "
                   f"headless viewer: {dec_cpu:.1f}% of a core each, {dec_rss / 2**20:.0f} MB each "
                   f"({DECODERS_PER_PROCESS} to a process, the interpreter shared)")
        out.append(f"[{nodes:,} nodes, {viewers} viewers] frame interval seen by the headless viewers over "
                   f"{dt:.0f} s: median {_q(intervals, .5) * 1000:.0f} ms, p95 {_q(intervals, .95) * 1000:.0f} ms, "
                   f"max {max(intervals, default=float('nan')) * 1000:.0f} ms ({len(intervals)} intervals); "
                   f"snapshots re-sent in the window: {s1['snapshots'] - s0['snapshots']}, dropped "
                   f"{s1['dropped'] - s0['dropped']}")
        out.append(f"[{nodes:,} nodes, {viewers} viewers] hub CPU {cpu:.0f}% of a core ({ticks} ticks, last "
                   f"{s1['tick_seconds'] * 1000:.0f} ms), RSS {rss / 2**20:.0f} MB (no viewer: "
                   f"{base_rss / 2**20:.0f} MB); delta frames {s1['delta_bytes'] / 1024:.0f} KiB, snapshot "
                   f"{s1['snapshot_bytes'] / 2**20:.1f} MiB; the source {s1['source_behind']} renewals behind its schedule "
                   f"({nodes // 10}/s); {_load()}")
        for a in panes:
            a.close()
        for g in groups:
            g.quit()
        hub.quit()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.hub")
    p.add_argument("--nodes", type=int)
    p.add_argument("--api-nodes", type=int, default=3_000)
    p.add_argument("--child", choices=("hub", "viewer", "decoders"))
    p.add_argument("--scale", action="store_true",
                   help="issue 29: the hub at --nodes (default 130,000) with --viewers (50), beside 1 viewer and 1,000 nodes")
    p.add_argument("--viewers", type=int, default=SCALE_VIEWERS)
    p.add_argument("--attaches", type=int, default=SCALE_ATTACHES)
    p.add_argument("--dir")
    p.add_argument("--sock")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--segment", type=float, default=20.0, help="the hub child's recording segment (seconds)")
    args = p.parse_args(argv)
    if args.child == "decoders":
        decoders_child(args.sock, args.viewers, args.nodes)
        return 0
    if args.scale:
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {_load()}", flush=True)
        for n in (1_000, args.nodes or SCALE_NODES):
            measure_scale(n, args.viewers, args.attaches)
        return 0
    args.nodes = args.nodes or 65_000
    if args.child == "hub":
        hub_child(args.nodes, args.dir, args.segment)
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
