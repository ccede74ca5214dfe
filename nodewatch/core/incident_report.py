"""The incident report for a postmortem, from a recording's history (``core/history.py``).

One content, two renderings: ``build_report`` turns the history into a list of blocks (headings,
paragraphs, tables, the timeline picture) whose text pieces are either nodewatch's own words or
``Untrusted`` cluster strings; ``to_markdown`` and ``to_html`` only render them. So the two say the
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
import html
from collections import defaultdict
from dataclasses import dataclass, field

import humanize

from .causes import CauseKind
from .format import clock_time
from .history import DOWN_STATES, STATE_ORDER, HistoryRecorder, MarkKind, NodeChange, Sample
from .rules import NodeState, ZoneState
from .settings import Settings
from .text import safe

MAX_NODES = 200
"""Nodes listed with their changes; the rest are counted."""
MAX_ROWS = 500
"""Rows of any other table; the rest are counted."""
FENCING = ("A StatefulSet does not replace these pods while their node is unreachable. Do not "
           "force-delete them before the node is fenced (powered off, or its volumes detached): two "
           "copies of one identity could write to the same volume. After fencing, the "
           "node.kubernetes.io/out-of-service taint lets Kubernetes delete them.")
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


def _down_nodes(changes: list[NodeChange]) -> list[str]:
    """Nodes that were down (past the grace or worse) at some point, in the order they went down."""
    order: dict[str, float] = {}
    for c in changes:
        if c.after in DOWN_STATES and c.node not in order:
            order[c.node] = c.since if c.since is not None and c.since < c.at else c.at
    return sorted(order, key=lambda n: (order[n], n))


def _summary(blocks: list[Block], info: RecordingInfo, h: HistoryRecorder, changes: list[NodeChange],
             samples: list[Sample], down_nodes: list[str]) -> None:
    blocks.append(Block("h2", ("Summary",)))
    items = _recovery_items(info, changes)
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

        items = _recovery_items(info, [c for c in changes if mine(c.node)])
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


def _recovery_items(info: RecordingInfo, changes: list[NodeChange]) -> list[Line]:
    """The first node to stop renewing, the last to recover, the ones still down."""
    items: list[Line] = []
    stopped = [(c.stopped_renewing, c.node) for c in changes if c.stopped_renewing is not None]
    if stopped:
        t, name = min(stopped)
        before = f", {_delta(info.start - t)} before the window began" if t < info.start else ""
        items.append(("First node to stop renewing its lease: ", Untrusted(name), f", last renewal seen "
                      f"{_when(t)}{before}.",))
    else:
        items.append(("No node stopped renewing its lease in the window.",))
    recovered = [c for c in changes if c.after is NodeState.READY and c.before in DOWN_STATES]
    still = [n for n, st in _final_states(changes).items() if st in DOWN_STATES]
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


def _final_states(changes: list[NodeChange]) -> dict[str, NodeState | None]:
    final: dict[str, NodeState | None] = {}
    for c in changes:
        final[c.node] = c.after
    return final


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
    blocks.append(Block("p", (f"{_count(len(down_nodes), 'node')} went down (or already were) in the window, "
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
    periods: list[tuple[str, ZoneState, float, float | None, float, int, int]] = []
    open_: dict[str, tuple[ZoneState, float, float, int, int]] = {}
    for z in h.zone_changes:
        cur = open_.pop(z.zone, None)
        if cur is not None:
            periods.append((z.zone, cur[0], cur[1], z.at, cur[2], cur[3], cur[4]))
        if z.after is not ZoneState.NORMAL:
            open_[z.zone] = (z.after, z.at, z.taint_rate, z.not_ready, z.nodes)
    for zone, (st, at, rate, nr, n) in open_.items():
        periods.append((zone, st, at, None, rate, nr, n))
    periods.sort(key=lambda p: (p[2], p[0]))
    if not periods:
        blocks.append(Block("p", ("Every zone stayed Normal: the controller could taint nodes NoExecute at "
                                  f"{info.settings.eviction_rate:g} nodes/s per zone.",)))
    else:
        rows = []
        for zone, st, a, b, rate, nr, n in periods:
            to = _when(b) if b is not None else "end of window"
            length = _delta((b if b is not None else info.end) - a)
            what = f"{rate:g} nodes/s" + (" (tainting stopped)" if rate == 0 else "")
            rows.append(((_zone_name(zone),), (st.value,), (f"{nr}/{n}",), (_when(a),), (to,), (length,), (what,)))
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
               [((_when(p.at) + (" (at start)" if p.at <= info.start else ""),),
                 (Untrusted(f"{p.namespace}/{p.name}"),), (Untrusted(p.node),), (Untrusted(p.owner_name),))
                for p in h.statefulset_at_risk])
        blocks.append(Block("p", (FENCING,)))
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
        if c.node in down and c.after in DOWN_STATES and c.cause_kinds and c.node not in first_cause:
            first_cause[c.node] = c
    groups: dict[str, list[NodeChange]] = defaultdict(list)
    for name in down_nodes:
        c = first_cause.get(name)
        groups[c.cause_kinds[0] if c else ""].append(c or NodeChange(0, name, "", None, None, "", (), None, None))
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


# --- Markdown ---------------------------------------------------------------------------------


def md_inert(s: str, *, in_table: bool = False, max_len: int = 300) -> str:
    """A cluster string as a Markdown code span: no link, no HTML, no emphasis can come out of it,
    and ``text.safe`` has removed control characters and line breaks first."""
    text = safe(s, max_len)
    if not text:
        return "-"
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_line(line: Line, in_table: bool = False) -> str:
    return "".join(md_inert(p.text, in_table=in_table) if isinstance(p, Untrusted) else p for p in line)


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + _md_line(b.line))
        elif b.kind == "p":
            out.append(_md_line(b.line))
        elif b.kind == "ul":
            out.append("\n".join("- " + _md_line(i) for i in b.items))
        elif b.kind == "table":
            lines = ["| " + " | ".join(b.header) + " |", "|" + "|".join("---" for _ in b.header) + "|"]
            for r in b.rows:
                lines.append("| " + " | ".join(_md_line(c, in_table=True) for c in r) + " |")
            out.append("\n".join(lines))
        elif b.kind == "timeline":
            continue  # the table after it says it in words; the HTML draws it
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --- HTML -------------------------------------------------------------------------------------

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; margin: 2em auto;
       max-width: 60em; padding: 0 1em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #d0d7de; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.05em; margin: 1.2em 0 .4em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: .92em; }
th, td { border: 1px solid #d0d7de; padding: .2em .55em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
code { font: .9em ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: #f6f8fa;
       padding: 0 .25em; border-radius: 3px; overflow-wrap: anywhere; }
figure { margin: .5em 0 1em; }
figcaption { font-size: .85em; color: #57606a; }
svg text { font: 11px system-ui, sans-serif; fill: #1f2328; }
@media print {
  body { margin: 0; max-width: none; font-size: 10.5pt; }
  h2 { break-after: avoid; } h3 { break-after: avoid; }
  table, figure, tr { break-inside: avoid; }
  th { background: #eee !important; -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  svg { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  @page { margin: 1.5cm; }
}
"""


