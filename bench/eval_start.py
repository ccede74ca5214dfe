"""CPU cost of the two frames of a 65k-node start on the UI's thread: ``python -m bench.eval_start``.

Not one of ``make bench``'s groups (a microbenchmark for working on the evaluation; ``start``
measures the whole start). The objects are the production-shaped ones ``bench.start``'s server
serves (``bench.objects``: 65,000 Nodes of ~10 KB, their Leases, one in 15 stopped renewing as in
``bench.start``), encoded as watch lines and decoded by the typed decoder, as a live start does.
Each run builds a fresh ``FleetState`` the way a ``LiveSource`` start does (both streams
connecting, then listing):

- *first frame*: the Leases listed and synced, the Nodes still listing, so every row is a
  placeholder (``AWAITED``) judged by its Lease alone: ``evaluate(now)``;
- *complete frame*: the Nodes listed and synced too: ``evaluate(now)`` again.

Then the same two frames through a headless ``NodewatchApp`` (200x60): ``app.tick()`` and
``pilot.pause()`` (the paint), on a fresh app and state each run. Figures are CPU seconds
(``time.process_time``), the minimum of ``--repeat`` runs; decoding and applying the objects are
outside the timing (they happen on the reflectors' threads or in a worker process). ``now`` is the
median renewTime + 5 s, so most nodes are Ready and the stale ones Late or Overdue. After each list
what it built is frozen out of the cyclic collector's way, as the reflectors do when their lists are
in, and the collector stays enabled: what it costs in a frame is the garbage that frame makes. (In a
live start the first frame comes while the Node list is still in, with the collector paused.)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from typing import Any, Callable

import orjson

from nodewatch.core.clock import ManualClock
from nodewatch.core.fleet import FleetState
from nodewatch.core.settings import Settings
from nodewatch.core.wire import DECODERS

from .objects import T0, raw_lease, raw_node
from .start import STOPPED_ONE_IN

SIZE = (200, 60)

Records = list[tuple[str, Any]]


def make_events(resource: str, count: int, renewed_at: float) -> Records:
    """(type, record) of ``count`` production-shaped objects of ``resource``, through the JSON of a
    watch stream and the typed decoder, a block at a time. Leases: renewed in the 10 s before
    ``renewed_at``, but one in ``STOPPED_ONE_IN`` a minute before that (stopped)."""
    decoder = DECODERS[resource]
    out: Records = []
    for a in range(0, count, 1000):
        lines = []
        for i in range(a, min(count, a + 1000)):
            node = raw_node(i)
            if resource == "nodes":
                obj = node
            else:
                stopped = i % STOPPED_ONE_IN == 0
                obj = raw_lease(node["metadata"]["name"], renewed_at - (70 if stopped else i % 10))
            lines.append(orjson.dumps({"type": "ADDED", "object": obj}))
        out.extend((etype, rec) for etype, rec, _ in decoder.decode_events(b"\n".join(lines) + b"\n"))
    return out


def start_now(leases: Records) -> float:
    """The median renewTime + 5 s: most Leases fresh, the stale ones Late or Overdue."""
    return statistics.median(rec.renew_time for _, rec in leases if rec.renew_time is not None) + 5.0


def new_state() -> FleetState:
    """A state as ``LiveSource.start`` leaves it: both main streams connecting."""
    state = FleetState(Settings())
    for resource in ("nodes", "leases"):
        state.update_health(resource, connected=False, synced=False, down_since=None, last_error="connecting")
        state.update_health(resource, connected=True, down_since=None, forbidden=False, last_error="")
    return state


def list_into(state: FleetState, resource: str, events: Records, t: float) -> None:
    """One list's events applied as the reflector's sink applies them, then SYNCED (and the health
    the reflector reports once its list is in)."""
    with state.batch():
        for etype, rec in events:
            state.apply(resource, etype, rec, t, True)
        state.apply(resource, "SYNCED", None, t, True)
    state.update_health(resource, synced=True, relists=0, last_error="")
    gc.collect()
    gc.freeze()  # as the reflectors do when their lists are in (``reflector.gc_paused``)


def cpu(fn: Callable[[], Any]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def evaluations(leases: Records, nodes: Records, now: float) -> tuple[float, float, int]:
    """CPU seconds of (first frame's, complete frame's) ``evaluate``, and the nodes shown."""
    state = new_state()
    list_into(state, "leases", leases, now - 1.0)
    first = cpu(lambda: state.evaluate(now))
    list_into(state, "nodes", nodes, now - 0.5)
    view = None

    def complete() -> None:
        nonlocal view
        view = state.evaluate(now)

    return first, cpu(complete), len(view.nodes) if view else 0


class StateSource:
    """A source serving a state the bench feeds by hand (the dashboard reads ``state`` and ``clock``)."""

    def __init__(self, state: FleetState, now: float) -> None:
        self.name = "bench: eval_start"
        self.state = state
        self.clock = ManualClock(now)
        self.replay = None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def focus_node(self, node: str | None) -> None:
        pass


async def _ticks(leases: Records, nodes: Records, now: float) -> tuple[float, float]:
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    state = new_state()
    app = NodewatchApp(StateSource(state, now), refresh_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        times = []
        for resource, events in (("leases", leases), ("nodes", nodes)):
            list_into(state, resource, events, now - 1.0)
            t = time.process_time()
            app.tick()
            await pilot.pause()
            times.append(time.process_time() - t)
            shown = len(app.query_one("#table", FleetTable).rows)
            if shown != len(state.leases):
                raise RuntimeError(f"the frame after {resource} shows {shown} rows, expected {len(state.leases)}")
    return times[0], times[1]


def profile(leases: Records, nodes: Records, now: float, top: int) -> None:
    import cProfile
    import pstats

    state = new_state()
    list_into(state, "leases", leases, now - 1.0)
    pr = cProfile.Profile()
    pr.runcall(state.evaluate, now)
    print("--- first frame evaluate ---")
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)
    list_into(state, "nodes", nodes, now - 0.5)
    pr = cProfile.Profile()
    pr.runcall(state.evaluate, now)
    print("--- complete frame evaluate ---")
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.eval_start", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--nodes", type=int, default=65_000)
    p.add_argument("--no-app", action="store_true", help="skip the headless app's ticks")
    p.add_argument("--profile", type=int, default=0, metavar="TOP", help="cProfile each evaluate, print TOP rows")
    args = p.parse_args(argv)

    t = time.perf_counter()
    leases = make_events("leases", args.nodes, T0)
    nodes = make_events("nodes", args.nodes, T0)
    now = start_now(leases)
    gc.freeze()  # the decoded objects are long-lived: out of the collector's way, as after a list
    print(f"made and decoded {len(nodes):,} nodes, {len(leases):,} leases in {time.perf_counter() - t:.1f} s; "
          f"now = median renewTime + 5 s", file=sys.stderr)
    if args.profile:
        profile(leases, nodes, now, args.profile)
        return 0

    runs = [evaluations(leases, nodes, now) for _ in range(args.repeat)]
    counts = {r[2] for r in runs}
    print(f"{len(leases):,} leases, {len(nodes):,} nodes ({counts} views); CPU ms, min of {args.repeat} "
          f"(all runs in brackets)")
    for i, name in ((0, "evaluate, first frame (placeholders)"), (1, "evaluate, complete frame")):
        xs = [r[i] * 1000 for r in runs]
        print(f"  {name:<40} {min(xs):7.1f}   [{', '.join(f'{x:.0f}' for x in xs)}]")
    if not args.no_app:
        ticks = [asyncio.run(_ticks(leases, nodes, now)) for _ in range(args.repeat)]
        for i, name in ((0, "tick+paint, first frame"), (1, "tick+paint, complete frame")):
            xs = [r[i] * 1000 for r in ticks]
            print(f"  {name:<40} {min(xs):7.1f}   [{', '.join(f'{x:.0f}' for x in xs)}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
