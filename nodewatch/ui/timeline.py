"""The fleet timeline: how many nodes were not Ready, in which state, over the recording (or over
the time a live dashboard has seen), with marks at zone state changes, NoExecute taints and
evictions, so the shape of an incident is visible at a glance.

Three rows of stacked columns (worst state at the bottom, scaled to the peak) and one row of marks,
on the same horizontal scale as the replay scrubber below it. Each state has a shade as well as a
colour (``█`` evicted, ``▓`` evicting, ``▒`` down, ``░`` late) and each mark a letter (``Z``, ``T``,
``E``), so the strip reads with ``NO_COLOR`` too. The history itself is the core's
(``core/history.py``): this module only draws it.
"""

from __future__ import annotations

import bisect
import math

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from ..core.format import clock_time
from ..core.history import BackgroundHistory, HistoryRecorder, Mark, MarkKind, Sample
from ..core.rules import NodeState
from ..core.source import Source
from .replay_bar import track_geometry
from .theme import DEFAULT_PALETTE, Palette

ROWS = 3
"""Rows of the stacked chart (each eight units high); a fourth row holds the marks."""
SHADES = {
    NodeState.EVICTED: "█",
    NodeState.EVICTING: "▓",
    NodeState.UNKNOWN: "▒",
    NodeState.NOT_READY: "▒",
    NodeState.OVERDUE: "░",
    NodeState.LATE: "░",
}
LEGEND = ("█ evicted", "▓ evicting", "▒ down", "░ late")
MARK_PRIORITY = (MarkKind.ZONE, MarkKind.EVICTION, MarkKind.TAINT)
"""One letter per column: the most telling mark wins."""
NOT_READY_STATES: tuple[NodeState, ...] = tuple(s for s in sorted(NodeState, key=lambda s: s.rank)
                                                if s is not NodeState.READY)


def history_for(source: Source) -> tuple[HistoryRecorder, BackgroundHistory | None]:
    """The history the timeline draws: a recording's, sampled in the background over its events
    (the replay's index), or an empty one that the dashboard's ticks fill (live, demo)."""
    events = getattr(source.replay, "index", None) if source.replay is not None else None
    if events is not None and hasattr(events, "apply_range") and hasattr(events, "times"):
        empty = getattr(source.replay, "empty_state", None)  # its clusters, with their settings
        bg = BackgroundHistory(events, None, empty()) if empty else BackgroundHistory(events, source.state.settings)
        return bg.recorder, bg
    rec = HistoryRecorder()
    if source.replay is not None:
        rec.finish()  # controls without a recording's events behind them: no history to show
    return rec, None


LIVE_MIN_SPAN = 300.0
"""A live strip spans at least five minutes (filling from the right), so a minute's data does not
stretch across the whole width."""


def live_span(history: HistoryRecorder, now: float) -> tuple[float, float]:
    """[start, end] of a live strip: the time seen, at least ``LIVE_MIN_SPAN``, ending now."""
    first = history.start
    return min(first if first is not None else now, now - LIVE_MIN_SPAN), now


COLUMN_SECONDS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30, 40, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200,
                  1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600, 28800, 43200, 86400)
"""What one column of a live strip may span: few values (each at most a third over the one before,
so the strip shows at most a third more than asked), so a column's span rarely changes."""


LIVE_MIN_COLUMN = 5.0
"""A live strip's column spans at least this many seconds: the strip moves by a whole column each
time one has passed, and a move draws all of it again (at 1.8 s a column, 200 columns wide, that
was 12 KB/s of the 25 KB/s the dashboard wrote at 65k nodes; at 5 s, a fifth of it). The strip then
shows more than ``LIVE_MIN_SPAN`` on a wide terminal: more context, not less."""


def live_columns(start: float, end: float, columns: int) -> tuple[float, float]:
    """A live strip's [start, end] on fixed column boundaries: each column a whole number of seconds
    from ``COLUMN_SECONDS`` (the first that fits [start, end] in ``columns``), the strip ending at
    the boundary after ``end``.

    Why: with the strip ending exactly now, every column's times moved a little at every tick and
    most of the strip was drawn again each second (20 KB/s of the terminal's 33 KB/s at 65k nodes,
    measured in bench/terminal.py). On fixed boundaries only the last column fills between ticks,
    and the strip moves one whole column at a time."""
    need = max((end - start) / max(columns, 1), LIVE_MIN_COLUMN)
    width = next((c for c in COLUMN_SECONDS if c >= need), math.ceil(need))
    last = math.ceil(end / width) * width
    return last - columns * width, last


def column_samples(samples: list[Sample], start: float, end: float, columns: int) -> list[Sample | None]:
    """For each of ``columns`` equal spans of [start, end]: the worst sample in it, or the last one
    before it (the fleet stayed so), or None (no sample yet, or none after the history's end)."""
    out: list[Sample | None] = []
    if not samples or columns <= 0:
        return [None] * max(0, columns)
    times = [s.at for s in samples]
    span = max(end - start, 1e-9)
    last_at = samples[-1].at
    for c in range(columns):
        t0 = start + c * span / columns
        t1 = start + (c + 1) * span / columns
        i = bisect.bisect_left(times, t0)
        j = bisect.bisect_left(times, t1) if c < columns - 1 else bisect.bisect_right(times, t1)
        if j > i:
            out.append(max(samples[i:j], key=lambda s: (s.down, s.not_ready)))
        elif i > 0 and t0 <= last_at:
            out.append(samples[i - 1])
        else:
            out.append(None)
    return out


