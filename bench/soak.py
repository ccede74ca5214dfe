"""Soak: memory stays flat over a long run with churn, in virtual time.

    python -m bench.soak [--nodes 5000] [--minutes 90] [--every 5]
    python -m bench.soak --hub [--nodes 60] [--hours 24] [--speed 240]

``--hub`` soaks the whole hub instead (``hub_soak``): the simulated API server over real HTTPS
(``SimServer``, its fleet in virtual time at ``speed``, churn+flapping), a ``HubLiveSource`` whose
clock runs at the same speed, the flight recorder rotating segments under a retention, a steady
viewer and viewers coming and going, and the API server restarted every six virtual hours (it
stops listening and drops every stream for two wall seconds, then listens again: the watches
resume or relist). Six virtual hours is 90 wall seconds at x240: the reflector's backoff is in
wall time and resets after 60 s healthy (client-go's shape), so restarts closer in wall time
would leave the watches backing off most of the run, which is right for an API server that
restarts every few seconds but not what a day looks like. After the run: how long until the
watches are up and the recorder writes on. Every virtual hour: RSS, file descriptors, threads, the hub's frame time
(median and worst of its ticks in that hour), segments on disk. The figure is the last hour's
beside the first's (the reference, measured in the same run).

The simulated fleet (``DemoSource`` over ``SimFleet``, scenario ``churn+flapping``: a node deleted
every 90 s and a new one joining, a node cut off for 70 s every two minutes, pods rescheduled
off deleted nodes, events expiring after their TTL) feeds a ``FleetState`` headless; every
virtual second the dashboard's per-tick work runs (``evaluate``, row selection, with a label
search every tenth tick, and drawing the first screen of rows). Every ``every`` virtual minutes
the process RSS and the size of every container of the state are printed.

"Flat" means: after the warm-up sample, no container grows with time, only with the fleet:
per-node maps hold at most the nodes that exist, stored events at most those the cluster still
has, and RSS grows by at most a few percent. ``check`` states those bounds; the scaled-down
test (``tests/sim/test_soak.py``) asserts them.
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
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


# --- the whole hub ------------------------------------------------------------------------------


SIM_HISTORY = 5_000
"""Changes a resource the in-process simulated API server keeps (its default, 200,000, grows by
~23 MiB a virtual hour at 60 nodes for nine hours: the first run of this soak took it for the hub's)."""


@dataclass
class HubSample:
    hour: float
    rss: int
    fds: int
    threads: int
    tick_median: float
    tick_max: float
    segments: int
    restarts: int
    relists: int
    viewers_served: int
    steady_connected: bool
    lines: int = 0
    """Lines the flight recorder has written so far."""
    streams_up: bool = True
    """The nodes and leases watches connected at the sample (not, for a while, after a restart:
    the reflector backs off in wall time, client-go's way)."""
    scoped: int = 0
    """The hub's per-node watches (pods, events) at the sample: not counted in ``fds`` and ``threads``."""
    recovered: float | None = None
    """The last sample only: wall seconds after the run until the nodes and leases watches were
    connected again and the recorder wrote on (None: not within ``BACKOFF_CAP`` + 30 s)."""


def _fds() -> int:
    import os

    return len(os.listdir("/proc/self/fd"))


_SCOPED = ("watch pods on ", "watch events of ")
"""The threads of the hub's watches of one node's pods and events (``sources/live.py``): started for
the nodes viewers drill into and the nodes it watches on its own, stopped when no longer needed."""


def _resting(seconds: float = 0.5) -> tuple[int, int, int]:
    """File descriptors and threads at rest, and the per-node watches then: the least of each seen
    over ``seconds``, the per-node watches not counted in the fds and threads (one thread each, and
    its connection's socket at both ends: the simulated API server runs in this process). A viewer
    that just left or a segment's writer being replaced hold a few for a moment, and the watches of
    a flapping node's pods and events come and go with the fleet (a sample taken with two of them
    read +8 fds and +4 threads, in one run out of two on a quiet machine); a leak holds them for good
    and shows all the same."""
    best: tuple[int, int, int] | None = None
    end = time.monotonic() + seconds
    while True:
        scoped = sum(t.name.startswith(_SCOPED) for t in threading.enumerate())
        now = (_fds() - 2 * scoped, threading.active_count() - scoped, scoped)
        best = now if best is None else (min(best[0], now[0]), min(best[1], now[1]), min(best[2], now[2]))
        if time.monotonic() >= end:
            return best
        time.sleep(0.02)


def hub_soak(directory: str, nodes: int = 60, hours: float = 24.0, speed: float = 240.0, every: float = 1.0,
             restart_every: float = 6.0, down_seconds: float = 2.0, viewer_every: float = 2.0,
             segment_minutes: float = 30.0, keep_hours: float = 4.0,
             report: Callable[[HubSample], None] | None = None,
             debug: Callable[..., None] | None = None) -> list[HubSample]:
    """The hub against the simulated API server for ``hours`` virtual hours at ``speed``; a sample
    every ``every`` virtual hours (the first once the lists are in). ``restart_every`` (virtual
    hours): the API server goes down for ``down_seconds`` (wall) and comes back. ``viewer_every``
    (wall seconds): a viewer attaches, waits for its first frame, and goes."""
    import statistics
    from pathlib import Path

    from nodewatch.core.clock import VirtualClock
    from nodewatch.core.settings import Settings
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.hub.live import HubLiveSource
    from nodewatch.hub.server import Hub
    from nodewatch.hub.viewer_source import HubAddress, ViewerSource
    from nodewatch.sim.fleet import SimFleet
    from nodewatch.sim.server import SimServer
    from nodewatch.sources.segments import list_segments

    base = Path(directory)
    fleet = SimFleet(nodes=nodes, scenario=SCENARIO, seed=4)
    # The simulated API server runs in this process: its watch history is kept short (a watch cache
    # of SIM_HISTORY changes a resource, enough to resume every watch across a restart), or its
    # growth would be counted as the hub's.
    srv = SimServer(fleet, speed=speed, kubeconfig_out=base / "sim.kubeconfig", history_limit=SIM_HISTORY).start()
    clock = VirtualClock(fleet.now, speed=speed)
    src = HubLiveSource(Settings(), kubeconfig=str(base / "sim.kubeconfig"), clock=clock,
                        cert_cache_dir=str(base / "certs"))
    rec = SegmentedRecorder(base / "recordings", {**src.recording_source(), "hub": True}, src.state.settings,
                            segment_seconds=segment_minutes * 60, keep_seconds=keep_hours * 3600, keep_bytes=None,
                            clock=clock, records=src.state.node_records, record_format="columnar")
    src.recorder = rec
    hub = Hub(src, str(base / "hub.sock"), tick_seconds=0.25)
    address = HubAddress(path=str(base / "hub.sock"))
    samples: list[HubSample] = []
    ticks: list[float] = []
    restarts = served = 0
    hub.start()
    steady = ViewerSource(address)
    steady.start()
    try:
        if not src.wait_synced(60):
            raise RuntimeError("the live source never listed the simulated fleet")
        t0 = clock.now()
        next_sample, next_restart, next_viewer = t0, t0 + restart_every * 3600, time.monotonic()
        seen_tick = hub.ticks
        while True:
            now = clock.now()
            if hub.ticks != seen_tick:
                seen_tick = hub.ticks
                ticks.append(hub.last_tick_seconds)
            if now >= next_sample:
                gc.collect()
                fds, threads, scoped = _resting()
                relists = sum(src.reflector(r).relists for r in ("nodes", "leases"))
                samples.append(HubSample((now - t0) / 3600, rss_bytes(), fds, threads,
                                         statistics.median(ticks) if ticks else 0.0, max(ticks, default=0.0),
                                         len(list_segments(rec.directory)), restarts, relists, served,
                                         steady.state.connected, rec.lines, _streams_up(src), scoped))
                if report is not None:
                    report(samples[-1])
                if debug is not None:
                    debug(src, rec, srv)
                ticks = []
                next_sample += every * 3600
                if now >= t0 + hours * 3600:
                    break
            if now >= next_restart:
                srv.go_down()
                time.sleep(down_seconds)  # the API server away, in wall time
                srv.go_up()
                restarts += 1
                next_restart += restart_every * 3600
            if time.monotonic() >= next_viewer:
                v = ViewerSource(address)
                v.start()
                deadline = time.monotonic() + 30
                while v.state.seq == 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
                v.stop()
                served += 1
                next_viewer = time.monotonic() + viewer_every
            time.sleep(0.02)
        samples[-1].recovered = _recovered(src, rec)
    finally:
        steady.stop()
        hub.stop()
        rec.close()
        srv.stop()
    return samples


def warm_sample(samples: list[HubSample], warm_hours: float) -> HubSample:
    """The first sample ``warm_hours`` in (the state, the keyframe's objects and the simulated
    server's watch history have filled by then), else the last."""
    return next((s for s in samples if s.hour >= warm_hours - 1e-6), samples[-1])


def _streams_up(src) -> bool:
    health = src.state.evaluate(src.clock.now()).health
    return all(health[r].connected for r in ("nodes", "leases") if r in health)


def _recovered(src, rec) -> float | None:
    """Wall seconds until the watches are up and the recorder writes on (see ``HubSample.recovered``)."""
    from nodewatch.sources.reflector import BACKOFF_CAP

    began, lines = time.monotonic(), rec.lines
    while time.monotonic() - began < BACKOFF_CAP + 30:
        if _streams_up(src) and rec.lines > lines:
            return time.monotonic() - began
        time.sleep(0.05)
    return None


def check_hub(samples: list[HubSample], segments_allowed: int, warm_hours: float) -> list[str]:
    """What is not flat in a hub soak (empty: flat): every sample after warm-up against the warm one."""
    import statistics

    bad: list[str] = []
    warm = warm_sample(samples, warm_hours)
    later = [s for s in samples if s.hour > warm.hour]
    for s in later:
        if s.fds > warm.fds + 4:
            bad.append(f"hour {s.hour:.0f}: {s.fds} fds ({warm.fds} at hour {warm.hour:.0f})")
        if s.threads > warm.threads + 2:
            bad.append(f"hour {s.hour:.0f}: {s.threads} threads ({warm.threads} at hour {warm.hour:.0f})")
        if s.rss > warm.rss * 1.10 + 16 * 2**20:
            bad.append(f"hour {s.hour:.0f}: RSS {s.rss / 2**20:.0f} MiB ({warm.rss / 2**20:.0f} at hour "
                       f"{warm.hour:.0f})")
        if s.segments > segments_allowed:
            bad.append(f"hour {s.hour:.0f}: {s.segments} segments on disk, retention allows {segments_allowed}")
        if not s.steady_connected:
            bad.append(f"hour {s.hour:.0f}: the steady viewer is not connected")
    if samples[-1].recovered is None:
        bad.append("the watches did not come back after the last restart")
    early = [s.tick_median for s in samples[1:4]]
    if later and early:
        late_p50, early_p50 = statistics.median(s.tick_median for s in later), statistics.median(early)
        if late_p50 > 2 * early_p50 + 0.005:
            bad.append(f"frame time: median of the hours after warm-up {late_p50 * 1e3:.1f} ms, "
                       f"of hours 1-3 {early_p50 * 1e3:.1f} ms")
    return bad


def print_hub_sample(s: HubSample, out=sys.stdout) -> None:
    if not s.hour:
        print(f"{'hour':>5} {'RSS MiB':>8} {'fds':>4} {'threads':>7} {'tick p50 ms':>11} {'tick max ms':>11} "
              f"{'segments':>8} {'restarts':>8} {'relists':>7} {'viewers':>7} {'lines':>9} {'watches':>7}",
              file=out, flush=True)
    print(f"{s.hour:5.1f} {s.rss / 2**20:8.1f} {s.fds:4d} {s.threads:7d} {s.tick_median * 1e3:11.2f} "
          f"{s.tick_max * 1e3:11.2f} {s.segments:8d} {s.restarts:8d} {s.relists:7d} {s.viewers_served:7d} "
          f"{s.lines:9d} {'up' if s.streams_up else 'DOWN':>7}", file=out, flush=True)


def run_hub(nodes: int = 60, hours: float = 24.0, speed: float = 240.0) -> list[Figure]:
    import os
    import statistics
    import tempfile

    segment_minutes, keep_hours = 30.0, 4.0
    warm_hours = keep_hours + 2  # retention reached, and the state filled
    t = time.perf_counter()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="nodewatch-hubsoak-") as tmp:
        samples = hub_soak(tmp, nodes, hours, speed, segment_minutes=segment_minutes, keep_hours=keep_hours,
                           report=lambda s: print_hub_sample(s, sys.stderr))
    took = time.perf_counter() - t
    allowed = int(keep_hours * 60 / segment_minutes) + 2
    bad = check_hub(samples, allowed, warm_hours)
    first, warm, last = samples[1] if len(samples) > 1 else samples[0], warm_sample(samples, warm_hours), samples[-1]
    later = [s for s in samples if s.hour > warm.hour] or [last]

    def hour(s: HubSample) -> str:
        return (f"hour {s.hour:.0f}: RSS {s.rss / 2**20:.0f} MiB, {s.fds} fds, {s.threads} threads, "
                f"tick p50 {s.tick_median * 1e3:.1f} ms")

    return [Figure(f"hub soak: {hours:g} virtual h at x{speed:g}, {nodes} nodes, {SCENARIO}, "
                   f"{last.restarts} API restarts, {last.viewers_served} viewers came and went",
                   f"{hour(last)}; after hour {warm.hour:.0f}: RSS {min(s.rss for s in later) / 2**20:.0f}-"
                   f"{max(s.rss for s in later) / 2**20:.0f} MiB, tick p50 median "
                   f"{statistics.median(s.tick_median for s in later) * 1e3:.1f} ms, <= {max(s.segments for s in later)} "
                   "segments",
                   f"flat after hour {warm.hour:.0f}: fds +4, threads +2, RSS +10% +16 MiB, frame time <= 2x hours "
                   f"1-3 + 5 ms; <= {allowed} segments",
                   f"same run: {hour(first)}; {hour(warm)}", not bad,
                   ("; ".join(bad[:5]) or "flat") + f"; watches up and recording {last.recovered or 0:.1f} s after "
                   f"the run; {took:.0f} s wall, load {load:.1f} at start")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--minutes", type=float, default=90)
    ap.add_argument("--every", type=float, default=5)
    ap.add_argument("--hub", action="store_true", help="soak the whole hub (see the module docstring)")
    ap.add_argument("--hours", type=float, default=24.0, help="--hub: virtual hours")
    ap.add_argument("--speed", type=float, default=240.0, help="--hub: virtual seconds a wall second")
    args = ap.parse_args(argv)
    from .harness import print_table

    figs = run_hub(args.nodes if args.nodes != 5_000 else 60, args.hours, args.speed) if args.hub else run(
        args.nodes, args.minutes, args.every)
    print_table(figs)
    return 0 if all(f.ok for f in figs) else 1


if __name__ == "__main__":
    sys.exit(main())
