"""The zone strip and the fleet incident summary.

Zones matter because the node lifecycle controller judges them together: a zone in
FullDisruption is evicted at the normal rate, a large one in PartialDisruption at the secondary
rate, a small one not at all, and when *every* zone is down the controller assumes its own
connectivity is broken and stops evicting. The strip shows the state and current taint rate of
each zone; the summary says what an SRE must know first.
"""

from __future__ import annotations

import humanize
from rich.console import Group, RenderableType
from rich.text import Text
from textual.widgets import Static

from ..core.format import zone_short
from ..core.rules import ZoneState
from ..core.text import safe
from ..core.views import FleetView
from .item_lines import ItemLines
from .theme import Palette

MAX_LINES = 5
"""Lines of zones at most (a sixth for the ALL ZONES DOWN banner); more zones: "+N more zones"."""
ZONE_SYMBOL = {ZoneState.NORMAL: "●", ZoneState.PARTIAL: "◐", ZoneState.FULL: "○"}


def rate_text(rate: float) -> str:
    """Taint rate in nodes per second, as the controller's flags say it."""
    if rate <= 0:
        return "0/s (stopped)"
    return f"{rate:g}/s"


def zone_items(view: FleetView, palette: Palette, *, compact: bool = False) -> list[Text]:
    """One item per zone: ``eu-west-1a ● Normal 4/5 · 0.1/s``; ``compact`` leaves out the taint rate
    and the word of a Normal zone (its ``●`` says it)."""
    shorts = [zone_short(z.name) for z in view.zones]
    unique = len(set(shorts)) == len(shorts)
    items = []
    for i, z in enumerate(view.zones):
        t = Text()
        label = shorts[i] if unique else z.name
        t.append(safe(label, 40) if label else "(no zone)", "bold")
        style = palette.zones.get(z.state)
        word = "" if compact and z.state is ZoneState.NORMAL else f" {z.state.value}"
        t.append(f" {ZONE_SYMBOL[z.state]}{word}", style)
        t.append(f" {humanize.intcomma(z.ready)}/{humanize.intcomma(z.nodes)}")
        if not compact:
            t.append(f" · {rate_text(z.taint_rate)}", palette.muted)
        items.append(t)
    return items


def zone_text(view: FleetView, palette: Palette, *, compact: bool = False) -> RenderableType:
    """``zones (ready/total · taint rate)  eu-west-1a ● Normal 4/5 · 0.1/s │ ...``, wrapped between
    zones (:class:`ItemLines`).

    Zone names are shown without their region when the zone name is unique (``eu-west-1a``);
    ``compact`` drops the taint rates and the word "Normal" (the full form falls back to it when
    the zones would not fit in ``MAX_LINES``).
    """
    def lines(compact: bool, fallback: ItemLines | None = None) -> ItemLines:
        head = Text()
        head.append(" zones", palette.header)
        head.append(" (ready/total" + ("" if compact else " · taint rate") + ") ", palette.muted)
        items = zone_items(view, palette, compact=compact) or [Text("(no nodes)", palette.muted)]
        return ItemLines(head, items, Text(" │ ", palette.muted), max_lines=MAX_LINES, what="zones",
                         fallback=fallback)

    strip = lines(True) if compact else lines(False, fallback=lines(True))
    if not view.all_zones_full:
        return strip
    banner = Text(" ALL ZONES DOWN: evictions stopped (the controller assumes its own connectivity is broken) ",
                  palette.banner)
    return Group(banner, strip)


def summary_text(view: FleetView, palette: Palette) -> Text:
    """The incident in one line: StatefulSet pods at risk, zones in disruption, controller down?"""
    t = Text(no_wrap=False)
    parts = 0
    if view.statefulset_at_risk:
        t.append(f" ⚠ StatefulSet pods at risk: {view.statefulset_at_risk} ", palette.bad)
        t.append("(not replaced until their node is fenced) ", palette.muted)
        parts += 1
    disrupted = [z for z in view.zones if z.state is not ZoneState.NORMAL]
    if disrupted:
        t.append(" zones in disruption: ", palette.warn)
        t.append(", ".join(f"{safe(z.name, 40) or '(no zone)'} ({z.state.value})" for z in disrupted))
        t.append(" ")
        parts += 1
    if view.controller_suspect:
        t.append(" ⚠ node controller may be down: ", palette.bad)
        t.append("nodes stay Overdue past grace + 2 monitor periods with Ready still True ")
        parts += 1
    if not parts:
        t.append(" no incident: no StatefulSet pod at risk, no zone in disruption", palette.muted)
    return t


class ZoneStrip(Static):
    DEFAULT_CSS = """
    ZoneStrip { height: auto; max-height: 6; }
    """

    def show(self, text: RenderableType) -> None:
        self.update(text)


class IncidentSummary(Static):
    DEFAULT_CSS = """
    IncidentSummary { height: auto; max-height: 2; }
    """

    def show(self, text: Text) -> None:
        self.update(text)
