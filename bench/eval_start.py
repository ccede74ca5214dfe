"""CPU cost of the two frames of a 65k-node start on the UI's thread: ``python -m bench.eval_start``.

Not one of ``make bench``'s groups: it reads production-shaped objects captured from the simulated
API server (one watch event a line), ``/tmp/prof/nodes.jsonl`` (65,000 Nodes, 671 MB) and
``/tmp/prof/leases.jsonl`` (their Leases, about 1 in 15 stale). Each run builds a fresh
``FleetState`` the way a ``LiveSource`` start does (both streams connecting, then listing):

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

from nodewatch.core.clock import ManualClock
from nodewatch.core.fleet import FleetState
from nodewatch.core.settings import Settings
from nodewatch.core.wire import DECODERS

NODES_FILE = "/tmp/prof/nodes.jsonl"
LEASES_FILE = "/tmp/prof/leases.jsonl"
BLOCK = 16 << 20
SIZE = (200, 60)

Records = list[tuple[str, Any]]


def read_events(path: str, resource: str, limit: int | None = None) -> Records:
    """(type, record) of every line of ``path``, decoded by the typed decoder a block at a time."""
    decoder = DECODERS[resource]
    out: Records = []
    rest = b""
    with open(path, "rb") as f:
        while limit is None or len(out) < limit:
            chunk = f.read(BLOCK)
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                out.extend((etype, rec) for etype, rec, _ in decoder.decode_events(data[:cut]))
        if rest.strip() and (limit is None or len(out) < limit):
            out.extend((etype, rec) for etype, rec, _ in decoder.decode_events(rest))
    return out[:limit]


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
    p.add_argument("--nodes", type=int, default=None, help="only the first N nodes and leases")
    p.add_argument("--no-app", action="store_true", help="skip the headless app's ticks")
    p.add_argument("--profile", type=int, default=0, metavar="TOP", help="cProfile each evaluate, print TOP rows")
    args = p.parse_args(argv)

    t = time.perf_counter()
    leases = read_events(LEASES_FILE, "leases", args.nodes)
    nodes = read_events(NODES_FILE, "nodes", args.nodes)
    now = start_now(leases)
    gc.freeze()  # the decoded objects are long-lived: out of the collector's way, as after a list
    print(f"decoded {len(nodes):,} nodes, {len(leases):,} leases in {time.perf_counter() - t:.1f} s; "
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
