"""``?``: every key the dashboard knows, read from the bindings themselves so it cannot drift."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


def bindings_table(groups: list[tuple[str, list[Binding]]], key_display) -> Table:
    t = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column()
    t.add_column(style="dim")
    for title, bindings in groups:
        t.add_row(Text(title, "bold underline"), Text(""), Text(""))
        for b in bindings:
            t.add_row(Text(key_display(b)), Text(b.description or b.action), Text(b.id or ""))
        t.add_row(Text(""), Text(""), Text(""))
    return t


class HelpScreen(ModalScreen[None]):
    AUTO_FOCUS = "VerticalScroll"
    """Its scroll focused, so the arrows, Page Up/Down, Home and End scroll what a short terminal
    cuts off (the app focuses nothing by itself: at 24 rows twenty lines of keys were out of reach)."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss_help", "Close help", id="help.close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; max-width: 100%; height: 90%;
                                  border: round $primary; background: $surface; padding: 0 1; }
    HelpScreen Static { width: 100%; height: auto; }
    """

    def __init__(self, groups: list[tuple[str, list[Binding]]], keymap_file: str = "") -> None:
        super().__init__()
        self.groups = groups
        self.keymap_file = keymap_file
        """Where the user's keymap is read from (``ui/keymap.py``), said under the table."""

    def compose(self) -> ComposeResult:
        with VerticalScroll() as vs:
            vs.border_title = "nodewatch keys (ctrl+p: command palette)"
            yield Static(bindings_table(self.groups, self.app.get_key_display), id="help-table")
            if self.keymap_file:
                yield Static(Text(f"Move a key by its id (right column) in {self.keymap_file}, "
                                  'e.g. app.search = "ctrl+f"', "dim"), id="help-keymap")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
