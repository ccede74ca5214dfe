"""Reader of what ``kubectl get RESOURCE --watch --output-watch-events -o json`` writes.

That is a stream of pretty-printed ``{"type": ..., "object": {...}}`` documents (kubectl starts each
with ``{`` and ends it with ``}`` on lines of their own; ``jq -c`` makes one document per line).
Several such files may be concatenated, resources mixed: the resource comes from the object's
``kind``. Plain objects and ``List`` documents (``kubectl get -o json`` without ``--watch``) are
accepted too, as ADDED items of a listing.

Such a log has no receive times, so a replay takes time from the objects themselves (lease
``renewTime``, condition heartbeats and transitions, taint ``timeAdded``, event times, creation and
deletion timestamps), section by section: each resource's time never runs backwards (its order is
kept), a later section of a concatenated log is placed by its own objects' times (``SectionClock``),
and a List is dated by its newest object. The events are applied with ``received_at=None`` so lease
ages are measured from ``renewTime``. The entries come section by section: readers sort them by
time (``sort_entries``).

Where the log holds Nodes but no Lease (all of it, or before its Leases begin), the lease stream
was not recorded there: the reader says so with a lease-stream health entry (``lease_health``),
and no node is judged by an age it has no renewal for (a Node's heartbeat is posted every five
minutes on a cluster with Leases: judged by it, every Ready node of a nodes-only log went Overdue).
"""

from __future__ import annotations

import gzip
import zlib
from typing import IO, Any, Callable, Iterable, Iterator

import orjson

from ..core.objects import lease_from_dict
from ..core.rules import renew_interval
from ..core.timeutil import format_time, parse_time
from ..core.wire import _lease_record
from .kubectl_typed import (
    TYPED,
    KubectlLease,
    KubectlNode,
    lease_time,
    node_time,
    typed_deleting,
    typed_event,
    typed_key,
    typed_name,
)
from .recording import MAX_LINE_BYTES, Entry, _short

KIND_RESOURCES = {
    "Node": "nodes",
    "Lease": "leases",
    "Pod": "pods",
    "Event": "events",
    "CertificateSigningRequest": "certificatesigningrequests",
}
WATCH_TYPES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")
MAX_DOC_BYTES = 16 * 1024 * 1024
MAX_JUMP = 3600.0
"""Seconds an object's time may run ahead of the replay's time unconfirmed (see ``JumpGuard``)."""


def looks_like_kubectl(first_line: bytes) -> bool:
    """Does the first non-empty line start a kubectl JSON document (rather than a v1 header)?"""
    s = first_line.strip()
    if not s.startswith(b"{"):
        return False
    if s == b"{":
        return True
    try:
        d = orjson.loads(s)
    except orjson.JSONDecodeError:
        return b'"nodewatch_recording"' not in s
    return isinstance(d, dict) and "nodewatch_recording" not in d and ("object" in d or "kind" in d)


Typed = Callable[[bytes], Any]
"""A decoder tried first on each document's bytes (``kubectl_typed.typed_event``): what it gives
(not None) is yielded instead of the document's JSON."""


