"""Reading a directory of recording segments (the hub's flight recorder) as one v1 recording.

The hub (``nodewatch/hub/flight_recorder.py``) writes ``nodewatch-<UTC start>-<n>.jsonl.gz``
segments; each begins with a *keyframe* (the fleet at the rotation, as list items) whose length the
header's ``source.segment.keyframe_lines`` gives. Read as one stream (``open_segments``): the
header of the first segment, then every line in order, the keyframes of the later segments skipped
(the previous segment led up to them), from the last segment surely opened before ``start`` (a name
gives the second, ``select_segments``) to the last opened up to ``LATE_LINES`` after ``end``, and
no line after ``end``. A segment cut short by a crash is read up to its last whole line and the
next one carries on.

``open_binary`` (``recording_input.py``) hands a directory to ``open_segments``; a ``SegmentWindow`` (a
directory path that also carries the window) is how ``replay --from/--to`` and ``status --at``
narrow the segments read.
"""

from __future__ import annotations

import functools
import gzip
import io
import math
import os
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import orjson

from ..core.timeutil import format_time, parse_time, parse_when, time_of_day
from . import writer_lock
from .columnar import iter_file_lines
from .line_stream import SegmentStream
from .recording_format import HEADER_KEY, RecordingError

SEGMENT_RE = re.compile(r"^nodewatch-(\d{8}T\d{6}Z)-(\d+)\.(?:jsonl(\.gz)?|nwcol)$")
COLUMNAR_EXT = ".nwcol"
"""The columnar format's segments (``columnar.py``): read as the v1 lines they hold."""


def segment_name(t: float, n: int, ext: str = ".jsonl.gz") -> str:
    return time.strftime("nodewatch-%Y%m%dT%H%M%SZ", time.gmtime(t)) + f"-{n:06d}{ext}"


def recording_label(path: str) -> str:
    """A recording's name for a title: its file or folder name; a folder called ``recordings`` (a
    hub's flight recorder, ``DIR/recordings``) with its parent's, ``hub/recordings``, which says
    whose it is."""
    if path == "-":
        return "stdin"
    p = os.path.normpath(path)
    name = os.path.basename(p)
    parent = os.path.basename(os.path.dirname(os.path.abspath(p)))
    return f"{parent}/{name}" if name == "recordings" and parent else name


@dataclass(frozen=True)
class Segment:
    path: Path
    start: float
    """From the file name: the second the segment was opened in, UTC (or that of the latest line the
    segment before holds, when later: ``SegmentedRecorder.rotate``)."""
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


# --- reading ------------------------------------------------------------------------------------------


NAMED_TO = 1.0
"""A segment's name says the second it was opened in, not the instant (``segment_name``)."""
LATE_LINES = 5.0
"""How far past a window's end its read goes on for lines received at or before the end but written
after later ones: only those are yielded. It takes the segments opened that far after the end too,
since a line received just before a rotation may be written just after it, into the next segment.
A hub writes a line within milliseconds of receiving it (a list's items within the list's decode:
seconds); reading 5 s more costs ~5 % of a one-instant read early in a 65,000-node segment (30 s,
the whole-file reader's ``REORDER_WINDOW`` for any recording's disorder, cost 20 %)."""


def select_segments(segments: list[Segment], start: float | None, end: float | None) -> list[Segment]:
    """The segments that hold [start, end]: from the last one surely opened before ``start``. One
    named in ``start``'s own second may have opened after it, its keyframe holding each Lease's
    last line only, received after ``start`` (not one line of that Lease at or before it: the node
    judged without its Lease, Overdue, a false alarm); the one before leads up to it."""
    if not segments:
        return []
    first = 0
    if start is not None:
        for i, s in enumerate(segments):
            if s.start + NAMED_TO <= start:
                first = i
    last = len(segments)
    if end is not None:
        last = max(first + 1, sum(1 for s in segments if s.start <= end + LATE_LINES))
    return segments[first:last]


