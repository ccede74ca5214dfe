"""The index of a recording: time, byte offset and length of every event line, read once.

Gzipped files, stdin and kubectl logs are first copied (normalized to v1 lines) into a temporary
spool file so that every format gets the same random access; a plain file is mapped in memory
(``mmap``), so reading an event again costs no system call.

The index is kept in time order as it grows (a line that steps back is inserted where it belongs),
and may be built in the background (``background=True``, the dashboard: its first frame needs only
the first events): readers see the events up to ``REORDER_WINDOW`` seconds before the newest line
read (``len(index)``), which no later line can precede any more, and ``wait_for(t)`` blocks until
the index has reached ``t``. Indexing reads only each line's time and kind (``lines.stamp``), but
for the recording's opening, which it keeps parsed: every state a replay builds starts with it.
Once the start is shown, a background index gives way to the dashboard's first frame
(``hold_background``).
"""

from __future__ import annotations

import bisect
import copy
import gc
import gzip
import math
import mmap
import os
import tempfile
import threading
import time
from array import array
from typing import IO, Any, Callable, Iterator

from ...core.objects import NodeRecord
from ...core.settings import Settings
from ...core.views import WatchHealth
from ..kubectl_format import iter_blocks, looks_like_kubectl
from ..kubectl_format import iter_entries as kubectl_entries
from ..line_guards import DuplicateFilter, TimeFrame
from ..recording import (
    Entry,
    RecordingError,
    entry_line,
    iter_lines,
    parse_header,
)
from ..recording_input import close_input, open_binary
from .clusters import (
    RecordedCluster,
    ReplayState,
    header_settings,
    misplaced,
    new_state,
    recorded_clusters,
    settings_payload_of,
    target,
)
from .frozen import FreezeHold
from .lines import parse, stamp, stamp_parsed

OUT_OF_ORDER_REPORT = 1.0
"""Lines that step back in time by more than this many seconds are reported (less is thread jitter)."""
REORDER_WINDOW = 30.0
"""While the index grows, events this close to the newest line read are not shown to readers yet: a
later line may still step back before them. A line later than that is placed at the earliest
position not yet shown (and reported)."""
PUBLISH_EVERY = 4096
"""Lines indexed between two updates of what readers see."""
FIRST_FRAME_SECONDS = 2.0
"""How long background work (the rest of the index, keyframes, the timeline's history) gives way
to the dashboard's first frame once the start is shown (``hold_background``)."""
NO_EVENTS = "no usable events in the recording"
OPENING_MAX = 100_000
"""Events of the opening kept parsed, at most (``EventIndex._opening``)."""


