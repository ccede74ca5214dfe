"""Which nodes the fleet table shows, in what order, and which columns fit: plain functions.

No Rich, no Textual: the cost of choosing rows (filters, search, sort) is measured in ``bench/``
and tested without a screen. A state filter costs O(shown), not O(fleet): the core hands the fleet
worst first, so one state is a slice of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..core.format import version_key
from ..core.rules import NodeState
from ..core.search import LabelSearch
from ..core.views import FleetView, NodeView, zone_key

INF = math.inf


# --- columns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    """Fixed width; for the two flexible columns (name, cause) the minimum."""
    sort: Callable[[NodeView], Any] | None
    """Sort key (ascending = most urgent first where that means something); None: fleet order."""
    flex: bool = False
    compact_width: int | None = None
    """The width of the column's compact form (``R·D··``, ``unreach:NE 3m``), if it has one."""
    compact_title: str = ""
    compact: bool = False
    """This is the compact form: its cells come from ``cell`` (``cond.c``...)."""

    @property
    def cell(self) -> str:
        """The key of the cell this column draws (``cells.py`` makes both forms)."""
        return f"{self.key}.c" if self.compact else self.key

    def compacted(self) -> Column:
        assert self.compact_width is not None
        return replace(self, width=self.compact_width, title=self.compact_title or self.title, compact=True)


def cond_flags(v: NodeView) -> int:
    return (v.ready != "True") * 4 + len(v.pressure) + v.network_unavailable


ZONE_WIDTH = 12
"""The zone column's width: a longer zone is cut in the middle (``cells``), keeping its letter."""