def iter_documents(lines: Iterable[tuple[int, bytes]], problems: list[str],
                   typed: Typed | None = None) -> Iterator[tuple[int, Any]]:
    """(first line number, parsed JSON) of each document; broken ones are reported and skipped.

    ``lines`` are (number of the first line, bytes of one or more whole lines): ``iter_blocks``
    gives blocks of many lines, read with one call each. A document that kubectl wrote (a line
    ``{``, indented lines, a line starting with ``}``) is cut out of a block whole, at C speed
    (a 5,000-node log is millions of lines); any other line goes through the line by line reader
    (``_Documents``), which reports what is wrong in the same words whatever the blocks are.
    ``typed``: tried first on each document; where it gives None, the document is parsed JSON.

    Where one document follows another directly (a line ``}``, then a line ``{``: how kubectl
    writes them), the document is the bytes up to that boundary if they decode (``_cut``): one scan
    for a five-byte pattern, where finding the first line starting with ``}`` and making sure no
    line starting with ``{`` comes before it were two scans of every document (a third of the time
    of reading a log's bytes). What does not decode is cut as before, and reported the same way."""
    reader = _Documents(problems, typed)
    for n, block in lines:
        if block.find(b"\n", 0, len(block) - 1) < 0:  # one line
            yield from reader.line(n, block)
            continue
        pos, size = 0, len(block)
        while pos < size:
            if reader.open is None and block.startswith(b"{\n", pos):
                stop = block.find(_BOUNDARY, pos) + 2
                if 2 < stop and stop - pos <= MAX_DOC_BYTES:
                    data = block[pos:stop]
                    doc = typed(data) if typed is not None else None
                    if doc is None:
                        doc = _cut(data)
                    if doc is not _BAD:
                        yield n, doc
                        n += block.count(b"\n", pos, stop) + 1
                        pos = stop + 1
                        continue
                close = block.find(b"\n}", pos)
                if close >= 0 and block.find(b"\n{", pos, close) < 0:
                    stop = block.find(b"\n", close + 1)
                    stop = size if stop < 0 else stop
                    if stop - pos <= MAX_DOC_BYTES:  # else the reader reports it, line by line
                        data = block[pos:stop]
                        doc = typed(data) if typed is not None else None
                        if doc is None:
                            doc = _loads(data, n, problems)
                        if doc is not _BAD:
                            yield n, doc
                        n += block.count(b"\n", pos, stop) + 1
                        pos = stop + 1
                        continue
            stop = block.find(b"\n", pos)
            stop = size if stop < 0 else stop + 1
            yield from reader.line(n, block[pos:stop])
            n += 1
            pos = stop
    yield from reader.end()


class _Documents:
    """The line by line reader of ``iter_documents``: the document open, if any."""

    def __init__(self, problems: list[str], typed: Typed | None = None) -> None:
        self.problems = problems
        self.typed = typed
        self.open: list[bytes] | None = None
        self.size = 0
        self.start = 0

    def line(self, n: int, raw: bytes) -> Iterator[tuple[int, Any]]:
        problems = self.problems
        line = raw.rstrip(b"\r\n")
        buf = self.open
        if buf is not None and line.startswith(b"{"):  # a new document while one is open: the previous one was cut off
            problems.append(f"line {self.start}: truncated JSON document (lines {self.start}-{n - 1}), skipped")
            buf = self.open = None
        if buf is None:
            s = line.strip()
            if not s:
                return
            if s.startswith(b"{") and s.endswith(b"}") and s != b"{":  # one document on one line
                doc = self._decode(s, n)
                if doc is not _BAD:
                    yield n, doc
            elif line.startswith(b"{"):
                self.open, self.size, self.start = [line], len(line), n
            else:
                problems.append(f"line {n}: text outside a JSON document, skipped")
            return
        buf.append(line)
        self.size += len(line)
        if self.size > MAX_DOC_BYTES:
            problems.append(f"line {self.start}: document larger than {MAX_DOC_BYTES} bytes, skipped")
            self.open = None
            return
        if line.startswith(b"}"):
            doc = self._decode(b"\n".join(buf), self.start)
            self.open = None
            if doc is not _BAD:
                yield self.start, doc

    def _decode(self, data: bytes, n: int) -> Any:
        doc = self.typed(data) if self.typed is not None else None
        return _loads(data, n, self.problems) if doc is None else doc

    def end(self) -> Iterator[tuple[int, Any]]:
        if self.open is not None:
            self.problems.append(f"line {self.start}: truncated JSON document at the end of the input, skipped")
        return iter(())


BLOCK_BYTES = 1 << 20