class EventIndex:
    """Where each event of a recording is, in time order; ``problems`` says what was skipped and why."""

    def __init__(self, path: str, background: bool = False,
                 progress: Callable[[float, float], None] | None = None) -> None:
        """``progress(t, inf)``: called every ``PUBLISH_EVERY`` events indexed, ``t`` the latest
        event's time (a command's progress line while a long recording is indexed)."""
        self.problems: list[str] = []
        self._progress = progress
        self.header: dict = {}
        self.clusters: list[RecordedCluster] | None = None
        """The clusters of a recording of several (``clusters.py``); None: one cluster."""
        self.format = "v1"
        self.received_known = True
        """False for kubectl logs: they carry no receive times (an event's time is its object's)."""
        self._times = array("d")
        self._offsets = array("q")
        self._lengths = array("l")
        self._lines = array("I")
        """Line number of each event in the input (for the messages about wild times)."""
        self._frame: TimeFrame | None = None
        self._background = background
        self._spool: IO[bytes] | None = None
        self._own_file: IO[bytes] | None = None
        self._map: mmap.mmap | None = None
        self._fd = -1
        self._shown = 0
        """Events readers may use: [0, shown) is final."""
        self._shown_until = -math.inf
        """Every event up to this time is among the shown ones."""
        self._changed = threading.Condition()
        self._complete = threading.Event()
        self._closed = False
        self._late = 0
        self._too_late = 0
        self._worst = 0.0
        self._opening: dict[int, Entry] | None = {}
        """The events of the recording's opening (up to the first events shown to readers), parsed
        while they are indexed, by offset. Every state a replay builds starts with them (the replayed
        one, the keyframes', the timeline's): with a list of 40,000 Pods at the start, parsing them
        once instead of once per state was most of the time to a replay's first frame."""
        self._parsed: Entry | None = None
        self.foreground: Any = None
        """The state the dashboard shows: applying to it is never held back (``hold_background``)."""
        self._hold_until = 0.0
        self._released = threading.Event()
        self._gc_paused = False
        self._frozen = FreezeHold()
        stream = open_binary(path)
        try:
            rest = self._open(path, stream)
        except BaseException:
            close_input(stream)
            raise
        if background:
            threading.Thread(target=self._index_rest, args=(stream, rest), name="replay-index", daemon=True).start()
            with self._changed:
                self._changed.wait_for(lambda: self._shown > 0 or self._complete.is_set())
        else:
            self._index_rest(stream, rest)

    @property
    def times(self) -> array:
        """Time of each event, ascending (read-only by convention: ``bisect`` it below ``len(self)``)."""
        return self._times

    def __len__(self) -> int:
        """Events indexed for good (all of them once ``complete``)."""
        return self._shown

    @property
    def complete(self) -> bool:
        """The whole recording is indexed."""
        return self._complete.is_set()

    @property
    def start(self) -> float:
        """Time of the first event."""
        return self._times[0] if self._shown else 0.0

    @property
    def end(self) -> float:
        """Time of the last event indexed so far (of the recording, once ``complete``)."""
        return self._times[self._shown - 1] if self._shown else 0.0

    def count_until(self, t: float) -> int:
        """How many indexed events have a time <= t."""
        return bisect.bisect_right(self._times, t, 0, self._shown)

    def wait_for(self, t: float, timeout: float | None = None) -> bool:
        """Block until every event with a time <= t is indexed (or the whole recording is)."""
        with self._changed:
            if self._complete.is_set() or self._shown_until >= t:
                return True
        self.release_background()  # someone waits for the index: nothing to give way to any more
        with self._changed:
            return self._changed.wait_for(lambda: self._complete.is_set() or self._shown_until >= t, timeout)

    def wait_complete(self, timeout: float | None = None) -> bool:
        self.release_background()
        return self._complete.wait(timeout)

    def hold_background(self, seconds: float) -> None:
        """Let the dashboard draw its first frame: for ``seconds`` (or until ``release_background``,
        or until someone waits for the index), the indexing thread and whatever applies events to a
        state other than ``foreground`` (keyframes, the timeline's history) pause.

        Why: all of them are Python, and on one GIL a second busy thread takes half the time of the
        thread drawing the first frame (measured: the dashboard's first paint 0.5 s alone, 1 s beside
        the indexing thread). The first frame needs none of them: the start is indexed already."""
        self._hold_until = time.monotonic() + seconds
        self._released.clear()

    def release_background(self) -> None:
        self._hold_until = 0.0
        self._released.set()

    def _give_way(self) -> None:
        """Wait while the background is held (``hold_background``)."""
        while not self._closed:
            left = self._hold_until - time.monotonic()
            if left <= 0:
                return
            self._released.wait(min(left, 0.05))

    def wait_more(self, than: int, timeout: float) -> None:
        """Block until more than ``than`` events are indexed, the index is complete, or ``timeout``."""
        with self._changed:
            self._changed.wait_for(lambda: self._shown > than or self._complete.is_set(), timeout)

    def read(self, i: int) -> Entry | None:
        """Event ``i``, parsed again from the file (Nodes and Leases as records)."""
        off, n = self._offsets[i], self._lengths[i]
        opening = self._opening
        if opening is not None:
            e = opening.get(off)
            if e is not None:
                if type(e.obj) is NodeRecord:  # applying may rewrite its taints: each state its own
                    e = Entry(e.line, e.t, e.resource, e.etype, copy.copy(e.obj), e.listing, e.health, e.cluster)
                return e
        m = self._map
        line = m[off:off + n] if m is not None and off + n <= len(m) else os.pread(self._fd, n, off)
        return parse(0, line, [])

    def apply_range(self, state: ReplayState, a: int, b: int) -> None:
        """Apply events [a, b) to ``state``."""
        if state is not self.foreground:
            self._give_way()
        known = self.received_known
        read = self.read
        with state.batch():
            for i in range(a, b):
                e = read(i)
                if e is not None:
                    apply_entry(state, e, known)

    def close(self) -> None:
        self._closed = True
        self._released.set()
        self._complete.wait(5)  # the indexing thread stops at its next line
        for f in (self._map, self._spool, self._own_file):
            if f is not None:
                try:
                    f.close()
                except (OSError, BufferError):
                    pass
        self._map = self._spool = self._own_file = None
        self._opening = None
        self._frozen.thaw()

    def settings(self, given: Settings | None) -> Settings:
        """``given`` (completed with the server version of the header), else the header's settings."""
        return header_settings(self.header, given, self.problems)

    def new_state(self, given: Settings | None = None) -> ReplayState:
        """An empty state for this recording: one per cluster for a recording of several, each with
        its recorded settings and ``given``'s over them; else ``FleetState(self.settings(given))``."""
        return new_state(self.header, self.clusters, given, self.problems)

    def source_name(self) -> str | None:
        """The recorded source's name, from the header."""
        src = self.header.get("source") if isinstance(self.header.get("source"), dict) else {}
        name = src.get("name")
        return str(name) if name else None

    # --- loading ----------------------------------------------------------------------------------

    def _open(self, path: str, stream: Any) -> Iterator[tuple[int, bytes]]:
        """Read the first line (header or kubectl), set up random access; the lines that remain."""
        lines = iter_lines(stream, self.problems)
        first = None
        for n, line in lines:
            if line.strip():
                first = (n, line)
                break
        if first is None:
            raise RecordingError(f"{path}: empty, nothing to replay")
        plain = path != "-" and getattr(stream, "name", None) == path and not isinstance(stream, gzip.GzipFile)
        if looks_like_kubectl(first[1]):
            self.format = "kubectl"
            self.received_known = False
            self._spool = tempfile.TemporaryFile(prefix="nodewatch-replay-")  # noqa: SIM115 - closed in close()
            self._fd = self._spool.fileno()
            return _chain(first, iter_blocks(stream, self.problems, first[0]))  # the rest read in blocks
        self.header = parse_header(first[1])
        self.clusters = recorded_clusters(self.header, self.problems)
        self._frame = TimeFrame(self.header, self.problems)
        if plain:
            self._own_file = open(path, "rb")  # noqa: SIM115 - closed in close()
            self._fd = self._own_file.fileno()
            try:
                self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
            except (ValueError, OSError):
                self._map = None  # an empty or unmappable file: pread
        else:
            self._spool = tempfile.TemporaryFile(prefix="nodewatch-replay-")  # noqa: SIM115 - closed in close()
            self._fd = self._spool.fileno()
        return lines

    def _index_rest(self, stream: Any, lines: Iterator[tuple[int, bytes]]) -> None:
        # the opening (kept parsed) is tens of thousands of records at once, none in a cycle: the
        # collector would walk them again and again for nothing
        self._gc_paused = gc.isenabled()
        gc.disable()
        try:
            if self.format == "kubectl":
                self._spool_entries(kubectl_entries(lines, self.problems))
            elif self._own_file is not None:
                self._index_plain(stream, lines)
            else:
                self._spool_v1(lines)
        except (OSError, ValueError) as exc:
            if not self._closed:
                self.problems.append(f"reading the recording failed: {type(exc).__name__}: {exc}")
        finally:
            self._resume_gc()
            close_input(stream)
            self._finish()

    def _resume_gc(self) -> None:
        if self._gc_paused:
            self._gc_paused = False
            gc.enable()

    def _finish(self) -> None:
        if self._spool is not None:
            try:
                self._spool.flush()
            except (OSError, ValueError):
                pass
        if self._frame is not None:
            # A lone line far from all others does not move the recording's frame; readers of a
            # background index may have used the first events already, so then only the end moves.
            self._keep(*self._frame.trim(self._times, self._lines, start_fixed=self._background and self._shown > 0))
        if not len(self._times):
            self.problems.append(NO_EVENTS)
        if self._late:
            extra = (f", {self._too_late} of them more than {REORDER_WINDOW:g}s late: replayed where they came"
                     if self._too_late else "")
            self.problems.append(f"{self._late} lines are out of time order (up to {self._worst:.1f}s back); "
                                 f"replayed in time order{extra}")
        with self._changed:
            self._shown = len(self._times)
            self._complete.set()
            self._changed.notify_all()

    def _index_plain(self, stream: Any, lines: Any) -> None:
        """Index an uncompressed v1 file in place: offsets into the file itself."""
        dup = DuplicateFilter(2048)
        pos = stream.tell()
        problems = self.problems
        reported = len(problems)
        for n, line in lines:
            if len(problems) != reported:  # iter_lines skipped an over-long line: find our place again
                reported = len(problems)
                pos = stream.tell() - len(line)
            here = pos
            pos += len(line)
            e = self._check(n, line, dup)
            if e is not None:
                self._keep_parsed(here)
                self._add(e.t, here, len(line), n)
            if self._closed:
                return

    def _keep_parsed(self, offset: int) -> None:
        """Keep the event ``_check`` parsed whole (the opening's), at its offset."""
        if self._parsed is not None and self._opening is not None:
            self._opening[offset] = self._parsed
        self._parsed = None

    def _spool_v1(self, lines: Any) -> None:
        spool = self._spool
        assert spool is not None
        dup = DuplicateFilter(2048)
        pos = 0
        for n, line in lines:
            e = self._check(n, line, dup)
            if e is None:
                continue
            if not line.endswith(b"\n"):
                line += b"\n"
            spool.write(line)
            self._keep_parsed(pos)
            self._add(e.t, pos, len(line), n)
            pos += len(line)
            if self._closed:
                return

    def _spool_entries(self, entries: Any) -> None:
        """Spool a kubectl log's entries as v1 lines, then index them in time order at once.

        Why not ``_add`` line by line: a concatenated log comes section by section (``cat
        nodes.log leases.log``), each placed by its own objects' times (``kubectl_format``), so the
        leases step back to the start after the last Node event. Shown to readers as the index grew,
        they came "too late" for what was shown already; inserted one by one, each moved the
        arrays. The index is published whole: stable-sorted by time, each section's order kept."""
        spool = self._spool
        assert spool is not None
        pos = 0
        times, offsets, lengths, lines = array("d"), array("q"), array("l"), array("I")
        for e in entries:
            data = entry_line(e)
            spool.write(data)
            times.append(e.t if e.t is not None else 0.0)
            offsets.append(pos)
            lengths.append(len(data))
            lines.append(min(e.line, 2**32 - 1))
            pos += len(data)
            if self._closed:
                return
        order = sorted(range(len(times)), key=times.__getitem__)
        self._times = array("d", (times[i] for i in order))
        self._offsets = array("q", (offsets[i] for i in order))
        self._lengths = array("l", (lengths[i] for i in order))
        self._lines = array("I", (lines[i] for i in order))

    def _check(self, n: int, line: bytes, dup: DuplicateFilter) -> Entry | None:
        opening = self._opening
        if opening is not None and not self._shown and len(opening) < OPENING_MAX:
            e, self._parsed = stamp_parsed(n, line, self.problems)
        else:
            e, self._parsed = stamp(n, line, self.problems), None
        if e is None or (self._frame is not None and not self._frame.admit(e)):
            return None
        if e.etype == "SETTINGS":
            learn_version(self.header, e)
            return None
        why = misplaced(e, self.clusters)
        if why is not None:
            self.problems.append(why)
            return None
        prev = dup.seen(line, n)
        if prev is not None:
            self.problems.append(f"line {n}: duplicate of line {prev}, skipped")
            return None
        return e

    def _add(self, t: float | None, offset: int, length: int, line: int) -> None:
        """One event into the index, in time order; every ``PUBLISH_EVERY``, show readers more."""
        t = t if t is not None else 0.0
        times = self._times
        if not times or t >= times[-1]:
            times.append(t)
            self._offsets.append(offset)
            self._lengths.append(length)
            self._lines.append(min(line, 2**32 - 1))
        else:
            back = times[-1] - t
            if back > OUT_OF_ORDER_REPORT:
                self._late += 1
                self._worst = max(self._worst, back)
            shown = self._shown
            i = bisect.bisect_right(times, t, shown)  # never before what readers may have used
            if i == shown and shown and times[shown - 1] > t:
                self._too_late += 1
            times.insert(i, t)
            self._offsets.insert(i, offset)
            self._lengths.insert(i, length)
            self._lines.insert(i, min(line, 2**32 - 1))
        if len(times) % PUBLISH_EVERY == 0:
            if self._progress is not None:
                self._progress(times[-1], math.inf)
            shown = self._shown
            self._publish()
            if self._shown:
                if not shown:  # the opening is in: readers may show the start
                    self._resume_gc()
                    if self._opening:
                        self._frozen.freeze()  # kept for the replay's life: out of the collector's way
                    if self._background:
                        self.hold_background(FIRST_FRAME_SECONDS)  # the first frame needs nothing more
                self._give_way()

    def _keep(self, lo: int, hi: int) -> None:
        """Keep events [lo, hi) only (the frame dropped wild times at the ends)."""
        if (lo, hi) != (0, len(self._times)):
            self._times, self._offsets = self._times[lo:hi], self._offsets[lo:hi]
            self._lengths, self._lines = self._lengths[lo:hi], self._lines[lo:hi]

    def _frontier(self) -> float:
        """Events up to this time are final: no line read later may step back before it."""
        return self._times[-1] - REORDER_WINDOW if len(self._times) else -math.inf

    def _publish(self) -> None:
        if self._spool is not None:
            self._spool.flush()  # what readers may read is in the file
        frontier = self._frontier()
        shown = bisect.bisect_right(self._times, frontier)
        if shown > self._shown:
            with self._changed:
                self._shown = shown
                self._shown_until = frontier
                self._changed.notify_all()


