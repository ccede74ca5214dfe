#!/usr/bin/env python3
"""How much a dashboard frame and a tick cost at 1,000 / 10,000 / 65,000 nodes.

    .venv/bin/python scripts/ui_frame_bench.py [--sizes 1000,10000,65000]

Measures, per fleet size: ``FleetState.evaluate`` one second later (the core's share of a tick);
row selection for the default view, a state filter, a zone filter, a name sort and a search;
drawing the visible lines of the table (60 rows, what a frame costs); and a whole app tick with
the screen repainted (headless, 200x60).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from nodewatch.core.clock import ManualClock
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.timeutil import format_time
from nodewatch.ui.fleet_table import NOT_READY, LabelMatcher, RowContext, RowQuery, layout_columns, render_row, select_rows

T0 = 1_800_000_000.0
RESOURCES = ("nodes", "leases", "pods", "events", "certificatesigningrequests")


def build(n: int, now: float = T0) -> FleetState:
    state = FleetState(Settings(server_version="v1.33.2"))
    with state.lock:
        for i in range(n):
            name = f"node-{i:05d}"
            zone = f"zone-{i % 3}"
            bad = i % 37 == 0
            conds = [{"type": "Ready", "status": "Unknown" if bad else "True",
                      "lastTransitionTime": format_time(now - 100), "lastHeartbeatTime": format_time(now - 100)}]
            taints = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                       "timeAdded": format_time(now - 100 + i % 50)}] if bad else []
            state.apply("nodes", "ADDED", {
                "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone, "team": f"t{i % 20}"}},
                "spec": {"taints": taints},
                "status": {"conditions": conds, "nodeInfo": {"kubeletVersion": "v1.33.2"}},
            }, now, listing=True)
            state.apply("leases", "ADDED", {
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                         "renewTime": format_time(now - (160 if bad else i % 30), micro=True)},
            }, now, listing=True)
        for r in RESOURCES:
            state.apply(r, "SYNCED", None, now)
    return state


def timed(fn, repeat: int = 5) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


class _Source:
    def __init__(self, state: FleetState, clock: ManualClock) -> None:
        self.name = "bench"
        self.state, self.clock, self.replay = state, clock, None

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def focus_node(self, node: str | None) -> None: ...


async def app_tick(state: FleetState, now: float) -> tuple[float, float]:
    from nodewatch.ui.app import NodewatchApp

    clock = ManualClock(now)
    app = NodewatchApp(_Source(state, clock), refresh_seconds=3600)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        ticks, frames = [], []
        for _ in range(5):
            clock.advance(1)
            t = time.perf_counter()
            app.tick()
            ticks.append(time.perf_counter() - t)
            await pilot.pause()
            frames.append(time.perf_counter() - t)
        return statistics.median(ticks), statistics.median(frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,65000")
    args = ap.parse_args()
    print(f"{'nodes':>7} {'evaluate':>9} {'rows':>7} {'state':>7} {'zone':>7} {'sort':>7} {'search':>7} "
          f"{'frame60':>8} {'tick':>7} {'tick+paint':>10}   (ms)")
    for n in (int(x) for x in args.sizes.split(",")):
        state = build(n)
        state.evaluate(T0)
        clock = [T0]

        def evaluate() -> None:
            clock[0] += 1
            state.evaluate(clock[0])

        ev = timed(evaluate)
        view = state.evaluate(clock[0])
        m = LabelMatcher()
        rows_default = timed(lambda: select_rows(view, RowQuery(), state, m))
        rows_state = timed(lambda: select_rows(view, RowQuery(states=NOT_READY), state, m))
        rows_zone = timed(lambda: select_rows(view, RowQuery(zone="zone-1"), state, m))
        rows_sort = timed(lambda: select_rows(view, RowQuery(sort="name"), state, m))
        rows_search = timed(lambda: select_rows(view, RowQuery(search="team=t7"), state, m))
        rows = select_rows(view, RowQuery())
        cols = layout_columns(200)

        def frame() -> None:
            ctx = RowContext(clock[0])
            for v in rows[n // 2: n // 2 + 60]:
                render_row(v, ctx, cols, 200)

        fr = timed(frame)
        tick, paint = asyncio.run(app_tick(state, clock[0]))
        assert view.counts[NodeState.READY] > 0
        print(f"{n:>7} {ev * 1e3:9.2f} {rows_default * 1e3:7.3f} {rows_state * 1e3:7.3f} {rows_zone * 1e3:7.2f} "
              f"{rows_sort * 1e3:7.2f} {rows_search * 1e3:7.2f} {fr * 1e3:8.2f} {tick * 1e3:7.2f} {paint * 1e3:10.2f}")


if __name__ == "__main__":
    main()
