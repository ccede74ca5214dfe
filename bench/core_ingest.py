"""Core ingest: Lease watch events decoded and applied per second on one core.

Reference: the bare JSON decode rate of the same bytes (what any consumer pays at least).
"""

from __future__ import annotations

import gc
import math

import orjson

from nodewatch.core.fleet import FleetState
from nodewatch.core.timeutil import format_time

from .harness import Figure, best_of

T0 = 1_800_000_000.0


def _lease(name: str, renew: float) -> dict:
    return {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
            "metadata": {"name": name, "namespace": "kube-node-lease", "resourceVersion": "1",
                         "uid": f"0b5c1a4e-{name}", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": name}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": format_time(renew, micro=True)}}


def run(nodes: int = 5000, events: int = 200_000, hot_nodes: int = 65_000) -> list[Figure]:
    return _cold(nodes, events) + _hot(hot_nodes, events)


def _cold(nodes: int, events: int) -> list[Figure]:
    state = FleetState()
    for i in range(nodes):
        state.apply("nodes", "ADDED", {"metadata": {"name": f"node-{i}"}}, T0, True)
        state.apply("leases", "ADDED", _lease(f"node-{i}", T0), T0, True)
    state.apply("leases", "SYNCED", None, T0)
    lines = [orjson.dumps({"type": "MODIFIED", "object": _lease(f"node-{i % nodes}", T0 + 1 + i * 1e-4)})
             for i in range(events)]
    loads = orjson.loads

    def decode_only() -> None:
        for line in lines:
            loads(line)

    def decode_apply() -> None:
        apply = state.apply
        t = T0 + 1
        for line in lines:
            e = loads(line)
            apply("leases", e["type"], e["object"], t)
            t += 1e-4

    ref = best_of(decode_only)
    got = best_of(decode_apply)
    rate, ref_rate = events / got, events / ref
    return [Figure("core ingest (lease events/s, one core)", f"{rate:,.0f}/s", ">= 100,000/s",
                   f"bare orjson decode {ref_rate:,.0f}/s", rate >= 100_000)]


def _decode_all(lines: list[bytes]) -> None:
    loads = orjson.loads
    for line in lines:
        loads(line)


def _hot(nodes: int, events: int) -> list[Figure]:
    """The lease hot path as a running dashboard meets it: the fleet evaluated (every node has its
    view, as after the first frame), then renewals of Ready nodes, one tick (``evaluate``, which
    publishes the fleet's snapshot) per tenth of the fleet renewed: 65,000 nodes renewing every
    10 s and a tick every second. The figure without the ticks is the ingest side alone (the
    source's thread); with them, what the whole second costs. Each run renews every lease again
    (new renewTimes, the events made before the clock starts), so every event is a renewal.
    Until this session the cold figure above was the only one, and it never took the view path:
    nothing had been evaluated."""
    import time

    state = FleetState()
    with state.batch():
        for i in range(nodes):
            state.apply("nodes", "ADDED", {"metadata": {"name": f"node-{i}"}, "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, T0, True)
            state.apply("leases", "ADDED", _lease(f"node-{i}", T0), T0, True)
    state.apply("nodes", "SYNCED", None, T0)
    state.apply("leases", "SYNCED", None, T0)
    step = 10.0 / nodes  # each node renews every 10 s
    clock = [T0 + 1]
    state.evaluate(clock[0])
    loads = orjson.loads
    per_tick = max(1, nodes // 10)

    def make() -> list[bytes]:
        t = clock[0]
        return [orjson.dumps({"type": "MODIFIED", "object": _lease(f"node-{i % nodes}", t + i * step)})
                for i in range(events)]

    cpu: dict[bool, float] = {False: math.inf, True: math.inf}

    def timed(lines: list[bytes], ticks: bool) -> float:
        gc.collect()
        apply, evaluate = state.apply, state.evaluate
        t = clock[0]
        cpu_started = time.process_time()
        started = time.perf_counter()
        for i, line in enumerate(lines):
            e = loads(line)
            apply("leases", e["type"], e["object"], t)
            t += step
            if ticks and i % per_tick == per_tick - 1:
                evaluate(t)
        took = time.perf_counter() - started
        cpu[ticks] = min(cpu[ticks], time.process_time() - cpu_started)
        clock[0] = t
        if not ticks:
            evaluate(t)
        return took

    ref = got = ticked = math.inf
    for _ in range(3):
        lines = make()
        ref = min(ref, best_of(lambda lines=lines: _decode_all(lines), repeat=1))
        got = min(got, timed(lines, False))
        ticked = min(ticked, timed(make(), True))
    view = state.evaluate(clock[0])
    ready = view.counts.get(next(s for s in view.counts if s.name == "READY"), 0)
    ticks = events // per_tick
    return [
        Figure(f"lease hot path, {nodes:,} nodes evaluated (renewals/s, one core)", f"{events / got:,.0f}/s",
               ">= 100,000/s", f"bare orjson decode {events / ref:,.0f}/s", events / got >= 100_000,
               note=f"{ready:,} of {nodes:,} nodes Ready at the end (every event was an on-time renewal); "
                    f"CPU time {cpu[False] / events * 1e6:.2f} us a renewal (the wall figure moves with the "
                    f"machine's load, this one less)"),
        Figure(f"lease hot path + a tick per {per_tick:,} renewals ({nodes:,} nodes)",
               f"{events / ticked:,.0f}/s", "-", f"bare orjson decode {events / ref:,.0f}/s", None,
               note=f"{ticks} ticks: {(ticked - got) / ticks * 1e3:.2f} ms a tick over the renewals alone "
                    f"(CPU time {(cpu[True] - cpu[False]) / ticks * 1e3:.2f} ms)"),
    ]
