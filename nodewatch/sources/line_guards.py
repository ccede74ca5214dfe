"""Guards a reader of recordings puts around the lines it reads: a wild time must not move a
recording's time frame (``TimeFrame``), and a line written twice is applied once
(``DuplicateFilter``). Both report what they refuse with its line number."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.timeutil import format_time, parse_time

if TYPE_CHECKING:
    from .recording import Entry

EARLY_SLACK = 300.0
"""A line may be this much older than the header's ``started_at`` (threads race the header)."""
MAX_GAP = 3600.0
"""A line alone at either end of a recording, further than this from every other line, is wild."""


class TimeFrame:
    """Keeps wild line times from moving a recording's time frame (its start and end).

    A v1 recording's lines are receive times written as they happen, so the header's
    ``started_at`` anchors them: a line much older than it is refused where it is read
    (:meth:`admit`). At the far end nothing anchors the last line, but a real recording never has
    one line alone, an hour away from all the others (leases renew every 10 s): such a line, at
    either end, is dropped after the times are sorted (:meth:`trim`). Both say the line number.
    """

    def __init__(self, header: dict, problems: list[str]) -> None:
        started = header.get("started_at")
        self.anchor = parse_time(started) if isinstance(started, str) else None
        self.problems = problems

    def admit(self, e: Entry) -> bool:
        """False (with a problem) when ``e``'s time is before the recording started."""
        if self.anchor is None or e.t is None or e.t >= self.anchor - EARLY_SLACK:
            return True
        self.problems.append(f"line {e.line}: time {format_time(e.t)} is before the recording started "
                             f"({format_time(self.anchor)}), skipped")
        return False

    def trim(self, times: Any, lines: Any, start_fixed: bool = False) -> tuple[int, int]:
        """(lo, hi): the part of the sorted ``times`` kept; lines alone at the ends are reported.
        ``start_fixed``: the first events are in use already; only the end may be trimmed."""
        lo, hi = 0, len(times)
        while not start_fixed and hi - lo > 2 and times[lo + 1] - times[lo] > MAX_GAP:
            self._wild(lines[lo], times[lo], times[lo + 1])
            lo += 1
        while hi - lo > 2 and times[hi - 1] - times[hi - 2] > MAX_GAP:
            self._wild(lines[hi - 1], times[hi - 1], times[hi - 2])
            hi -= 1
        return lo, hi

    def _wild(self, line: int, t: float, nearest: float) -> None:
        self.problems.append(f"line {line}: time {format_time(t)} is alone, {abs(nearest - t):.0f}s from every "
                             f"other line; not used (a single wild line does not move the recording's frame)")


class DuplicateFilter:
    """Spots a line repeated within the last ``window`` lines (a duplicated write or a bad concat);
    lines up to twice as far back may be spotted too (the memory is two generations of ``window``
    lines: cheaper per line than forgetting them one by one, and a recorder never writes the same
    line twice, whatever the distance)."""

    def __init__(self, window: int) -> None:
        self._new: dict[bytes, int] = {}
        self._old: dict[bytes, int] = {}
        self._window = window

    def seen(self, line: bytes, n: int) -> int | None:
        # the line without its line end: a line "...\n" is its own key (no copy made), any other
        # line end (none, "\r\n") is made that one
        key = line if line.endswith(b"\n") and not line.endswith(b"\r\n") else line.rstrip(b"\r\n") + b"\n"
        new = self._new
        prev = new.get(key)
        if prev is None:
            prev = self._old.get(key)
            if prev is None:
                new[key] = n
                if len(new) >= self._window:
                    self._old, self._new = new, {}
        return prev
