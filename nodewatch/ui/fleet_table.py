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
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..core.fleet import FleetState, FleetView, NodeView
from ..core.rules import NodeState, renew_interval
from . import partial_update
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
from .partial_update import single_width
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
NAME_SCAN_TICKS = 16
"""How often (in ticks) the name column's width is fitted to the first 2,000 rows again."""
SEP = " "


def layout_columns(width: int, keys: tuple[str, ...] = COLUMN_KEYS, name_width: int = NAME_MAX
                   ) -> list[tuple[Column, int]]:
    """The columns that fit ``width`` cells, with their widths, in display order.

    ``name_width`` is the longest name shown (capped): the name column takes no more, and the
    likely cause gets the rest.
    """
    cols = [c for c in COLUMNS if c.key in keys]
    chosen = list(cols)
    name_min = next(c.width for c in COLUMNS if c.key == "name")
    name_want = max(name_min, min(name_width, NAME_MAX))

    def need(cs: list[Column], name_w: int) -> int:
        return sum(name_w if c.key == "name" else c.width for c in cs) + len(SEP) * (len(cs) - 1)

    # The node's name is what the operator reads first: whole names cost optional columns before
    # they cost letters of the name (a cut "general-apse" is the same for a thousand nodes).
    for c in sorted(cols, key=lambda c: -c.drop):
        if need(chosen, name_want) <= width or c.drop == 0:
            continue
        chosen.remove(c)
    name_w = max(name_min, min(name_want, width - need(chosen, 0)))
    spare = max(0, width - need(chosen, name_w))
    out: list[tuple[Column, int]] = []
    has_cause = any(c.key == "cause" for c in chosen)
    for c in chosen:
        w = c.width
        if c.key == "name":
            w = name_w + (0 if has_cause else spare)
        elif c.key == "cause":
            w += spare
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

CellKey = tuple
"""A cell as one flat tuple ``(text, style, text, style...)``: one styled text (two items) or a few
parts. Hashable and one object, so a tick that rebuilds the time columns allocates little."""

STATIC_KEYS = ("state", "name", "zone", "cond", "kubelet", "cause")
"""Columns that depend only on the node's view fields (state, zone, conditions, version, causes), not
on ``now``. The core updates views in place, so the widget caches them by those fields' values."""
TIME_KEYS = ("renew", "grace", "evict", "taints", "cert")
"""Columns that move with the clock: ages, countdowns, the taint's age, the certificate's days."""


def _cell_segments(cell: CellKey, width: int, base: Style) -> list[Segment]:
    if len(cell) == 2:
        return [_cell(cell[0], width, base + cell[1])]
    out: list[Segment] = []
    left = width
    for k in range(0, len(cell), 2):
        text, style = cell[k], cell[k + 1]
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


_VISIBLE_ON_BLANK = ("reverse", "underline", "underline2", "overline", "strike", "blink", "blink2", "conceal",
                     "frame", "encircle", "link")
_blank_cache: dict[tuple[Style, Style], bool] = {}


def _blank_like_base(style: Style | None, base: Style) -> bool:
    """A space drawn in ``style`` looks exactly like one drawn in ``base`` (same background, no
    attribute that shows on a blank): the separator may then join the cell's own segment."""
    if style is None:
        return False
    key = (style, base)
    hit = _blank_cache.get(key)
    if hit is None:
        if len(_blank_cache) > 1024:
            _blank_cache.clear()
        hit = style.bgcolor == base.bgcolor and not any(getattr(style, a) for a in _VISIBLE_ON_BLANK)
        _blank_cache[key] = hit
    return hit


def _cell_and_separator(cell: CellKey, width: int, base: Style, sep: bool) -> list[Segment]:
    """A cell's segments, followed by the column separator when ``sep``: joined to the cell's last
    segment when that looks the same (one escape sequence less per column on the terminal)."""
    segs = _cell_segments(cell, width, base)
    if sep:
        last = segs[-1]
        if _blank_like_base(last.style, base):
            segs[-1] = Segment(last.text + SEP, last.style)
        else:
            segs.append(Segment(SEP, base))
    return segs


def _padded_text(cell: CellKey, width: int) -> str | None:
    """The cell's text as drawn in ``width`` cells, or None unless every character is one cell wide."""
    text = cell[0] if len(cell) == 2 else "".join(cell[0::2])
    if not single_width(text) or len(text) > width:
        return None
    return text.ljust(width)


def _same_shape(old: CellKey, new: CellKey) -> bool:
    """Same styles and part lengths: the two drawings can be compared character by character.
    (No tuple is built: this runs for every changed cell of every tick.)"""
    n = len(old)
    if n != len(new):
        return False
    if n == 2:
        return old[1] == new[1]
    for k in range(0, n, 2):
        if len(old[k]) != len(new[k]) or old[k + 1] != new[k + 1]:
            return False
    return True


