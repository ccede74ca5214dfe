"""Any recording nodewatch reads, as JSON Lines v1 lines: what ``nodewatch recording export`` and the
columnar writer's conversions are made of.

A v1 file (plain or gzip), a columnar file, a hub's directory of segments (any span of it, from the
keyframe of the segment that holds its start) and a kubectl watch log all come out as the same
thing: the v1 header, then one line per event, so JSON Lines stays the interchange format. A kubectl
log has no header and no receive times: its header says so (``source.converted_from``) and each
event is timed as replay times it (``kubectl_format``).
"""

from __future__ import annotations

from typing import Iterator

import orjson

from .kubectl_format import entry_time, looks_like_kubectl
from .kubectl_format import iter_entries as kubectl_entries
from .recording import FORMAT_VERSION, HEADER_KEY, RecordingError, entry_line, iter_lines, parse_header
from .recording_input import close_input, open_binary
from .segments import line_time


def v1_lines(path: str, problems: list[str], end: float | None = None) -> Iterator[bytes]:
    """The v1 lines of ``path`` (header first, each ending in a newline), up to ``end`` (a time)."""
    stream = open_binary(path)
    try:
        lines = iter_lines(stream, problems)
        first = None
        for _, line in lines:
            if line.strip():
                first = line
                break
        if first is None:
            raise RecordingError(f"{path}: empty, nothing to export")
        if looks_like_kubectl(first):
            yield orjson.dumps({HEADER_KEY: FORMAT_VERSION, "started_at": None,
                                "source": {"converted_from": "kubectl", "name": str(path)}}) + b"\n"
            # a concatenated log comes section by section (``kubectl_format.SectionClock``): put in
            # time order, as every reader of it does, so the export reads as a recording does
            entries = sorted(kubectl_entries(_chain((1, first), lines), problems), key=entry_time)
            for e in entries:
                if end is not None and e.t is not None and e.t > end:
                    return
                yield entry_line(e)
            return
        parse_header(first)
        yield first if first.endswith(b"\n") else first + b"\n"
        for _, line in lines:
            if not line.strip():
                continue
            if end is not None and line_time(line) > end:
                return
            yield line if line.endswith(b"\n") else line + b"\n"
    finally:
        close_input(stream)


def _chain(first: tuple[int, bytes], rest: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    yield first
    yield from rest
