"""Replay a recording (v1 or a kubectl watch log) into a fresh FleetState, in virtual time.

Why an index and keyframes: a one-hour recording of 5,000 nodes holds about two million events
(every lease renews every 10s). The file is read once to build an index (time, byte offset, length
of each event line) and events are parsed again only when applied, so memory holds the index, not
the objects. A background pass applies everything once on a scratch state and keeps a *keyframe*
(a copy of the state's records) every ``KEYFRAME_EVENTS`` events; ``seek(t)`` restores the nearest
keyframe before ``t`` and applies the few events between, so the state becomes exactly what it was
at ``t``, in a fraction of a second, backward or forward.

Gzipped files, stdin and kubectl logs are first copied (normalized to v1 lines) into a temporary
spool file so that every format gets the same random access.
"""

from __future__ import annotations

import bisect
import gc
import gzip
import heapq
import math
import os
import tempfile
import threading
from array import array
from typing import IO, Any

import orjson

from ..core.clock import VirtualClock
from ..core.fleet import FleetState
from ..core.settings import Settings
from ..core.timeutil import parse_when
from ..core.views import WatchHealth
from .kubectl_format import iter_entries as kubectl_entries
from .kubectl_format import looks_like_kubectl
from .recording import (
    DuplicateFilter,
    Entry,
    RecordingError,
    iter_lines,
    open_binary,
    parse_header,
    parse_line,
)

KEYFRAME_EVENTS = 20_000
"""A keyframe every so many events: seek applies at most this many (about 0.2s)."""
OUT_OF_ORDER_REPORT = 1.0
"""Lines that step back in time by more than this many seconds are reported (less is thread jitter)."""
RULE_EPSILON = 0.001
"""Rule thresholds are strict (``age > grace``): a change is seen just after its threshold."""


