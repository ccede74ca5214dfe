"""A Node's status reports in a one-shot answer's read, left unbuilt where a later report of the
same Node supersedes them (``columnar.Supersession``).

Why: a kubelet reports its Node's status every five minutes, a spliced row each (``columnar.splice``:
the new heartbeat times alone), and the row's line is the Node's whole JSON. At 65,000 nodes a
15-minute segment holds ~195,000 of them. A one-shot answer at T applies only each Node's last update
before T (``replay/superseded.py`` leaves the others out once they are lines: built, copied, split,
decoded and ordered for nothing). Here they are never built: a report waits, as its split text, until
the next report of its Node decides it.

A report ``A`` of Node ``K`` is left out exactly when ``Superseded`` would leave it out and a later
report ``B`` of ``K`` shows it:

- both are *clean*: a plain ``MODIFIED`` Node event (resource, type, a null object, perhaps a
  cluster: nothing ``lines.plain_fields`` refuses), a time in range and not before the recording's
  floor, values that are plain strings (no quote, backslash, control character or lone surrogate),
  spliced into a text that the answer's typed decoder reads with a name and without an eviction
  taint (``clean``: then ``superseded.deferred`` makes a ``Deferred`` of it that replaces the node's
  record whole). A spliced text differs from the one it was spliced into only in hole values, which
  are strings where the decoder reads any string or skips the field: what ``clean`` says of a text
  holds for every plain report spliced into it, so it is asked once a Node, not once a report;
- ``B`` is applied: at or before the target, nothing read later than the read's end, not hidden;
- ``B`` is strictly later than ``A``: whatever the reorder window does, ``A`` is applied first;
- nothing else of ``K`` came between them (a whole line of ``K``, or a report that is not clean,
  keeps ``A``, as its text may no longer be ``clean``'s);
- the recording is of one cluster (a line of a cluster its header does not list is reported where
  it is applied: it must be applied).

What differs from reading every line is what ``Supersession`` says of renewals: a report that
duplicates an earlier line is not reported when it is left out, and the line numbers of problems
after it. A report waits for its decision at most ``PENDING_SECONDS`` behind the newest line read (a
kubelet's next report comes five minutes after its last), while fewer than ``MAX_WAITING`` lines
wait behind it (a one-shot read of many blocks row by row holds every renewal behind it: bounded),
and until the read passes its end (no later report can leave it out then: a read early in a
segment does not read on for the reports it keeps).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import orjson

from ..core.timeutil import MAX_TIME, MIN_TIME

PENDING_SECONDS = 330.0
"""A report not superseded within this long behind the newest line is kept (a kubelet's
``nodeStatusReportFrequency`` is 5 minutes; a Node silent longer has stopped reporting)."""
MAX_WAITING = 400_000
"""Lines waiting behind a report before it is kept anyway (~60 s of renewals at 65,000 nodes read
row by row, what a renewal's own ``PENDING_SECONDS`` holds back already)."""
_PLAIN_VALUE = re.compile(r'[^\x00-\x1f"\\\ud800-\udfff]*')
"""A value whose line a JSON decoder reads as the same string: stricter than ``columnar._fill``'s own
check (no quote, no backslash), which a report's values then skip."""


class Report:
    """A clean status report read, its line not built: the Node's text split at its holes
    (``columnar._HOLES``), with this report's values in."""

    __slots__ = ("t", "key", "payload", "parts", "final", "drop")

    def __init__(self, t: float, key: tuple, payload: dict, parts: list) -> None:
        self.t = t
        self.key = key
        self.payload = payload
        self.parts = parts
        self.final = False
        """Whether it is kept or left out is decided."""
        self.drop = False
        """Left out (a later report of its Node supersedes it)."""

    def line(self) -> bytes:
        """The v1 line, as ``columnar._whole_row`` builds a spliced row's."""
        payload = self.payload
        payload["object"] = orjson.Fragment(b"".join(self.parts))
        line = {"t": self.t}
        line.update(payload)
        return orjson.dumps(line) + b"\n"


class StatusReports:
    """The reports waiting for the next one of their Node, for one ``Supersession`` (one file at a
    time: ``end`` at its end). ``clean(text)``: whether a Node's JSON is one whose plain
    ``MODIFIED`` line the answer applies as a clean update that replaces the node's record."""

    def __init__(self, clean: Callable[[bytes], bool]) -> None:
        self._clean = clean
        self.pending: dict[tuple, Report] = {}
        self._clean_of: dict[tuple, bool] = {}
        """Per Node: ``clean`` of its text as the codec holds it (asked at its first report after a
        whole line of it)."""

    def report(self, blob: Any, codec: Any, t: float, s: Any) -> Report | None:
        """A spliced row (decoded: ``[payload, values, namespace, name]``) at ``t``, as a ``Report``
        learned by ``codec`` when it is clean; None when it is not (the caller reads it as a whole
        row, which raises what a row that does not fit raises). ``s``: the ``Supersession`` (its
        target, read end, floor, newest time and hidden lines; its count of lines left out)."""
        if s.hidden or not (MIN_TIME <= t <= MAX_TIME) or t < s._floor or type(blob) is not list or len(blob) != 4:
            return None
        payload, values, ns, name = blob
        if (type(payload) is not dict or payload.get("resource") != "nodes" or payload.get("type") != "MODIFIED"
                or payload.get("object", 0) is not None or type(name) is not str
                or (ns is not None and type(ns) is not str) or type(values) is not list):
            return None
        cluster = payload.get("cluster")
        if len(payload) != (3 if cluster is None else 4) or (cluster is not None and (type(cluster) is not str
                                                                                     or not cluster)):
            return None  # (a null cluster: 4 keys, refused)
        match = _PLAIN_VALUE.fullmatch
        for v in values:
            if v is not None and (type(v) is not str or match(v) is None):
                return None
        key = (cluster, "nodes", ns, name)
        s.object_in_order(key, t)
        ok = self._clean_of.get(key)
        if ok is None:
            text = codec.json_of(key)
            if text is None:
                return None
            ok = self._clean_of[key] = self._clean(text)
        if not ok:
            return None
        parts = codec.splice_parts(key, values)  # (ValueError: values that do not fit, as a whole row)
        if t > s._hi:
            s._hi = t
        before = self.pending.get(key)
        if before is not None:
            if t > before.t and t <= s.target and s._hi <= s.read_until:
                before.drop = True
                s.dropped += 1
            before.final = True
        r = self.pending[key] = Report(t, key, payload, parts)
        return r

    def whole_line(self, key: tuple | None) -> None:
        """A whole line of a Node (or a report read as one): what waits of it is kept, and its text
        asked again at its next report."""
        if key is not None:
            r = self.pending.pop(key, None)
            if r is not None:
                r.final = True
            self._clean_of.pop(key, None)

    def decided(self, r: Report) -> None:
        """``r`` waited long enough: kept."""
        r.final = True
        if self.pending.get(r.key) is r:
            del self.pending[r.key]

    def end(self) -> None:
        """A file's end: whatever waits is kept (the next file has its own codec)."""
        for r in self.pending.values():
            r.final = True
        self.pending.clear()
        self._clean_of.clear()
