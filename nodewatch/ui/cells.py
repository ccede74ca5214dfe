"""One table row drawn: its cells (text and style), what changed between two drawings, and Strips.

A cell is a flat tuple ``(text, style, text, style...)`` (:data:`CellKey`): hashable, so the widget
caches the segments of each cell it drew, and comparable, so a tick repaints only the cells, or the
characters of a cell, that differ. Cluster strings pass through ``safe`` here, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ..core.causes import CauseKind
from ..core.format import (
    bar,
    cert_text,
    clock_time,
    conditions_compact,
    conditions_text,
    eviction_text,
    grace_text,
    taints_compact,
    taints_text,
    zone_short,
)
from ..core.rules import NodeState, renew_interval
from ..core.text import duration, middle_cut, safe
from ..core.views import NodeView
from .partial_update import single_width
from .rows import SEP, ZONE_WIDTH, Column, cond_flags
from .theme import DEFAULT_PALETTE, Palette


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


def cell_and_separator(cell: CellKey, width: int, base: Style, sep: bool) -> list[Segment]:
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


CORDON_MARK = "⊘"
"""After the state word of a cordoned node (``spec.unschedulable``), in the state column's last cell
of every row: its liveness state stays what it is, the mark says no new pod goes there (``C`` in
ASCII mode)."""
STATE_WIDTH = 10
"""The state column's width (``rows.COLUMNS``): ``✗ NotReady`` and ``» Evicting`` fill it."""


def state_cell(v: NodeView, p: Palette) -> CellKey:
    """The state's symbol and word; a cordoned node's mark in the column's last cell (the two
    longest states give up the space after their symbol for it: ``✗NotReady⊘``). The column keeps
    its width, so no other column loses a cell at 80 columns."""
    text = f"{v.state.symbol} {v.state.word}"
    if not v.cordoned:
        return (text, p.state(v.state))
    if len(text) >= STATE_WIDTH:
        text = f"{v.state.symbol}{v.state.word}"
    return (text.ljust(STATE_WIDTH - 1), p.state(v.state), CORDON_MARK, p.warn)


def static_cells(v: NodeView, p: Palette) -> dict[str, CellKey]:
    """The columns that do not move with the clock. Cluster strings pass through ``safe``."""
    flags = cond_flags(v)
    cond_style = p.bad if flags >= 4 else p.warn if flags else p.muted
    return {
        "state": state_cell(v, p),
        "cluster": (safe(v.cluster, 60), Style()),
        "name": (safe(v.name, 80), Style(bold=v.state is not NodeState.READY)),
        "zone": (middle_cut(safe(zone_short(v.zone), 80), ZONE_WIDTH), p.muted),  # (a label value: <= 63)
        "cond": (conditions_text(v.ready, v.pressure, v.network_unavailable), cond_style),
        "cond.c": (conditions_compact(v.ready, v.pressure, v.network_unavailable), cond_style),
        "kubelet": (safe(v.kubelet_version, 20), p.muted),
        "cause": (safe(v.cause, 300), Style()),
    }


def time_cells(v: NodeView, ctx: RowContext) -> dict[str, CellKey]:
    """The columns that move with ``ctx.now``, in their full and compact (``.c``) forms."""
    p = ctx.palette
    now = ctx.now
    age = v.lease_age(now)
    renew: CellKey
    renew_c: CellKey
    if age is None:
        if ctx.blind_since is not None:
            renew = (f"? since {clock_time(ctx.blind_since).rstrip('Z')}", p.warn)
            renew_c = ("     ?", p.warn)
        else:
            # No age is not no lease: a listed lease waits for a renewal to date it (core/evidence.py),
            # which on a server before v1.25 is every node for up to 10 s after a start. Only the
            # rules' "no Lease" cause (a node not Ready) says there is none.
            missing = any(c.kind is CauseKind.NO_LEASE for c in v.causes)
            renew = ("no lease" if missing else "?", p.muted)
            renew_c = (" none" if missing else "     ?", p.muted)
    else:
        late = 2 * renew_interval(v.lease_duration)
        style = p.bad if age > v.grace else p.warn if age > late else p.good
        b = bar(age / v.grace if v.grace else 1.0, 9)
        filled = b.rstrip("░")
        renew = (filled, style, "─" * (len(b) - len(filled)), p.muted, f" {duration(age):>5}", style)
        renew_c = (f"{duration(age):>6}", style)
    remaining = v.grace_remaining(now)
    grace_style = p.state(v.state) if v.state is not NodeState.READY else p.muted
    ev_in = v.eviction_in(now)
    ev_style = p.bad if ev_in is not None and ev_in < 60 else p.warn
    has_ne = any(t.effect == "NoExecute" for t in v.taints)
    taint_style = p.warn if has_ne else p.muted
    return {
        "renew": renew,
        "renew.c": renew_c,
        "grace": (grace_text(v.state.word, v.ready, remaining, v.state_since, now), grace_style),
        "grace.c": (grace_text(v.state.word, v.ready, remaining, v.state_since, now, compact=True), grace_style),
        "evict": (eviction_text(ev_in), ev_style),
        "evict.c": (eviction_text(ev_in, compact=True), ev_style),
        "taints": (taints_text(v.taints, now, 40), taint_style),
        "taints.c": (taints_compact(v.taints, now, 16), taint_style),
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
        segs.extend(cell_and_separator(cells[col.cell], w, base, i < last))
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
