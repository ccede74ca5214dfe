"""A tiny benchmark harness: figures with a target and a side-by-side reference."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Figure:
    name: str
    measured: str
    target: str
    reference: str
    ok: bool | None
    note: str = ""


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """The fastest of ``repeat`` runs, in seconds: the least disturbed by a noisy shared machine."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def rss_bytes() -> int:
    """Resident set size of this process, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")


def print_table(figures: list[Figure]) -> None:
    rows = [("figure", "measured", "target", "reference (same run)", "ok")]
    for f in figures:
        ok = "-" if f.ok is None else ("yes" if f.ok else "NO")
        rows.append((f.name, f.measured, f.target, f.reference, ok))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for f in figures:
        if f.note:
            print(f"note ({f.name}): {f.note}")
