"""The incident report for a postmortem, from a recording's history (``core/history.py``).

One content, two renderings: ``build_report`` turns the history into a list of blocks (headings,
paragraphs, tables, the timeline picture) whose text pieces are either nodewatch's own words or
``Untrusted`` cluster strings; ``report_render.to_markdown`` and ``to_html`` only render them. So the two say the
same thing, and every cluster string is made inert in one place per format: in Markdown a code
span after ``text.safe`` (no links, no HTML, no control characters), in HTML escaped.

Deterministic: the same recording and window give the same bytes (no "generated at", times in
UTC from the recording, no dict order that depends on the run).

A recording of several clusters (``RecordingInfo.clusters``): node names are ``cluster/name`` and
zones ``cluster/zone`` throughout (the history keys them so); the summary says, per cluster, the
first node to stop renewing, the last to recover and what was disrupted; blind periods say whose.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import humanize

from .causes import CauseKind
from .fencing import fencing_advice
from .format import clock_time
from .history import DOWN_STATES, SKIPPED, STATE_ORDER, BlindPeriod, HistoryRecorder, MarkKind, NodeChange, Sample
from .rules import NodeState, ZoneState
from .settings import Settings

MAX_NODES = 200
"""Nodes listed with their changes; the rest are counted."""
MAX_ROWS = 500
"""Rows of any other table; the rest are counted."""
NOT_REPLACED = "A StatefulSet does not replace these pods while their node is unreachable."
CAUSE_TITLES = {
    CauseKind.LEASE_STALE.value: "Kubelet stopped renewing its lease (kubelet down, or the node cut off)",
    CauseKind.CERT_EXPIRED.value: "Kubelet client certificate expired",
    CauseKind.NO_LEASE.value: "No Lease for the node",
    CauseKind.LEASE_LATE.value: "Lease renewals late",
    CauseKind.RUNTIME.value: "Container runtime not ready",
    CauseKind.NETWORK.value: "Network plugin not ready",
    CauseKind.PLEG.value: "PLEG not healthy",
    CauseKind.KUBELET_NOT_READY.value: "Kubelet reports NotReady",
    CauseKind.PRESSURE.value: "Resource pressure",
    CauseKind.CORDONED.value: "Cordoned",
    CauseKind.CLOCK_STEPPED_BACK.value: "Kubelet's clock stepped back (its renewals not counted)",
    CauseKind.LEASE_REWRITTEN.value: "Lease written by another writer: the controller skips the node (1.37+)",
    CauseKind.CONTROLLER_SKIPS.value: "The controller skips the node (its Lease changed since the last renewal)",
}
STATE_COLOURS = {
    NodeState.EVICTED: "#7f1d1d",
    NodeState.EVICTING: "#dc2626",
    NodeState.UNKNOWN: "#f97316",
    NodeState.NOT_READY: "#a855f7",
    NodeState.OVERDUE: "#eab308",
    NodeState.LATE: "#fde68a",
}


# --- the content --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Untrusted:
    """A string from the cluster or the recording: rendered inert."""

    text: str


Piece = str | Untrusted
Line = tuple[Piece, ...]


@dataclass
class Block:
    kind: str
    """``h1``, ``h2``, ``h3``, ``p``, ``ul``, ``table``, ``timeline``."""
    line: Line = ()
    items: list[Line] = field(default_factory=list)
    header: tuple[str, ...] = ()
    rows: list[tuple[Line, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class RecordingInfo:
    """What the report says about its input."""

    name: str
    """The file's base name (not its path: the report does not depend on where it was run)."""
    size: int | None
    events: int
    source: str | None
    settings: Settings
    problems: tuple[str, ...]
    start: float
    end: float
    """The report's window."""
    clusters: tuple[tuple[str, Settings], ...] = ()
    """A recording of several clusters: each one's name and settings, in the header's order."""


def cluster_of(key: str, clusters: tuple[tuple[str, Settings], ...]) -> str:
    """The cluster of a node key or zone name (``cluster/...``), by the known names, longest first."""
    for name in sorted((n for n, _ in clusters), key=len, reverse=True):
        if key.startswith(name + "/"):
            return name
    return ""


def _when(t: float | None) -> str:
    return clock_time(t, date=True)


