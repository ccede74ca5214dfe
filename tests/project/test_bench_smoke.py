"""Smoke run of the benchmarks: ``python -m bench --quick`` produces every figure.

No timing is asserted (the machines are shared and noisy): only that each benchmark group ran
at its quick size and printed its figure beside a reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = [
    "core ingest",
    "memory: resident size at 2,000 nodes",
    "frame: fleet table, 1,000 nodes",
    "frame: fleet table, 5,000 nodes",
    "memory: dashboard process, 2,000-node incident",
    "memory: status --kubeconfig, 2,000-node incident",
    "start: 2,000 nodes -> first useful frame (from the Leases)",
    "start: 2,000 nodes -> complete frame",
    "live path: lease events/s",
    "replay: seek in 5 min x 200 nodes",
    "replay: status --replay --at +90 (3 min x 200 nodes)",
    "replay: nodewatch replay -> first frame (3 min x 200 nodes)",
    "terminal: bytes/s at 1 refresh/s, 2,000 nodes",
    "scrape 2,000 nodes (all)",
    "scrape 2,000 nodes (not-ready)",
    "recorder: bytes per renewal all-in, 3 min x 300 nodes",
    "recorder: seek (state at T, in process), 3 min x 300 nodes",
]


@pytest.mark.timeout(600)
def test_every_figure_is_produced() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "--quick"], cwd=ROOT, capture_output=True, text=True,
                         timeout=590, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    table = out.stdout
    assert "ERROR" not in table, table
    rows = [line for line in table.splitlines() if not line.startswith(("figure", "-", "note"))]
    for name in EXPECTED:
        hits = [r for r in rows if r.startswith(name)]
        assert len(hits) == 1, f"{name!r} missing from:\n{table}"
        cells = [c for c in hits[0][len(name):].split("  ") if c.strip()]
        assert len(cells) >= 4, hits[0]  # measured, target, reference, ok
    # each figure has its reference measured in the same run
    for ref in ("bare orjson decode", "kube-state-metrics' published sizing", "DataTable", "raw transfer of both lists",
                "kubectl get -w -o json", "read end to end", "full-screen repaint"):
        assert ref in table, f"reference {ref!r} missing:\n{table}"