def iter_blocks(stream: IO[bytes], problems: list[str], after: int = 0) -> Iterator[tuple[int, bytes]]:
    """``recording.iter_lines`` of the rest of ``stream`` (lines numbered from ``after`` + 1) in
    blocks of whole lines of about ``BLOCK_BYTES``, for ``iter_documents``: (number of the block's
    first line, its bytes). The same limits and reports: a line longer than ``MAX_LINE_BYTES`` is
    skipped, a truncated gzip ends the blocks with a problem (``readinto1``: no more is lost than a
    line by line read loses).

    Read into one buffer, kept for the whole stream, behind the part of a line the last block left:
    each block is then one copy of the bytes. Read as new bytes each time, joined to the part left
    and cut at the last line's end, a block was three fresh megabytes, and the page faults of
    memory taken and given back for them were half of reading a 700 MB log."""
    read = getattr(stream, "readinto1", None) or getattr(stream, "readinto")  # noqa: B009 - IO[bytes] does not declare it
    buf = bytearray(BLOCK_BYTES)
    view = memoryview(buf)
    n = after
    have = 0  # the part of a line left by the last block, at buf[:have]
    giant = False
    try:
        while True:
            if len(buf) < have + BLOCK_BYTES:  # a long line's start waits: room for more
                view.release()
                buf.extend(bytes(have + BLOCK_BYTES - len(buf)))
                view = memoryview(buf)
            got = read(view[have:have + BLOCK_BYTES])
            if not got:
                break
            end = have + got
            start = 0
            if giant:  # the rest of a giant line: up to its end (nothing is left before it)
                at = buf.find(b"\n", 0, end)
                if at < 0:
                    continue
                start, giant = at + 1, False
            last = buf.rfind(b"\n", start, end)
            if have and last >= 0 and buf.find(b"\n", 0, end) > MAX_LINE_BYTES:
                n += 1
                problems.append(f"line {n}: longer than {MAX_LINE_BYTES} bytes, skipped")
                start = buf.find(b"\n", 0, end) + 1
                last = buf.rfind(b"\n", start, end)
            if last < 0:
                buf[:end - start] = bytes(view[start:end])
                have = end - start
                if have > MAX_LINE_BYTES:
                    n += 1
                    problems.append(f"line {n}: longer than {MAX_LINE_BYTES} bytes, skipped")
                    have, giant = 0, True
                continue
            block = bytes(view[start:last + 1])
            have = end - last - 1
            buf[:have] = bytes(view[last + 1:end])
            yield n + 1, block
            n += block.count(b"\n")
        if have:
            yield n + 1, bytes(view[:have])
            n += 1
        problems.extend(getattr(getattr(stream, "raw", None), "problems", ()))  # as iter_lines
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        problems.append(f"after line {n}: the file ends abruptly ({_short(exc)}); replaying what was read")
    finally:
        view.release()


_BAD = object()
_BOUNDARY = b"\n}\n{\n"
"""A document's last line and the next one's first, as kubectl writes them."""


