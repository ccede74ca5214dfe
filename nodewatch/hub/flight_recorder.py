"""The flight recorder: recording format v1 in rotating gzip segments (read back by
``sources/segments.py``).

Writing (``SegmentedRecorder``): the hub records everything its source receives, always, into
``DIR/recordings/nodewatch-<UTC start>-<n>.jsonl.gz``, a new segment every ``segment_seconds``,
dropping the oldest segments beyond ``keep_seconds`` or ``keep_bytes``. Each segment is a complete
v1 recording that replays on its own: it begins with a *keyframe*, the fleet as it is at the
rotation written as a list (``"list": true`` items, ``SYNCED`` per resource, the certificate
dates and the streams' health, all of which the recorder has seen pass), so replaying from 03:12 does not need the segments of the night
before. The header's ``source.segment`` says how many lines the keyframe has, so a reader that
goes on from the previous segment skips it. Each segment is flushed at least once a second (the
``Recorder`` contract): a ``kill -9`` loses at most the last second, and a restarted hub starts a
new segment (with a new keyframe once its lists arrive).

What the keyframe is made of: Nodes are rebuilt from the state's records (``keyframe_lines``), but
in a columnar segment that follows one still written, each Node the state has is the last version
written to that segment (the columnar writer keeps it, compressed, to patch the next one against):
the Node's first status update in the new segment is then a patch of a few dozen bytes, not the
whole object again (~200 bytes compressed a Node at 65,000 nodes: a fifth of a 15-minute segment's
bytes). The state read from either is the same (a record is what is read from the object). The
other resources are kept as the last line bytes received for each object (Leases are ~300 bytes
each; pods and events are only those of watched nodes), so a rotation never asks the API server
for anything.

Columnar segments: a Lease renewal that changes nothing but its renewTime, resourceVersion and
kubelet managedFields time (nearly all 6,500 a second at 65k) is told apart from its raw JSON and
written as its row without being sanitized and matched (``lease_renewal.py``); the keyframe keeps
its values and rebuilds its line. The same lines as the general way, for any stream. A hub's Lease
watch comes as reads of whole lines with the lane's structs (``write_lease_watch``): a renewal is
then matched on the line's own bytes, and a read's renewals are written as rows in one call.

A hub of several clusters writes a recording of several (``recording.py``): each segment's header
lists the clusters (with the settings each has learned by then), every line says its cluster, and
the keyframe is every cluster's (each cluster's Nodes, synced streams, health, certificates and
recent objects, each line with its cluster). The sources write through ``for_cluster``.

A full disk (or any failed write) never reaches the streams: the recorder stops recording, says
``recording stopped: disk full`` (``stopped``; the hub puts it on every screen and in its log),
keeps following the fleet for the next keyframe, drops its oldest segments to make room (never the
newest ``KEEP_WHEN_FULL``), and tries again after ``RETRY_SECONDS`` (backing off to
``MAX_RETRY_SECONDS``; only once there is ``MIN_FREE_BYTES`` free): it resumes with a new segment,
headed by a keyframe, so the recording replays on from there. What was written stays as it was:
the segment that met the full disk ends at its last whole line (a reader reads up to it), and
nothing more is written to it.

Reading is ``sources/segments.py``: a directory of segments reads as one v1 recording.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import orjson

from ..core.clock import Clock, SystemClock
from ..core.settings import Settings
from ..core.views import RESOURCES
from ..sources.columnar import EXTENSION as COLUMNAR_EXTENSION
from ..sources.columnar import ColumnarRecorder, micros
from ..sources.recording import ClusterRecorder, Recorder, sanitize, settings_payload, write_watch_lines
from ..sources.recording_stop import DISK_FULL, stop_reason
from ..sources.segments import list_segments, segment_name
from .keyframe_lines import node_to_dict
from .lease_renewal import RawRenewal
from .lease_renewal import learn as learn_renewal

SEGMENT_SECONDS = 15 * 60.0
KEEP_SECONDS = 24 * 3600.0
KEEP_BYTES = 8 * 1024 ** 3
"""24 h of a 65,000-node fleet in the columnar format (bench/recorder.py: ~5.4 GB a day), with room."""
RECORD_FORMATS = {"jsonl": ".jsonl.gz", "columnar": COLUMNAR_EXTENSION}
"""The segment formats, and their file names' ends."""
RATE_WARMUP = 60.0
"""Seconds of recording before ``capacity_notice`` says how long the cap holds (the initial lists
are written at once: the rate settles after them)."""
EXACT_SECONDS = 900.0
"""Objects received this recently are written into a keyframe with their own receive time."""
RETRY_SECONDS = 5.0
"""After a failed write, how long recording stays stopped before it tries again (wall time); twice
as long after each failed try, up to ``MAX_RETRY_SECONDS`` (a try writes a keyframe, on the
thread of the stream that wrote the line)."""
MAX_RETRY_SECONDS = 60.0
MIN_FREE_BYTES = 1024 * 1024
"""A try waits for at least this much free space (statvfs), so it costs nothing while the disk
stays full."""
AHEAD_MAX = 60.0
"""A segment is named by the latest line the one before holds when that is later than its opening
(``rotate``), by at most this much: a line dated further ahead is not a clock's."""
KEEP_WHEN_FULL = 2
"""Segments a full disk never makes the recorder drop: the newest history stays."""

