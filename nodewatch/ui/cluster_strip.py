"""The cluster strip: one cell per cluster when several are watched, above the zones.

Each cell answers "is anything wrong there?" in a glance: nodes not Ready of the total, zones in
disruption, StatefulSet pods at risk, and whether nodewatch can see the cluster at all. A cluster
that cannot be read (unreachable, credentials rejected, forbidden) is a red cell that says why:
never a blank, never a cell that looks fine. The grace each cluster is judged by is in its cell
too (clusters on different Kubernetes versions have different ones). Wall mode shows one line per
cluster, in the same words. Hidden for a one-cluster fleet.
"""

from __future__ import annotations

from collections.abc import Sequence

import humanize
from rich.console import Group, RenderableType
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from ..core.text import safe
from ..core.views import HEALTH_BAD, HEALTH_OK, ClusterView, FleetView
from .item_lines import ItemLines
from .theme import Palette

MAX_LINES = 4
"""Lines of cluster cells at most; more clusters: "+N more clusters" (worst first, so those are fine)."""
MAX_ERROR = 80
"""Characters of a cluster's error in its cell (the errors pane has all of it)."""


def _worst_first(clusters: Sequence[ClusterView]) -> list[ClusterView]:
    """Clusters that cannot be read, then by nodes not Ready; the rest in the order given."""
    order = {c.name: i for i, c in enumerate(clusters)}
    return sorted(clusters, key=lambda c: (c.health != HEALTH_BAD, -c.not_ready, order[c.name]))


def cluster_item(c: ClusterView, palette: Palette, *, compact: bool = False) -> Text:
    """``prod-eu ✖ 3/1,200 not Ready · 1 zone disrupted · 2 sts at risk · grace 40s · ok``; a
    cluster that cannot be read: ``prod-us ✖ credentials rejected ...`` in the banner style."""
    t = Text()
    name = safe(c.name, 40)
    if c.error:
        t.append(f" {name} ✖ {safe(c.error, MAX_ERROR)} ", palette.banner)
        return t
    bad = c.not_ready > 0 or c.health == HEALTH_BAD
    t.append(name, "bold")
    t.append(" ✖ " if bad else " ● ", palette.bad if bad else palette.good)
    t.append(f"{humanize.intcomma(c.not_ready)}/{humanize.intcomma(c.nodes)}",
             palette.bad if c.not_ready else Style())
    t.append(" not Ready" if not compact else "")
    if c.zones_disrupted:
        t.append(f" · {c.zones_disrupted} {'zone' if c.zones_disrupted == 1 else 'zones'} disrupted", palette.warn)
    if c.all_zones_full:
        t.append(" · ALL ZONES DOWN", palette.bad)
    if c.statefulset_at_risk:
        t.append(f" · {c.statefulset_at_risk} sts at risk", palette.bad)
    if not compact:
        t.append(f" · grace {c.settings.grace:g}s", palette.muted)
    if c.health == HEALTH_BAD:
        t.append(f" · {safe(c.health_text, MAX_ERROR)}", palette.banner)
    elif c.health != HEALTH_OK:
        t.append(f" · {safe(c.health_text, MAX_ERROR)}", palette.warn)
    elif not compact:
        t.append(" · ok", palette.muted)
    return t


def cluster_text(view: FleetView, palette: Palette, *, compact: bool = False) -> RenderableType:
    """The strip: ``clusters  prod-eu ● 0/1,200 not Ready · grace 50s · ok │ ...``, wrapped between
    cells, worst first."""
    def lines(compact: bool, fallback: ItemLines | None = None) -> ItemLines:
        head = Text()
        head.append(" clusters", palette.header)
        head.append(" (not Ready/total) ", palette.muted)
        items = [cluster_item(c, palette, compact=compact) for c in _worst_first(view.clusters)]
        return ItemLines(head, items, Text(" │ ", palette.muted), max_lines=MAX_LINES, what="clusters",
                         fallback=fallback)

    return lines(True) if compact else lines(False, fallback=lines(True))


def wall_cluster_text(view: FleetView, palette: Palette) -> RenderableType:
    """Wall mode: one line per cluster, worst first, for a screen across the room."""
    rows = []
    for c in _worst_first(view.clusters):
        item = cluster_item(c, palette)
        rows.append(item if c.error else Text(" ").append_text(item))  # an error cell has its own padding
    return Group(*rows)


class ClusterStrip(Static):
    """Shown only with several clusters (``show(None)`` hides it)."""

    DEFAULT_CSS = """
    ClusterStrip { height: auto; max-height: 5; display: none; }
    ClusterStrip.-on { display: block; }
    ClusterStrip.-wall { max-height: 12; text-style: bold; border: round $foreground 30%; }
    """

    def show(self, text: RenderableType | None) -> None:
        self.set_class(text is not None, "-on")
        self.update(text if text is not None else Text(""))
