"""Soak: memory stays flat over a long run with churn, in virtual time.

    python -m bench.soak [--nodes 5000] [--minutes 90] [--every 5]

The simulated fleet (``DemoSource`` over ``SimFleet``, scenario ``churn+flapping``: a node deleted
every 90 s and a new one joining, a node cut off for 70 s every two minutes, pods rescheduled
off deleted nodes, events expiring after their TTL) feeds a ``FleetState`` headless; every
virtual second the dashboard's per-tick work runs (``evaluate``, row selection, with a label
search every tenth tick, and drawing the first screen of rows). Every ``every`` virtual minutes
the process RSS and the size of every container of the state are printed.

"Flat" means: after the warm-up sample, no container grows with time, only with the fleet:
per-node maps hold at most the nodes that exist, stored events at most those the cluster still
has, and RSS grows by at most a few percent. ``check`` states those bounds; the scaled-down
test (``tests/test_soak.py``) asserts them.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from .harness import Figure, rss_bytes

SCENARIO = "churn+flapping"


@dataclass
class Sample:
    minute: float
    rss: int
    sizes: dict[str, int] = field(default_factory=dict)


def state_sizes(src) -> dict[str, int]:  # a DemoSource
    """Every container of the state (and of the feed) that could grow, by name."""
    st = src.state
    with st.lock:
        live = st.nodes
        stale = {f"stale_{name}": sum(1 for k in m if k not in live) for name, m in (
            ("leases", st.leases), ("views", st.evaluator._views), ("pods_by_node", st.pods_by_node),
            ("events_by_node", st.events_by_node), ("timelines", st.timelines), ("certs", st.certs))}
        return stale | {
            "nodes": len(st.nodes),
            "leases": len(st.leases),
            "pods": len(st.pods),
            "pods_by_node": len(st.pods_by_node),
            "pods_by_node_items": sum(len(v) for v in st.pods_by_node.values()),
            "events": len(st.events),
            "events_by_node": len(st.events_by_node),
            "events_by_node_items": sum(len(v) for v in st.events_by_node.values()),
            "timelines": len(st.timelines),
            "timeline_items": sum(len(v) for v in st.timelines.values()),
            "certs": len(st.certs),
            "views": len(st.evaluator._views),
            "order": len(st.evaluator._order),
            "due": len(st.evaluator._due),
            "dirty": len(st.evaluator._dirty),
            "problems": len(st.problems),
            "feed_pending": len(src._pending),
            # what the simulated cluster holds (the truth the state should track)
            "cluster_nodes": len(src.fleet.nodes),
            "cluster_pods": len(src.fleet.pods),
            "cluster_events": len(src.fleet.events.objects),
        }


def soak(nodes: int = 5_000, minutes: float = 60, every: float = 5, seed: int = 3,
         event_ttl: float | None = None, report: Callable[[Sample], None] | None = None) -> list[Sample]:
    """Run the churning fleet for ``minutes`` virtual minutes; a Sample every ``every`` minutes.

    ``event_ttl``: a shorter Event TTL than the API server's 1 h (the simulator's
    ``EventRecorder.ttl``), so that a short run sees events expire.
    """
    from nodewatch.core.search import LabelSearch
    from nodewatch.core.settings import Settings
    from nodewatch.sources.demo import DemoSource
    from nodewatch.ui.cells import RowContext, render_row
    from nodewatch.ui.rows import RowQuery, layout_columns, select_rows

    src = DemoSource(Settings(), nodes=nodes, scenario=SCENARIO, seed=seed)
    if event_ttl is not None:
        src.fleet.events.ttl = event_ttl
    matcher = LabelSearch(src.state)
    cols = layout_columns(200)
    first_nodes = set(src.fleet.nodes)
    t0 = src.fleet.now
    t = t0
    samples: list[Sample] = []
    next_sample = t0
    k = 0
    end = t0 + minutes * 60
    while True:
        src.advance_to(t)
        view = src.state.evaluate(t)
        query = RowQuery(search="zone") if k % 10 == 0 else RowQuery()
        rows = select_rows(view, query, matcher)
        ctx = RowContext(t)
        for v in rows[:58]:
            render_row(v, ctx, cols, 200)
        if t >= next_sample:
            gc.collect()
            s = Sample((t - t0) / 60, rss_bytes(), state_sizes(src))
            s.sizes["matcher_memo"] = len(matcher._memo)
            s.sizes["nodes_replaced"] = len(first_nodes - set(src.fleet.nodes))
            samples.append(s)
            if report is not None:
                report(s)
            next_sample += every * 60
        if t >= end:
            break
        t = min(end, t + 1.0)
        k += 1
    src.stop()
    return samples


def check(samples: list[Sample], slack: int = 10) -> list[str]:
    """What is not flat, in words (empty: flat). Bounds are by the fleet's size, not by time."""
    bad: list[str] = []
    warm = samples[1] if len(samples) > 2 else samples[0]
    for s in samples[1:]:
        for name, n in s.sizes.items():
            # entries for nodes that no longer exist must not pile up as nodes come and go
            if name.startswith("stale_") and n > warm.sizes[name] + slack:
                bad.append(f"minute {s.minute:.0f}: {name[6:]} keeps {n} deleted nodes "
                           f"({warm.sizes[name]} at minute {warm.minute:.0f})")
        z = s.sizes
        cluster = z["cluster_nodes"]
        per_node = {k: z[k] for k in ("nodes", "leases", "views", "order", "pods_by_node", "events_by_node",
                                      "timelines", "certs")}
        for name, n in per_node.items():
            if n > cluster + slack:
                bad.append(f"minute {s.minute:.0f}: {name} has {n} entries for {cluster} nodes")
        if z["pods"] > z["cluster_pods"] + slack:
            bad.append(f"minute {s.minute:.0f}: {z['pods']} pods kept, the cluster has {z['cluster_pods']}")
        if z["events"] > z["cluster_events"] + slack:
            bad.append(f"minute {s.minute:.0f}: {z['events']} events kept, the cluster has {z['cluster_events']}")
        if z["due"] > 4 * cluster + slack:
            bad.append(f"minute {s.minute:.0f}: the due heap has {z['due']} entries for {cluster} nodes")
        if z["matcher_memo"] > 2 * max(cluster, 1000) + slack:
            bad.append(f"minute {s.minute:.0f}: the search memo has {z['matcher_memo']} entries")
    return bad