def column_cells(sample: Sample | None, peak: int, rows: int = ROWS) -> list[NodeState | None]:
    """The states of one column's cells, bottom first: the not-Ready nodes stacked worst first,
    scaled so ``peak`` fills the column; a cell shows the state that covers most of it, when
    at least half of it is covered. A column with any node not Ready shows at least one cell."""
    cells: list[NodeState | None] = [None] * rows
    if sample is None or sample.not_ready == 0 or peak <= 0:
        return cells
    units = rows * 8
    bounds: list[tuple[int, int, NodeState]] = []
    cum = 0
    for s in NOT_READY_STATES:
        n = sample.count(s)
        if n:
            lo = round(cum / peak * units)
            cum += n
            bounds.append((lo, round(cum / peak * units), s))
    for r in range(rows):
        a, b = r * 8, r * 8 + 8
        best, cover, total = None, 0, 0
        for lo, hi, s in bounds:
            c = max(0, min(b, hi) - max(a, lo))
            total += c
            if c > cover:
                best, cover = s, c
        if total >= 4:
            cells[r] = best
    if not any(cells):
        cells[0] = bounds[0][2]
    return cells


def column_marks(marks: list[Mark], start: float, end: float, columns: int) -> list[Mark | None]:
    """The most telling mark in each column's span, or None."""
    out: list[Mark | None] = [None] * max(0, columns)
    span = max(end - start, 1e-9)
    for m in marks:
        if not start <= m.at <= end:
            continue
        c = min(columns - 1, int((m.at - start) / span * columns))
        cur = out[c]
        if cur is None or MARK_PRIORITY.index(m.kind) < MARK_PRIORITY.index(cur.kind):
            out[c] = m
    return out


def _flat(style: Style) -> Style:
    """The state's colour without reverse video: a shade glyph carries it in the foreground."""
    return style + Style(reverse=False)


def timeline_text(history: HistoryRecorder, start: float, end: float, width: int,
                  palette: Palette = DEFAULT_PALETTE, *, live: bool = False) -> Text:
    """Four lines: three of stacked columns over [start, end] and one of marks, aligned with the
    replay scrubber's track (``track_geometry``)."""
    left, inner = track_geometry(width)
    right = max(0, width - left - inner)
    if live:
        start, end = live_columns(start, end, inner)
    samples = history.samples_between(start, end)
    peak_sample = max(samples, key=lambda s: s.not_ready, default=None)
    peak = peak_sample.not_ready if peak_sample else 0
    cols = column_samples(samples, start, end, inner)
    cells = [column_cells(s, peak) for s in cols]
    marks = column_marks(history.all_marks(), start, end, inner)
    if samples:
        left_labels = [" not Ready", f" peak {peak}", "", " " + clock_time(start) if live else " marks"]
    else:
        left_labels = [" not Ready", "", "", " marks"]
        if not history.complete:
            left_labels[1] = " sampling…"
    right_labels = list(LEGEND)
    t = Text(no_wrap=True, overflow="crop")
    for row in range(ROWS):
        r = ROWS - 1 - row  # top line first; cells are bottom first
        t.append(left_labels[row][:left].ljust(left), palette.muted)
        for c in range(inner):
            st = cells[c][r]
            if st is None:
                t.append("·" if r == 0 and cols[c] is not None else " ", palette.muted)
            else:
                t.append(SHADES[st], _flat(palette.state(st)))
        t.append((" " + right_labels[row])[:right].ljust(right), palette.muted)
        t.append("\n")
    t.append(left_labels[3][:left].ljust(left), palette.muted)
    for m in marks:
        if m is None:
            t.append(" ")
        else:
            t.append(m.kind.letter, palette.warn if m.kind is MarkKind.ZONE else palette.bad)
    t.append((" " + right_labels[3])[:right].ljust(right), palette.muted)
    return t


class FleetTimeline(Widget):
    """The stacked strip; the app sets ``start``/``end`` (the recording's, or [first sample, now])."""

    DEFAULT_CSS = """
    FleetTimeline { height: 4; background: $panel; }
    """

    def __init__(self, history: HistoryRecorder, *, live: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history = history
        self.live = live
        self.palette: Palette = DEFAULT_PALETTE
        self.start = 0.0
        self.end = 0.0
        self._shown: Text | None = None
        self._next: tuple[int, Text] | None = None

    def show(self, start: float, end: float) -> None:
        """Draw [start, end], if that changes what is on screen. Why not a refresh every tick:
        Textual sends a refreshed widget's lines whole, and four lines of colored cells each second
        were most of what the dashboard wrote to the terminal (bench/terminal.py)."""
        self.start, self.end = start, end
        text = self._text()
        if text != self._shown:
            self._next = (self.size.width, text)  # what render draws, unless the size changes first
            self.refresh()

    def _text(self) -> Text:
        return timeline_text(self.history, self.start, self.end, self.size.width, self.palette, live=self.live)

    def render(self) -> Text:
        width, text = self._next if self._next is not None else (None, None)
        self._next = None
        shown = text if text is not None and width == self.size.width else self._text()  # a resize or a theme change
        self._shown = shown
        return shown
