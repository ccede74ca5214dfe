"""A node's heartbeat history: the intervals between its last lease renewals, as bars.

The kubelet renews its Lease every ``leaseDuration / 4`` (10 s by default); the node lifecycle
controller marks the node Unknown once no renewal is seen for the grace period (docs/kubernetes-rules.md).
Drawn against those two lines, a slow node (bars creeping up), a flapping one (tall bars among short
ones) or one that stopped (the last, open bar "now" reaching the grace) is plain to see before it
goes NotReady. The skew (receive time minus renewTime) is said beside it: a node whose clock is off
renews "on time" by its own clock.

Bars are scaled so that the chart's top is the grace; a longer interval is drawn full and marked ▲.
"""

from __future__ import annotations

import math
import statistics

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.text import Text

from ..core.rules import renew_interval
from ..core.text import duration
from .theme import Palette

HEIGHT = 4
"""Rows of bars: 32 levels from nothing to the grace."""
BLOCKS = " ▁▂▃▄▅▆▇█"
AXIS = 12
"""Cells of the left axis (``grace 50s ┤``)."""


def intervals(beats: list[float]) -> list[float | None]:
    """Seconds between consecutive observed renewals, oldest first; None where a gap (NaN: renewals
    not seen, a relist) lies between two of them."""
    out: list[float | None] = []
    prev: float | None = None
    for t in beats:
        if math.isnan(t):
            if prev is not None:
                out.append(None)
            prev = None
            continue
        if prev is not None:
            out.append(max(0.0, t - prev))
        prev = t
    return out


def _level(value: float, grace: float) -> int:
    """How many eighths of the chart's ``HEIGHT`` rows ``value`` fills (0 .. HEIGHT*8)."""
    if grace <= 0:
        return HEIGHT * 8
    return max(0, min(HEIGHT * 8, round(value / grace * HEIGHT * 8)))


def _row_of(value: float, grace: float) -> int:
    """The row (0 = bottom) whose band holds ``value``."""
    return min(HEIGHT - 1, max(0, int(value / grace * HEIGHT))) if grace > 0 else 0


class HeartbeatChart:
    """The bars (one per interval, and an open one for the time since the last renewal), an axis
    with the renew interval, the late threshold and the grace, and a line of figures."""

    def __init__(self, beats: list[float], *, now: float, grace: float, lease_duration: float,
                 skew: float | None, palette: Palette, last_seen: float | None = None) -> None:
        self.values = intervals(beats)
        last = next((t for t in reversed(beats) if not math.isnan(t)), None)
        if last_seen is not None and (last is None or last_seen > last):
            last = last_seen
        self.open = None if last is None else max(0.0, now - last)
        """Seconds since the last renewal seen: the interval still running."""
        self.grace = grace
        self.renew = renew_interval(lease_duration)
        self.late = 2 * self.renew
        self.skew = skew
        self.p = palette

    def _style(self, v: float) -> Style:
        return self.p.bad if v > self.grace else self.p.warn if v > self.late else self.p.good

    def bars(self, cells: int) -> list[tuple[float | None, bool]]:
        """The bars that fit ``cells`` columns, newest last: (value, is the open one)."""
        bars: list[tuple[float | None, bool]] = [(v, False) for v in self.values]
        if self.open is not None:
            bars.append((self.open, True))
        return bars[-max(1, cells):]

    def lines(self, width: int) -> list[Text]:
        p = self.p
        cells = max(1, width - AXIS - 1)
        bar_w = 2 if cells >= 2 * 33 else 1
        bars = self.bars(cells // bar_w)
        blank = cells // bar_w - len(bars)  # bars right-aligned, newest at the edge; reference lines run across
        labels: dict[int, str] = {}
        for value, word in ((self.renew, "renew"), (self.late, "late"), (self.grace, "grace")):
            row = HEIGHT - 1 if word == "grace" else _row_of(value, self.grace)
            labels[row] = f"{word} {duration(value)}" if row not in labels else labels[row]
        ref_rows = {_row_of(self.renew, self.grace), _row_of(self.late, self.grace), HEIGHT - 1}
        out: list[Text] = []
        for row in range(HEIGHT - 1, -1, -1):
            t = Text(no_wrap=True)
            t.append(f"{labels.get(row, ''):>{AXIS - 2}} ┤", p.muted)
            if blank > 0:
                t.append(("·" if row in ref_rows else " ") * blank * bar_w, p.muted)
            for bar, is_open in bars:
                if bar is None:
                    t.append("╳" * bar_w if row == 0 else " " * bar_w, p.muted)
                    continue
                fill = _level(bar, self.grace) - row * 8
                if fill >= 8:
                    ch = "▲" if row == HEIGHT - 1 and bar > self.grace else "█"
                elif fill > 0:
                    ch = BLOCKS[fill]
                else:
                    t.append(("·" if row in ref_rows else " ") * bar_w, p.muted)
                    continue
                style = self._style(bar) + (Style(dim=True, italic=True) if is_open else Style())
                t.append(ch * bar_w, style)
            out.append(t)
        out.append(self.figures())
        return out

    def figures(self) -> Text:
        p = self.p
        t = Text(no_wrap=False)
        known = [v for v in self.values if v is not None]
        if known:
            t.append(f"{len(known)} intervals: min {duration(min(known))} · median "
                     f"{duration(statistics.median(known))} · max {duration(max(known))}", p.muted)
            late = sum(1 for v in known if v > self.late)
            if late:
                t.append(f" · {late} late", p.warn)
        else:
            t.append("no renewal interval observed yet (renewals seen while listing have no receive time)", p.muted)
        if self.open is not None:
            t.append(" · now ")
            t.append(f"{duration(self.open)} since the last", self._style(self.open))
        if self.skew is not None:
            skewed = abs(self.skew) > self.renew
            t.append(" · skew ")
            t.append(f"{self.skew:+.1f}s" + (" (clock or delay off)" if skewed else ""),
                     p.warn if skewed else p.muted)
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(AXIS + 2, options.max_width)