COLUMNS = ("nodes", "pods", "events", "cluster_events", "timelines", "stale_timelines", "pods_by_node",
           "stale_pods_by_node", "events_by_node", "stale_events_by_node", "stale_certs", "due", "feed_pending")


def print_sample(s: Sample, out=sys.stdout) -> None:
    if s.minute == 0:
        print(f"{'minute':>6} {'RSS MB':>7} " + " ".join(f"{c.replace('_by_node', '/node'):>17}" for c in COLUMNS), file=out, flush=True)
    print(f"{s.minute:6.0f} {s.rss / 1e6:7.1f} " + " ".join(f"{s.sizes[c]:>17,}" for c in COLUMNS), file=out,
          flush=True)


def run(nodes: int = 5_000, minutes: float = 90, every: float = 5) -> list[Figure]:
    t = time.perf_counter()
    samples = soak(nodes, minutes, every, report=lambda s: print_sample(s, sys.stderr))
    took = time.perf_counter() - t
    bad = check(samples)
    warm = samples[1] if len(samples) > 2 else samples[0]
    growth = (samples[-1].rss - warm.rss) / warm.rss
    ok = not bad and growth <= 0.05
    return [Figure(f"soak: {minutes:g} virtual min, {nodes:,} nodes, {SCENARIO}",
                   f"RSS {warm.rss / 1e6:,.0f} -> {samples[-1].rss / 1e6:,.0f} MB ({growth:+.1%})",
                   "flat: RSS <= +5%, containers bounded by the fleet", "containers sampled every "
                   f"{every:g} virtual min", ok, ("; ".join(bad[:5]) or "every container bounded by the fleet")
                   + f"; {took:.0f} s wall")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--minutes", type=float, default=90)
    ap.add_argument("--every", type=float, default=5)
    args = ap.parse_args(argv)
    from .harness import print_table

    figs = run(args.nodes, args.minutes, args.every)
    print_table(figs)
    return 0 if all(f.ok for f in figs) else 1


if __name__ == "__main__":
    sys.exit(main())
