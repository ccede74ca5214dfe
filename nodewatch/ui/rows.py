"""Which nodes the fleet table shows, in what order, and which columns fit: plain functions.

No Rich, no Textual: the cost of choosing rows (filters, search, sort) is measured in ``bench/``
and tested without a screen. A state filter costs O(shown), not O(fleet): the core hands the fleet
worst first, so one state is a slice of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..core.format import version_key
from ..core.rules import NodeState
from ..core.search import LabelSearch
from ..core.views import FleetView, NodeView

INF = math.inf


# --- columns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    """Fixed width; for the two flexible columns (name, cause) the minimum."""
    drop: int
    """Narrow screens drop columns with the highest ``drop`` first; 0 = never dropped."""
    sort: Callable[[NodeView], Any] | None
    """Sort key (ascending = most urgent first where that means something); None: fleet order."""
    flex: bool = False


def cond_flags(v: NodeView) -> int:
    return (v.ready != "True") * 4 + len(v.pressure) + v.network_unavailable


COLUMNS: tuple[Column, ...] = (
    Column("state", "STATE", 10, 0, None),
    Column("name", "NODE", 12, 0, lambda v: v.name, flex=True),
    Column("zone", "ZONE", 12, 5, lambda v: (v.zone, v.state.rank, v.name)),
    Column("renew", "RENEW AGE", 16, 3, lambda v: (v.lease_observed_at if v.lease_observed_at is not None else INF, v.name)),
    Column("grace", "GRACE", 18, 0, lambda v: (v.lease_observed_at + v.grace if v.lease_observed_at is not None else INF, v.state.rank, v.name)),
    Column("evict", "EVICTION", 18, 1, lambda v: (v.eviction_at if v.eviction_at is not None else INF, v.name)),
    Column("cond", "R M D P N", 9, 4, lambda v: (-cond_flags(v), v.name)),
    Column("taints", "TAINTS", 26, 6, lambda v: (-len(v.taints), v.name)),
    Column("cert", "CERT", 7, 7, lambda v: (v.cert_not_after if v.cert_not_after is not None else INF, v.name)),
    Column("kubelet", "KUBELET", 10, 8, lambda v: (version_key(v.kubelet_version), v.name)),
    Column("cause", "LIKELY CAUSE", 32, 0, lambda v: (v.cause == "", v.cause, v.name), flex=True),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
WALL_COLUMNS = ("state", "name", "zone", "grace", "evict", "cause")
NAME_MAX = 34
NAME_SCAN_TICKS = 16
"""How often (in ticks) the name column's width is fitted to the first 2,000 rows again."""
SEP = " "


def layout_columns(width: int, keys: tuple[str, ...] = COLUMN_KEYS, name_width: int = NAME_MAX
                   ) -> list[tuple[Column, int]]:
    """The columns that fit ``width`` cells, with their widths, in display order.

    ``name_width`` is the longest name shown (capped): the name column takes no more, and the
    likely cause gets the rest.
    """
    cols = [c for c in COLUMNS if c.key in keys]
    chosen = list(cols)
    name_min = next(c.width for c in COLUMNS if c.key == "name")
    name_want = max(name_min, min(name_width, NAME_MAX))

    def need(cs: list[Column], name_w: int) -> int:
        return sum(name_w if c.key == "name" else c.width for c in cs) + len(SEP) * (len(cs) - 1)

    # The node's name is what the operator reads first: whole names cost optional columns before
    # they cost letters of the name (a cut "general-apse" is the same for a thousand nodes).
    for c in sorted(cols, key=lambda c: -c.drop):
        if need(chosen, name_want) <= width or c.drop == 0:
            continue
        chosen.remove(c)
    name_w = max(name_min, min(name_want, width - need(chosen, 0)))
    spare = max(0, width - need(chosen, name_w))
    out: list[tuple[Column, int]] = []
    has_cause = any(c.key == "cause" for c in chosen)
    for c in chosen:
        w = c.width
        if c.key == "name":
            w = name_w + (0 if has_cause else spare)
        elif c.key == "cause":
            w += spare
        out.append((c, w))
    return out


# --- choosing rows ---------------------------------------------------------------------------

NOT_READY = "not-ready"
"""State filter: every node that is not Ready."""


@dataclass(frozen=True)
class RowQuery:
    """Which nodes the table shows, and in what order."""

    states: str | NodeState | None = None
    """None: all; ``NOT_READY``: all but Ready; a NodeState: only that state."""
    zone: str | None = None
    search: str = ""
    """Case-insensitive substring of the node's name, or of one of its labels (``key=value``)."""
    sort: str = "state"
    reverse: bool = False



def state_slice(view: FleetView, states: str | NodeState) -> list[NodeView]:
    """Fleet order is worst first by state rank, so a state filter is a slice: O(1), not O(n)."""
    counts = view.counts
    order = sorted(NodeState, key=lambda s: s.rank)
    if states == NOT_READY:
        end = sum(counts.get(s, 0) for s in order if s is not NodeState.READY)
        return view.nodes[:end]
    start = 0
    for s in order:
        if s is states:
            return view.nodes[start:start + counts.get(s, 0)]
        start += counts.get(s, 0)
    return []


def select_rows(view: FleetView, query: RowQuery, search: LabelSearch | None = None) -> list[NodeView]:
    """The rows to show. Worst first with no search or zone filter costs O(shown), not O(fleet).

    ``search`` looks in labels too; without it a search looks in node names only."""
    rows = view.nodes if query.states is None else state_slice(view, query.states)
    if query.zone is not None:
        zone = query.zone
        rows = [v for v in rows if v.zone == zone]
    if query.search:
        if search is None:
            term = query.search.lower()
            rows = [v for v in rows if term in v.name.lower()]
        else:
            rows = search.matches(query.search, rows)
    col = next((c for c in COLUMNS if c.key == query.sort), None)
    if col is not None and col.sort is not None:
        rows = sorted(rows, key=col.sort, reverse=query.reverse)
    elif query.reverse:
        rows = rows[::-1]
    return rows
