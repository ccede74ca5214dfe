"""Replay at the speed of reading: one instant of a recording, and a replay's first frame.

The recording: ``SimFleet(nodes, "incident+churn")`` for ``minutes`` written by nodewatch's own
``Recorder`` (the issue's case: 5,000 nodes, 10 minutes, about 300,000 events, 120 MB).

- ``status --replay FILE --at +T``: the real command in a child process (start-up included), T in
  the middle of the recording (the whole file is read when --at is omitted: both are measured).
- ``nodewatch replay FILE`` to its first frame: ``ReplaySource`` as the command opens it (indexed
  in the background) and the dashboard (``NodewatchApp`` headless, 200x60) until its first paint.

Reference in the same run: a bare stdlib ``json.loads`` of every line of the same file, in a child
process too (start-up included). Targets: <= 1.5x the reference.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

from .harness import Figure
from .replay_seek import make_recording

TARGET = 1.5
REPEAT = 3

_JSON_LOADS = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)\n"


def wall_of(cmd: list[str], timeout: float = 600) -> float:
    """Wall seconds of ``cmd`` as a child process (start-up included); a failed status raises."""
    t = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    took = time.perf_counter() - t
    if out.returncode not in (0, 1):  # status: 1 = some node not Ready, 2 = failed
        raise RuntimeError(f"{' '.join(cmd[2:5])} failed: {out.stderr[-300:]!r}")
    return took


def _median(fn, repeat: int = REPEAT) -> float:
    return statistics.median(fn() for _ in range(repeat))


async def _first_frame(path: str) -> float:
    from nodewatch.sources.replay import ReplaySource
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    t0 = time.perf_counter()
    src = ReplaySource(path, background=True)
    app = NodewatchApp(src, refresh_seconds=3600)
    try:
        async with app.run_test(size=(200, 60)) as pilot:
            app.tick()
            await pilot.pause()
            took = time.perf_counter() - t0
            if not app.query_one("#table", FleetTable).rows:
                raise RuntimeError("the first frame shows no nodes")
            return took
    finally:
        src.stop()


def run(nodes: int = 5_000, minutes: float = 10) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-read-") as d:
        path = os.path.join(d, "fleet.ndjson")
        print(f"  replay read: recording {minutes:g} min of {nodes:,} nodes (setup)", file=sys.stderr, flush=True)
        lines = make_recording(path, nodes, minutes)
        size = os.path.getsize(path)
        py = sys.executable
        ref = _median(lambda: wall_of([py, "-c", _JSON_LOADS, path]))
        at = f"+{minutes * 30:g}"
        status_mid = _median(lambda: wall_of([py, "-m", "nodewatch", "status", "--replay", path, "--at", at,
                                            "--format", "json"]))
        status_end = _median(lambda: wall_of([py, "-m", "nodewatch", "status", "--replay", path, "--format", "json"]))
        first = _median(lambda: asyncio.run(_first_frame(path)))
    what = f"{lines:,} lines, {size / 1e6:,.0f} MB"
    reference = f"json.loads of every line {ref:.2f} s"
    return [
        Figure(f"replay: status --replay --at {at} ({minutes:g} min x {nodes:,} nodes)",
               f"{status_mid:.2f} s ({status_mid / ref:.2f}x)", f"<= {TARGET}x", reference,
               status_mid <= TARGET * ref, f"{what}; to the end (no --at): {status_end:.2f} s "
                                           f"({status_end / ref:.2f}x); medians of {REPEAT}, start-up included"),
        Figure(f"replay: nodewatch replay -> first frame ({minutes:g} min x {nodes:,} nodes)",
               f"{first:.2f} s ({first / ref:.2f}x)", f"<= {TARGET}x", reference, first <= TARGET * ref,
               f"{what}; indexed in the background; median of {REPEAT}"),
    ]


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(nodes=200, minutes=3))