def changed_cells(old: CellKey, new: CellKey, width: int) -> tuple[int, int]:
    """The cells ``[start, end)`` of a ``width``-cell column that differ between two drawings of it.

    The whole column unless both texts are plain one-cell characters with the same styling, in
    which case only from the first to the last character that differs (a countdown moving one
    second is usually one character)."""
    if not _same_shape(old, new):
        return 0, width
    a, b = _padded_text(old, width), _padded_text(new, width)
    if a is None or b is None:
        return 0, width
    n, i = width, 0
    while i < n and a[i] == b[i]:
        i += 1
    if i == n:
        return 0, width  # same text, different style
    j = n
    while j > i and a[j - 1] == b[j - 1]:
        j -= 1
    return i, j


def static_cells(v: NodeView, p: Palette) -> dict[str, CellKey]:
    """The columns that do not move with the clock. Cluster strings pass through ``safe``."""
    flags = _cond_flags(v)
    return {
        "state": (f"{v.state.symbol} {v.state.word}", p.state(v.state)),
        "name": (safe(v.name, 80), Style(bold=v.state is not NodeState.READY)),
        "zone": (safe(zone_short(v.zone), 40), p.muted),
        "cond": (conditions_text(v.ready, v.pressure, v.network_unavailable),
                 p.bad if flags >= 4 else p.warn if flags else p.muted),
        "kubelet": (safe(v.kubelet_version, 20), p.muted),
        "cause": (safe(v.cause, 300), Style()),
    }


def time_cells(v: NodeView, ctx: RowContext) -> dict[str, CellKey]:
    """The columns that move with ``ctx.now``."""
    p = ctx.palette
    now = ctx.now
    age = v.lease_age(now)
    renew: CellKey
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
        renew = (filled, style, "─" * (len(b) - len(filled)), p.muted, f" {duration(age):>5}", style)
    grace = grace_text(v.state.word, v.ready, v.grace_remaining(now), v.state_since, now)
    ev_in = v.eviction_in(now)
    has_ne = any(t.effect == "NoExecute" for t in v.taints)
    return {
        "renew": renew,
        "grace": (grace, p.state(v.state) if v.state is not NodeState.READY else p.muted),
        "evict": (eviction_text(ev_in), p.bad if ev_in is not None and ev_in < 60 else p.warn),
        "taints": (taints_text(v.taints, now, 40), p.warn if has_ne else p.muted),
        "cert": (cert_text(v.cert_not_after, now), p.cert.get(v.cert_level(now), Style())),
    }


def row_cells(v: NodeView, ctx: RowContext) -> dict[str, Cell]:
    """Every column's text and style for one node. Cluster strings pass through ``safe``."""
    cells: dict[str, Cell] = {}
    for k, c in {**static_cells(v, ctx.palette), **time_cells(v, ctx)}.items():
        cells[k] = (c[0], c[1]) if len(c) == 2 else [(c[i], c[i + 1]) for i in range(0, len(c), 2)]
    return cells


def render_row(v: NodeView, ctx: RowContext, columns: list[tuple[Column, int]], width: int,
               selected: bool = False) -> Strip:
    """One table row as a Strip exactly ``width`` cells wide."""
    cells = {**static_cells(v, ctx.palette), **time_cells(v, ctx)}
    base = ctx.base + ctx.palette.cursor if selected else ctx.base
    segs: list[Segment] = []
    last = len(columns) - 1
    for i, (col, w) in enumerate(columns):
        segs.extend(_cell_and_separator(cells[col.key], w, base, i < last))
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
        self.rows: list[NodeView] = []
        self.ctx = RowContext(now=0.0)
        self.sort = "state"
        self.reverse = False
        self.selected_name: str | None = None
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
        """Per node name: the view fields and palette the static cells were made from, and the cells."""
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
        self._retired: list[NodeView] | None = None
        """The previous row list, released after the next paint."""
        partial_update.install()  # so that the cells refreshed alone are written alone

    # --- data in -------------------------------------------------------------------------------

    def set_rows(self, rows: list[NodeView], ctx: RowContext, *, sort: str = "state", reverse: bool = False) -> None:
        """New rows and a new ``now``: keep the cursor on the same node, repaint the cells that changed."""
        if self._retired is None and self.rows is not rows:
            # Dropping the last reference to a 65,000-row list costs ~0.5 ms of reference counting:
            # let it happen after the paint, not before it.
            self._retired = self.rows
            self.call_after_refresh(self._release_retired)
        self.rows = rows
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

    def _release_retired(self) -> None:
        self._retired = None

    def _fit_names(self, rows: list[NodeView]) -> int:
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

    def _longest_name(self, rows: list[NodeView]) -> int:
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
            self.post_message(NodeChosen(v.name))

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
            self._layout = layout_columns(width, self.column_keys, self._name_width)
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
        # The core updates views in place, so the cache is keyed by what the static cells show.
        shown = (v.state, v.zone, v.ready, v.pressure, v.network_unavailable, v.kubelet_version, v.causes)
        static = self._static.get(v.name)
        if static is None or static[1] is not ctx.palette or static[0] != shown:
            if len(self._static) > 4096:
                self._static.clear()
            static = (shown, ctx.palette, static_cells(v, ctx.palette))
            self._static[v.name] = static
        cells = {**static[2], **time_cells(v, ctx)}
        return _Line(layout, base, tuple(cells[c.key] for c, _ in cols))

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
                cs = cache[cell] = _cell_and_separator(cell, w, base, i < last)
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
