"""The fleet table: one row per node, drawn line by line so only visible rows cost anything.

A Line-API widget (like toolong's ``log_lines.py``): ``render_line(y)`` draws screen line ``y``
from the row list it was handed, an LRU cache of ``Strip`` s is keyed by what a line shows, and a
tick repaints only the visible lines. Textual's ``DataTable`` rebuilds per-row caches for every row
on any change, which a 65,000-node fleet that ticks every second cannot afford.

Row selection (filters, search, sort) lives in :func:`select_rows`, a plain function, so its cost
can be measured and tested without a screen; :func:`render_row` draws one row as a ``Strip``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..core.fleet import FleetState, FleetView, NodeView
from ..core.rules import NodeState, renew_interval
from .format import (
    bar,
    cert_text,
    clock_time,
    conditions_text,
    duration,
    eviction_text,
    grace_text,
    safe,
    taints_text,
    version_key,
    zone_short,
)
from .messages import NodeChosen
from .theme import DEFAULT_PALETTE, Palette

INF = math.inf


# --- columns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    """Fixed width; for the two flexible columns (name, cause) the minimum."""
    drop: int
    """Narrow screens drop columns with the highest ``drop`` first; 0 = never dropped."""
    sort: Callable[[NodeView], Any] | None
    """Sort key (ascending = most urgent first where that means something); None: fleet order."""
    flex: bool = False


def _cond_flags(v: NodeView) -> int:
    return (v.ready != "True") * 4 + len(v.pressure) + v.network_unavailable


COLUMNS: tuple[Column, ...] = (
    Column("state", "STATE", 10, 0, None),
    Column("name", "NODE", 12, 0, lambda v: v.name, flex=True),
    Column("zone", "ZONE", 12, 5, lambda v: (v.zone, v.state.rank, v.name)),
    Column("renew", "RENEW AGE", 16, 3, lambda v: (v.lease_observed_at if v.lease_observed_at is not None else INF, v.name)),
    Column("grace", "GRACE", 18, 0, lambda v: (v.lease_observed_at + v.grace if v.lease_observed_at is not None else INF, v.state.rank, v.name)),
    Column("evict", "EVICTION", 18, 1, lambda v: (v.eviction_at if v.eviction_at is not None else INF, v.name)),
    Column("cond", "R M D P N", 9, 4, lambda v: (-_cond_flags(v), v.name)),
    Column("taints", "TAINTS", 26, 6, lambda v: (-len(v.taints), v.name)),
    Column("cert", "CERT", 7, 7, lambda v: (v.cert_not_after if v.cert_not_after is not None else INF, v.name)),
    Column("kubelet", "KUBELET", 10, 8, lambda v: (version_key(v.kubelet_version), v.name)),
    Column("cause", "LIKELY CAUSE", 32, 0, lambda v: (v.cause == "", v.cause, v.name), flex=True),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
WALL_COLUMNS = ("state", "name", "zone", "grace", "evict", "cause")
NAME_MAX = 34
SEP = " "


def layout_columns(width: int, keys: tuple[str, ...] = COLUMN_KEYS, name_width: int = NAME_MAX
                   ) -> list[tuple[Column, int]]:
    """The columns that fit ``width`` cells, with their widths, in display order.

    ``name_width`` is the longest name shown (capped): the name column takes no more, and the
    likely cause gets the rest.
    """
    cols = [c for c in COLUMNS if c.key in keys]
    chosen = list(cols)

    def need(cs: list[Column]) -> int:
        return sum(c.width for c in cs) + len(SEP) * (len(cs) - 1)

    for c in sorted(cols, key=lambda c: -c.drop):
        if need(chosen) <= width or c.drop == 0:
            continue
        chosen.remove(c)
    spare = max(0, width - need(chosen))
    out: list[tuple[Column, int]] = []
    name_min = next(c.width for c in COLUMNS if c.key == "name")
    name_want = max(name_min, min(name_width, NAME_MAX))
    name_extra = min(spare, name_want - name_min) if any(c.key == "cause" for c in chosen) else spare
    for c in chosen:
        w = c.width
        if c.key == "name":
            w += name_extra
        elif c.key == "cause":
            w += spare - name_extra
        out.append((c, w))
    return out


# --- choosing rows ---------------------------------------------------------------------------

NOT_READY = "not-ready"
"""State filter: every node that is not Ready."""


@dataclass(frozen=True)
class RowQuery:
    """Which nodes the table shows, and in what order."""

    states: str | NodeState | None = None
    """None: all; ``NOT_READY``: all but Ready; a NodeState: only that state."""
    zone: str | None = None
    search: str = ""
    """Case-insensitive substring of the node's name, or of one of its labels (``key=value``)."""
    sort: str = "state"
    reverse: bool = False


