"""Seek in a flight recording at 65,000 nodes: one 15-minute segment written quickly, then timed.

``python -m bench.recorder_seek [--nodes 65000] [--minutes 15] [--dir /tmp/nodewatch-seek-65000]
[--at 0.05,0.5,0.97] [--regen] [--no-jsonl] [--replay]``.

Why a generator of its own: a seek only needs what a hub's segment holds, so this writes it
directly, without ``SimFleet``'s virtual time (``bench.recorder``), through the real writer (``SegmentedRecorder``, both
formats, as ``bench.recorder`` does): ``SimFleet``'s initial Nodes and Leases (random UIDs), then
each kubelet renewing its Lease every 10 s with the kubelet's 4 % jitter, renewTime on its node's
clock (a skew of up to 0.2 s), the API server's resourceVersion (one counter) and ``managedFields``
entry (``bench.recorder._api_shaped``: what the sanitizer keeps), received 1 ms plus an exponential
delay of mean 4 ms later, in receive order (as a watch delivers); each Node's status update (its
heartbeat times) every 5 minutes at its own phase. The first segment is the initial list and 12 s
of renewals; then the recorder rotates (``rotate(keyframe=True)``), so the timed segment starts as a
hub's does, with a rotation keyframe (Nodes from the state's records, each Lease's last line), and
runs ``minutes`` (15: a hub's segment). The two writers' own cost dominates (15 minutes at 65,000
nodes took 22 minutes of wall time on a loaded machine, like ``bench.recorder``'s 16), so the
recording is kept in ``--dir`` between runs (``--regen`` writes it again).

Timed, each beside a reference measured in the same run:
- ``replay.state_at`` (in process, CPU seconds) at instants through the segment (``--at``, fractions
  of it; late in a segment is the worst case), on the columnar directory and on the JSON Lines one;
- ``status --replay DIR --at T --format json`` as a child process (wall and CPU), both directories,
  the two answers compared byte for byte;
- the bare floor of the columnar read: zstd decompression of the segment up to ``T`` and a walk of
  its blocks by their length prefix (no row decoded);
- the same seek in a directory of 96 segments (24 h: the 94 before are hard links named earlier,
  never opened by a seek into the last one): the recording's length costs one directory listing;
- with ``--replay``: ``nodewatch replay``'s source on the columnar directory (a child process), its
  index and keyframes built in full, then eight seeks back and forth (the slowest against the
  ``state_at`` figures of the same run) and the process's peak RSS (its keyframes keep to a budget:
  ``replay/keyframes.py``).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import time
from typing import Any

from .harness import Figure

SEGMENT = 15 * 60.0
RENEW = 10.0
JITTER = 0.04
NODE_STATUS = 300.0
_HEARTBEATS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")


def generate(base: str, nodes: int, minutes: float, seed: int = 5, jsonl: bool = True) -> dict:
    """Both formats' directories under ``base``; returns what was written (counts, the timed segment's
    start and end)."""
    from nodewatch.core.clock import ManualClock
    from nodewatch.core.fleet import FleetState
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.sim.fleet import SimFleet

    from .recorder import _api_shaped, hub_time

    fleet = SimFleet(nodes=nodes, scenario="steady", seed=seed)
    t0 = fleet.now
    clock = ManualClock(t0)
    state = FleetState(fleet.settings)
    formats = ("columnar", "jsonl") if jsonl else ("columnar",)
    recs = [SegmentedRecorder(os.path.join(base, fmt), {"name": f"seek bench {nodes}"}, fleet.settings,
                              keep_seconds=None, keep_bytes=None, clock=clock, records=state.node_records,
                              record_format=fmt) for fmt in formats]
    rng = random.Random(seed)
    rv = 10_000

    def write(res: str, etype: str, obj: dict | None, t: float, listing: bool = False) -> None:
        for r in recs:
            r.write(res, etype, obj, t, listing)

    node_objs = fleet.objects("nodes")
    lease_objs = fleet.objects("leases")
    del fleet
    for res, objs in (("nodes", node_objs), ("leases", lease_objs)):
        for obj in objs:
            rv += 1
            obj = _api_shaped(res, obj, rv)
            if res == "nodes":
                state.apply("nodes", "ADDED", obj, t0, listing=True)
            write(res, "ADDED", obj, t0, listing=True)
        write(res, "SYNCED", None, t0)
    for res in ("pods", "events", "certificatesigningrequests"):
        write(res, "SYNCED", None, t0)
    skew = [rng.uniform(-0.2, 0.2) for _ in range(nodes)]
    heap: list[tuple[float, int, int]] = []
    for i in range(nodes):
        heap.append((t0 + rng.uniform(0, RENEW), 0, i))
        heap.append((t0 + rng.uniform(0, NODE_STATUS), 1, i))
    heapq.heapify(heap)
    rotate_at = t0 + 12.0
    end = rotate_at + minutes * 60 - 1.0  # the timed segment: no rotation inside it
    counts = {"renewals": 0, "node_updates": 0}
    carry: list[tuple[float, int, int, float]] = []
    rotated = False
    w = t0
    while w < end:
        w_end = min(end, w + 1.0)
        batch = carry
        while heap and heap[0][0] < w_end:
            at, kind, i = heapq.heappop(heap)
            batch.append((hub_time(at + 0.001 + min(0.1, rng.expovariate(1 / 0.004))), kind, i, at))
            heapq.heappush(heap, (at + (RENEW * (1 + rng.uniform(0, JITTER)) if kind == 0 else NODE_STATUS), kind, i))
        batch.sort()
        carry = [e for e in batch if e[0] >= w_end]  # received in the next second: written in order there
        for rx, kind, i, at in batch:
            if rx >= w_end:
                continue
            if not rotated and rx >= rotate_at:
                clock.set(rotate_at)
                for r in recs:
                    r.rotate(rotate_at, keyframe=True)
                rotated = True
            clock.set(rx)
            rv += 1
            node_t = at + skew[i]
            if kind == 0:
                lease = lease_objs[i]
                spec = dict(lease["spec"])
                spec["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(node_t)) + f".{int(node_t % 1 * 1e6):06d}Z"
                obj = _api_shaped("leases", {**lease, "spec": spec}, rv)
                write("leases", "MODIFIED", obj, rx)
                counts["renewals"] += 1
            else:
                node = node_objs[i]
                beat = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(node_t))
                status = dict(node["status"])
                status["conditions"] = [dict(c, lastHeartbeatTime=beat) if c.get("type") in _HEARTBEATS else c
                                        for c in status["conditions"]]
                node = node_objs[i] = {**node, "status": status}
                obj = _api_shaped("nodes", node, rv)
                state.apply("nodes", "MODIFIED", obj, rx)
                write("nodes", "MODIFIED", obj, rx)
                counts["node_updates"] += 1
        w = w_end
    for r in recs:
        r.close()
    return {"counts": counts, "start": rotate_at, "end": end, "nodes": nodes, "minutes": minutes}


def _segments(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.startswith("nodewatch-"))


def bare_scan(path: str, upto: float) -> int:
    """The floor of a columnar seek: the segment decompressed up to ``upto`` (a block's time is its
    first row's: read from the rx column's first value) and its blocks walked by length; no row
    decoded. Returns the blocks walked."""
    import zstandard

    from nodewatch.sources.columnar import MAGIC, _unpack

    with open(path, "rb") as f:
        f.read(len(MAGIC))
        data = zstandard.ZstdDecompressor().decompressobj().decompress(f.read())
    pos, blocks, t_us = 0, 0, 0
    while pos + 8 <= len(data):
        n, _ = struct.unpack_from("<II", data, pos)
        body = memoryview(data)[pos + 8:pos + 8 + n]
        pos += 8 + n
        blocks += 1
        if blocks > 1 and body[:1] != b"{":
            rows = struct.unpack_from("<I", body, 0)[0]
            size = struct.unpack_from("<I", body, 12 + 4 + rows)[0]
            rx = _unpack(body[12 + 4 + rows + 4:12 + 4 + rows + 4 + size], rows)
            t_us += sum(rx)
            if t_us / 1e6 > upto:
                break
    return blocks


def _cpu(fn: Any, *args: Any, **kw: Any) -> tuple[float, Any]:
    c = time.process_time()
    out = fn(*args, **kw)
    return time.process_time() - c, out


def _status(d: str, at: str) -> tuple[float, float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "nodewatch", "status", "--replay", d, "--at", at, "--format", "json"],
                       stdout=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p.stdout


def replay_child(d: str, offsets: list[float]) -> dict:
    """In a process of its own: ``nodewatch replay``'s source on ``d`` (a ``ReplaySource``), its index
    and keyframes built in full, then a seek to each offset (seconds from the recording's start), in
    that order; the seeks' wall times, the build's, the keyframes' count, spacing and estimated bytes,
    and the process's peak RSS."""
    from nodewatch.sources.replay import ReplaySource

    w = time.perf_counter()
    src = ReplaySource(d, background=True)
    player = src.replay
    while not player.wait_indexed(5):
        pass
    built = time.perf_counter() - w
    start = player.index.start
    seeks = []
    for off in offsets:
        t = time.perf_counter()
        player.seek(start + off)
        seeks.append(time.perf_counter() - t)
    k = player.keyframes
    out = {"built": built, "seeks": seeks, "keyframes": len(k), "every": k.every, "bytes": k.bytes,
           "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    src.stop()
    return out


def _replay(d: str, offsets: list[float]) -> dict:
    p = subprocess.run([sys.executable, "-m", "bench.recorder_seek", "replay-child", d,
                        ",".join(f"{o:g}" for o in offsets)], stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def day_dir(base: str) -> str:
    """A directory of 96 segments: the generated ones, and 94 hard links named 15 minutes apart before them."""
    from nodewatch.sources.segments import list_segments, segment_name

    src = os.path.join(base, "columnar")
    d = os.path.join(base, "columnar-24h")
    if os.path.isdir(d):
        return d
    os.makedirs(d)
    segs = list_segments(src)
    for s in segs:
        os.link(s.path, os.path.join(d, s.path.name))
    for k in range(1, 96 - len(segs) + 1):
        os.link(segs[0].path, os.path.join(d, segment_name(segs[0].start - k * SEGMENT, 0, ".nwcol")))
    return d


def run(base: str, nodes: int, minutes: float, fractions: list[float], regen: bool, jsonl: bool,
        status: bool = True, replay: bool = False) -> list[Figure]:
    from nodewatch.core.timeutil import format_time
    from nodewatch.sources.replay import state_at

    meta_path = os.path.join(base, "meta.json")
    if regen or not os.path.exists(meta_path):
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        print(f"  recorder_seek: writing {minutes:g} min of {nodes:,} nodes into {base}", file=sys.stderr, flush=True)
        w = time.perf_counter()
        meta = generate(base, nodes, minutes, jsonl=jsonl)
        meta["generated_s"] = time.perf_counter() - w
        with open(meta_path, "w") as f:
            json.dump(meta, f)
    with open(meta_path) as f:
        meta = json.load(f)
    col = os.path.join(base, "columnar")
    js = os.path.join(base, "jsonl")
    have_js = os.path.isdir(js)
    seg = os.path.join(col, _segments(col)[-1])
    label = f"{meta['nodes']:,} nodes, {meta['minutes']:g}-min segment"
    figures = []
    sizes = f"segment {os.path.getsize(seg) / 1e6:.1f} MB columnar" + (
        f", {os.path.getsize(os.path.join(js, _segments(js)[-1])) / 1e6:.1f} MB gzip JSON Lines" if have_js else "")
    one_instant = []
    for frac in fractions:
        t = meta["start"] + frac * (meta["end"] - meta["start"])
        at = format_time(t, micro=True)
        bare, blocks = _cpu(bare_scan, seg, t)
        c, _ = _cpu(state_at, col, at, compact=True, pods=False)
        one_instant.append(c)
        j = _cpu(state_at, js, at, compact=True, pods=False)[0] if have_js else None
        load = os.getloadavg()[0]
        print(f"  at +{t - meta['start']:.0f} s: columnar {c:.2f} s CPU, JSON Lines {j}, bare {bare:.2f} s, "
              f"load {load:.1f}", file=sys.stderr, flush=True)
        figures.append(Figure(f"recorder_seek: state_at T = segment start + {t - meta['start']:.0f} s, {label}",
                              f"{c:.2f} s CPU", "<= 1 s",
                              (f"JSON Lines dir {j:.2f} s; " if j is not None else "") + f"bare zstd + block walk {bare:.2f} s",
                              c <= 1.0, f"load average {load:.1f}; {blocks} blocks walked; {sizes}"))
    if replay:
        span = meta["end"] - meta["start"]
        offsets = [f * span for f in (0.97, 0.05, 0.6, 0.3, 0.999, 0.01, 0.45, 0.8)]
        print("  recorder_seek: nodewatch replay's source on the directory (its keyframes built in full)",
              file=sys.stderr, flush=True)
        r = _replay(col, offsets)
        worst = max(r["seeks"])
        figures.append(Figure(
            f"recorder_seek: replay DIR, slowest of {len(offsets)} seeks once its keyframes are built, {label}",
            f"{worst:.2f} s", "<= 1 s",
            "state_at at " + ", ".join(f"+{f * span:.0f} s {c:.2f} s CPU" for f, c in zip(fractions, one_instant)),
            worst <= 1.0,
            "seeks (wall) " + ", ".join(f"+{o:.0f} s {s:.2f}" for o, s in zip(offsets, r["seeks"]))
            + f"; index and keyframes built in {r['built']:.0f} s; {r['keyframes']} keyframes, "
            f"{r['every']:,} events apart at the end, {r['bytes'] / 2**20:.0f} MiB estimated; peak RSS "
            f"{r['peak_mb']:,.0f} MB; load average {os.getloadavg()[0]:.1f}"))
    if status:
        t = meta["start"] + max(fractions) * (meta["end"] - meta["start"])
        at = format_time(t, micro=True)
        wc, cc, out_c = _status(col, at)
        day = day_dir(base)
        wd, cd, out_d = _status(day, at)
        ref = ""
        same = out_c == out_d
        if have_js:
            wj, cj, out_j = _status(js, at)
            same = same and out_c == out_j
            ref = f"JSON Lines dir {wj:.2f} s ({cj:.2f} s CPU); "
        load = os.getloadavg()[0]
        figures.append(Figure(f"recorder_seek: status --replay DIR --at +{t - meta['start']:.0f} s, {label}",
                              f"{wc:.2f} s ({cc:.2f} s CPU)", "<= 2 s",
                              ref + f"96-segment dir {wd:.2f} s ({cd:.2f} s CPU)", wc <= 2.0,
                              f"a child process; answers byte for byte the same: {'yes' if same else 'NO'}; "
                              f"load average {load:.1f}"))
    return figures


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "replay-child":
        print(json.dumps(replay_child(sys.argv[2], [float(x) for x in sys.argv[3].split(",")])))
        raise SystemExit(0)
    from .harness import print_table

    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=65_000)
    p.add_argument("--minutes", type=float, default=15)
    p.add_argument("--dir", default=None, help="where the recording is kept (default /tmp/nodewatch-seek-NODES)")
    p.add_argument("--at", default="0.05,0.5,0.97", help="instants, as fractions of the segment")
    p.add_argument("--regen", action="store_true", help="write the recording again")
    p.add_argument("--no-jsonl", action="store_true", help="write (and time) the columnar format only")
    p.add_argument("--no-status", action="store_true", help="skip the child processes")
    p.add_argument("--replay", action="store_true",
                   help="also nodewatch replay's source on the directory: its seeks and its memory (~4 min at 65k)")
    a = p.parse_args()
    print_table(run(a.dir or f"/tmp/nodewatch-seek-{a.nodes}", a.nodes, a.minutes,
                    [float(x) for x in a.at.split(",")], a.regen, not a.no_jsonl, not a.no_status, a.replay))
