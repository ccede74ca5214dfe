"""``p``: what nodewatch could not use (errors) and the limits it works within (notices), in full.

The header only counts them ("2 errors · 1 notice (p)"); this pane says what, where and when, newest
first, errors before notices. Messages carry cluster text (object names, API errors): plain text
through ``safe``, never markup.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..core.fleet import FleetState
from ..core.format import ago, clock_time
from ..core.text import safe
from ..core.views import PROBLEM_NOTICE, Problem
from .theme import DEFAULT_PALETTE, Palette

MAX_SHOWN = 200
"""As many as the state keeps (``fleet_data.MAX_PROBLEMS``)."""


def problems_table(problems: list[Problem], now: float, palette: Palette = DEFAULT_PALETTE) -> Table | Text:
    """Errors first, then notices; newest first within each."""
    if not problems:
        return Text("no problems: every object received was usable, and nothing is limited", palette.good)
    t = Table(box=None, pad_edge=False, show_header=True, header_style="bold", expand=True, padding=(0, 1))
    t.add_column("KIND", no_wrap=True)
    t.add_column("WHEN", no_wrap=True)
    t.add_column("WHERE", no_wrap=True, max_width=28, overflow="ellipsis")
    t.add_column("WHAT", ratio=1, overflow="fold")
    ordered = sorted(enumerate(problems), key=lambda ip: (ip[1].kind == PROBLEM_NOTICE, -ip[0]))
    for _, p in ordered:
        notice = p.kind == PROBLEM_NOTICE
        when = f"{clock_time(p.at)} ({ago(p.at, now)})" if p.at is not None else "?"
        t.add_row(Text("notice" if notice else "error", palette.warn if notice else palette.bad),
                  Text(when, palette.muted), Text(safe(p.where, 60)), Text(safe(p.message, 500)))
    return t


class ProblemsScreen(ModalScreen[None]):
    """The list behind the header's error and notice counts. The app refreshes it each tick."""

    AUTO_FOCUS = "VerticalScroll"
    """Its scroll focused, so the keys scroll a list longer than the screen (``HelpScreen``'s reason)."""

    BINDINGS = [
        Binding("escape,p,q", "close", "Close", id="problems.close"),
    ]

    DEFAULT_CSS = """
    ProblemsScreen { align: center middle; }
    ProblemsScreen > VerticalScroll { width: 120; max-width: 100%; height: 80%;
                                      border: round $warning; background: $surface; padding: 0 1; }
    ProblemsScreen Static { width: 100%; height: auto; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll() as vs:
            vs.border_title = "errors and notices (Escape: close)"
            yield Static(Text(""), id="problems-table")

    def show(self, state: FleetState, now: float, palette: Palette) -> list[Problem]:
        problems = state.recent_problems(MAX_SHOWN)
        self.query_one("#problems-table", Static).update(problems_table(problems, now, palette))
        return problems

    def action_close(self) -> None:
        self.dismiss(None)