def learn_version(header: dict, e: Entry) -> bool:
    """A SETTINGS line carrying the server version the header did not know: into the header (into
    its cluster's settings, in a recording of several). True when it was learned."""
    hs = settings_payload_of(header, e.cluster)
    if isinstance(hs, dict) and not hs.get("server_version") and isinstance(e.health, dict):
        version = e.health.get("server_version")
        if isinstance(version, str) and version:
            hs["server_version"] = version  # learned after the header was written
            return True
    return False


def apply_entry(state: ReplayState, e: Entry, received_known: bool) -> None:
    """One recorded line into ``state`` (into its cluster's, for several): an event, a watch-health
    change or a certificate."""
    if e.etype == "SETTINGS":
        return
    one = target(state, e)
    if one is None:
        return  # no cluster of the recording's (reported when it was read)
    state = one
    if e.etype == "CERT":
        c = e.health or {}
        state.remember_cert(c["node"], c["not_after"], f"{c['source']} (recorded)")
        return
    if e.etype == "HEALTH":
        fields = {k: v for k, v in (e.health or {}).items() if k in WatchHealth.__slots__ and k != "resource"}
        try:
            state.update_health(e.resource, **fields)
        except (TypeError, ValueError):
            pass
        return
    state.apply(e.resource, e.etype, e.obj, e.t if received_known else None, e.listing)


def _chain(first: tuple[int, bytes], rest: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    yield first
    yield from rest
