"""The fleet at one instant as the ``status`` command's JSON contract and as a plain table.

The JSON is read by scripts and tests: times are RFC 3339 UTC, durations numbers of seconds,
unknowns null. The table is for a person and shows every cluster string as plain text.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
from humanize import intcomma

from .fleet import FleetState
from .format import EXPIRED, conditions_text, taint_label
from .outlook import outlook_in
from .rules import NodeState
from .text import duration, safe
from .timeutil import format_time
from .views import FleetView, NodeView


def _num(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and (math.isinf(x) or math.isnan(x))):
        return None
    return round(x, 3)


def node_json(v: NodeView, now: float) -> dict[str, Any]:
    return {
        "name": v.name,
        "zone": v.zone,
        "state": v.state.word,
        "ready": v.ready,
        "lease_age_seconds": _num(v.lease_age(now)),
        "grace_remaining_seconds": _num(v.grace_remaining(now)),
        "eviction_in_seconds": _num(v.eviction_in(now)),
        "taints": [{"key": t.key, "effect": t.effect, "time_added": format_time(t.time_added)} for t in v.taints],
        "cert_not_after": format_time(v.cert_not_after),
        "cordoned": v.cordoned,
        "cause": v.cause or None,
    }


def fleet_json(state: FleetState, view: FleetView, node: str | None = None, *, nodes: bool = True,
               shown: Sequence[NodeView] | None = None) -> dict[str, Any]:
    """The JSON contract as one dict (``nodes=False``: with an empty node list, for ``write_fleet_json``;
    ``shown``: these nodes, in this order, instead of the view's or ``node`` alone)."""
    now = view.at
    out: dict[str, Any] = {
        "at": format_time(now),
        "settings": {
            "grace_seconds": view.settings.grace,
            "toleration_seconds": view.settings.toleration,
        },
        "nodes": [node_json(v, now) for v in _shown(view, node, shown)] if nodes else [],
        "zones": [{"name": z.name, "state": z.state.value, "nodes": z.nodes, "not_ready": z.not_ready}
                  for z in view.zones],
    }
    if node is not None:
        out["noexecute_outlook"] = next((outlook_in(view, v) for v in view.nodes if v.name == node), None)
        out["pods"] = [
            {
                "namespace": p.namespace, "name": p.name, "owner_kind": p.owner_kind or None,
                "owner_name": p.owner_name or None, "phase": p.phase or None, "terminating": p.terminating,
                "eviction_in_seconds": _num(None if p.eviction_at is None else p.eviction_at - now),
                "statefulset_risk": p.statefulset_risk,
            }
            for p in state.pods_on(node, now)
        ]
        out["events"] = [
            {"time": format_time(e.time), "reason": e.reason, "message": e.message, "source": e.source,
             "object": f"{e.object_kind}/{e.object_name}" if e.object_kind else e.object_name}
            for e in state.events_for(node)
        ]
    return out


STREAM_CHUNK = 1_000
"""Nodes per piece of the streamed JSON and table: the output of a 65,000-node fleet is never held
whole (as dicts plus their 23 MB of JSON it was a third of ``status``'s peak memory)."""
_NODES_MARK = b'\n  "nodes": []'


def _shown(view: FleetView, node: str | None, shown: Sequence[NodeView] | None) -> Sequence[NodeView]:
    if shown is not None:
        return shown
    return [v for v in view.nodes if node is None or v.name == node]


def write_fleet_json(write: Callable[[bytes], Any], state: FleetState, view: FleetView,
                     node: str | None = None, shown: Sequence[NodeView] | None = None) -> None:
    """The JSON contract, indented by two, through ``write`` piece by piece: byte for byte what
    ``orjson.dumps(fleet_json(...), option=OPT_INDENT_2)`` gives, made terminal-safe, without holding
    it (or its dicts) whole. The envelope is dumped with an empty node list, which is then written
    ``STREAM_CHUNK`` nodes at a time (a raw newline is only ever structure: JSON escapes it in strings)."""
    now = view.at
    head, mark, tail = orjson.dumps(fleet_json(state, view, node, nodes=False),
                                    option=orjson.OPT_INDENT_2).partition(_NODES_MARK)
    assert mark, "the envelope has a node list"
    shown = _shown(view, node, shown)
    if not shown:
        write(terminal_safe_json(head + mark + tail))
        return
    write(terminal_safe_json(head) + b'\n  "nodes": [')
    for i in range(0, len(shown), STREAM_CHUNK):
        piece = orjson.dumps([node_json(v, now) for v in shown[i:i + STREAM_CHUNK]], option=orjson.OPT_INDENT_2)
        # "[\n  {...},\n  {...}\n]": the items one level deeper, the brackets left out
        write((b"," if i else b"") + terminal_safe_json(piece[1:-2].replace(b"\n", b"\n  ")))
    write(b"\n  ]" + terminal_safe_json(tail))


_NOT_ASCII_OR_DEL = re.compile(r"[^\x00-\x7e]")
_INERT_CATEGORIES = {"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"}
"""Shown as ``\\uXXXX`` in the JSON: C1 controls, bidi overrides and isolates, zero-width
characters, line/paragraph separators and unassigned code points (as ``core.text.safe`` does for
the table)."""


def _json_escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    if unicodedata.category(ch) not in _INERT_CATEGORIES:
        return ch
    cp = ord(ch)
    if cp > 0xFFFF:  # JSON escapes beyond the BMP as a UTF-16 surrogate pair
        cp -= 0x10000
        return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"
    return f"\\u{cp:04x}"


def terminal_safe_json(data: bytes) -> bytes:
    """JSON (UTF-8, as orjson writes it) with every character that could steer a terminal written as
    an escape: ``cat``-ing the ``status`` JSON is as safe as the table. The value is unchanged for a
    JSON reader (these characters only occur inside strings; C0 controls orjson escapes already)."""
    if data.isascii() and b"\x7f" not in data:
        return data
    return _NOT_ASCII_OR_DEL.sub(_json_escape, data.decode("utf-8")).encode("utf-8")


def _dur(x: float | None) -> str:
    return "-" if x is None else duration(x)


def _until(x: float | None) -> str:
    """Time to a deadline: ``3m48s``; one already past: ``12m ago`` (as the dashboard's "evicted 12m
    ago"), not a negative duration."""
    if x is None:
        return "-"
    return duration(x) if x >= 0 else f"{duration(-x)} ago"


def fleet_table(state: FleetState, view: FleetView, node: str | None = None) -> str:
    return "\n".join(fleet_table_lines(state, view, node))


def fleet_table_lines(state: FleetState, view: FleetView, node: str | None = None, *,
                      shown: Sequence[NodeView] | None = None, headers: bool = True,
                      wide: bool = False) -> Iterator[str]:
    """The table line by line (``fleet_table`` joined): the node rows are made twice, once for the
    column widths and once to write, rather than all held at once (65,000 rows). ``shown``: these
    nodes in this order; ``headers=False``: the node rows alone (kubectl's ``--no-headers``);
    ``wide``: with the kubelet version, the conditions and when the lease was last seen renewed."""
    now = view.at
    shown = _shown(view, node, shown)
    title = TABLE_TITLE + (WIDE_TITLE if wide else ())
    widths = [len(c) for c in title[:-1]] if headers else [0] * (len(title) - 1)
    for v in shown:
        for i, c in enumerate(_table_row(v, now, wide)[:-1]):
            if len(c) > widths[i]:
                widths[i] = len(c)
    if not headers:
        for v in shown:
            r = _table_row(v, now, wide)
            yield "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]
        return
    yield f"at {format_time(now)}  {view.settings.summary(zone_threshold=True)}"
    yield "  ".join(f"{s.word} {intcomma(view.counts[s])}" for s in NodeState if view.counts[s]) or "no nodes"
    if view.leases_blind:
        yield f"WARNING: {view.blind_reason}; lease ages unknown"
    if view.all_zones_full:
        yield "ALL ZONES IN FULL DISRUPTION: the node controller stops all evictions"
    for z in view.zones:
        yield (f"zone {safe(z.name or '(no zone)', 60)}: {z.state.value} {intcomma(z.ready)}/{intcomma(z.nodes)} ready, "
               f"taint rate {z.taint_rate:g}/s")
    yield "  ".join(c.ljust(w) for c, w in zip(title, widths)) + "  " + title[-1]
    for v in shown:
        r = _table_row(v, now, wide)
        yield "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]
    if node is not None:
        for v in shown:
            outlook = outlook_in(view, v)
            if outlook:
                yield f"next: {outlook}"
        yield ""
        yield "PODS"
        for p in state.pods_on(node, now):
            risk = "  AT RISK: do not force-delete without fencing" if p.statefulset_risk else ""
            ev = _until(None if p.eviction_at is None else p.eviction_at - now)
            yield (f"  {safe(p.namespace, 63)}/{safe(p.name, 120)}  {safe(p.owner_kind, 30)}/"
                   f"{safe(p.owner_name, 63)}  {safe(p.phase, 20)}"
                   f"{'  Terminating' if p.terminating else ''}  eviction {ev}{risk}")
        yield "EVENTS"
        for e in state.events_for(node)[:50]:
            yield (f"  {format_time(e.time)}  {safe(e.reason, 60)}  {safe(e.message, 200)}"
                   f"  ({safe(e.source, 80)})")
    for problem in state.recent_problems(10):
        yield f"problem: {safe(problem.where, 80)}: {safe(problem.message, 300)}"


TABLE_TITLE = ("NODE", "ZONE", "STATE", "LEASE AGE", "GRACE LEFT", "EVICTION IN", "TAINTS", "CERT", "CAUSE")
WIDE_TITLE = ("KUBELET", "CONDITIONS", "LEASE SEEN")
"""``-o wide`` puts these before CAUSE (the last column, whose text runs to the end of the line)."""


def _table_row(v: NodeView, now: float, wide: bool = False) -> tuple[str, ...]:
    cert = ("-" if v.cert_not_after is None else EXPIRED if v.cert_not_after <= now
            else _dur(v.cert_not_after - now))
    row: tuple[str, ...] = (
        safe(v.name, 63), safe(v.zone, 40) or "-", f"{v.state.symbol} {v.state.word}",
        _dur(v.lease_age(now)), _until(v.grace_remaining(now)), _until(v.eviction_in(now)),
        safe(",".join(taint_label(t) for t in v.taints), 60) or "-",
        cert,
    )
    if wide:
        row += (safe(v.kubelet_version, 20) or "-", conditions_text(v.ready, v.pressure, v.network_unavailable),
                format_time(v.lease_observed_at) or "-")  # none seen, or not a valid time
    return row + (safe(v.cause, 120) or "-",)