def _cut(data: bytes) -> Any:
    """``data`` (from a line ``{`` up to a line ``}`` followed by a line ``{``) decoded (after the
    ``typed`` decoder, which gave None), or _BAD when it does not decode: it is then cut and
    reported line by line, as before. Why a document
    that decodes is the one the careful cut would give: ``data`` starts with an object; were a line
    ``{`` a new document inside it (the one before cut off), or a line ``}`` the end of a document
    before the last, the bytes would be a cut-off document then a whole one, or a whole one then
    more: neither is one JSON value. Only a whole document with a line starting with ``{`` or ``}``
    inside it (a nested object written from the first column, as no pretty-printer known writes
    one) is read differently: whole, where the careful cut broke it there."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return _BAD


def _loads(data: bytes, n: int, problems: list[str]) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        problems.append(f"line {n}: malformed JSON document, skipped")
        return _BAD


def iter_entries(lines: Iterable[tuple[int, bytes]], problems: list[str], typed: bool = False) -> Iterator[Entry]:
    """Entries with times from the objects, each section's never going backwards (``SectionClock``).

    The entries of a concatenated log come section by section, not in time order: whoever needs
    them in time order sorts them by ``t`` (stably: a section's own order is kept). ``typed``: a
    clean Lease watch event's object is a ``kubectl_typed.KubectlLease`` (decoded in one msgspec
    pass, dated from its typed fields), not a dict; only a reader that makes records of them asks
    (``sort_entries``), not one that writes the objects out again."""
    clock = SectionClock(problems)
    unknown_kinds: set[str] = set()

    def resource_of(n: int, obj: Any) -> str | None:
        kind = obj.get("kind") if isinstance(obj, dict) else None
        resource = KIND_RESOURCES.get(kind) if isinstance(kind, str) else None
        if resource is None:
            k = str(kind)[:60]
            if k not in unknown_kinds:
                unknown_kinds.add(k)
                problems.append(f"line {n}: objects of kind {k!r} are not used, skipped (reported once)")
        return resource

    for n, doc in iter_documents(lines, problems, typed_event if typed else None):
        if type(doc) is tuple:  # (etype, KubectlLease or KubectlNode, resource): a clean watch event
            etype, obj, resource = doc
            e = clock.quick(n, resource, etype, obj)
            if e is not None:
                yield e
            else:
                yield from clock.event(n, resource, etype, obj, False)
            continue
        events = [(etype, obj, listing, r) for etype, obj, listing in _events_of(n, doc, problems)
                  if (r := resource_of(n, obj)) is not None]
        if events and events[0][2]:  # the items of a List document: one snapshot, one time
            yield from clock.listing(n, [(r, obj) for _, obj, _, r in events])
            continue
        for etype, obj, listing, resource in events:
            yield from clock.event(n, resource, etype, obj, listing)
    yield from clock.finish()


OPENING_LISTS = frozenset({"nodes", "leases", "pods", "certificatesigningrequests"})
WATCH_ONLY_WAIT = renew_interval(40.0)
"""A Lease watch without its list (``kubectl get -w --watch-only``) holds every kubelet's Lease only
once each has renewed: one renew interval (10 s at the default 40 s duration) after its first."""
"""Resources whose watch log opens with the list (one ADDED per object, then MODIFIED...)."""


def sort_entries(entries: Iterable[Entry], defer: Callable[[Entry], Any] | None = None,
                 ahead: Any = None) -> list[Any]:
    """The entries of a kubectl log in time order; stable, so each section's own order is kept.

    A Lease's object is made its record on the way (``lease_from_dict``, what applying it does
    first; one that would not make one stays the dict, and applying it reports why): a log is
    sorted whole, and the dicts of a 5,000-node log's 300,000 renewals held for the sort were 1.5 GB.
    As records, the renewals a later one supersedes are left out of a one-shot answer too
    (``replay/superseded.py``). A typed Lease or Node (``iter_entries(typed=True)``) is made its
    record by ``wire._lease_record``, as a watched Lease is (a Node has its record already); ``defer``
    (a one-shot answer's ``superseded.deferred_entry``) may make it, instead, what waits to be
    applied (not None): a renewal a later one supersedes is then never made a record.

    ``ahead`` (with ``defer``; an answer to the end, where every event is applied: a
    ``superseded.Superseded``): each entry is given to it as it is read, and what it leaves out is
    not held, sorted nor queued. Why that leaves out what the same ``Superseded`` leaves out after
    the sort: it follows each object on its own (a Lease's track, a Node's record: nothing of
    another object, and a kubectl log has no SYNCED or settings lines: its lease-stream health entries,
    ``lease_health``, change no object and are placed by the sort alone), and an object's entries
    come in the sorted order already: all of them are in one section (its kind's), whose times
    never go back in the order its entries come (``SectionClock``: each is dated at the section's
    time, which only moves forward; what waited gets the time it moves to, and a section that
    never tells one is all at one time), and the sort is stable. What it keeps is applied through
    ``Superseded`` again, which leaves out nothing more: before the renewal that superseded the
    others, only events it never leaves out are kept, and after it the track is the one that renewal
    leaves on its own (``Superseded._renewal``)."""
    if defer is None:
        return sorted(map(_record, entries), key=entry_time)
    if ahead is None:
        return sorted((defer(e) or _record(e) for e in entries), key=entry_time)
    add = ahead.add
    earliest = ahead.earliest
    for e in entries:
        t = e.t or 0.0
        if t < earliest:
            earliest = t
        add(defer(e) or _record(e))
    ahead.earliest = earliest
    return sorted([e for e in ahead.events if e is not None], key=entry_time)


def _record(e: Entry) -> Entry:
    """The entry with its Lease or typed Node made its record (named: ``typed_event`` made sure)."""
    kind = type(e.obj)
    if kind is KubectlLease:
        e.obj = _lease_record(e.obj)
    elif kind is KubectlNode:
        e.obj = e.obj.record
    elif e.resource == "leases" and isinstance(e.obj, dict):
        try:
            e.obj = lease_from_dict(e.obj)
        except Exception:  # noqa: BLE001 - applied as the dict, whose problem is reported then
            pass
    return e


def entry_time(e: Any) -> float:
    """An entry's place in time order (one without a time first), for the sorts of a log's entries."""
    return e.t if e.t is not None else 0.0


class _Section:
    """One resource's events: one ``kubectl get -w`` of that resource, whose order is time order."""

    __slots__ = ("resource", "t", "jumps", "pending", "deletions", "interleaved", "opening", "opening_keys",
                 "listed")

    def __init__(self, problems: list[str], resource: str = "") -> None:
        self.resource = resource
        self.listed = False
        """A list of the resource was read (a watch's opening, or a List document)."""
        self.opening: list[tuple[int, str, str, dict, bool]] | None = [] if resource in OPENING_LISTS else None
        """The watch's opening ADDED events, held until it ends (``SectionClock._close_opening``);
        None once it has (or for Events, whose every event is an ADDED of its own)."""
        self.opening_keys: set[tuple] = set()
        self.t: float | None = None
        """The section's time so far (None: no object of it has told one yet)."""
        self.jumps = JumpGuard(problems)
        self.pending: list[Entry] = []
        """Entries before the section's first time: they get that time."""
        self.deletions: list[Entry] = []
        """Deletions whose object does not date them, waiting for the section's next time."""
        self.interleaved = False
        """The log came back to this section after another's: its watches were written to one file
        as they came, and the file's order is time order across sections too."""


class SectionClock:
    """Times for the events of a kubectl log, from the objects, section by section.

    Why sections: ``kubectl get -w`` watches one resource per command, so a log of an incident is
    ``cat nodes.log leases.log pods.log events.log``: each file's order is time order, the
    concatenation's is not. One clock for the whole log carried every Lease, Pod and Event after
    the last Node event (all of them lost at any ``--at`` before it). Each resource is a section
    with its own clock: time taken from its own objects never goes backwards within it, and a later
    section is placed by its own objects' times. A log whose resources alternate (several watches
    appending to one file, ``>>``) is in time order across sections: when a resource comes back
    after another's run, its clock is moved up to the newest time of the log.

    A deletion whose object tells no time of its own (a Node has no ``deletionTimestamp``: its
    DELETED object carries its last heartbeat) happened after the section's previous event and
    before its next one; put at the previous one, a node deleted ten minutes after it died vanished
    at its last heartbeat. Such a deletion is placed at the section's next time (the log's end, when
    none comes), and the count is reported. In an interleaved log the file's order dates it.

    A watch opens with its list (one ADDED per object): that opening is dated as a List document
    is, by its newest object (``_close_opening``), but for Events, every one of which is an ADDED."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        self.sections: dict[str, _Section] = {}
        self.run: str | None = None
        """The resource of the current run of documents."""
        self.latest: float | None = None
        """The newest time of any section."""
        self.first: float | None = None
        """The earliest time of any section (for a section that tells none)."""
        self._undated: list[int] = []
        self.leases_from: float | None = None
        """The first time the log's Leases tell (their list's, when it opens with one)."""

    def _section(self, resource: str) -> _Section:
        sec = self.sections.get(resource)
        if sec is None:
            sec = self.sections[resource] = _Section(self.problems, resource)
        elif resource != self.run and self.run is not None:
            sec.interleaved = True  # back after another resource's run: one file written as it came
            if self.latest is not None and (sec.t is None or self.latest > sec.t):
                sec.t = self.latest
        self.run = resource
        return sec

    def _move(self, sec: _Section, t: float) -> None:
        """The section's time moves to ``t``; the log's first and latest times follow."""
        sec.t = t
        if sec.resource == "leases" and self.leases_from is None:
            self.leases_from = t
        if self.latest is None or t > self.latest:
            self.latest = t
        if self.first is None or t < self.first:
            self.first = t

    def _advance(self, sec: _Section, t: float) -> Iterator[Entry]:
        """The section's time moves to ``t``: what waited for a time gets it."""
        self._move(sec, t)
        for e in sec.pending:
            e.t = t
            yield e
        sec.pending = []
        for e in sec.deletions:
            e.t = t
            yield e
        sec.deletions = []

    def event(self, n: int, resource: str, etype: str, obj: Any, listing: bool) -> Iterator[Entry]:
        if self.run is not None and resource != self.run:
            yield from self._close_opening(self.sections[self.run])  # that watch's section ended here
        sec = self._section(resource)
        if sec.opening is not None:
            key = _key(obj)
            if etype == "ADDED" and key not in sec.opening_keys:
                sec.opening.append((n, resource, etype, obj, listing))
                sec.opening_keys.add(key)
                return
            yield from self._close_opening(sec)
        yield from self._event(n, sec, resource, etype, obj, listing)

    def quick(self, n: int, resource: str, etype: str, obj: Any) -> Entry | None:
        """``event`` of the usual case, without its generators: the next ADDED or MODIFIED of the
        resource of the current run, whose watch's opening is over, nothing waiting, its time no
        jump ahead; the entry ``event`` would give (None: not that case, ``event`` it is). Nineteen
        documents in twenty of a fleet's log are such a renewal."""
        if resource != self.run or etype == "DELETED":
            return None
        sec = self.sections[resource]
        last = sec.t
        if last is None or sec.opening is not None or sec.pending or sec.deletions or sec.jumps.waiting:
            return None
        own = lease_time(etype, obj) if type(obj) is KubectlLease else object_time(resource, etype, obj)
        if own is None or own <= last:
            return Entry(n, last, resource, etype, obj, False)
        if own > last + MAX_JUMP:
            return None
        self._move(sec, own)  # _advance, with nothing waiting
        return Entry(n, own, resource, etype, obj, False)

    def _close_opening(self, sec: _Section) -> Iterator[Entry]:
        """The watch's opening ADDED events are its list (``kubectl get -w`` starts with every
        object once, in the API server's order: by name): dated as one List is (``listing``), by
        its newest object. Event by event, a NodeList whose live node sorts last after nodes dead
        for years was dated by the dead (the live node's time a lone jump the guard did not take)."""
        opening, sec.opening = sec.opening, None
        sec.opening_keys = set()
        if not opening:
            return
        n = opening[0][0]
        sec.listed = True
        list_t = self._list_time(n, [(r, obj) for _, r, _, obj, _ in opening])
        if list_t is None:
            for m, r, etype, obj, listing in opening:
                yield from self._event(m, sec, r, etype, obj, listing)
            return
        if sec.t is None or list_t > sec.t:
            yield from self._advance(sec, list_t)
        for m, r, etype, obj, listing in opening:
            yield Entry(m, sec.t, r, etype, obj, listing)

    def _event(self, n: int, sec: _Section, resource: str, etype: str, obj: Any, listing: bool) -> Iterator[Entry]:
        own = object_time(resource, etype, obj)
        t = sec.jumps.check(n, own, sec.t)
        entry = Entry(n, sec.t, resource, etype, obj, listing)
        if t is not None and (sec.t is None or t > sec.t):
            entry.t = t
            if etype == "DELETED":
                yield from self._release_deletions_of(sec, obj)
            yield from self._advance(sec, t)
            yield entry
            return
        if etype == "DELETED" and not sec.interleaved and not _deleting(obj):
            self._undated.append(n)
            sec.deletions.append(entry)
            return
        yield from self._release_deletions_of(sec, obj)
        if sec.t is None:
            sec.pending.append(entry)
        else:
            yield entry

    def _release_deletions_of(self, sec: _Section, obj: dict) -> Iterator[Entry]:
        """An event on an object whose deletion waits: the deletion came first, it goes now."""
        if not sec.deletions:
            return
        key = _key(obj)
        keep = []
        for e in sec.deletions:
            if _key(e.obj) == key and sec.t is not None:
                e.t = sec.t
                yield e
            else:
                keep.append(e)
        sec.deletions = keep

    def listing(self, n: int, items: list[tuple[str, dict]]) -> Iterator[Entry]:
        """The items of a List document (``kubectl get -o json``): one snapshot, served at one time,
        which is no earlier than the newest of its objects. Dated by that newest object, not the
        first: the API server lists by name, and a NodeList whose only live node sorts last was
        dated by a node dead for two days (a jump the stream's guard would not take unconfirmed)."""
        out: list[Entry] = []
        if self.run is not None:
            out.extend(self._close_opening(self.sections[self.run]))  # the watch before it ended
        list_t = self._list_time(n, items)
        for r, obj in items:
            sec = self.sections.get(r)
            if sec is None:
                sec = self.sections[r] = _Section(self.problems, r)
            out.extend(self._close_opening(sec))
            sec.listed = True
            self.run = r
            t = sec.t if list_t is None or (sec.t is not None and sec.t > list_t) else list_t
            e = Entry(n, t, r, "ADDED", obj, True)
            if list_t is not None and (sec.t is None or list_t > sec.t):
                out.extend(self._advance(sec, list_t))
            if t is None:
                sec.pending.append(e)
            else:
                out.append(e)
        yield from out

    def _list_time(self, n: int, items: list[tuple[str, dict]]) -> float | None:
        """The time of a list of ``items``: its newest object's (None: none tells a time). A newest
        far ahead of all others is used, and said in one line (a wild clock would date it wrong)."""
        times = [(object_time(r, "ADDED", obj), i) for i, (r, obj) in enumerate(items)]
        dated = sorted(((t, i) for t, i in times if t is not None), reverse=True)
        if len(dated) >= 2 and dated[0][0] - dated[1][0] > MAX_JUMP:
            r, obj = items[dated[0][1]]
            self.problems.append(
                f"line {n}: the list is dated by its newest object ({_name(obj)} at {format_time(dated[0][0])}), "
                f"{format_duration(dated[0][0] - dated[1][0])} after the next newest; ages are measured from there")
        return dated[0][0] if dated else None

    def lease_health(self) -> Iterator[Entry]:
        """Where the log has Nodes and no Lease, the lease stream's health says it was not
        recorded (a live dashboard's blindness: no node is then judged by its lease's age, only by
        what the API server says of it): from the log's first time, to the time its Leases begin
        (``leases_from``; a Lease watch without its list, ``WATCH_ONLY_WAIT`` later), or throughout
        when it has none. Nothing when the Leases begin first."""
        first, begin = self.first, self.leases_from
        leases = self.sections.get("leases")
        watch_only = begin is not None and leases is not None and not leases.listed
        if begin is not None and watch_only:
            begin += WATCH_ONLY_WAIT
        if "nodes" not in self.sections or first is None or (begin is not None and begin <= first):
            return
        why = ("no Leases in this log" if begin is None
               else f"the log's Leases are all in by {format_time(begin)} (a watch without its list)" if watch_only
               else f"the log's Leases begin at {format_time(begin)}")
        yield Entry(0, first, "leases", "HEALTH", None, False,
                    {"connected": False, "synced": False, "down_since": None, "last_error": why})
        if begin is not None:
            yield Entry(0, begin, "leases", "HEALTH", None, False,
                        {"connected": True, "synced": True, "down_since": None, "last_error": ""})

    def finish(self) -> Iterator[Entry]:
        """The end of the log: deletions still waiting go at its newest time; sections that never
        told a time take the log's first; the lease stream's health where the log has no Lease
        (``lease_health``)."""
        for sec in self.sections.values():
            yield from self._close_opening(sec)
        for sec in self.sections.values():
            sec.jumps.finish()
        end = self.latest
        for sec in self.sections.values():
            if sec.deletions and end is not None:
                for e in sec.deletions:
                    e.t = end
                    yield e
                sec.deletions = []
        yield from self.lease_health()
        if self._undated:
            k = len(self._undated)
            self.problems.append(f"{k} deletion{'s' if k != 1 else ''} carr{'y' if k != 1 else 'ies'} no time of "
                                 f"{'their' if k != 1 else 'its'} own (the first on line {self._undated[0]}): each is "
                                 "replayed at the next time its section of the log tells, the log's end for the last")
        waiting = [e for sec in self.sections.values() for e in sec.pending + sec.deletions]
        if waiting:
            if self.first is None:
                self.problems.append("no object carries a time: the events are replayed at time 0")
            for e in sorted(waiting, key=lambda e: e.line):
                e.t = self.first if self.first is not None else 0.0
                yield e


class JumpGuard:
    """A kubectl log's time never goes back, so one object with a wild time (a ``renewTime`` in
    2090) would carry every later event to 2090. A time more than :data:`MAX_JUMP` ahead of the
    replay's time is used only once a second object confirms it (within ``MAX_JUMP`` of it); a
    lone one is reported with its line number and not used as a time (the object is replayed)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        self._pending: tuple[int, float] | None = None

    def check(self, n: int, t: float | None, last_t: float | None) -> float | None:
        """``t``, or None while it is an unconfirmed jump."""
        if t is None or last_t is None or t <= last_t + MAX_JUMP:
            if t is not None:
                self.finish()
            return t
        pending = self._pending
        if pending is not None and abs(t - pending[1]) <= MAX_JUMP:
            self._pending = None
            return min(t, pending[1])
        self.finish()
        self._pending = (n, t)
        return None

    @property
    def waiting(self) -> bool:
        """A jump waits for a second object to confirm it."""
        return self._pending is not None

    def finish(self) -> None:
        """The pending jump was not confirmed: report it."""
        if self._pending is not None:
            n, t = self._pending
            self._pending = None
            self.problems.append(f"line {n}: object time {format_time(t)} is far ahead of the objects around it; "
                                 "not used as the replay's time")


def _events_of(n: int, doc: Any, problems: list[str]) -> Iterator[tuple[str, Any, bool]]:
    if not isinstance(doc, dict):
        problems.append(f"line {n}: not a JSON object, skipped")
        return
    if "object" in doc and "type" in doc:
        etype = doc.get("type")
        if etype == "ERROR":
            status = doc.get("object")
            msg = status.get("message") if isinstance(status, dict) else None
            problems.append(f"line {n}: the watch reported an error: {str(msg)[:200]}")
            return
        if etype not in WATCH_TYPES:
            problems.append(f"line {n}: unknown watch event type {str(etype)[:40]!r}, skipped")
            return
        obj = doc.get("object")
        if not isinstance(obj, dict):
            problems.append(f"line {n}: {etype} without an object, skipped")
            return
        if etype == "BOOKMARK":
            return
        yield etype, obj, False
        return
    kind = doc.get("kind")
    items = doc.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        item_kind = kind[: -len("List")] if kind != "List" else None
        for item in items:
            if isinstance(item, dict):
                if item_kind and "kind" not in item:
                    item = {**item, "kind": item_kind}
                yield "ADDED", item, True
        return
    if "metadata" in doc and isinstance(kind, str):
        yield "ADDED", doc, False
        return
    problems.append(f"line {n}: neither a watch event nor a Kubernetes object, skipped")


def _deleting(obj: Any) -> bool:
    """Whether the object carries a ``deletionTimestamp``."""
    if type(obj) in TYPED:
        return typed_deleting(obj)
    return bool(_d(obj.get("metadata")).get("deletionTimestamp"))


def _d(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list:
    return v if isinstance(v, list) else []


def _key(obj: Any) -> tuple:
    if type(obj) in TYPED:
        return typed_key(obj)
    meta = _d(obj.get("metadata")) if isinstance(obj, dict) else {}
    return meta.get("namespace"), meta.get("name"), meta.get("uid")


def _name(obj: Any) -> str:
    """``Kind 'name'`` of an object, for a message (plain text, bounded)."""
    if type(obj) in TYPED:
        return typed_name(obj)
    meta = _d(obj.get("metadata"))
    return f"{str(obj.get('kind'))[:40]} {str(meta.get('name'))[:80]!r}"


def format_duration(s: float) -> str:
    """A gap between two object times, in the largest whole unit (for a message)."""
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.0f}{unit}"
    return f"{s:.0f}s"


def _latest(*values: Any) -> float | None:
    best = None
    for v in values:
        t = parse_time(v) if isinstance(v, str) else None
        if t is not None and (best is None or t > best):
            best = t
    return best


def object_time(resource: str, etype: str, obj: Any) -> float | None:
    """When this object was written, as well as the object itself tells (None: it does not say)."""
    if type(obj) is KubectlLease:
        return lease_time(etype, obj)
    if type(obj) is KubectlNode:
        return node_time(etype, obj)
    meta = _d(obj.get("metadata"))
    if etype == "DELETED" and meta.get("deletionTimestamp"):
        return parse_time(meta.get("deletionTimestamp"))
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    if resource == "leases":
        return _latest(spec.get("renewTime"), spec.get("acquireTime")) or _latest(meta.get("creationTimestamp"))
    if resource == "nodes":
        times: list[Any] = []
        for c in _l(status.get("conditions")):
            c = _d(c)
            times += [c.get("lastHeartbeatTime"), c.get("lastTransitionTime")]
        times += [_d(t).get("timeAdded") for t in _l(spec.get("taints"))]
        times.append(meta.get("creationTimestamp"))
        return _latest(*times)
    if resource == "events":
        return _latest(obj.get("lastTimestamp"), obj.get("eventTime"), _d(obj.get("series")).get("lastObservedTime"),
                       obj.get("firstTimestamp"), meta.get("creationTimestamp"))
    if resource == "pods":
        times = [_d(c).get("lastTransitionTime") for c in _l(status.get("conditions"))]
        return _latest(meta.get("deletionTimestamp"), meta.get("creationTimestamp"), status.get("startTime"), *times)
    if resource == "certificatesigningrequests":
        times = []
        for c in _l(status.get("conditions")):
            c = _d(c)
            times += [c.get("lastUpdateTime"), c.get("lastTransitionTime")]
        return _latest(meta.get("creationTimestamp"), *times)
    return _latest(meta.get("creationTimestamp"))
