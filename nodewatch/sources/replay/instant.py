"""One instant of a recording in one pass: what ``status --replay FILE --at T`` answers.

Why not the index: a replay indexes the whole file so that it can seek anywhere, backward too, and
then reads each event again to apply it. One answer needs neither: each line is read once, its
events are put in time order, and reading stops shortly after ``T``. Then they are applied, but
for the lease renewals a later renewal of the same lease supersedes (``superseded.py``): those are
neither decoded into records nor applied (``compact=True``, what ``status`` asks for).

Time order without an index: lines may step back a little (threads of the recorder race); events
wait in a small heap until no line ``REORDER_WINDOW`` seconds older can come, so the events are
applied in the same order as a replay's sorted index gives them. A line later than that is applied
where it comes, and reported.

A kubectl log is read whole and put in time order first: a concatenated one (``cat nodes.log
leases.log``) comes section by section, each placed by its own objects' times
(``kubectl_format.SectionClock``), so a later section holds events from before the first one's end
and reading cannot stop after ``T``.
"""

from __future__ import annotations

import gc
import heapq
import math
import os
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from ...core.settings import Settings, writes_follow_renewals
from ...core.timeutil import parse_when
from ..columnar import Supersession
from ..kubectl_format import iter_blocks, looks_like_kubectl, sort_entries
from ..kubectl_format import iter_entries as kubectl_entries
from ..line_guards import EARLY_SLACK, DuplicateFilter, TimeFrame
from ..recording import (
    Entry,
    RecordingError,
    iter_lines,
    parse_header,
)
from ..recording_input import close_input, open_binary, went_on
from ..segments import SegmentWindow, keyframe_lines
from .clusters import (
    RecordedCluster,
    ReplayState,
    cluster_settings,
    cluster_state,
    header_settings,
    misplaced,
    new_state,
    recorded_clusters,
    target,
)
from .index import OUT_OF_ORDER_REPORT, apply_entry, learn_version
from .lines import object_fits, parse_decoded, plain_line
from .superseded import (
    Deferred,
    Listed,
    Superseded,
    clean_node_update,
    deferred,
    deferred_ahead,
    deferred_entry,
    deferred_lease,
)

REORDER_WINDOW = 30.0
"""Seconds a line may step back in time and still be applied in time order."""


@dataclass(frozen=True, slots=True)
class Instant:
    """The instant a one-pass read answered for, and what it saw of the recording around it."""

    at: float
    """The instant the state is at (``when``, or the last event when ``when`` was None)."""
    events: int
    """Events read (0: nothing usable: no answer is possible)."""
    start: float
    """Time of the first event."""
    last: float
    """Time of the latest event read."""
    read_to_end: bool
    """The whole recording was read: ``last`` is its end (else it goes on after ``at``: the read stopped
    past ``at``, or a directory's window ended at a later line)."""


PROGRESS_EVERY = 4096
"""Events read between two calls of a read's ``progress``."""


def state_at(path: str, when: str | None, settings: Settings | None = None,
             compact: bool = False, pods: bool = True,
             progress: Callable[[float, float], None] | None = None,
             opening: Callable[[int, int], None] | None = None) -> tuple[ReplayState, Instant, list[str]]:
    """(the state at ``when``, the instant and what was seen of the recording, the problems met):
    ``when`` is RFC 3339 or +OFFSET (+90, +15m) from the first event (``parse_when``); None: the end. A
    recording of several clusters gives a ``MultiFleet`` (``clusters.py``). ``compact`` (what
    ``status`` asks for): leave out the lease renewals and node updates a later one supersedes
    (``superseded.py``); the state's renewal counts, heartbeat histories and node timelines are then
    not a full replay's, nothing a status answer shows differs. ``pods`` False (with ``compact``):
    the answer reads no Pods, leave them out (they are counted for the default toleration they
    carry all the same: ``core/pod_tolerations``). ``progress(read_to, target)``: called every
    ``PROGRESS_EVERY`` events read (the latest event time read, the instant asked for: inf to the
    end), and with ``read_to`` inf once the reading is done and what was read is applied.
    ``opening(read, of)``: called instead while a hub segment's keyframe is read (its lines read, of
    how many): those lines span little recorded time, and at 65,000 nodes take half of an early
    read (a share of the time alone said 0-3 % for ten seconds, then jumped to 97 %)."""
    supersede = None
    if compact and when is not None:
        path, supersede = _one_instant(path, when)
    state, t, problems = _read_at(path, when, settings, compact, pods, supersede, progress, opening)
    if supersede is not None and supersede.unsure:  # a Lease's lines out of time order: read all of them
        state, t, problems = _read_at(path, when, settings, compact, pods, None, progress, opening)
    return state, t, problems