log = logging.getLogger("nodewatch.hub.recorder")


# --- writing ----------------------------------------------------------------------------------------

_Key = tuple[str | None, str, str, str]
"""An object of ``SegmentedRecorder._last``: (cluster, resource, namespace, name)."""
_Row = tuple[_Key, RawRenewal, tuple[int, int, int], bytes]
"""A renewal matched on its line (``_matched``): its Lease, its fast path, its values, the line."""
_MODIFIED = b'{"type":"MODIFIED","object":'
_MODIFIED_AT = len(_MODIFIED)
"""A watch line of a modified object, as the API server writes it: the object's JSON follows, then ``}``."""


def _watch_lines(block: bytes | memoryview, n: int) -> list[bytes] | None:
    """The ``n`` lines of a block whose ``n`` events were decoded (blank lines skipped, a line's
    ``\r`` kept out); None when they do not come to ``n``."""
    data = bytes(block)
    if n == 1 and data.count(b"\n") == 1 and data.endswith(b"\n"):
        return [data[:-1]]
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    if len(lines) != n:
        lines = [line.rstrip(b"\r") for line in lines if line.strip()]
    return lines if len(lines) == n else None


class SegmentedRecorder:
    """A ``Recorder`` (same methods) that rotates, keeps a keyframe at the head of each segment,
    and enforces retention. Thread-safe."""

    def __init__(self, directory: str | os.PathLike, source: dict[str, Any], settings: Settings, *,
                 segment_seconds: float = SEGMENT_SECONDS, keep_seconds: float | None = KEEP_SECONDS,
                 keep_bytes: int | None = KEEP_BYTES, clock: Clock | None = None,
                 records: Callable[[], dict] | None = None, clusters: list[dict[str, Any]] | None = None,
                 cluster_records: Callable[[str], dict] | None = None, record_format: str = "jsonl",
                 retry_clock: Callable[[], float] = time.monotonic, fast_renewals: bool = True) -> None:
        """``clock``: the clock that decides rotation and retention (the source's: virtual for the
        demo; tests move a ManualClock). ``records``: the state's ``node_records`` (the Nodes of
        each keyframe). Several clusters: ``clusters`` is the header's list (``MultiSource.
        recording_clusters``), ``cluster_records`` gives one cluster's Node records by name.
        ``record_format``: ``jsonl`` (gzip JSON Lines segments) or ``columnar`` (``sources/columnar.py``,
        a tenth of the bytes). ``fast_renewals``: columnar only, plain Lease renewals are written by the
        fast path (``_renewal``); False: every event the general way (the tests and ``bench/recorder.py``
        compare the two: the same lines)."""
        if record_format not in RECORD_FORMATS:
            raise ValueError(f"unknown recording format {record_format!r} (one of {', '.join(RECORD_FORMATS)})")
        self.record_format = record_format
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.source = dict(source)
        self.settings = settings
        self.segment_seconds = segment_seconds
        self.keep_seconds = keep_seconds
        self.keep_bytes = keep_bytes
        self.clock: Clock = clock or SystemClock()
        self.records = records
        self.clusters = [dict(c) for c in clusters] if clusters is not None else None
        self.cluster_records = cluster_records
        self._lock = threading.RLock()
        self._last: dict[_Key, tuple[float, bool, bytes] | RawRenewal] = {}
        """(cluster, resource, namespace, name) -> when the object was last received, whether as a
        list item, and its JSON: for keyframes (not Nodes). The cluster is None for one cluster. A
        Lease whose next plain renewal may take the fast path (``_renewal``) has its ``RawRenewal``
        here instead, which holds the same (and, after a renewal of the fast path, that renewal's
        values instead of its JSON: built by its template only when a keyframe is written). One
        entry a Lease, changed in place by the fast path: no dictionary write and no new object
        kept for the collector to promote, 6,500 times a second at 65k."""
        self._fast = record_format == "columnar" and fast_renewals
        self._synced: set[tuple[str | None, str]] = set()
        self._health: dict[tuple[str | None, str], dict[str, Any]] = {}
        self._certs: dict[tuple[str | None, str], tuple[float, str]] = {}
        self._current: Recorder | ColumnarRecorder | None = None
        self._opened_at = 0.0
        self._n = max((s.n for s in list_segments(self.directory)), default=0)
        self._closed = False
        self.segments_written = 0
        self.lines = 0
        self.fast_lines = 0
        """Of ``lines``, the Lease renewals the fast path wrote."""
        self.stopped = ""
        """Why recording is stopped (``DISK_FULL``...), "" while it records."""
        self.failures = 0
        self.dropped_for_space = 0
        self._retry_clock = retry_clock
        self._retry_at = 0.0
        self._tries = 0
        self._latest = -math.inf
        """The latest receive time of a line written (``_writable``): a new segment's name is not earlier."""
        self._mine: list[Path] = []
        """The segments this recorder wrote (the rate of ``capacity_notice``)."""
        self._began: float | None = None
        self._noticed_at: float | None = None

    # --- the Recorder interface (what the sources call) ---

    def for_cluster(self, cluster: str) -> ClusterRecorder:
        """The writer of one cluster's lines (a hub of several clusters)."""
        return ClusterRecorder(self, cluster)  # type: ignore[arg-type]  # the same methods as a Recorder

    def write(self, resource: str, etype: str, obj: dict | None, t: float, listing: bool = False,
              cluster: str | None = None) -> None:
        if (etype == "MODIFIED" and resource == "leases" and not listing and self._fast
                and self._renewal(obj, t, cluster)):
            return
        self._write(resource, etype, obj, t, listing, cluster, None)

    def write_lease_watch(self, block: bytes | memoryview, events: list[Any], t: float,
                          cluster: str | None = None) -> None:
        """One read of the synced Lease watch, received at ``t``: its whole lines (``block``) and
        their structs (``events``: ``TypedDecoder.decode_watch``, which the hub's state applies in
        the same read). A plain renewal of a Lease the fast path knows is matched on the line's own
        bytes (no dict, no ``orjson.dumps``), and the renewals of a run of them are written as rows
        in one call, under one hold of the locks; any other line is decoded and written the general
        way, in its place, and its bytes teach the fast path. The same lines as ``write`` of each
        event's object."""
        if len(events) == 1:  # a read of one event (a quiet stream): no list of lines, one copy
            data = bytes(block)
            if data.endswith(b"}\n") and data.find(b"\n") == len(data) - 1:
                row = self._matched(data, events[0], cluster, 2)
                tm = micros(t)
                with self._lock:
                    if row is None or tm is None or not self._fast_row(row[1], row[2], t, tm):
                        self._watch_line(data[:-1], t, cluster)
                return
        lines = _watch_lines(block, len(events))
        if lines is None:
            write_watch_lines(lambda etype, obj: self.write("leases", etype, obj, t, cluster=cluster), block)
            return
        rows: list[_Row] = []
        with self._lock:
            for line, ev in zip(lines, events):
                row = self._matched(line, ev, cluster) if line.endswith(b"}") else None
                if row is not None:
                    rows.append(row)
                    continue
                if rows:
                    self._fast_rows(rows, t)  # (those before it first: the order is kept)
                    rows = []
                self._watch_line(line, t, cluster)
            if rows:
                self._fast_rows(rows, t)

    def _matched(self, line: bytes, ev: Any, cluster: str | None, tail: int = 1) -> _Row | None:
        """A watch line that is a plain renewal of a Lease the fast path knows (``lease_renewal.py``),
        matched on its own bytes (``tail``: the bytes after the object, its closing brace and
        whatever follows it); None: write it the general way."""
        if not self._fast or ev.type != "MODIFIED" or not line.startswith(_MODIFIED):
            return None
        meta = ev.object.metadata
        if meta is None:
            return None
        key: _Key = (cluster, "leases", str(meta.namespace or ""), str(meta.name or ""))
        fast = self._last.get(key)
        if type(fast) is not RawRenewal:
            return None
        values = fast.match(line[_MODIFIED_AT:-tail])
        return None if values is None else (key, fast, values, line)

    def _fast_rows(self, rows: list[_Row], t: float) -> None:
        """Matched renewals of one read as rows, in one call where there are several (under the
        lock). From the first the segment cannot take as a row (a new segment, whose dictionary
        learns its Leases again), one at a time: matched again if its Lease was learned again
        meanwhile, else the general way."""
        done = 0
        if len(rows) > 1 and not self._closed and not self.stopped:  # (one: the way below is shorter)
            seg = self._writable(t)
            if isinstance(seg, ColumnarRecorder):
                try:
                    done = seg.write_renewals([(f.tpl, *v) for _, f, v, _ in rows], t)
                except OSError as exc:
                    self._fail(exc)
                    return
                for _, fast, values, _ in rows[:done]:
                    fast.t, fast.listing, fast.values = t, False, values
                self.lines += done
                self.fast_lines += done
        tm = micros(t)
        for key, fast, values, line in rows[done:]:
            now = self._last.get(key)
            matched: tuple[int, int, int] | None = values
            if now is not fast:  # learned again by a line before it in this read
                matched = now.match(line[_MODIFIED_AT:-1]) if type(now) is RawRenewal else None
                fast = now  # type: ignore[assignment]
            if matched is None or tm is None or not self._fast_row(fast, matched, t, tm):
                self._watch_line(line, t, cluster=key[0])

    def _watch_line(self, line: bytes, t: float, cluster: str | None) -> None:
        """A line of the Lease watch the general way (its object's bytes teach the fast path)."""
        try:
            d = orjson.loads(line)
        except orjson.JSONDecodeError:
            return  # (the stream's own decode read it: the state has it)
        if not isinstance(d, dict):
            return
        etype, obj = d.get("type"), d.get("object")
        head = b'{"type":"' + str(etype).encode() + b'","object":'
        raw = line[len(head):-1] if line.startswith(head) and line.endswith(b"}") else None
        self._write("leases", str(etype), obj, t, False, cluster, raw)

    def _write(self, resource: str, etype: str, obj: dict | None, t: float, listing: bool,
               cluster: str | None, raw: bytes | None) -> None:
        """An event the general way (``raw``: the object's JSON as received, when the caller has
        it: a Lease's fast path learns from it)."""
        clean = sanitize(obj, resource)
        data = b"null" if obj is None else orjson.dumps(clean, default=str)  # once: file and keyframe
        with self._lock:
            if self._closed:
                return
            seg = self._writable(t)  # first: a keyframe written now must not hold this event yet
            key = None
            meta: Any = {}
            if etype == "SYNCED":
                self._synced.add((cluster, resource))
            elif resource != "nodes" and isinstance(obj, dict) and etype in ("ADDED", "MODIFIED", "DELETED"):
                meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
                key = (cluster, resource, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                if etype == "DELETED":
                    self._last.pop(key, None)
                else:
                    self._last[key] = (t, listing, data)  # a Lease's RawRenewal too: learned again below
            if seg is not None:
                try:
                    if isinstance(seg, ColumnarRecorder):
                        seg.write_sanitized(resource, etype, clean, t, listing, cluster, data)
                    else:
                        seg._write_line(_line(orjson.dumps(t), resource, etype, data, listing, cluster), t)
                except OSError as exc:
                    self._fail(exc)
                    return
                self.lines += 1
                if (key is not None and resource == "leases" and etype != "DELETED" and self._fast
                        and isinstance(seg, ColumnarRecorder)):
                    self._learn_renewal(key, obj, t, listing, data, seg, cluster, meta, raw)

    def _renewal(self, obj: Any, t: float, cluster: str | None) -> bool:
        """A Lease ``MODIFIED`` (not listed) written by the fast path (``lease_renewal.py``) when it is
        a plain renewal of the Lease's last event: the row the general way writes, without sanitizing
        and matching it; the keyframe keeps its values (``_keyframe`` rebuilds its line). False:
        not written, write it the general way."""
        meta = obj.get("metadata") if type(obj) is dict else None
        if type(meta) is not dict:
            return False
        key = (cluster, "leases", str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        fast = self._last.get(key)
        if type(fast) is not RawRenewal:
            return False
        try:
            values = fast.match(orjson.dumps(obj))
        except TypeError:  # not JSON: the general way says what it makes of it
            return False
        tm = micros(t)
        if values is None or tm is None:
            return False
        with self._lock:
            return self._fast_row(fast, values, t, tm)

    def _fast_row(self, fast: RawRenewal, values: tuple[int, int, int], t: float, tm: tuple[int, int]) -> bool:
        """The row of a renewal ``fast`` matched (under the lock). False: not written (recording
        stopped, a new segment whose dictionary has to learn the Lease): write it the general way."""
        if self._closed:
            return True
        if self.stopped:
            return False  # the general way tries to resume
        seg = self._writable(t)
        if not isinstance(seg, ColumnarRecorder):
            return False
        renew, rv, second = values
        fast.t, fast.listing, fast.values = t, False, values
        try:
            if not seg.write_renewal(fast.tpl, tm, renew, rv, second):
                return False  # a new segment: its dictionary learns the Lease the general way
        except OSError as exc:
            self._fail(exc)
            return True
        self.lines += 1
        self.fast_lines += 1
        return True

    def _learn_renewal(self, key: tuple, obj: Any, t: float, listing: bool, data: bytes, seg: ColumnarRecorder,
                       cluster: str | None, meta: dict, raw: bytes | None = None) -> None:
        """After a Lease event written the general way: whether its next renewal may take the fast
        path, matched on the JSON it comes in (``raw``, as received; else ``orjson.dumps`` of the
        object, what ``write`` matches a dict's renewal on)."""
        tpl = seg.lease_template(cluster, meta.get("namespace"), meta.get("name"))
        if tpl is None:
            return
        try:
            fast = learn_renewal(orjson.dumps(obj) if raw is None else raw, data, tpl)
        except TypeError:
            return
        if fast is not None:
            fast.t, fast.listing, fast.data = t, listing, data
            self._last[key] = fast

    def write_health(self, resource: str, t: float, cluster: str | None = None, **health: Any) -> None:
        with self._lock:
            if not self._closed:
                seg = self._writable(t)
                self._health.setdefault((cluster, resource), {}).update(health)
                self._put(seg, lambda: seg.write_health(resource, t, cluster=cluster, **health))

    def write_cert(self, node: str, not_after: float, source: str, t: float, cluster: str | None = None) -> None:
        with self._lock:
            if not self._closed:
                seg = self._writable(t)
                cur = self._certs.get((cluster, node))
                if cur is None or not_after > cur[0]:
                    self._certs[(cluster, node)] = (not_after, source)
                self._put(seg, lambda: seg.write_cert(node, not_after, source, t, cluster=cluster))

    def write_settings(self, t: float, settings: Settings, cluster: str | None = None) -> None:
        """Settings learned later (the server version): the next segment's header carries them (the
        cluster's entry of its ``clusters``, for several)."""
        with self._lock:
            if cluster is None:
                self.settings = settings
            else:
                for c in self.clusters or []:
                    if c.get("name") == cluster:
                        c["settings"] = settings_payload(settings)
            if not self._closed:
                seg = self._writable(t)
                self._put(seg, lambda: seg.write_settings(t, settings, cluster=cluster))

    def flush(self) -> None:
        with self._lock:
            if self._current is not None:
                self._put(self._current, self._current.flush)

    # --- a failed write (a full disk) ---

    def _put(self, seg: Recorder | ColumnarRecorder | None, write: Callable[[], None]) -> None:
        if seg is not None:
            try:
                write()
            except OSError as exc:
                self._fail(exc)

    def _writable(self, t: float) -> Recorder | ColumnarRecorder | None:
        """The segment to write a line received at ``t`` to (rotated when due), or None while
        recording is stopped; tries to resume once ``RETRY_SECONDS`` have passed since the last
        failure."""
        if self.stopped:
            seg = self._resume()
        else:
            try:
                seg = self._segment()
            except OSError as exc:
                self._fail(exc)
                seg = None
        if type(t) is float and t > self._latest:  # (after the rotation: the line is the new segment's; NaN is not)
            self._latest = t
        return seg

    def _resume(self) -> Recorder | ColumnarRecorder | None:
        """Recording is stopped: a new segment once a retry is due (and, for a full disk, there is room)."""
        if self._retry_clock() < self._retry_at:
            return None
        if self.stopped == DISK_FULL:
            self._drop_oldest_for_space()
            if not self._room():
                self._retry_at = self._retry_clock() + self._retry_wait()
                return None
        try:
            self.rotate(keyframe=True)
        except OSError as exc:
            self._fail(exc)
            return None
        log.warning("recording resumed in %s (%s)", self.directory, Path(self._current.path).name
                    if self._current is not None else "")
        self.stopped = ""
        self._tries = 0
        return self._current

    def _fail(self, exc: OSError) -> None:
        """Stop recording (the hub says so); the sources never see the error."""
        reason = stop_reason(exc)
        cur, self._current = self._current, None
        if cur is not None:
            cur.close()  # after a failed write it writes nothing more
        if reason != self.stopped:
            log.error("%s (%s, in %s): the fleet is still watched and served; trying again from %gs on",
                      reason, exc.strerror or exc, self.directory, RETRY_SECONDS)
        self.stopped = reason
        self.failures += 1
        self._retry_at = self._retry_clock() + self._retry_wait()

    def _retry_wait(self) -> float:
        self._tries += 1
        return min(RETRY_SECONDS * 2 ** (self._tries - 1), MAX_RETRY_SECONDS)

    def _room(self) -> bool:
        try:
            st = os.statvfs(self.directory)
        except OSError:
            return True  # cannot tell: try
        return st.f_bavail * st.f_frsize >= MIN_FREE_BYTES

    def _drop_oldest_for_space(self) -> None:
        """One oldest segment, while more than ``KEEP_WHEN_FULL`` are kept."""
        segs = [s for s in list_segments(self.directory) if s.path.exists()]
        if len(segs) > KEEP_WHEN_FULL:
            log.warning("disk full: dropping the oldest segment %s", segs[0].path.name)
            _unlink(segs[0].path)
            self.dropped_for_space += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._current is not None:
                self._current.close()
                self._current = None

    # --- rotation ---

    def _segment(self) -> Recorder | ColumnarRecorder:
        now = self.clock.now()
        cur = self._current
        if cur is not None and now - self._opened_at < self.segment_seconds:
            return cur
        self.rotate(now)
        assert self._current is not None
        return self._current

    def rotate(self, now: float | None = None, *, keyframe: bool | None = None) -> Path:
        """Close the current segment and open the next one, headed by a keyframe (not the first
        segment of a run, which has nothing to say yet; ``keyframe`` decides). Returns its path.
        Raises OSError when the new segment cannot be written (it is removed then)."""
        with self._lock:
            now = self.clock.now() if now is None else now
            if keyframe is None:
                keyframe = self._current is not None
            lines, earliest = self._keyframe(now) if keyframe else ([], now)
            cur, self._current = self._current, None
            if cur is not None:
                cur.close()
            self._n += 1
            # named by its opening, or by the latest line the segment before holds if that is later
            # (a source whose receive times run ahead of this clock, a wall clock stepped back): a
            # reader takes an instant in a later second from this segment's keyframe, which holds
            # those lines (``segments.select_segments``)
            named = self._latest if now < self._latest <= now + AHEAD_MAX else now
            path = self.directory / segment_name(named, self._n, RECORD_FORMATS[self.record_format])
            segment: dict[str, Any] = {"n": self._n, "keyframe_lines": len(lines)}
            if self.stopped:  # resumed: the stretch since the segment before was not recorded
                segment["after"] = self.stopped
            source = {**self.source, "segment": segment}
            # The header dates the segment from its earliest line: the keyframe's recent objects keep
            # their receive times (up to EXACT_SECONDS back), and a reader refuses lines from before
            # a recording started (sources/line_guards.TimeFrame).
            rec = None
            try:
                make = ColumnarRecorder if self.record_format == "columnar" else Recorder
                rec = make(str(path), source, self.settings, started_at=earliest, clusters=self.clusters)
                for line in lines:
                    rec._write_line(line, now)  # complete v1 lines, written as they are
                rec.flush()
            except OSError:
                if rec is not None:
                    rec.error = rec.error or OSError(errno.EIO, "abandoned")
                    rec.close()
                _unlink(path)  # a keyframe cut short: of no use to a reader
                raise
            self._current = rec
            self._opened_at = now
            self._mine.append(path)
            if self._began is None:
                self._began = now
            self.segments_written += 1
            self._retain(now)
            return path

    def _keyframe(self, t: float) -> tuple[list[bytes], float]:
        """The fleet at ``t`` as v1 lines (see the module docstring), and the earliest time written.

        Objects received in the last ``EXACT_SECONDS`` keep their receive time and list flag, so a
        replay of this segment alone sees each recent lease renewal arrive when the hub saw it
        (lease ages exactly the hub's); the lines come after the ``SYNCED`` lines for that. Older
        objects (a stopped kubelet's lease) are written as list items at ``t``: their age is then
        measured from the lease's renewTime, like any listed lease. Nodes, SYNCED lines and those
        old objects, certificate dates and health do not depend on their time; they go first, at the
        earliest time written."""
        recent, old = [], []
        for (cluster, resource, _, _), entry in self._last.items():
            rt, listing, obj = entry if type(entry) is tuple else entry.last()
            (recent if rt >= t - EXACT_SECONDS else old).append((rt, listing, cluster, resource, obj))
        recent.sort(key=lambda x: x[0])
        earliest = min(recent[0][0], t) if recent else t
        first = orjson.dumps(earliest)
        out: list[bytes] = []
        cur = self._current
        last_json = cur.last_json if isinstance(cur, ColumnarRecorder) and not self.stopped else None
        for cluster, records in self._node_records():
            for rec in records.values():
                data = last_json(cluster, "nodes", rec.name) if last_json is not None else None
                if data is None:
                    data = orjson.dumps(node_to_dict(rec))
                out.append(_line(first, "nodes", "ADDED", data, True, cluster))
        for _, _, cluster, resource, obj in old:
            out.append(_line(first, resource, "ADDED", obj, True, cluster))
        for cluster in self._cluster_names():
            for resource in RESOURCES:
                if (cluster, resource) in self._synced:
                    out.append(_line(first, resource, "SYNCED", b"null", True, cluster))
        tt = first  # certificates and health do not depend on their line's time: with the rest, first
        for (cluster, node), (not_after, source) in sorted(self._certs.items(), key=_by_name):
            out.append(b'{"t":' + tt + _cluster(cluster) + b',"cert":'
                       + orjson.dumps({"node": node, "not_after": not_after, "source": source}) + b"}")
        for (cluster, resource), health in sorted(self._health.items(), key=_by_name):
            out.append(b'{"t":' + tt + _cluster(cluster) + b',"health":'
                       + orjson.dumps({"resource": resource, **health}, default=str) + b"}")
        for rt, listing, cluster, resource, obj in recent:
            out.append(_line(orjson.dumps(rt), resource, "MODIFIED", obj, listing, cluster))
        return out, earliest

    def _cluster_names(self) -> list[str | None]:
        """The clusters of the recording, in the header's order; [None] for one cluster."""
        return [c.get("name") for c in self.clusters] if self.clusters is not None else [None]

    def _node_records(self) -> list[tuple[str | None, dict]]:
        """(cluster, its Node records by name) for each cluster; (None, records) for one."""
        if self.clusters is None:
            return [(None, self.records())] if self.records is not None else []
        if self.cluster_records is None:
            return []
        return [(name, self.cluster_records(name)) for name in self._cluster_names() if name is not None]

    def bytes_per_second(self) -> float | None:
        """What this recorder has written a second since it began (its segments still on disk over
        the time they span; None before ``RATE_WARMUP`` seconds of it)."""
        with self._lock:
            now = self.clock.now()
            if self._began is None or now - self._began < RATE_WARMUP:
                return None
            kept = [p for p in self._mine if p.exists()]
            if not kept:
                return None
            first = next((s.start for s in list_segments(self.directory) if s.path == kept[0]), self._began)
            span = now - max(first, self._began)
            return sum(p.stat().st_size for p in kept) / span if span > 0 else None

    def capacity_notice(self) -> str | None:
        """Once after ``RATE_WARMUP`` seconds, then once per segment: how long the size cap holds at
        the rate written so far, and whether that is less than ``keep_seconds`` (None: nothing to say)."""
        with self._lock:
            if self._noticed_at is not None and self._noticed_at == self._opened_at:
                return None
            rate = self.bytes_per_second()
            if rate is None:
                return None
            first = self._noticed_at is None
            self._noticed_at = self._opened_at
        if not first and (self.keep_bytes is None or self.keep_seconds is None
                          or self.keep_bytes / max(rate, 1e-9) >= self.keep_seconds):
            return None  # after the first: only when the cap no longer holds what --keep asks
        what = f"flight recorder ({self.record_format}): {_size(rate)}/s"
        if self.keep_bytes is None:
            return f"{what}; no size cap"
        holds = self.keep_bytes / max(rate, 1e-9)
        line = f"{what}; --keep-bytes {_size(self.keep_bytes)} holds {_age(holds)} at this rate"
        if self.keep_seconds is not None and holds < self.keep_seconds:
            line += (f", less than --keep {_age(self.keep_seconds)}: the oldest segments go first "
                     f"(--keep-bytes {_size(rate * self.keep_seconds * 1.1)} would hold it)")
        elif self.keep_seconds is not None:
            line += f"; --keep {_age(self.keep_seconds)} removes them first"
        return line

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


def _size(n: float) -> str:
    for unit, f in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if n >= f:
            return f"{n / f:.1f}{unit}"
    return f"{n:.0f}B"


def _age(seconds: float) -> str:
    """``45m``, ``23.5h``, ``2,303d`` (a small fleet's cap can hold years: not ``55285.3h``)."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.0f}d"
    return f"{seconds / 3600:.1f}h" if seconds >= 3600 else f"{seconds / 60:.0f}m"


def _line(t: bytes, resource: str, etype: str, obj: bytes, listing: bool, cluster: str | None = None) -> bytes:
    return (b'{"t":' + t + _cluster(cluster) + b',"resource":"' + resource.encode() + b'","type":"'
            + etype.encode() + b'","object":' + obj + (b',"list":true}' if listing else b"}"))


def _cluster(cluster: str | None) -> bytes:
    """A line's cluster field, right after its time (as ``recording.Recorder`` writes it), or nothing."""
    return b"" if cluster is None else b',"cluster":' + orjson.dumps(cluster)


def _by_name(item: tuple) -> tuple:
    """Keyframe order of (cluster, name) keys: by cluster ("" for the only one), then name."""
    (cluster, name), _ = item
    return (cluster or "", name)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