def _delta(seconds: float) -> str:
    return humanize.precisedelta(dt.timedelta(seconds=max(0.0, round(seconds))), minimum_unit="seconds",
                                 format="%0.0f")


def _count(n: int, word: str, plural: str | None = None) -> str:
    return f"{humanize.intcomma(n)} {word if n == 1 else (plural or word + 's')}"


def _state(s: NodeState | None) -> str:
    return "deleted" if s is None else s.word


def _zone_name(z: str) -> Untrusted | str:
    return Untrusted(z) if z else "(no zone)"


def _counts_text(s: Sample) -> str:
    return ", ".join(f"{s.count(st)} {st.word}" for st in STATE_ORDER if st in DOWN_STATES and s.count(st))


def build_report(info: RecordingInfo, h: HistoryRecorder) -> list[Block]:
    """The report's content (see the module docstring)."""
    blocks: list[Block] = []
    add = blocks.append
    title = info.source or info.name
    add(Block("h1", ("Incident report: ", Untrusted(title))))
    size = f", {humanize.naturalsize(info.size)}" if info.size is not None else ""
    settings = (f"{_count(len(info.clusters), 'cluster')}" if info.clusters else
                f"Settings: {info.settings.summary(zone_threshold=True)}")
    add(Block("p", ("Recording ", Untrusted(info.name), f" ({_count(info.events, 'event')}{size}), from "
                    f"{_when(info.start)} to {_when(info.end)} ({_delta(info.end - info.start)}); "
                    f"{_count(h.nodes_seen, 'node')}. {settings}.")))
    if info.clusters:
        add(Block("ul", items=[(Untrusted(name), f": {st.summary(zone_threshold=True)}") for name, st in info.clusters]))
    changes = list(h.changes)
    samples = h.all_samples()
    down_nodes = _down_nodes(changes)
    _summary(blocks, info, h, changes, samples, down_nodes)
    if info.clusters:
        _cluster_summaries(blocks, info, h, changes)
    add(Block("h2", ("Fleet timeline",)))
    add(Block("timeline"))
    _timeline_table(blocks, samples)
    _node_changes(blocks, changes, down_nodes)
    _zones(blocks, h, info)
    _evictions(blocks, h, info)
    _causes(blocks, changes, down_nodes)
    _blind(blocks, h, info)
    return blocks


def _is_down(c: NodeChange) -> bool:
    """The node is down after ``c``: past the grace or worse, or skipped by the controller (1.37+:
    ``CauseKind.CONTROLLER_SKIPS``: its Lease written since the last renewal it counted), which
    leaves it Late however long its kubelet has been silent."""
    return c.after in DOWN_STATES or SKIPPED in c.cause_kinds


def _down_nodes(changes: list[NodeChange]) -> list[str]:
    """Nodes that were down (``_is_down``) at some point, in the order they went down."""
    order: dict[str, float] = {}
    for c in changes:
        if _is_down(c) and c.node not in order:
            order[c.node] = c.since if c.since is not None and c.since < c.at else c.at
    return sorted(order, key=lambda n: (order[n], n))


def _summary(blocks: list[Block], info: RecordingInfo, h: HistoryRecorder, changes: list[NodeChange],
             samples: list[Sample], down_nodes: list[str]) -> None:
    blocks.append(Block("h2", ("Summary",)))
    items = _recovery_items(info, changes, _blind_throughout(h.blind, info))
    peak = h.peak()
    if peak is not None and peak.down:
        items.append((f"Peak: {_count(peak.down, 'node')} down (past the grace or worse) at {_when(peak.at)}: "
                      f"{_counts_text(peak)}.",))
    taints = [m for m in h.all_marks() if m.kind is MarkKind.TAINT]
    items.append(_risk_item(len(taints), len(h.evictions), len(h.statefulset_at_risk)))
    disrupted = sorted({z.zone for z in h.zone_changes if z.after is not ZoneState.NORMAL})
    if disrupted:
        items.append(_disrupted_item(disrupted))
    blocks.append(Block("ul", items=items))


