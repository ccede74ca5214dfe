"""A one-line progress report on stderr while a command reads a long recording.

Why: ``status --replay DIR --at T`` late in a 65,000-node flight-recorder segment reads for ~20 s,
and ``report`` of that one segment for almost four minutes; without a word, an SRE at the prompt
cannot tell a slow read from a hung one. The readers report how far in recorded time they have got
(``replay.state_at``'s, ``EventIndex``'s and ``history.sample_recording``'s ``progress``, and
``recording export``'s lines); this draws it, only on a terminal (a script's stderr gets nothing),
only once the read has taken ``delay`` seconds (a quick answer flickers nothing), at most every
``interval`` seconds, and erases it before the answer. Plain text: no colour, no escape but the
carriage return.
"""

from __future__ import annotations

import io
import math
import os
import sys
import threading
import time
from typing import Callable, TextIO

from ..core.text import safe
from ..core.timeutil import format_time


def _columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (80 when it cannot be told)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 80


class ReadProgress:
    """``progress(read_to, target)`` for ``state_at``: ``read_to`` the latest event time read,
    ``target`` the instant asked for (inf: to the end); ``read_to`` inf: the reading is done and
    what was read is being applied. ``done()`` erases the line."""

    def __init__(self, label: str, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 delay: float = 1.0, interval: float = 0.25, verb: str = "reading", columns: int | None = None) -> None:
        """``verb``: what is being done (``reading``, ``indexing``, ``judging``); ``columns``: the
        terminal's width (default: the stream's own), the line cut to fit it (a wrapped line would
        not be overwritten by the next)."""
        self._stream = stream if stream is not None else sys.stderr
        self._verb = verb
        self._columns = columns if columns is not None else _columns(self._stream)
        self._on = bool(getattr(self._stream, "isatty", lambda: False)())
        self._label = safe(label, 120)
        self._clock = clock
        self._started = clock()
        self._delay = delay
        self._interval = interval
        self._shown_at = -math.inf
        self._width = 0
        self._first: float | None = None
        self._lock = threading.Lock()

    def phase(self, verb: str) -> None:
        """The next stage of the same command (``indexing``, then ``judging``): the line goes on
        (its one-second delay counted from the start), its share counted afresh."""
        self._verb = verb
        self._first = None
        self._shown_at = -math.inf

    def __call__(self, read_to: float, target: float) -> None:
        if not self._on:
            return
        if self._first is None and math.isfinite(read_to):
            self._first = read_to
        self._draw(lambda: self.text(read_to, target))

    def opening(self, read: int, of: int) -> None:
        """A report while a hub segment's keyframe is read (``state_at``'s ``opening``): lines read,
        of how many. The share of recorded time is counted from after it."""
        if self._on:
            self._draw(lambda: f"nodewatch: {self._verb} the fleet at the segment's opening, "
                               f"{min(1.0, read / max(1, of)):.0%} ({read:,} of {of:,} lines): {self._label}")

    def _draw(self, text: Callable[[], str]) -> None:
        """Show ``text()`` once the delay has passed, at most every interval."""
        now = self._clock()
        if now - self._started < self._delay or now - self._shown_at < self._interval:
            return
        with self._lock:  # (a background reader's report, against ``done`` from the command's thread)
            if self._on:
                self._shown_at = now
                self._show(text())

    def text(self, read_to: float, target: float) -> str:
        """The line for a report (without the carriage return)."""
        if not math.isfinite(read_to):
            return f"nodewatch: read, applying: {self._label}"
        at = format_time(read_to)
        if not math.isfinite(target) or self._first is None or target <= self._first:
            return f"nodewatch: {self._verb}, at {at}: {self._label}"
        share = min(1.0, max(0.0, (read_to - self._first) / (target - self._first)))
        return f"nodewatch: {self._verb} {share:.0%}, at {at} of {format_time(target)}: {self._label}"

    def _show(self, line: str) -> None:
        line = line[:max(20, self._columns - 1)]
        pad = max(0, self._width - len(line))
        self._stream.write("\r" + line + " " * pad)
        self._stream.flush()
        self._width = max(self._width, len(line))  # what is on the line now, padding included

    def done(self) -> None:
        """Erase the line, if one was drawn; later reports draw nothing (``replay``: the index goes
        on reading in the background once the dashboard has the terminal)."""
        with self._lock:
            self._on = False
            if self._width:
                self._stream.write("\r" + " " * self._width + "\r")
                self._stream.flush()
                self._width = 0