class LabelMatcher:
    """Search in names and labels, remembering each node's answer until its record changes."""

    def __init__(self) -> None:
        self._term = ""
        self._memo: dict[str, tuple[object, bool]] = {}

    def matches(self, term: str, names: list[NodeView], state: FleetState) -> list[NodeView]:
        term = term.lower()
        if term != self._term:
            self._term = term
            self._memo.clear()
        memo = self._memo
        out = []
        with state.lock:
            records = state.nodes
            for v in names:
                rec = records.get(v.name)
                hit = memo.get(v.name)
                if hit is None or hit[0] is not rec:
                    ok = term in v.name.lower() or (rec is not None and any(
                        term in f"{k}={val}".lower() for k, val in rec.labels.items()))
                    memo[v.name] = hit = (rec, ok)
                if hit[1]:
                    out.append(v)
        if len(memo) > 2 * max(len(records), 1000):
            memo.clear()
        return out


def _state_slice(view: FleetView, states: str | NodeState) -> list[NodeView]:
    """Fleet order is worst first by state rank, so a state filter is a slice: O(1), not O(n)."""
    counts = view.counts
    order = sorted(NodeState, key=lambda s: s.rank)
    if states == NOT_READY:
        end = sum(counts.get(s, 0) for s in order if s is not NodeState.READY)
        return view.nodes[:end]
    start = 0
    for s in order:
        if s is states:
            return view.nodes[start:start + counts.get(s, 0)]
        start += counts.get(s, 0)
    return []


def select_rows(view: FleetView, query: RowQuery, state: FleetState | None = None,
                matcher: LabelMatcher | None = None) -> list[NodeView]:
    """The rows to show. Worst first with no search or zone filter costs O(shown), not O(fleet)."""
    rows = view.nodes if query.states is None else _state_slice(view, query.states)
    if query.zone is not None:
        zone = query.zone
        rows = [v for v in rows if v.zone == zone]
    if query.search:
        if state is None:
            term = query.search.lower()
            rows = [v for v in rows if term in v.name.lower()]
        else:
            rows = (matcher or LabelMatcher()).matches(query.search, rows, state)
    col = next((c for c in COLUMNS if c.key == query.sort), None)
    if col is not None and col.sort is not None:
        rows = sorted(rows, key=col.sort, reverse=query.reverse)
    elif query.reverse:
        rows = rows[::-1]
    return rows


# --- drawing one row ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RowContext:
    """What every row of one frame shares."""

    now: float
    palette: Palette = DEFAULT_PALETTE
    blind_since: float | None = None
    """Set while the lease stream is blind: ages read "? since HH:MM:SS"."""
    base: Style = Style()


def _cell(text: str, width: int, style: Style) -> Segment:
    if cell_len(text) != width:
        text = set_cell_size(text, width)
    return Segment(text, style)


Cell = tuple[str, Style] | list[tuple[str, Style]]
"""A cell is one styled text, or a few (the renew bar: filled part, empty part, age)."""


def _cell_segments(cell: Cell, width: int, base: Style) -> list[Segment]:
    if isinstance(cell, tuple):
        return [_cell(cell[0], width, base + cell[1])]
    out: list[Segment] = []
    left = width
    for text, style in cell:
        if left <= 0:
            break
        w = cell_len(text)
        if w > left:
            text, w = set_cell_size(text, left), left
        out.append(Segment(text, base + style))
        left -= w
    if left > 0:
        out.append(Segment(" " * left, base))
    return out


def row_cells(v: NodeView, ctx: RowContext) -> dict[str, Cell]:
    """Every column's text and style for one node. Cluster strings pass through ``safe``."""
    p = ctx.palette
    now = ctx.now
    st = p.state(v.state)
    age = v.lease_age(now)
    if age is None:
        if ctx.blind_since is not None:
            renew = (f"? since {clock_time(ctx.blind_since).rstrip('Z')}", p.warn)
        else:
            renew = ("no lease" if v.lease_observed_at is None else "?", p.muted)
    else:
        late = 2 * renew_interval(v.lease_duration)
        style = p.bad if age > v.grace else p.warn if age > late else p.good
        b = bar(age / v.grace if v.grace else 1.0, 9)
        filled = b.rstrip("░")
        renew = [(filled, style), ("─" * (len(b) - len(filled)), p.muted), (f" {duration(age):>5}", style)]
    grace = grace_text(v.state.word, v.ready, v.grace_remaining(now), v.state_since, now)
    ev_in = v.eviction_in(now)
    flags = _cond_flags(v)
    cert_level = v.cert_level(now)
    has_ne = any(t.effect == "NoExecute" for t in v.taints)
    return {
        "state": (f"{v.state.symbol} {v.state.word}", st),
        "name": (safe(v.name, 80), Style(bold=v.state is not NodeState.READY)),
        "zone": (safe(zone_short(v.zone), 40), p.muted),
        "renew": renew,
        "grace": (grace, st if v.state is not NodeState.READY else p.muted),
        "evict": (eviction_text(ev_in), p.bad if ev_in is not None and ev_in < 60 else p.warn),
        "cond": (conditions_text(v.ready, v.pressure, v.network_unavailable),
                 p.bad if flags >= 4 else p.warn if flags else p.muted),
        "taints": (taints_text(v.taints, now, 40), p.warn if has_ne else p.muted),
        "cert": (cert_text(v.cert_not_after, now), p.cert.get(cert_level, Style())),
        "kubelet": (safe(v.kubelet_version, 20), p.muted),
        "cause": (safe(v.cause, 300), Style()),
    }