def _cluster_summaries(blocks: list[Block], info: RecordingInfo, h: HistoryRecorder,
                       changes: list[NodeChange]) -> None:
    """The summary again for each cluster of a recording of several."""
    taints = [m for m in h.all_marks() if m.kind is MarkKind.TAINT]
    for name, _ in info.clusters:
        def mine(key: str, name: str = name) -> bool:
            return cluster_of(key, info.clusters) == name

        items = _recovery_items(info, [c for c in changes if mine(c.node)],
                                _blind_throughout([b for b in h.blind if b.cluster == name], info))
        items.append(_risk_item(sum(mine(m.subject) for m in taints), sum(mine(p.node) for p in h.evictions),
                                sum(mine(p.node) for p in h.statefulset_at_risk)))
        disrupted = sorted({z.zone for z in h.zone_changes if z.after is not ZoneState.NORMAL and mine(z.zone)})
        if disrupted:
            items.append(_disrupted_item(disrupted))
        blind = [b for b in h.blind if b.cluster == name]
        if blind:
            items.append((f"nodewatch could not judge its nodes by their leases {_count(len(blind), 'time')} "
                          "(see the blind periods below).",))
        blocks.append(Block("h3", ("Cluster ", Untrusted(name))))
        blocks.append(Block("ul", items=items))


def _risk_item(taints: int, evictions: int, sts: int) -> Line:
    return (f"{_count(taints, 'NoExecute taint')} added, {_count(evictions, 'pod')} evicted, "
            f"{_count(sts, 'StatefulSet pod')} at risk.",)


def _disrupted_item(zones: list[str]) -> Line:
    return (f"{_count(len(zones), 'zone')} in disruption: ", *_join([_zone_name(z) for z in zones]), ".")


def _blind_throughout(blind: Iterable[BlindPeriod], info: RecordingInfo) -> bool:
    """The lease stream was down for the whole window (a kubectl log of Nodes alone)."""
    return any(b.start <= info.start and (b.end is None or b.end >= info.end) for b in blind)


def _recovery_items(info: RecordingInfo, changes: list[NodeChange], blind: bool = False) -> list[Line]:
    """The first node to stop renewing, the last to recover, the ones still down. ``blind``: the
    window holds no lease renewal to tell who stopped."""
    items: list[Line] = []
    stopped = [(c.stopped_renewing, c.node) for c in changes if c.stopped_renewing is not None]
    if stopped:
        t, name = min(stopped)
        before = f", {_delta(info.start - t)} before the window began" if t < info.start else ""
        items.append(("First node to stop renewing its lease: ", Untrusted(name), f", last renewal seen "
                      f"{_when(t)}{before}.",))
    elif blind:
        items.append(("Whether a node stopped renewing its lease cannot be told: the lease stream was not "
                      "seen in the window (see the blind periods below).",))
    else:
        items.append(("No node stopped renewing its lease in the window.",))
    recovered, still = _recoveries(changes)
    if recovered:
        last = max(recovered, key=lambda c: (c.at, c.node))
        items.append(("Last node to recover: ", Untrusted(last.node), f", Ready again at {_when(last.at)}.",))
    if still and not recovered:
        items.append((f"No node recovered in the window: {_count(len(still), 'node was', 'nodes were')} still "
                      "down at its end.",))
    elif still:
        items.append((f"{_count(len(still), 'node was', 'nodes were')} still down at the end of the window.",))
    elif not recovered:
        items.append(("No node was down in the window.",))
    return items


