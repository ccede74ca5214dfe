"""The look-ahead of a replay: when does the next node state change come?

Applies the coming events to a scratch copy of the state and asks the core's rules, after each
event that touches a node and at each rule threshold (Late, Overdue, eviction), whether the node's
state differs from what it was. The dashboard's "next change" key jumps there.
"""

from __future__ import annotations

import heapq
import math

from ...core.multi import MultiFleet
from ...core.views import node_key
from .clusters import ReplayState
from .index import EventIndex, apply_entry

RULE_EPSILON = 0.001
"""Rule thresholds are strict (``age > grace``): a change is seen just after its threshold."""


def next_change(index: EventIndex, scratch: ReplayState, first: int, pos: float) -> float | None:
    """Virtual time of the next node state change after ``pos`` (None: none until the end).

    ``scratch`` is a copy of the state at ``pos`` (it is modified), where events [0, first) are applied.
    Nodes are known by their key (``cluster/name`` in a recording of several clusters).
    """
    view = scratch.evaluate(pos)
    several = isinstance(scratch, MultiFleet)
    current = {v.key: v.state for v in view.nodes}
    due: dict[str, float] = {v.key: v.next_change for v in view.nodes if math.isfinite(v.next_change)}
    heap = [(t, name) for name, t in due.items()]
    heapq.heapify(heap)
    known = index.received_known
    times = index.times

    def check(name: str, t: float) -> bool:
        v = scratch.node_view(name, t)
        before = current.get(name)
        if v is None:
            return before is not None
        if v.state is not before:
            return True
        if math.isfinite(v.next_change):
            if due.get(name) != v.next_change:
                due[name] = v.next_change
                heapq.heappush(heap, (v.next_change, name))
        else:
            due.pop(name, None)
        return False

    def rules_until(limit: float) -> float | None:
        while heap and heap[0][0] <= limit:
            tc, name = heapq.heappop(heap)
            if due.get(name) != tc:
                continue  # stale: the node changed since this threshold was computed
            del due[name]
            t = max(tc + RULE_EPSILON, pos + RULE_EPSILON)
            if name in current and check(name, t):
                return t
        return None

    n = len(index)
    i = first
    while i < n:
        te = times[i]
        hit = rules_until(te)
        if hit is not None:
            return hit
        # apply every event at this instant before judging
        j = i
        touched: set[str] = set()
        everything = False
        while j < n and times[j] == te:
            e = index.read(j)
            j += 1
            if e is None:
                continue
            apply_entry(scratch, e, known)
            if e.etype in ("HEALTH", "SYNCED"):
                everything = True
            elif e.resource in ("nodes", "leases") and e.obj is not None:
                name = e.obj.get("metadata", {}).get("name") if isinstance(e.obj, dict) else e.obj.name
                if isinstance(name, str):
                    touched.add(node_key(e.cluster or "", name) if several else name)
        i = j
        if everything:
            v2 = scratch.evaluate(te)
            if {v.key: v.state for v in v2.nodes} != current:
                return te
            due.clear()
            due.update({v.key: v.next_change for v in v2.nodes if math.isfinite(v.next_change)})
            heap[:] = [(t, name) for name, t in due.items()]
            heapq.heapify(heap)
            continue
        for name in touched:
            if check(name, te):
                return te
    return rules_until(index.end)
