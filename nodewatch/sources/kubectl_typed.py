"""Typed decode of a kubectl log's Lease watch events: the document straight to the fields read.

Why: nineteen documents in twenty of a ``kubectl get -w --output-watch-events -o json`` log of a
fleet are Lease renewals, ~2 KB each, pretty-printed, with their ``managedFields``. Made dicts
(orjson), then dated (``kubectl_format.object_time``) and made records (``lease_from_dict``), they
were most of ``status --replay``'s time on such a log (issue 29: 2.98x a bare stdlib decode). One
msgspec decode into ``KubectlLease`` reads only what the clock and the record read, whitespace and
field order whatever they are, and skips the rest in C. Node events the same way (``KubectlNode``).

The same answers as the dict path, or none: ``typed_event`` gives None (the caller decodes the
document with orjson as before) for anything it is not sure of: a document that is not a watch
event of a Lease or Node (``ADDED``, ``MODIFIED``, ``DELETED``), a field read of another type than
the record's reader takes, an object without a name, and any document that is not ASCII (msgspec
skips the bytes of a field it does not read without checking them as UTF-8, orjson refuses the
whole document: the typed path would read what the dict path reports as malformed). Left: a number
beyond a double's range in a field nodewatch does not read (``1e400``), which orjson refuses and
msgspec skips; an API server never writes one (Go's encoder cannot).
"""

from __future__ import annotations

from sys import intern
from typing import Any, Callable, Literal, Optional

import msgspec
from msgspec import Struct

from ..core.objects import NODE_LEASE_NAMESPACE, NodeRecord
from ..core.timeutil import parse_time
from ..core.wire import WireError, _Lease, _LeaseMeta, _LeaseSpec, _micro_time, _Node, _node_record, _NodeMeta, _time

_S = Optional[str]
_Type = Optional[Literal["ADDED", "MODIFIED", "DELETED"]]
"""A watch event's type, ``kind`` a Lease's or Node's: as ``Literal`` they are checked in the
decode and share one string each (any other value refuses the document: the dict path reads it)."""


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

    kind: Optional[Literal["Lease"]] = None
    metadata: Optional[_KubectlLeaseMeta] = None
    spec: Optional[_KubectlLeaseSpec] = None


class _KubectlNodeMeta(_NodeMeta, gc=False):
    """``wire._NodeMeta`` and what the clock reads: the namespace and uid (an object's key in a
    watch's opening list), the deletion time (the creation time ``_NodeMeta`` has)."""

    namespace: _S = None
    uid: _S = None
    deletionTimestamp: _S = None


class _KubectlNode(_Node, gc=False):
    """``wire._Node`` with the fields ``kubectl_format.object_time`` dates a Node by (the
    conditions' and taints' times are ``_Node``'s)."""

    kind: Optional[Literal["Node"]] = None
    metadata: Optional[_KubectlNodeMeta] = None


class KubectlNode:
    """A Node of a kubectl log read typed: its record (``wire._node_record``, made as the document is
    read: it is where a label or resource map that is not all strings shows, and the document is
    gone by the time a record made later could fall back to the dict path), and what the clock reads
    of it. Small: the typed object (with its raw labels, a view of the ~10 KB document) is not kept."""

    __slots__ = ("record", "kind", "key", "deletion", "time")

    def __init__(self, obj: _KubectlNode, record: NodeRecord) -> None:
        meta = obj.metadata
        assert meta is not None  # typed_event made sure
        self.record = record
        self.kind = obj.kind
        self.key = (meta.namespace, meta.name, meta.uid)
        """``kubectl_format._key``: (namespace, name, uid)."""
        self.deletion = meta.deletionTimestamp
        self.time = _node_time(obj)
        """When the object was written (its deletion aside): ``object_time`` of an ADDED."""


class _Event(Struct, gc=False):
    type: _Type = None
    object: Optional[KubectlLease] = None


class _NodeEvent(Struct, gc=False):
    type: _Type = None
    object: Optional[_KubectlNode] = None


_decode = msgspec.json.Decoder(_Event).decode
_decode_node = msgspec.json.Decoder(_NodeEvent).decode
_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


def typed_event(data: bytes) -> tuple[str, KubectlLease | KubectlNode, str] | None:
    """(event type, object, resource) of a document that is a clean watch event of a named Lease
    (``KubectlLease``, ``"leases"``) or Node (``KubectlNode``, ``"nodes"``); None for any other (the
    caller reads it the ordinary way, which reports what is wrong with it). Nodes too: a Node's
    document is ~10 KB, most of it ``images`` and ``managedFields`` that nodewatch never reads, and
    as a dict (orjson) it was parsed whole and held whole until the log was sorted (350 MB for the
    15,000 Node events of a 5,000-node log). A Lease's document names a Node (its owner), so the
    Lease is tried first; the object's ``kind`` decides (a ``Literal``: the decode of any other
    kind stops there)."""
    if not data.isascii():  # what only orjson checks (see the module's docstring)
        return None
    try:
        lease = _decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        pass
    else:  # _clean's checks, inline: nineteen documents in twenty are renewals
        obj, etype = lease.object, lease.type
        if obj is not None and etype is not None and obj.kind is not None:  # (Literal: the right ones)
            meta = obj.metadata
            if meta is not None and meta.name:
                return etype, obj, "leases"
    if b'"Node"' not in data:
        return None
    event = _clean(_decode_node, data, "Node", "nodes")
    if event is None:
        return None
    try:
        record = _node_record(event[1])
    except WireError:  # a map that is not all strings: the dict path reads it
        return None
    if record is None:  # (named: _clean made sure)
        return None
    return event[0], KubectlNode(event[1], record), "nodes"