def _join(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for i, p in enumerate(pieces):
        if i:
            out.append(", ")
        out.append(p)
    return out


def _recoveries(changes: list[NodeChange]) -> tuple[list[NodeChange], list[str]]:
    """(the changes by which a node down came back Ready, the nodes still down at the end), down as
    ``_is_down`` says."""
    down: dict[str, bool] = {}
    recovered = []
    for c in changes:
        if c.after is NodeState.READY and down.get(c.node):
            recovered.append(c)
        down[c.node] = _is_down(c)
    return recovered, [n for n, d in down.items() if d]


def _timeline_table(blocks: list[Block], samples: list[Sample]) -> None:
    """The picture in words: each time the count of nodes down changed."""
    rows: list[tuple[Line, ...]] = []
    prev: tuple[int, ...] | None = None
    for s in samples:
        key = s.counts[: NodeState.OVERDUE.rank + 1]
        if key != prev:
            rows.append(((_when(s.at),), *((str(n),) for n in key), (str(s.down),)))
            prev = key
    header = ("time", *(st.word for st in STATE_ORDER if st in DOWN_STATES), "down")
    _table(blocks, header, rows, "Nodes down (past the grace or worse), each time the count changed:")


def _table(blocks: list[Block], header: tuple[str, ...], rows: list[tuple[Line, ...]], intro: str = "") -> None:
    if intro:
        blocks.append(Block("p", (intro,)))
    blocks.append(Block("table", header=header, rows=rows[:MAX_ROWS]))
    if len(rows) > MAX_ROWS:
        blocks.append(Block("p", (f"… and {humanize.intcomma(len(rows) - MAX_ROWS)} more rows.",)))


def _node_changes(blocks: list[Block], changes: list[NodeChange], down_nodes: list[str]) -> None:
    blocks.append(Block("h2", ("Node state changes",)))
    if not down_nodes:
        blocks.append(Block("p", ("No node was down in the window.",)))
        return
    by_node: dict[str, list[NodeChange]] = defaultdict(list)
    for c in changes:
        by_node[c.node].append(c)
    blocks.append(Block("p", (f"{_count(len(down_nodes), 'node')} went down (or already "
                              f"{'was' if len(down_nodes) == 1 else 'were'}) in the window, "
                              "in the order they went down. \"since\" is when the API says the state began.",)))
    for name in down_nodes[:MAX_NODES]:
        items = by_node[name]
        zone = next((c.zone for c in items if c.zone), "")
        blocks.append(Block("h3", (Untrusted(name), " in ", _zone_name(zone))))
        rows: list[tuple[Line, ...]] = []
        for c in items:
            change = f"{_state(c.before)} → {_state(c.after)}" if c.before is not None else f"{_state(c.after)} (at start)"
            since = _when(c.since) if c.since is not None else "-"
            rows.append(((_when(c.at),), (change,), (since,), (Untrusted(c.cause),) if c.cause else ("-",)))
        _table(blocks, ("seen", "state", "since", "likely cause"), rows)
    if len(down_nodes) > MAX_NODES:
        blocks.append(Block("p", (f"… and {humanize.intcomma(len(down_nodes) - MAX_NODES)} more nodes.",)))


def _zones(blocks: list[Block], h: HistoryRecorder, info: RecordingInfo) -> None:
    blocks.append(Block("h2", ("Zone disruption and the controller's eviction rate",)))
    periods: list[tuple[str, ZoneState, float, float | None, float, int, int, bool]] = []
    open_: dict[str, tuple[ZoneState, float, float, int, int, bool]] = {}
    for z in h.zone_changes:
        cur = open_.pop(z.zone, None)
        if cur is not None:
            periods.append((z.zone, cur[0], cur[1], z.at, cur[2], cur[3], cur[4], cur[5]))
        if z.after is not ZoneState.NORMAL:
            open_[z.zone] = (z.after, z.at, z.taint_rate, z.not_ready, z.nodes, z.at_start)
    for zone, (st, at, rate, nr, n, at_start) in open_.items():
        periods.append((zone, st, at, None, rate, nr, n, at_start))
    periods.sort(key=lambda p: (p[2], p[0]))
    if not periods:
        blocks.append(Block("p", ("Every zone stayed Normal: the controller could taint nodes NoExecute at "
                                  f"{info.settings.eviction_rate:g} nodes/s per zone.",)))
    else:
        rows: list[tuple[Line, ...]] = []
        for zone, st, a, b, rate, nr, n, at_start in periods:
            to = _when(b) if b is not None else "end of window"
            length = _delta((b if b is not None else info.end) - a) + (" or more" if at_start else "")
            what = f"{rate:g} nodes/s" + (" (tainting stopped)" if rate == 0 else "")
            since = _when(a) + (" (at start)" if at_start else "")
            rows.append(((_zone_name(zone),), (st.value,), (f"{nr}/{n}",), (since,), (to,), (length,), (what,)))
        _table(blocks, ("zone", "state", "not Ready", "from", "to", "for", "NoExecute tainting rate"), rows)
    taints = [m for m in h.all_marks() if m.kind is MarkKind.TAINT]
    span = max(info.end - info.start, 1.0)
    blocks.append(Block("p", (f"NoExecute taints added in the window: {humanize.intcomma(len(taints))} "
                              f"({len(taints) / span * 60:.2f} per minute).",)))


def _evictions(blocks: list[Block], h: HistoryRecorder, info: RecordingInfo) -> None:
    blocks.append(Block("h2", ("Evictions and pods at risk",)))
    taints = [m for m in h.all_marks() if m.kind is MarkKind.TAINT]
    blocks.append(Block("h3", ("NoExecute taints added",)))
    if taints:
        _table(blocks, ("added", "seen", "node", "taint"),
               [((_when(m.happened),), (_when(m.at),), (Untrusted(m.subject),), (Untrusted(m.text),)) for m in taints])
    else:
        blocks.append(Block("p", ("None in the window.",)))
    blocks.append(Block("h3", ("Pods evicted",)))
    if h.evictions:
        _table(blocks, ("seen", "pod", "node", "owner"),
               [((_when(p.at),), (Untrusted(f"{p.namespace}/{p.name}"),), (Untrusted(p.node),),
                 (Untrusted(f"{p.owner_kind}/{p.owner_name}"),) if p.owner_kind else ("-",)) for p in h.evictions],
               "Pods that got a deletion timestamp on a node with a NoExecute taint (seen to the second):")
    else:
        blocks.append(Block("p", ("None in the window.",)))
    blocks.append(Block("h3", ("StatefulSet pods at risk",)))
    if h.statefulset_at_risk:
        _table(blocks, ("at risk from", "pod", "node", "StatefulSet"),
               [((_when(p.at) + (" (at start)" if p.at_start or p.at <= info.start else ""),),
                 (Untrusted(f"{p.namespace}/{p.name}"),), (Untrusted(p.node),), (Untrusted(p.owner_name),))
                for p in h.statefulset_at_risk])
        advice = fencing_advice(None if info.clusters else info.settings.server_version)
        blocks.append(Block("p", (f"{NOT_REPLACED} {advice[0].upper()}{advice[1:]}",)))
    else:
        blocks.append(Block("p", ("None: no StatefulSet pod was on a node gone Unknown or evicting.",)))


def _causes(blocks: list[Block], changes: list[NodeChange], down_nodes: list[str]) -> None:
    blocks.append(Block("h2", ("Likely causes",)))
    if not down_nodes:
        blocks.append(Block("p", ("No node was down.",)))
        return
    down = set(down_nodes)
    first_cause: dict[str, NodeChange] = {}
    for c in changes:
        if c.node in down and _is_down(c) and c.cause_kinds and c.node not in first_cause:
            first_cause[c.node] = c
    groups: dict[str, list[NodeChange]] = defaultdict(list)
    for name in down_nodes:
        first = first_cause.get(name)
        groups[first.cause_kinds[0] if first else ""].append(
            first or NodeChange(0, name, "", None, None, "", (), None, None))
    items: list[Line] = []
    for kind, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        title = CAUSE_TITLES.get(kind, "No cause shown by the API") if kind else "No cause shown by the API"
        names = _join([Untrusted(c.node) for c in members])
        example = next((c.cause for c in members if c.cause), "")
        tail: tuple[Piece, ...] = (" — e.g. ", Untrusted(example)) if example else ()
        items.append((f"{title} ({_count(len(members), 'node')}): ", *names, *tail))
    blocks.append(Block("ul", items=items))


def _blind(blocks: list[Block], h: HistoryRecorder, info: RecordingInfo) -> None:
    blocks.append(Block("h2", ("nodewatch's own blind periods",)))
    if h.blind:
        whose: tuple[str, ...] = ("cluster",) if info.clusters else ()
        _table(blocks, (*whose, "from", "to", "for", "why"),
               [(*(((Untrusted(b.cluster),),) if whose else ()), (_when(b.start),),
                 (_when(b.end) if b.end is not None else "end of window",),
                 (_delta((b.end if b.end is not None else info.end) - b.start),), (Untrusted(b.reason),))
                for b in h.blind],
               "While the lease stream was down or silent, no node could be judged by its lease"
               + (" (in that cluster):" if whose else ":"))
    elif h.health_tracked:
        blocks.append(Block("p", ("None: the lease stream was connected and live throughout the window.",)))
    else:
        blocks.append(Block("p", ("None recorded: the recording holds no watch-stream health lines (a demo or "
                                  "kubectl recording), so nodewatch's own outages cannot be told.",)))
    if info.problems:
        blocks.append(Block("p", (f"Reading the recording: {_count(len(info.problems), 'problem')}:",)))
        blocks.append(Block("ul", items=[(Untrusted(p),) for p in info.problems[:50]]))