def _html_line(line: Line) -> str:
    return "".join(f"<code>{html.escape(safe(p.text, 300))}</code>" if isinstance(p, Untrusted) else html.escape(p)
                   for p in line)


def to_html(blocks: list[Block], h: HistoryRecorder, start: float, end: float) -> str:
    title = next((b for b in blocks if b.kind == "h1"), None)
    head_title = "".join(p.text if isinstance(p, Untrusted) else p for p in title.line) if title else "Incident report"
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{html.escape(safe(head_title, 200))}</title>", f"<style>{CSS}</style>", "</head>", "<body>"]
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append(f"<{b.kind}>{_html_line(b.line)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{_html_line(b.line)}</p>")
        elif b.kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_html_line(i)}</li>" for i in b.items) + "</ul>")
        elif b.kind == "table":
            rows = ["<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in b.header) + "</tr>"]
            for r in b.rows:
                rows.append("<tr>" + "".join(f"<td>{_html_line(c)}</td>" for c in r) + "</tr>")
            out.append("<table>" + "\n".join(rows) + "</table>")
        elif b.kind == "timeline":
            out.append("<figure>" + timeline_svg(h, start, end) + "<figcaption>Nodes not Ready over the window, "
                       "stacked worst state first; marks: Z zone state change, T NoExecute taint, E pod evicted."
                       "</figcaption></figure>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def timeline_svg(h: HistoryRecorder, start: float, end: float, width: int = 960, height: int = 220) -> str:
    """The fleet timeline as an inline SVG: stacked step areas of the not-Ready states (scaled to
    the peak), marks above, a time axis below, and a legend."""
    left, right, top, bottom = 44, 190, 24, 34
    pw, ph = width - left - right, height - top - bottom
    samples = h.samples_between(start, end)
    span = max(end - start, 1e-9)
    peak = max((s.not_ready for s in samples), default=0)
    scale = ph / max(peak, 1)

    def x(t: float) -> float:
        return left + (min(max(t, start), end) - start) / span * pw

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
             f'role="img" aria-label="fleet timeline">',
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#f6f8fa" stroke="#d0d7de"/>']
    states = [s for s in STATE_ORDER if s is not NodeState.READY]
    if samples:
        # runs of equal counts: one step each (a quiet hour is a few points, not 3,600)
        runs: list[tuple[float, float, tuple[int, ...]]] = []
        for i, s in enumerate(samples):
            x1 = x(samples[i + 1].at) if i + 1 < len(samples) else x(end)
            if runs and runs[-1][2] == s.counts:
                runs[-1] = (runs[-1][0], x1, s.counts)
            else:
                runs.append((x(s.at), x1, s.counts))
        for k, st in enumerate(states):
            pts_top: list[str] = []
            pts_bot: list[str] = []
            for x0, x1, counts in runs:
                below = sum(counts[:k])
                y0 = top + ph - below * scale
                y1 = y0 - counts[k] * scale
                pts_top += [f"{x0:.1f},{y1:.1f}", f"{x1:.1f},{y1:.1f}"]
                pts_bot += [f"{x0:.1f},{y0:.1f}", f"{x1:.1f},{y0:.1f}"]
            if any(counts[k] for _, _, counts in runs):
                poly = " ".join(pts_top + list(reversed(pts_bot)))
                parts.append(f'<polygon points="{poly}" fill="{STATE_COLOURS[st]}"><title>{st.word}</title></polygon>')
    for m in h.all_marks():
        if start <= m.at <= end:
            xm = x(m.at)
            colour = "#0969da" if m.kind is MarkKind.ZONE else "#1f2328"
            parts.append(f'<line x1="{xm:.1f}" y1="{top}" x2="{xm:.1f}" y2="{top + ph}" stroke="{colour}" '
                         f'stroke-width="0.8" stroke-dasharray="3,2"/>')
            parts.append(f'<text x="{xm:.1f}" y="{top - 6}" text-anchor="middle">{m.kind.letter}<title>'
                         f'{html.escape(safe(m.kind.meaning + ": " + m.subject + " " + m.text, 200))}</title></text>')
    parts.append(f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{peak}</text>')
    parts.append(f'<text x="{left - 6}" y="{top + ph}" text-anchor="end">0</text>')
    ticks = 6
    for i in range(ticks + 1):
        t = start + span * i / ticks
        anchor = "start" if i == 0 else "end" if i == ticks else "middle"
        parts.append(f'<text x="{x(t):.1f}" y="{top + ph + 16}" text-anchor="{anchor}">{clock_time(t)}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 4}" text-anchor="middle">nodes not Ready '
                 f'(peak {peak}), {clock_time(start, date=True)} to {clock_time(end)}</text>')
    ly = top
    for st in states:
        parts.append(f'<rect x="{left + pw + 14}" y="{ly}" width="12" height="12" fill="{STATE_COLOURS[st]}"/>')
        parts.append(f'<text x="{left + pw + 32}" y="{ly + 10}">{st.word}</text>')
        ly += 18
    for kind in MarkKind:
        parts.append(f'<text x="{left + pw + 14}" y="{ly + 10}">{kind.letter}  {kind.meaning}</text>')
        ly += 16
    parts.append("</svg>")
    return "\n".join(parts)