COLUMNS: tuple[Column, ...] = (
    Column("state", "STATE", 10, None),
    Column("name", "NODE", 12, lambda v: v.name, flex=True),
    Column("zone", "ZONE", ZONE_WIDTH, lambda v: (v.zone, v.state.rank, v.name)),
    Column("renew", "RENEW AGE", 16, lambda v: (v.lease_observed_at if v.lease_observed_at is not None else INF, v.name),
           compact_width=6, compact_title="RENEW"),
    Column("grace", "GRACE", 18, lambda v: (v.lease_observed_at + v.grace if v.lease_observed_at is not None else INF, v.state.rank, v.name),
           compact_width=10),
    Column("evict", "EVICTION", 18, lambda v: (v.eviction_at if v.eviction_at is not None else INF, v.name),
           compact_width=10, compact_title="EVICT"),
    Column("cond", "R M D P N", 9, lambda v: (-cond_flags(v), v.name), compact_width=5, compact_title="RMDPN"),
    Column("taints", "TAINTS", 26, lambda v: (-len(v.taints), v.name), compact_width=16),
    Column("cert", "CERT", 7, lambda v: (v.cert_not_after if v.cert_not_after is not None else INF, v.name)),
    Column("kubelet", "KUBELET", 10, lambda v: (version_key(v.kubelet_version), v.name)),
    Column("cause", "LIKELY CAUSE", 32, lambda v: (v.cause == "", v.cause, v.name), flex=True),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
CLUSTER_COLUMN = Column("cluster", "CLUSTER", 14, lambda v: (v.cluster, v.state.rank, v.sort_deadline, v.name))
"""Only when several clusters are watched (``with_cluster``): between the state and the node."""
ALL_COLUMNS: tuple[Column, ...] = (COLUMNS[0], CLUSTER_COLUMN, *COLUMNS[1:])


def with_cluster(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The column keys with the cluster column (display order comes from ``ALL_COLUMNS``)."""
    return keys if "cluster" in keys else (*keys, "cluster")
WALL_COLUMNS = ("state", "name", "zone", "grace", "evict", "cause")
NAME_MAX = 34
NAME_SCAN_TICKS = 16
"""How often (in ticks) the name column's width is fitted to the first 2,000 rows again."""
SEP = " "

NARROWING: tuple[tuple[str, str | int], ...] = (
    ("drop", "kubelet"),
    ("compact", "cond"),
    ("compact", "taints"),
    ("drop", "zone"),
    ("compact", "renew"),
    ("cause", 20),
    ("compact", "evict"),
    ("compact", "grace"),
    ("cause", 12),
    ("drop", "cause"),
    ("drop", "cert"),
    ("drop", "taints"),
    ("drop", "cond"),
    ("drop", "evict"),
    ("drop", "renew"),
)
"""What a narrower screen gives up, in order, until the columns fit: the version and the zone (in
the zone strip anyway) go, the condition, taint, lease-age, eviction and grace columns take their
compact forms, the likely cause is cut then dropped (it is in the drill-down); only then do the
certificate, taint and condition columns go. Whatever room is left over is given back, most
valuable first. At 120 columns every column but the zone and the version is there; at 80 the
state, name, lease age, grace, eviction and conditions (and the main taint) still are."""


def layout_columns(width: int, keys: tuple[str, ...] = COLUMN_KEYS, name_width: int = NAME_MAX,
                   cluster_width: int = CLUSTER_COLUMN.width) -> list[tuple[Column, int]]:
    """The columns that fit ``width`` cells, with their widths, in display order.

    ``name_width`` is the longest name shown (capped): the name column takes no more, and the
    likely cause gets the rest (``cluster_width``: the cluster column's, when there is one). The node's name is what the operator reads first: whole names cost
    every step of :data:`NARROWING` before they cost letters of the name (a cut "general-apse" is
    the same for a thousand nodes).
    """
    name_min = next(c.width for c in COLUMNS if c.key == "name")
    name_want = max(name_min, min(name_width, NAME_MAX))
    cause_min = next(c.width for c in COLUMNS if c.key == "cause")
    steps = [s for s in NARROWING if s[0] == "cause" and "cause" in keys or s[1] in keys]

    def columns(applied: list[tuple[str, str | int]]) -> list[Column]:
        dropped = {k for op, k in applied if op == "drop"}
        compact = {k for op, k in applied if op == "compact"}
        return [c.compacted() if c.key in compact else replace(c, width=cluster_width) if c.key == "cluster" else c
                for c in ALL_COLUMNS if c.key in keys and c.key not in dropped]

    def need(applied: list[tuple[str, str | int]], name_w: int) -> int:
        cmin = min([cause_min, *(int(k) for op, k in applied if op == "cause")])
        cs = columns(applied)
        return (sum(name_w if c.key == "name" else cmin if c.key == "cause" else c.width for c in cs)
                + len(SEP) * (len(cs) - 1))

    applied: list[tuple[str, str | int]] = []
    for step in steps:
        if need(applied, name_want) <= width:
            break
        applied.append(step)
    for step in reversed(list(applied)):  # give back what the later steps made room for
        trial = [s for s in applied if s != step]
        if need(trial, name_want) <= width:
            applied = trial
    chosen = columns(applied)
    name_w = max(name_min, min(name_want, width - need(applied, 0)))
    spare = max(0, width - need(applied, name_w))
    cmin = min([cause_min, *(int(k) for op, k in applied if op == "cause")])
    out: list[tuple[Column, int]] = []
    has_cause = any(c.key == "cause" for c in chosen)
    for c in chosen:
        w = c.width
        if c.key == "name":
            w = name_w + (0 if has_cause else spare)
        elif c.key == "cause":
            w = cmin + spare
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
    """A zone as the fleet view names it (``cluster/zone`` when several clusters are watched)."""
    cluster: str | None = None
    """Only this cluster's nodes (several clusters watched)."""
    cordoned: bool = False
    """Only the cordoned nodes (``spec.unschedulable``), in whatever state they are."""
    search: str = ""
    """Case-insensitive substring of the node's name, or of one of its labels (``key=value``)."""
    sort: str = "state"
    reverse: bool = False



def state_slice(view: FleetView, states: str | NodeState) -> Sequence[NodeView]:
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
    return ()


def select_rows(view: FleetView, query: RowQuery, search: LabelSearch | None = None) -> Sequence[NodeView]:
    """The rows to show. Worst first with no search or zone filter costs O(shown), not O(fleet).

    ``search`` looks in labels too; without it a search looks in node names only."""
    rows = view.nodes if query.states is None else state_slice(view, query.states)
    if query.cluster is not None:
        cluster = query.cluster
        rows = [v for v in rows if v.cluster == cluster]
    if query.zone is not None:
        zone = query.zone
        rows = [v for v in rows if zone_key(v) == zone]
    if query.cordoned:
        rows = [v for v in rows if v.cordoned]
    if query.search:
        if search is None:
            term = query.search.lower()
            rows = [v for v in rows if term in v.key.lower()]
        else:
            rows = search.matches(query.search, rows)
    col = next((c for c in ALL_COLUMNS if c.key == query.sort), None)
    if col is not None and col.sort is not None:
        rows = sorted(rows, key=col.sort, reverse=query.reverse)
    elif query.reverse:
        rows = rows[::-1]
    return rows
