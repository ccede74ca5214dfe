"""Lines as one readable binary stream: what ``recording_input.open_binary`` returns for a directory of
segments (``segments.py``) or a columnar file (``columnar.py``), so that replay and ``status`` read
either like one JSON Lines recording.

Its own module so that ``columnar.py`` needs nothing of ``segments.py``, which reads columnar
segments through it: the dependency goes one way."""

from __future__ import annotations

import io
from typing import Any, Iterator


class SegmentStream(io.RawIOBase):
    """The lines of several segments as one readable binary stream (what ``open_binary`` returns
    for a directory): replay and ``status`` read it like one recording."""

    def __init__(self, lines: Iterator[bytes], name: str) -> None:
        self._lines = lines
        self._buf = b""
        self._read = False
        self.name = name
        self.problems: list[str] = []
        self.beyond: list[float] = []
        """The time of a line after the window's end, when the reading stopped at one (``open_segments``):
        the recording goes on after it."""

    def readable(self) -> bool:
        return True

    def lines(self) -> Iterator[bytes] | None:
        """The lines themselves, one an item, for a reader that takes them so from the start
        (``recording.iter_lines``): no copy into a buffer and no split of it again, a Python call
        less a line (~1 us: 5.8 million lines in a 15-minute segment at 65,000 nodes). None once
        something was read as a stream (its buffer may hold part of a line)."""
        return None if self._read else self._lines

    def readinto(self, b: Any) -> int:
        self._read = True
        while not self._buf:
            nxt = next(self._lines, None)
            if nxt is None:
                return 0
            self._buf = nxt
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n
