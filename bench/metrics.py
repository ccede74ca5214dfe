"""Metrics: one Prometheus scrape of a 65,000-node fleet, beside the hub's own frame.

A scrape = ``take_sample`` (the adapter: the published snapshot's views, copied out) + the
collector's metric families + ``prometheus_client``'s text encoding, i.e. what one GET /metrics
costs the process (gzip measured apart: only when the scraper accepts it). Reported per mode
(``--metrics-nodes all`` and ``not-ready``): wall time (best of 3), CPU (process time), body size
raw and gzipped, and the series count.

Reference, same run: the hub's own frame at the same size, ``FleetState.evaluate`` one second on
with a tenth of the fleet renewed + ``Publisher.update`` (the delta every viewer gets each tick).
And the frame again while scrapes run back to back on another thread (the GIL is shared): what a
scrape costs the screens; and how long each of those scrapes held the state's lock, which is how
long a frame could be made to wait for it (a scrape reads the published snapshot: only its
pod query takes the lock; it used to evaluate the fleet under it).
"""

from __future__ import annotations

import gzip
import statistics
import sys
import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from nodewatch.core.clock import ManualClock
from nodewatch.hub.publisher import Publisher
from nodewatch.metrics.collector import FleetCollector
from nodewatch.metrics.sample import take_sample

from .frame import T0, build_state, lease_obj, node_name
from .harness import Figure, best_of


class _Source:
    """What the adapter reads: a state, a clock, a name."""

    def __init__(self, state, clock) -> None:
        self.state, self.clock, self.name = state, clock, "bench"


def _scrape(source, mode: str) -> bytes:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(FleetCollector(lambda: take_sample(source, nodes=mode, cluster="bench")))
    return generate_latest(reg)


class _TimedLock:
    """The state's lock, with the time one thread (``thread``) holds it added up in ``held``."""

    def __init__(self, lock) -> None:
        self._lock = lock
        self.thread: threading.Thread | None = None
        self.held = 0.0
        self._depth = 0
        self._since = 0.0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        ok = self._lock.acquire(blocking, timeout)
        if ok and threading.current_thread() is self.thread:
            self._depth += 1
            if self._depth == 1:
                self._since = time.perf_counter()
        return ok

    def release(self) -> None:
        if threading.current_thread() is self.thread:
            self._depth -= 1
            if self._depth == 0:
                self.held += time.perf_counter() - self._since
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _frame(state, clock, publisher, i: int, n: int) -> float:
    """One hub tick one second on, a tenth of the fleet renewed first (outside the timing)."""
    now = T0 + i
    with state.lock:
        for j in range(i % 10, n, 10):
            state.apply("leases", "MODIFIED", lease_obj(node_name(j), now), now)
    clock.set(now)
    t = time.perf_counter()
    view = state.evaluate(now)
    publisher.update(view, state.node_records(), now, problems=0, name="bench")
    return time.perf_counter() - t


def run(nodes: int = 65_000, frames: int = 8) -> list[Figure]:
    state = build_state(nodes)
    clock = ManualClock(T0)
    source = _Source(state, clock)
    publisher = Publisher("bench")
    state.evaluate(T0)
    publisher.update(state.evaluate(T0), state.node_records(), T0, problems=0, name="bench")
    base = [_frame(state, clock, publisher, i, nodes) for i in range(1, frames + 1)]
    frame_ms = statistics.median(base) * 1000
    figures = []
    for mode in ("all", "not-ready"):
        body = _scrape(source, mode)
        wall = best_of(lambda m=mode: _scrape(source, m), repeat=3)
        c0 = time.process_time()
        _scrape(source, mode)
        cpu = time.process_time() - c0
        t = time.perf_counter()
        gz = gzip.compress(body, compresslevel=1)
        gz_s = time.perf_counter() - t
        series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        sample_s = best_of(lambda m=mode: take_sample(source, nodes=m, cluster="bench"), repeat=3)
        figures.append(Figure(
            f"scrape {nodes:,} nodes ({mode})", f"{wall * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms",
            "CPU <= the 15 s scrape interval" if mode == "all" else "<= 1 frame", f"hub frame {frame_ms:.0f} ms",
            cpu < 15.0 if mode == "all" else None,  # CPU: the wall time of a shared machine is its load
            f"{series:,} series, body {len(body) / 1e6:.1f} MB ({len(gz) / 1e6:.1f} MB gzipped in "
            f"{gz_s * 1000:.0f} ms); of it the adapter (the published views copied out) {sample_s * 1000:.0f} ms"))
    # Frames while scrapes run back to back on another thread.
    stop = threading.Event()
    scrapes = [0]

    def scraper() -> None:
        while not stop.is_set():
            _scrape(source, "all")
            scrapes[0] += 1

    th = threading.Thread(target=scraper, daemon=True)
    timed = _TimedLock(state.store.lock)
    timed.thread = th
    state.store.lock = timed
    th.start()
    time.sleep(0.2)
    loaded = [_frame(state, clock, publisher, i, nodes) for i in range(frames + 1, 2 * frames + 1)]
    stop.set()
    th.join()
    state.store.lock = timed._lock
    loaded_ms = statistics.median(loaded) * 1000
    figures.append(Figure(
        f"hub frame {nodes:,} nodes, scrapes running", f"{loaded_ms:.0f} ms (max {max(loaded) * 1000:.0f})",
        "a scrape every 15 s: ~1 slowed frame", f"{frame_ms:.0f} ms without (max {max(base) * 1000:.0f})", None,
        f"{scrapes[0]} scrapes back to back during {len(loaded)} frames: the worst case, one thread of "
        "Python sharing the GIL"))
    figures.append(Figure(
        f"state lock held by a scrape, {nodes:,} nodes (all)", f"{timed.held / max(1, scrapes[0]) * 1000:.1f} ms",
        "far below 1 frame", f"hub frame {frame_ms:.0f} ms", None,
        f"over the {scrapes[0]} scrapes above: the longest a frame can wait for the lock because of one"))
    return figures


if __name__ == "__main__":
    from .harness import print_table

    print_table(run(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 5_000))