def render_row(v: NodeView, ctx: RowContext, columns: list[tuple[Column, int]], width: int,
               selected: bool = False) -> Strip:
    """One table row as a Strip exactly ``width`` cells wide."""
    cells = row_cells(v, ctx)
    base = ctx.base + ctx.palette.cursor if selected else ctx.base
    segs: list[Segment] = []
    sep = Segment(SEP, base)
    for i, (col, w) in enumerate(columns):
        if i:
            segs.append(sep)
        segs.extend(_cell_segments(cells[col.key], w, base))
    strip = Strip(segs)
    return strip.adjust_cell_length(width, base)


def render_header(columns: list[tuple[Column, int]], ctx: RowContext, width: int, sort: str,
                  reverse: bool) -> Strip:
    style = ctx.base + ctx.palette.header
    segs: list[Segment] = []
    for i, (col, w) in enumerate(columns):
        if i:
            segs.append(Segment(SEP, ctx.base))
        title = col.title
        if col.key == sort:
            title += " ▲" if reverse else " ▼"
        segs.append(_cell(title, w, style + (ctx.palette.accent if col.key == sort else Style())))
    return Strip(segs).adjust_cell_length(width, ctx.base)


# --- the widget ------------------------------------------------------------------------------


class FleetTable(ScrollView, can_focus=True):
    """The node table. The app hands it rows each tick (``set_rows``); it draws what is visible."""

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
        self.rows: list[NodeView] = []
        self.ctx = RowContext(now=0.0)
        self.sort = "state"
        self.reverse = False
        self.selected_name: str | None = None
        self.empty_message = "no nodes"
        self._layout: list[tuple[Column, int]] = []
        self._layout_key: tuple[int, int] = (-1, -1)
        self._name_width = 12
        self._cache: LRUCache[tuple, tuple[NodeView, Strip]] = LRUCache(1024)

    # --- data in -------------------------------------------------------------------------------

    def set_rows(self, rows: list[NodeView], ctx: RowContext, *, sort: str = "state", reverse: bool = False) -> None:
        """New rows and a new ``now``: keep the cursor on the same node, repaint visible lines."""
        self.rows = rows
        self.ctx = RowContext(ctx.now, ctx.palette, ctx.blind_since, self.rich_style)
        self.sort, self.reverse = sort, reverse
        # The name column fits the longest name among the first rows (bounded work per tick).
        self._name_width = max((cell_len(safe(v.name, 80)) for v in rows[:2000]), default=12)
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        if self.show_cursor:
            self._follow_selected()
        self.refresh()

    def _follow_selected(self) -> None:
        rows = self.rows
        if not rows:
            self.cursor = 0
            return
        name = self.selected_name
        c = min(self.cursor, len(rows) - 1)
        if name is not None and rows[c].name != name:
            lo, hi = max(0, c - 256), min(len(rows), c + 256)
            found = next((i for i in range(lo, hi) if rows[i].name == name), None)
            if found is None:
                found = next((i for i, v in enumerate(rows) if v.name == name), None)
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
        if self.rows:
            self.selected_name = self.rows[new].name
        top = int(self.scroll_y)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + self.page:
            self.scroll_to(y=new - self.page + 1, animate=False, immediate=True)
        self.refresh()

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
            self.post_message(NodeChosen(v.name))

    def on_click(self, event: events.Click) -> None:
        if event.y < 1 or not self.show_cursor:
            return
        idx = int(self.scroll_y) + event.y - 1
        if 0 <= idx < len(self.rows):
            if idx == self.cursor and event.chain >= 2:
                self.action_choose()
            self.cursor = idx

    # --- drawing -------------------------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self.rows) + 1)
        self._cache.clear()

    def _columns(self, width: int) -> list[tuple[Column, int]]:
        key = (width, self._name_width)
        if key != self._layout_key:
            self._layout = layout_columns(width, self.column_keys, self._name_width)
            self._layout_key = key
        return self._layout

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        ctx = self.ctx
        cols = self._columns(width)
        if y == 0:
            return render_header(cols, ctx, width, self.sort, self.reverse)
        idx = int(self.scroll_y) + y - 1
        if idx >= len(self.rows):
            if idx == 0:
                return Strip([Segment(f" {self.empty_message}", ctx.base + ctx.palette.muted)]).adjust_cell_length(width, ctx.base)
            return Strip.blank(width, ctx.base)
        if not self.show_cursor and y == self.size.height - 1 and len(self.rows) > idx + 1:
            more = len(self.rows) - idx
            return Strip([Segment(f" … and {more} more", ctx.base + ctx.palette.warn)]).adjust_cell_length(width, ctx.base)
        v = self.rows[idx]
        selected = self.show_cursor and idx == self.cursor
        key = (v.name, id(v), int(ctx.now), selected, self._layout_key, id(ctx.palette), ctx.blind_since)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is v:
            return hit[1]
        strip = render_row(v, ctx, cols, width, selected)
        self._cache.set(key, (v, strip))
        return strip