class ReplaySource:
    """A recording as a Source, with virtual-time controls as ``.replay``."""

    def __init__(self, path: str, settings: Settings | None = None, speed: float = 1.0,
                 start_at: str | None = None) -> None:
        self.path = path
        self.problems: list[str] = []
        self.header: dict = {}
        self.format = "v1"
        self._received_known = True
        self._times = array("d")
        self._offsets = array("q")
        self._lengths = array("l")
        self._spool: IO[bytes] | None = None
        self._fd = -1
        self._own_file: IO[bytes] | None = None
        self._load(path)
        self.settings = self._settings_from_header(settings)
        self.state = FleetState(self.settings)
        self.t_start = self._times[0] if len(self._times) else 0.0
        self.t_end = self._times[-1] if len(self._times) else self.t_start
        self.clock = VirtualClock(self.t_start, speed=speed, paused=True)
        self.replay = ReplayControlsImpl(self)
        src = self.header.get("source") if isinstance(self.header.get("source"), dict) else {}
        origin = f" ({src.get('name')})" if src.get("name") else ""
        self.name = f"replay {'stdin' if path == '-' else os.path.basename(path)}{origin}"
        self._lock = threading.RLock()  # guards cursor + state rebuilds
        self._cursor = 0
        """Number of events applied to ``state``: events [0, cursor) are in it."""
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._keyframes: list[tuple[int, dict]] = []
        self._froze = False
        self._kf_index: list[int] = []
        self._kf_done = threading.Event()
        self._kf_thread = threading.Thread(target=self._build_keyframes, name="replay-keyframes", daemon=True)
        self._kf_thread.start()
        self.start_position = self.t_start
        if start_at:
            try:
                self.start_position = parse_when(start_at, self.t_start)
            except ValueError as exc:
                raise RecordingError(str(exc)) from None
        self.seek(self.start_position)

    # --- loading ----------------------------------------------------------------------------------

    def _load(self, path: str) -> None:
        stream = open_binary(path)
        try:
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
                self._received_known = False
                self._spool_entries(kubectl_entries(_chain(first, lines), self.problems))
            else:
                self.header = parse_header(first[1])
                if plain:
                    self._index_plain(stream, lines)
                else:
                    self._spool_v1(lines)
        finally:
            if stream is not _stdin():
                stream.close()
        if not len(self._times):
            self.problems.append("no usable events in the recording")
        self._sort_if_needed()
        if self._spool is not None:
            self._spool.flush()
            self._fd = self._spool.fileno()
        else:
            self._own_file = open(path, "rb")  # noqa: SIM115 - closed in stop()
            self._fd = self._own_file.fileno()

    def _index_plain(self, stream: Any, lines: Any) -> None:
        """Index an uncompressed v1 file in place: offsets into the file itself."""
        dup = DuplicateFilter(2048)
        for n, line in lines:
            # iter_lines reads with readline, so the position is exact right after each line
            here = stream.tell() - len(line)
            e = self._check(n, line, dup)
            if e is not None:
                self._add(e.t, here, len(line))

    def _spool_v1(self, lines: Any) -> None:
        spool = self._new_spool()
        dup = DuplicateFilter(2048)
        pos = 0
        for n, line in lines:
            e = self._check(n, line, dup)
            if e is None:
                continue
            if not line.endswith(b"\n"):
                line += b"\n"
            spool.write(line)
            self._add(e.t, pos, len(line))
            pos += len(line)

    def _spool_entries(self, entries: Any) -> None:
        spool = self._new_spool()
        pos = 0
        for e in entries:
            d: dict[str, Any] = {"t": e.t, "resource": e.resource, "type": e.etype, "object": e.obj}
            if e.listing:
                d["list"] = True
            data = orjson.dumps(d) + b"\n"
            spool.write(data)
            self._add(e.t, pos, len(data))
            pos += len(data)

    def _new_spool(self) -> IO[bytes]:
        self._spool = tempfile.TemporaryFile(prefix="nodewatch-replay-")  # noqa: SIM115
        return self._spool

    def _check(self, n: int, line: bytes, dup: DuplicateFilter) -> Entry | None:
        e = parse_line(n, line, self.problems)
        if e is None:
            return None
        if e.etype == "SETTINGS":
            hs = self.header.get("settings")
            if isinstance(hs, dict) and not hs.get("server_version") and isinstance(e.health, dict):
                version = e.health.get("server_version")
                if isinstance(version, str) and version:
                    hs["server_version"] = version  # learned after the header was written
            return None
        prev = dup.seen(line, n)
        if prev is not None:
            self.problems.append(f"line {n}: duplicate of line {prev}, skipped")
            return None
        return e

    def _add(self, t: float | None, offset: int, length: int) -> None:
        self._times.append(t if t is not None else 0.0)
        self._offsets.append(offset)
        self._lengths.append(length)

    def _sort_if_needed(self) -> None:
        times = self._times
        worst = 0.0
        late = 0
        hi = -math.inf
        ordered = True
        for t in times:
            if t < hi:
                ordered = False
                if hi - t > OUT_OF_ORDER_REPORT:
                    late += 1
                    worst = max(worst, hi - t)
            else:
                hi = t
        if ordered:
            return
        if late:
            self.problems.append(
                f"{late} lines are out of time order (up to {worst:.1f}s back); replayed in time order")
        order = sorted(range(len(times)), key=times.__getitem__)  # stable: equal times keep file order
        self._times = array("d", (times[i] for i in order))
        self._offsets = array("q", (self._offsets[i] for i in order))
        self._lengths = array("l", (self._lengths[i] for i in order))

    def _settings_from_header(self, given: Settings | None) -> Settings:
        hs = self.header.get("settings") if isinstance(self.header.get("settings"), dict) else {}
        version = hs.get("server_version") if isinstance(hs.get("server_version"), str) else None
        if given is not None:
            return given if given.server_version else given.with_server_version(version)
        s = Settings(server_version=version)
        overridden = hs.get("overridden")
        if isinstance(overridden, list):
            chosen = {}
            for name in overridden:
                v = hs.get("grace_seconds" if name == "grace_seconds" else name)
                if isinstance(name, str) and isinstance(v, (int, float)) and not isinstance(v, bool):
                    chosen[name] = v
            try:
                s = s.override(**chosen)
            except (ValueError, TypeError):
                self.problems.append("header: unusable settings overrides ignored")
        return s

    # --- applying ---------------------------------------------------------------------------------

    def _read(self, i: int) -> Entry | None:
        line = os.pread(self._fd, self._lengths[i], self._offsets[i])
        return parse_line(0, line, [])

    def _apply_range(self, state: FleetState, a: int, b: int) -> None:
        """Apply events [a, b) to ``state``."""
        known = self._received_known
        with state.lock:
            for i in range(a, b):
                e = self._read(i)
                if e is None:
                    continue
                _apply_entry(state, e, known)

    def event_count(self) -> int:
        return len(self._times)

    # --- keyframes --------------------------------------------------------------------------------

    def _build_keyframes(self) -> None:
        scratch = FleetState(self.settings)
        n = len(self._times)
        prev: dict | None = None
        try:
            for a in range(0, n, KEYFRAME_EVENTS):
                if self._stopped.is_set():
                    return
                if a:
                    prev = scratch.snapshot(prev)
                    self._keyframes.append((a, prev))
                    self._kf_index.append(a)
                    self._freeze_keyframes()
                self._apply_range(scratch, a, min(n, a + KEYFRAME_EVENTS))
        except (OSError, ValueError):
            return  # the source was stopped and its file closed
        finally:
            self._kf_done.set()

    def _freeze_keyframes(self) -> None:
        """Keep the keyframes out of the cyclic collector's full passes (see ``_freeze_survivors``)."""
        global _freezers
        with _freeze_lock:
            if self._stopped.is_set():
                return
            if not self._froze:
                self._froze = True
                _freezers += 1
            _freeze_survivors()

    def _thaw_keyframes(self) -> None:
        """Undo ``_freeze_keyframes`` once no running source needs it: frozen objects are never
        collected as cycles, and this source (the ``replay`` controls point back at it) is a cycle,
        so a stopped source would otherwise stay in memory with all its keyframes."""
        global _freezers
        with _freeze_lock:
            if self._froze:
                self._froze = False
                _freezers -= 1
                if _freezers == 0:
                    gc.unfreeze()

    def wait_indexed(self, timeout: float | None = None) -> bool:
        """Wait until every keyframe is built (seeks are fast from then on)."""
        return self._kf_done.wait(timeout)

    # --- Source -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="replay", daemon=True)
            self._thread.start()
        self.play()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        self.clock.pause()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._kf_thread.join(timeout=5)
        with self._lock:
            for f in (self._spool, self._own_file):
                if f is not None:
                    try:
                        f.close()
                    except OSError:
                        pass
            self._spool = self._own_file = None
            self._keyframes, self._kf_index = [], []
        self._thaw_keyframes()

    def focus_node(self, node: str | None) -> None:
        """Everything is in the recording already."""

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            with self._lock:
                now = self.clock.now()
                if now >= self.t_end and not self.clock.paused:
                    self.clock.pause()
                    self.clock.seek(self.t_end)
                    now = self.t_end
                target = bisect.bisect_right(self._times, now)
                if target > self._cursor:
                    self._apply_range(self.state, self._cursor, target)
                    self._cursor = target
                nxt = self._times[self._cursor] if self._cursor < len(self._times) else self.t_end
            if self.clock.paused or self.clock.speed <= 0:
                wait = 0.5
            else:
                wait = min(0.2, max(0.005, (nxt - self.clock.now()) / self.clock.speed))
            self._wake.wait(wait)

    # --- controls ---------------------------------------------------------------------------------

    def position(self) -> float:
        return self.clock.now()

    def play(self) -> None:
        if self.clock.now() >= self.t_end:
            return
        self.clock.resume()
        self._wake.set()

    def pause(self) -> None:
        self.clock.pause()
        self._wake.set()

    @property
    def playing(self) -> bool:
        return not self.clock.paused

    @property
    def speed(self) -> float:
        return self.clock.speed

    def set_speed(self, speed: float) -> None:
        self.clock.set_speed(speed)
        self._wake.set()

    def seek(self, t: float) -> None:
        """The state becomes exactly the state at ``t``: every event with time <= t applied, none after."""
        t = float(t)
        with self._lock:
            target = bisect.bisect_right(self._times, t)
            k = bisect.bisect_right(self._kf_index, target) - 1
            kf_at = self._kf_index[k] if k >= 0 else 0
            if not (self._cursor <= target and target - self._cursor <= target - kf_at):
                if k >= 0:
                    self.state.restore(self._keyframes[k][1])
                else:
                    self.state.restore(None)
                self._cursor = kf_at
            self._apply_range(self.state, self._cursor, target)
            self._cursor = target
            self.clock.seek(t)
        self._wake.set()

    def step(self, seconds: float) -> None:
        self.pause()
        self.seek(self.position() + seconds)

    def next_change(self) -> float | None:
        """Virtual time of the next node state change after the position (None: none until the end).

        Applies the coming events to a scratch copy of the state and asks the core's rules, after
        each event that touches a node and at each rule threshold (Late, Overdue, eviction), whether
        the node's state differs from what it was.
        """
        with self._lock:
            pos = self.position()
            scratch = FleetState(self.state.settings, silence_seconds=self.state.silence_seconds)
            scratch.restore(self.state.snapshot())
            first = self._cursor
        view = scratch.evaluate(pos)
        current = {v.name: v.state for v in view.nodes}
        due: dict[str, float] = {v.name: v.next_change for v in view.nodes if math.isfinite(v.next_change)}
        heap = [(t, name) for name, t in due.items()]
        heapq.heapify(heap)
        known = self._received_known

        def check(name: str, t: float) -> bool:
            v = scratch.node_view(name, t)
            before = current.get(name)
            if v is None:
                return before is not None
            if v.state is not before:
                return True
            if math.isfinite(v.next_change):
                if due.get(name) != v.next_change:
                    due[name] = v.next_change
                    heapq.heappush(heap, (v.next_change, name))
            else:
                due.pop(name, None)
            return False

        def rules_until(limit: float) -> float | None:
            while heap and heap[0][0] <= limit:
                tc, name = heapq.heappop(heap)
                if due.get(name) != tc:
                    continue  # stale: the node changed since this threshold was computed
                del due[name]
                t = max(tc + RULE_EPSILON, pos + RULE_EPSILON)
                if name in current and check(name, t):
                    return t
            return None

        n = len(self._times)
        i = first
        while i < n:
            te = self._times[i]
            hit = rules_until(te)
            if hit is not None:
                return hit
            # apply every event at this instant before judging
            j = i
            touched: set[str] = set()
            everything = False
            while j < n and self._times[j] == te:
                e = self._read(j)
                j += 1
                if e is None:
                    continue
                _apply_entry(scratch, e, known)
                if e.etype == "HEALTH":
                    everything = True
                elif e.resource in ("nodes", "leases") and isinstance(e.obj, dict):
                    name = (e.obj.get("metadata") or {}).get("name")
                    if isinstance(name, str):
                        touched.add(name)
                elif e.etype == "SYNCED":
                    everything = True
            i = j
            if everything:
                v2 = scratch.evaluate(te)
                if {v.name: v.state for v in v2.nodes} != current:
                    return te
                due.clear()
                due.update({v.name: v.next_change for v in v2.nodes if math.isfinite(v.next_change)})
                heap[:] = [(t, name) for name, t in due.items()]
                heapq.heapify(heap)
                continue
            for name in touched:
                if check(name, te):
                    return te
        return rules_until(self.t_end)


