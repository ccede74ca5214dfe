"""Opening a recording for reading, whatever its format: the one place that sniffs it.

A path is a JSON Lines file (plain or gzipped), a columnar ``.nwcol`` file (``columnar.py``, by its
magic), a hub's directory of segments (``segments.py``) or ``-`` for stdin; each is handed back as
one binary stream of v1 lines. Why a module of its own: the formats' readers build on
``recording.py`` (its lines, header and errors), and the sniff needs all of them, so it sits above
them and the imports go one way (no reader imports another lazily to dispatch).
"""

from __future__ import annotations

import gzip
import os
import sys
from typing import IO, Any

from .columnar import open_columnar
from .recording import Entry, iter_lines, parse_header, parse_line
from .recording_format import RecordingError
from .segments import open_segments


def open_binary(path: str, supersede: Any = None) -> IO[bytes]:
    """The file (``-``: stdin), transparently gunzipped. Raises RecordingError when it cannot be opened.
    ``supersede`` (a ``columnar.Supersession``): columnar data is read without the renewals it finds
    superseded (JSON Lines is read whole)."""
    if path == "-":
        raw: IO[bytes] = _stdin()
    elif os.path.isdir(path):  # the hub's flight recorder: a directory of segments, read as one
        return open_segments(path, supersede=supersede)
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            raise RecordingError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise RecordingError(f"{path}: is a directory, not a recording") from None
        except OSError as exc:
            raise RecordingError(f"{path}: cannot open ({exc.strerror or exc})") from None
    head = _peek(raw, 5)
    if head == b"NWCOL":  # the columnar format (``columnar.py``): read as the v1 lines it holds
        return open_columnar(raw, path, supersede)
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _peek(raw: Any, n: int) -> bytes:
    if hasattr(raw, "peek"):
        return raw.peek(n)[:n]
    return b""


def read_recording(path: str) -> tuple[dict, list[Entry], list[str]]:
    """Header, usable entries and problems of a whole v1 recording (small files, tests, tools)."""
    problems: list[str] = []
    stream = open_binary(path)
    try:
        lines = iter_lines(stream, problems)
        first = next(lines, None)
        if first is None:
            raise RecordingError(f"{path}: empty file")
        header = parse_header(first[1])
        entries = [e for n, line in lines if (e := parse_line(n, line, problems)) is not None]
    finally:
        close_input(stream)
    return header, entries, problems


def went_on(stream: IO[bytes]) -> bool:
    """Whether a directory's window (``open_segments``) stopped at a line after its end: the
    recording goes on after it. Why: ``status --at`` on the newest segment would otherwise read the
    whole segment again to learn where the recording ends (~1 s at 65,000 nodes)."""
    return bool(getattr(getattr(stream, "raw", None), "beyond", None))


def close_input(stream: IO[bytes]) -> None:
    """Close what ``open_binary`` opened; stdin stays open (someone else may read it after us)."""
    if stream is not _stdin():
        stream.close()


def _stdin() -> IO[bytes]:
    return sys.stdin.buffer
