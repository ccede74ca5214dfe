"""The header: where the data comes from, the settings in force, counts per state, watch health.

Plus the banner that says, loudly, when the dashboard itself cannot see: a blind lease stream means
no node can be judged by its lease age, and the screen must not let anyone think otherwise.
"""

from __future__ import annotations

import humanize
from rich.text import Text
from textual.widgets import Static

from ..core.format import clock_time
from ..core.rules import NodeState
from ..core.text import duration, safe
from ..core.views import FleetView
from .cells import CORDON_MARK
from .theme import Palette

STATES_BY_RANK = tuple(sorted(NodeState, key=lambda s: s.rank))


def header_text(source_name: str, view: FleetView, now: float, palette: Palette, *, virtual: bool,
                problems: tuple[int, int] = (0, 0), width: int = 200, problems_key: str = "p",
                listing: int | None = None) -> Text:
    """Two lines: source, settings and clock; then the counts per state and each stream's health.

    ``problems`` is (errors, notices) as ``FleetState.problem_counts`` says; they are named for what
    they are, with the key that lists them. Narrower than 110 cells the counts go symbol-first
    (``✖1 »3 ?3``) so that the whole line still fits. ``listing``: the leases received so far of a
    first lease list that no frame is judged during (``ui/app``): said instead of the counts of the
    frame before, which are of the few nodes known then.
    """
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(" nodewatch ", palette.accent)
    t.append(clock_time(now, date=True), "bold")
    if virtual:
        t.append(" (virtual)", palette.muted)
    t.append(" │ ", palette.muted)
    t.append(safe(source_name, 80))
    t.append(" · read-only", palette.muted)  # nodewatch only gets, lists and watches: say so on screen
    t.append(" │ ", palette.muted)
    t.append(safe(clusters_settings(view) if view.clusters else view.settings.summary(), 160))
    t.append("\n ")
    if listing is not None:
        t.append(leases_listed(listing), palette.muted)
        return t
    total = len(view.nodes)
    narrow = width < 110
    for s in STATES_BY_RANK:
        n = view.counts.get(s, 0)
        count = humanize.intcomma(n)
        t.append(f"{s.symbol}{count}" if narrow else f"{s.symbol} {s.word} {count}",
                 palette.state(s) if n else palette.muted)
        t.append(" " if narrow else "  ")
    cordoned = view.cordoned
    if cordoned:
        t.append(f"{CORDON_MARK}{cordoned}" if narrow else f"{CORDON_MARK} cordoned {humanize.intcomma(cordoned)}",
                 palette.warn)
        t.append(" " if narrow else "  ")
    t.append(f"│ {nodes_phrase(total)} ", palette.muted)
    errors, notices = problems
    if errors or notices:
        t.append("│ ", palette.muted)
        if errors:
            t.append(f"{humanize.intcomma(errors)} {'error' if errors == 1 else 'errors'}", palette.bad)
        if notices:
            t.append(" · " if errors else "", palette.muted)
            t.append(f"{humanize.intcomma(notices)} {'notice' if notices == 1 else 'notices'}", palette.warn)
        t.append(f" ({problems_key}) ", palette.muted)
    for res in sorted(view.health):
        h = view.health[res]
        if h.forbidden:
            t.append(f" {res}:forbidden", palette.bad)
        elif not h.connected:
            since = f" {duration(now - h.down_since)}" if h.down_since is not None else ""
            t.append(f" {res}:down{since}", palette.bad)
        elif not h.synced:
            t.append(f" {res}:listing", palette.warn)
        elif res == "leases" and view.awaiting_renewals:
            # listed ages the server did not date: not judged until they renew (core/evidence.py)
            t.append(f" leases:{humanize.intcomma(view.awaiting_renewals)} awaiting a renewal", palette.warn)
        else:
            t.append(f" {res}:ok", palette.muted)
    return t


def clusters_settings(view: FleetView) -> str:
    """Several clusters: each has its own settings (its cell in the cluster strip says its grace,
    and each learns its default toleration from its own pods); the header says the ranges."""
    graces = sorted({c.settings.grace for c in view.clusters})
    grace = f"{graces[0]:g}s" if len(graces) == 1 else f"{graces[0]:g}-{graces[-1]:g}s"
    tolerations = sorted({c.settings.toleration for c in view.clusters})
    if len(tolerations) > 1:
        return f"grace {grace} (each cluster's own: see its cell) · toleration {tolerations[0]:g}-{tolerations[-1]:g}s"
    return f"grace {grace} (each cluster's own: see its cell) · {view.clusters[0].settings.toleration_text()}"


def nodes_phrase(n: int) -> str:
    """``65,000 nodes`` / ``1 node``."""
    return f"{humanize.intcomma(n)} {'node' if n == 1 else 'nodes'}"


def banner_text(view: FleetView, now: float, palette: Palette) -> Text | None:
    """The "dashboard blind" banner, or None when the dashboard can see."""
    if not view.leases_blind:
        return None
    h = view.health.get("leases")
    since = None
    if h is not None:
        since = h.down_since if h.down_since is not None else h.last_activity
    t = Text(no_wrap=False)
    t.append(" ⚠ dashboard blind: ", palette.banner)
    t.append(safe(view.blind_reason, 200), palette.banner)
    when = f" since {clock_time(since)}" if since is not None else ""
    t.append(f" · lease ages unknown{when}; no node is judged by its lease until the stream is back ", palette.banner)
    return t


def leases_listed(leases: int) -> str:
    """How far a first lease list has got (the banner's and the header's words)."""
    return f"listing the node leases: {humanize.intcomma(leases)} so far"


def listing_text(leases: int, palette: Palette) -> Text:
    """The banner while a large fleet's first lease list comes in (no frame is judged meanwhile)."""
    t = Text(no_wrap=False)
    t.append(f" {leases_listed(leases)}; every node is judged by its lease once the list is in ", palette.banner)
    return t


class FleetHeader(Static):
    """Two lines at the top. The app calls ``show`` every tick."""

    DEFAULT_CSS = """
    FleetHeader { height: 2; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def show(self, text: Text) -> None:
        self.update(text)


class Banner(Static):
    """Hidden unless the dashboard is blind."""

    DEFAULT_CSS = """
    Banner { height: auto; display: none; }
    Banner.-on { display: block; }
    """

    def show(self, text: Text | None) -> None:
        self.set_class(text is not None, "-on")
        self.update(text if text is not None else Text(""))
