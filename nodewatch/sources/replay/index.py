"""The index of a recording: time, byte offset and length of every event line, read once.

Gzipped files, stdin and kubectl logs are first copied (normalized to v1 lines) into a temporary
spool file so that every format gets the same random access (``os.pread`` of one line).
"""

from __future__ import annotations

import gzip
import math
import os
import tempfile
from array import array
from typing import IO, Any, Iterator

import orjson

from ...core.fleet import FleetState
from ...core.views import WatchHealth
from ...core.settings import Settings
from ..kubectl_format import iter_entries as kubectl_entries
from ..kubectl_format import looks_like_kubectl
from ..recording import (
    DuplicateFilter,
    Entry,
    RecordingError,
    close_input,
    iter_lines,
    open_binary,
    parse_header,
    parse_line,
)

OUT_OF_ORDER_REPORT = 1.0
"""Lines that step back in time by more than this many seconds are reported (less is thread jitter)."""


class EventIndex:
    """Where each event of a recording is, in time order; ``problems`` says what was skipped and why."""

    def __init__(self, path: str) -> None:
        self.problems: list[str] = []
        self.header: dict = {}
        self.format = "v1"
        self.received_known = True
        """False for kubectl logs: they carry no receive times (an event's time is its object's)."""
        self._times = array("d")
        self._offsets = array("q")
        self._lengths = array("l")
        self._spool: IO[bytes] | None = None
        self._own_file: IO[bytes] | None = None
        self._fd = -1
        self._load(path)
        self.start = self._times[0] if len(self._times) else 0.0
        self.end = self._times[-1] if len(self._times) else self.start

    @property
    def times(self) -> array:
        """Time of each event, ascending (read-only by convention: ``bisect`` it)."""
        return self._times

    def __len__(self) -> int:
        return len(self._times)

    def read(self, i: int) -> Entry | None:
        """Event ``i``, parsed again from the file."""
        line = os.pread(self._fd, self._lengths[i], self._offsets[i])
        return parse_line(0, line, [])

    def apply_range(self, state: FleetState, a: int, b: int) -> None:
        """Apply events [a, b) to ``state``."""
        known = self.received_known
        with state.batch():
            for i in range(a, b):
                e = self.read(i)
                if e is not None:
                    apply_entry(state, e, known)

    def close(self) -> None:
        for f in (self._spool, self._own_file):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self._spool = self._own_file = None

    def settings(self, given: Settings | None) -> Settings:
        """``given`` (completed with the server version of the header), else the header's settings."""
        return header_settings(self.header, given, self.problems)

    def source_name(self) -> str | None:
        """The recorded source's name, from the header."""
        src = self.header.get("source") if isinstance(self.header.get("source"), dict) else {}
        name = src.get("name")
        return str(name) if name else None

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
                self.received_known = False
                self._spool_entries(kubectl_entries(_chain(first, lines), self.problems))
            else:
                self.header = parse_header(first[1])
                if plain:
                    self._index_plain(stream, lines)
                else:
                    self._spool_v1(lines)
        finally:
            close_input(stream)
        if not len(self._times):
            self.problems.append("no usable events in the recording")
        self._sort_if_needed()
        if self._spool is not None:
            self._spool.flush()
            self._fd = self._spool.fileno()
        else:
            self._own_file = open(path, "rb")  # noqa: SIM115 - closed in close()
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
        self._spool = tempfile.TemporaryFile(prefix="nodewatch-replay-")  # noqa: SIM115 - closed in close()
        return self._spool

    def _check(self, n: int, line: bytes, dup: DuplicateFilter) -> Entry | None:
        e = parse_line(n, line, self.problems)
        if e is None:
            return None
        if e.etype == "SETTINGS":
            learn_version(self.header, e)
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


def header_settings(header: dict, given: Settings | None, problems: list[str]) -> Settings:
    """``given`` (completed with the server version of the header), else the header's settings."""
    hs = header.get("settings") if isinstance(header.get("settings"), dict) else {}
    version = hs.get("server_version") if isinstance(hs.get("server_version"), str) else None
    if given is not None:
        return given if given.server_version else given.with_server_version(version)
    s = Settings(server_version=version)
    overridden = hs.get("overridden")
    if isinstance(overridden, list):
        chosen = {}
        for name in overridden:
            v = hs.get(name)
            if isinstance(name, str) and isinstance(v, (int, float)) and not isinstance(v, bool):
                chosen[name] = v
        try:
            s = s.override(**chosen)
        except (ValueError, TypeError):
            problems.append("header: unusable settings overrides ignored")
    return s


def learn_version(header: dict, e: Entry) -> bool:
    """A SETTINGS line carrying the server version the header did not know: into the header.
    True when it was learned."""
    hs = header.get("settings")
    if isinstance(hs, dict) and not hs.get("server_version") and isinstance(e.health, dict):
        version = e.health.get("server_version")
        if isinstance(version, str) and version:
            hs["server_version"] = version  # learned after the header was written
            return True
    return False


def apply_entry(state: FleetState, e: Entry, received_known: bool) -> None:
    """One recorded line into ``state``: an event, a watch-health change or a certificate."""
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


def _chain(first: tuple[int, bytes], rest: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    yield first
    yield from rest
