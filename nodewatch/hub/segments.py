"""The flight recorder: recording format v1 in rotating gzip segments, and reading across them.

Writing (``SegmentedRecorder``): the hub records everything its source receives, always, into
``DIR/recordings/nodewatch-<UTC start>-<n>.jsonl.gz``, a new segment every ``segment_seconds``,
dropping the oldest segments beyond ``keep_seconds`` or ``keep_bytes``. Each segment is a complete
v1 recording that replays on its own: it begins with a *keyframe*, the fleet as it is at the
rotation written as a list (``"list": true`` items, then ``SYNCED`` per resource, the certificate
dates and the streams' health), so replaying from 03:12 does not need the segments of the night
before. The header's ``source.segment`` says how many lines the keyframe has, so a reader that
goes on from the previous segment skips it. Each segment is flushed at least once a second (the
``Recorder`` contract): a ``kill -9`` loses at most the last second, and a restarted hub starts a
new segment (with a new keyframe once its lists arrive).

What the keyframe is made of: Nodes are rebuilt from the state's records (``keyframe_lines``); the
other resources are kept as the last line bytes received for each object (Leases are ~300 bytes
each; pods and events are only those of watched nodes), so a rotation never asks the API server
for anything.

Reading (``open_segments``): a directory of segments reads as one v1 stream (header of the first
segment, then every line in order, keyframes of later segments skipped), from the last segment
that starts at or before ``start`` to the last that starts before ``end``. A segment cut short by a
crash is read up to its last whole line and the next segment carries on.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import orjson

from ..core.clock import Clock, SystemClock
from ..core.settings import Settings
from ..core.timeutil import parse_time
from ..core.views import RESOURCES
from ..sources.recording import HEADER_KEY, Recorder, sanitize
from .keyframe_lines import node_to_dict

SEGMENT_SECONDS = 15 * 60.0
KEEP_SECONDS = 24 * 3600.0
KEEP_BYTES = 2 * 1024 ** 3
SEGMENT_RE = re.compile(r"^nodewatch-(\d{8}T\d{6}Z)-(\d+)\.jsonl(\.gz)?$")


def segment_name(t: float, n: int) -> str:
    return time.strftime("nodewatch-%Y%m%dT%H%M%SZ", time.gmtime(t)) + f"-{n:06d}.jsonl.gz"


@dataclass(frozen=True)
class Segment:
    path: Path
    start: float
    """From the file name (the time the segment was opened, UTC, to the second)."""
    n: int

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


def list_segments(directory: str | os.PathLike) -> list[Segment]:
    """The segments in ``directory``, oldest first."""
    out = []
    for entry in os.scandir(directory):
        m = SEGMENT_RE.match(entry.name)
        if m and entry.is_file():
            t = parse_time(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(m.group(1), "%Y%m%dT%H%M%SZ")))
            out.append(Segment(Path(entry.path), float(t or 0.0), int(m.group(2))))
    out.sort(key=lambda s: (s.start, s.n, s.path.name))
    return out


# --- writing ----------------------------------------------------------------------------------------


class SegmentedRecorder:
    """A ``Recorder`` (same methods) that rotates, keeps a keyframe at the head of each segment,
    and enforces retention. Thread-safe."""

    def __init__(self, directory: str | os.PathLike, source: dict[str, Any], settings: Settings, *,
                 segment_seconds: float = SEGMENT_SECONDS, keep_seconds: float | None = KEEP_SECONDS,
                 keep_bytes: int | None = KEEP_BYTES, clock: Clock | None = None,
                 records: Callable[[], dict] | None = None, extras: Callable[[], list[bytes]] | None = None) -> None:
        """``clock``: the wall clock that decides rotation and retention (tests move a ManualClock).
        ``records``: the state's ``node_records`` (Nodes of the keyframe). ``extras``: more keyframe
        lines (certificate dates, stream health), as complete v1 lines without the newline."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.source = dict(source)
        self.settings = settings
        self.segment_seconds = segment_seconds
        self.keep_seconds = keep_seconds
        self.keep_bytes = keep_bytes
        self.clock: Clock = clock or SystemClock()
        self.records = records
        self.extras = extras
        self._lock = threading.RLock()
        self._last: dict[tuple[str, str, str], bytes] = {}
        """(resource, namespace, name) -> the object's last JSON, for keyframes (not Nodes)."""
        self._synced: set[str] = set()
        self._current: Recorder | None = None
        self._opened_at = 0.0
        self._n = max((s.n for s in list_segments(self.directory)), default=0)
        self._closed = False
        self.segments_written = 0
        self.lines = 0

    # --- the Recorder interface (what the sources call) ---

    def write(self, resource: str, etype: str, obj: dict | None, t: float, listing: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            if etype == "SYNCED":
                self._synced.add(resource)
            elif resource != "nodes" and isinstance(obj, dict) and etype in ("ADDED", "MODIFIED", "DELETED"):
                meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
                key = (resource, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                if etype == "DELETED":
                    self._last.pop(key, None)
                else:
                    self._last[key] = orjson.dumps(sanitize(obj), default=str)
            self._segment().write(resource, etype, obj, t, listing)
            self.lines += 1

    def write_health(self, resource: str, t: float, **health: Any) -> None:
        with self._lock:
            if not self._closed:
                self._segment().write_health(resource, t, **health)

    def write_cert(self, node: str, not_after: float, source: str, t: float) -> None:
        with self._lock:
            if not self._closed:
                self._segment().write_cert(node, not_after, source, t)

    def write_settings(self, t: float, settings: Settings) -> None:
        with self._lock:
            self.settings = settings
            if not self._closed:
                self._segment().write_settings(t, settings)

    def flush(self) -> None:
        with self._lock:
            if self._current is not None:
                self._current.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._current is not None:
                self._current.close()
                self._current = None

    # --- rotation ---

    def _segment(self) -> Recorder:
        now = self.clock.now()
        cur = self._current
        if cur is not None and now - self._opened_at < self.segment_seconds:
            return cur
        self.rotate(now)
        assert self._current is not None
        return self._current

    def rotate(self, now: float | None = None) -> Path:
        """Close the current segment and open the next one, headed by a keyframe. Returns its path."""
        with self._lock:
            now = self.clock.now() if now is None else now
            lines = self._keyframe(now) if self._current is not None else []
            if self._current is not None:
                self._current.close()
            self._n += 1
            path = self.directory / segment_name(now, self._n)
            source = {**self.source, "segment": {"n": self._n, "keyframe_lines": len(lines)}}
            rec = Recorder(str(path), source, self.settings, started_at=now)
            for line in lines:
                rec._write_line(line, now)  # noqa: SLF001 - complete v1 lines, written as they are
            rec.flush()
            self._current = rec
            self._opened_at = now
            self.segments_written += 1
            self._retain(now)
            return path

    def _keyframe(self, t: float) -> list[bytes]:
        """The fleet at ``t`` as v1 list lines (see the module docstring)."""
        tt = orjson.dumps(t)
        out: list[bytes] = []
        if self.records is not None:
            for rec in self.records().values():
                out.append(b'{"t":' + tt + b',"resource":"nodes","type":"ADDED","object":'
                           + orjson.dumps(node_to_dict(rec)) + b',"list":true}')
        for (resource, _, _), obj in self._last.items():
            out.append(b'{"t":' + tt + b',"resource":"' + resource.encode() + b'","type":"ADDED","object":'
                       + obj + b',"list":true}')
        for resource in RESOURCES:
            if resource in self._synced:
                out.append(b'{"t":' + tt + b',"resource":"' + resource.encode() + b'","type":"SYNCED","object":null,"list":true}')
        if self.extras is not None:
            out.extend(self.extras())
        return out

    def _retain(self, now: float) -> None:
        """Drop the oldest segments beyond the age and size limits (never the one being written)."""
        segs = [s for s in list_segments(self.directory) if self._current is None or s.path.name != Path(self._current.path).name]
        if self.keep_seconds is not None:
            # a segment may go once the *next* one starts before the horizon: what it holds is older
            for a, b in zip(segs, segs[1:] + [None]):
                nxt = b.start if b is not None else self._opened_at
                if nxt < now - self.keep_seconds:
                    _unlink(a.path)
        if self.keep_bytes is not None:
            segs = [s for s in list_segments(self.directory) if s.path.exists()]
            total = sum(s.size for s in segs)
            for s in segs[:-1]:  # the newest (being written) stays
                if total <= self.keep_bytes:
                    break
                total -= s.size
                _unlink(s.path)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


# --- reading ------------------------------------------------------------------------------------------


def select_segments(segments: list[Segment], start: float | None, end: float | None) -> list[Segment]:
    """The segments that hold [start, end]: from the last one opened at or before ``start``."""
    if not segments:
        return []
    first = 0
    if start is not None:
        for i, s in enumerate(segments):
            if s.start <= start:
                first = i
    last = len(segments)
    if end is not None:
        last = max(first + 1, sum(1 for s in segments if s.start <= end))
    return segments[first:last]


def iter_segment_lines(segments: list[Segment], problems: list[str], end: float | None = None) -> Iterator[bytes]:
    """The lines of ``segments`` as one v1 recording: the first header, every event line, the
    keyframes of later segments skipped; stops after the first line later than ``end``."""
    first = True
    for seg in segments:
        try:
            raw = open(seg.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            problems.append(f"{seg.path.name}: cannot open ({exc.strerror or exc})")
            continue
        with raw:
            stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if seg.path.name.endswith(".gz") else raw
            lines = _whole_lines(stream, seg.path.name, problems)
            head = next(lines, None)
            if head is None:
                continue
            try:
                header = orjson.loads(head)
            except orjson.JSONDecodeError:
                problems.append(f"{seg.path.name}: no header, skipped")
                continue
            if not isinstance(header, dict) or HEADER_KEY not in header:
                problems.append(f"{seg.path.name}: not a nodewatch recording, skipped")
                continue
            skip = 0
            if not first:
                src = header.get("source") if isinstance(header.get("source"), dict) else {}
                segment = src.get("segment") if isinstance(src.get("segment"), dict) else {}
                k = segment.get("keyframe_lines")
                skip = k if isinstance(k, int) and k > 0 else 0
            else:
                yield head if head.endswith(b"\n") else head + b"\n"
            first = False
            for line in lines:
                if skip:
                    skip -= 1
                    continue
                if end is not None and _line_time(line) > end:
                    return
                yield line


def _whole_lines(stream: IO[bytes], name: str, problems: list[str]) -> Iterator[bytes]:
    """Complete lines only: a crash leaves a partial last line, or a gzip stream without its end."""
    try:
        for line in stream:
            if not line.endswith(b"\n"):
                problems.append(f"{name}: the last line is cut short (the hub stopped abruptly), skipped")
                return
            yield line
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
        problems.append(f"{name}: ends abruptly (the hub stopped without closing it); read up to there")


def _line_time(line: bytes) -> float:
    """The ``t`` of a v1 line, cheaply: the recorder writes it first."""
    if line.startswith(b'{"t":'):
        end = line.find(b",", 5)
        try:
            return float(line[5:end])
        except ValueError:
            pass
    try:
        t = orjson.loads(line).get("t")
        return float(t) if isinstance(t, (int, float)) else float("-inf")
    except (orjson.JSONDecodeError, AttributeError):
        return float("-inf")


class SegmentStream(io.RawIOBase):
    """The lines of several segments as one readable binary stream (what ``open_binary`` returns
    for a directory): replay and ``status`` read it like one recording."""

    def __init__(self, lines: Iterator[bytes], name: str) -> None:
        self._lines = lines
        self._buf = b""
        self.name = name
        self.problems: list[str] = []

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            nxt = next(self._lines, None)
            if nxt is None:
                return 0
            self._buf = nxt
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def open_segments(directory: str, start: float | None = None, end: float | None = None) -> IO[bytes]:
    """A directory of segments as one buffered v1 stream (the hook for ``open_binary``).
    Problems met while reading are appended to ``stream.problems``... and reported by the reader
    as lines it could not use."""
    segs = select_segments(list_segments(directory), start, end)
    if not segs:
        from ..sources.recording import RecordingError

        raise RecordingError(f"{directory}: no nodewatch recording segments in this directory")
    problems: list[str] = []
    raw = SegmentStream(iter_segment_lines(segs, problems, end), f"{directory} ({len(segs)} segments)")
    raw.problems = problems
    return io.BufferedReader(raw, 1 << 20)
