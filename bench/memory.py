"""Memory: resident size of nodewatch's state at 65,000 nodes (+ leases).

Reference: kube-state-metrics' published sizing (``harness.ksm_sizing_mb``). Until issue 29 it was
the same objects held as parsed JSON, measured in a child process: a straw man no watcher keeps
(``python -m bench.memory`` still prints it in the note).
"""

from __future__ import annotations

import subprocess
import sys

from .harness import Figure, ksm_reference

_CHILD = r"""
import gc, sys
from bench.harness import rss_bytes
from bench.objects import raw_node, raw_lease, T0
mode, n = sys.argv[1], int(sys.argv[2])
gc.collect(); base = rss_bytes()
if mode == "state":
    from nodewatch.core.fleet import FleetState
    base = rss_bytes()
    s = FleetState()
    for i in range(n):
        node = raw_node(i)
        s.apply("nodes", "ADDED", node, T0, True)
        s.apply("leases", "ADDED", raw_lease(node["metadata"]["name"], T0), T0, True)
    s.apply("leases", "SYNCED", None, T0)
    s.evaluate(T0 + 1)
    keep = s
else:
    import orjson
    base = rss_bytes()
    keep = []
    for i in range(n):
        node = raw_node(i)
        keep.append(orjson.loads(orjson.dumps(node)))
        keep.append(orjson.loads(orjson.dumps(raw_lease(node["metadata"]["name"], T0))))
gc.collect()
print(rss_bytes() - base, rss_bytes())
"""


def _measure(mode: str, nodes: int) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(nodes)], capture_output=True, text=True,
                         check=True, timeout=900)
    grown, total = out.stdout.split()
    return int(grown), int(total)


def run(nodes: int = 65_000) -> list[Figure]:
    grown, total = _measure("state", nodes)
    raw_grown, _ = _measure("raw", nodes)
    mb = total / 1e6
    return [Figure(f"memory: resident size at {nodes:,} nodes", f"{mb:,.0f} MB (state {grown / 1e6:,.0f} MB)",
                   "<= 300 MB", ksm_reference(nodes), mb <= 300,
                   f"the same objects kept as parsed JSON: {raw_grown / 1e6:,.0f} MB (the old reference)")]