def iter_segment_lines(segments: list[Segment], problems: list[str], end: float | None = None,
                       supersede: Any = None, beyond: list[float] | None = None) -> Iterator[bytes]:
    """The lines of ``segments`` as one v1 recording: the first header, every event line, the
    keyframes of later segments skipped; none later than ``end``, and it stops after the first line
    later than ``end`` + ``LATE_LINES`` (the time of the first later than ``end`` goes into
    ``beyond``: the recording goes on after ``end``).
    ``supersede`` (a ``columnar.Supersession``): columnar segments without the renewals it finds
    superseded (it is told which keyframe lines are skipped). Between two segments with a stretch
    the recorder missed, two lease-stream health lines say so (``_LeaseHealth``)."""
    first = True
    seen = _LeaseHealth()
    for seg in segments:
        try:
            raw = open(seg.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            problems.append(f"{seg.path.name}: cannot open ({exc.strerror or exc})")
            continue
        with raw:
            lines = _segment_lines(seg, raw, problems, supersede)
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
                if (end is None or seg.start <= end) and _run_opened(header):
                    for line in seen.gap_until(seg.start):
                        if end is not None and (t := line_time(line)) > end:  # (back after ``end``)
                            if beyond is not None and not beyond:
                                beyond.append(t)
                            continue
                        yield line
                skip = keyframe_lines(header)
                if supersede is not None:
                    supersede.hidden = skip
            else:
                yield head if head.endswith(b"\n") else head + b"\n"
                seen.header = header
            first = False
            last = None
            for line in lines:
                if skip:
                    skip -= 1
                    continue
                if end is not None and (t := line_time(line)) > end:
                    if beyond is not None and not beyond:
                        beyond.append(t)
                    if t > end + LATE_LINES:
                        return
                    continue  # (a line received earlier may still come)
                if line.find(b'"health":', 0, 320) >= 0:  # a health line's key comes after its time and cluster
                    seen.learn(line)
                last = line
                yield line
            if last is not None:
                seen.last = line_time(last)


def _whole_lines(stream: IO[bytes], name: str, problems: list[str]) -> Iterator[bytes]:
    """Complete lines only: a crash leaves a partial last line, or a gzip stream without its end."""
    try:
        for line in stream:
            if not line.endswith(b"\n"):
                if not writer_lock.being_written(stream):  # (else the hub is writing it now)
                    problems.append(f"{name}: the last line is cut short (the hub stopped abruptly), skipped")
                return
            yield line
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
        if not writer_lock.being_written(stream):
            problems.append(f"{name}: ends abruptly (the hub stopped without closing it); read up to there")


def _segment_lines(seg: Segment, raw: IO[bytes], problems: list[str], supersede: Any = None) -> Iterator[bytes]:
    """A segment's lines (its header first), read from ``raw`` as its name's format says."""
    if seg.path.name.endswith(COLUMNAR_EXT):
        return _columnar_lines(raw, seg.path.name, problems, supersede)
    stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if seg.path.name.endswith(".gz") else raw
    return _whole_lines(stream, seg.path.name, problems)


def _columnar_lines(raw: IO[bytes], name: str, problems: list[str], supersede: Any = None) -> Iterator[bytes]:
    """A columnar segment's v1 lines; one that cannot be read at all is named and skipped."""
    try:
        yield from iter_file_lines(raw, name, problems, supersede)
    except RecordingError as exc:
        problems.append(f"{exc}, skipped")


def line_time(line: bytes) -> float:
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


class SegmentWindow(str):
    """A directory of segments, and the part of it wanted: still the directory's path as a string
    (for messages and names), with ``start`` and ``end`` for ``open_segments``."""

    start: float | None = None
    end: float | None = None

    def __new__(cls, directory: str, start: float | None, end: float | None) -> "SegmentWindow":
        self = super().__new__(cls, directory)
        self.start, self.end = start, end
        return self


class _LeaseHealth:
    """What ``iter_segment_lines`` keeps to mark a stretch the recorder missed between two segments:
    the newest line's time and, per cluster, the lease stream's health as the recording last said
    it. Where the next segment opens a run (``opens_run``) more than ``RECORDING_GAP`` after that
    line and the stream was not said down, two lines are put between them: at the last line, the
    lease stream down ("not recorded"), and at the next segment's opening (the end of the second
    its name gives: no instant the recorder may have missed reads as recorded), back as it was. A
    replay through the stretch is then blind there, as a live dashboard is while its stream is
    down, instead of judging every node as old as the stretch is long. (A recording without watch
    health lines, a demo's, comes back "connected and synced".)"""

    def __init__(self) -> None:
        self.header: dict = {}
        self.last: float | None = None
        self.health: dict[str | None, dict[str, Any]] = {}

    def learn(self, line: bytes) -> None:
        try:
            d = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        h = d.get("health") if isinstance(d, dict) else None
        if isinstance(h, dict) and h.get("resource") == "leases":
            cluster = d.get("cluster")
            self.health.setdefault(cluster if isinstance(cluster, str) else None, {}).update(
                {k: v for k, v in h.items() if k in LEASE_HEALTH_FIELDS})

    def gap_until(self, opened: float) -> Iterator[bytes]:
        """The two lines for the stretch before a segment opened in the second ``opened`` (its
        name's), if it is one: back at that second's end."""
        last = self.last
        if last is None or opened - last <= RECORDING_GAP:
            return
        clusters = self.header.get("clusters")
        names: list[str | None] = ([c.get("name") for c in clusters if isinstance(c, dict)]
                                   if isinstance(clusters, list) and clusters else [None])
        why = f"{NOT_RECORDED} until {format_time(opened)}"
        backs = []
        for name in names:
            was = self.health.get(name)
            if was is not None and was.get("connected") is False:
                continue  # the recording says the stream was down: that blindness goes on as recorded
            head: dict[str, Any] = {"t": last} if name is None else {"t": last, "cluster": name}
            down = {"resource": "leases", "connected": False, "down_since": last, "last_error": why}
            back = {"resource": "leases", "connected": True, "synced": True, "down_since": None, "last_error": ""}
            back.update(was or {})
            back["last_activity"] = opened + NAMED_TO
            yield orjson.dumps({**head, "health": down}) + b"\n"
            backs.append(orjson.dumps({**head, "t": opened + NAMED_TO, "health": back}) + b"\n")
        yield from backs  # (after every cluster's down line: in time order)
        self.last = None


NOT_RECORDED = "not recorded: the recorder was not running"
"""How the lease stream's health put in a stretch the recorder missed begins (``_LeaseHealth``)."""
LEASE_HEALTH_FIELDS = ("connected", "synced", "down_since", "last_error", "forbidden", "relists")


RECORDING_GAP = 60.0
"""Seconds without a line after which a hub's directory was not being recorded: every kubelet
renews its Lease every 10 s (40 s leases) and the recorder writes each renewal, so a recording of
even one node holds a line at least that often."""


def unrecorded(directory: str, t: float, last: float) -> str | None:
    """What to say of ``t`` when the directory holds no line there: more than ``RECORDING_GAP``
    after ``last`` (the newest line read before ``t``), the segment before it ending before ``t``,
    and the next one opened after ``t`` by a recorder that had stopped (``opens_run``: a hub
    started again, or writing again after a full disk; one named in ``t``'s own second may have
    opened after it, ``select_segments``). None when ``t`` is recorded (a segment that goes on
    past it, or a rotation after it: the fleet sent nothing), or after the end."""
    if t - last <= RECORDING_GAP:
        return None
    segs = list_segments(directory)
    i = next((i for i, seg in enumerate(segs) if seg.start + NAMED_TO > t), None)
    if i is None:
        return None
    if i > 0:
        ended = _last_line_time(segs[i - 1])
        if ended is not None and ended > t:
            return None  # the recorder wrote on in the segment before, after ``t``
    if not opens_run(segs[i]):
        return None
    return (f"{format_time(t)} was not recorded: the recording stops at {format_time(last)} and goes on at "
            f"{format_time(segs[i].start)} (the recorder was not running)")


def recorded_until(directory: str) -> float | None:
    """When the newest line of this directory was received (None: no line). Read from the lines,
    not from the files' times: a directory copied without them (``scp -r``, a restore) would
    otherwise claim the copy's day."""
    for seg in reversed(list_segments(directory)):
        t = _last_line_time(seg)
        if t is not None:
            return t
    return None


def _of_file(seg: Segment, read: Callable[[Segment, int, int], Any], missing: Any) -> Any:
    """``read(seg, size, mtime_ns)``: a figure of the file as it is (its size and time key a cache
    of ``read``, so a command that asks for it again reads it once); ``missing`` when it is gone."""
    try:
        st = seg.path.stat()
    except OSError:
        return missing
    return read(seg, st.st_size, st.st_mtime_ns)


def _last_line_time(seg: Segment) -> float | None:
    """The receive time of a segment's last whole line (None: none, or unreadable); reads it all,
    once for the file as it is (a command asks for each of its options)."""
    return _of_file(seg, _file_last_line_time, None)


@functools.lru_cache(maxsize=8)
def _file_last_line_time(seg: Segment, _size: int, _mtime_ns: int) -> float | None:
    try:
        with open(seg.path, "rb") as raw:
            if seg.path.name.endswith(COLUMNAR_EXT):
                from .columnar import received_until

                return received_until(raw, seg.path.name)
            last = None
            for i, line in enumerate(_segment_lines(seg, raw, [])):
                if i:
                    last = line
            t = line_time(last) if last is not None else float("-inf")
            return t if t > float("-inf") else None
    except (OSError, RecordingError):
        return None


def opens_run(seg: Segment) -> bool:
    """Whether nothing of the recorder carried over into this segment: the first of a hub's run (no
    keyframe: a hub that started), or one it opened when it could write again after it could not
    (``source.segment.after``, ``SegmentedRecorder.rotate``). Where a stretch without lines ends in
    such a segment, the recorder was not running (or not writing) through it. A segment of its
    rotation (a keyframe, nothing else said) was opened by a recorder that ran on: a stretch before
    it without lines was a fleet that sent nothing (every kubelet cut off from the API server), and
    it is recorded. An unreadable header counts as a run's first (as every segment counted before)."""
    return _of_file(seg, _file_opens_run, True)


@functools.lru_cache(maxsize=64)
def _file_opens_run(seg: Segment, _size: int, _mtime_ns: int) -> bool:
    try:
        with open(seg.path, "rb") as raw:
            head = next(_segment_lines(seg, raw, []), None)
        header = orjson.loads(head) if head is not None else None
    except (OSError, orjson.JSONDecodeError):
        return True
    return _run_opened(header)


def _segment_entry(header: Any) -> dict | None:
    """The header's ``source.segment`` (a hub's segment: its number, keyframe lines, why it resumed)."""
    src = header.get("source") if isinstance(header, dict) else None
    segment = src.get("segment") if isinstance(src, dict) else None
    return segment if isinstance(segment, dict) else None


def keyframe_lines(header: Any) -> int:
    """How many lines a hub's segment opens with (its keyframe: the fleet as it was); 0 for any other
    header."""
    k = (_segment_entry(header) or {}).get("keyframe_lines")
    return k if type(k) is int and k > 0 else 0


def _run_opened(header: Any) -> bool:
    """``opens_run`` of a segment with this header."""
    segment = _segment_entry(header)
    if segment is None:
        return True
    k = segment.get("keyframe_lines")
    return not (isinstance(k, int) and k > 0) or "after" in segment


def resolve_when(text: str, directory: str) -> float:
    """A ``--from``/``--to``/``--at`` for a directory of segments (``Span.resolve``). Raises
    ValueError for the user, RecordingError for a directory without segments."""
    return Span(directory).resolve(text)


class Span:
    """A directory's recording, from its first segment's start to its newest line. Where that line
    is, is read only when needed: it is after the newest segment's start, and (a hub writes a line
    as it comes) not after that file's last write; a copy's file times say nothing, and then its
    lines are read (``recorded_until``)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        segs = list_segments(directory)
        if not segs:
            raise RecordingError(f"{directory}: is a directory, not a recording, and holds no hub recording segments")
        self.first = segs[0].start
        newest = segs[-1]
        self.lower = newest.start
        try:
            written = newest.path.stat().st_mtime
        except OSError:
            written = -math.inf
        self._exact: float | None = None
        self._read = False
        self.upper = written if written >= self.lower else self.last()

    def last(self) -> float:
        """The newest line's time (read from the lines)."""
        if not self._read:
            self._read = True
            self._exact = recorded_until(self.directory)
            if self._exact is not None:
                self.upper = self._exact
        return self._exact if self._exact is not None else self.lower

    def covers(self, t: float) -> bool:
        """Whether ``t`` is not after the newest line."""
        return t <= self.lower or (t <= self.upper and t <= self.last())

    def resolve(self, text: str) -> float:
        """``HH:MM[:SS]`` (UTC) is that time of day on the latest day the recording covers it (a
        hub still recording: the latest one not after its newest line), or, on no day, the one
        nearest the recording (its answer is then "before" or "after the recording", dated); else
        RFC 3339 or ``+OFFSET`` (``+90``, ``+15m``) from the first segment."""
        of_day = time_of_day(text)
        if of_day is None:
            return parse_when(text, self.first)
        days = [self.first - self.first % 86400 + of_day - 86400]
        while days[-1] <= self.upper:
            days.append(days[-1] + 86400)
        inside = [t for t in days if self.first <= t and self.covers(t)]
        if inside:
            return inside[-1]
        last = self.last()
        return min(days, key=lambda t: self.first - t if t < self.first else t - last)

    def __str__(self) -> str:
        return f"{format_time(self.first)} to {format_time(self.last())}"


def window(directory: str, start: str | None, end: str | None,
           end_option: str = "--to") -> tuple[SegmentWindow, str | None, str | None]:
    """The directory narrowed to [start, end] (either may be None), and both as RFC 3339 (for the
    options that take one). Raises ValueError for a window that is not in the recording at all
    (``end_option``: the option that gave ``end``, for the message)."""
    span = Span(directory)
    a = span.resolve(start) if start else None
    b = span.resolve(end) if end else None
    if a is not None and b is not None and b < a:
        raise ValueError(f"--to {end} is before --from {start}")
    if b is not None and b < span.first:
        raise ValueError(f"{end_option} {end}: {format_time(b)} is before the recording ({span})")
    if a is not None and not span.covers(a):
        raise ValueError(f"--from {start}: {format_time(a)} is after the recording ({span})")
    return (SegmentWindow(directory, a, b), format_time(a, micro=True) if a is not None else None,
            format_time(b, micro=True) if b is not None else None)


def open_segments(directory: str, start: float | None = None, end: float | None = None,
                  supersede: Any = None) -> IO[bytes]:
    """A directory of segments as one buffered v1 stream (the hook in ``open_binary``)."""
    if isinstance(directory, SegmentWindow):
        start = directory.start if start is None else start
        end = directory.end if end is None else end
    segs = select_segments(list_segments(directory), start, end)
    if not segs:
        raise RecordingError(f"{directory}: is a directory, not a recording, and holds no hub recording segments")
    problems: list[str] = []
    beyond: list[float] = []
    raw = SegmentStream(iter_segment_lines(segs, problems, end, supersede, beyond), f"{directory} ({len(segs)} segments)")
    raw.problems = problems
    raw.beyond = beyond
    return io.BufferedReader(raw, 1 << 20)
