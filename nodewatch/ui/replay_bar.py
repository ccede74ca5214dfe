"""Replay controls: where in the recording we are, how fast we go, and the keys to move.

Shown only when the source has ``replay`` controls; the dashboard does not otherwise know it is
replaying. The app owns the key bindings (so they work on every screen); this widget only draws.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from ..core.format import clock_time
from ..core.history import Mark
from ..core.source import ReplayControls
from ..core.text import duration, safe
from .theme import DEFAULT_PALETTE, Palette

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


READING_ON = " read so far (reading on)"
"""Said of what a replay has looked at while its recording is still being read (``complete``)."""


def next_speed(speed: float, up: bool) -> float:
    """The next speed in :data:`SPEEDS` above (or below) ``speed``."""
    if up:
        return next((s for s in SPEEDS if s > speed + 1e-9), SPEEDS[-1])
    return next((s for s in reversed(SPEEDS) if s < speed - 1e-9), SPEEDS[0])


TRACK_LABEL = 9
"""Width of a ``clock_time`` label (``HH:MM:SSZ``) at each end of the track."""


def track_geometry(width: int) -> tuple[int, int]:
    """Where the scrubber's track is in a line of ``width``: (its first column, its length). The
    fleet timeline above uses the same, so a column of the strip is the same time as the track's."""
    left = 1 + TRACK_LABEL + 1
    return left, max(4, width - left - TRACK_LABEL - 3)


def replay_text(r: ReplayControls, width: int, palette: Palette = DEFAULT_PALETTE,
                next_change: float | None = None, next_mark: Mark | None = None) -> Text:
    """Two lines: status and position; then the timeline bar of the position in [start, end]."""
    pos = r.position()
    start, end = r.start, r.end
    span = max(end - start, 1e-9)
    t = Text(no_wrap=True, overflow="crop")
    t.append(" ▶ playing " if r.playing else " ■ paused ", palette.accent)
    t.append(f"×{r.speed:g} ", "bold")
    t.append("│ ", palette.muted)
    t.append(clock_time(pos, date=True), "bold")
    t.append(f"  {duration(pos - start)} of {duration(end - start)}", palette.muted)
    if not r.complete:  # the end so far is not the recording's: say so, or it reads as a short one
        t.append(READING_ON, palette.warn)
    if next_change is not None:
        t.append(f"  │ next state change in {duration(next_change - pos)}", palette.warn)
    if next_mark is not None:
        t.append(f"  │ next mark {next_mark.kind.letter} in {duration(next_mark.at - pos)}: "
                 f"{mark_text(next_mark, 60)}", palette.muted)
    t.truncate(width, overflow="ellipsis")  # one line: the track stays on the second
    t.append("\n ")
    label_l, label_r = clock_time(start), clock_time(end)
    _, inner = track_geometry(width)
    frac = min(max((pos - start) / span, 0.0), 1.0)
    at = min(inner - 1, int(frac * inner))
    t.append(label_l + " ", palette.muted)
    t.append("━" * at, palette.accent)
    t.append("●", "bold")
    t.append("─" * (inner - at - 1), palette.muted)
    t.append(" " + label_r, palette.muted)
    return t


def mark_text(m: Mark, max_len: int = 80) -> str:
    """``zone eu-west-1a: Normal -> PartialDisruption``: one line, cluster strings made inert."""
    return safe(f"{m.kind.meaning}: {m.subject} {m.text}", max_len)


class NextChange:
    """``ReplayControls.next_change`` remembered: it plays the recording ahead on a copy of the
    state, far too dear for every tick. A recording's future is fixed, so the answer ``t`` found
    at position ``p`` holds for every position in ``[p, t)`` (no state changes in between); it
    is asked again only when the position leaves that span (it passed ``t``, or a seek went back)."""

    def __init__(self) -> None:
        self._asked_at: float | None = None
        self._answer: float | None = None

    def at(self, replay: ReplayControls) -> float | None:
        """The virtual time of the next state change after the replay's position, or None."""
        pos = replay.position()
        asked = self._asked_at
        if asked is None or pos < asked or (self._answer is not None and pos >= self._answer):
            self._answer = replay.next_change()
            self._asked_at = pos
        return self._answer


class ReplayBar(Widget):
    """Two lines above the footer."""

    DEFAULT_CSS = """
    ReplayBar { height: 2; background: $panel; }
    """

    def __init__(self, replay: ReplayControls, **kwargs) -> None:
        super().__init__(**kwargs)
        self.replay = replay
        self.palette: Palette = DEFAULT_PALETTE
        self.next_change: float | None = None
        self.next_mark: Mark | None = None

    def render(self) -> Text:
        return replay_text(self.replay, self.size.width, self.palette, self.next_change, self.next_mark)
