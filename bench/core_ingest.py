"""Core ingest: Lease watch events decoded and applied per second on one core.

Reference: the bare JSON decode rate of the same bytes (what any consumer pays at least).
"""

from __future__ import annotations

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


def run(nodes: int = 5000, events: int = 200_000) -> list[Figure]:
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