def _read_at(path: str, when: str | None, settings: Settings | None, compact: bool, pods: bool,
             supersede: Supersession | None,
             progress: Callable[[float, float], None] | None = None,
             opening: Callable[[int, int], None] | None = None) -> tuple[ReplayState, Instant, list[str]]:
    problems: list[str] = []
    stream = open_binary(path, supersede)
    collecting = gc.isenabled()
    gc.disable()  # hundreds of thousands of acyclic objects: the collector would walk them for nothing
    try:
        lines = iter_lines(stream, problems)
        first = next(((n, line) for n, line in lines if line.strip()), None)
        if first is None:
            raise RecordingError(f"{path}: empty, nothing to replay")
        header: dict = {}
        clusters: list[RecordedCluster] | None = None
        ahead: Superseded | None = None
        if looks_like_kubectl(first[1]):
            known = False
            # a concatenated log comes section by section: read whole, put in time order
            blocks = _chain(first, iter_blocks(stream, problems, first[0]))  # the rest read in blocks
            # to the end, every event is applied: what a later one supersedes is left out before the sort
            ahead = _order(header, None, settings, pods, False, True) if compact and when is None else None
            defer = None if not compact else deferred_entry if ahead is None else deferred_ahead
            entries: Iterator[Entry] = iter(sort_entries(kubectl_entries(blocks, problems, typed=True), defer, ahead))
        else:
            known = True
            header = parse_header(first[1])
            clusters = recorded_clusters(header, problems)
            entries = _v1_entries(lines, header, clusters, problems, compact, pods)
        state = new_state(header, clusters, settings, problems)
        t = _apply_until(state, entries, when, known, header, clusters, settings, problems, pods, compact, progress,
                         opening)
        if ahead is not None and ahead.dropped:  # what it left out before the sort was read all the same
            t = replace(t, events=t.events + ahead.dropped, start=min(t.start, ahead.earliest))
        if t.read_to_end and went_on(stream):
            t = replace(t, read_to_end=False)
    finally:
        close_input(stream)
        if collecting:
            gc.enable()
    return state, t, problems


def _one_instant(path: str, when: str) -> tuple[str, Supersession | None]:
    """What a one-shot answer at ``when`` (an absolute time) needs to read: a hub's directory from
    the keyframe of the segment that holds it (each segment starts with the fleet as it was: the
    segments before change nothing it shows), and columnar data without the renewals and Node
    status reports a later one supersedes (``columnar.Supersession``: the same ones ``Superseded``
    would drop, never made lines). A relative ``when`` is measured from the first event, not known
    yet: all is read."""
    try:
        t = parse_when(when, None)
    except ValueError:
        return path, None
    if isinstance(path, SegmentWindow) and path.start is None:
        path = SegmentWindow(str(path), t, path.end if path.end is not None else t)
    elif not isinstance(path, SegmentWindow) and os.path.isdir(path):
        path = SegmentWindow(path, t, t)
    until = t + REORDER_WINDOW  # reading stops after that (``_apply_until``), or after the window's end
    if isinstance(path, SegmentWindow) and path.end is not None:
        until = min(until, path.end)
    return path, Supersession(t, until, _clean_lease, EARLY_SLACK, clean_node_update)


