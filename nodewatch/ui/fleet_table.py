"""The fleet table: one row per node, drawn line by line so only visible rows cost anything.

A Line-API widget (like toolong's ``log_lines.py``): ``render_line(y)`` draws screen line ``y``
from the row list it was handed, an LRU cache of ``Strip`` s is keyed by what a line shows, and a
tick repaints only the visible lines. Textual's ``DataTable`` rebuilds per-row caches for every row
on any change, which a 65,000-node fleet that ticks every second cannot afford.

Which rows and columns (``rows.py``) and how one row is drawn and diffed (``cells.py``) are plain
functions beside it; this module is the widget: the cursor, the scrolling, and which cells of the
screen to repaint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..core.text import safe
from ..core.views import FleetView, NodeView
from . import partial_update
from .cells import (
    CellKey,
    RowContext,
    cell_and_separator,
    changed_cells,
    render_header,
    static_cells,
    time_cells,
)
from .messages import NodeChosen
from .rows import CLUSTER_COLUMN, COLUMN_KEYS, NAME_SCAN_TICKS, SEP, Column, layout_columns
from .theme import Palette


class FleetTable(ScrollView, can_focus=True):
    """The node table. The app hands it rows each tick (``set_rows``); it draws what is visible.

    A tick repaints only the cells whose text or style changed: ``render_line`` remembers what it
    drew on each screen line (:class:`_Line`), ``set_rows`` works out the new lines and refreshes
    the region of each cell that differs (a whole line only when the line is not a row any more,
    its base style or the column layout changed). With :mod:`.partial_update` installed Textual
    then writes just those cells: a row whose countdown moved costs a few dozen bytes, not a line.
    """

    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False, id="table.up"),
        Binding("down,j", "cursor_down", "Down", show=False, id="table.down"),
        Binding("pageup", "page_up", "Page up", show=False, id="table.page_up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="table.page_down"),
        Binding("home,g", "first", "First", show=False, id="table.first"),
        Binding("end,G", "last", "Last", show=False, id="table.last"),
        Binding("enter", "choose", "Details", id="table.choose"),
    ]

    DEFAULT_CSS = """
    FleetTable {
        height: 1fr;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    """

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)
    """Index into the shown rows of the highlighted node."""

    def __init__(self, *, columns: tuple[str, ...] = COLUMN_KEYS, show_cursor: bool = True,
                 name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.column_keys = columns
        self.show_cursor = show_cursor
        self.rows: Sequence[NodeView] = ()
        """The rows shown: frozen views of one published snapshot (``shown``), never changed while
        the table holds them; the next tick hands a new list."""
        self.shown: FleetView | None = None
        """The published snapshot the rows were selected from (its ``at`` and ``seq``): what the
        table showed at its last ``set_rows``. None when the caller gave rows alone."""
        self.ctx = RowContext(now=0.0)
        self.sort = "state"
        self.reverse = False
        self.selected_name: str | None = None
        """The key (``NodeView.key``: the name, or cluster/name) of the node the user put the cursor
        on (it stays under the cursor when the order changes); None until the user moves it."""
        self.cluster_width = 0
        self.empty_message = "no nodes"
        self._layout: list[tuple[Column, int]] = []
        self._layout_key: tuple[int, int] = (-1, -1)
        self._offsets: list[int] = []
        """Screen x of each layout column (the layout's cumulative widths and separators)."""
        self._name_width = 12
        self._name_widths: dict[str, int] = {}
        self._name_scan = 12
        self._name_key: tuple = ()
        self._name_ticks = 0
        """Cell width of each node name as shown (cached: names rarely change)."""
        self._static: dict[str, tuple[tuple, Palette, dict[str, CellKey]]] = {}
        """Per node key: the view fields and palette the static cells were made from, and the cells."""
        self._segments: dict[tuple, list[dict[CellKey, list[Segment]]]] = {}
        """(layout, base style) -> per column, cell -> the cell's segments (with the separator after
        it): unchanged cells are not rebuilt. Plain dicts, emptied when they grow too big."""
        self._painted: dict[int, _Line] = {}
        """Screen line -> what ``render_line`` last drew there."""
        self._pending: dict[int, _Line] = {}
        self._pending_token: tuple | None = None
        """Lines worked out by the last diff, valid while the token (rows, scroll, cursor...) holds."""
        self._rows_gen = 0
        self._in_set_rows = False
        self._retired: Sequence[NodeView] | None = None
        """The previous row list, released after the next paint."""
        partial_update.install()  # so that the cells refreshed alone are written alone

    # --- data in -------------------------------------------------------------------------------

    def set_rows(self, rows: Sequence[NodeView], ctx: RowContext, *, sort: str = "state", reverse: bool = False,
                 shown: FleetView | None = None) -> None:
        """New rows and a new ``now``: keep the cursor on the same node, repaint the cells that
        changed. ``shown``: the published snapshot the rows come from (kept as ``self.shown``)."""
        if self._retired is None and self.rows is not rows:
            # Dropping the last reference to a 65,000-row list costs ~0.5 ms of reference counting:
            # let it happen after the paint, not before it.
            self._retired = self.rows
            self.call_after_refresh(self._release_retired)
        self.rows = rows
        self.shown = shown
        self.ctx = RowContext(ctx.now, ctx.palette, ctx.blind_since, self.rich_style)
        self.sort, self.reverse = sort, reverse
        self._rows_gen += 1
        self._name_width = self._fit_names(rows)
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self._in_set_rows = True
        try:
            if self.show_cursor:
                self._follow_selected()
        finally:
            self._in_set_rows = False
        self._refresh_changed()

    def set_columns(self, keys: tuple[str, ...], cluster_width: int = 0) -> None:
        """Show these columns (the app adds the cluster column when several clusters are watched)."""
        if keys != self.column_keys or cluster_width != self.cluster_width:
            self.column_keys, self.cluster_width = keys, cluster_width
            self._layout_key = (-1, -1)
            self._segments.clear()
            self._painted.clear()
            self._pending_token = None
            self.refresh()

    def _release_retired(self) -> None:
        self._retired = None

    def _fit_names(self, rows: Sequence[NodeView]) -> int:
        """The name column's width: it fits the longest name among the first 2,000 rows, so it does
        not jump while scrolling near the top. That scan is redone when the list changes shape
        (length, sort) and every ``NAME_SCAN_TICKS`` ticks; in between the widest visible name
        can only widen it (a long name scrolled into view is never cut)."""
        key = (len(rows), self.sort, self.reverse)
        self._name_ticks += 1
        if key != self._name_key or self._name_ticks >= NAME_SCAN_TICKS:
            self._name_key, self._name_ticks = key, 0
            self._name_scan = self._longest_name(rows[:2000])
        top = int(self.scroll_y)
        return max(self._name_scan, self._longest_name(rows[top:top + self.size.height]))

    def _longest_name(self, rows: Sequence[NodeView]) -> int:
        widths = self._name_widths
        if len(widths) > 8192:
            widths.clear()
        names = [v.name for v in rows]
        try:
            return max(12, max(map(widths.__getitem__, names), default=12))
        except KeyError:
            for n in names:
                if n not in widths:
                    widths[n] = cell_len(safe(n, 80))
            return max(12, max(map(widths.__getitem__, names), default=12))

    def _follow_selected(self) -> None:
        rows = self.rows
        if not rows:
            self.cursor = 0
            return
        name = self.selected_name
        c = min(self.cursor, len(rows) - 1)
        if name is not None and rows[c].key != name:
            lo, hi = max(0, c - 256), min(len(rows), c + 256)
            found = next((i for i in range(lo, hi) if rows[i].key == name), None)
            if found is None:
                found = next((i for i, v in enumerate(rows) if v.key == name), None)
            if found is not None:
                c = found
        self.cursor = c

    # --- cursor --------------------------------------------------------------------------------

    @property
    def page(self) -> int:
        return max(1, self.size.height - 1)

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, old: int, new: int) -> None:
        if self.rows and not self._in_set_rows:
            # The node to follow is one the user put the cursor on. Until then the cursor stays on
            # the top row, the worst node: a dashboard opened at start-up followed the node its
            # first frame happened to show first (a placeholder row, before the Nodes were in),
            # and scrolled the worst nodes out of sight when the complete frame reordered them.
            self.selected_name = self.rows[new].key
        top = int(self.scroll_y)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + self.page:
            self.scroll_to(y=new - self.page + 1, animate=False, immediate=True)
        if not self._in_set_rows:  # set_rows repaints what changed once it is done
            self._refresh_changed()

    @property
    def current(self) -> NodeView | None:
        if not self.rows or not self.show_cursor:
            return None
        return self.rows[min(self.cursor, len(self.rows) - 1)]

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_page_up(self) -> None:
        self.cursor -= self.page

    def action_page_down(self) -> None:
        self.cursor += self.page

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = len(self.rows) - 1

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.show_cursor and action != "noop":
            return False  # the wall table is read, not driven
        return True

    def action_choose(self) -> None:
        v = self.current
        if v is not None:
            self.post_message(NodeChosen(v.key))

    def on_click(self, event: events.Click) -> None:
        if event.y < 1 or not self.show_cursor:
            return
        idx = int(self.scroll_y) + event.y - 1
        if 0 <= idx < len(self.rows):
            if idx == self.cursor and event.chain >= 2:
                self.action_choose()
            self.cursor = idx

    # --- what each screen line shows -------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self.rows) + 1)
        self._segments.clear()
        self._painted.clear()
        self._pending_token = None

    def _columns(self, width: int) -> list[tuple[Column, int]]:
        key = (width, self._name_width)
        if key != self._layout_key:
            self._layout = layout_columns(width, self.column_keys, self._name_width,
                                          self.cluster_width or CLUSTER_COLUMN.width)
            self._layout_key = key
            x, self._offsets = 0, []
            for _, w in self._layout:
                self._offsets.append(x)
                x += w + len(SEP)
        return self._layout

    def _token(self) -> tuple:
        return (self._rows_gen, int(self.scroll_y), self.cursor, self.size, self.empty_message)

    def _line(self, y: int, width: int) -> _Line:
        """What screen line ``y`` shows now: a row's cells, or the header / a message / blank."""
        if self._pending_token is not None:
            hit = self._pending.get(y)
            if hit is not None and self._pending_token == self._token():
                return hit
        ctx = self.ctx
        cols = self._columns(width)
        layout = self._layout_key
        if y == 0:
            return _Line(layout, ctx.base, ("header", self.sort, self.reverse, id(ctx.palette)))
        idx = int(self.scroll_y) + y - 1
        if idx >= len(self.rows):
            if idx == 0:
                return _Line(layout, ctx.base, ("text", f" {self.empty_message}", ctx.palette.muted))
            return _Line(layout, ctx.base, ("blank",))
        if not self.show_cursor and y == self.size.height - 1 and len(self.rows) > idx + 1:
            return _Line(layout, ctx.base, ("text", f" … and {len(self.rows) - idx} more", ctx.palette.warn))
        v = self.rows[idx]
        selected = self.show_cursor and idx == self.cursor
        base = ctx.base + ctx.palette.cursor if selected else ctx.base
        # Keyed by what the static cells show: a renewal replaces a node's view (views are frozen)
        # without changing any of these, and the cells are not made again.
        shown = (v.state, v.zone, v.ready, v.pressure, v.network_unavailable, v.kubelet_version, v.causes)
        key = v.key
        static = self._static.get(key)
        if static is None or static[1] is not ctx.palette or static[0] != shown:
            if len(self._static) > 4096:
                self._static.clear()
            static = (shown, ctx.palette, static_cells(v, ctx.palette))
            self._static[key] = static
        cells = {**static[2], **time_cells(v, ctx)}
        return _Line(layout, base, tuple(cells[c.cell] for c, _ in cols))

    def _refresh_changed(self) -> None:
        """Refresh the regions of the visible cells that differ from what was drawn; no full refresh."""
        if not self.is_mounted or not self.size:
            return
        self._pending_token = None
        width = self.scrollable_content_region.width
        lines = {y: self._line(y, width) for y in range(self.size.height)}
        self._pending, self._pending_token = lines, self._token()
        painted = self._painted
        offsets, layout = self._offsets, self._layout
        regions: list[Region] = []
        add = regions.append
        for y, new in lines.items():
            old = painted.get(y)
            if old == new:
                continue
            if (old is None or old.layout != new.layout or old.base != new.base
                    or isinstance(new.content[0], str) or isinstance(old.content[0], str)):
                add(Region(0, y, width, 1))
                continue
            for i, (a, b) in enumerate(zip(old.content, new.content)):
                if a != b:
                    w = layout[i][1]
                    start, end = changed_cells(a, b, w)
                    add(Region(offsets[i] + start, y, end - start, 1))
        if regions:
            self.refresh(*regions)

    # --- drawing -------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        line = self._line(y, width)
        self._painted[y] = line
        ctx = self.ctx
        content = line.content
        kind = content[0]
        if kind == "header":
            return render_header(self._columns(width), ctx, width, self.sort, self.reverse)
        if kind == "text":
            return Strip([Segment(content[1], ctx.base + content[2])]).adjust_cell_length(width, ctx.base)
        if kind == "blank":
            return Strip.blank(width, ctx.base)
        base = line.base
        segs: list[Segment] = []
        cols = self._columns(width)
        # One dict per column for this layout and base style, keyed by the cell itself: no key
        # tuple is built per cell (they add up to garbage-collector work at 60 lines a tick).
        per_column = self._segments.get((line.layout, base))
        if per_column is None:
            if len(self._segments) > 8:
                self._segments.clear()
            per_column = self._segments[(line.layout, base)] = [{} for _ in cols]
        last = len(cols) - 1
        total = -len(SEP)
        for i, ((_, w), cell) in enumerate(zip(cols, content)):
            cache = per_column[i]
            cs = cache.get(cell)
            if cs is None:
                if len(cache) > 2048:
                    cache.clear()
                cs = cache[cell] = cell_and_separator(cell, w, base, i < last)
            segs.extend(cs)
            total += w + len(SEP)
        if total == width:
            return Strip(segs, width)
        return Strip(segs, total).adjust_cell_length(width, base)


@dataclass(frozen=True, slots=True)
class _Line:
    """What one screen line of the table shows, comparable with what was drawn there before."""

    layout: tuple[int, int]
    """The column layout key: cell offsets are only comparable within one layout."""
    base: Style
    content: tuple
    """A row: its cells in layout order. Otherwise a tuple starting with a kind string."""
