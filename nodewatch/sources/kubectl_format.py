"""Reader of what ``kubectl get RESOURCE --watch --output-watch-events -o json`` writes.

That is a stream of pretty-printed ``{"type": ..., "object": {...}}`` documents (kubectl starts each
with ``{`` and ends it with ``}`` on lines of their own; ``jq -c`` makes one document per line).
Several such files may be concatenated, resources mixed: the resource comes from the object's
``kind``. Plain objects and ``List`` documents (``kubectl get -o json`` without ``--watch``) are
accepted too, as ADDED items of a listing.

Such a log has no receive times, so a replay takes time from the objects themselves (lease
``renewTime``, condition heartbeats and transitions, taint ``timeAdded``, event times, creation and
deletion timestamps), never lets time run backwards (event order is kept), and applies the
events with ``received_at=None`` so lease ages are measured from ``renewTime``.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import orjson

from ..core.timeutil import format_time, parse_time
from .recording import Entry

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


def iter_documents(lines: Iterable[tuple[int, bytes]], problems: list[str]) -> Iterator[tuple[int, Any]]:
    """(first line number, parsed JSON) of each document; broken ones are reported and skipped."""
    buf: list[bytes] = []
    size = 0
    start = 0
    for n, raw in lines:
        line = raw.rstrip(b"\r\n")
        if buf and line.startswith(b"{"):  # a new document while one is open: the previous one was cut off
            problems.append(f"line {start}: truncated JSON document (lines {start}-{n - 1}), skipped")
            buf = []
        if not buf:
            s = line.strip()
            if not s:
                continue
            if s.startswith(b"{") and s.endswith(b"}") and s != b"{":  # one document on one line
                doc = _loads(s, n, problems)
                if doc is not _BAD:
                    yield n, doc
            elif line.startswith(b"{"):
                buf, size, start = [line], len(line), n
            else:
                problems.append(f"line {n}: text outside a JSON document, skipped")
            continue
        buf.append(line)
        size += len(line)
        if size > MAX_DOC_BYTES:
            problems.append(f"line {start}: document larger than {MAX_DOC_BYTES} bytes, skipped")
            buf = []
            continue
        if line.startswith(b"}"):
            doc = _loads(b"\n".join(buf), start, problems)
            buf = []
            if doc is not _BAD:
                yield start, doc
    if buf:
        problems.append(f"line {start}: truncated JSON document at the end of the input, skipped")


_BAD = object()


def _loads(data: bytes, n: int, problems: list[str]) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        problems.append(f"line {n}: malformed JSON document, skipped")
        return _BAD


def iter_entries(lines: Iterable[tuple[int, bytes]], problems: list[str]) -> Iterator[Entry]:
    """Entries in input order with times from the objects, never going backwards."""
    last_t: float | None = None
    jumps = JumpGuard(problems)
    unknown_kinds: set[str] = set()
    pending: list[Entry] = []  # entries before the first known time get that time
    for n, doc in iter_documents(lines, problems):
        for etype, obj, listing in _events_of(n, doc, problems):
            kind = obj.get("kind") if isinstance(obj, dict) else None
            resource = KIND_RESOURCES.get(kind) if isinstance(kind, str) else None
            if resource is None:
                k = str(kind)[:60]
                if k not in unknown_kinds:
                    unknown_kinds.add(k)
                    problems.append(f"line {n}: objects of kind {k!r} are not used, skipped (reported once)")
                continue
            t = jumps.check(n, object_time(resource, etype, obj), last_t)
            if t is not None and (last_t is None or t > last_t):
                last_t = t
            entry = Entry(n, last_t, resource, etype, obj, listing)
            if last_t is None:
                pending.append(entry)
                continue
            if pending:
                for p in pending:
                    p.t = last_t
                    yield p
                pending = []
            yield entry
    jumps.finish()
    if pending:
        problems.append("no object carries a time: the events are replayed at time 0")
        for p in pending:
            p.t = 0.0
            yield p


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


def _d(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list:
    return v if isinstance(v, list) else []


def _latest(*values: Any) -> float | None:
    best = None
    for v in values:
        t = parse_time(v) if isinstance(v, str) else None
        if t is not None and (best is None or t > best):
            best = t
    return best


def object_time(resource: str, etype: str, obj: dict) -> float | None:
    """When this object was written, as well as the object itself tells (None: it does not say)."""
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
