"""Replay of recordings nodewatch did not write: ``status --replay`` to the end and to the middle.

The recordings: ``bench/foreign_recording.py`` (an independent generator, stdlib only: other key
orders, spacing, extra fields, full managedFields, no SYNCED lines), 5,000 nodes for 10 minutes,
as JSON Lines and as a kubectl watch log (4-space indented documents, nodes' watch then leases').

Reference in the same run: a bare stdlib decode of the same bytes in a child process, start-up
included (``json.loads`` of every line; for the kubectl log, ``json.JSONDecoder.raw_decode`` of
every document). Target: <= 1.5x. The load average is printed beside the figures (the machine may
be shared: the figure and its reference are measured in the same run for that reason).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

from . import foreign_recording
from .harness import Figure
from .replay_read import wall_of

TARGET = 1.5
REPEAT = 3

_JSON_LINES = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)\n"
_JSON_DOCS = ("import json, sys\ntext = open(sys.argv[1], encoding='utf-8').read()\ndec = json.JSONDecoder()\n"
              "i, n = 0, len(text)\nwhile True:\n    while i < n and text[i] in ' \\t\\r\\n':\n        i += 1\n"
              "    if i >= n:\n        break\n    _, i = dec.raw_decode(text, i)\n")


def _median(cmd: list[str]) -> float:
    return statistics.median(wall_of(cmd, timeout=1200) for _ in range(REPEAT))


def _load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def run(nodes: int = 5_000, minutes: float = 10) -> list[Figure]:
    py = sys.executable
    figures = []
    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-foreign-") as d:
        for style, ref_code, what in (("jsonl", _JSON_LINES, "json.loads of every line"),
                                      ("kubectl", _JSON_DOCS, "json raw_decode of every document")):
            path = os.path.join(d, f"foreign.{style}")
            print(f"  replay foreign: writing {minutes:g} min of {nodes:,} nodes as {style} (setup)",
                  file=sys.stderr, flush=True)
            events = foreign_recording.write(path, nodes, minutes, style)
            size = os.path.getsize(path)
            before = _load()
            ref = _median([py, "-c", ref_code, path])
            end = _median([py, "-m", "nodewatch", "status", "--replay", path, "--format", "json"])
            at = f"+{minutes * 30:g}"
            mid = _median([py, "-m", "nodewatch", "status", "--replay", path, "--at", at, "--format", "json"])
            after = _load()
            note = (f"{events:,} events, {size / 1e6:,.0f} MB; --at {at}: {mid:.2f} s ({mid / ref:.2f}x); medians of "
                    f"{REPEAT}, start-up included; {before} before, {after} after")
            figures.append(Figure(f"replay foreign {style}: status --replay to the end ({minutes:g} min x {nodes:,})",
                                  f"{end:.2f} s ({end / ref:.2f}x)", f"<= {TARGET}x", f"{what} {ref:.2f} s",
                                  end <= TARGET * ref and mid <= TARGET * ref, note))
    return figures


if __name__ == "__main__":
    import argparse

    from .harness import print_table

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=5_000)
    p.add_argument("--minutes", type=float, default=10)
    a = p.parse_args()
    print_table(run(a.nodes, a.minutes))