def _clean(decode: Callable[[bytes], Any], data: bytes, kind: str, resource: str) -> Any:
    try:
        event = decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    obj = event.object
    etype = event.type
    if obj is None or obj.kind != kind or etype not in _TYPES:
        return None
    meta = obj.metadata
    if meta is None or not meta.name:
        return None
    return etype, obj, resource


def lease_time(etype: str, obj: KubectlLease) -> float | None:
    """``kubectl_format.object_time`` of a Lease, read from its typed fields (the same float:
    ``_micro_time`` is ``parse_time`` of a MicroTime)."""
    meta = obj.metadata
    if meta is None:  # not from typed_event: every field absent, as the dict path reads {}
        meta = _KubectlLeaseMeta()
    if etype == "DELETED" and meta.deletionTimestamp:
        return parse_time(meta.deletionTimestamp)
    spec = obj.spec
    if spec is not None:
        renew = renew_time(spec)
        acquire = _acquired(spec.acquireTime) if spec.acquireTime is not None else None
        best = renew if acquire is None or (renew is not None and renew >= acquire) else acquire
        if best:
            return best
    return parse_time(meta.creationTimestamp) if meta.creationTimestamp is not None else None


def renew_time(spec: _KubectlLeaseSpec) -> float | None:
    """``wire._micro_time`` of the spec's renewTime (None without one), as the record will have it.
    The clock dates a renewal by it, then ``superseded.deferred_entry`` reads it again for the
    same object: the last value is remembered by identity (the string is held, so its identity is
    not reused), and each renewTime is parsed once (a fifth of a renewal's reading, twice)."""
    global _last_renew
    value = spec.renewTime
    if value is None:
        return None
    last = _last_renew  # one tuple, swapped whole: a reader in another thread sees a pair that belongs
    if value is last[0]:
        return last[1]
    t = _micro_time(value)
    _last_renew = (value, t)
    return t


_last_renew: tuple[Any, float | None] = (None, None)


def slim(obj: KubectlLease) -> None:
    """Drop from a Lease the clock has dated what only the clock reads (its uid, creation and
    acquire times), and share the strings renewals repeat (the namespace, a holder that is the
    Lease's name, the kubelet's manager and operation): the 300,000 renewals of a 5,000-node log
    wait for its sort, and these were a third of each one's memory. Its record
    (``wire._lease_record``) reads the same values from it. The name is interned (as the record
    has it), a manager's write time (whole seconds: the renewals of a second share it) shared."""
    meta = obj.metadata
    if meta is None:
        return
    meta.uid = meta.creationTimestamp = None
    name = meta.name
    if name is not None and len(name) <= 256:
        name = meta.name = intern(name)
    if meta.namespace == NODE_LEASE_NAMESPACE:
        meta.namespace = NODE_LEASE_NAMESPACE
    spec = obj.spec
    if spec is not None:
        spec.acquireTime = None
        if spec.holderIdentity == name:
            spec.holderIdentity = name
    for m in meta.managedFields or ():
        if m.manager == _KUBELET:
            m.manager = _KUBELET
        if m.operation == _UPDATE:
            m.operation = _UPDATE
        when = m.time
        if when is not None:
            shared = _write_times.get(when)
            if shared is None:
                if len(_write_times) >= _WRITE_TIMES_MAX:
                    _write_times.clear()
                shared = _write_times[when] = when
            m.time = shared


_KUBELET, _UPDATE = "kubelet", "Update"
_write_times: dict[str, str] = {}
_WRITE_TIMES_MAX = 4096


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


def node_time(etype: str, obj: KubectlNode) -> float | None:
    """``kubectl_format.object_time`` of a typed Node."""
    if etype == "DELETED" and obj.deletion:
        return parse_time(obj.deletion)
    return obj.time


def _node_time(obj: _KubectlNode) -> float | None:
    """The newest of a Node's conditions' heartbeat and transition times, its taints' ``timeAdded``
    and its creation, as ``kubectl_format.object_time`` reads them off the dict (``wire._time`` is
    ``parse_time`` with a memo)."""
    meta = obj.metadata
    best = None
    status = obj.status
    if status is not None and status.conditions:
        for c in status.conditions:
            for v in (c.lastHeartbeatTime, c.lastTransitionTime):
                if v is not None:
                    t = _time(v)
                    if t is not None and (best is None or t > best):
                        best = t
    spec = obj.spec
    if spec is not None and spec.taints:
        for taint in spec.taints:
            if taint.timeAdded is not None:
                t = _time(taint.timeAdded)
                if t is not None and (best is None or t > best):
                    best = t
    if meta is not None and meta.creationTimestamp is not None:
        t = _time(meta.creationTimestamp)
        if t is not None and (best is None or t > best):
            best = t
    return best


TYPED = (KubectlLease, KubectlNode)
"""The types ``typed_event`` gives objects of."""


def typed_key(obj: KubectlLease | KubectlNode) -> tuple:
    """``kubectl_format._key`` of a typed object: (namespace, name, uid)."""
    if isinstance(obj, KubectlNode):
        return obj.key
    meta = obj.metadata
    return (None, None, None) if meta is None else (meta.namespace, meta.name, meta.uid)


def typed_deleting(obj: KubectlLease | KubectlNode) -> bool:
    """Whether the object carries a ``deletionTimestamp`` (a non-empty one)."""
    if isinstance(obj, KubectlNode):
        return bool(obj.deletion)
    return obj.metadata is not None and bool(obj.metadata.deletionTimestamp)


def typed_name(obj: KubectlLease | KubectlNode) -> str:
    """``kubectl_format._name`` of a typed object."""
    name = obj.key[1] if isinstance(obj, KubectlNode) else obj.metadata.name if obj.metadata else None
    return f"{str(obj.kind)[:40]} {str(name)[:80]!r}"
