"""Replay: seek anywhere in a one-hour recording of 5,000 nodes.

The recording is made by the simulated fleet (``SimFleet``, scenario ``incident+churn``: failing
nodes, evictions, nodes replaced, pods rescheduled) written through nodewatch's own ``Recorder``:
every Lease renewal, node status, pod and event change of the hour, about two million lines.

Measured: ``ReplaySource`` opened on it (indexing, and keyframes built in the background, both
reported), then seeks to seeded random times, forward and backward, each leaving the state exactly
at that time. The figure is the slowest seek.

Reference: reading the recording end to end (every line read and JSON-decoded), which is what a
seek costs without an index and keyframes.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time

import orjson

from .harness import Figure

SEEKS = 25


def make_recording(path: str, nodes: int, minutes: float, seed: int = 7) -> int:
    """Simulate ``minutes`` of a ``nodes`` fleet into a v1 recording; returns the lines written."""
    from nodewatch.sim.fleet import SimFleet
    from nodewatch.sources.recording import Recorder

    fleet = SimFleet(nodes=nodes, scenario="incident+churn", seed=seed)
    rec = Recorder(path, {"name": f"sim {nodes} nodes"}, fleet.settings)
    try:
        t = fleet.now
        for resource in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
            for obj in fleet.objects(resource):
                rec.write(resource, "ADDED", obj, t, listing=True)
            rec.write(resource, "SYNCED", None, t)
        fleet.subscribe(lambda resource, etype, obj, at: rec.write(resource, etype, obj, at + 0.02))
        end = fleet.now + minutes * 60
        while t < end:
            t = min(end, t + 60)
            fleet.step_to(t)
        return rec.lines
    finally:
        rec.close()


def read_end_to_end(path: str) -> float:
    t = time.perf_counter()
    n = 0
    loads = orjson.loads
    with open(path, "rb") as f:
        for line in f:
            loads(line)
            n += 1
    return time.perf_counter() - t


def time_seeks(path: str) -> tuple[float, float, list[float], int]:
    """``ReplaySource`` on ``path``: (seconds to open it (the index), to its keyframes, of each of
    ``SEEKS`` seeks (end, start, middle, seeded random; forward and back), nodes at the last)."""
    from nodewatch.sources.replay import ReplaySource

    t = time.perf_counter()
    src = ReplaySource(path)
    opened = time.perf_counter() - t
    try:
        src.replay.wait_indexed()
        keyframed = time.perf_counter() - t
        if src.problems:
            raise RuntimeError(f"the recording has problems: {src.problems[:3]}")
        rng = random.Random(1)
        targets = [src.replay.end, src.replay.start, (src.replay.start + src.replay.end) / 2] + \
                  [rng.uniform(src.replay.start, src.replay.end) for _ in range(SEEKS - 3)]
        took = []
        for target in targets:
            t = time.perf_counter()
            src.replay.seek(target)
            took.append(time.perf_counter() - t)
        return opened, keyframed, took, len(src.state.nodes)
    finally:
        src.stop()


def run(nodes: int = 5_000, minutes: float = 60) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-replay-") as d:
        path = os.path.join(d, "fleet.ndjson")
        print(f"  replay: recording {minutes:g} min of {nodes:,} nodes (setup)", file=sys.stderr, flush=True)
        t = time.perf_counter()
        lines = make_recording(path, nodes, minutes)
        made = time.perf_counter() - t
        size = os.path.getsize(path)
        print(f"  replay: {lines:,} lines, {size / 1e6:,.0f} MB in {made:.0f}s; opening", file=sys.stderr, flush=True)
        opened, keyframed, took, nodes_at_end = time_seeks(path)
        print("  replay: reading the recording end to end", file=sys.stderr, flush=True)
        ref = read_end_to_end(path)
    worst, median = max(took), statistics.median(took)
    return [Figure(f"replay: seek in {minutes:g} min x {nodes:,} nodes", f"max {worst:.2f} s (median {median:.2f} s)",
                   "<= 1 s", f"read end to end {ref:.2f} s", worst <= 1.0,
                   f"{lines:,} lines, {size / 1e6:,.0f} MB; open (index) {opened:.1f} s, keyframes ready after "
                   f"{keyframed:.1f} s; {len(took)} seeks (end, start, middle, random; forward and back); "
                   f"{nodes_at_end:,} nodes at the last seek")]


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(nodes=200, minutes=5))
