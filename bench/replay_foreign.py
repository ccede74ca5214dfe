"""Replay of recordings nodewatch did not write: ``status --replay`` to the end and to the middle,
and seeks in ``nodewatch replay``.

The recordings: ``bench/foreign_recording.py`` (an independent generator, stdlib only: other key
orders, spacing, extra fields, full managedFields, no SYNCED lines), 5,000 nodes for 10 minutes,
as JSON Lines and as a kubectl watch log (4-space indented documents, nodes' watch then leases').

Reference in the same run: a bare stdlib decode of the same bytes in a child process, start-up
included: ``json.loads`` of every line; for the kubectl log, ``json.JSONDecoder.raw_decode`` of
every document, read in 1 MB blocks as text (not the whole 700 MB file made one string first: that
cost the reference 3.7 s of page faults, a straw man). Each command is timed as a child process:
wall and CPU (user + sys, from the kernel's accounting of the child), medians of ``REPEAT``; the
figure is CPU, which the load of a shared machine moves less than wall; nodewatch's modules are
compiled to bytecode first, as installed (``compiled``). Target: <= 1.5x. Seek:
``ReplaySource`` on each file, 25 seeks (``replay_seek.time_seeks``), the slowest <= 1 s. The
load average is printed beside the figures.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import foreign_recording
from .harness import Figure
from .replay_seek import time_seeks

TARGET = 1.5
REPEAT = 3

_JSON_LINES = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)\n"
_JSON_DOCS = """import json, sys
dec, ws = json.JSONDecoder(), ' \\t\\r\\n'
with open(sys.argv[1], encoding='utf-8') as f:
    text = ''
    while True:
        block = f.read(1 << 20)
        text += block
        i, n = 0, len(text)
        while True:
            while i < n and text[i] in ws:
                i += 1
            if i >= n:
                break
            try:
                _, j = dec.raw_decode(text, i)
            except json.JSONDecodeError:
                if not block:
                    raise
                break
            i = j
        text = text[i:]
        if not block:
            break
"""
"""Each document decoded once: a document cut by a block's end is decoded whole with the next block
(a failed attempt at a block's end costs at most one partial document per MB)."""


def timed(cmd: list[str], timeout: float = 1200) -> tuple[float, float]:
    """(wall, CPU) seconds of ``cmd`` as a child process (start-up included); a failed status
    (``status``: 1 = some node not Ready is not a failure) raises."""
    t = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        raise
    wall = time.perf_counter() - t
    if child.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd[2:5])} failed: {err[-300:]!r}")
    return wall, _children_cpu()


_seen_cpu = [0.0]


def _children_cpu() -> float:
    """CPU seconds of the children reaped since the last call (the kernel's accounting of them)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = r.ru_utime + r.ru_stime
    took, _seen_cpu[0] = total - _seen_cpu[0], total
    return took


def _medians(cmd: list[str]) -> tuple[float, float]:
    runs = [timed(cmd) for _ in range(REPEAT)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def _load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def compiled() -> bool:
    """nodewatch's modules compiled to bytecode first, as an installed package has them (pip
    compiles them on install): with ``PYTHONDONTWRITEBYTECODE`` set (as in shared sessions) and
    no ``__pycache__``, every run of the command compiled them again, ~0.1 s of CPU that the
    reference (stdlib ``json``, compiled) never pays. False when they could not be written."""
    import compileall

    import nodewatch

    return bool(compileall.compile_dir(os.path.dirname(nodewatch.__file__), quiet=2))


def run(nodes: int = 5_000, minutes: float = 10, seek: bool = True) -> list[Figure]:
    py = sys.executable
    figures = []
    if not compiled():
        print("  replay foreign: nodewatch's bytecode could not be written: start-up compiles it",
              file=sys.stderr, flush=True)
    _children_cpu()
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-foreign-") as d:
        for style, ref_code, what in (("jsonl", _JSON_LINES, "json.loads of every line"),
                                      ("kubectl", _JSON_DOCS, "json raw_decode of every document")):
            path = os.path.join(d, f"foreign.{style}")
            print(f"  replay foreign: writing {minutes:g} min of {nodes:,} nodes as {style} (setup)",
                  file=sys.stderr, flush=True)
            events = foreign_recording.write(path, nodes, minutes, style)
            size = os.path.getsize(path)
            before = _load()
            ref_wall, ref = _medians([py, "-c", ref_code, path])
            end_wall, end = _medians([py, "-m", "nodewatch", "status", "--replay", path, "--format", "json"])
            at = f"+{minutes * 30:g}"
            mid_wall, mid = _medians([py, "-m", "nodewatch", "status", "--replay", path, "--at", at,
                                      "--format", "json"])
            after = _load()
            note = (f"{events:,} events, {size / 1e6:,.0f} MB; CPU user+sys, medians of {REPEAT}, start-up "
                    f"included; --at {at}: {mid:.2f} s ({mid / ref:.2f}x); wall: to the end {end_wall:.2f} s, "
                    f"--at {mid_wall:.2f} s, reference {ref_wall:.2f} s ({end_wall / ref_wall:.2f}x); "
                    f"{before} before, {after} after")
            figures.append(Figure(f"replay foreign {style}: status --replay to the end ({minutes:g} min x {nodes:,})",
                                  f"CPU {end:.2f} s ({end / ref:.2f}x)", f"<= {TARGET}x", f"{what}: CPU {ref:.2f} s",
                                  end <= TARGET * ref and mid <= TARGET * ref, note))
            if seek:
                before = _load()
                opened, keyframed, took, at_end = time_seeks(path)
                worst = max(took)
                figures.append(Figure(
                    f"replay foreign {style}: seek ({minutes:g} min x {nodes:,})",
                    f"max {worst:.2f} s (median {statistics.median(took):.2f} s)", "<= 1 s", "-", worst <= 1.0,
                    f"open (index) {opened:.1f} s, keyframes ready after {keyframed:.1f} s; {len(took)} seeks "
                    f"(end, start, middle, random); {at_end:,} nodes at the last; {before} before, {_load()} after"))
    return figures


if __name__ == "__main__":
    import argparse

    from .harness import print_table

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=5_000)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--no-seek", action="store_true", help="only the status figures")
    a = p.parse_args()
    print_table(run(a.nodes, a.minutes, not a.no_seek))