class ReplayControlsImpl:
    """``ReplayControls`` for the dashboard; ``start``/``end`` are times (the Source has ``start()``)."""

    def __init__(self, src: ReplaySource) -> None:
        self._src = src
        self.start = src.t_start
        self.end = src.t_end

    def position(self) -> float:
        return self._src.position()

    def play(self) -> None:
        self._src.play()

    def pause(self) -> None:
        self._src.pause()

    @property
    def playing(self) -> bool:
        return self._src.playing

    @property
    def speed(self) -> float:
        return self._src.speed

    def set_speed(self, speed: float) -> None:
        self._src.set_speed(speed)

    def seek(self, t: float) -> None:
        self._src.seek(t)

    def step(self, seconds: float) -> None:
        self._src.step(seconds)

    def next_change(self) -> float | None:
        return self._src.next_change()


# --- helpers ----------------------------------------------------------------------------------------


_freeze_lock = threading.Lock()
_freezers = 0
"""Running sources that froze their keyframes; the last one to stop unfreezes."""


def _freeze_survivors() -> None:
    """Move every object alive now (a new keyframe among them) out of the cyclic collector's way.

    A one-hour 5,000-node recording holds about 90 keyframes, millions of container objects that
    never change and hold no cycles. Left in the collector's oldest generation, each full collection
    walks all of them: measured 1.4 s, inside whichever seek (or frame) happened to trigger it,
    which was the slowest seek (1.7 s, against a median of 0.2 s). Frozen (``gc.freeze``), they are
    skipped by full collections. The young generations are collected first so that cyclic garbage of
    the moment is not frozen with them; ``stop()`` unfreezes (``_thaw_keyframes``). The live source
    freezes its synced state the same way (``reflector.gc_paused``).
    """
    gc.collect(1)
    gc.freeze()


def _apply_entry(state: FleetState, e: Entry, received_known: bool) -> None:
    if e.etype == "SETTINGS":
        return
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


def _chain(first: tuple[int, bytes], rest: Any) -> Any:
    yield first
    yield from rest


def _stdin() -> Any:
    import sys

    return sys.stdin.buffer



