"""Wall mode: for a screen across the room. Big counts, the clusters (when several are watched: one
line each), the zones, and only the nodes not Ready.

No cursor and nothing to click: it is read, not driven. Every count has its state's symbol and
word next to it, so it reads on a monochrome screen and with ``NO_COLOR=1``.

A small terminal keeps the rows: below ``app.SHORT_LINES`` lines a count is a line, not big digits
(at 60x15 the big ones left the table its heading alone), and where the boxes shown do not fit side
by side they go (the header's count line has every count; at 40 columns one box showed, the
others cut off).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Digits, Static

from ..core.rules import NodeState
from ..core.views import FleetView
from .cells import CORDON_MARK
from .cluster_strip import ClusterStrip
from .fleet_table import FleetTable
from .rows import WALL_COLUMNS
from .theme import Palette
from .zone_strip import ZoneStrip

STATES_BY_RANK = tuple(sorted(NodeState, key=lambda s: s.rank))


BOX_MIN_WIDTH = 12
"""A count box's least width: its state's word and three big digits."""


class CountBox(Vertical):
    """One state: its symbol and word, and its count in big digits (on a short terminal, the count
    after the word)."""

    DEFAULT_CSS = """
    CountBox { width: 1fr; height: 6; min-width: %d; border: round $foreground 30%%; padding: 0 1; }
    CountBox.-bad { border: heavy $error; }
    CountBox.-warn { border: round $warning; }
    CountBox > Static { height: 1; text-style: bold; }
    CountBox > Digits { height: 3; }
    CountBox > .inline { dock: right; width: auto; display: none; }
    """ % BOX_MIN_WIDTH
    # (a short terminal's counts: app.tcss, where the app's ``-short`` class is seen)

    def __init__(self, state: NodeState) -> None:
        super().__init__(id=f"count-{state.name.lower()}")
        self.state = state
        self.inline_width = BOX_MIN_WIDTH

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.state.symbol} {self.state.word}"), classes="label")
        yield Static(Text("0"), classes="inline")
        yield Digits("0")

    def show(self, n: int, palette: Palette) -> None:
        style = palette.state(self.state)
        self.query_one(".label", Static).update(Text(f"{self.state.symbol} {self.state.word}", style))
        self.query_one(".inline", Static).update(Text(f" {n:,}", style))
        self.query_one(Digits).update(str(n))
        # what the box needs on a short terminal: symbol, word and count on one line, its border and
        # padding (narrower, the count docked right covers the word)
        self.inline_width = len(self.state.word) + len(f"{n:,}") + 7
        bad = self.state.rank <= NodeState.NOT_READY.rank and n > 0
        self.set_class(bad, "-bad")
        self.set_class(not bad and self.state is not NodeState.READY and n > 0, "-warn")
        self.display = n > 0 or self.state is NodeState.READY


class WallView(Vertical):
    DEFAULT_CSS = """
    WallView { height: 1fr; }
    WallView > Horizontal { height: auto; }
    WallView > #wall-title { height: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="wall-title")
        with Horizontal(id="wall-counts"):
            for s in STATES_BY_RANK:
                yield CountBox(s)
        yield ClusterStrip(id="wall-clusters", classes="-wall")
        yield ZoneStrip(id="wall-zones")
        yield FleetTable(columns=WALL_COLUMNS, show_cursor=False, id="wall-table")

    def show_counts(self, view: FleetView, palette: Palette) -> None:
        for box in self.query(CountBox):
            box.show(view.counts.get(box.state, 0), palette)
        self._fit()
        not_ready = len(view.nodes) - view.counts.get(NodeState.READY, 0)
        title = Text()
        title.append(f" {not_ready:,} of {len(view.nodes):,} nodes not Ready ",
                     palette.bad if not_ready else palette.good)
        cordoned = view.cordoned
        if cordoned:  # a cordoned node may be Ready (not in the table below): count them all here
            title.append(f" {CORDON_MARK} {cordoned:,} cordoned ", palette.warn)
        self.query_one("#wall-title", Static).update(title)

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """The count boxes shown, only if they fit side by side, each with its word (a paused
        replay draws no new counts: a resize fits them too)."""
        shown = [box for box in self.query(CountBox) if box.display]
        least = max((box.inline_width for box in shown), default=0) if self.app.has_class("-short") else BOX_MIN_WIDTH
        self.query_one("#wall-counts").display = self.size.width >= len(shown) * max(least, BOX_MIN_WIDTH)
