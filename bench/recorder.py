"""The flight recorder's bytes per renewal and its write cost: columnar segments beside gzip JSON Lines
segments of the same events, in the same run.

``python -m bench.recorder [--nodes 5000] [--minutes 30]``. ``SimFleet(nodes, "steady")`` runs for
``minutes`` of virtual time; every event it emits is given what the API server adds (a
resourceVersion from one counter; on a Lease the kubelet's ``managedFields`` Update entry, timed to
the second of its renewTime, which is what the sanitizer keeps) and a receive time, and goes to two
``SegmentedRecorder``s as the hub's source would write it: one writing columnar segments, one gzip
JSON Lines segments, both rotating every 15 minutes (so the figure includes keyframes), both headed
by the same initial list.

The receive time (``--delivery``; kept to the float, so its noise is stored too): each event is sent
1 ms plus an exponential delay of mean 4 ms (at most 100 ms) after it was written, and

- ``watch`` (the default): a watch is one stream per resource, delivered in resourceVersion order,
  so an event is received no earlier than the one before it on its stream: receive time =
  max(the stream's previous receive time, write time + delay). Receive times never step back
  within a stream (as the hub's reflectors see them);
- ``jitter`` (the model before 2026-12-04): each event its own delay, so receive times step back
  within a stream. No watch delivers that; it fragments the columnar blocks (a block ends where the
  receive time leaves its second) and overstates their bytes and flushes. Kept to compare. The leases are the simulator's
own: random UIDs, renewTime on the node's clock, every 10 s with the kubelet's 4 % jitter. As a hub
receives them: every Node, Lease and CSR, the Pods and Events of ``FOCUSED`` nodes only (the hub
watches those of the nodes viewers drill into).

Figures: bytes per renewal all-in (every byte of every segment over the renewals in the run), beside
the same for gzip JSON Lines; the CPU the columnar recorder's ``write`` costs per simulated second,
scaled to a 65,000-node fleet's rate (``write`` includes the sanitizing and the keyframe
bookkeeping the hub does for either format), beside JSON Lines', and how much of it was the garbage
collector's (collections that ran inside ``write``, timed by ``gc.callbacks``); how long the default size cap
holds at 65,000 nodes at the measured bytes per second; ``status --replay DIR --at T`` on the
columnar directory (a real child process), beside the same on the JSON Lines directory.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

import orjson

from .harness import Figure

FLEET_65K = 65_000
READ_MS = 20.0
"""Receive time a read of the Lease watch spans (``--read-ms``; 0: an event a read). The API server
flushes a watch whenever its queue of events runs empty, so under a steady stream an event comes in
a TLS record of its own; a hub's reader takes everything that has arrived and, after a read that
took all there was, reads again no sooner than ``tls_stream.GATHER_SECONDS`` (20 ms) later (since
session 46; before, it read each event alone: ``--read-ms 0`` measures that). At 5,000 nodes a
read of 20 ms holds ~10 renewals, at 65,000 ~130: the figure scaled from 5,000 nodes pays the
per-read cost thirteen times too often."""
FOCUSED = 10
"""Nodes whose Pods and Events the hub watches (viewers drilling in; the hub's cap is higher)."""


def hub_time(t: float) -> float:
    """A receive time as the hub's clock reads it (``SystemClock``: whole microseconds)."""
    return round(t * 1_000_000) / 1_000_000


def _api_shaped(resource: str, obj: dict, rv: int) -> dict:
    obj = dict(obj)
    meta = dict(obj["metadata"])
    meta["resourceVersion"] = str(rv)
    renew = (obj.get("spec") or {}).get("renewTime") if resource == "leases" else None
    if renew:
        meta["managedFields"] = [{"manager": "kubelet", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
                                  "time": renew[:19] + "Z", "fieldsType": "FieldsV1",
                                  "fieldsV1": {"f:spec": {"f:renewTime": {}}}}]
    obj["metadata"] = meta
    return obj


def _recorded(resource: str, obj: dict, focused: set[str]) -> bool:
    """What a hub receives: every Node, Lease and CSR; Pods and Events only of the nodes viewers
    drill into (``hub/live.py``: scoped watches)."""
    if resource == "pods":
        return (obj.get("spec") or {}).get("nodeName") in focused
    if resource == "events":
        return (obj.get("involvedObject") or {}).get("name") in focused
    return True


def _dir_bytes(d: str) -> int:
    return sum(e.stat().st_size for e in os.scandir(d) if e.is_file())


DELIVERIES = ("watch", "jitter")
"""The receive-time models (the module docstring)."""


def record(base: str, nodes: int, minutes: float, seed: int = 11, freeze: bool = True,
           delivery: str = "watch", fast: bool = True, read_ms: float | None = READ_MS) -> dict:
    """Both recordings of the same run; returns the counts and CPU seconds (and of them the
    collector's, ``gc``). ``freeze``: ``gc.freeze()`` after the list (the objects alive then, the
    fleet's and the recorders', are never walked again by the collector), as the live hub does once
    its lists are in (``reflector.resume_gc``). ``delivery``: one of
    ``DELIVERIES``. ``fast``: the flight recorder's fast path for plain Lease renewals (False: every
    event the general way, to compare). ``read_ms``: the Lease watch's events reach the recorders as
    a live hub's reads do (``SegmentedRecorder.write_lease_watch``: the lines of ``read_ms`` of
    receive time at a time, stamped with the read's time, their structs decoded for the state and
    not timed here; 0: a read per line); None: each event's object through ``write`` (the way
    before 2026-12-05)."""
    import gc

    from nodewatch.core.clock import ManualClock
    from nodewatch.core.fleet import FleetState
    from nodewatch.core.wire import DECODERS
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.sim.fleet import SimFleet

    fleet = SimFleet(nodes=nodes, scenario="steady", seed=seed)
    clock = ManualClock(fleet.now)
    state = FleetState(fleet.settings)  # the Nodes of the keyframes (the hub's state holds them)
    recs = {fmt: SegmentedRecorder(os.path.join(base, fmt), {"name": f"bench {nodes}"}, fleet.settings,
                                   keep_seconds=None, keep_bytes=None, clock=clock, records=state.node_records,
                                   record_format=fmt, **({} if fast else {"fast_renewals": False}))
            for fmt in ("columnar", "jsonl")}
    if delivery not in DELIVERIES:
        raise ValueError(f"unknown delivery {delivery!r} (one of {', '.join(DELIVERIES)})")
    cpu = {fmt: 0.0 for fmt in recs}
    gc_cpu = {fmt: 0.0 for fmt in recs}
    lease_cpu = {fmt: 0.0 for fmt in recs}
    counts = {"renewals": 0, "events": 0}
    rng = random.Random(seed)
    rv = [1_000_000_000]  # a running cluster's (an etcd revision): from 10,000 every Lease's rv grew a
    # digit at 100,000, a few minutes in, and each one's next renewal went the general way (3 % of a
    # 5-minute run's renewals, at ~30 times a fast one's cost), which a real cluster's rv does rarely
    pt = time.process_time
    inside: list[str | None] = [None, None]  # the format and the resource whose write runs now
    gc_began = [0.0]
    full: dict[tuple[str, str], list[float]] = {}
    """(format, resource) -> [full collections inside its writes, their CPU seconds]"""

    def collecting(phase: str, info: dict) -> None:
        fmt = inside[0]
        if fmt is None:
            return
        if phase == "start":
            gc_began[0] = pt()
        else:
            took = pt() - gc_began[0]
            gc_cpu[fmt] += took
            if info.get("generation") == 2:
                f = full.setdefault((fmt, str(inside[1])), [0, 0.0])
                f[0] += 1
                f[1] += took

    orders = [list(recs.items()), list(reversed(recs.items()))]
    turn = [0]

    def write(resource: str, etype: str, obj: dict | None, t: float, listing: bool = False) -> None:
        # The two formats take turns at going first: a collection runs in whichever write makes the
        # allocation that tips it, and the fleet's own allocations come just before the first one.
        turn[0] ^= 1
        for fmt, rec in orders[turn[0]]:
            inside[0], inside[1] = fmt, resource
            c = pt()
            rec.write(resource, etype, obj, t, listing)
            took = pt() - c
            cpu[fmt] += took
            if resource == "leases":
                lease_cpu[fmt] += took
            inside[0] = None

    gc.callbacks.append(collecting)

    t0 = fleet.now
    focused = set(fleet.node_order[:FOCUSED])
    for resource in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
        for obj in fleet.objects(resource):
            if not _recorded(resource, obj, focused):
                continue
            rv[0] += 1
            obj = _api_shaped(resource, obj, rv[0])
            if resource == "nodes":
                state.apply("nodes", "ADDED", obj, t0, listing=True)
            write(resource, "ADDED", obj, t0, listing=True)
        write(resource, "SYNCED", None, t0)
    listed = {fmt: _dir_bytes(os.path.join(base, fmt)) for fmt in recs}
    cpu_listed = dict(cpu)
    gc_listed = dict(gc_cpu)
    full.clear()
    lease_listed = dict(lease_cpu)
    if freeze:
        gc.collect()
        gc.freeze()

    decoder = DECODERS["leases"]
    read: list[tuple[str, dict]] = []
    """The Lease watch's events of the read in progress (``read_ms``)."""
    read_times = [0.0, 0.0]  # its first and last receive time

    def end_read() -> None:
        """The read in progress into both recorders, as the hub's lane hands it over."""
        if not read:
            return
        block = b"".join(orjson.dumps({"type": etype, "object": obj}) + b"\n" for etype, obj in read)
        structs = decoder.decode_watch(block)  # the lane's decode, for the hub's state: not the recorder's
        t = read_times[1]
        turn[0] ^= 1
        for fmt, rec in orders[turn[0]]:
            inside[0], inside[1] = fmt, "leases"
            c = pt()
            rec.write_lease_watch(block, structs, t)
            took = pt() - c
            cpu[fmt] += took
            lease_cpu[fmt] += took
            inside[0] = None
        read.clear()

    def sink(resource: str, etype: str, obj: dict, at: float) -> None:
        if not _recorded(resource, obj, focused):
            return
        rv[0] += 1
        obj = _api_shaped(resource, obj, rv[0])
        rx = hub_time(at + min(0.1, 0.001 + rng.expovariate(1 / 0.004)))
        if delivery == "watch":  # one stream per resource, in order: never before the event before it
            rx = max(rx, received.get(resource, rx))
            received[resource] = rx
            rx_clock = max(rx, clock.now())  # the hub's clock does not step back either
        else:
            rx_clock = rx
        clock.set(rx_clock)
        counts["events"] += 1
        if resource == "leases" and etype == "MODIFIED":
            counts["renewals"] += 1
        elif resource == "nodes":
            state.apply("nodes", etype, obj, rx)
        if read_ms is not None and resource == "leases":
            if read and rx - read_times[0] > read_ms / 1000:
                end_read()
            if not read:
                read_times[0] = rx
            read.append((etype, obj))
            read_times[1] = rx
            if read_ms == 0:
                end_read()
            return
        end_read()  # (another stream's event: the leases' read so far first)
        write(resource, etype, obj, rx)

    received: dict[str, float] = {}
    fleet.subscribe(sink)
    end = t0 + minutes * 60
    t = t0
    while t < end:
        t = min(end, t + 10)
        fleet.step_to(t)
        clock.set(max(t, clock.now()) if delivery == "watch" else t)
    end_read()
    for rec in recs.values():
        rec.close()
    gc.callbacks.remove(collecting)
    return {"counts": counts, "cpu": {f: cpu[f] - cpu_listed[f] for f in cpu},
            "gc": {f: gc_cpu[f] - gc_listed[f] for f in cpu}, "leases": {f: lease_cpu[f] - lease_listed[f] for f in cpu},
            "listed": listed, "full": full,
            "fast": getattr(recs["columnar"], "fast_lines", 0),  # (and this bench runs on the code before it)
            "bytes": {fmt: _dir_bytes(os.path.join(base, fmt)) for fmt in recs}, "seconds": end - t0, "start": t0}


def _full(full: dict[tuple[str, str], list[float]]) -> str:
    """Where the full (generation 2) collections ran: in which format's writes, of which resource."""
    if not full:
        return "none"
    return ", ".join(f"{n} in {fmt} {res} ({secs:.1f} s)" for (fmt, res), (n, secs) in sorted(full.items()))


def _status_at(directory: str, at: str) -> tuple[float, float]:
    """(wall time, the child's CPU time): on a loaded machine the CPU time is the steadier figure."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nodewatch", "status", "--replay", directory, "--at", at, "--format", "json"],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _seek(directory: str, start: float, minutes: float) -> tuple[float, float]:
    """(the slowest, the median) CPU seconds of ``replay.state_at`` (what ``status --replay DIR --at T``
    answers with, in this process) at instants spread over the recording: a seek to each one reads
    the segment that holds it from its keyframe to ``T`` (the directory's file names are the index of
    segments by time)."""
    import statistics

    from nodewatch.core.timeutil import format_time
    from nodewatch.sources.replay import state_at

    took = []
    for f in (0.05, 0.3, 0.45, 0.55, 0.7, 0.97):
        c = time.process_time()
        state_at(directory, format_time(start + f * minutes * 60, micro=True), compact=True, pods=False)
        took.append(time.process_time() - c)
    return max(took), statistics.median(took)


def run(nodes: int = 5_000, minutes: float = 30, status: bool = True, keep: str | None = None,
        freeze: bool = True, delivery: str = "watch", fast: bool = True, read_ms: float | None = READ_MS) -> list[Figure]:
    """``keep``: record into this directory (kept: ``status`` may be timed on it again) instead of a
    temporary one."""
    from nodewatch.hub.flight_recorder import KEEP_BYTES

    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-recorder-") as tmp:
        d = keep or tmp
        os.makedirs(d, exist_ok=True)
        print(f"  recorder: {minutes:g} virtual min of {nodes:,} nodes into both formats", file=sys.stderr, flush=True)
        w = time.perf_counter()
        r = record(d, nodes, minutes, freeze=freeze, delivery=delivery, fast=fast, read_ms=read_ms)
        print(f"  recorder: recorded in {time.perf_counter() - w:.0f} s; status --replay", file=sys.stderr, flush=True)
        at = f"+{minutes * 60 * 0.9:.0f}"
        st_col = _status_at(os.path.join(d, "columnar"), at) if status else None
        st_json = _status_at(os.path.join(d, "jsonl"), at) if status else None
        seek_col = _seek(os.path.join(d, "columnar"), r["start"], minutes) if status else None
        seek_json = _seek(os.path.join(d, "jsonl"), r["start"], minutes) if status else None
    n = r["counts"]["renewals"]
    col, js = r["bytes"]["columnar"], r["bytes"]["jsonl"]
    per_col, per_js = col / n, js / n
    scale = FLEET_65K / nodes
    cpu_col = r["cpu"]["columnar"] / r["seconds"] * scale
    cpu_js = r["cpu"]["jsonl"] / r["seconds"] * scale
    rate_65k = (col - r["listed"]["columnar"]) / r["seconds"] * scale  # bytes a second at 65k, after the list
    hours = KEEP_BYTES / rate_65k / 3600
    rate_js = (js - r["listed"]["jsonl"]) / r["seconds"] * scale
    label = f"{minutes:g} min x {nodes:,} nodes"
    figures = [
        Figure(f"recorder: bytes per renewal all-in, {label}", f"{per_col:.2f} B ({per_col / per_js:.3f}x)",
               "<= 8 B, <= 0.1x", f"gzip JSON Lines {per_js:.1f} B", per_col <= 8 and per_col <= 0.1 * per_js,
               f"{n:,} renewals, {r['counts']['events']:,} events after the list; columnar {col / 1e6:.1f} MB, "
               f"JSON Lines {js / 1e6:.1f} MB, both with the initial list ({r['listed']['columnar'] / 1e6:.1f} / "
               f"{r['listed']['jsonl'] / 1e6:.1f} MB) and a keyframe per 15-min segment"),
        Figure(f"recorder: write CPU at 65k (from {label})", f"{cpu_col * 100:.1f} % of a core",
               "<= 5 %", f"gzip JSON Lines {cpu_js * 100:.1f} %", cpu_col <= 0.05,
               f"{r['cpu']['columnar'] / n * 1e6:.1f} us a renewal (JSON Lines {r['cpu']['jsonl'] / n * 1e6:.1f}); "
               f"of it the Lease events' {r['leases']['columnar'] / n * 1e6:.1f} us ({r['leases']['jsonl'] / n * 1e6:.1f}), "
               f"the collector's {r['gc']['columnar'] / n * 1e6:.1f} us ({r['gc']['jsonl'] / n * 1e6:.1f}); "
               f"full collections in the writes: {_full(r['full'])}; "
               f"the fast path wrote {r['fast'] / n:.1%} of the renewals; "
               f"load average {os.getloadavg()[0]:.1f}; delivery {delivery}; "
               + (f"the Lease watch in reads of {read_ms:g} ms (write_lease_watch: the lines, both formats; the "
                  f"state's decode of them not counted); " if read_ms is not None else
                  "each Lease event's object through write; ") +
               f"gc.freeze() after the list: {'yes' if freeze else 'no'}; "
               f"process time in SegmentedRecorder.write per simulated second "
               f"(sanitize, keyframe bookkeeping, encoding, compression), x {scale:g} for 65,000 nodes"),
        Figure("recorder: the default cap at 65k", f"{hours:.0f} h in {KEEP_BYTES / 2**30:.0f} GiB",
               ">= 24 h", f"gzip JSON Lines {KEEP_BYTES / rate_js / 3600:.1f} h", hours >= 24,
               f"{rate_65k / 1e3:.0f} kB/s at 65k, scaled from {label} (after the list)"),
    ]
    if st_col is not None and st_json is not None:
        load = os.getloadavg()[0]
        figures.append(Figure(f"recorder: status --replay DIR --at {at}, {label}",
                              f"{st_col[0]:.2f} s ({st_col[1]:.2f} s CPU)", "<= 2 s",
                              f"JSON Lines directory {st_json[0]:.2f} s ({st_json[1]:.2f} s CPU)", st_col[0] <= 2.0,
                              f"a child process (interpreter start included); wall time, and the child's CPU time "
                              f"(user + system); load average {load:.1f} on {os.cpu_count()} cores"))
    if seek_col is not None and seek_json is not None:
        segment = 15 * 60
        worst_65k = seek_col[0] * scale
        figures.append(Figure(f"recorder: seek (state at T, in process), {label}",
                              f"max {seek_col[0]:.2f} s CPU (median {seek_col[1]:.2f} s)", "<= 1 s at 24 h x 65k",
                              f"JSON Lines directory max {seek_json[0]:.2f} s (median {seek_json[1]:.2f} s)",
                              worst_65k <= 1.0,
                              f"6 instants; a seek reads the segment that holds T from its keyframe, so it grows with "
                              f"nodes x (T - the segment's start, at most {segment // 60} min) and not with the "
                              f"recording's length: at 65k about {worst_65k:.1f} s (x {scale:g}, not measured)"))
    return figures


if __name__ == "__main__":
    from .harness import print_table

    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=5_000)
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--no-status", action="store_true", help="skip status --replay (slow at 65k)")
    p.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false",
                   help="leave the collector as it is after the initial list (the live hub freezes what "
                        "survived its lists: reflector.resume_gc, so the default does too)")
    p.add_argument("--keep", metavar="DIR", help="record into DIR and keep it (default: a temporary directory)")
    p.add_argument("--delivery", choices=DELIVERIES, default="watch",
                   help="receive times: in order per stream as a watch delivers (default), or each event its "
                        "own delay (the model before 2026-12-04)")
    p.add_argument("--read-ms", type=float, default=READ_MS,
                   help=f"receive time one read of the Lease watch spans (default {READ_MS:g}; 0: a read per line)")
    p.add_argument("--objects", action="store_true",
                   help="each Lease event's object through write, not the watch's reads (the way before 2026-12-05)")
    p.add_argument("--no-fast", action="store_true",
                   help="the flight recorder's general path for every event (no fast path for plain renewals)")
    a = p.parse_args()
    print_table(run(nodes=a.nodes, minutes=a.minutes, status=not a.no_status, keep=a.keep, freeze=a.gc_freeze,
                    delivery=a.delivery, fast=not a.no_fast, read_ms=None if a.objects else a.read_ms))
