"""Typed decode of a kubectl log's Lease watch events: the document straight to the fields read.

Why: nineteen documents in twenty of a ``kubectl get -w --output-watch-events -o json`` log of a
fleet are Lease renewals, ~2 KB each, pretty-printed, with their ``managedFields``. Made dicts
(orjson), then dated (``kubectl_format.object_time``) and made records (``lease_from_dict``), they
were most of ``status --replay``'s time on such a log (issue 29: 2.98x a bare stdlib decode). One
msgspec decode into ``KubectlLease`` reads only what the clock and the record read, whitespace and
field order whatever they are, and skips the rest in C.

The same answers as the dict path, or none: ``lease_event`` gives None (the caller decodes the
document with orjson as before) for anything it is not sure of: a document that is not a watch
event of a Lease (``ADDED``, ``MODIFIED``, ``DELETED``), a field read of another type than a string
(or a number for the duration), a Lease without a name, and any document that is not ASCII (msgspec
skips the bytes of a field it does not read without checking them as UTF-8, orjson refuses the
whole document: the typed path would read what the dict path reports as malformed). Left: a number
beyond a double's range in a field nodewatch does not read (``1e400``), which orjson refuses and
msgspec skips; an API server never writes one (Go's encoder cannot).
"""

from __future__ import annotations

from typing import Optional

import msgspec
from msgspec import Struct

from ..core.timeutil import parse_time
from ..core.wire import _Lease, _LeaseMeta, _LeaseSpec, _micro_time

_S = Optional[str]


class _KubectlLeaseMeta(_LeaseMeta, gc=False):
    """``wire._LeaseMeta`` and what the clock reads: the uid (an object's key in a watch's opening
    list), the creation and deletion times."""

    uid: _S = None
    creationTimestamp: _S = None
    deletionTimestamp: _S = None


class _KubectlLeaseSpec(_LeaseSpec, gc=False):
    acquireTime: _S = None


class KubectlLease(_Lease, gc=False):
    """A Lease of a kubectl log: ``wire._Lease`` (``wire._lease_record`` makes its record, as it
    does a watched Lease's) with the fields ``kubectl_format.object_time`` dates it by."""

    kind: _S = None
    metadata: Optional[_KubectlLeaseMeta] = None
    spec: Optional[_KubectlLeaseSpec] = None


class _Event(Struct, gc=False):
    type: _S = None
    object: Optional[KubectlLease] = None


_decode = msgspec.json.Decoder(_Event).decode
_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


def lease_event(data: bytes) -> tuple[str, KubectlLease] | None:
    """(event type, Lease) of a document that is a clean watch event of a named Lease; None for
    any other (the caller reads it the ordinary way, which reports what is wrong with it)."""
    if b'"Lease"' not in data or not data.isascii():  # a sieve, then what only orjson checks
        return None
    try:
        event = _decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    obj = event.object
    etype = event.type
    if obj is None or obj.kind != "Lease" or etype not in _TYPES:
        return None
    meta = obj.metadata
    if meta is None or not meta.name:
        return None
    return etype, obj


def lease_time(etype: str, obj: KubectlLease) -> float | None:
    """``kubectl_format.object_time`` of a Lease, read from its typed fields (the same float:
    ``_micro_time`` is ``parse_time`` of a MicroTime)."""
    meta = obj.metadata
    if meta is None:  # not from lease_event: every field absent, as the dict path reads {}
        meta = _KubectlLeaseMeta()
    if etype == "DELETED" and meta.deletionTimestamp:
        return parse_time(meta.deletionTimestamp)
    spec = obj.spec
    if spec is not None:
        renew = _micro_time(spec.renewTime) if spec.renewTime is not None else None
        acquire = _acquired(spec.acquireTime) if spec.acquireTime is not None else None
        best = renew if acquire is None or (renew is not None and renew >= acquire) else acquire
        if best:
            return best
    return parse_time(meta.creationTimestamp) if meta.creationTimestamp is not None else None


_acquire_times: dict[str, float | None] = {}
"""acquireTime -> ``parse_time`` of it: a lease's stays the same over its renewals."""
_ACQUIRE_MAX = 200_000


def _acquired(value: str) -> float | None:
    t = _acquire_times.get(value, _NOT_SEEN)
    if t is _NOT_SEEN:
        if len(_acquire_times) >= _ACQUIRE_MAX:
            _acquire_times.clear()
        t = _acquire_times[value] = parse_time(value)
    return t  # type: ignore[return-value]


_NOT_SEEN = object()


def lease_key(obj: KubectlLease) -> tuple:
    """``kubectl_format._key`` of a typed Lease: (namespace, name, uid)."""
    meta = obj.metadata
    return (None, None, None) if meta is None else (meta.namespace, meta.name, meta.uid)


def lease_deleting(obj: KubectlLease) -> bool:
    """Whether the Lease carries a ``deletionTimestamp`` (a non-empty one)."""
    return obj.metadata is not None and bool(obj.metadata.deletionTimestamp)


def lease_name(obj: KubectlLease) -> str:
    """``kubectl_format._name`` of a typed Lease."""
    return f"{str(obj.kind)[:40]} {str(obj.metadata.name if obj.metadata else None)[:80]!r}"