def _clean_lease(line: bytes) -> tuple[bool, float | None]:
    """Whether a Lease's line is one ``Superseded`` reads as a clean renewal, and its renewTime."""
    d = plain_line(line)
    e = deferred(0, line, d) if d is not None else None
    return (e is not None and e.resource == "leases"), (e.renew if e is not None else None)


def _v1_entries(lines: Iterator[tuple[int, bytes]], header: dict, clusters: list[RecordedCluster] | None,
                problems: list[str], compact: bool, pods: bool) -> Iterator[Entry | Deferred]:
    """Each usable line's event: an ``Entry``, or (``compact``) for a clean Lease, Node or Pod line
    a ``Deferred`` that is parsed in full only if it is applied."""
    dup = DuplicateFilter(2048)
    frame = TimeFrame(header, problems)
    for n, line in lines:
        e: Entry | Deferred | None = deferred_lease(n, line) if compact else None  # a renewal: one decode
        if e is None:
            d = plain_line(line)
            if compact and d is not None:
                e = deferred(n, line, d, pods)  # its object is one: the typed decoder read it
            if e is None:
                e = parse_decoded(n, line, d if d is not None and object_fits(d) else None, problems)
        if e is None or not frame.admit(e):
            continue
        if e.etype != "SETTINGS":
            why = misplaced(e, clusters)
            if why is not None:
                problems.append(why)
                continue
            prev = dup.seen(line, n)
            if prev is not None:
                problems.append(f"line {n}: duplicate of line {prev}, skipped")
                continue
        yield e


def _apply_until(state: ReplayState, entries: Iterator[Entry | Deferred], when: str | None, known: bool,
                 header: dict, clusters: list[RecordedCluster] | None, given: Settings | None,
                 problems: list[str], pods: bool = True, compact: bool = False,
                 progress: Callable[[float, float], None] | None = None,
                 opening: Callable[[int, int], None] | None = None) -> Instant:
    """Put the events up to ``when`` in the order a replay applies them (``Superseded``), then apply
    them (what a later renewal supersedes left out)."""
    order = _order(header, clusters, given, pods, known, compact)
    heap: list[tuple[float, int, Entry | Deferred]] = []
    target = math.inf
    start: float | None = None
    hi = -math.inf
    applied_to = -math.inf
    late = too_late = 0
    worst = 0.0
    last = None
    events = 0
    to_end = True

    def apply(e: Entry | Deferred) -> None:
        nonlocal start, target, last, applied_to
        t = e.t or 0.0
        if start is None:
            start = t
            if when:
                try:
                    target = parse_when(when, start)
                except ValueError as exc:
                    raise RecordingError(str(exc)) from None
        if t <= target:
            order.add(e)
            if last is None or t > last:
                last = t
        if t > applied_to:
            applied_to = t

    # Waiting events: those that came in time order in a queue (already sorted), those that
    # stepped back in a heap; the next to apply is the earlier head of the two, as one heap of
    # them all would give.
    queue: deque[tuple[float, int, Entry | Deferred]] = deque()

    def apply_before(limit: float) -> None:
        while not heap:  # nothing stepped back: the queue alone, in its order
            if not queue or queue[0][0] >= limit:
                return
            apply(queue.popleft()[2])
        while True:
            if queue and queue[0][0] < limit:
                item = heapq.heappop(heap) if heap and heap[0] < queue[0] else queue.popleft()
            elif heap and heap[0][0] < limit:
                item = heapq.heappop(heap)
            else:
                return
            apply(item[2])

    named = _absolute(when) if progress is not None else math.inf  # the target before the first event is applied
    keyframe = keyframe_lines(header) if opening is not None else 0
    for seq, e in enumerate(entries):
        events += 1
        if not events % PROGRESS_EVERY:
            if events < keyframe and opening is not None:
                opening(events, keyframe)
            elif progress is not None and hi > -math.inf:
                progress(hi, target if start is not None else named)
        if e.etype == "SETTINGS":
            if (given is None or not given.server_version) and learn_version(header, e):
                order.settings_changed()
                order.add(_Learned(e))  # applied here, among the events still waiting
            continue
        t = e.t or 0.0
        if t < hi:
            if hi - t > OUT_OF_ORDER_REPORT:
                late += 1
                worst = max(worst, hi - t)
            if t < applied_to:
                too_late += 1  # its place in time order has been applied already
                apply(e)
                continue
        else:
            hi = t
        if start is not None and hi > target + REORDER_WINDOW:
            to_end = False
            break  # nothing before the target can come any more
        if t < hi:
            heapq.heappush(heap, (t, seq, e))
        else:
            queue.append((t, seq, e))
        apply_before(hi - REORDER_WINDOW)
    apply_before(math.inf)
    if progress is not None:
        progress(math.inf, target)
    with state.batch():
        for e in order.events:
            if e is None:
                continue  # superseded
            if type(e) is Deferred:
                e = e.entry(problems)
                if e is None:
                    continue
            elif type(e) is _Learned:
                _learned(state, e.entry, header, clusters, given, problems)
                continue
            elif type(e) is Listed:
                _listed(state, e)
                continue
            apply_entry(state, e, known)
        for cluster, tally in order.tallies.items():  # what the Pods left out showed
            one = cluster_state(state, cluster)
            if one is not None:
                one.learn_tolerations(tally.learned)
    if start is None:
        problems.append("no usable events in the recording")
        return Instant(0.0, 0, 0.0, 0.0, True)
    if late:
        problems.append(f"{late} lines are out of time order (up to {worst:.1f}s back); replayed in time order"
                        + (f", {too_late} of them more than {REORDER_WINDOW:g}s late: applied where they came"
                           if too_late else ""))
    at = target if math.isfinite(target) else (last if last is not None else start)
    return Instant(at, events, start, max(hi, applied_to), to_end)


def _absolute(when: str | None) -> float:
    """The instant ``when`` names when it is an absolute time (inf: the end, or one relative to the
    first event, not known before it is applied)."""
    try:
        return parse_when(when, None) if when else math.inf
    except ValueError:
        return math.inf


@dataclass(frozen=True, slots=True)
class _Learned:
    """A settings line that taught the server version, in its place among the events."""

    entry: Entry


def _listed(state: ReplayState, e: Listed) -> None:
    one = target(state, e)
    if one is not None:
        one.listed(e.resource, e.name)


def _learned(state: ReplayState, e: Entry, header: dict, clusters: list[RecordedCluster] | None,
             given: Settings | None, problems: list[str]) -> None:
    """The server version a settings line taught: into the settings of the state (of its cluster)."""
    one = target(state, e)
    if one is None:
        return
    if clusters is None:
        one.set_settings(header_settings(header, given, problems))
        return
    c = next(c for c in clusters if c.name == e.cluster)
    one.set_settings(cluster_settings(c, given, problems))


def _order(header: dict, clusters: list[RecordedCluster] | None, given: Settings | None, pods: bool, known: bool,
           compact: bool) -> Superseded:
    """The ``Superseded`` the events of an answer go through (a kubectl log's to the end: before
    its sort too, ``kubectl_format.sort_entries``)."""
    return Superseded(several=clusters is not None, pods=pods,
                      follows=lambda cluster: _follows(header, clusters, given, cluster), received_known=known,
                      records=compact)


def _follows(header: dict, clusters: list[RecordedCluster] | None, given: Settings | None,
             cluster: str | None) -> bool | None:
    """``writes_follow_renewals`` of the server version the state of ``cluster`` has once the lines
    read so far are applied (``_learned`` sets it from the header); None for a cluster not listed."""
    if clusters is None:
        return writes_follow_renewals(header_settings(header, given, []).server_version)
    c = next((c for c in clusters if c.name == cluster), None)
    return None if c is None else writes_follow_renewals(cluster_settings(c, given, []).server_version)


def _chain(first: tuple[int, bytes], rest: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    yield first
    yield from rest
